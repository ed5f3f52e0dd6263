//! Runs that fit: `results.json` after every cell, `--budget` stopping at a
//! cell boundary with a report that says it is partial, and `--resume`
//! running only the missing cells. At smoke scale, one scenario, one
//! thread, vmemkv and the null engine's ceiling (11 cells of two runs).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const CELLS: usize = 11;

/// Runs per cell: vmemkv and the harness ceiling (`null-ceiling`), one
/// repeat each at smoke scale.
const PER_CELL: usize = 2;

fn report(out: &Path, work: &Path, db_bench: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vmemkv_report"))
        .args([
            "--scale=smoke",
            "--scenarios=8B-mem",
            "--threads=1",
            "--rivals=0",
        ])
        .arg(format!("--work-dir={}", work.display()))
        .arg(format!("--db-bench={}", db_bench.display()))
        .args(extra)
        .arg(format!("--out={}", out.display()))
        .output()
        .expect("run vmemkv_report")
}

fn results(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("read results.json");
    serde_json::from_str(&text).expect("results.json parses")
}

fn runs(v: &Value) -> &Vec<Value> {
    v["runs"].as_array().expect("runs array")
}

fn cells(v: &Value) -> std::collections::BTreeSet<String> {
    runs(v)
        .iter()
        .map(|r| {
            format!(
                "{} | {} | {}t",
                r["scenario"].as_str().unwrap_or(""),
                r["workload"].as_str().unwrap_or(""),
                r["threads"]
            )
        })
        .collect()
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn budget_stops_at_a_cell_boundary_and_resume_runs_only_what_is_missing() {
    let out = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let db_bench = Path::new(env!("CARGO_BIN_EXE_db_bench"));

    // A budget already spent: no cell starts, and the report says so.
    let o = report(out.path(), work.path(), db_bench, &["--budget=0.00001"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = results(out.path());
    assert!(runs(&v).is_empty());
    let missing = v["missing"].as_array().expect("missing");
    assert_eq!(missing.len(), CELLS, "{missing:?}");
    assert!(missing.iter().any(|m| m == "8B-mem | Get Miss | 1t"));
    let md = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(md.contains("**Partial run.**") && md.contains("* 8B-mem | Delete | 1t"));
    assert!(text(&o).contains("--resume="), "{}", text(&o));

    // Resumed without a budget: every cell, and no longer partial.
    let resume = format!("--resume={}", out.path().display());
    let o = report(out.path(), work.path(), db_bench, &[&resume]);
    assert!(o.status.success(), "{}", text(&o));
    let v = results(out.path());
    assert_eq!(cells(&v).len(), CELLS);
    assert_eq!(v["missing"].as_array().map(Vec::len), Some(0));
    assert_eq!(v["resumed_from"].as_array().map(Vec::len), Some(1));
    let md = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(!md.contains("Partial run"), "{md}");
    assert!(md.contains("Resumed (`--resume`)"));

    // Same starting state and warm-up, as the runs recorded them: write
    // cells on a fresh copy, read cells on the loaded corpus itself.
    for r in runs(&v) {
        let w = r["workload"].as_str().unwrap_or("");
        let want = match w {
            "Update (Zipf)" | "YCSB-E" | "Delete" => "copy",
            "Insert" => "empty",
            _ => "corpus",
        };
        assert_eq!(r["start"], want, "{w}");
        let args: Vec<&str> = r["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let db = args.iter().find(|a| a.starts_with("--db=")).expect("--db");
        let corpus = format!("/8B-mem/{}", r["engine"].as_str().unwrap_or(""));
        assert_eq!(db.ends_with(&corpus), want == "corpus", "{w}: {db}");
        let warm = !matches!(w, "Insert" | "Delete") && !w.contains("(cold)");
        assert_eq!(r["warmup"], warm, "{w}");
        let bench = r["bench"].as_str().unwrap_or("");
        let twice = format!("--benchmarks={bench},{bench}");
        assert_eq!(args.contains(&twice.as_str()), warm, "{w}: {args:?}");
    }
    assert!(md.contains("**Same starting state.**") && md.contains("**Warm-up.**"));
    // The null engine ran every cell as the harness's ceiling, never as a
    // rival (this run has none).
    assert!(md.contains("## Harness ceiling, 1 thread\n"), "{md}");
    assert!(runs(&v)
        .iter()
        .any(|r| r["engine"] == "null" && r["status"] == "ok"));
    assert!(md.contains("no rival"), "{md}");

    // Drop one cell: a resume runs it alone and keeps every other run as
    // it was (same figures, not measured again).
    let mut edited = v.clone();
    let kept: Vec<Value> = runs(&v)
        .iter()
        .filter(|r| r["workload"] != "Get Miss")
        .cloned()
        .collect();
    edited["runs"] = Value::Array(kept.clone());
    std::fs::write(
        out.path().join("results.json"),
        serde_json::to_string(&edited).expect("json"),
    )
    .expect("write results.json");
    let o = report(out.path(), work.path(), db_bench, &[&resume]);
    assert!(o.status.success(), "{}", text(&o));
    let v = results(out.path());
    assert_eq!(cells(&v).len(), CELLS);
    assert_eq!(runs(&v).len(), kept.len() + PER_CELL);
    for k in &kept {
        assert!(runs(&v).contains(k), "a kept run changed or was rerun: {k}");
    }
    assert_eq!(v["resumed_from"].as_array().map(Vec::len), Some(2));
}

/// A run killed part-way leaves every cell it finished in results.json:
/// the file is written after each cell, not only at the end.
#[test]
fn results_json_holds_every_finished_cell_of_a_killed_run() {
    let out = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    // db_bench behind a wrapper that kills the report at its ninth call:
    // two loads, three cells of two runs, then death during the fourth
    // cell. Two thread
    // counts make two cells per workload, so the third cell is written
    // only by the write after every cell (not the one after each workload).
    let wrapper = work.path().join("db_bench_then_kill");
    let count = work.path().join("calls");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nn=$(cat '{c}' 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > '{c}'\n\
             if [ $n -ge 9 ]; then kill -9 $PPID; exit 1; fi\nexec '{b}' \"$@\"\n",
            c = count.display(),
            b = env!("CARGO_BIN_EXE_db_bench")
        ),
    )
    .expect("write wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let threads = "--threads=1,2";
    let o = report(out.path(), &work.path().join("w"), &wrapper, &[threads]);
    assert!(
        !o.status.success(),
        "the report was not killed: {}",
        text(&o)
    );
    let v = results(out.path());
    assert_eq!(cells(&v).len(), 3, "{:?}", cells(&v));
    assert!(runs(&v).iter().all(|r| r["status"] == "ok"), "{v}");

    // And --resume finishes it.
    let resume = format!("--resume={}", out.path().display());
    let db_bench = Path::new(env!("CARGO_BIN_EXE_db_bench"));
    let o = report(
        out.path(),
        &work.path().join("w"),
        db_bench,
        &[&resume, threads],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(cells(&results(out.path())).len(), 2 * CELLS);
}

#[test]
fn bad_budget_and_resume_flags_are_refused_by_name() {
    let out = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let db_bench = Path::new(env!("CARGO_BIN_EXE_db_bench"));
    let o = report(out.path(), work.path(), db_bench, &["--budget=soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("--budget: expected a positive number of minutes, got 'soon'"));
    // Nothing to resume in an empty directory.
    let o = Command::new(env!("CARGO_BIN_EXE_vmemkv_report"))
        .args(["--scale=smoke", "--rivals=0"])
        .arg(format!("--resume={}", out.path().display()))
        .arg(format!("--work-dir={}", work.path().display()))
        .output()
        .expect("run vmemkv_report");
    assert!(!o.status.success());
    assert!(text(&o).contains("--resume: cannot read"), "{}", text(&o));
    // --resume writes where it reads; another --out is a contradiction.
    let o = report(
        out.path(),
        work.path(),
        db_bench,
        &[&format!("--resume={}", work.path().display())],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("--resume="), "{}", text(&o));
}
