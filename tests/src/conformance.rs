//! The conformance suite: one set of properties, run against every engine.
//!
//! Each case takes a [`Harness`] that opens the engine under test in a fresh
//! directory, and panics (fails the test) when the engine departs from
//! RocksDB's semantics as the `vmemkv_compat` trait documents them.
//! `tests/tests/conformance.rs` instantiates every case for every engine
//! compiled in, and for the [`crate::model`] oracle; `tests/tests/meta.rs`
//! proves the cases catch a deliberately broken model. The column-family
//! group (the `families_*` cases) lives in `conformance/families.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tempfile::TempDir;
use vmemkv_compat::{
    collect_multi_scan, Capability, Db, DbIterator, EngineKind, EngineOptions, Entries, Error,
    MultiScanArgs, ReadOptions, Result, ScanRange, WriteBatch, WriteOptions,
};

use crate::model::{self, Fault, ModelDb};

mod families;
pub use families::{
    families_batches, families_default, families_drop, families_errors, families_isolation,
    families_ranges, families_reopen, families_snapshots,
};

type Opener = dyn Fn(&Path, &EngineOptions) -> Result<Box<dyn Db>> + Send + Sync;

/// How to open one engine under test.
pub struct Harness {
    /// Engine name, for messages.
    pub name: String,
    open: Box<Opener>,
    dir: TempDir,
}

impl Harness {
    /// A harness for a real engine from the registry.
    pub fn engine(kind: EngineKind) -> Harness {
        Harness::new(kind.as_str(), move |p, o| vmemkv_compat::open(kind, p, o))
    }

    /// A harness for the oracle, optionally broken on purpose.
    pub fn model(fault: Fault) -> Harness {
        Harness::new(&format!("model({fault:?})"), move |p, o| {
            ModelDb::open(p, o, fault)
        })
    }

    fn new(
        name: &str,
        open: impl Fn(&Path, &EngineOptions) -> Result<Box<dyn Db>> + Send + Sync + 'static,
    ) -> Harness {
        let dir = tempfile::Builder::new()
            .prefix("conformance-")
            .tempdir()
            .expect("create a temporary directory");
        Harness {
            name: name.to_string(),
            open: Box::new(open),
            dir,
        }
    }

    /// The database directory this harness uses.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("db")
    }

    /// Opens (or reopens) the engine at [`Harness::path`].
    pub fn open(&self) -> Box<dyn Db> {
        self.try_open()
            .unwrap_or_else(|e| panic!("{}: open failed: {e}", self.name))
    }

    /// Opens, returning the error instead of failing.
    pub fn try_open(&self) -> Result<Box<dyn Db>> {
        (self.open)(&self.path(), &EngineOptions::default())
    }
}

/// Whether `db` lacks `cap`; if so, prints (and the test log records)
/// `not applicable: <what> on <engine>: <why>`, naming the engine's own
/// reason from [`Db::capabilities`], so no part of the suite is skipped
/// silently. The caller then leaves out `what`, and only that.
pub fn not_applicable(db: &dyn Db, cap: Capability, what: &str) -> bool {
    match db.capabilities().why_not(cap) {
        None => false,
        Some(why) => {
            println!("not applicable: {what} on {}: {why}", db.name());
            true
        }
    }
}

/// [`not_applicable`], checked against the trait's own answer: an engine
/// that says it lacks `cap` must also refuse the call with `NotSupported`
/// (never answer it wrongly), and one that has it must not.
fn lacks(db: &dyn Db, cap: Capability, what: &str) -> bool {
    let lacks = not_applicable(db, cap, what);
    if lacks {
        let refused = match cap {
            Capability::OrderedIteration => matches!(db.iter(&ro()), Err(Error::NotSupported(_))),
            Capability::MultiScan => matches!(
                db.multi_scan(&ro(), &MultiScanArgs::new(vec![ScanRange::unbounded(b"a")])),
                Err(Error::NotSupported(_))
            ),
            Capability::Snapshots => matches!(db.snapshot(), Err(Error::NotSupported(_))),
            Capability::DeleteRange => {
                let mut b = WriteBatch::new();
                b.delete_range(b"a", b"b");
                matches!(db.write(&wo(), &b), Err(Error::NotSupported(_)))
            }
            Capability::ColumnFamilies => {
                matches!(db.create_cf("not-applicable"), Err(Error::NotSupported(_)))
            }
        };
        assert!(
            refused,
            "{}: says it lacks {cap} but does not refuse it with NotSupported",
            db.name()
        );
    }
    lacks
}

fn ro() -> ReadOptions {
    ReadOptions::default()
}

fn wo() -> WriteOptions {
    WriteOptions::default()
}

fn get(db: &dyn Db, key: &[u8]) -> Option<Vec<u8>> {
    db.get(&ro(), key)
        .unwrap_or_else(|e| panic!("{}: get({key:?}) failed: {e}", db.name()))
}

fn put(db: &dyn Db, key: &[u8], value: &[u8]) {
    db.put(&wo(), key, value)
        .unwrap_or_else(|e| panic!("{}: put({key:?}) failed: {e}", db.name()));
}

fn scan_all(db: &dyn Db, opts: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let it = db.iter(opts).expect("create iterator");
    Entries::from_first(it)
        .collect::<Result<Vec<_>>>()
        .expect("forward iteration")
}

fn scan_back(it: &mut dyn DbIterator) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    it.seek_to_last();
    while it.valid() {
        keys.push(it.key().to_vec());
        it.prev();
    }
    it.status().expect("backward iteration status");
    keys
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value_for(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| ((i * 31 + j * 7) % 251) as u8).collect()
}

