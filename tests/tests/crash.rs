//! Crash tests by SIGKILL, through the `crash_test` binary, for every engine
//! compiled in. CI runs the short form; set `VMEMKV_CRASH_CYCLES` for soaks.

use std::process::Command;

use vmemkv_compat::EngineKind;

fn cycles(default: usize) -> usize {
    std::env::var("VMEMKV_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(engine: EngineKind, mode: &str, cycles: usize) {
    let out = Command::new(env!("CARGO_BIN_EXE_crash_test"))
        .args(["run", "--engine", engine.as_str(), "--mode", mode])
        .args([
            "--cycles",
            &cycles.to_string(),
            "--keys",
            "1000",
            "--kill-ms",
            "20:200",
        ])
        .output()
        .expect("run crash_test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "crash_test {engine} {mode} failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(&format!("cycles={cycles} ")) && stdout.contains("violations=0"),
        "unexpected summary: {stdout}"
    );
    println!("{stdout}");
}

#[test]
fn vmemkv_sync() {
    run(EngineKind::Vmemkv, "sync", cycles(50));
}

#[test]
fn vmemkv_nosync() {
    run(EngineKind::Vmemkv, "nosync", cycles(50));
}

#[test]
fn vmemkv_disable_wal() {
    run(EngineKind::Vmemkv, "disable_wal", cycles(50));
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_all_modes() {
    run(EngineKind::RocksDb, "all", cycles(15));
}

#[cfg(feature = "lmdb")]
#[test]
fn lmdb_all_modes() {
    run(EngineKind::Lmdb, "all", cycles(15));
}
