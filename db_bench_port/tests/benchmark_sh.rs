//! Runs RocksDB's own `tools/benchmark.sh`, unmodified, from the
//! librocksdb-sys source in cargo's registry, against this db_bench (the
//! vmemkv engine), and checks its `report.tsv`: every numeric column of
//! every row is a number, the size columns are a number with a unit, and
//! the version, job id and git hash columns are filled.
//!
//! The script is only read from the registry; when no librocksdb-sys
//! source is there the test prints why and passes without running.
//!
//! The script runs `iostat`, `vmstat` and `killall iostat vmstat` for its
//! side statistics (none of which report.tsv reads); the test puts no-op
//! stand-ins for those three first on the script's PATH so that it starts
//! no monitors and kills no process outside the test.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn registry_sources() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(h) = std::env::var_os("CARGO_HOME") {
        roots.push(PathBuf::from(h));
    }
    if let Some(h) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(h).join(".cargo"));
    }
    let mut found = Vec::new();
    for root in roots {
        let Ok(indexes) = std::fs::read_dir(root.join("registry/src")) else {
            continue;
        };
        for index in indexes.flatten() {
            let Ok(crates) = std::fs::read_dir(index.path()) else {
                continue;
            };
            for c in crates.flatten() {
                let name = c.file_name().to_string_lossy().into_owned();
                let script = c.path().join("rocksdb/tools/benchmark.sh");
                if name.starts_with("librocksdb-sys-") && script.is_file() {
                    found.push(script);
                }
            }
        }
    }
    // The version the workspace pins first, then any other.
    found.sort_by_key(|p| !p.to_string_lossy().contains("librocksdb-sys-0.19.0+11.8.1"));
    found
}