fn assert_invalid_argument(r: Result<()>, what: &str) {
    match r {
        Err(Error::InvalidArgument(msg)) => assert!(!msg.is_empty(), "{what}: empty message"),
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

/// get / put / overwrite / delete, including a delete of a missing key.
pub fn point_operations(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    assert_eq!(get(db, b"missing"), None, "{}: fresh db has a key", h.name);
    put(db, b"k1", b"v1");
    assert_eq!(get(db, b"k1").as_deref(), Some(&b"v1"[..]));
    put(db, b"k1", b"v1-overwritten-with-a-longer-value");
    assert_eq!(
        get(db, b"k1").as_deref(),
        Some(&b"v1-overwritten-with-a-longer-value"[..])
    );
    put(db, b"k1", b"s");
    assert_eq!(get(db, b"k1").as_deref(), Some(&b"s"[..]));
    db.delete(&wo(), b"k1").expect("delete");
    assert_eq!(
        get(db, b"k1"),
        None,
        "{}: deleted key still readable",
        h.name
    );
    db.delete(&wo(), b"never-written")
        .expect("delete of a missing key succeeds");
    put(db, b"k1", b"again");
    assert_eq!(get(db, b"k1").as_deref(), Some(&b"again"[..]));

    // get_into clears the buffer and reports found / not found.
    let mut buf = b"stale".to_vec();
    assert!(db.get_into(&ro(), b"k1", &mut buf).expect("get_into"));
    assert_eq!(buf, b"again");
    assert!(!db.get_into(&ro(), b"nope", &mut buf).expect("get_into"));
    assert!(buf.is_empty(), "{}: get_into left stale bytes", h.name);

    // A synced write is readable like any other.
    db.put(&WriteOptions::sync(), b"synced", b"yes")
        .expect("sync put");
    assert_eq!(get(db, b"synced").as_deref(), Some(&b"yes"[..]));
}

/// Empty values, binary keys, prefix keys, and every value size class.
pub fn keys_and_values(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    put(db, b"empty", b"");
    assert_eq!(
        get(db, b"empty").as_deref(),
        Some(&b""[..]),
        "{}: an empty value must read back as present and empty",
        h.name
    );

    let binary: Vec<&[u8]> = vec![
        b"\x00",
        b"\x00\x00",
        b"\x00\xff",
        b"\xff",
        b"\xff\xff\xff",
        b"a",
        b"a\x00",
        b"a\x00\x00",
        b"ab",
        b"a\xff",
        b"abc",
    ];
    for (i, k) in binary.iter().enumerate() {
        put(db, k, format!("v{i}").as_bytes());
    }
    for (i, k) in binary.iter().enumerate() {
        assert_eq!(
            get(db, k),
            Some(format!("v{i}").into_bytes()),
            "{}: binary/prefix key {k:?}",
            h.name
        );
    }
    if !lacks(
        db,
        Capability::OrderedIteration,
        "keys_and_values: bytewise key order",
    ) {
        let mut expected: Vec<Vec<u8>> = binary.iter().map(|k| k.to_vec()).collect();
        expected.push(b"empty".to_vec());
        expected.sort();
        let got: Vec<Vec<u8>> = scan_all(db, &ro()).into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, expected, "{}: bytewise key order", h.name);
    }

    let limits = db.limits();
    for len in [0usize, 8, 9, 1024, 64 * 1024, 4 * 1024 * 1024] {
        if limits.max_value_size.is_some_and(|m| len > m) {
            continue;
        }
        let k = format!("size-{len}");
        let v = value_for(len, len);
        put(db, k.as_bytes(), &v);
        assert_eq!(
            get(db, k.as_bytes()).map(|x| x.len()),
            Some(len),
            "{}: value of {len} bytes",
            h.name
        );
        assert_eq!(
            get(db, k.as_bytes()),
            Some(v),
            "{}: {len}-byte value",
            h.name
        );
    }

    if let Some(max) = limits.max_key_size {
        let k = vec![b'k'; max];
        put(db, &k, b"at the key limit");
        assert_eq!(get(db, &k).as_deref(), Some(&b"at the key limit"[..]));
        let too_long = vec![b'k'; max + 1];
        assert_invalid_argument(
            db.put(&wo(), &too_long, b"x"),
            &format!("{}: key of max+1 bytes", h.name),
        );
        let mut b = WriteBatch::new();
        b.put(b"fine", b"x");
        b.put(&too_long, b"x");
        assert_invalid_argument(db.write(&wo(), &b), "batch with an oversized key");
        assert_eq!(
            get(db, b"fine"),
            None,
            "{}: a rejected batch must apply nothing",
            h.name
        );
    }
    if let Some(max) = limits.max_value_size.filter(|&m| m <= 64 * 1024 * 1024) {
        let v = vec![7u8; max];
        put(db, b"max-value", &v);
        assert_eq!(get(db, b"max-value").map(|x| x.len()), Some(max));
        let too_big = vec![7u8; max + 1];
        assert_invalid_argument(
            db.put(&wo(), b"too-big", &too_big),
            &format!("{}: value of max+1 bytes", h.name),
        );
        assert_eq!(get(db, b"too-big"), None);
    }
}

/// Batches apply every update, in order, with the last write to a key
/// winning; delete_range removes `[begin, end)` only.
pub fn write_batch(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    for i in 0..20 {
        put(db, &key(i), b"old");
    }
    let mut b = WriteBatch::new();
    b.put(b"batch-a", b"1");
    b.put(b"batch-b", b"2");
    b.delete(&key(0));
    b.put(b"batch-a", b"last-wins");
    b.put(b"batch-c", b"3");
    b.delete(b"batch-c");
    b.delete_range(&key(5), &key(10));
    b.put(&key(7), b"re-put after range delete");
    assert_eq!(b.len(), 8);
    assert!(b.data_size() > 12);
    db.write(&wo(), &b).expect("write batch");

    assert_eq!(get(db, b"batch-a").as_deref(), Some(&b"last-wins"[..]));
    assert_eq!(get(db, b"batch-b").as_deref(), Some(&b"2"[..]));
    assert_eq!(
        get(db, b"batch-c"),
        None,
        "{}: put then delete in one batch",
        h.name
    );
    assert_eq!(get(db, &key(0)), None);
    for i in 5..10 {
        let expect = (i == 7).then(|| b"re-put after range delete".to_vec());
        assert_eq!(get(db, &key(i)), expect, "{}: delete_range at {i}", h.name);
    }
    for i in (1..5).chain(10..20) {
        assert_eq!(
            get(db, &key(i)).as_deref(),
            Some(&b"old"[..]),
            "{}: key {i}",
            h.name
        );
    }

    let empty = WriteBatch::new();
    db.write(&WriteOptions::sync(), &empty)
        .expect("an empty batch is fine");

    let mut b = WriteBatch::new();
    b.put(b"s1", b"x");
    b.put(b"s2", b"y");
    db.write(&WriteOptions::sync(), &b).expect("synced batch");
    assert_eq!(get(db, b"s2").as_deref(), Some(&b"y"[..]));
    b.clear();
    assert!(b.is_empty());
}

fn check_cursor_on_empty(it: &mut dyn DbIterator, name: &str) {
    assert!(!it.valid(), "{name}: new iterator is valid");
    it.seek_to_first();
    assert!(!it.valid(), "{name}: seek_to_first on empty");
    it.seek_to_last();
    assert!(!it.valid(), "{name}: seek_to_last on empty");
    it.seek(b"a");
    assert!(!it.valid(), "{name}: seek on empty");
    it.seek_for_prev(b"a");
    assert!(!it.valid(), "{name}: seek_for_prev on empty");
    it.next();
    it.prev();
    assert!(!it.valid());
    assert_eq!(it.key(), b"", "{name}: key() of an invalid iterator");
    it.status().expect("status on empty");
}

/// Every cursor move on an empty DB, a one-key DB and a 10k-key DB.
pub fn iterators(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    if lacks(db, Capability::OrderedIteration, "iterators") {
        return;
    }
    check_cursor_on_empty(db.iter(&ro()).expect("iter").as_mut(), &h.name);

    put(db, b"m", b"only");
    {
        let mut it = db.iter(&ro()).expect("iter");
        it.seek_to_first();
        assert!(it.valid());
        assert_eq!((it.key(), it.value()), (&b"m"[..], &b"only"[..]));
        it.next();
        assert!(!it.valid());
        it.seek_to_last();
        assert_eq!(it.key(), b"m");
        it.prev();
        assert!(!it.valid());
        it.seek(b"a");
        assert_eq!(it.key(), b"m", "{}: seek before the only key", h.name);
        it.seek(b"m");
        assert_eq!(it.key(), b"m");
        it.seek(b"z");
        assert!(!it.valid(), "{}: seek past the only key", h.name);
        it.seek_for_prev(b"z");
        assert_eq!(it.key(), b"m");
        it.seek_for_prev(b"a");
        assert!(!it.valid(), "{}: seek_for_prev before the only key", h.name);
    }
    db.delete(&wo(), b"m").expect("delete");
    check_cursor_on_empty(db.iter(&ro()).expect("iter").as_mut(), &h.name);

    // 10k keys with gaps: only even indices exist.
    let n = 10_000;
    let mut b = WriteBatch::new();
    for i in (0..2 * n).step_by(2) {
        b.put(&key(i), &value_for(i, 12));
        if b.len() == 1000 {
            db.write(&wo(), &b).expect("load");
            b.clear();
        }
    }
    db.write(&wo(), &b).expect("load");
    let expected: Vec<Vec<u8>> = (0..2 * n).step_by(2).map(key).collect();

    let all = scan_all(db, &ro());
    assert_eq!(all.len(), n, "{}: forward count", h.name);
    assert!(
        all.iter().map(|(k, _)| k).eq(expected.iter()),
        "{}: forward order",
        h.name
    );
    assert!(all.iter().all(|(k, v)| {
        let i: usize = std::str::from_utf8(&k[3..])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        *v == value_for(i, 12)
    }));
    let mut it = db.iter(&ro()).expect("iter");
    let back = scan_back(it.as_mut());
    assert!(
        back.iter().eq(expected.iter().rev()),
        "{}: backward order",
        h.name
    );

    // seek to absent keys, before the first and after the last.
    it.seek(&key(1001));
    assert_eq!(it.key(), key(1002), "{}: seek to an absent key", h.name);
    it.seek(b"");
    assert_eq!(it.key(), key(0));
    it.seek(b"a");
    assert_eq!(it.key(), key(0), "{}: seek before the first key", h.name);
    it.seek(b"zzz");
    assert!(!it.valid(), "{}: seek after the last key", h.name);
    it.seek_for_prev(&key(1001));
    assert_eq!(
        it.key(),
        key(1000),
        "{}: seek_for_prev to an absent key",
        h.name
    );
    it.seek_for_prev(&key(1000));
    assert_eq!(
        it.key(),
        key(1000),
        "{}: seek_for_prev to a present key",
        h.name
    );
    it.seek_for_prev(b"a");
    assert!(!it.valid(), "{}: seek_for_prev before the first", h.name);
    it.seek_for_prev(b"zzz");
    assert_eq!(
        it.key(),
        key(2 * n - 2),
        "{}: seek_for_prev after the last",
        h.name
    );

    // Direction changes, including prev right after seek.
    it.seek(&key(500));
    it.prev();
    assert_eq!(it.key(), key(498), "{}: prev after seek", h.name);
    it.next();
    assert_eq!(it.key(), key(500));
    it.next();
    it.next();
    assert_eq!(it.key(), key(504));
    it.prev();
    assert_eq!(it.key(), key(502), "{}: prev after next", h.name);
    it.seek_for_prev(&key(801));
    it.next();
    assert_eq!(it.key(), key(802), "{}: next after seek_for_prev", h.name);
    it.seek_to_first();
    it.prev();
    assert!(!it.valid(), "{}: prev from the first key", h.name);
    it.seek_to_last();
    it.next();
    assert!(!it.valid(), "{}: next from the last key", h.name);
    it.status().expect("status");
    drop(it);

    // Bounds, both directions.
    let opts = ro().with_bounds(Some(&key(100)), Some(&key(200)));
    let bounded = scan_all(db, &opts);
    let want: Vec<Vec<u8>> = (100..200).step_by(2).map(key).collect();
    assert!(
        bounded.iter().map(|(k, _)| k).eq(want.iter()),
        "{}: bounded forward",
        h.name
    );
    let mut it = db.iter(&opts).expect("iter");
    assert!(
        scan_back(it.as_mut()).iter().eq(want.iter().rev()),
        "{}: bounded backward",
        h.name
    );
    it.seek(&key(50));
    assert_eq!(it.key(), key(100), "{}: seek below the lower bound", h.name);
    it.prev();
    assert!(!it.valid(), "{}: prev past the lower bound", h.name);
    it.seek(&key(300));
    assert!(!it.valid(), "{}: seek above the upper bound", h.name);
    it.seek_for_prev(&key(300));
    assert_eq!(
        it.key(),
        key(198),
        "{}: seek_for_prev above the upper bound",
        h.name
    );
    it.next();
    assert!(!it.valid(), "{}: next past the upper bound", h.name);
    it.seek_to_last();
    assert_eq!(it.key(), key(198));
    it.seek_for_prev(&key(10));
    assert!(
        !it.valid(),
        "{}: seek_for_prev below the lower bound",
        h.name
    );
    drop(it);
    let only_upper = ro().with_bounds(None, Some(&key(6)));
    let got: Vec<_> = scan_all(db, &only_upper)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        got,
        vec![key(0), key(2), key(4)],
        "{}: upper bound only",
        h.name
    );
    let only_lower = ro().with_bounds(Some(&key(2 * n - 5)), None);
    let got: Vec<_> = scan_all(db, &only_lower)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        got,
        vec![key(2 * n - 4), key(2 * n - 2)],
        "{}: lower bound only",
        h.name
    );
    let empty_window = ro().with_bounds(Some(&key(101)), Some(&key(102)));
    assert!(
        scan_all(db, &empty_window).is_empty(),
        "{}: empty window",
        h.name
    );
}

