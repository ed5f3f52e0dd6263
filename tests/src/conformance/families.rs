//! The column-family group: named keyspaces inside one database, as the
//! trait documents them (`vmemkv_compat::family`).
//!
//! Every case but [`families_default`] needs families beyond `default`;
//! an engine without them ([`Capability::ColumnFamilies`] missing) prints
//! `not applicable: ...` and is checked to refuse `create_cf` with
//! `NotSupported`. [`families_default`] runs everywhere: the default
//! family is reachable through every `_cf` call on every engine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vmemkv_compat::{
    collect_multi_scan, Capability, Cf, Db, Entries, Error, MultiScanArgs, ReadOptions, Result,
    ScanRange, WriteBatch, WriteOptions,
};

use super::{get, key, lacks, put, ro, scan_all, scan_back, wo, Harness};

type Kv = (Vec<u8>, Vec<u8>);

fn create(db: &dyn Db, name: &str) -> Cf {
    db.create_cf(name)
        .unwrap_or_else(|e| panic!("{}: create_cf({name:?}) failed: {e}", db.name()))
}

fn handle(db: &dyn Db, name: &str) -> Cf {
    db.cf_handle(name).unwrap_or_else(|| {
        panic!(
            "{}: cf_handle({name:?}) found no family; cf_names() = {:?}",
            db.name(),
            db.cf_names()
        )
    })
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn get_cf_at(db: &dyn Db, opts: &ReadOptions, cf: Cf, key: &[u8]) -> Option<Vec<u8>> {
    db.get_cf(opts, cf, key)
        .unwrap_or_else(|e| panic!("{}: get_cf({}, {key:?}) failed: {e}", db.name(), cf.id()))
}

fn get_cf(db: &dyn Db, cf: Cf, key: &[u8]) -> Option<Vec<u8>> {
    get_cf_at(db, &ro(), cf, key)
}

fn put_cf(db: &dyn Db, cf: Cf, key: &[u8], value: &[u8]) {
    db.put_cf(&wo(), cf, key, value)
        .unwrap_or_else(|e| panic!("{}: put_cf({}, {key:?}) failed: {e}", db.name(), cf.id()));
}

fn delete_cf(db: &dyn Db, cf: Cf, key: &[u8]) {
    db.delete_cf(&wo(), cf, key)
        .unwrap_or_else(|e| panic!("{}: delete_cf({}, {key:?}) failed: {e}", db.name(), cf.id()));
}

fn multi_get_cf(db: &dyn Db, opts: &ReadOptions, cf: Cf, keys: &[&[u8]]) -> Vec<Option<Vec<u8>>> {
    db.multi_get_cf(opts, cf, keys)
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{}: multi_get_cf({}): {e}", db.name(), cf.id())))
        .collect()
}

fn scan_cf(db: &dyn Db, opts: &ReadOptions, cf: Cf) -> Vec<Kv> {
    let it = db
        .iter_cf(opts, cf)
        .unwrap_or_else(|e| panic!("{}: iter_cf({}) failed: {e}", db.name(), cf.id()));
    Entries::from_first(it)
        .collect::<Result<Vec<_>>>()
        .unwrap_or_else(|e| panic!("{}: iter_cf({}) walk failed: {e}", db.name(), cf.id()))
}

fn write(db: &dyn Db, opts: &WriteOptions, batch: &WriteBatch) {
    db.write(opts, batch).unwrap_or_else(|e| {
        panic!(
            "{}: write of a {}-update batch: {e}",
            db.name(),
            batch.len()
        )
    });
}

fn kv(k: &[u8], v: &[u8]) -> Kv {
    (k.to_vec(), v.to_vec())
}

fn some(v: &[u8]) -> Option<Vec<u8>> {
    Some(v.to_vec())
}

/// Asserts `r` is an `InvalidArgument` with a message.
fn expect_invalid<T>(r: Result<T>, what: &str) {
    match r {
        Err(Error::InvalidArgument(msg)) => assert!(!msg.is_empty(), "{what}: empty message"),
        Err(e) => panic!("{what}: expected InvalidArgument, got {e:?}"),
        Ok(_) => panic!("{what}: expected InvalidArgument, got Ok"),
    }
}

/// `cf` names no open family: every call that takes it is refused with
/// `InvalidArgument`, and a batch naming it applies none of its updates.
fn refused_everywhere(db: &dyn Db, cf: Cf, what: &str) {
    let name = db.name();
    let ctx = |call: &str| format!("{name}: {call} with {what} (handle {})", cf.id());
    expect_invalid(db.get_cf(&ro(), cf, b"k"), &ctx("get_cf"));
    let mut out = Vec::new();
    expect_invalid(
        db.get_cf_into(&ro(), cf, b"k", &mut out),
        &ctx("get_cf_into"),
    );
    expect_invalid(db.put_cf(&wo(), cf, b"k", b"v"), &ctx("put_cf"));
    expect_invalid(db.delete_cf(&wo(), cf, b"k"), &ctx("delete_cf"));
    for r in db.multi_get_cf(&ro(), cf, &[b"k", b"l"]) {
        expect_invalid(r, &ctx("multi_get_cf"));
    }
    let caps = db.capabilities();
    if caps.supports(Capability::OrderedIteration) {
        expect_invalid(db.iter_cf(&ro(), cf), &ctx("iter_cf"));
    }
    if caps.supports(Capability::MultiScan) {
        // The handle may be checked when the scan is made or when it runs.
        let args = MultiScanArgs::new(vec![ScanRange::unbounded(b"a")]);
        let r = db
            .multi_scan_cf(&ro(), cf, &args)
            .and_then(|mut ms| collect_multi_scan(ms.as_mut()).map(|_| ()));
        expect_invalid(r, &ctx("multi_scan_cf"));
    }
    let mut b = WriteBatch::new();
    b.put(b"refused-batch", b"default part");
    b.put_cf(cf, b"refused-batch", b"stale part");
    expect_invalid(db.write(&wo(), &b), &ctx("a batch"));
    assert_eq!(
        get(db, b"refused-batch"),
        None,
        "{name}: a batch refused for {what} applied its default-family update"
    );
}

/// The default family on every engine: `cf_handle("default")` is
/// [`Cf::DEFAULT`], the `_cf` calls with it are the plain calls, batches
/// may name it, it cannot be dropped, and a handle never issued is refused
/// with `InvalidArgument` by every call.
pub fn families_default(h: &Harness) {
    let owned = h.open();
    let db = owned.as_ref();
    let families = !lacks(
        db,
        Capability::ColumnFamilies,
        "families_default: families beyond default (the default family is checked)",
    );
    assert_eq!(db.cf_handle("default"), Some(Cf::DEFAULT), "{}", h.name);
    assert_eq!(
        db.cf_names(),
        names(&["default"]),
        "{}: fresh database",
        h.name
    );
    assert_eq!(db.cf_handle("missing"), None, "{}: unknown name", h.name);

    put_cf(db, Cf::DEFAULT, b"a", b"1");
    assert_eq!(
        get(db, b"a"),
        some(b"1"),
        "{}: put_cf(default) then get",
        h.name
    );
    put(db, b"b", b"2");
    assert_eq!(
        get_cf(db, Cf::DEFAULT, b"b"),
        some(b"2"),
        "{}: put then get_cf(default)",
        h.name
    );
    delete_cf(db, Cf::DEFAULT, b"a");
    assert_eq!(get(db, b"a"), None, "{}: delete_cf(default)", h.name);

    let mut b = WriteBatch::new();
    b.put_cf(Cf::DEFAULT, b"c", b"3");
    b.delete_cf(Cf::DEFAULT, b"b");
    b.put(b"d", b"4");
    assert!(!b.uses_families());
    write(db, &wo(), &b);
    assert_eq!(
        multi_get_cf(db, &ro(), Cf::DEFAULT, &[b"c", b"b", b"d"]),
        vec![some(b"3"), None, some(b"4")],
        "{}: a batch through put_cf/delete_cf(default)",
        h.name
    );
    let caps = db.capabilities();
    if caps.supports(Capability::DeleteRange) {
        let mut b = WriteBatch::new();
        b.delete_range_cf(Cf::DEFAULT, b"c", b"d");
        write(db, &wo(), &b);
        assert_eq!(get(db, b"c"), None, "{}: delete_range_cf(default)", h.name);
        assert_eq!(
            get(db, b"d"),
            some(b"4"),
            "{}: delete_range_cf(default) end",
            h.name
        );
    }
    if caps.supports(Capability::OrderedIteration) {
        assert_eq!(
            scan_cf(db, &ro(), Cf::DEFAULT),
            scan_all(db, &ro()),
            "{}: iter_cf(default) is iter",
            h.name
        );
    }

    refused_everywhere(db, Cf::from_id(4242), "a handle never issued");
    match db.drop_cf("default") {
        Err(Error::InvalidArgument(_)) => {}
        Err(Error::NotSupported(_)) if !families => {}
        r => panic!(
            "{}: drop_cf(\"default\") must be refused, got {r:?}",
            h.name
        ),
    }
    match db.drop_cf("missing") {
        Err(Error::InvalidArgument(_)) => {}
        Err(Error::NotSupported(_)) if !families => {}
        r => panic!(
            "{}: drop_cf of an unknown name must be refused, got {r:?}",
            h.name
        ),
    }
    assert_eq!(get(db, b"d"), some(b"4"), "{}: after refused drops", h.name);

    drop(owned);
    let db = h.open();
    let db = db.as_ref();
    assert_eq!(
        db.cf_names(),
        names(&["default"]),
        "{}: after reopen",
        h.name
    );
    assert_eq!(db.cf_handle("default"), Some(Cf::DEFAULT));
    assert_eq!(
        get_cf(db, Cf::DEFAULT, b"d"),
        some(b"4"),
        "{}: after reopen",
        h.name
    );
}

/// The same key holds a different value in each family; reads, scans and
/// deletes of one family never reach another.
pub fn families_isolation(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    if lacks(db, Capability::ColumnFamilies, "families_isolation") {
        return;
    }
    let a = create(db, "a");
    let b = create(db, "b");
    assert!(
        a != b && !a.is_default() && !b.is_default(),
        "{}: handles {a:?}, {b:?} must be distinct and not default",
        h.name
    );
    assert_eq!(db.cf_handle("a"), Some(a), "{}: cf_handle(a)", h.name);
    assert_eq!(db.cf_handle("b"), Some(b), "{}: cf_handle(b)", h.name);
    assert_eq!(db.cf_names(), names(&["a", "b", "default"]), "{}", h.name);

    let fams = [(Cf::DEFAULT, "default"), (a, "a"), (b, "b")];
    for (cf, n) in fams {
        put_cf(db, cf, b"shared", format!("in {n}").as_bytes());
        put_cf(db, cf, format!("only-{n}").as_bytes(), n.as_bytes());
    }
    let keys: Vec<&[u8]> = vec![b"only-a", b"only-b", b"only-default", b"shared"];
    for (cf, n) in fams {
        let want: Vec<Option<Vec<u8>>> = keys
            .iter()
            .map(|k| match *k {
                b"shared" => Some(format!("in {n}").into_bytes()),
                k if k == format!("only-{n}").as_bytes() => Some(n.as_bytes().to_vec()),
                _ => None,
            })
            .collect();
        let got: Vec<_> = keys.iter().map(|k| get_cf(db, cf, k)).collect();
        assert_eq!(got, want, "{}: get_cf in family {n}", h.name);
        assert_eq!(
            multi_get_cf(db, &ro(), cf, &keys),
            want,
            "{}: multi_get_cf in family {n}",
            h.name
        );
    }
    assert_eq!(
        get(db, b"shared"),
        some(b"in default"),
        "{}: plain get",
        h.name
    );
    assert_eq!(get(db, b"only-a"), None, "{}: plain get of a's key", h.name);

    let ordered = db.capabilities().supports(Capability::OrderedIteration);
    if ordered {
        for (cf, n) in fams {
            let only = format!("only-{n}");
            let want = vec![
                kv(only.as_bytes(), n.as_bytes()),
                kv(b"shared", format!("in {n}").as_bytes()),
            ];
            assert_eq!(scan_cf(db, &ro(), cf), want, "{}: iter_cf over {n}", h.name);
        }
        assert_eq!(
            scan_all(db, &ro()),
            scan_cf(db, &ro(), Cf::DEFAULT),
            "{}: iter sees the default family only",
            h.name
        );
    }

    delete_cf(db, a, b"shared");
    assert_eq!(get_cf(db, a, b"shared"), None, "{}: delete_cf in a", h.name);
    assert_eq!(
        get_cf(db, b, b"shared"),
        some(b"in b"),
        "{}: b after a delete in a",
        h.name
    );
    assert_eq!(
        get(db, b"shared"),
        some(b"in default"),
        "{}: default after a delete in a",
        h.name
    );
    db.delete(&wo(), b"shared").expect("delete");
    assert_eq!(
        get_cf(db, b, b"shared"),
        some(b"in b"),
        "{}: b after a plain delete",
        h.name
    );
    put_cf(db, b, b"shared", b"b again");
    assert_eq!(
        get_cf(db, a, b"shared"),
        None,
        "{}: a after a put in b",
        h.name
    );
    assert_eq!(
        get(db, b"shared"),
        None,
        "{}: default after a put in b",
        h.name
    );
    let mut batch = WriteBatch::new();
    batch.delete(b"only-b");
    batch.put_cf(a, b"only-default", b"in a");
    write(db, &wo(), &batch);
    assert_eq!(
        get_cf(db, b, b"only-b"),
        some(b"b"),
        "{}: a default-family batch delete reached b",
        h.name
    );
    assert_eq!(
        get(db, b"only-default"),
        some(b"default"),
        "{}: a batch put in a reached default",
        h.name
    );
    if ordered {
        assert_eq!(
            scan_cf(db, &ro(), a),
            vec![kv(b"only-a", b"a"), kv(b"only-default", b"in a")],
            "{}: iter_cf over a at the end",
            h.name
        );
    }
}

/// A batch spanning families is atomic: all of it is applied, a refused
/// batch applies nothing, a concurrent reader at a snapshot sees every
/// family from the same batch, and all of it is there after reopen.
pub fn families_batches(h: &Harness) {
    let owned = h.open();
    let db = owned.as_ref();
    if lacks(db, Capability::ColumnFamilies, "families_batches") {
        return;
    }
    let a = create(db, "a");
    let b = create(db, "b");
    put_cf(db, a, b"old", b"z");
    put_cf(db, b, b"doomed", b"x");
    put_cf(db, b, b"kept", b"y");
    let mut batch = WriteBatch::new();
    batch.put_cf(a, b"new", b"1");
    batch.delete_cf(b, b"doomed");
    batch.put(b"plain", b"2");
    batch.delete_cf(a, b"old");
    batch.put_cf(b, b"added", b"3");
    assert!(batch.uses_families());
    write(db, &WriteOptions::sync(), &batch);
    let check = |db: &dyn Db, a: Cf, b: Cf, when: &str| {
        assert_eq!(
            get_cf(db, a, b"new"),
            some(b"1"),
            "{}: put in a {when}",
            h.name
        );
        assert_eq!(
            get_cf(db, a, b"old"),
            None,
            "{}: delete in a {when}",
            h.name
        );
        assert_eq!(
            get_cf(db, b, b"doomed"),
            None,
            "{}: delete in b {when}",
            h.name
        );
        assert_eq!(
            get_cf(db, b, b"kept"),
            some(b"y"),
            "{}: untouched key of b {when}",
            h.name
        );
        assert_eq!(
            get_cf(db, b, b"added"),
            some(b"3"),
            "{}: put in b {when}",
            h.name
        );
        assert_eq!(
            get(db, b"plain"),
            some(b"2"),
            "{}: put in default {when}",
            h.name
        );
    };
    check(db, a, b, "after the batch");

    // One stale handle refuses the whole batch, its valid families too.
    let gone = create(db, "gone");
    db.drop_cf("gone").expect("drop_cf(gone)");
    let mut refused = WriteBatch::new();
    refused.put_cf(a, b"never", b"1");
    refused.delete_cf(b, b"kept");
    refused.put_cf(gone, b"never", b"1");
    expect_invalid(
        db.write(&wo(), &refused),
        &format!("{}: a batch naming a dropped family", h.name),
    );
    assert_eq!(
        get_cf(db, a, b"never"),
        None,
        "{}: a refused batch applied its put in a",
        h.name
    );
    assert_eq!(
        get_cf(db, b, b"kept"),
        some(b"y"),
        "{}: a refused batch applied its delete in b",
        h.name
    );

    let last = concurrent_cross_family_batches(h, db, a, b);

    drop(owned);
    let db = h.open();
    let db = db.as_ref();
    let (a, b) = (handle(db, "a"), handle(db, "b"));
    check(db, a, b, "after reopen");
    let (in_a, in_b) = pair_after(last);
    assert_eq!(
        (
            get_cf(db, a, b"pair"),
            get_cf(db, b, b"pair"),
            get(db, b"pair")
        ),
        (in_a, in_b, some(&last.to_be_bytes())),
        "{}: the last cross-family batch after reopen",
        h.name
    );
}

/// Where batch `i` of [`concurrent_cross_family_batches`] leaves `pair`:
/// in `a` for even `i`, in `b` for odd, and never in both.
fn pair_after(i: u64) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let v = Some(i.to_be_bytes().to_vec());
    if i.is_multiple_of(2) {
        (v, None)
    } else {
        (None, v)
    }
}

