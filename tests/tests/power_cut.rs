//! Crash tests by power cut, through `crash_test run --power-cut 1`, for
//! every engine compiled in (see `vmemkv_tests::crash::powercut`). CI runs
//! the short form; `VMEMKV_POWERCUT_CYCLES` sets the cuts per mode.
//!
//! Needs root, loop devices and xfsprogs (`scripts/test.sh` installs it).
//! Without root the tests say so and pass; as root a rig that cannot be
//! built fails them.

use std::process::Command;

use vmemkv_compat::EngineKind;
use vmemkv_tests::crash::image;

fn cycles(default: usize) -> usize {
    std::env::var("VMEMKV_POWERCUT_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether this process can cut power; prints why not when it cannot.
fn can_cut() -> bool {
    match image::unavailable() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Some(why) if unsafe { libc::geteuid() } != 0 => {
            println!("skipped: {why}");
            false
        }
        Some(why) => panic!("{why}"),
        None => true,
    }
}

/// Runs the campaign and returns its summary lines (one per mode).
fn power_cuts(engine: EngineKind, mode: &str, cycles: usize, extra: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_crash_test"))
        .args(["run", "--engine", engine.as_str(), "--mode", mode])
        .args(["--cycles", &cycles.to_string(), "--keys", "1000"])
        .args(["--kill-ms", "100:1500", "--power-cut", "1"])
        .args(extra)
        .output()
        .expect("run crash_test");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.lines().any(|l| l.starts_with("power_cut ")) && !stdout.contains("harness error"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
    (out.status.success(), stdout)
}

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// vmemkv in one mode: no violation, no state outside a prefix, and the
/// cuts really dropped unsynced writes (so the run checked something).
fn vmemkv(mode: &str) {
    if !can_cut() {
        return;
    }
    let n = cycles(12);
    // Small segments, so rollovers and seals fall inside the cut windows;
    // 1% maintenance, so checkpoints leave unsynced tails to lose.
    let (ok, out) = power_cuts(
        EngineKind::Vmemkv,
        mode,
        n,
        &["--option", "segment_size=4194304", "--maintenance-pct", "1"],
    );
    assert!(ok, "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("power_cut "))
        .unwrap_or_default();
    assert_eq!(field(line, "cycles"), n as u64, "{line}");
    assert_eq!(field(line, "violations"), 0, "{line}");
    assert_eq!(field(line, "not_prefix"), 0, "{line}");
    assert!(field(line, "writes_durable") > 0, "{line}");
}

#[test]
fn vmemkv_sync() {
    vmemkv("sync");
}

#[test]
fn vmemkv_nosync() {
    vmemkv("nosync");
}

#[test]
fn vmemkv_disable_wal() {
    vmemkv("disable_wal");
}

/// The meta-test: a writer that declares its no-sync writes durable as soon
/// as they return must fail the campaign, which proves it sees a loss.
#[test]
fn a_writer_claiming_nosync_writes_durable_is_caught() {
    if !can_cut() {
        return;
    }
    let (ok, out) = power_cuts(
        EngineKind::Vmemkv,
        "nosync",
        cycles(6),
        &["--claim-durable", "1", "--maintenance-pct", "0"],
    );
    assert!(!ok, "the broken writer passed:\n{out}");
    assert!(out.contains("lost a durable write"), "{out}");
}

/// A rival's violations are findings, printed and kept in
/// docs/reliability.md, not failures of this test; the harness must run.
#[cfg(any(
    feature = "rocksdb",
    feature = "lmdb",
    feature = "fjall",
    feature = "sparkey"
))]
fn rival(engine: EngineKind) {
    if !can_cut() {
        return;
    }
    let (_, out) = power_cuts(engine, "all", cycles(3), &["--maintenance-pct", "1"]);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("power_cut ")).count(),
        3,
        "{out}"
    );
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_all_modes() {
    rival(EngineKind::RocksDb);
}

#[cfg(feature = "rocksdb")]
#[test]
fn blobdb_all_modes() {
    rival(EngineKind::BlobDb);
}

#[cfg(feature = "lmdb")]
#[test]
fn lmdb_all_modes() {
    rival(EngineKind::Lmdb);
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_all_modes() {
    rival(EngineKind::Fjall);
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_blob_all_modes() {
    rival(EngineKind::FjallBlob);
}

#[cfg(feature = "sparkey")]
#[test]
fn sparkey_all_modes() {
    rival(EngineKind::Sparkey);
}
