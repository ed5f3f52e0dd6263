//! Output shape: the result, histogram and header lines match regexes
//! derived from db_bench's printf formats. These run on the in-process
//! `harness_test` engine so that they test the harness alone.

mod common;

use common::{db_bench, result_line};
use regex::Regex;

/// `"%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %lu operations;%s%s"`
/// with the optional `" %6.1f MB/s"` and message.
const RESULT: &str = r"^(?P<name>\S+ *) : (?P<micros> *\d+\.\d{3}) micros/op (?P<ops>\d+) ops/sec (?P<secs>\d+\.\d{3}) seconds (?P<n>\d+) operations;(?P<mbs> +\d+\.\d MB/s)?(?P<msg> .*)?$";

fn re(s: &str) -> Regex {
    Regex::new(s).expect("regex")
}

fn tmpdb() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("--db={}", dir.path().join("db").display());
    (dir, db)
}

#[test]
fn result_regex_accepts_real_rocksdb_lines() {
    // Lines from RocksDB's own db_bench (seeds/002 and the db_bench wiki),
    // with the padding db_bench prints.
    let r = re(RESULT);
    for line in [
        "multiscan    :     837.941 micros/op 1193 ops/sec 60.001 seconds 71605 operations; (multscans:71605)",
        "readrandom   :       2.845 micros/op 351494 ops/sec 2.845 seconds 1000000 operations;   38.9 MB/s (1000000 of 1000000 found)",
        "fillseq      :       1.937 micros/op 516302 ops/sec 1.937 seconds 1000000 operations;   57.1 MB/s",
    ] {
        assert!(r.is_match(line), "{line}");
    }
}

#[test]
fn result_lines_and_db_path_match_db_bench() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,readrandom,seekrandom,multiscan,readmissing,updaterandom",
        "--num=2000",
        "--seed=7",
        "--seek_nexts=5",
        "--multiscan_size=3",
        "--multiscan_stride=10",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let rx = re(RESULT);
    let mut n = 0;
    let lines: Vec<&str> = r.stdout.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if !line.contains("micros/op") {
            continue;
        }
        n += 1;
        let c = rx
            .captures(line)
            .unwrap_or_else(|| panic!("bad result line: {line}"));
        // %-12s pads the name to 12, %11.3f pads micros/op to 11.
        assert!(c["name"].len() >= 12, "{line}");
        assert!(c["micros"].len() >= 11, "{line}");
        assert!(
            lines[..i].iter().rev().any(|l| l.starts_with("DB path: [")),
            "{line}"
        );
    }
    assert_eq!(n, 6, "{}", r.stdout);
    let rr = result_line(&r.stdout, "readrandom").expect("readrandom line");
    assert!(rr.ends_with("(2000 of 2000 found)"), "{rr}");
    assert!(rr.contains(" MB/s "), "{rr}");
    let rm = result_line(&r.stdout, "readmissing").expect("readmissing line");
    assert!(rm.ends_with("(0 of 2000 found)"), "{rm}");
    let sr = result_line(&r.stdout, "seekrandom").expect("seekrandom line");
    assert!(sr.ends_with("(2000 of 2000 found)"), "{sr}");
    let ms = result_line(&r.stdout, "multiscan").expect("multiscan line");
    // 2000 reads / (3 ranges x 5 keys) per multiscan = 134 multiscans.
    assert!(ms.ends_with("(multiscans:134)"), "{ms}");
    assert!(result_line(&r.stdout, "updaterandom")
        .expect("updaterandom")
        .ends_with("( updates:2000 found:2000)"));
    assert!(
        r.stderr
            .contains("multiscan_stride = 10\nmultiscan_size = 3\nseek_nexts = 5\n"),
        "{}",
        r.all()
    );
    let blank_after = lines
        .iter()
        .position(|l| l.starts_with("readrandom "))
        .map(|i| lines[i + 1]);
    assert_eq!(
        blank_after,
        Some(""),
        "readrandom's message ends with a newline in db_bench"
    );
}