/// A writer moves key `pair` between families `a` and `b` (a put in one
/// and a delete in the other, in one batch, with the batch number also put
/// in `default`); readers take snapshots and check that every family shows
/// the same batch. Returns the last batch number written.
fn concurrent_cross_family_batches(h: &Harness, db: &dyn Db, a: Cf, b: Cf) -> u64 {
    let batch = |i: u64| {
        let v = i.to_be_bytes();
        let mut w = WriteBatch::new();
        let (put_in, delete_in) = if i.is_multiple_of(2) { (a, b) } else { (b, a) };
        w.put_cf(put_in, b"pair", &v);
        w.delete_cf(delete_in, b"pair");
        w.put(b"pair", &v);
        w
    };
    write(db, &wo(), &batch(0));
    let ordered = db.capabilities().supports(Capability::OrderedIteration);
    let stop = AtomicBool::new(false);
    let (last, torn) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let t0 = Instant::now();
            let mut i = 0u64;
            while t0.elapsed() < Duration::from_millis(300) && !stop.load(Ordering::Relaxed) {
                i += 1;
                write(db, &wo(), &batch(i));
            }
            stop.store(true, Ordering::Relaxed);
            i
        });
        let mut torn = Vec::new();
        let mut reads = 0u64;
        while !stop.load(Ordering::Relaxed) || reads < 50 {
            reads += 1;
            let snap = db.snapshot().expect("snapshot");
            let at = ro().with_snapshot(&snap);
            let d = get_cf_at(db, &at, Cf::DEFAULT, b"pair");
            let seen = (
                get_cf_at(db, &at, a, b"pair"),
                get_cf_at(db, &at, b, b"pair"),
            );
            let i = d
                .as_deref()
                .and_then(|d| d.try_into().ok())
                .map(u64::from_be_bytes);
            if i.map(pair_after) != Some(seen.clone()) {
                let n = |v: &Option<Vec<u8>>| {
                    v.as_deref()
                        .and_then(|v| v.try_into().ok())
                        .map(u64::from_be_bytes)
                };
                torn.push(format!(
                    "get_cf: batch {:?} in default, pair in a from batch {:?}, in b from batch {:?}",
                    i,
                    n(&seen.0),
                    n(&seen.1)
                ));
            }
            if ordered {
                let bounds = at.clone().with_bounds(Some(b"pair"), Some(b"pair\0"));
                let scanned = (scan_cf(db, &bounds, a), scan_cf(db, &bounds, b));
                let as_get =
                    |v: Option<Vec<u8>>| v.map(|v| kv(b"pair", &v)).into_iter().collect::<Vec<_>>();
                if scanned != (as_get(seen.0), as_get(seen.1)) {
                    torn.push(format!(
                        "iter_cf at the snapshot disagrees with get_cf: {scanned:?}"
                    ));
                }
            }
            if !torn.is_empty() {
                stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        (writer.join().expect("writer"), torn)
    });
    assert!(
        torn.is_empty(),
        "{}: a snapshot saw part of a batch spanning families: {:?}",
        h.name,
        torn.first()
    );
    last
}

