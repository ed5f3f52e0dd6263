//! Fault injection campaigns (see `vmemkv_tests::faults`): every file kind
//! the engine writes is truncated, bit-flipped, partly zeroed or deleted,
//! then the database is reopened and read in full. CI runs a few hundred
//! cases per engine; `VMEMKV_FAULT_CASES` raises the count.

use std::path::Path;

use vmemkv_compat::{EngineKind, EngineOptions};
use vmemkv_tests::crash::{encode_value, key_name};
use vmemkv_tests::faults::{
    build_template, run_case, Campaign, Case, Class, Fault, Maintenance, Outcome, Table,
};

fn cases(default: usize) -> usize {
    std::env::var("VMEMKV_FAULT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("vmemkv-faults-")
        .tempdir()
        .unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn vmemkv_opts() -> EngineOptions {
    // 1 MiB segments: a template spans several, so every segment role
    // (sealed, active, below and above the checkpoint) gets damaged.
    EngineOptions::default()
        .set("segment_size", 1 << 20)
        .set("background", false)
}

fn campaign(engine: EngineKind, opts: EngineOptions, n: usize) -> Table {
    let dir = scratch();
    let c = Campaign {
        engine,
        opts,
        nkeys: 400,
        nops: 900,
        cases: n,
        seed: 0x5eed_fa17,
        dir: dir.path().to_path_buf(),
    };
    let table = c.run().unwrap_or_else(|e| panic!("campaign: {e}"));
    println!("{table}");
    table
}

fn assert_no_violations(t: &Table) {
    assert_eq!(t.count(Class::Violation), 0, "violations:\n{t}");
}

/// Engine bug (reported to the lead, regression test
/// `vmemkv_bit_flip_below_checkpoint_is_not_returned`): vmemkv does not
/// verify the checksum of a value read through a checkpoint's locator, so a
/// flipped bit or zeroed block in a segment below the checkpoint LSN is
/// returned as data.
fn is_known_unchecked_value_bug(v: &str) -> bool {
    v.contains(".seg (") && v.contains("returned a value never written")
}

#[test]
fn vmemkv_fault_campaign() {
    let t = campaign(EngineKind::Vmemkv, vmemkv_opts(), cases(400));
    // Every kind of file was damaged in every way.
    for fk in [
        "segment",
        "checkpoint",
        "manifest",
        "lock",
        "info-log",
        "log-end",
        "app-meta",
    ] {
        assert!(
            t.rows.keys().filter(|(k, _)| k == fk).count() == 4,
            "file kind {fk} not covered:\n{t}"
        );
    }
    // Every acknowledged write comes back or the open names the damage.
    assert_eq!(t.count(Class::LossSilent), 0, "silent losses:\n{t}");
    let other: Vec<&String> = t
        .violations
        .iter()
        .filter(|v| !is_known_unchecked_value_bug(v))
        .collect();
    assert!(other.is_empty(), "violations: {other:#?}\n{t}");
    println!(
        "known engine bug (unchecked values below the checkpoint): {} cases",
        t.violations.len() - other.len()
    );
}

/// Strict form of the campaign: no violation of any kind.
#[test]
fn vmemkv_fault_campaign_strict() {
    assert_no_violations(&campaign(EngineKind::Vmemkv, vmemkv_opts(), cases(400)));
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_fault_campaign() {
    let t = campaign(EngineKind::RocksDb, EngineOptions::default(), cases(200));
    assert_no_violations(&t);
}

#[cfg(feature = "lmdb")]
#[test]
fn lmdb_fault_campaign() {
    // LMDB keeps no checksums: a flipped bit in a value is returned as is.
    // The campaign documents that; only panics and hangs fail the test.
    // A 32 MiB map keeps data.mdb small enough to copy for every case.
    let opts = EngineOptions::default().set("map_size", 32 << 20);
    let t = campaign(EngineKind::Lmdb, opts, cases(200));
    for v in &t.violations {
        assert!(
            !v.contains("panic") && !v.contains("hang"),
            "lmdb: {v}\n{t}"
        );
    }
}

/// The harness itself must notice a wrong value: a template whose value
/// bytes are rewritten in place (same length, same checksum-free engine
/// view) has to be reported as a violation, not as clean.
#[test]
fn harness_detects_foreign_values() {
    let dir = scratch();
    let tpl = dir.path().join("tpl");
    let opts = vmemkv_opts();
    let mut w = build_template(
        EngineKind::Vmemkv,
        &tpl,
        &opts,
        50,
        200,
        Maintenance::None,
        7,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Pretend one key's last write never happened: its value on disk is
    // now "never written" from the harness's point of view.
    let k = (0..w.nkeys)
        .find(|&k| w.latest[k].is_some())
        .unwrap_or_else(|| panic!("no live key"));
    let s = w.latest[k].unwrap_or_default();
    w.written[k].remove(&s);
    let case = Case {
        template: 0,
        file: "LOG".into(),
        file_kind: "info-log",
        fault: Fault::BitFlip(Vec::new()),
    };
    let out = run_case(
        EngineKind::Vmemkv,
        &tpl,
        &dir.path().join("case"),
        &opts,
        &w,
        &case,
    );
    assert!(
        matches!(&out, Outcome::Violation(m) if m.contains(&String::from_utf8_lossy(&key_name(k)).to_string())),
        "{out:?}"
    );
    assert!(!encode_value(k, s).is_empty());
}

fn single(dir: &Path, m: Maintenance, file: &str, fault: Fault) -> Outcome {
    let tpl = dir.join("tpl");
    let opts = vmemkv_opts();
    let w = build_template(EngineKind::Vmemkv, &tpl, &opts, 300, 900, m, 11)
        .unwrap_or_else(|e| panic!("{e}"));
    run_case(
        EngineKind::Vmemkv,
        &tpl,
        &dir.join("case"),
        &opts,
        &w,
        &Case {
            template: 0,
            file: file.into(),
            file_kind: "",
            fault,
        },
    )
}

#[test]
fn vmemkv_missing_manifest_falls_back_to_full_replay() {
    let dir = scratch();
    let out = single(
        dir.path(),
        Maintenance::Checkpoint,
        "MANIFEST",
        Fault::Missing,
    );
    assert_eq!(out, Outcome::Clean);
}

#[test]
fn vmemkv_damaged_first_segment_is_reported_with_offset() {
    let dir = scratch();
    let out = single(
        dir.path(),
        Maintenance::None,
        "00000000.seg",
        Fault::ZeroBlock(4096),
    );
    match out {
        Outcome::Error(m) => assert!(m.contains("00000000.seg") && m.contains("offset"), "{m}"),
        Outcome::Loss { reported, .. } => assert!(reported),
        other => panic!("{other:?}"),
    }
}

/// Regression for the bug found by the campaign: a bit flipped inside a
/// stored value that lies below the checkpoint LSN (so recovery does not
/// re-verify its record) is returned by `get` as if it had been written.
/// Expected: `Corruption` naming the segment and offset, or the value lost.
#[test]
fn vmemkv_bit_flip_below_checkpoint_is_not_returned() {
    let dir = scratch();
    let tpl = dir.path().join("tpl");
    let opts = vmemkv_opts();
    let w = build_template(
        EngineKind::Vmemkv,
        &tpl,
        &opts,
        300,
        900,
        Maintenance::Checkpoint,
        11,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // A key whose last value was written before the checkpoint (seq <= 540)
    // and is stored in a segment, not inlined.
    let seg = std::fs::read(tpl.join("00000000.seg")).unwrap_or_else(|e| panic!("{e}"));
    let (k, at) = (0..w.nkeys)
        .filter_map(|k| {
            let s = w.latest[k].filter(|&s| s <= 540)?;
            let v = encode_value(k, s);
            (v.len() > 64).then_some(())?;
            let at = seg.windows(v.len()).position(|win| win == v.as_slice())?;
            Some((k, at))
        })
        .next()
        .unwrap_or_else(|| panic!("no stored value below the checkpoint"));
    let out = run_case(
        EngineKind::Vmemkv,
        &tpl,
        &dir.path().join("case"),
        &opts,
        &w,
        &Case {
            template: 0,
            file: "00000000.seg".into(),
            file_kind: "segment",
            fault: Fault::BitFlip(vec![(at as u64 + 40, 3)]),
        },
    );
    assert!(
        !matches!(out, Outcome::Violation(_)),
        "key {}: {out:?}",
        String::from_utf8_lossy(&key_name(k))
    );
}

/// Deleting the newest segment when the checkpoint lies in an earlier one
/// loses every write in it. The MANIFEST does not list segments; the seal
/// the rollover wrote into the previous segment is what makes recovery
/// report the loss instead of opening without those writes.
#[test]
fn vmemkv_missing_newest_segment_is_not_silent() {
    let dir = scratch();
    let tpl = dir.path().join("tpl");
    let opts = vmemkv_opts();
    let w = build_template(
        EngineKind::Vmemkv,
        &tpl,
        &opts,
        300,
        900,
        Maintenance::Checkpoint,
        11,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut segs: Vec<String> = std::fs::read_dir(&tpl)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    segs.sort();
    let last = segs.pop().unwrap_or_else(|| panic!("no segments"));
    assert!(!segs.is_empty(), "the template needs two segments");
    let out = run_case(
        EngineKind::Vmemkv,
        &tpl,
        &dir.path().join("case"),
        &opts,
        &w,
        &Case {
            template: 0,
            file: last,
            file_kind: "segment",
            fault: Fault::Missing,
        },
    );
    assert!(
        matches!(
            out,
            Outcome::Error(_) | Outcome::Loss { reported: true, .. }
        ),
        "{out:?}"
    );
}

/// Security basics: nothing the engine creates is group- or world-writable
/// (whatever the umask), and the directory holds only the engine's files.
#[test]
fn vmemkv_files_are_not_world_writable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch();
    let tpl = dir.path().join("tpl");
    build_template(
        EngineKind::Vmemkv,
        &tpl,
        &vmemkv_opts(),
        50,
        300,
        Maintenance::Checkpoint,
        3,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut n = 0;
    for ent in std::fs::read_dir(&tpl).unwrap_or_else(|e| panic!("{e}")) {
        let ent = ent.unwrap_or_else(|e| panic!("{e}"));
        let mode = ent
            .metadata()
            .unwrap_or_else(|e| panic!("{e}"))
            .permissions()
            .mode();
        let name = ent.file_name().to_string_lossy().into_owned();
        assert_eq!(mode & 0o022, 0, "{name} has mode {mode:o}");
        assert_ne!(
            vmemkv_tests::faults::file_kind(EngineKind::Vmemkv, &name),
            "other",
            "unexpected file {name}"
        );
        n += 1;
    }
    assert!(
        n >= 5,
        "expected segments, checkpoint, MANIFEST, LOCK and LOG"
    );
}
