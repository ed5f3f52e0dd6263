//! gflags compatibility of the command-line parser.

mod common;

use common::{db_bench, db_bench_env};
use db_bench_port::flag_table::{FlagType, ROCKSDB_FLAGS};
use db_bench_port::flags::{parse, Flags, Parsed};

fn flags(args: &[&str]) -> Flags {
    match Flags::from_args(args) {
        Ok(f) => f,
        Err(e) => panic!("{args:?}: {}", e.message),
    }
}

fn err(args: &[&str]) -> String {
    match Flags::from_args(args) {
        Ok(_) => panic!("{args:?} should fail"),
        Err(e) => e.message,
    }
}

#[test]
fn name_equals_value_and_name_space_value() {
    assert_eq!(flags(&["--num=5"]).i64("num"), 5);
    assert_eq!(flags(&["--num", "6"]).i64("num"), 6);
    assert_eq!(flags(&["-num=7"]).i64("num"), 7);
    assert_eq!(flags(&["-num", "8"]).i64("num"), 8);
    assert_eq!(flags(&["--db", "/x/y"]).str("db"), "/x/y");
    assert_eq!(flags(&["--num=0x10"]).i64("num"), 16);
    assert_eq!(
        flags(&["--compression_ratio=0.25"]).f64("compression_ratio"),
        0.25
    );
    // The last occurrence wins.
    assert_eq!(flags(&["--num=1", "--num=2"]).i64("num"), 2);
}

#[test]
fn defaults_are_db_bench_defaults() {
    let f = flags(&[]);
    assert_eq!(f.i64("num"), 1_000_000);
    assert_eq!(f.i64("reads"), -1);
    assert_eq!(f.i64("key_size"), 16);
    assert_eq!(f.i64("value_size"), 100);
    assert_eq!(f.f64("compression_ratio"), 0.5);
    assert_eq!(f.i64("multiscan_size"), 10);
    assert_eq!(f.i64("multiscan_stride"), 100);
    assert_eq!(f.u64("multiscan_coalesce_threshold"), 16384);
    assert!(!f.bool("multiscan_use_async_io"));
    assert_eq!(f.i64("readwritepercent"), 90);
    assert!(f.bool("progress_reports"));
    assert_eq!(f.str("engine"), "vmemkv");
    assert_eq!(f.f64("zipf_alpha"), 1.0);
    assert!(f.str("benchmarks").starts_with("fillseq,"));
}

#[test]
fn boolean_forms() {
    assert!(flags(&["--histogram"]).bool("histogram"));
    assert!(!flags(&["--histogram", "--nohistogram"]).bool("histogram"));
    for (v, want) in [
        ("true", true),
        ("false", false),
        ("1", true),
        ("0", false),
        ("yes", true),
        ("no", false),
        ("t", true),
        ("f", false),
        ("TRUE", true),
    ] {
        assert_eq!(
            flags(&[&format!("--histogram={v}")]).bool("histogram"),
            want,
            "{v}"
        );
    }
    // A bool never consumes the next argument.
    let f = flags(&["--histogram", "positional"]);
    assert!(f.bool("histogram"));
    assert_eq!(f.positional, vec!["positional".to_string()]);
}

#[test]
fn dashes_and_underscores_are_equivalent() {
    let f = flags(&[
        "--multiscan-size=15",
        "--multiscan-use-async-io=1",
        "--key-size",
        "64",
    ]);
    assert_eq!(f.i64("multiscan_size"), 15);
    assert!(f.bool("multiscan_use_async_io"));
    assert_eq!(f.i64("key_size"), 64);
    assert!(!flags(&["--histogram", "--no-histogram"]).bool("histogram"));
}

#[test]
fn unknown_flags_fail_unless_undefok() {
    assert_eq!(
        err(&["--frobnicate=1"]),
        "ERROR: unknown command line flag 'frobnicate'"
    );
    assert_eq!(
        err(&["--multiscan-frob"]),
        "ERROR: unknown command line flag 'multiscan-frob'"
    );
    let f = flags(&[
        "--undefok=frobnicate,other_thing",
        "--frobnicate=1",
        "--noother_thing",
        "--num=3",
    ]);
    assert_eq!(f.i64("num"), 3);
    // undefok may come after the flag it excuses, with dashes or underscores.
    flags(&["--other-thing=2", "--undefok=other_thing"]);
    assert!(err(&["--undefok=a", "--b=1"]).contains("'b'"));
}