/// Dropping a family removes its keys and its handle; the other families
/// are untouched; `default` and unknown names cannot be dropped, existing
/// names cannot be created again, and a family created again under a
/// dropped name starts empty, with a new handle. All of it is durable.
pub fn families_drop(h: &Harness) {
    let owned = h.open();
    let db = owned.as_ref();
    if lacks(db, Capability::ColumnFamilies, "families_drop") {
        return;
    }
    let a = create(db, "a");
    let b = create(db, "b");
    for i in 0..50 {
        put_cf(db, a, &key(i), b"a");
        put_cf(db, b, &key(i), b"b");
        put(db, &key(i), b"d");
    }
    let untouched = |db: &dyn Db, b: Cf, when: &str| {
        for i in 0..50 {
            assert_eq!(
                get_cf(db, b, &key(i)),
                some(b"b"),
                "{}: b's key {i} {when}",
                h.name
            );
            assert_eq!(
                get(db, &key(i)),
                some(b"d"),
                "{}: default's key {i} {when}",
                h.name
            );
        }
    };
    db.drop_cf("a")
        .unwrap_or_else(|e| panic!("{}: drop_cf(a): {e}", h.name));
    assert_eq!(
        db.cf_handle("a"),
        None,
        "{}: cf_handle of a dropped family",
        h.name
    );
    assert_eq!(
        db.cf_names(),
        names(&["b", "default"]),
        "{}: after the drop",
        h.name
    );
    refused_everywhere(db, a, "the handle of dropped family a");
    untouched(db, b, "after dropping a");

    expect_invalid(
        db.drop_cf("a"),
        &format!("{}: drop_cf of a dropped family", h.name),
    );
    expect_invalid(
        db.drop_cf("default"),
        &format!("{}: drop_cf(default)", h.name),
    );
    expect_invalid(
        db.create_cf("b"),
        &format!("{}: create_cf of an existing family", h.name),
    );
    expect_invalid(
        db.create_cf("default"),
        &format!("{}: create_cf(default)", h.name),
    );
    assert_eq!(
        db.cf_handle("b"),
        Some(b),
        "{}: a refused create replaced b",
        h.name
    );
    untouched(db, b, "after the refused drops and creates");

    let a2 = create(db, "a");
    assert_ne!(a2, a, "{}: a handle was reused for a new family", h.name);
    assert_eq!(
        db.cf_handle("a"),
        Some(a2),
        "{}: cf_handle of the new a",
        h.name
    );
    for i in 0..50 {
        assert_eq!(
            get_cf(db, a2, &key(i)),
            None,
            "{}: key {i} of the dropped a is in the new a",
            h.name
        );
    }
    if db.capabilities().supports(Capability::OrderedIteration) {
        assert_eq!(
            scan_cf(db, &ro(), a2),
            vec![],
            "{}: the new family a is not empty",
            h.name
        );
    }
    refused_everywhere(db, a, "the old handle of a, once a is created again");
    put_cf(db, a2, &key(0), b"new a");
    untouched(db, b, "after writing to the new a");

    db.drop_cf("b")
        .unwrap_or_else(|e| panic!("{}: drop_cf(b): {e}", h.name));
    drop(owned);
    let db = h.open();
    let db = db.as_ref();
    assert_eq!(
        db.cf_names(),
        names(&["a", "default"]),
        "{}: after reopen",
        h.name
    );
    let a = handle(db, "a");
    assert_eq!(
        get_cf(db, a, &key(0)),
        some(b"new a"),
        "{}: the new a after reopen",
        h.name
    );
    for i in 1..50 {
        assert_eq!(
            get_cf(db, a, &key(i)),
            None,
            "{}: dropped data of a back after reopen",
            h.name
        );
        assert_eq!(
            get(db, &key(i)),
            some(b"d"),
            "{}: default after reopen",
            h.name
        );
    }
    let b = create(db, "b");
    for i in 0..50 {
        assert_eq!(
            get_cf(db, b, &key(i)),
            None,
            "{}: dropped data of b back after reopen",
            h.name
        );
    }
}

