//! Per-value checksums: a damaged value below the checkpoint LSN (never
//! replayed at open) must surface as `Corruption`, never as data.

mod common;

use common::*;
use vmemkv::{Bounds, Db, Error};
use vmemkv::{BufferMode, MultiScanOptions, ScanRange};

const N: u64 = 200;
const LEN: usize = 500;

/// Writes N values, checkpoints, then flips one byte inside key 0's value;
/// returns the damaged file's name.
fn damaged_db(dir: &std::path::Path) -> String {
    {
        let db = open(dir);
        for i in 0..N {
            db.put(&key(i), &value(i, 0, LEN))
                .unwrap_or_else(|e| panic!("put: {e}"));
        }
        db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
    }
    let path = seg_path(dir, 0);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let v = value(0, 0, LEN);
    let pos = bytes
        .windows(LEN)
        .position(|w| w == v.as_slice())
        .unwrap_or_else(|| panic!("value of key 0 not found in {}", path.display()));
    flip_byte(&path, pos + 100);
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn assert_corruption(e: &Error, file: &str) {
    match e {
        Error::Corruption(m) => assert!(m.contains(file) && m.contains("checksum"), "{m}"),
        other => panic!("expected Corruption, got {other}"),
    }
}

#[test]
fn get_reports_a_damaged_value_below_the_checkpoint() {
    let dir = tmp();
    let file = damaged_db(dir.path());
    let db: Db = open(dir.path());
    let mut out = Vec::new();
    match db.get_into(&key(0), &mut out) {
        Err(e) => assert_corruption(&e, &file),
        Ok(found) => panic!("damaged value returned (found={found})"),
    }
    assert!(out.is_empty(), "damaged bytes left in the output buffer");
    // Neighbours are intact.
    assert_eq!(db.get(&key(1)).ok().flatten(), Some(value(1, 0, LEN)));
    // Opting out of verification returns the (wrong) bytes: the flag works.
    assert!(db.get_into_opt(&key(0), &mut out, false).unwrap_or(false));
    assert_ne!(out, value(0, 0, LEN));
}

#[test]
fn iterator_stops_with_corruption_on_a_damaged_value() {
    let dir = tmp();
    let file = damaged_db(dir.path());
    let db = open(dir.path());
    let mut it = db.iter(Bounds::all());
    it.seek_to_first();
    assert!(!it.valid(), "iterator positioned on a damaged value");
    match it.status() {
        Err(e) => assert_corruption(&e, &file),
        Ok(()) => panic!("iterator status ok over a damaged value"),
    }
    let mut it = db.iter(Bounds::new(Some(&key(1)), None));
    it.seek_to_first();
    assert!(it.valid());
    assert_eq!(it.value(), value(1, 0, LEN).as_slice());
}

#[test]
fn multiscan_reports_a_damaged_value_on_both_paths() {
    let dir = tmp();
    let file = damaged_db(dir.path());
    let db = open(dir.path());
    let modes = [
        (false, BufferMode::Auto),
        (true, BufferMode::Auto),
        (true, BufferMode::PageCache),
        (true, BufferMode::Owned),
        (true, BufferMode::Direct),
    ];
    for (async_io, mode) in modes {
        // Cold, so that the buffered modes verify from their own buffers.
        db.evict_page_cache().unwrap_or_else(|e| panic!("{e}"));
        let args = MultiScanOptions {
            buffer_mode: mode,
            ..MultiScanOptions::with_async_io(vec![ScanRange::new(&key(0), &key(5))], async_io)
        };
        let mut ms = db.multi_scan(&args).unwrap_or_else(|e| panic!("{e}"));
        assert!(ms.next_range().unwrap_or(false));
        match ms.next_entry() {
            Err(e) => assert_corruption(&e, &file),
            Ok(more) => panic!("damaged value served (async={async_io}, {mode:?}, more={more})"),
        }
    }
}

#[test]
fn defragment_does_not_launder_a_damaged_value() {
    let dir = tmp();
    damaged_db(dir.path());
    let db = open(dir.path());
    // Overwrite everything but key 0 so its segment becomes a candidate.
    for i in 1..N {
        db.put(&key(i), &value(i, 1, LEN))
            .unwrap_or_else(|e| panic!("put: {e}"));
    }
    let _ = db.defragment();
    // Whether or not defragment moved anything, key 0 must not read back
    // as valid data with a fresh checksum.
    assert!(matches!(db.get(&key(0)), Err(Error::Corruption(_))));
}

/// A value read through the mapping is checked on its first read after
/// open and, while its pages stay in memory, not on every read (as RocksDB
/// does not re-check a block-cache hit); once the engine drops them from
/// the page cache, the next read checks it again and finds the damage.
#[test]
fn a_value_is_checked_again_once_its_pages_leave_memory() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = open(dir.path());
    for i in 0..N {
        db.put(&key(i), &value(i, 0, LEN))
            .unwrap_or_else(|e| panic!("put: {e}"));
    }
    assert_eq!(db.get(&key(0)).ok().flatten(), Some(value(0, 0, LEN)));
    // Damage key 0's value in place, through the file (the page cache the
    // mapping shares), as a bad disk would after the first read.
    let path = seg_path(dir.path(), 0);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let v = value(0, 0, LEN);
    let pos = bytes
        .windows(LEN)
        .position(|w| w == v.as_slice())
        .unwrap_or_else(|| panic!("value of key 0 not found"));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{e}"));
    f.write_at(&[bytes[pos + 100] ^ 0x5a], (pos + 100) as u64)
        .unwrap_or_else(|e| panic!("{e}"));
    f.sync_all().unwrap_or_else(|e| panic!("{e}"));
    // Key 1 was never read: its first read checks it (and passes).
    assert_eq!(db.get(&key(1)).ok().flatten(), Some(value(1, 0, LEN)));
    db.evict_page_cache().unwrap_or_else(|e| panic!("{e}"));
    let seg = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match db.get(&key(0)) {
        Err(e) => assert_corruption(&e, &seg),
        Ok(v) => panic!("a damaged value was returned after eviction: {v:?}"),
    }
    let mut it = db.iter(Bounds::all());
    it.seek_to_first();
    assert!(
        !it.valid(),
        "the iterator must stop at the damaged first value"
    );
    match it.status() {
        Err(e) => assert_corruption(&e, &seg),
        Ok(()) => panic!("the iterator passed over a damaged value"),
    }
}