#[test]
fn bad_values_name_the_flag_and_the_value() {
    assert_eq!(
        err(&["--num=abc"]),
        "ERROR: illegal value 'abc' specified for int64 flag 'num'"
    );
    assert_eq!(
        err(&["--histogram=maybe"]),
        "ERROR: illegal value 'maybe' specified for bool flag 'histogram'"
    );
    assert_eq!(
        err(&["--threads=99999999999"]),
        "ERROR: illegal value '99999999999' specified for int32 flag 'threads'"
    );
    assert_eq!(
        err(&["--multiscan_coalesce_threshold=-1"]),
        "ERROR: illegal value '-1' specified for uint64 flag 'multiscan_coalesce_threshold'"
    );
    assert_eq!(
        err(&["--compression_ratio=half"]),
        "ERROR: illegal value 'half' specified for double flag 'compression_ratio'"
    );
    assert_eq!(
        err(&["--num"]),
        "ERROR: flag '--num' is missing its argument"
    );
    assert!(err(&["--nohistogram=1"]).contains("histogram"));
}

#[test]
fn flagfile_lines_comments_and_nesting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inner = dir.path().join("inner.flags");
    std::fs::write(&inner, "--value_size=512\n").expect("write");
    let outer = dir.path().join("outer.flags");
    std::fs::write(
        &outer,
        format!(
            "# a comment\n\n  --num=42\n--histogram\n--nosync\n--flagfile={}\n--not_a_db_bench_flag=1\n",
            inner.display()
        ),
    )
    .expect("write");
    let arg = format!("--flagfile={}", outer.display());
    let f = flags(&[&arg, "--key_size=20"]);
    assert_eq!(f.i64("num"), 42);
    assert!(f.bool("histogram"));
    assert!(!f.bool("sync"));
    assert_eq!(f.i64("value_size"), 512);
    assert_eq!(f.i64("key_size"), 20);
    // Command-line flags after the flagfile override it.
    let f = flags(&[&arg, "--num=7"]);
    assert_eq!(f.i64("num"), 7);
    // `--flagfile FILE` works too.
    let f = flags(&["--flagfile", &outer.display().to_string()]);
    assert_eq!(f.i64("num"), 42);
    // A bad value inside a flagfile is an error naming the flag.
    std::fs::write(&inner, "--value_size=big\n").expect("write");
    assert!(err(&[&arg]).contains("'value_size'"));
    assert!(err(&["--flagfile=/nonexistent/x.flags"]).contains("/nonexistent/x.flags"));
}

#[test]
fn fromenv_reads_flags_environment_variables() {
    // Only through the binary, so the test does not mutate its own env.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("--db={}", dir.path().join("db").display());
    let r = db_bench_env(
        &[
            "--fromenv=num",
            "--engine=harness_test",
            "--benchmarks=fillseq",
            &db,
            "--seed=1",
        ],
        &[("FLAGS_num", "123")],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains("Entries:    123\n"), "{}", r.all());
}