/// multi_get returns one answer per key, in order.
pub fn multi_get(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    put(db, b"a", b"1");
    put(db, b"c", b"3");
    put(db, b"e", b"");
    let keys: Vec<&[u8]> = vec![b"a", b"b", b"c", b"a", b"e"];
    let got: Vec<Option<Vec<u8>>> = db
        .multi_get(&ro(), &keys)
        .into_iter()
        .map(|r| r.expect("multi_get"))
        .collect();
    assert_eq!(
        got,
        vec![
            Some(b"1".to_vec()),
            None,
            Some(b"3".to_vec()),
            Some(b"1".to_vec()),
            Some(Vec::new())
        ],
        "{}: multi_get",
        h.name
    );
}

fn expected_scan(db: &dyn Db, ranges: &[ScanRange]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    ranges
        .iter()
        .map(|r| {
            let opts = ro().with_bounds(r.start.as_deref(), r.limit.as_deref());
            scan_all(db, &opts)
        })
        .collect()
}

/// MultiScan equals one bounded iterator per range, sync and async, and
/// rejects what RocksDB rejects.
pub fn multi_scan(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    if lacks(db, Capability::MultiScan, "multi_scan") {
        return;
    }
    for i in 0..3000 {
        // Mix inline-sized and large values.
        let len = if i % 5 == 0 { 8 } else { 100 + i % 900 };
        put(db, &key(i), &value_for(i, len));
    }
    let ranges = vec![
        ScanRange::new(&key(10), &key(20)),
        ScanRange::new(&key(15), &key(16)),
        ScanRange::new(&key(100), &key(100 + 150)),
        ScanRange::new(b"key0002500x", b"key0002501"),
        ScanRange::new(&key(2990), b"zzzz"),
        ScanRange::unbounded(&key(2995)),
    ];
    let want = expected_scan(db, &ranges);
    assert_eq!(want[0].len(), 10);
    assert!(want[3].is_empty());
    assert_eq!(want[5].len(), 5);
    for use_async_io in [false, true] {
        for max_prefetch_size in [0u64, 1 << 30] {
            let args = MultiScanArgs {
                ranges: ranges.clone(),
                use_async_io,
                io_coalesce_threshold: 16 * 1024,
                max_prefetch_size,
            };
            let mut ms = db.multi_scan(&ro(), &args).expect("multi_scan");
            let got = collect_multi_scan(ms.as_mut()).expect("multi_scan results");
            assert_eq!(got.len(), want.len(), "{}: one result per range", h.name);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g == w,
                    "{}: multiscan range {i} (async={use_async_io}) differs",
                    h.name
                );
            }
        }
    }

    // Skipping a range part-way: the next range still starts at its start.
    let mut ms = db
        .multi_scan(&ro(), &MultiScanArgs::new(ranges.clone()))
        .expect("multi_scan");
    assert!(ms.next_range().expect("range 0"));
    assert!(ms.next_entry().expect("entry"));
    assert_eq!(ms.key(), key(10));
    assert!(ms.next_range().expect("range 1"));
    assert_eq!(ms.range_index(), 1);
    assert!(ms.next_entry().expect("entry"));
    assert_eq!(ms.key(), key(15));
    assert!(!ms.next_entry().expect("end of range 1"));
    drop(ms);

    let bad: Vec<(&str, Vec<ScanRange>)> = vec![
        ("empty", vec![]),
        (
            "no start",
            vec![ScanRange {
                start: None,
                limit: Some(b"b".to_vec()),
            }],
        ),
        ("start == limit", vec![ScanRange::new(b"b", b"b")]),
        ("start > limit", vec![ScanRange::new(b"c", b"b")]),
        (
            "out of order",
            vec![ScanRange::new(b"c", b"d"), ScanRange::new(b"a", b"b")],
        ),
    ];
    for (what, ranges) in bad {
        match db.multi_scan(&ro(), &MultiScanArgs::new(ranges)) {
            Err(Error::InvalidArgument(_)) => {}
            Err(e) => panic!(
                "{}: multiscan {what}: expected InvalidArgument, got {e}",
                h.name
            ),
            Ok(_) => panic!(
                "{}: multiscan {what}: expected InvalidArgument, got Ok",
                h.name
            ),
        }
    }
}

