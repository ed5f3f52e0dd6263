//! The facade on every compiled-in engine that iterates (not null, which
//! stores nothing, nor Sparkey, which has point operations only).

use super::*;

fn engines() -> Vec<EngineKind> {
    EngineKind::compiled_in()
        .into_iter()
        .filter(|k| !matches!(k, EngineKind::Null | EngineKind::Sparkey))
        .collect()
}

fn opts(kind: EngineKind) -> Options {
    let mut o = Options::default();
    o.set_engine(kind);
    o.create_if_missing(true);
    o
}

fn open(kind: EngineKind, dir: &Path) -> DB {
    DB::open(&opts(kind), dir).unwrap_or_else(|e| panic!("{kind}: open: {e}"))
}

fn keys(it: DBIterator<'_>) -> Vec<Vec<u8>> {
    it.map(|kv| kv.expect("iterator item").0.into_vec())
        .collect()
}

fn v(s: &[u8]) -> Vec<u8> {
    s.to_vec()
}

#[test]
fn point_operations_and_their_opt_forms() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(kind, dir.path());
        db.put(b"k1", b"v1").expect("put");
        db.put("k2", "v2").expect("put &str");
        let mut wo = WriteOptions::new();
        wo.set_sync(true);
        db.put_opt(b"k3", b"v3", &wo).expect("put_opt sync");
        let mut nowal = WriteOptions::default();
        nowal.disable_wal(true);
        db.put_opt(b"k4", b"v4", &nowal).expect("put_opt no WAL");
        assert_eq!(db.get(b"k1").expect("get"), Some(v(b"v1")), "{kind}");
        assert_eq!(
            db.get_opt("k2", &ReadOptions::default()).expect("get_opt"),
            Some(v(b"v2"))
        );
        assert_eq!(db.get(b"k4").expect("get"), Some(v(b"v4")), "{kind}");
        let pinned = db
            .get_pinned(b"k3")
            .expect("get_pinned")
            .expect("k3 present");
        assert_eq!(&*pinned, b"v3", "{kind}");
        assert_eq!(pinned.as_ref().len(), 2);
        assert!(db.get_pinned(b"nope").expect("get_pinned").is_none());
        db.delete(b"k1").expect("delete");
        db.delete_opt(b"k2", &wo).expect("delete_opt");
        assert_eq!(db.get(b"k1").expect("get"), None, "{kind}");
        assert_eq!(db.get(b"k2").expect("get"), None, "{kind}");
        let got = db.multi_get([&b"k3"[..], b"k1", b"k4"]);
        let got: Vec<_> = got.into_iter().map(|r| r.expect("multi_get")).collect();
        assert_eq!(got, vec![Some(v(b"v3")), None, Some(v(b"v4"))], "{kind}");
    }
}

#[test]
fn open_follows_create_if_missing_and_error_if_exists() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = Options::default();
        o.set_engine(kind);
        assert!(
            DB::open(&o, dir.path().join("db")).is_err(),
            "{kind}: open without create_if_missing created a database"
        );
        drop(open(kind, &dir.path().join("db")));
        o.create_if_missing(true);
        o.set_error_if_exists(true);
        assert!(
            DB::open(&o, dir.path().join("db")).is_err(),
            "{kind}: error_if_exists ignored"
        );
        o.set_error_if_exists(false);
        let db = DB::open(&o, dir.path().join("db")).expect("reopen");
        assert_eq!(db.path(), dir.path().join("db"));
    }
}

#[test]
fn open_default_is_vmemkv_and_persists() {
    if !EngineKind::Vmemkv.is_compiled_in() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = DB::open_default(dir.path()).expect("open_default");
        assert_eq!(db.engine().name(), "vmemkv");
        db.put(b"a", b"1").expect("put");
    }
    let db = DB::open_default(dir.path()).expect("reopen");
    assert_eq!(db.get(b"a").expect("get"), Some(v(b"1")));
}

fn fill(db: &DB) {
    for k in [&b"a"[..], b"b", b"c", b"d"] {
        db.put(k, [k, b"!"].concat()).expect("put");
    }
}