#[test]
fn every_db_bench_flag_is_accepted() {
    assert!(ROCKSDB_FLAGS.len() >= 400, "{}", ROCKSDB_FLAGS.len());
    let mut args = Vec::new();
    for d in ROCKSDB_FLAGS {
        let v = match d.ty {
            FlagType::Bool => "false".to_string(),
            FlagType::Str => {
                if d.literal {
                    d.default.to_string()
                } else {
                    String::new()
                }
            }
            _ if d.literal => d.default.to_string(),
            FlagType::F64 => "0.5".into(),
            _ => "1".into(),
        };
        args.push(format!("--{}={v}", d.name));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let f = flags(&refs);
    assert_eq!(f.i64("num"), 1_000_000);
    for name in [
        "write_buffer_size",
        "max_write_buffer_number",
        "target_file_size_base",
        "disable_auto_compactions",
        "use_direct_reads",
        "cache_size",
        "bloom_bits",
        "compression_type",
        "enable_blob_files",
        "min_blob_size",
    ] {
        assert!(
            ROCKSDB_FLAGS.iter().any(|d| d.name == name),
            "{name} missing"
        );
    }
}

#[test]
fn help_and_version() {
    let Ok(Parsed::Help(text)) = parse(&["--help".to_string()]) else {
        panic!("--help did not ask for help");
    };
    assert!(text.contains("-write_buffer_size"));
    assert!(text.contains("no meaning there"));
    assert!(text.contains("-engine ("));
    let r = db_bench(&["--help"]);
    assert_eq!(r.code, 1, "gflags exits 1 after --help");
    assert!(r.stdout.contains("-multiscan_stride"), "{}", r.all());
    let r = db_bench(&["--version"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.starts_with("db_bench version "), "{}", r.all());
}

#[test]
fn binary_reports_unknown_flags_as_gflags_does() {
    let r = db_bench(&["--benchmarks=fillseq", "--no_such_flag=3"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.trim_end(),
        "ERROR: unknown command line flag 'no_such_flag'"
    );
    assert_eq!(r.stdout, "");
    let r = db_bench(&["--num=abc"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("'abc'") && r.stderr.contains("'num'"),
        "{}",
        r.all()
    );
}

#[test]
fn engine_flag_and_environment_variable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("--db={}", dir.path().join("db").display());
    let args = ["--benchmarks=fillseq", "--num=10", "--seed=1", db.as_str()];
    let r = db_bench_env(&args, &[("DB_BENCH_ENGINE", "harness_test")]);
    assert_eq!(r.code, 0, "{}", r.all());
    // RocksDB's header shape, parsers' first line, with the engine named.
    assert!(
        r.stderr.starts_with("RocksDB:    version ") && r.stderr.contains("(engine harness_test;"),
        "{}",
        r.all()
    );
    // The flag beats the environment.
    let r = db_bench_env(
        &["--engine=nosuch", "--benchmarks=fillseq"],
        &[("DB_BENCH_ENGINE", "harness_test")],
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("unknown engine 'nosuch'"), "{}", r.all());
}

#[test]
fn unhonoured_flags_are_reported_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("--db={}", dir.path().join("db").display());
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq",
        "--num=10",
        "--seed=1",
        &db,
        "--num_multi_db=4",
        "--benchmark_write_rate_limit=0",
        "--write_buffer_size=1048576",
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(r.stderr.matches("num_multi_db").count(), 1, "{}", r.all());
    // Defaults and RocksDB tuning flags are accepted quietly on non-RocksDB engines.
    assert!(
        !r.stderr.contains("benchmark_write_rate_limit"),
        "{}",
        r.all()
    );
    assert!(!r.stderr.contains("write_buffer_size"), "{}", r.all());
}

#[test]
fn vmemkv_ablation_flags_become_engine_options() {
    let f = flags(&[
        "--vmemkv_bloom=1",
        "--vmemkv-inline",
        "--vmemkv_prefetch=false",
    ]);
    let cfg = db_bench_port::config::Config::from_flags(f, None).expect("config");
    assert_eq!(cfg.extra.get("bloom").map(String::as_str), Some("true"));
    assert_eq!(cfg.extra.get("inline").map(String::as_str), Some("true"));
    assert_eq!(cfg.extra.get("prefault").map(String::as_str), Some("false"));
    let f = flags(&["--vmemkv_prefault"]);
    let cfg = db_bench_port::config::Config::from_flags(f, None).expect("config");
    assert_eq!(cfg.extra.get("prefault").map(String::as_str), Some("true"));
    let f = flags(&["--engine_options=a=1,b=two"]);
    let cfg = db_bench_port::config::Config::from_flags(f, None).expect("config");
    assert_eq!(cfg.extra.get("b").map(String::as_str), Some("two"));
    // RocksDB tuning flags never reach vmemkv.
    let f = flags(&["--write_buffer_size=5242880"]);
    let cfg = db_bench_port::config::Config::from_flags(f, None).expect("config");
    assert!(cfg.extra.is_empty());
    // Except the background compaction switch: it stops the key-order pass,
    // unless the engine option says otherwise.
    let order = |args: &[&str]| {
        let cfg = db_bench_port::config::Config::from_flags(flags(args), None).expect("config");
        cfg.extra.get("order_idle_ms").cloned()
    };
    assert_eq!(
        order(&["--disable_auto_compactions=1"]).as_deref(),
        Some("0")
    );
    assert_eq!(order(&["--disable_auto_compactions=0"]), None);
    assert_eq!(
        order(&[
            "--disable_auto_compactions=true",
            "--engine_options=order_idle_ms=50"
        ])
        .as_deref(),
        Some("50")
    );
    // RocksDB's direct-read switch picks vmemkv's MultiScan read mode.
    let direct = |args: &[&str]| {
        let cfg = db_bench_port::config::Config::from_flags(flags(args), None).expect("config");
        cfg.extra.get("use_direct_reads").cloned()
    };
    assert_eq!(direct(&["--use_direct_reads=1"]).as_deref(), Some("true"));
    assert_eq!(
        direct(&["--use_direct_reads=false"]).as_deref(),
        Some("false")
    );
    assert_eq!(direct(&[]), None);
}

#[test]
fn rocksdb_tuning_flags_are_forwarded_to_rocksdb() {
    let f = flags(&[
        "--engine=rocksdb",
        "--write_buffer_size=5242880",
        "--max_write_buffer_number=4",
        "--target_file_size_base=5242880",
        "--disable_auto_compactions=1",
        "--statistics",
        "--use_existing_keys=0",
        "--block_align",
    ]);
    let cfg = db_bench_port::config::Config::from_flags(f, None).expect("config");
    assert_eq!(
        cfg.extra.get("write_buffer_size").map(String::as_str),
        Some("5242880")
    );
    assert_eq!(
        cfg.extra
            .get("disable_auto_compactions")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        cfg.extra.get("statistics").map(String::as_str),
        Some("true")
    );
    // A tuning flag the adapter cannot take is reported, not dropped.
    assert!(
        cfg.warnings.iter().any(|w| w.contains("--block_align")),
        "{:?}",
        cfg.warnings
    );
    // An unsupported flag left at its default is not.
    assert!(!cfg.warnings.iter().any(|w| w.contains("use_existing_keys")));
}