/// A snapshot taken before writes to two families sees neither write,
/// through get_cf, multi_get_cf, iter_cf and multi_scan_cf; an iterator
/// over a family reads as of its creation.
pub fn families_snapshots(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    if lacks(db, Capability::ColumnFamilies, "families_snapshots") {
        return;
    }
    if lacks(db, Capability::Snapshots, "families_snapshots") {
        return;
    }
    let caps = db.capabilities();
    let a = create(db, "a");
    let b = create(db, "b");
    put_cf(db, a, b"k", b"a1");
    put_cf(db, b, b"k", b"b1");
    put_cf(db, b, b"gone", b"b");
    put(db, b"k", b"d1");
    let snap = db
        .snapshot()
        .unwrap_or_else(|e| panic!("{}: snapshot() failed: {e}", h.name));
    let at = ro().with_snapshot(&snap);
    let mut early = caps
        .supports(Capability::OrderedIteration)
        .then(|| db.iter_cf(&ro(), b).expect("iter_cf"));

    put_cf(db, a, b"k", b"a2");
    put_cf(db, a, b"new", b"a");
    delete_cf(db, b, b"gone");
    let mut batch = WriteBatch::new();
    batch.put_cf(b, b"k", b"b2");
    batch.put_cf(a, b"batched", b"x");
    batch.put(b"k", b"d2");
    write(db, &wo(), &batch);

    let then_a = vec![kv(b"k", b"a1")];
    let then_b = vec![kv(b"gone", b"b"), kv(b"k", b"b1")];
    for (cf, n, k, want) in [
        (a, "a", &b"k"[..], some(b"a1")),
        (a, "a", b"new", None),
        (a, "a", b"batched", None),
        (b, "b", b"k", some(b"b1")),
        (b, "b", b"gone", some(b"b")),
        (Cf::DEFAULT, "default", b"k", some(b"d1")),
    ] {
        assert_eq!(
            get_cf_at(db, &at, cf, k),
            want,
            "{}: get_cf({n}, {k:?}) at the snapshot",
            h.name
        );
    }
    assert_eq!(
        multi_get_cf(db, &at, a, &[b"k", b"new", b"batched"]),
        vec![some(b"a1"), None, None],
        "{}: multi_get_cf(a) at the snapshot",
        h.name
    );
    assert_eq!(
        multi_get_cf(db, &at, b, &[b"k", b"gone"]),
        vec![some(b"b1"), some(b"b")],
        "{}: multi_get_cf(b) at the snapshot",
        h.name
    );
    assert_eq!(get_cf(db, a, b"k"), some(b"a2"), "{}: live a", h.name);
    assert_eq!(get_cf(db, b, b"k"), some(b"b2"), "{}: live b", h.name);
    assert_eq!(get_cf(db, b, b"gone"), None, "{}: live b", h.name);
    if caps.supports(Capability::OrderedIteration) {
        assert_eq!(
            scan_cf(db, &at, a),
            then_a,
            "{}: iter_cf(a) at the snapshot",
            h.name
        );
        assert_eq!(
            scan_cf(db, &at, b),
            then_b,
            "{}: iter_cf(b) at the snapshot",
            h.name
        );
        assert_eq!(
            scan_cf(db, &at.clone().with_bounds(Some(b"h"), None), b),
            then_b[1..].to_vec(),
            "{}: bounded iter_cf(b) at the snapshot",
            h.name
        );
        assert_eq!(
            scan_cf(db, &ro(), a),
            vec![kv(b"batched", b"x"), kv(b"k", b"a2"), kv(b"new", b"a")],
            "{}: live iter_cf(a)",
            h.name
        );
        if let Some(mut it) = early.take() {
            let mut seen = Vec::new();
            it.seek_to_first();
            while it.valid() {
                seen.push(kv(it.key(), it.value()));
                it.next();
            }
            it.status().expect("iterator status");
            assert_eq!(
                seen, then_b,
                "{}: iter_cf(b) reads as of its creation",
                h.name
            );
        }
    }
    if caps.supports(Capability::MultiScan) {
        let args = MultiScanArgs::new(vec![ScanRange::new(b"a", b"h"), ScanRange::unbounded(b"h")]);
        for (cf, n, want) in [
            (a, "a", vec![vec![], then_a.clone()]),
            (b, "b", vec![then_b[..1].to_vec(), then_b[1..].to_vec()]),
        ] {
            let mut ms = db
                .multi_scan_cf(&at, cf, &args)
                .unwrap_or_else(|e| panic!("{}: multi_scan_cf({n}) at the snapshot: {e}", h.name));
            let got = collect_multi_scan(ms.as_mut()).expect("multi_scan_cf results");
            assert_eq!(got, want, "{}: multi_scan_cf({n}) at the snapshot", h.name);
        }
    }
    drop(snap);
}