#[test]
fn iterator_modes_in_both_directions() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(kind, dir.path());
        fill(&db);
        assert_eq!(
            keys(db.iterator(IteratorMode::Start)),
            vec![v(b"a"), v(b"b"), v(b"c"), v(b"d")],
            "{kind}"
        );
        assert_eq!(
            keys(db.iterator(IteratorMode::End)),
            vec![v(b"d"), v(b"c"), v(b"b"), v(b"a")],
            "{kind}"
        );
        let from = |k: &'static [u8], d| keys(db.iterator(IteratorMode::From(k, d)));
        assert_eq!(
            from(b"bb", Direction::Forward),
            vec![v(b"c"), v(b"d")],
            "{kind}"
        );
        assert_eq!(
            from(b"bb", Direction::Reverse),
            vec![v(b"b"), v(b"a")],
            "{kind}"
        );
        assert_eq!(
            from(b"c", Direction::Forward),
            vec![v(b"c"), v(b"d")],
            "{kind}"
        );
        assert_eq!(
            from(b"c", Direction::Reverse),
            vec![v(b"c"), v(b"b"), v(b"a")],
            "{kind}"
        );
        assert_eq!(
            from(b"e", Direction::Forward),
            Vec::<Vec<u8>>::new(),
            "{kind}"
        );
        let mut it = db.iterator(IteratorMode::Start);
        let (k, val) = it.next().expect("first").expect("ok");
        assert_eq!((&*k, &*val), (&b"a"[..], &b"a!"[..]));
        it.set_mode(IteratorMode::From(b"b", Direction::Reverse));
        assert_eq!(keys(it), vec![v(b"b"), v(b"a")], "{kind}");
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(b"b".to_vec());
        ro.set_iterate_upper_bound(&b"d"[..]);
        assert_eq!(
            keys(db.iterator_opt(IteratorMode::End, ro)),
            vec![v(b"c"), v(b"b")],
            "{kind}"
        );
    }
}

#[test]
fn prefix_iterator_stops_at_the_prefix() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(kind, dir.path());
        for k in [
            &b"order:1"[..],
            b"user:1",
            b"user:2",
            b"user;",
            b"user\xff",
            b"users",
        ] {
            db.put(k, b"x").expect("put");
        }
        assert_eq!(
            keys(db.prefix_iterator(b"user:")),
            vec![v(b"user:1"), v(b"user:2")],
            "{kind}"
        );
        assert_eq!(keys(db.prefix_iterator(b"user")).len(), 5, "{kind}");
        assert_eq!(
            keys(db.prefix_iterator(b"zzz")),
            Vec::<Vec<u8>>::new(),
            "{kind}"
        );
    }
    assert_eq!(prefix_successor(b"ab"), Some(v(b"ac")));
    assert_eq!(prefix_successor(b"a\xff\xff"), Some(v(b"b")));
    assert_eq!(prefix_successor(b"\xff"), None);
    assert_eq!(prefix_successor(b""), None);
}

#[test]
fn raw_iterator_seeks_and_steps() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(kind, dir.path());
        fill(&db);
        let mut it = db.raw_iterator();
        assert!(!it.valid());
        assert_eq!(it.key(), None);
        assert_eq!(it.value(), None);
        it.seek(b"bb");
        assert_eq!(it.key(), Some(&b"c"[..]), "{kind}");
        it.seek_for_prev(b"bb");
        assert_eq!(it.item(), Some((&b"b"[..], &b"b!"[..])), "{kind}");
        it.prev();
        assert_eq!(it.key(), Some(&b"a"[..]), "{kind}");
        it.prev();
        assert!(!it.valid(), "{kind}");
        it.seek_for_prev(b"zz");
        assert_eq!(it.key(), Some(&b"d"[..]), "{kind}");
        it.next();
        assert!(!it.valid(), "{kind}");
        it.seek_to_first();
        it.next();
        assert_eq!(it.value(), Some(&b"b!"[..]), "{kind}");
        it.seek_to_last();
        assert_eq!(it.key(), Some(&b"d"[..]), "{kind}");
        it.status().expect("status");
        let through: DBRawIterator<'_> = db.iterator(IteratorMode::End).into();
        assert_eq!(through.key(), Some(&b"d"[..]), "{kind}");
    }
}

