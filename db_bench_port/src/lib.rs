//! A port of RocksDB's `db_bench` that runs unmodified db_bench command
//! lines against any engine behind `vmemkv-compat` (vmemkv, RocksDB,
//! RocksDB-BlobDB, LMDB) and prints output in db_bench's formats.
//!
//! * [`flags`]: gflags-compatible parsing over every db_bench flag.
//! * [`keys`], [`random`]: keys, values and random streams byte-identical
//!   to db_bench's.
//! * [`workloads`]: the benchmark bodies; [`mod@bench`]: the driver.
//! * [`histogram`], [`stats`]: RocksDB's histogram and result line.
//! * [`error`]: what ends a run, typed; its text is what db_bench prints.
//! * [`families`]: `--num_column_families`, db_bench's `DBWithColumnFamilies`.
#![deny(missing_docs)]
#![deny(clippy::unwrap_used)]

pub mod bench;
pub mod config;
pub mod dbdir;
pub mod dbstats;
pub mod engines;
pub mod error;
pub mod families;
pub mod flag_table;
pub mod flags;
pub mod histogram;
pub mod keys;
pub mod monitor;
pub mod output;
pub mod random;
pub mod ratelimit;
pub mod stats;
pub mod workloads;
pub mod zipf;

pub use error::BenchError;
use flags::Parsed;

/// Runs db_bench with `args` (without the program name) and returns the
/// process exit status; a failure is printed to stderr and exits 1.
pub fn main_with_args(args: &[String]) -> i32 {
    match run(args) {
        Ok(status) => status,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// Runs db_bench with `args` (without the program name). `Ok` carries the
/// exit status of a run that did not fail: 0, or 1 after `--help`, as
/// gflags does.
pub fn run(args: &[String]) -> Result<i32, BenchError> {
    let flags = match flags::parse(args)? {
        Parsed::Run(f) => f,
        Parsed::Help(text) => {
            print!("{text}");
            return Ok(1);
        }
        Parsed::Version(text) => {
            println!("{text}");
            return Ok(0);
        }
    };
    let env_engine = std::env::var("DB_BENCH_ENGINE").ok();
    let cfg = config::Config::from_flags(flags, env_engine.as_deref())?;
    bench::Benchmark::new(cfg).run()?;
    Ok(0)
}
