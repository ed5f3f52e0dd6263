// The body of the `prefix_scan` example, shared by `prefix_scan.rs` (the
// facade) and `prefix_scan_rocksdb.rs` (the rocksdb crate); see
// `shared/entities.rs` for how the two mains differ.
//
// Events keyed `user/<id>/<sequence>` in the default family: a prefix scan
// lists one user's events, a reverse seek finds a user's latest event, and
// bounded read options count a range.

use rocksdb::{Direction, IteratorMode, Options, ReadOptions, DB};

fn event_key(user: u32, seq: u32) -> Vec<u8> {
    format!("user/{user:04}/{seq:08}").into_bytes()
}

fn run(path: &std::path::Path) -> Result<(), rocksdb::Error> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    engine_options(&mut opts);
    let db = DB::open(&opts, path)?;
    for user in 1..=20u32 {
        for seq in 0..user {
            db.put(event_key(user, seq), format!("event {seq}"))?;
        }
    }

    // The crate's prefix_iterator stops at the prefix only with a prefix
    // extractor configured, so the scan checks the prefix itself, as
    // portable rocksdb code does.
    let prefix = b"user/0007/";
    let events = db
        .prefix_iterator(prefix)
        .take_while(|kv| kv.as_ref().map_or(true, |(k, _)| k.starts_with(prefix)))
        .collect::<Result<Vec<_>, _>>()?;
    assert_eq!(events.len(), 7);
    assert_eq!(&*events[0].0, &event_key(7, 0)[..]);
    assert_eq!(&*events[6].1, &b"event 6"[..]);

    // The latest event of user 12: the last key at or before the end of
    // the user's keyspace.
    let mut raw = db.raw_iterator();
    raw.seek_for_prev(b"user/0012/\xff");
    assert!(raw.valid());
    assert_eq!(raw.key(), Some(&event_key(12, 11)[..]));
    raw.prev();
    assert_eq!(raw.key(), Some(&event_key(12, 10)[..]));
    raw.seek(b"user/0013/");
    assert_eq!(raw.value(), Some(&b"event 0"[..]));
    raw.status()?;

    // Users 3 to 5 have 3 + 4 + 5 events; read them newest first.
    let mut ro = ReadOptions::default();
    ro.set_iterate_lower_bound(b"user/0003/".to_vec());
    ro.set_iterate_upper_bound(b"user/0006/".to_vec());
    let newest_first: Vec<Box<[u8]>> = db
        .iterator_opt(IteratorMode::End, ro)
        .map(|kv| kv.map(|(k, _)| k))
        .collect::<Result<_, _>>()?;
    assert_eq!(newest_first.len(), 3 + 4 + 5);
    assert_eq!(&*newest_first[0], &event_key(5, 4)[..]);
    assert_eq!(&*newest_first[11], &event_key(3, 0)[..]);

    // Walking backward from the middle of user 2's events.
    let back: Vec<Box<[u8]>> = db
        .iterator(IteratorMode::From(
            b"user/0002/00000001",
            Direction::Reverse,
        ))
        .map(|kv| kv.map(|(k, _)| k))
        .collect::<Result<_, _>>()?;
    assert_eq!(back.len(), 3, "user 2's two events and user 1's one");
    println!("prefix_scan: ok");
    Ok(())
}

fn main() -> Result<(), rocksdb::Error> {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let path = std::env::args_os()
        .nth(1)
        .map_or_else(|| tmp.path().join("db"), std::path::PathBuf::from);
    run(&path)
}
