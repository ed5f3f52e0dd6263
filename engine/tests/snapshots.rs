//! Snapshots under maintenance (issue 28): reorganize, splits, checkpoint,
//! defragment and key-order passes never change what a held snapshot reads;
//! what it pins is released once it is dropped; `statistics()` reports it.

mod common;

use std::collections::BTreeMap;

use common::*;
use vmemkv::{Bounds, Db, Options, Snapshot, WriteBatch};

fn read_all(db: &Db, snap: &Snapshot) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db
        .iter_at(snap, Bounds::all(), true)
        .unwrap_or_else(|e| panic!("iter_at: {e}"));
    it.seek_to_first();
    let mut m = BTreeMap::new();
    while it.valid() {
        m.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap_or_else(|e| panic!("iterator: {e}"));
    m
}

fn get_at(db: &Db, snap: &Snapshot, k: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    db.get_into_at(snap, k, &mut out, true)
        .unwrap_or_else(|e| panic!("get_into_at: {e}"))
        .then_some(out)
}

/// Overwrites and deletes every key twice over, with T1 merges, splits
/// (small shards), checkpoints, defragment and key ordering in between, and
/// checks after each step that the snapshot still reads what it read first.
#[test]
fn maintenance_never_changes_what_a_snapshot_reads() {
    let dir = tmp();
    let opts = Options {
        split_threshold: 300,
        ..opts()
    };
    let db = Db::open(dir.path(), opts).unwrap_or_else(|e| panic!("open: {e}"));
    let n = 2000u64;
    put_range(&db, n, 1, 300);
    for i in (0..n).step_by(7) {
        db.put(&key(i), b"tiny").unwrap_or_else(|e| panic!("{e}"));
    }
    let snap = db.snapshot();
    let want = read_all(&db, &snap);
    assert_eq!(want.len(), n as usize);
    let check = |what: &str| {
        assert_eq!(
            read_all(&db, &snap),
            want,
            "iterator at the snapshot after {what}"
        );
        for i in (0..n).step_by(97) {
            assert_eq!(
                get_at(&db, &snap, &key(i)).as_ref(),
                want.get(&key(i)),
                "get {i} at the snapshot after {what}"
            );
        }
    };
    put_range(&db, n, 2, 300);
    check("overwrites");
    db.reorganize().unwrap_or_else(|e| panic!("{e}"));
    check("reorganize");
    for i in (0..n).step_by(3) {
        db.delete(&key(i)).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut b = WriteBatch::new();
    b.delete_range(&key(100), &key(400));
    db.write(&vmemkv::WriteOptions::default(), &b)
        .unwrap_or_else(|e| panic!("{e}"));
    check("deletes");
    db.reorganize().unwrap_or_else(|e| panic!("{e}"));
    check("reorganize after deletes");
    db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
    check("checkpoint");
    put_range(&db, n, 3, 300);
    let segs_before = db.statistics().t2_segments;
    db.defragment().unwrap_or_else(|e| panic!("{e}"));
    check("defragment");
    db.compact_range(None, None)
        .unwrap_or_else(|e| panic!("{e}"));
    db.reorganize().unwrap_or_else(|e| panic!("{e}"));
    check("compact_range");
    let st = db.statistics();
    assert_eq!(st.snapshots, 1, "{st}");
    assert!(st.snapshot_versions > 0, "old versions are kept: {st}");
    assert!(
        st.t2_segments >= segs_before,
        "no segment a snapshot reads is retired: {segs_before} -> {}",
        st.t2_segments
    );
    assert!(st.to_string().contains("snapshots: count=1"), "{st}");
    // Live reads see the newest writes.
    assert_eq!(db.get(&key(1)).ok().flatten(), Some(value(1, 3, 300)));
    drop(snap);
    db.reorganize().unwrap_or_else(|e| panic!("{e}"));
    let st = db.statistics();
    assert_eq!(
        (st.snapshots, st.snapshot_versions),
        (0, 0),
        "released: {st}"
    );
    let r = db.defragment().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !r.retired_segments.is_empty(),
        "pinned segments are released: {r:?}"
    );
    let live = dump(&db);
    assert_eq!(live.len(), n as usize);
    assert_eq!(live.get(&key(0)), Some(&value(0, 3, 300)));
}

#[test]
fn a_snapshot_of_another_database_is_refused() {
    let (a, b) = (tmp(), tmp());
    let (da, db) = (open(a.path()), open(b.path()));
    let s = da.snapshot();
    let mut out = Vec::new();
    assert!(matches!(
        db.get_into_at(&s, b"k", &mut out, true),
        Err(vmemkv::Error::InvalidArgument(_))
    ));
    assert!(db.iter_at(&s, Bounds::all(), true).is_err());
}

/// A batch that deletes and inserts is seen whole by iterators and gets
/// of concurrent readers, with the T1 merges of a small append region going
/// on underneath.
#[test]
fn readers_never_see_half_a_batch_across_merges() {
    let dir = tmp();
    let opts = Options {
        split_threshold: 500,
        ..opts().background(true)
    };
    let db = Db::open(dir.path(), opts).unwrap_or_else(|e| panic!("open: {e}"));
    let keys: Vec<Vec<u8>> = (0..40u64).map(key).collect();
    let write = |v: u64| {
        let mut b = WriteBatch::new();
        for k in &keys {
            b.put(k, &v.to_le_bytes());
        }
        db.write(&vmemkv::WriteOptions::default(), &b)
            .unwrap_or_else(|e| panic!("{e}"));
    };
    write(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for v in 1..3000u64 {
                write(v);
                if v % 500 == 0 {
                    db.reorganize().unwrap_or_else(|e| panic!("{e}"));
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let mut rounds = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 20 {
            rounds += 1;
            let seen: Vec<Vec<u8>> = dump(&db).into_values().collect();
            assert_eq!(seen.len(), keys.len());
            assert!(
                seen.windows(2).all(|w| w[0] == w[1]),
                "torn iterator: {seen:?}"
            );
            let snap = db.snapshot();
            let first = get_at(&db, &snap, &keys[0]);
            for k in &keys {
                assert_eq!(get_at(&db, &snap, k), first, "torn snapshot gets");
            }
        }
    });
}
