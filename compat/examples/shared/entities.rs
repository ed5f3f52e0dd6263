// The body of the `entities` example, shared by `entities.rs` (the
// facade) and `entities_rocksdb.rs` (the rocksdb crate). Family handles
// are passed by reference, which compiles with the crate's default
// single-threaded `DB` (`&ColumnFamily`) and with its `multi-threaded-cf`
// one (`Arc<BoundColumnFamily>`), as this workspace builds it. It names the API
// only through `rocksdb::`, and calls `engine_options`, which each main
// defines: the facade's picks the engine, the crate's does nothing.
//
// A keyspace per entity type: `users` and `orders` are column families;
// one batch writes a user and their orders across both; the database is
// reopened the way a rocksdb program finds its families (`list_cf`, then
// `open_cf`), and reads go by family.

use rocksdb::{IteratorMode, Options, WriteBatch, DB};

fn open(path: &std::path::Path) -> Result<DB, rocksdb::Error> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    engine_options(&mut opts);
    let mut families = DB::list_cf(&opts, path).unwrap_or_default();
    for wanted in ["users", "orders"] {
        if !families.iter().any(|f| f == wanted) {
            families.push(wanted.to_string());
        }
    }
    DB::open_cf(&opts, path, &families)
}

fn run(path: &std::path::Path) -> Result<(), rocksdb::Error> {
    {
        let db = open(path)?;
        let users = db.cf_handle("users").expect("users family");
        let orders = db.cf_handle("orders").expect("orders family");
        let mut batch = WriteBatch::default();
        for (id, name) in [(1u32, "ann"), (2, "bob"), (3, "cyd")] {
            batch.put_cf(&users, id.to_be_bytes(), name);
            for n in 0..id {
                let key = [id.to_be_bytes(), n.to_be_bytes()].concat();
                batch.put_cf(&orders, key, format!("order {n} of {name}"));
            }
        }
        db.write(batch)?;
        // The default family holds the schema version, untouched by the
        // batch above.
        db.put(b"schema", b"1")?;
    }

    let mut db = open(path)?;
    assert_eq!(db.get(b"schema")?.as_deref(), Some(&b"1"[..]));
    {
        let users = db.cf_handle("users").expect("users family after reopen");
        let orders = db.cf_handle("orders").expect("orders family after reopen");
        assert_eq!(
            db.get_cf(&users, 2u32.to_be_bytes())?.as_deref(),
            Some(&b"bob"[..])
        );
        assert_eq!(
            db.get_cf(&orders, 2u32.to_be_bytes())?,
            None,
            "keyspaces leak"
        );
        let names: Vec<Vec<u8>> = db
            .iterator_cf(&users, IteratorMode::End)
            .map(|kv| kv.map(|(_, v)| v.into_vec()))
            .collect::<Result<_, _>>()?;
        assert_eq!(
            names,
            vec![b"cyd".to_vec(), b"bob".to_vec(), b"ann".to_vec()]
        );
        let order_count = db.iterator_cf(&orders, IteratorMode::Start).count();
        assert_eq!(order_count, 1 + 2 + 3);
        let found = db.multi_get_cf([
            (&users, 3u32.to_be_bytes().to_vec()),
            (&orders, [3u32.to_be_bytes(), 2u32.to_be_bytes()].concat()),
            (&users, 9u32.to_be_bytes().to_vec()),
        ]);
        let found: Vec<Option<Vec<u8>>> = found.into_iter().collect::<Result<_, _>>()?;
        assert_eq!(
            found,
            vec![
                Some(b"cyd".to_vec()),
                Some(b"order 2 of cyd".to_vec()),
                None
            ]
        );
        // Deleting a user and their orders is one atomic batch.
        let mut batch = WriteBatch::default();
        batch.delete_cf(&users, 3u32.to_be_bytes());
        batch.delete_range_cf(&orders, 3u32.to_be_bytes(), 4u32.to_be_bytes());
        db.write(batch)?;
        assert_eq!(db.iterator_cf(&orders, IteratorMode::Start).count(), 1 + 2);
        assert_eq!(db.get_cf(&users, 3u32.to_be_bytes())?, None);
    }
    // Dropping a keyspace removes every key in it.
    db.drop_cf("orders")?;
    assert!(db.cf_handle("orders").is_none());
    db.create_cf("orders", &Options::default())?;
    let orders = db.cf_handle("orders").expect("orders family re-created");
    assert_eq!(db.iterator_cf(&orders, IteratorMode::Start).count(), 0);
    println!("entities: ok");
    Ok(())
}

fn main() -> Result<(), rocksdb::Error> {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let path = std::env::args_os()
        .nth(1)
        .map_or_else(|| tmp.path().join("db"), std::path::PathBuf::from);
    run(&path)
}
