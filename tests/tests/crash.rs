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

/// `crash_test run` for `engine` and `mode` with the CI key space and kill
/// window; callers add flags.
fn crash_test(engine: &str, mode: &str, cycles: usize) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crash_test"));
    cmd.args(["run", "--engine", engine, "--mode", mode]).args([
        "--cycles",
        &cycles.to_string(),
        "--keys",
        "1000",
        "--kill-ms",
        "20:200",
    ]);
    cmd
}

fn run(engine: EngineKind, mode: &str, cycles: usize) {
    let out = crash_test(engine.as_str(), mode, cycles)
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

/// Kills inside maintenance phases: every cycle arms one vmemkv failpoint
/// (checkpoint, defragment, retire, rollover, reorganize, split), so the
/// kill lands at that exact step rather than wherever the timer falls.
#[test]
fn vmemkv_failpoints_all_modes() {
    let cycles = cycles(48);
    let out = crash_test("vmemkv", "all", cycles)
        // A longer life per child than the random-kill tests, so most
        // cycles reach their armed step even on a loaded machine.
        .args(["--failpoints", "all", "--kill-ms", "200:600"])
        // Small segments and shards, so rollover, retire and split happen
        // within a cycle; sorted runs of 16 KiB (a child writes tens of KB), so their moves meet the
        // `defragment.relocated` kill too.
        .args([
            "--option",
            "segment_size=1048576",
            "--option",
            "split_threshold=64",
            "--option",
            "sorted_run_bytes=16384",
        ])
        .output()
        .expect("run crash_test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summaries: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("crash_test "))
        .collect();
    assert_eq!(summaries.len(), 3, "{stdout}");
    for s in &summaries {
        assert!(
            s.contains("violations=0") && s.contains(&format!("cycles={cycles} ")),
            "{stdout}"
        );
    }
    let fired: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("failpoint kills: "))
        .collect();
    assert_eq!(
        fired.len(),
        3,
        "every mode reports failpoint kills:\n{stdout}"
    );
    let distinct: std::collections::BTreeSet<&str> = fired
        .iter()
        .flat_map(|l| l.split_whitespace())
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
        .collect();
    assert!(
        fired.iter().all(|l| l.split_whitespace().count() >= 4) && distinct.len() >= 6,
        "most failpoints must fire: {distinct:?}\n{stdout}"
    );
    println!("{stdout}");
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

#[cfg(feature = "fjall")]
#[test]
fn fjall_all_modes() {
    run(EngineKind::Fjall, "all", cycles(15));
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_blob_all_modes() {
    run(EngineKind::FjallBlob, "all", cycles(15));
}

/// Sparkey flushes its log on every write call (fsync with `sync=true`),
/// so acknowledged writes survive a kill; the verifier's iterator check
/// prints "not applicable" for it.
#[cfg(feature = "sparkey")]
#[test]
fn sparkey_all_modes() {
    run(EngineKind::Sparkey, "all", cycles(15));
}
