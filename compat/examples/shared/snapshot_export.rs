// The body of the `snapshot_export` example, shared by
// `snapshot_export.rs` (the facade) and `snapshot_export_rocksdb.rs` (the
// rocksdb crate); see `shared/entities.rs` for how the two mains differ.
//
// An export of a consistent state while writes go on: a snapshot is taken,
// the live database changes, and the export (a file of hex key/value
// lines) still holds exactly the state at the snapshot.

use std::io::Write;

use rocksdb::{IteratorMode, Options, ReadOptions, WriteBatch, WriteOptions, DB};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn run(path: &std::path::Path) -> Result<(), rocksdb::Error> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    engine_options(&mut opts);
    let db = DB::open(&opts, path)?;
    let mut batch = WriteBatch::default();
    for i in 0..500u32 {
        batch.put(format!("account/{i:05}"), (i * 10).to_le_bytes());
    }
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    db.write_opt(batch, &sync)?;

    let snapshot = db.snapshot();
    // Writes after the snapshot: none of them may reach the export.
    for i in (0..500u32).step_by(7) {
        db.put(format!("account/{i:05}"), 0u32.to_le_bytes())?;
    }
    db.delete(b"account/00001")?;
    db.put(b"account/99999", b"late")?;

    let export_path = path.with_extension("export");
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(&export_path).expect("export file"));
    let mut total = 0u64;
    let mut lines = 0;
    for kv in snapshot.iterator(IteratorMode::Start) {
        let (k, v) = kv?;
        total += u64::from(u32::from_le_bytes(
            v[..4].try_into().expect("4-byte balance"),
        ));
        writeln!(out, "{} {}", hex(&k), hex(&v)).expect("write export");
        lines += 1;
    }
    out.flush().expect("flush export");
    drop(out);
    assert_eq!(lines, 500);
    assert_eq!(total, (0..500u64).map(|i| i * 10).sum::<u64>());
    let export = std::fs::read_to_string(&export_path).expect("read export");
    assert!(export.starts_with(&format!("{} ", hex(b"account/00000"))));
    assert!(export.contains(&hex(b"account/00001")));
    assert!(!export.contains(&hex(b"account/99999")));

    // Point reads through the snapshot, and through read options naming it.
    assert_eq!(
        snapshot.get(b"account/00007")?,
        Some(70u32.to_le_bytes().to_vec())
    );
    let mut ro = ReadOptions::default();
    ro.set_snapshot(&snapshot);
    assert_eq!(
        db.get_opt(b"account/00001", &ro)?,
        Some(10u32.to_le_bytes().to_vec())
    );
    drop(snapshot);

    // The live state has the later writes.
    assert_eq!(db.get(b"account/00007")?, Some(0u32.to_le_bytes().to_vec()));
    assert_eq!(db.get(b"account/00001")?, None);
    assert_eq!(db.iterator(IteratorMode::Start).count(), 500);
    let pinned = db.get_pinned(b"account/99999")?.expect("late write");
    assert_eq!(&*pinned, b"late");
    println!("snapshot_export: ok ({lines} accounts exported)");
    Ok(())
}

fn main() -> Result<(), rocksdb::Error> {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let path = std::env::args_os()
        .nth(1)
        .map_or_else(|| tmp.path().join("db"), std::path::PathBuf::from);
    run(&path)
}
