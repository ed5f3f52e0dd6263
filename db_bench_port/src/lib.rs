//! A port of RocksDB's `db_bench` that runs unmodified db_bench command
//! lines against any engine behind `vmemkv-compat` (vmemkv, RocksDB,
//! RocksDB-BlobDB, LMDB) and prints output in db_bench's formats.
//!
//! * [`flags`]: gflags-compatible parsing over every db_bench flag.
//! * [`keys`], [`random`]: keys, values and random streams byte-identical
//!   to db_bench's.
//! * [`workloads`]: the benchmark bodies; [`mod@bench`]: the driver.
//! * [`histogram`], [`stats`]: RocksDB's histogram and result line.
#![deny(missing_docs)]
#![deny(clippy::unwrap_used)]

pub mod bench;
pub mod config;
pub mod dbdir;
pub mod dbstats;
pub mod engines;
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

use flags::Parsed;

/// Runs db_bench with `args` (without the program name) and returns the
/// process exit status.
pub fn main_with_args(args: &[String]) -> i32 {
    let flags = match flags::parse(args) {
        Ok(Parsed::Run(f)) => f,
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            return 1;
        }
        Ok(Parsed::Version(text)) => {
            println!("{text}");
            return 0;
        }
        Err(e) => {
            eprintln!("{}", e.message);
            return 1;
        }
    };
    let env_engine = std::env::var("DB_BENCH_ENGINE").ok();
    let cfg = match config::Config::from_flags(flags, env_engine.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let mut b = bench::Benchmark::new(cfg);
    match b.run() {
        Ok(()) => 0,
        Err(bench::Fatal(msg)) => {
            eprintln!("{msg}");
            1
        }
    }
}