/// Families and their data survive reopen: `cf_names` lists them, the
/// handles are found by name, an empty family persists, a dropped one
/// stays dropped, and any name of 1 to 255 bytes without NUL works.
pub fn families_reopen(h: &Harness) {
    let odd = "odd name/with.dots-\u{fc}";
    let long = "n".repeat(255);
    let all = ["a", "b", "default", "empty", long.as_str(), odd];
    {
        let db = h.open();
        let db = db.as_ref();
        if lacks(db, Capability::ColumnFamilies, "families_reopen") {
            return;
        }
        for n in ["a", "b", "c", "empty", odd, &long] {
            create(db, n);
        }
        for (n, count) in [("a", 100), ("b", 10), ("c", 5), (odd, 3), (&long[..], 2)] {
            let cf = handle(db, n);
            for i in 0..count {
                put_cf(db, cf, &key(i), n.as_bytes());
            }
        }
        put(db, b"plain", b"default");
        db.drop_cf("c")
            .unwrap_or_else(|e| panic!("{}: drop_cf(c): {e}", h.name));
    }
    let check = |db: &dyn Db, when: &str| {
        let mut want = names(&all);
        want.sort();
        assert_eq!(db.cf_names(), want, "{}: cf_names {when}", h.name);
        assert_eq!(db.cf_handle("c"), None, "{}: dropped c {when}", h.name);
        let handles: Vec<Cf> = all.iter().map(|n| handle(db, n)).collect();
        for (i, x) in handles.iter().enumerate() {
            assert!(
                handles[..i].iter().all(|y| y != x),
                "{}: two families share handle {x:?} {when}",
                h.name
            );
        }
        assert_eq!(handle(db, "default"), Cf::DEFAULT);
        for (n, count) in [("a", 100), ("b", 10), (odd, 3), (&long[..], 2)] {
            let cf = handle(db, n);
            for i in 0..count + 5 {
                let want = (i < count).then(|| n.as_bytes().to_vec());
                assert_eq!(
                    get_cf(db, cf, &key(i)),
                    want,
                    "{}: key {i} of {n:?} {when}",
                    h.name
                );
            }
        }
        assert_eq!(
            get(db, b"plain"),
            some(b"default"),
            "{}: default {when}",
            h.name
        );
        let empty = handle(db, "empty");
        assert_eq!(
            get_cf(db, empty, &key(0)),
            None,
            "{}: empty family {when}",
            h.name
        );
        if db.capabilities().supports(Capability::OrderedIteration) {
            assert_eq!(
                scan_cf(db, &ro(), empty),
                vec![],
                "{}: empty family {when}",
                h.name
            );
            assert_eq!(
                scan_cf(db, &ro(), handle(db, "b")).len(),
                10,
                "{}: b {when}",
                h.name
            );
        }
    };
    {
        let db = h.open();
        check(db.as_ref(), "after reopen");
        let a = handle(db.as_ref(), "a");
        put_cf(db.as_ref(), a, b"after-reopen", b"yes");
        let d = create(db.as_ref(), "d");
        put_cf(db.as_ref(), d, b"in-d", b"yes");
    }
    let db = h.open();
    let db = db.as_ref();
    assert_eq!(
        get_cf(db, handle(db, "a"), b"after-reopen"),
        some(b"yes"),
        "{}: second reopen",
        h.name
    );
    assert_eq!(
        get_cf(db, handle(db, "d"), b"in-d"),
        some(b"yes"),
        "{}: second reopen",
        h.name
    );
    db.drop_cf("d")
        .unwrap_or_else(|e| panic!("{}: drop_cf(d): {e}", h.name));
    check(db, "after a second reopen");
}

