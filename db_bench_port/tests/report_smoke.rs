//! The comparison report at smoke scale, end to end: db_bench runs for every
//! engine compiled in, and the report files come out well formed.

use std::process::Command;

#[test]
fn smoke_report_writes_all_files_with_a_winner_row_per_workload() {
    let out = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let status = Command::new(env!("CARGO_BIN_EXE_vmemkv_report"))
        .arg("--scale=smoke")
        .arg(format!("--out={}", out.path().display()))
        .arg(format!("--work-dir={}", work.path().display()))
        .arg(format!("--db-bench={}", env!("CARGO_BIN_EXE_db_bench")))
        .arg(format!(
            "--rivals={}",
            u8::from(cfg!(feature = "rocksdb") && cfg!(feature = "lmdb"))
        ))
        .status()
        .expect("run vmemkv_report");
    assert!(status.success(), "vmemkv_report failed");
    for f in ["results.json", "report.md", "report.html"] {
        assert!(out.path().join(f).is_file(), "{f} missing");
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("results.json")).expect("read results.json"),
    )
    .expect("results.json parses");
    let runs = json["runs"].as_array().expect("runs array");
    assert!(!runs.is_empty());
    let ok = runs.iter().filter(|r| r["status"] == "ok").count();
    assert!(ok > 0, "no run succeeded");
    let failed: Vec<String> = runs
        .iter()
        .filter(|r| r["status"] == "failed")
        .map(|r| {
            format!(
                "{} {} {}: {}",
                r["scenario"], r["workload"], r["variant"], r["note"]
            )
        })
        .collect();
    assert!(failed.is_empty(), "failed runs:\n{}", failed.join("\n"));
    // A rival that does not fit a scenario's cgroup is a finding the report
    // lists; vmemkv not fitting is a regression.
    for r in runs.iter().filter(|r| r["status"] == "out of memory") {
        assert_ne!(r["is_vmemkv"], true, "vmemkv ran out of memory: {r}");
    }

    // Seed 004's fill-then-read section: every engine's round measured its
    // fill, its open and its reads.
    let seed = json["seed004"].as_array().expect("seed004 array");
    assert!(!seed.is_empty(), "seed-004 did not run");
    for r in seed {
        assert_eq!(r["status"], "ok", "seed-004 round failed: {r}");
        for f in ["fill_secs", "open_secs", "reads_per_sec"] {
            assert!(r[f].as_f64().is_some_and(|x| x > 0.0), "{f} missing: {r}");
        }
    }

    // The larger-than-memory cells: fio measured each cell's pattern in the
    // same run, and every engine's run says what it read from storage.
    let ltm_ok: Vec<&serde_json::Value> = runs
        .iter()
        .filter(|r| {
            r["scenario"].as_str().is_some_and(|s| s.ends_with("-LTM")) && r["status"] == "ok"
        })
        .collect();
    if !ltm_ok.is_empty() {
        for r in &ltm_ok {
            assert!(
                r["device_read_bytes"].as_u64().is_some(),
                "no device reads for {} {} {}",
                r["scenario"],
                r["workload"],
                r["variant"]
            );
        }
        let fio = json["device"]["runs"].as_array().expect("device.runs");
        assert!(!fio.is_empty(), "fio never ran: {}", json["device"]["fio"]);
        for f in fio.iter().filter(|f| f["pattern"] != "") {
            assert!(
                f["limit_ops"].as_f64().is_some_and(|x| x > 0.0),
                "no fio limit: {f}"
            );
        }
    }

    let md = std::fs::read_to_string(out.path().join("report.md")).expect("read report.md");
    assert!(md.contains("## Winner table"));
    assert!(md.contains("## Seed 004: fill, then random reads on 8 threads"));
    assert!(md.contains("| HaloDB (not run: Java"));
    for w in [
        "Insert",
        "Update (Zipf)",
        "Delete",
        "Get Miss",
        "Get Hit (Zipf)",
        "Get Hit (Uniform)",
        "Scan 100 (Zipf)",
        "Scan 100 (Uniform)",
        "YCSB-E",
        "MultiScan async (cold)",
        "MultiScan sync (cold)",
    ] {
        assert!(
            md.contains(&format!("| {w} |")),
            "winner table lacks a row for {w}"
        );
    }
    let html = std::fs::read_to_string(out.path().join("report.html")).expect("read report.html");
    assert!(html.contains("<svg"), "report.html has no chart");
}
