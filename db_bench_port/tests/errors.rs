//! Failures keep their category on the way to `main`: a refused flag names
//! the flag, an engine's error stays the engine's (`Busy` stays `Busy`),
//! while the printed text is the one db_bench has always printed.

use db_bench_port::config::Config;
use db_bench_port::dbdir::DestroyError;
use db_bench_port::flags::Flags;
use db_bench_port::keys::KeyGen;
use db_bench_port::random::Random64;
use db_bench_port::stats::{Stats, StatsConfig};
use db_bench_port::workloads::{self, Params, Shared, ThreadState};
use db_bench_port::BenchError;
use vmemkv_compat::{
    Db, DbIterator, EngineKind, EngineOptions, Error, Limits, ReadOptions, WriteBatch, WriteOptions,
};

fn config(args: &[&str]) -> Result<Config, BenchError> {
    Config::from_flags(Flags::from_args(args).expect("flags"), None)
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_refused_value_names_its_flag_and_keeps_its_message() {
    for (argv, flag, message) in [
        (
            &["--threads=0"][..],
            "threads",
            "ERROR: --threads must be at least 1 (got 0)",
        ),
        (
            &["--value_size=-1"][..],
            "value_size",
            "ERROR: --value_size=-1 is out of range: sizes are 0 to 4294967295 bytes",
        ),
        (
            &["--inject_checkpoint_at=soon"][..],
            "inject_checkpoint_at",
            "ERROR: illegal value 'soon' specified for string flag 'inject_checkpoint_at' (expected comma-separated seconds)",
        ),
        (
            &["--engine=nosuch"][..],
            "engine",
            "Invalid argument: unknown engine 'nosuch'; expected one of vmemkv, rocksdb, blobdb, lmdb, fjall, fjall-blob, sparkey, null",
        ),
    ] {
        let e = config(argv).expect_err("refused");
        assert!(
            matches!(&e, BenchError::Flag { flag: f, .. } if f == flag),
            "{argv:?}: {e:?}"
        );
        assert_eq!(e.to_string(), message, "{argv:?}");
    }
}

#[test]
fn a_busy_database_reaches_main_as_the_engines_busy_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let held =
        vmemkv_compat::open(EngineKind::Vmemkv, &db, &EngineOptions::default()).expect("open");
    let dbflag = format!("--db={}", db.display());
    // Opening it again.
    let e = db_bench_port::run(&args(&[
        &dbflag,
        "--benchmarks=readrandom",
        "--use_existing_db=1",
        "--num=10",
    ]))
    .expect_err("busy");
    assert!(
        matches!(&e, BenchError::Engine { context, source: Error::Busy(_) } if context == "open error"),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with("open error: Resource busy: "),
        "{e}"
    );
    // Destroying it for a fresh run.
    let e = db_bench_port::run(&args(&[&dbflag, "--benchmarks=fillseq", "--num=10"]))
        .expect_err("busy");
    assert!(
        matches!(
            &e,
            BenchError::Destroy(DestroyError::Engine {
                source: Error::Busy(_),
                ..
            })
        ),
        "{e:?}"
    );
    assert!(matches!(e.engine_error(), Some(Error::Busy(_))), "{e:?}");
    drop(held);
}

#[test]
fn an_engine_error_inside_a_benchmark_names_the_benchmark_and_keeps_its_category() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dbflag = format!("--db={}", dir.path().join("db").display());
    // harness_test has no checkpoint().
    let e = db_bench_port::run(&args(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,readrandom",
        "--num=1000",
        "--duration=1",
        "--inject_checkpoint_at=0.2",
        "--seed=1",
        &dbflag,
    ]))
    .expect_err("checkpoint fails");
    assert!(
        matches!(&e, BenchError::Benchmark { name, .. } if name == "readrandom"),
        "{e:?}"
    );
    assert!(
        matches!(e.engine_error(), Some(Error::NotSupported(_))),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("Fatal error during \"readrandom\": checkpoint failed: Not supported: "),
        "{e}"
    );
}

/// An engine that refuses every write as busy.
struct BusyDb;

impl Db for BusyDb {
    fn name(&self) -> &'static str {
        "busy"
    }
    fn limits(&self) -> Limits {
        Limits {
            max_key_size: None,
            max_value_size: None,
        }
    }
    fn get_into(&self, _: &ReadOptions, _: &[u8], _: &mut Vec<u8>) -> vmemkv_compat::Result<bool> {
        Ok(false)
    }
    fn put(&self, _: &WriteOptions, _: &[u8], _: &[u8]) -> vmemkv_compat::Result<()> {
        Err(Error::Busy("held elsewhere".into()))
    }
    fn delete(&self, _: &WriteOptions, _: &[u8]) -> vmemkv_compat::Result<()> {
        Err(Error::Busy("held elsewhere".into()))
    }
    fn write(&self, _: &WriteOptions, _: &WriteBatch) -> vmemkv_compat::Result<()> {
        Err(Error::Busy("held elsewhere".into()))
    }
    fn iter<'a>(&'a self, _: &ReadOptions) -> vmemkv_compat::Result<Box<dyn DbIterator + 'a>> {
        Err(Error::Busy("held elsewhere".into()))
    }
    fn property(&self, _: &str) -> Option<String> {
        None
    }
}

#[test]
fn a_workloads_engine_error_is_the_engines_with_what_the_workload_did() {
    let cfg = config(&["--num=10"]).expect("config");
    let p = Params {
        cfg: &cfg,
        num: cfg.num,
        flags_num: cfg.num,
        reads: 10,
        writes: 10,
        deletes: 10,
        readwrites: 10,
        keygen: KeyGen::new(cfg.key_size),
        entries_per_batch: 1,
        value_dist: cfg.value_dist,
        wopts: WriteOptions::default(),
        ropts: ReadOptions::default(),
        seed_base: 1,
        families: None,
    };
    let shared = Shared::new(1);
    let scfg = StatsConfig {
        histogram: false,
        progress_reports: false,
        stats_interval: 0,
        stats_interval_seconds: 0,
        slow_usecs: u64::MAX,
    };
    let mut t = ThreadState {
        tid: 0,
        rand: Random64::new(1),
        stats: Stats::new(scfg, 0),
        shared: &shared,
    };
    for (method, context) in [
        (workloads::write_seq as workloads::Method, "put error"),
        (workloads::delete_seq, "del error"),
        (workloads::read_sequential, "NewIterator failed"),
    ] {
        let e = method(&p, &BusyDb, &mut t).expect_err("busy");
        match &e {
            BenchError::Engine {
                context: c,
                source: Error::Busy(_),
            } => assert_eq!(c, context),
            other => panic!("{context}: {other:?}"),
        }
        assert_eq!(
            e.to_string(),
            format!("{context}: Resource busy: held elsewhere")
        );
    }
}
