//! End to end against every engine compiled into this build (vmemkv always;
//! rocksdb/blobdb/lmdb with their features): fill, read back in the same
//! run, then read back again from a second process with --use_existing_db.
//! These need the engine adapters; they fail (never skip) until an adapter
//! opens.

mod common;

use common::{db_bench, result_line, Run};
use regex::Regex;
use vmemkv_compat::EngineKind;

/// Every engine that stores data: these tests read back what they wrote,
/// which the null engine drops by design (its own test is below).
fn engines() -> Vec<EngineKind> {
    EngineKind::compiled_in()
        .into_iter()
        .filter(|k| *k != EngineKind::Null)
        .collect()
}

/// Engines without ordered iteration (Sparkey's hash index): their scan
/// benchmarks must print a skip line naming the limit, and no result.
fn ordered(kind: EngineKind) -> bool {
    kind != EngineKind::Sparkey
}

fn assert_skipped(r: &Run, kind: EngineKind, name: &str) {
    assert!(
        result_line(&r.stdout, name).is_none(),
        "{kind}: {name} printed a result\n{}",
        r.stdout
    );
    let want = format!("Skipped benchmark {name}: sparkey: no ");
    assert!(
        r.stdout.lines().any(|l| l.starts_with(&want)),
        "{kind}: no skip line for {name}\n{}",
        r.stdout
    );
}

fn ok(r: &Run, what: &str) {
    assert_eq!(r.code, 0, "{what}\n{}", r.all());
}

#[test]
fn fill_read_seek_multiscan_stats_then_reopen() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = format!("--db={}", dir.path().join("db").display());
        let engine = format!("--engine={kind}");
        let r = db_bench(&[
            &engine,
            &db,
            "--benchmarks=fillseq,readrandom,seekrandom,multiscan,stats",
            "--num=3000",
            "--seed=11",
            "--seek_nexts=10",
            "--multiscan_size=4",
            "--multiscan_stride=50",
        ]);
        ok(&r, &format!("first run on {kind}"));
        let rr = result_line(&r.stdout, "readrandom").expect("readrandom");
        assert!(rr.ends_with("(3000 of 3000 found)"), "{kind}: {rr}");
        if ordered(kind) {
            let sr = result_line(&r.stdout, "seekrandom").expect("seekrandom");
            assert!(sr.ends_with("(3000 of 3000 found)"), "{kind}: {sr}");
            let ms = result_line(&r.stdout, "multiscan").expect("multiscan");
            // 3000 keys to read / (4 ranges x 10 keys) = 75 multiscans.
            assert!(ms.ends_with("(multiscans:75)"), "{kind}: {ms}");
        } else {
            assert_skipped(&r, kind, "seekrandom");
            assert_skipped(&r, kind, "multiscan");
        }
        assert!(
            !r.stdout.contains("\n(failed)\n"),
            "{kind}: stats property missing\n{}",
            r.stdout
        );

        let r = db_bench(&[
            &engine,
            &db,
            "--use_existing_db=1",
            "--benchmarks=readrandom,readseq,readreverse,fillseq",
            "--num=3000",
            "--seed=12",
        ]);
        ok(&r, &format!("second run on {kind}"));
        let rr = result_line(&r.stdout, "readrandom").expect("readrandom");
        assert!(
            rr.ends_with("(3000 of 3000 found)"),
            "{kind} after reopen: {rr}"
        );
        for name in ["readseq", "readreverse"] {
            if !ordered(kind) {
                assert_skipped(&r, kind, name);
                continue;
            }
            let l = result_line(&r.stdout, name).expect(name);
            assert!(l.contains(" 3000 operations;"), "{kind}: {l}");
        }
        assert!(r
            .stdout
            .contains("fillseq      : skipped (--use_existing_db is true)"));
    }
}