#[test]
fn histogram_blocks_match_db_bench() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillrandom,readrandom",
        "--num=3000",
        "--seed=3",
        "--histogram",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let lines: Vec<&str> = r.stdout.lines().collect();
    let count = re(r"^Count: (\d+) Average: \d+\.\d{4}  StdDev: \d+\.\d{2}$");
    let minmax = re(r"^Min: \d+  Median: \d+\.\d{4}  Max: \d+$");
    let pct = re(
        r"^Percentiles: P50: \d+\.\d{2} P75: \d+\.\d{2} P99: \d+\.\d{2} P99\.9: \d+\.\d{2} P99\.99: \d+\.\d{2}$",
    );
    let bucket = re(r"^[\[(] +\d+, +\d+ \] +\d+ +\d+\.\d{3}% +\d+\.\d{3}% #*$");
    let mut blocks = 0;
    for (i, l) in lines.iter().enumerate() {
        if let Some(op) = l.strip_prefix("Microseconds per ") {
            blocks += 1;
            assert!(op == "write:" || op == "read:", "{l}");
            let c = count
                .captures(lines[i + 1])
                .unwrap_or_else(|| panic!("{}", lines[i + 1]));
            assert_eq!(&c[1], "3000");
            assert!(minmax.is_match(lines[i + 2]), "{}", lines[i + 2]);
            assert!(pct.is_match(lines[i + 3]), "{}", lines[i + 3]);
            assert_eq!(
                lines[i + 4],
                "------------------------------------------------------"
            );
            let mut j = i + 5;
            let mut total = 0u64;
            while !lines[j].is_empty() {
                assert!(bucket.is_match(lines[j]), "{}", lines[j]);
                let n: u64 = lines[j]
                    .split(']')
                    .nth(1)
                    .and_then(|s| s.split_whitespace().next())
                    .and_then(|s| s.parse().ok())
                    .expect("bucket count");
                total += n;
                j += 1;
            }
            assert_eq!(total, 3000, "bucket counts add up to Count");
        }
    }
    assert_eq!(blocks, 2, "{}", r.stdout);
}

#[test]
fn header_matches_db_bench() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq",
        "--num=100",
        "--key_size=64",
        "--value_size=512",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let err: Vec<&str> = r.stderr.lines().collect();
    assert!(
        re(r"^RocksDB:    version \S+ \(engine harness_test; db_bench_port \S+\)$")
            .is_match(err[0]),
        "{}",
        err[0]
    );
    assert!(
        re(r"^Date:       \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}$").is_match(err[1]),
        "{}",
        err[1]
    );
    assert!(
        re(r"^CPU:        \d+ \* .+$").is_match(err[2]),
        "{}",
        err[2]
    );
    assert!(err[3].starts_with("CPUCache:   "), "{}", err[3]);
    let want = [
        r"^Keys:       64 bytes each \(\+ 0 bytes user-defined timestamp\)$",
        r"^Values:     512 bytes each \(256 bytes after compression\)$",
        r"^Entries:    100$",
        r"^Prefix:    0 bytes$",
        r"^Keys per prefix:    0$",
        r"^RawSize:    0\.1 MB \(estimated\)$",
        r"^FileSize:   0\.0 MB \(estimated\)$",
        r"^Write rate: 0 bytes/second$",
        r"^Read rate: 0 ops/second$",
        r"^Compression: \S+$",
        r"^Compression sampling rate: 0$",
        r"^Memtablerep: .+$",
        r"^Perf Level: 1$",
    ];
    let out: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| !l.starts_with("WARNING:"))
        .collect();
    for (i, w) in want.iter().enumerate() {
        assert!(re(w).is_match(out[i]), "line {i}: {:?} !~ {w}", out[i]);
    }
    assert_eq!(
        out[want.len()],
        "------------------------------------------------"
    );
    assert_eq!(
        out[want.len() + 1],
        format!("DB path: [{}]", &db["--db=".len()..])
    );
}

#[test]
fn seed_zero_prints_the_chosen_seed() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq",
        "--num=10",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(re(r"^Set seed to \d+ because --seed was 0$")
        .is_match(r.stdout.lines().next().unwrap_or("")));
}

#[test]
fn progress_goes_to_stderr() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq",
        "--num=1000",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stderr.contains("... finished 100 ops"), "{}", r.all());
    assert!(r.stderr.contains("... finished 1000 ops"), "{}", r.all());
    assert!(!r.stdout.contains("finished"));
}