/// Data survives close and reopen; deletes do too.
pub fn persistence(h: &Harness) {
    {
        let db = h.open();
        for i in 0..500 {
            put(db.as_ref(), &key(i), &value_for(i, i % 300));
        }
        db.delete(&wo(), &key(7)).expect("delete");
        let mut b = WriteBatch::new();
        b.put(b"batched", b"yes");
        b.delete_range(&key(100), &key(110));
        db.write(&WriteOptions::sync(), &b).expect("batch");
        // Maintenance may or may not exist; data must survive either way.
        let _ = db.flush();
        let _ = db.checkpoint();
        put(db.as_ref(), b"after-checkpoint", b"tail");
    }
    let db = h.open();
    let db = db.as_ref();
    for i in 0..500 {
        let want = (i != 7 && !(100..110).contains(&i)).then(|| value_for(i, i % 300));
        assert_eq!(get(db, &key(i)), want, "{}: key {i} after reopen", h.name);
    }
    assert_eq!(get(db, b"batched").as_deref(), Some(&b"yes"[..]));
    assert_eq!(get(db, b"after-checkpoint").as_deref(), Some(&b"tail"[..]));
    if !lacks(
        db,
        Capability::OrderedIteration,
        "persistence: the full scan after reopen",
    ) {
        assert_eq!(scan_all(db, &ro()).len(), 500 - 1 - 10 + 2);
    }
}