#[test]
fn writes_deletes_and_mixed_workloads() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = format!("--db={}", dir.path().join("db").display());
        let engine = format!("--engine={kind}");
        let r = db_bench(&[
            &engine,
            &db,
            "--benchmarks=fillrandom,overwrite,filluniquerandom,readrandom,multireadrandom,updaterandom,readrandomwriterandom,readwhilewriting,mixgraph,deleterandom,deleteseq,readrandom,flush,compact",
            "--num=2000",
            "--batch_size=4",
            "--threads=2",
            "--seed=3",
        ]);
        ok(&r, &format!("{kind}"));
        let lines: Vec<&str> = r
            .stdout
            .lines()
            .filter(|l| l.starts_with("readrandom "))
            .collect();
        assert!(
            lines[0].ends_with("(2000 of 2000 found)"),
            "{kind}: {}",
            lines[0]
        );
        assert!(
            lines[1].ends_with("(0 of 2000 found)"),
            "{kind} after deleteseq: {}",
            lines[1]
        );
    }
}

#[test]
fn seed_002_command_lines_run_unmodified() {
    // seeds/002: the fillseq prep and the multiscan run, only --num (and
    // --duration) smaller.
    let rx = Regex::new(r"^multiscan    : +\d+\.\d{3} micros/op \d+ ops/sec \d+\.\d{3} seconds (\d+) operations; \(multiscans:(\d+)\)$").expect("regex");
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = format!("--db={}", dir.path().join("db").display());
        let engine = format!("--engine={kind}");
        let r = db_bench(&[
            &engine,
            &db,
            "--benchmarks=fillseq",
            "--write_buffer_size=5242880",
            "--max_write_buffer_number=4",
            "--target_file_size_base=5242880",
            "--disable_wal=1",
            "--key_size=64",
            "--value_size=512",
            "--num=3000",
            "--threads=32",
        ]);
        ok(&r, &format!("seed fillseq on {kind}"));
        assert!(result_line(&r.stdout, "fillseq")
            .expect("fillseq")
            .contains(" 96000 operations;"));
        let r = db_bench(&[
            &engine,
            &db,
            "--use_existing_db=1",
            "--benchmarks=multiscan",
            "--disable_auto_compactions=1",
            "--seek_nexts=100",
            "--multiscan-use-async-io=1",
            "--multiscan-size=15",
            "--multiscan-stride=25000",
            "--key_size=64",
            "--value_size=512",
            "--num=3000",
            "--threads=1",
            "--duration=1",
            "--statistics",
        ]);
        ok(&r, &format!("seed multiscan on {kind}"));
        if !ordered(kind) {
            assert_skipped(&r, kind, "multiscan");
            continue;
        }
        let line = result_line(&r.stdout, "multiscan").expect("multiscan");
        let c = rx
            .captures(line)
            .unwrap_or_else(|| panic!("{kind}: {line}"));
        assert_eq!(&c[1], &c[2]);
        assert!(c[1].parse::<u64>().unwrap_or(0) > 0);
        assert!(r
            .stderr
            .contains("multiscan_stride = 25000\nmultiscan_size = 15\nseek_nexts = 100\n"));
        assert!(r.stdout.contains("\nSTATISTICS:\n"), "{}", r.stdout);
        assert!(r.stdout.contains("Keys:       64 bytes each"));
    }
}

#[test]
fn vmemkv_maintenance_injection_and_workloads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("--db={}", dir.path().join("db").display());
    let r = db_bench(&[
        "--engine=vmemkv",
        &db,
        "--benchmarks=insert,update_zipf,gethit_zipf,scan_uniform,ycsb_e",
        "--num=5000",
        "--duration=2",
        "--inject_checkpoint_at=0.5",
        "--inject_reorganize_at=1",
        "--seed=9",
        "--vmemkv_bloom=1",
    ]);
    ok(&r, "vmemkv injection");
    assert!(
        r.stdout.contains("inject checkpoint at 0.500 s: started"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("status OK"), "{}", r.stdout);
    assert!(!r.stdout.contains("status Not supported"), "{}", r.stdout);
    assert!(r.stdout.contains("Per-second timeline for ycsb_e"));
    let g = result_line(&r.stdout, "gethit_zipf").expect("gethit_zipf");
    let rx = Regex::new(r"\((\d+) of (\d+) found\)$").expect("regex");
    let c = rx.captures(g).unwrap_or_else(|| panic!("{g}"));
    // insert ran for 2 s from id 0 up, so at least the first 5000 ids exist
    // unless the machine managed fewer inserts; every Zipf key is < 5000.
    let inserted: u64 = Regex::new(r"\(inserted:(\d+)\)")
        .expect("regex")
        .captures(result_line(&r.stdout, "insert").expect("insert"))
        .and_then(|c| c[1].parse().ok())
        .expect("inserted count");
    if inserted >= 5000 {
        assert_eq!(&c[1], &c[2], "{g}");
    }
}