#[test]
fn batch_is_atomic_on_the_default_family() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(kind, dir.path());
        fill(&db);
        let mut batch = WriteBatch::default();
        assert!(batch.is_empty());
        batch.put(b"e", b"e!");
        batch.delete(b"a");
        batch.delete_range(b"b", b"d");
        assert_eq!(batch.len(), 3);
        assert!(batch.size_in_bytes() > 0);
        db.write(batch).expect("write");
        assert_eq!(
            keys(db.iterator(IteratorMode::Start)),
            vec![v(b"d"), v(b"e")],
            "{kind}"
        );
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        let mut batch = WriteBatch::with_capacity_bytes(64);
        batch.put(b"f", b"1");
        batch.clear();
        batch.put(b"g", b"1");
        db.write_opt(batch, &wo).expect("write_opt");
        assert_eq!(
            db.get(b"f").expect("get"),
            None,
            "{kind}: a cleared update was applied"
        );
        assert_eq!(db.get(b"g").expect("get"), Some(v(b"1")), "{kind}");
    }
}

#[test]
fn snapshot_reads_see_the_moment_it_was_taken() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(kind, dir.path());
        fill(&db);
        let snap = db.snapshot();
        db.put(b"a", b"changed").expect("put");
        db.delete(b"b").expect("delete");
        db.put(b"z", b"new").expect("put");
        assert_eq!(snap.get(b"a").expect("get"), Some(v(b"a!")), "{kind}");
        assert_eq!(snap.get(b"z").expect("get"), None, "{kind}");
        assert_eq!(
            keys(snap.iterator(IteratorMode::Start)),
            vec![v(b"a"), v(b"b"), v(b"c"), v(b"d")],
            "{kind}"
        );
        let mut raw = snap.raw_iterator();
        raw.seek_for_prev(b"zz");
        assert_eq!(raw.key(), Some(&b"d"[..]), "{kind}");
        let mut ro = ReadOptions::default();
        ro.set_snapshot(&snap);
        assert_eq!(
            db.get_opt(b"b", &ro).expect("get_opt"),
            Some(v(b"b!")),
            "{kind}"
        );
        let got: Vec<_> = snap
            .multi_get([&b"a"[..], b"z"])
            .into_iter()
            .map(|r| r.expect("multi_get"))
            .collect();
        assert_eq!(got, vec![Some(v(b"a!")), None], "{kind}");
        assert_eq!(db.get(b"a").expect("get"), Some(v(b"changed")), "{kind}");
    }
}

#[test]
fn default_family_handle_follows_the_crate() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            // The crate fills its family map only from open_cf's list.
            let db = open(kind, dir.path());
            assert!(db.cf_handle(DEFAULT_COLUMN_FAMILY_NAME).is_none(), "{kind}");
        }
        let db = DB::open_cf(&opts(kind), dir.path(), ["default"]).expect("open_cf");
        let cf = db.cf_handle("default").expect("default handle");
        db.put_cf(cf, b"k", b"v").expect("put_cf");
        assert_eq!(db.get(b"k").expect("get"), Some(v(b"v")), "{kind}");
        assert_eq!(
            &*db.get_pinned_cf(cf, b"k").expect("pinned").expect("some"),
            b"v"
        );
        let mut batch = WriteBatch::default();
        batch.put_cf(cf, b"k2", b"v2");
        batch.delete_cf(&cf, b"k");
        db.write(batch).expect("write");
        assert_eq!(
            keys(db.iterator_cf(cf, IteratorMode::Start)),
            vec![v(b"k2")],
            "{kind}"
        );
    }
}

#[test]
fn errors_have_the_crate_shape() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut db = open(kind, dir.path());
        let e = db
            .drop_cf("absent")
            .expect_err("dropping a family never opened");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.as_ref().contains("absent"), "{e}");
        let s: String = e.clone().into();
        assert_eq!(s, e.into_string());
        let e: Error = crate::Error::NotSupported("x".into()).into();
        assert_eq!(e.kind(), ErrorKind::NotSupported);
    }
}

// ---- families beyond `default` (need the adapters' family support) ----