/// A second open of the same path fails while the first is open, with an
/// error that names the lock; after close, opening works again, even while
/// a child forked during the open lives.
pub fn locking(h: &Harness) {
    let first = h.open();
    put(first.as_ref(), b"k", b"v");
    match h.try_open() {
        Ok(_) => panic!("{}: a second open of an open database succeeded", h.name),
        Err(e @ (Error::Busy(_) | Error::IoError(_))) => {
            let msg = e.to_string().to_ascii_lowercase();
            assert!(
                msg.contains("lock"),
                "{}: lock error must name the lock: {e}",
                h.name
            );
        }
        Err(e) => panic!("{}: second open: expected Busy or IoError, got {e}", h.name),
    }
    drop(first);
    let again = h.open();
    assert_eq!(get(again.as_ref(), b"k").as_deref(), Some(&b"v"[..]));
    // A child forked while the database is open (any thread may spawn a
    // process) must not keep it locked after the parent closes it: an
    // `flock` would be inherited, a POSIX record lock is not.
    // SAFETY: the child only sleeps and exits (async-signal-safe).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::sleep(30);
            libc::_exit(0);
        }
    }
    drop(again);
    let reopened = h.try_open();
    // SAFETY: signals and reaps the child forked above.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    if let Err(e) = reopened {
        panic!("{}: reopen while a forked child lives: {e}", h.name);
    }
}

/// Maintenance calls either work or say NotSupported; data stays intact.
pub fn maintenance(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    for i in 0..2000 {
        put(db, &key(i), &value_for(i, 64));
    }
    for i in (0..2000).step_by(3) {
        db.delete(&wo(), &key(i)).expect("delete");
    }
    let calls: Vec<(&str, Result<()>)> = vec![
        ("flush", db.flush()),
        ("compact_range", db.compact_range(None, None)),
        (
            "compact_range (bounded)",
            db.compact_range(Some(&key(100)), Some(&key(900))),
        ),
        ("checkpoint", db.checkpoint()),
        ("defragment", db.defragment()),
        ("reorganize", db.reorganize()),
        ("wait_for_background_work", db.wait_for_background_work()),
    ];
    for (what, r) in calls {
        match r {
            Ok(()) | Err(Error::NotSupported(_)) => {}
            Err(e) => panic!("{}: {what} failed: {e}", h.name),
        }
    }
    for i in 0..2000 {
        let want = (i % 3 != 0).then(|| value_for(i, 64));
        assert_eq!(
            get(db, &key(i)),
            want,
            "{}: key {i} after maintenance",
            h.name
        );
    }
    if !lacks(
        db,
        Capability::OrderedIteration,
        "maintenance: the full scan after maintenance",
    ) {
        assert_eq!(scan_all(db, &ro()).len(), 2000 - 667);
    }
}

/// 10,000 random operations against the BTreeMap model, comparing every
/// result, with reopens along the way.
pub fn differential(h: &Harness) {
    differential_ops(h, 10_000, 0x5eed);
}