#[test]
fn repeat_and_warmup_suffix() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,readrandom[X3-W1]",
        "--num=500",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r
        .stdout
        .contains("Warming up benchmark by running 1 times\n"));
    assert!(r.stdout.contains("Running benchmark for 3 times\n"));
    assert_eq!(
        r.stdout.matches("\nreadrandom   : ").count(),
        4,
        "{}",
        r.stdout
    );
    assert!(re(r"(?m)^readrandom \[AVG 3 runs\] : \d+ \(± \d+\) ops/sec; +\d+\.\d \(± \d+\.\d\) MB/sec$").is_match(&r.stdout), "{}", r.stdout);
    assert!(
        re(r"(?m)^readrandom \[MEDIAN 3 runs\] : \d+ ops/sec; +\d+\.\d MB/sec$")
            .is_match(&r.stdout),
        "{}",
        r.stdout
    );
}

#[test]
fn threads_merge_like_db_bench() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,readrandom,readwhilewriting",
        "--num=1000",
        "--threads=4",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    // Every thread does --num ops; the merged line counts all of them.
    let rr = result_line(&r.stdout, "readrandom").expect("readrandom");
    assert!(rr.contains(" 4000 operations;"), "{rr}");
    assert!(rr.ends_with("(1000 of 1000 found)"), "{rr}");
    // readwhilewriting's writer thread is excluded from the result.
    let rw = result_line(&r.stdout, "readwhilewriting").expect("readwhilewriting");
    assert!(rw.contains(" 4000 operations;"), "{rw}");
}

#[test]
fn report_file_csv() {
    let (d, db) = tmpdb();
    let csv = d.path().join("report.csv");
    let rf = format!("--report_file={}", csv.display());
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,readrandom",
        "--num=1000",
        "--duration=2",
        "--report_interval_seconds=1",
        &rf,
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let text = std::fs::read_to_string(&csv).expect("report file");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("secs_elapsed,interval_qps"));
    let rows: Vec<&str> = lines.collect();
    assert!(!rows.is_empty(), "{text}");
    let row = re(r"^\d+,\d+$");
    for l in &rows {
        assert!(row.is_match(l), "{l}");
    }
    assert!(
        rows.iter().any(|l| !l.ends_with(",0")),
        "readrandom made progress: {text}"
    );
}

#[test]
fn json_records_every_result() {
    let (d, db) = tmpdb();
    let jf = d.path().join("out.json");
    let ja = format!("--json={}", jf.display());
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,readrandom,stats",
        "--num=300",
        "--histogram",
        "--seed=5",
        &ja,
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&jf).expect("json")).expect("parse");
    assert_eq!(v["engine"], "harness_test");
    assert_eq!(v["seed_base"], 5);
    assert_eq!(v["settings"]["num"], 300);
    let res = v["results"].as_array().expect("results");
    assert_eq!(res.len(), 2);
    assert_eq!(res[1]["name"], "readrandom");
    assert_eq!(res[1]["operations"], 300);
    assert_eq!(res[1]["message"], "(300 of 300 found)");
    assert_eq!(res[1]["histograms"]["read"]["count"], 300);
    assert!(res[1]["ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0);
    assert_eq!(
        res[1]["result_line"].as_str(),
        result_line(&r.stdout, "readrandom")
    );
    assert_eq!(v["error"], serde_json::Value::Null);
}

#[test]
fn ycsb_e_prints_a_timeline() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,ycsb_e",
        "--num=2000",
        "--duration=2",
        "--seek_nexts=10",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let at = r
        .stdout
        .find("Per-second timeline for ycsb_e (secs_elapsed,interval_qps):\n")
        .expect("timeline header");
    let rows: Vec<&str> = r.stdout[at..]
        .lines()
        .skip(1)
        .take_while(|l| re(r"^\d+,\d+$").is_match(l))
        .collect();
    assert!(!rows.is_empty(), "{}", r.stdout);
    assert!(rows[0].starts_with("1,"));
    let y = result_line(&r.stdout, "ycsb_e").expect("ycsb_e");
    assert!(re(r"\(scans:\d+ inserts:\d+\)$").is_match(y), "{y}");
}