#[test]
fn families_create_write_read_and_drop() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut db = open(kind, dir.path());
        db.create_cf("users", &Options::default())
            .expect("create users");
        db.create_cf("orders", &Options::default())
            .expect("create orders");
        assert!(
            db.create_cf("users", &Options::default()).is_err(),
            "{kind}: created twice"
        );
        let users = db.cf_handle("users").expect("users");
        let orders = db.cf_handle("orders").expect("orders");
        db.put_cf(users, b"1", b"ann").expect("put_cf");
        db.put(b"1", b"default one").expect("put");
        let mut batch = WriteBatch::default();
        batch.put_cf(users, b"2", b"bob");
        batch.put_cf(orders, b"1:a", b"apples");
        batch.put_cf(orders, b"1:b", b"bread");
        batch.put_cf(orders, b"2:a", b"axes");
        db.write(batch).expect("batch across families");
        assert_eq!(
            db.get_cf(users, b"1").expect("get_cf"),
            Some(v(b"ann")),
            "{kind}"
        );
        assert_eq!(
            db.get(b"1").expect("get"),
            Some(v(b"default one")),
            "{kind}"
        );
        assert_eq!(db.get_cf(orders, b"1").expect("get_cf"), None, "{kind}");
        assert_eq!(
            keys(db.iterator_cf(users, IteratorMode::End)),
            vec![v(b"2"), v(b"1")],
            "{kind}"
        );
        assert_eq!(
            keys(db.prefix_iterator_cf(orders, b"1:")),
            vec![v(b"1:a"), v(b"1:b")],
            "{kind}"
        );
        let mut raw = db.raw_iterator_cf(orders);
        raw.seek_for_prev(b"2");
        assert_eq!(raw.key(), Some(&b"1:b"[..]), "{kind}");
        drop(raw);
        let got: Vec<_> = db
            .multi_get_cf([(users, &b"2"[..]), (orders, b"2:a"), (users, b"3")])
            .into_iter()
            .map(|r| r.expect("multi_get_cf"))
            .collect();
        assert_eq!(got, vec![Some(v(b"bob")), Some(v(b"axes")), None], "{kind}");
        let snap = db.snapshot();
        db.delete_cf(users, b"1").expect("delete_cf");
        db.delete_range_cf(orders, &b"1"[..], &b"2"[..])
            .expect("delete_range_cf");
        assert_eq!(
            snap.get_cf(users, b"1").expect("snap get_cf"),
            Some(v(b"ann")),
            "{kind}"
        );
        assert_eq!(
            keys(snap.iterator_cf(orders, IteratorMode::Start)).len(),
            3,
            "{kind}"
        );
        assert_eq!(
            keys(db.iterator_cf(orders, IteratorMode::Start)),
            vec![v(b"2:a")],
            "{kind}"
        );
        drop(snap);
        db.drop_cf("orders").expect("drop_cf");
        assert!(db.cf_handle("orders").is_none());
        db.create_cf("orders", &Options::default())
            .expect("create again");
        let orders = db.cf_handle("orders").expect("orders again");
        assert_eq!(
            keys(db.iterator_cf(orders, IteratorMode::Start)),
            Vec::<Vec<u8>>::new(),
            "{kind}: a re-created family is not empty"
        );
    }
}

#[test]
fn open_cf_follows_rocksdb_rules() {
    for kind in engines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = opts(kind);
        assert!(
            DB::open_cf(&o, dir.path(), ["users"]).is_err(),
            "{kind}: opened a missing family"
        );
        let mut create = opts(kind);
        create.create_missing_column_families(true);
        {
            let db = DB::open_cf(&create, dir.path(), ["users", "orders"]).expect("open_cf create");
            let users = db.cf_handle("users").expect("users");
            db.put_cf(users, b"k", b"v").expect("put_cf");
            assert!(db.cf_handle("default").is_some());
        }
        let mut names = DB::list_cf(&o, dir.path()).expect("list_cf");
        names.sort();
        assert_eq!(names, vec!["default", "orders", "users"], "{kind}");
        let e = DB::open(&o, dir.path()).expect_err("open without listing the families");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{kind}");
        assert!(
            e.as_ref().contains("orders") && e.as_ref().contains("users"),
            "{e}"
        );
        assert!(
            DB::open_cf(&o, dir.path(), ["users"]).is_err(),
            "{kind}: orders left out"
        );
        let db = DB::open_cf(&o, dir.path(), &names).expect("open_cf all");
        assert_eq!(
            db.get_cf(db.cf_handle("users").expect("users"), b"k")
                .expect("get_cf"),
            Some(v(b"v")),
            "{kind}"
        );
    }
}