/// The differential test with a chosen length and seed.
pub fn differential_ops(h: &Harness, ops: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut oracle: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut db = h.open();
    let ordered = !lacks(
        db.as_ref(),
        Capability::OrderedIteration,
        "differential: iterator walks and the final scan (point reads of every key instead)",
    );
    let scans = !lacks(
        db.as_ref(),
        Capability::MultiScan,
        "differential: random multi_scans",
    );
    let rkey = |rng: &mut StdRng| -> Vec<u8> {
        let i: u32 = rng.random_range(0..400);
        let mut k = format!("k{i:04}").into_bytes();
        if i.is_multiple_of(7) {
            k.push(0);
        }
        k
    };
    let rval = |rng: &mut StdRng| -> Vec<u8> {
        let len = match rng.random_range(0..10) {
            0 => 0,
            1..=4 => rng.random_range(1..=8),
            5..=8 => rng.random_range(9..2000),
            _ => rng.random_range(2000..40_000),
        };
        let fill: u8 = rng.random();
        vec![fill; len]
    };
    for step in 0..ops {
        let ctx = || format!("{}: differential step {step} (seed {seed})", h.name);
        match rng.random_range(0..100) {
            0..=34 => {
                let (k, v) = (rkey(&mut rng), rval(&mut rng));
                db.put(&wo(), &k, &v)
                    .unwrap_or_else(|e| panic!("{}: {e}", ctx()));
                oracle.insert(k, v);
            }
            35..=44 => {
                let k = rkey(&mut rng);
                db.delete(&wo(), &k)
                    .unwrap_or_else(|e| panic!("{}: {e}", ctx()));
                oracle.remove(&k);
            }
            45..=54 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.random_range(1..8) {
                    match rng.random_range(0..10) {
                        0..=5 => b.put(&rkey(&mut rng), &rval(&mut rng)),
                        6..=8 => b.delete(&rkey(&mut rng)),
                        _ => {
                            let (a, c) = (rkey(&mut rng), rkey(&mut rng));
                            let (lo, hi) = if a <= c { (a, c) } else { (c, a) };
                            b.delete_range(&lo, &hi);
                        }
                    }
                }
                db.write(&wo(), &b)
                    .unwrap_or_else(|e| panic!("{}: {e}", ctx()));
                for op in &b {
                    model::apply(&mut oracle, op);
                }
            }
            55..=79 => {
                let k = rkey(&mut rng);
                assert_eq!(
                    get(db.as_ref(), &k),
                    oracle.get(&k).cloned(),
                    "{}: get {k:?}",
                    ctx()
                );
            }
            80..=89 if ordered => check_iterator_walk(db.as_ref(), &oracle, &mut rng, &ctx()),
            90..=97 if scans => check_random_multiscan(db.as_ref(), &oracle, &mut rng, &ctx()),
            80..=97 => {
                // The same random draws, as a multi_get of the range's keys.
                let k = rkey(&mut rng);
                let keys = [k.as_slice(), b"k0000", b"k0399"];
                let got = db.multi_get(&ro(), &keys);
                for (k, g) in keys.iter().zip(got) {
                    let g = g.unwrap_or_else(|e| panic!("{}: multi_get: {e}", ctx()));
                    assert_eq!(g, oracle.get(*k).cloned(), "{}: multi_get {k:?}", ctx());
                }
            }
            _ => {
                drop(db);
                db = h.open();
            }
        }
    }
    if ordered {
        let all = scan_all(db.as_ref(), &ro());
        assert!(
            all.iter().map(|(k, v)| (k, v)).eq(oracle.iter()),
            "{}: final state",
            h.name
        );
    } else {
        for i in 0..400u32 {
            for k in [format!("k{i:04}").into_bytes(), {
                let mut k = format!("k{i:04}").into_bytes();
                k.push(0);
                k
            }] {
                assert_eq!(
                    get(db.as_ref(), &k),
                    oracle.get(&k).cloned(),
                    "{}: final state of {k:?}",
                    h.name
                );
            }
        }
    }
}

pub(crate) fn check_iterator_walk(
    db: &dyn Db,
    oracle: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut StdRng,
    ctx: &str,
) {
    let lo = format!("k{:04}", rng.random_range(0..400)).into_bytes();
    let hi = format!("k{:04}", rng.random_range(0..420)).into_bytes();
    let (lower, upper) = match rng.random_range(0..4) {
        0 => (None, None),
        1 => (Some(lo), None),
        2 => (None, Some(hi)),
        _ => (Some(lo.clone().min(hi.clone())), Some(lo.max(hi))),
    };
    let opts = ro().with_bounds(lower.as_deref(), upper.as_deref());
    let view: Vec<(&Vec<u8>, &Vec<u8>)> = oracle
        .iter()
        .filter(|(k, _)| vmemkv_compat::iter::within_bounds(lower.as_deref(), upper.as_deref(), k))
        .collect();
    let mut it = db.iter(&opts).expect("iter");
    // Position: an index into `view`, or None when invalid.
    let target = format!("k{:04}", rng.random_range(0..400)).into_bytes();
    let mut pos: Option<usize> = match rng.random_range(0..4) {
        0 => {
            it.seek_to_first();
            (!view.is_empty()).then_some(0)
        }
        1 => {
            it.seek_to_last();
            view.len().checked_sub(1)
        }
        2 => {
            it.seek(&target);
            let i = view.partition_point(|(k, _)| k.as_slice() < target.as_slice());
            (i < view.len()).then_some(i)
        }
        _ => {
            it.seek_for_prev(&target);
            view.partition_point(|(k, _)| k.as_slice() <= target.as_slice())
                .checked_sub(1)
        }
    };
    for _ in 0..rng.random_range(1..40) {
        match pos {
            None => {
                assert!(
                    !it.valid(),
                    "{ctx}: iterator valid where the model has no entry"
                );
                break;
            }
            Some(p) => {
                assert!(
                    it.valid(),
                    "{ctx}: iterator invalid, model at {:?}",
                    view[p].0
                );
                assert_eq!(it.key(), view[p].0.as_slice(), "{ctx}: iterator key");
                assert_eq!(it.value(), view[p].1.as_slice(), "{ctx}: iterator value");
            }
        }
        if rng.random_bool(0.6) {
            it.next();
            pos = pos.map(|p| p + 1).filter(|&p| p < view.len());
        } else {
            it.prev();
            pos = pos.and_then(|p| p.checked_sub(1));
        }
    }
    it.status().expect("iterator status");
}