#[test]
fn vmemkv_workloads_run() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=insert,gethit_zipf,gethit_uniform,getmiss_zipf,update_zipf,scan_zipf,scan_uniform,delete,gethit_uniform",
        "--num=1000",
        "--zipf_alpha=0.99",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(result_line(&r.stdout, "insert")
        .expect("insert")
        .ends_with("(inserted:1000)"));
    let hits: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("gethit_uniform"))
        .collect();
    assert!(hits[0].ends_with("(1000 of 1000 found)"), "{}", hits[0]);
    assert!(
        hits[1].ends_with("(0 of 1000 found)"),
        "after delete: {}",
        hits[1]
    );
    assert!(result_line(&r.stdout, "getmiss_zipf")
        .expect("miss")
        .ends_with("(0 of 1000 found)"));
    assert!(result_line(&r.stdout, "gethit_zipf")
        .expect("zipf")
        .ends_with("(1000 of 1000 found)"));
    assert!(result_line(&r.stdout, "scan_uniform")
        .expect("scan")
        .contains("(scans:1000 keys:"));
}

#[test]
fn engine_errors_exit_non_zero() {
    // harness_test has no checkpoint(): the injected call fails, and the
    // run says so and exits 1 instead of reporting success.
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,readrandom",
        "--num=1000",
        "--duration=1",
        "--inject_checkpoint_at=0.2",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout.contains("inject checkpoint at 0.200 s"),
        "{}",
        r.all()
    );
    assert!(
        r.stderr.contains("checkpoint failed: Not supported"),
        "{}",
        r.all()
    );
}

#[test]
fn benchmark_names() {
    let (_d, db) = tmpdb();
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq,nosuchbench",
        "--num=10",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("unknown benchmark 'nosuchbench'"),
        "{}",
        r.all()
    );
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=crc32c,fillseq",
        "--num=10",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout
            .contains("Skipped benchmark crc32c: not supported by db_bench_port"),
        "{}",
        r.stdout
    );
    assert!(
        !r.stdout.lines().any(|l| l.starts_with("crc32c")),
        "a skip line must not start with the benchmark's name (parsers read those as results)\n{}",
        r.stdout
    );
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillseq",
        "--use_existing_db=1",
        "--num=10",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout
            .contains("fillseq      : skipped (--use_existing_db is true)\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn never_destroys_a_directory_it_did_not_create() {
    let d = tempfile::tempdir().expect("tempdir");
    let precious = d.path().join("precious");
    std::fs::create_dir_all(&precious).expect("mkdir");
    std::fs::write(precious.join("data.txt"), "keep me").expect("write");
    let db = format!("--db={}", precious.display());
    let r = db_bench(&["--benchmarks=fillseq", "--num=10", "--seed=1", &db]);
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stderr.contains("refusing to destroy"), "{}", r.all());
    assert_eq!(
        std::fs::read_to_string(precious.join("data.txt"))
            .ok()
            .as_deref(),
        Some("keep me")
    );
}

#[test]
fn histogram_text_is_byte_identical_to_rocksdb() {
    // tests/data/rocksdb_histogram.txt was printed by RocksDB's own
    // HistogramImpl::ToString (monitoring/histogram.cc, compiled with g++)
    // for exactly these samples.
    let mut h = db_bench_port::histogram::Histogram::new();
    for v in [
        0u64, 0, 1, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584,
        4181, 6765, 10946, 17711, 1_000_000,
    ] {
        h.add(v);
    }
    for i in 0..1000u64 {
        h.add(i % 37);
    }
    assert_eq!(h.to_text(), include_str!("data/rocksdb_histogram.txt"));
}

#[test]
fn benchmark_rate_limits_are_honoured() {
    let (_d, db) = tmpdb();
    // 500 writes of 16 + 100 bytes at 116,000 bytes/s take about 0.5 s;
    // 2000 reads at 4000 ops/s (requested 256 at a time) take about 0.45 s.
    let r = db_bench(&[
        "--engine=harness_test",
        "--benchmarks=fillrandom,readrandom",
        "--num=500",
        "--reads=2000",
        "--benchmark_write_rate_limit=116000",
        "--benchmark_read_rate_limit=4000",
        "--seed=1",
        &db,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(!r.stderr.contains("WARNING"), "{}", r.all());
    assert!(r
        .stdout
        .contains("Write rate: 116000 bytes/second\nRead rate: 4000 ops/second\n"));
    let secs = |name: &str| -> f64 {
        let l = result_line(&r.stdout, name).unwrap_or_else(|| panic!("{name}"));
        let c = re(RESULT).captures(l).unwrap_or_else(|| panic!("{l}"));
        c["secs"].parse().unwrap_or(0.0)
    };
    assert!(secs("fillrandom") >= 0.45, "{}", r.stdout);
    assert!(secs("readrandom") >= 0.40, "{}", r.stdout);
}