/// `--device_reads=1` charges a benchmark what the process read from
/// storage while it ran; without the flag the output is db_bench's own.
#[test]
fn device_reads_line_counts_what_a_cold_benchmark_read() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let db = format!("--db={}", dir.path().join("db").display());
    let base = [
        db.as_str(),
        "--num=20000",
        "--value_size=4096",
        "--compression_ratio=1",
    ];
    let fill = db_bench(&[&base[..], &["--benchmarks=fillseq", "--device_reads=1"]].concat());
    ok(&fill, "fillseq");
    let line = fill
        .stdout
        .lines()
        .find(|l| l.starts_with("Device reads fillseq : "))
        .unwrap_or_else(|| panic!("no device reads line\n{}", fill.all()));
    assert!(line.ends_with(" bytes/op"), "{line}");
    // Cold values: drop the page cache (root only) and read them all back.
    let dropped = std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok();
    let read = db_bench(
        &[
            &base[..],
            &[
                "--benchmarks=readseq",
                "--use_existing_db=1",
                "--device_reads=1",
            ],
        ]
        .concat(),
    );
    ok(&read, "readseq");
    let bytes: u64 = read
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("Device reads readseq : "))
        .and_then(|r| r.split_once(" bytes,"))
        .and_then(|(b, _)| b.parse().ok())
        .unwrap_or_else(|| panic!("no device reads line\n{}", read.all()));
    // tmpfs and overlay have no device to read from.
    let on_block_device = {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(dir.path()).expect("stat").dev();
        let (major, minor) = (
            ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
            (dev & 0xff) | ((dev >> 12) & !0xff),
        );
        std::path::Path::new(&format!("/sys/dev/block/{major}:{minor}")).exists()
    };
    if dropped && on_block_device {
        // 20,000 values of 4 KiB: at least half of them came off the device.
        assert!(
            bytes >= 40 << 20,
            "read {bytes} bytes of an 80 MB cold corpus"
        );
    }
    let plain = db_bench(&[&base[..], &["--benchmarks=readseq", "--use_existing_db=1"]].concat());
    ok(&plain, "readseq");
    assert!(!plain.stdout.contains("Device reads"), "{}", plain.stdout);
}

/// `--engine=null` runs every benchmark, finds nothing and keeps nothing:
/// the harness's own ceiling.
#[test]
fn the_null_engine_runs_everything_and_finds_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("--db={}", dir.path().join("db").display());
    let r = db_bench(&[
        "--engine=null",
        &db,
        "--benchmarks=fillseq,readrandom,seekrandom,multiscan,deleterandom",
        "--num=1000",
        "--seek_nexts=10",
        "--multiscan_size=4",
        "--multiscan_stride=50",
    ]);
    ok(&r, "null engine");
    let rr = result_line(&r.stdout, "readrandom").expect("readrandom");
    assert!(rr.ends_with("(0 of 1000 found)"), "{rr}");
    for name in ["fillseq", "seekrandom", "multiscan", "deleterandom"] {
        assert!(
            result_line(&r.stdout, name).is_some(),
            "no {name}\n{}",
            r.stdout
        );
    }
    assert!(r.stderr.contains("null"), "{}", r.stderr);
}