/// Bounds on `iter_cf`, `multi_scan_cf` and `delete_range_cf` each act on
/// their own family only.
pub fn families_ranges(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    if lacks(db, Capability::ColumnFamilies, "families_ranges") {
        return;
    }
    let a = create(db, "a");
    let b = create(db, "b");
    // a: even keys; b: every key; default: multiples of 3.
    let in_a = |i: usize| i.is_multiple_of(2);
    let in_d = |i: usize| i.is_multiple_of(3);
    let mut batch = WriteBatch::new();
    for i in 0..100 {
        if in_a(i) {
            batch.put_cf(a, &key(i), format!("a{i}").as_bytes());
        }
        batch.put_cf(b, &key(i), format!("b{i}").as_bytes());
        if in_d(i) {
            batch.put(&key(i), format!("d{i}").as_bytes());
        }
    }
    write(db, &wo(), &batch);
    let expect =
        |n: &str, keep: &dyn Fn(usize) -> bool, range: std::ops::Range<usize>| -> Vec<Kv> {
            range
                .filter(|&i| keep(i))
                .map(|i| (key(i), format!("{n}{i}").into_bytes()))
                .collect()
        };
    let caps = db.capabilities();
    if caps.supports(Capability::OrderedIteration) {
        let opts = ro().with_bounds(Some(&key(10)), Some(&key(20)));
        let want_a = expect("a", &in_a, 10..20);
        assert_eq!(
            scan_cf(db, &opts, a),
            want_a,
            "{}: bounded iter_cf(a)",
            h.name
        );
        assert_eq!(
            scan_cf(db, &opts, b),
            expect("b", &|_| true, 10..20),
            "{}: bounded iter_cf(b)",
            h.name
        );
        let mut it = db.iter_cf(&opts, a).expect("iter_cf");
        let back = scan_back(it.as_mut());
        assert!(
            back.iter().eq(want_a.iter().rev().map(|(k, _)| k)),
            "{}: bounded iter_cf(a) backward: {back:?}",
            h.name
        );
        it.seek(&key(5));
        assert_eq!(
            it.key(),
            key(10),
            "{}: iter_cf(a) seek below the bound",
            h.name
        );
        it.seek(&key(11));
        assert_eq!(it.key(), key(12), "{}: iter_cf(a) seek to b's key", h.name);
        it.seek_for_prev(&key(25));
        assert_eq!(
            it.key(),
            key(18),
            "{}: iter_cf(a) seek_for_prev above the bound",
            h.name
        );
        it.next();
        assert!(!it.valid(), "{}: iter_cf(a) next past the bound", h.name);
        it.status().expect("status");
        drop(it);
        let upper = ro().with_bounds(None, Some(&key(7)));
        assert_eq!(
            scan_cf(db, &upper, Cf::DEFAULT),
            expect("d", &in_d, 0..7),
            "{}: iter_cf(default) upper bound",
            h.name
        );
        let lower = ro().with_bounds(Some(&key(95)), None);
        assert_eq!(
            scan_cf(db, &lower, a),
            expect("a", &in_a, 95..100),
            "{}: iter_cf(a) lower bound",
            h.name
        );
    }
    if caps.supports(Capability::MultiScan) {
        let ranges = vec![
            ScanRange::new(&key(10), &key(20)),
            ScanRange::new(&key(50), &key(53)),
            ScanRange::unbounded(&key(95)),
        ];
        let spans = [10..20, 50..53, 95..100];
        for (cf, n, keep) in [
            (a, "a", &in_a as &dyn Fn(usize) -> bool),
            (b, "b", &|_| true),
            (Cf::DEFAULT, "d", &in_d),
        ] {
            let want: Vec<Vec<Kv>> = spans.iter().map(|s| expect(n, keep, s.clone())).collect();
            let mut ms = db
                .multi_scan_cf(&ro(), cf, &MultiScanArgs::new(ranges.clone()))
                .unwrap_or_else(|e| panic!("{}: multi_scan_cf({n}): {e}", h.name));
            let got = collect_multi_scan(ms.as_mut()).expect("multi_scan_cf results");
            assert_eq!(got, want, "{}: multi_scan_cf over family {n}", h.name);
        }
    }
    if caps.supports(Capability::DeleteRange) {
        let mut batch = WriteBatch::new();
        batch.delete_range_cf(a, &key(30), &key(40));
        batch.delete_range(&key(60), &key(70));
        write(db, &wo(), &batch);
        for i in 0..100 {
            let a_gone = (30..40).contains(&i);
            let d_gone = (60..70).contains(&i);
            let want_a = (in_a(i) && !a_gone).then(|| format!("a{i}").into_bytes());
            let want_d = (in_d(i) && !d_gone).then(|| format!("d{i}").into_bytes());
            assert_eq!(
                get_cf(db, a, &key(i)),
                want_a,
                "{}: a's key {i} after delete_range_cf",
                h.name
            );
            assert_eq!(
                get_cf(db, b, &key(i)),
                Some(format!("b{i}").into_bytes()),
                "{}: b's key {i} after delete_range_cf in a and default",
                h.name
            );
            assert_eq!(
                get(db, &key(i)),
                want_d,
                "{}: default's key {i} after delete_range_cf",
                h.name
            );
        }
    }
}