pub(crate) fn check_random_multiscan(
    db: &dyn Db,
    oracle: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut StdRng,
    ctx: &str,
) {
    let mut starts: Vec<u32> = (0..rng.random_range(1..6))
        .map(|_| rng.random_range(0..400))
        .collect();
    starts.sort_unstable();
    let ranges: Vec<ScanRange> = starts
        .iter()
        .map(|&s| {
            let start = format!("k{s:04}").into_bytes();
            if rng.random_bool(0.2) {
                ScanRange::unbounded(&start)
            } else {
                let end = format!("k{:04}", s + rng.random_range(1..30)).into_bytes();
                ScanRange::new(&start, &end)
            }
        })
        .collect();
    let args = MultiScanArgs {
        ranges: ranges.clone(),
        use_async_io: rng.random_bool(0.5),
        ..MultiScanArgs::default()
    };
    let mut ms = db.multi_scan(&ro(), &args).expect("multi_scan");
    let got = collect_multi_scan(ms.as_mut()).expect("multi_scan results");
    let want: Vec<Vec<(Vec<u8>, Vec<u8>)>> = ranges
        .iter()
        .map(|r| {
            oracle
                .iter()
                .filter(|(k, _)| {
                    vmemkv_compat::iter::within_bounds(r.start.as_deref(), r.limit.as_deref(), k)
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect();
    assert!(
        got == want,
        "{ctx}: multiscan over {} ranges differs",
        ranges.len()
    );
}

/// A named conformance case.
pub type Case = (&'static str, fn(&Harness));

fn get_at(db: &dyn Db, opts: &ReadOptions, key: &[u8]) -> Option<Vec<u8>> {
    db.get(opts, key)
        .unwrap_or_else(|e| panic!("{}: get({key:?}) at a snapshot failed: {e}", db.name()))
}

/// RocksDB's read semantics: `snapshot()` views, reads naming one, an
/// iterator that reads as of its creation, and batches that concurrent
/// readers see whole or not at all, through every read path.
pub fn snapshots(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    if lacks(db, Capability::Snapshots, "snapshots") {
        return;
    }
    if lacks(
        db,
        Capability::OrderedIteration,
        "snapshots (the group reads every snapshot through iterators too)",
    ) {
        point_snapshots(h, db);
        return;
    }
    put(db, b"a", b"1");
    put(db, b"b", b"1");
    let snap = db
        .snapshot()
        .unwrap_or_else(|e| panic!("{}: snapshot() failed: {e}", h.name));
    let at = ro().with_snapshot(&snap);
    // An iterator made now reads as of now, whatever it is asked later.
    let mut early = db.iter(&ro()).expect("iterator");
    put(db, b"a", b"2");
    db.delete(&wo(), b"b").expect("delete");
    put(db, b"c", b"3");
    let mut batch = WriteBatch::new();
    batch.put(b"a", b"3");
    batch.put(b"d", b"4");
    db.write(&wo(), &batch).expect("write");

    let then = vec![
        (b"a".to_vec(), b"1".to_vec()),
        (b"b".to_vec(), b"1".to_vec()),
    ];
    let now = vec![
        (b"a".to_vec(), b"3".to_vec()),
        (b"c".to_vec(), b"3".to_vec()),
        (b"d".to_vec(), b"4".to_vec()),
    ];
    for (k, v) in [
        (b"a", Some(b"1")),
        (b"b", Some(b"1")),
        (b"c", None),
        (b"d", None),
    ] {
        assert_eq!(
            get_at(db, &at, k),
            v.map(|v| v.to_vec()),
            "{}: get({k:?}) at the snapshot",
            h.name
        );
    }
    assert_eq!(get(db, b"a"), Some(b"3".to_vec()), "{}: live read", h.name);
    assert_eq!(get(db, b"b"), None, "{}: live read", h.name);
    let keys: Vec<&[u8]> = vec![b"a", b"b", b"c", b"d"];
    let got: Vec<_> = db
        .multi_get(&at, &keys)
        .into_iter()
        .map(|r| r.expect("multi_get"))
        .collect();
    assert_eq!(
        got,
        vec![Some(b"1".to_vec()), Some(b"1".to_vec()), None, None],
        "{}: multi_get at the snapshot",
        h.name
    );
    assert_eq!(
        scan_all(db, &at),
        then,
        "{}: iterator at the snapshot",
        h.name
    );
    assert_eq!(
        scan_all(db, &at.clone().with_bounds(Some(b"b"), None)),
        then[1..].to_vec(),
        "{}: bounded iterator at the snapshot",
        h.name
    );
    assert_eq!(scan_all(db, &ro()), now, "{}: live iterator", h.name);
    early.seek_to_first();
    let mut seen = Vec::new();
    while early.valid() {
        seen.push((early.key().to_vec(), early.value().to_vec()));
        early.next();
    }
    early.status().expect("iterator status");
    drop(early);
    assert_eq!(
        seen, then,
        "{}: an iterator reads as of its creation",
        h.name
    );
    let args = MultiScanArgs {
        ranges: vec![ScanRange::new(b"a", b"b"), ScanRange::new(b"b", b"z")],
        use_async_io: false,
        io_coalesce_threshold: 16 * 1024,
        max_prefetch_size: 0,
    };
    let mut ms = db
        .multi_scan(&at, &args)
        .expect("multi_scan at the snapshot");
    let got = collect_multi_scan(ms.as_mut()).expect("multi_scan results");
    drop(ms);
    assert_eq!(
        got,
        vec![then[..1].to_vec(), then[1..].to_vec()],
        "{}: multi_scan at the snapshot",
        h.name
    );

    // A snapshot from another database is refused, never read.
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = ModelDb::open(
        &other_dir.path().join("db"),
        &EngineOptions::default(),
        Fault::None,
    )
    .expect("open model");
    let foreign = other.snapshot().expect("foreign snapshot");
    let foreign_db = if h.name.starts_with("model") {
        "another model"
    } else {
        "the model"
    };
    match db.get(&ro().with_snapshot(&foreign), b"a") {
        Err(Error::InvalidArgument(_)) => {}
        r => panic!(
            "{}: a snapshot of {foreign_db} database was not refused: {r:?}",
            h.name
        ),
    }
    drop(snap);
    assert_eq!(
        get(db, b"a"),
        Some(b"3".to_vec()),
        "{}: after the snapshot is dropped",
        h.name
    );
    batches_are_seen_whole(h, db);
}

/// The point-read half of [`snapshots`], for engines without iterators:
/// gets and multi_gets at a snapshot, and batches seen whole by both.
fn point_snapshots(h: &Harness, db: &dyn Db) {
    put(db, b"a", b"1");
    put(db, b"b", b"1");
    let snap = db.snapshot().expect("snapshot");
    let at = ro().with_snapshot(&snap);
    put(db, b"a", b"2");
    db.delete(&wo(), b"b").expect("delete");
    let mut batch = WriteBatch::new();
    batch.put(b"c", b"3");
    db.write(&wo(), &batch).expect("write");
    let keys: Vec<&[u8]> = vec![b"a", b"b", b"c"];
    let then: Vec<_> = db
        .multi_get(&at, &keys)
        .into_iter()
        .map(|r| r.expect("multi_get"))
        .collect();
    assert_eq!(
        then,
        vec![Some(b"1".to_vec()), Some(b"1".to_vec()), None],
        "{}: multi_get at the snapshot",
        h.name
    );
    assert_eq!(get_at(db, &at, b"a"), Some(b"1".to_vec()));
    assert_eq!(get(db, b"a"), Some(b"2".to_vec()), "{}: live read", h.name);
    assert_eq!(get(db, b"b"), None, "{}: live read", h.name);
    drop(snap);
    batches_are_seen_whole(h, db);
}

/// A writer replaces two keys in one batch, over and over; readers check
/// that every read path sees both from the same batch (iterators too, on
/// engines that have them).
fn batches_are_seen_whole(h: &Harness, db: &dyn Db) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let iterate = db.capabilities().supports(Capability::OrderedIteration);
    let pair = |i: u64| {
        let mut b = WriteBatch::new();
        b.put(b"pair-x", &i.to_be_bytes());
        b.put(b"pair-y", &i.to_be_bytes());
        b
    };
    db.write(&wo(), &pair(0)).expect("write");
    let stop = AtomicBool::new(false);
    let torn = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let t0 = std::time::Instant::now();
            let mut i = 1u64;
            while t0.elapsed() < std::time::Duration::from_millis(400) {
                db.write(&wo(), &pair(i)).expect("write");
                i += 1;
            }
            stop.store(true, Ordering::Relaxed);
        });
        let mut torn = Vec::new();
        let mut reads = 0u64;
        while !stop.load(Ordering::Relaxed) || reads < 50 {
            reads += 1;
            let snap = db.snapshot().expect("snapshot");
            let at = ro().with_snapshot(&snap);
            let (x, y) = (get_at(db, &at, b"pair-x"), get_at(db, &at, b"pair-y"));
            if x != y {
                torn.push(format!("snapshot gets: {x:?} vs {y:?}"));
            }
            let both = db.multi_get(&ro(), &[b"pair-x", b"pair-y"]);
            let both: Vec<_> = both.into_iter().map(|r| r.expect("multi_get")).collect();
            if both[0] != both[1] {
                torn.push(format!("multi_get: {both:?}"));
            }
            if !iterate {
                continue;
            }
            let bounds = ro().with_bounds(Some(b"pair-"), Some(b"pair-z"));
            let it: Vec<_> = scan_all(db, &bounds).into_iter().map(|(_, v)| v).collect();
            if it.len() != 2 || it[0] != it[1] {
                torn.push(format!("iterator: {it:?}"));
            }
        }
        writer.join().expect("writer");
        torn
    });
    assert!(
        torn.is_empty(),
        "{}: readers saw half a batch {} times, e.g. {:?}",
        h.name,
        torn.len(),
        torn.first()
    );
}

/// Every case, by name, for the meta-test and for ad-hoc runs.
pub const ALL_CASES: &[Case] = &[
    ("point_operations", point_operations),
    ("keys_and_values", keys_and_values),
    ("write_batch", write_batch),
    ("iterators", iterators),
    ("multi_get", multi_get),
    ("multi_scan", multi_scan),
    ("persistence", persistence),
    ("locking", locking),
    ("maintenance", maintenance),
    ("differential", differential),
    ("snapshots", snapshots),
    ("families_default", families_default),
    ("families_isolation", families_isolation),
    ("families_batches", families_batches),
    ("families_drop", families_drop),
    ("families_snapshots", families_snapshots),
    ("families_reopen", families_reopen),
    ("families_ranges", families_ranges),
    ("families_errors", families_errors),
];