fn stub(dir: &Path, name: &str) {
    let p = dir.join(name);
    std::fs::write(&p, "#!/bin/sh\nexit 0\n").expect("write stub");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

const NUMERIC: [&str; 19] = [
    "ops_sec", "mb_sec", "c_wgb", "w_amp", "c_mbps", "c_wsecs", "c_csecs", "b_rgb", "b_wgb",
    "usec_op", "p50", "p99", "p99.9", "p99.99", "pmax", "uptime", "stall%", "Nstall", "u_cpu",
];

/// Every job type the test runs, with the row name benchmark.sh gives it.
const JOBS: [(&str, &str); 7] = [
    ("fillseq_disable_wal", "fillseq.wal_disabled.v400"),
    ("readrandom", "readrandom.t2"),
    ("multireadrandom", "multireadrandom.t2"),
    ("overwrite", "overwrite.t2.s0"),
    ("updaterandom", "updaterandom.t2.s0"),
    ("fwdrange", "fwdrange.t2"),
    ("revrange", "revrange.t2"),
];

#[test]
fn rocksdbs_benchmark_sh_fills_every_report_column() {
    run_for(None, &JOBS);
}

/// The same script through `DB_BENCH_ENGINE`, for each rival compiled in:
/// RocksDB's rows come from its own `rocksdb.stats` and LOG, the others'
/// from the port's stats block.
#[cfg(feature = "rocksdb")]
#[test]
fn benchmark_sh_fills_every_column_for_rocksdb_and_blobdb() {
    run_for(Some("rocksdb"), &JOBS);
    run_for(Some("blobdb"), &JOBS);
}

#[cfg(feature = "lmdb")]
#[test]
fn benchmark_sh_fills_every_column_for_lmdb() {
    run_for(Some("lmdb"), &JOBS);
}

#[cfg(feature = "fjall")]
#[test]
fn benchmark_sh_fills_every_column_for_fjall() {
    run_for(Some("fjall"), &JOBS);
    run_for(Some("fjall-blob"), &JOBS);
}

/// Sparkey has no key order and skips read-while-write mixes; its other
/// jobs must fill their rows.
#[cfg(feature = "sparkey")]
#[test]
fn benchmark_sh_fills_every_column_for_sparkey() {
    run_for(Some("sparkey"), &JOBS[..4]);
}

fn run_for(engine: Option<&str>, jobs: &[(&str, &str)]) {
    let Some(script) = registry_sources().into_iter().next() else {
        eprintln!(
            "SKIPPED: no librocksdb-sys source with rocksdb/tools/benchmark.sh under $CARGO_HOME/registry/src or ~/.cargo/registry/src"
        );
        return;
    };
    for tool in ["/usr/bin/time", "bc", "awk", "bash", "gzip"] {
        let ok = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "benchmark.sh needs {tool}, which is not installed");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let work = tmp.path().join("work");
    let bin = tmp.path().join("bin");
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for s in ["iostat", "vmstat", "killall"] {
        stub(&bin, s);
    }
    // "REQUIRE: db_bench binary exists in the current directory".
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_db_bench"), work.join("db_bench"))
        .expect("symlink");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Enough keys that a write job ingests >= 0.05 GB, which the script
    // rounds to 0.1 (below that it writes NA for w_amp).
    let names: Vec<&str> = jobs.iter().map(|j| j.0).collect();
    let jobs_arg = names.join(",");
    let label = engine.unwrap_or("vmemkv (default)");
    let t0 = std::time::Instant::now();
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .arg(&jobs_arg)
        .current_dir(&work)
        .env("PATH", path)
        .env_remove("DB_BENCH_ENGINE");
    if let Some(e) = engine {
        cmd.env("DB_BENCH_ENGINE", e);
    }
    let run = cmd
        .env("DB_DIR", tmp.path().join("db"))
        .env("WAL_DIR", tmp.path().join("wal"))
        .env("OUTPUT_DIR", &out)
        .env("JOB_ID", "h32test")
        .env("NUM_KEYS", "150000")
        .env("NUM_THREADS", "2")
        .env("DB_BENCH_NO_SYNC", "1")
        .env("CACHE_SIZE", "8388608")
        .env("STATS_INTERVAL_SECONDS", "0")
        .output()
        .expect("run benchmark.sh");
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    eprintln!(
        "benchmark.sh {jobs_arg} on {label} took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        run.status.success(),
        "benchmark.sh on {label} failed\n{log}"
    );
    for bad in ["syntax error", "parse error", "not found"] {
        assert!(!log.contains(bad), "{bad:?} in the script's output\n{log}");
    }
    let report = std::fs::read_to_string(out.join("report.tsv"))
        .unwrap_or_else(|e| panic!("no report.tsv: {e}\n{log}"));
    let mut lines = report.lines().filter(|l| !l.starts_with('#'));
    let header: Vec<&str> = lines.next().expect("header").split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
    };
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split('\t').collect()).collect();
    let tests: Vec<&str> = rows.iter().map(|r| r[col("test")]).collect();
    let want: Vec<&str> = jobs.iter().map(|j| j.1).collect();
    assert_eq!(tests, want, "{label}\n{report}");
    eprintln!("{report}");
    let version = regex::Regex::new(r"^\d+\.\d+\.\d+").expect("re");
    let size = regex::Regex::new(r"^\d+(B|KB|MB|GB|TB)$").expect("re");
    let sha = db_bench_port::dbstats::GIT_SHA;
    for row in &rows {
        assert_eq!(row.len(), header.len(), "{row:?}");
        let test = row[col("test")];
        let read_only = !test.starts_with("fill")
            && !test.starts_with("overwrite")
            && !test.starts_with("update");
        for name in NUMERIC.iter().chain(&["s_cpu", "rss"]) {
            let v = row[col(name)];
            // The script's own NA: a job that wrote nothing has no
            // write-amplification. (Its multireadrandom NA for mb_sec is
            // for RocksDB's older V1 result line only; this port prints
            // V2, whose MB/s the script reads.)
            let script_na = *name == "w_amp" && read_only;
            if script_na {
                assert_eq!(v, "NA", "{name} of {test}");
                continue;
            }
            // The script's rss comes from a `ps | grep db_bench` loop that
            // it starts before db_bench and samples every 10 s: on a short
            // job its only sample can come before db_bench exists, and the
            // column is then empty. At least one job must have a sample
            // (checked below).
            if *name == "rss" && v.is_empty() {
                continue;
            }
            assert!(
                v.parse::<f64>().is_ok_and(|x| x.is_finite()),
                "{name} of {test} is {v:?}, not a number\n{report}"
            );
        }
        for name in ["lsm_sz", "blob_sz"] {
            let v = row[col(name)];
            assert!(size.is_match(v), "{name} of {test} is {v:?}\n{report}");
        }
        // 150K x 420 B is ~60 MB on every engine: the size is the
        // engine's own figure, not a placeholder. (RocksDB's is its SST
        // files, and a load that fits its 128 MB write buffer has none
        // until a later job's open flushes it; its w_amp is then 0 too.)
        let rocksdb = matches!(engine, Some("rocksdb" | "blobdb"));
        let unflushed = rocksdb && !read_only;
        assert!(
            unflushed || !row[col("lsm_sz")].starts_with('0'),
            "lsm_sz of {test} on {label}\n{report}"
        );
        assert!(
            version.is_match(row[col("version")]),
            "version of {test}: {:?}",
            row[col("version")]
        );
        assert_eq!(row[col("job_id")], "h32test");
        // RocksDB writes its own LOG (its version is checked above), and
        // the RocksDB that librocksdb-sys bundles records no git sha in it,
        // so that column stays empty.
        if !matches!(engine, Some("rocksdb" | "blobdb")) {
            assert_eq!(row[col("githash")], &sha[..sha.len().min(10)]);
        }
        assert!(!row[col("date")].is_empty());
        if !read_only && !rocksdb {
            // The script rounds ingest to 0.1 GB, so at this size the
            // figure is coarse; it must still be there.
            let w: f64 = row[col("w_amp")].parse().expect("w_amp");
            assert!(w > 0.0, "w_amp of {test} is {w}");
        }
    }
    assert!(
        rows.iter().any(|r| !r[col("rss")].is_empty()),
        "no job has an rss sample\n{report}"
    );
}