/// Bad names and unknown names: typed errors, and nothing changes.
pub fn families_errors(h: &Harness) {
    let db = h.open();
    let db = db.as_ref();
    if lacks(db, Capability::ColumnFamilies, "families_errors") {
        return;
    }
    let a = create(db, "a");
    put_cf(db, a, b"k", b"v");
    let too_long = "x".repeat(256);
    for bad in ["", too_long.as_str(), "nul\0inside"] {
        expect_invalid(
            db.create_cf(bad),
            &format!("{}: create_cf of a bad name ({} bytes)", h.name, bad.len()),
        );
        assert_eq!(
            db.cf_handle(bad),
            None,
            "{}: a refused name has a handle",
            h.name
        );
    }
    assert_eq!(
        db.cf_names(),
        names(&["a", "default"]),
        "{}: after refused creates",
        h.name
    );
    expect_invalid(
        db.drop_cf("never-created"),
        &format!("{}: drop_cf of an unknown name", h.name),
    );
    assert_eq!(db.cf_handle("never-created"), None);
    assert_eq!(
        db.cf_handle("A"),
        None,
        "{}: names are case-sensitive",
        h.name
    );
    refused_everywhere(db, Cf::from_id(u32::MAX), "a handle never issued");
    assert_eq!(
        get_cf(db, a, b"k"),
        some(b"v"),
        "{}: a after the refused calls",
        h.name
    );
    assert_eq!(
        db.cf_names(),
        names(&["a", "default"]),
        "{}: at the end",
        h.name
    );
}
