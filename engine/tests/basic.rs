//! Point operations, batches, iterators, reopen and bad input.

mod common;

use std::collections::BTreeMap;

use common::*;
use vmemkv::{Bounds, Db, Error, Options, WriteBatch, WriteOptions};

#[test]
fn put_get_delete_and_sizes_survive_reopen() {
    let dir = tmp();
    let sizes = [0usize, 1, 8, 9, 1024, 64 << 10, 4 << 20];
    {
        let db = Db::open(dir.path(), Options::default().background(false))
            .unwrap_or_else(|e| panic!("{e}"));
        for (i, &n) in sizes.iter().enumerate() {
            db.put(&key(i as u64), &value(i as u64, 0, n))
                .unwrap_or_else(|e| panic!("put {n}: {e}"));
        }
        db.put(b"gone", b"x").unwrap_or_else(|e| panic!("{e}"));
        db.delete(b"gone").unwrap_or_else(|e| panic!("{e}"));
        db.delete(b"never-existed")
            .unwrap_or_else(|e| panic!("{e}"));
        for (i, &n) in sizes.iter().enumerate() {
            assert_eq!(
                db.get(&key(i as u64)).ok().flatten(),
                Some(value(i as u64, 0, n))
            );
        }
        assert_eq!(db.get(b"gone").ok().flatten(), None);
    }
    let db = Db::open(dir.path(), Options::default().background(false))
        .unwrap_or_else(|e| panic!("{e}"));
    for (i, &n) in sizes.iter().enumerate() {
        assert_eq!(
            db.get(&key(i as u64)).ok().flatten(),
            Some(value(i as u64, 0, n)),
            "size {n}"
        );
    }
    assert_eq!(db.get(b"gone").ok().flatten(), None);
}

#[test]
fn inline_off_and_bloom_off_behave_the_same() {
    for (inline, bloom) in [(false, false), (true, false), (false, true)] {
        let dir = tmp();
        {
            let db = Db::open(dir.path(), opts().inline_values(inline).bloom(bloom))
                .unwrap_or_else(|e| panic!("{e}"));
            for i in 0..200u64 {
                db.put(&key(i), &value(i, 1, (i % 12) as usize))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            assert_eq!(db.get(&key(7)).ok().flatten(), Some(value(7, 1, 7)));
        }
        let db =
            Db::open(dir.path(), opts().inline_values(inline)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dump(&db).len(), 200);
        assert_eq!(db.get(&key(11)).ok().flatten(), Some(value(11, 1, 11)));
    }
}

#[test]
fn batches_apply_in_order_and_range_deletes() {
    let dir = tmp();
    let db = open(dir.path());
    let mut b = WriteBatch::new();
    for i in 0..10u64 {
        b.put(&key(i), &value(i, 0, 100));
    }
    b.put(&key(3), b"last-wins");
    b.delete(&key(4));
    db.write(&WriteOptions::sync(), &b)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(db.get(&key(3)).ok().flatten(), Some(b"last-wins".to_vec()));
    assert_eq!(db.get(&key(4)).ok().flatten(), None);
    db.delete_range(&WriteOptions::default(), &key(6), &key(9))
        .unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<Vec<u8>> = dump(&db).into_keys().collect();
    let want: Vec<Vec<u8>> = [0u64, 1, 2, 3, 5, 9].iter().map(|&i| key(i)).collect();
    assert_eq!(keys, want);
    drop(db);
    let db = open(dir.path());
    let keys: Vec<Vec<u8>> = dump(&db).into_keys().collect();
    assert_eq!(keys, want);
}

#[test]
fn iterator_bounds_and_direction_changes() {
    let dir = tmp();
    let db = open(dir.path());
    let mut model = BTreeMap::new();
    for i in (0..100u64).step_by(2) {
        let v = value(i, 0, (i % 20) as usize);
        db.put(&key(i), &v).unwrap_or_else(|e| panic!("{e}"));
        model.insert(key(i), v);
    }
    let mut it = db.iter(Bounds::new(Some(&key(10)), Some(&key(20))));
    assert!(!it.valid());
    it.seek_to_first();
    assert_eq!(it.key(), key(10).as_slice());
    assert_eq!(it.value(), model[&key(10)].as_slice());
    it.seek_to_last();
    assert_eq!(it.key(), key(18).as_slice());
    it.next();
    assert!(!it.valid());
    assert_eq!(it.key(), b"");
    it.seek(&key(13));
    assert_eq!(it.key(), key(14).as_slice());
    it.prev();
    assert_eq!(it.key(), key(12).as_slice());
    it.next();
    it.next();
    assert_eq!(it.key(), key(16).as_slice());
    it.seek_for_prev(&key(99));
    assert_eq!(it.key(), key(18).as_slice());
    it.seek(&key(0));
    assert_eq!(it.key(), key(10).as_slice());
    it.prev();
    assert!(!it.valid());
    it.seek_for_prev(&key(5));
    assert!(!it.valid());
    assert!(it.status().is_ok());
    assert_eq!(dump(&db), model);
}

#[test]
fn oversized_keys_and_values_are_invalid_arguments() {
    let dir = tmp();
    let db = Db::open(dir.path(), Options::default().background(false))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(db.max_key_size(), 65_535);
    assert_eq!(db.max_value_size(), 16 << 20);
    let k = vec![1u8; 65_535];
    db.put(&k, b"v").unwrap_or_else(|e| panic!("max key: {e}"));
    assert!(
        matches!(db.put(&vec![1u8; 65_536], b"v"), Err(Error::InvalidArgument(m)) if m.contains("65536"))
    );
    let v = vec![2u8; 16 << 20];
    db.put(b"big", &v)
        .unwrap_or_else(|e| panic!("max value: {e}"));
    assert_eq!(
        db.get(b"big").ok().flatten().map(|x| x.len()),
        Some(16 << 20)
    );
    assert!(matches!(
        db.put(b"k", &vec![0u8; (16 << 20) + 1]),
        Err(Error::InvalidArgument(_))
    ));
    let mut b = WriteBatch::new();
    b.put(b"k", &vec![0u8; (16 << 20) + 1]);
    assert!(matches!(
        db.write(&WriteOptions::default(), &b),
        Err(Error::InvalidArgument(_))
    ));
    let mut b = WriteBatch::new();
    for _ in 0..5 {
        b.put(b"k", &vec![0u8; 16 << 20]);
    }
    assert!(
        matches!(db.write(&WriteOptions::default(), &b), Err(Error::InvalidArgument(m)) if m.contains("segment"))
    );
    assert!(matches!(
        Db::open(tmp().path(), Options::default().segment_size(12345)),
        Err(Error::InvalidArgument(m)) if m.contains("segment_size")
    ));
    for bad in [0.5, 1.0, -2.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            Db::open(tmp().path(), Options::default().max_space_amplification(bad)),
            Err(Error::InvalidArgument(m)) if m.contains("max_space_amplification")
        ));
    }
}

#[test]
fn second_open_is_busy_and_lock_is_released_on_drop() {
    let dir = tmp();
    let db = open(dir.path());
    assert!(matches!(Db::open(dir.path(), opts()), Err(Error::Busy(m)) if m.contains("LOCK")));
    drop(db);
    let _db = open(dir.path());
}

/// Whether a process other than this one can take `LOCK`'s write lock
/// right now. The child is forked and only makes async-signal-safe calls.
fn another_process_can_lock(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.join("LOCK").as_os_str().as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: the child only calls open, fcntl and _exit (async-signal-safe)
    // on data prepared before the fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: as above; `fl` is a plain C struct, valid when zeroed.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDWR);
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = libc::F_WRLCK as libc::c_short;
            fl.l_whence = libc::SEEK_SET as libc::c_short;
            let code = if fd < 0 {
                2
            } else if libc::fcntl(fd, libc::F_SETLK, &fl) == 0 {
                0
            } else {
                1
            };
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(rc, pid);
    assert!(libc::WIFEXITED(status), "child status {status}");
    let code = libc::WEXITSTATUS(status);
    assert_ne!(code, 2, "the child could not open LOCK");
    code == 0
}

/// A second open in the same process is refused before it touches `LOCK`:
/// with process-owned locks, closing its descriptor would have released
/// the first database's lock, and another process could then open it too.
#[test]
fn a_refused_second_open_leaves_the_lock_held_against_other_processes() {
    let dir = tmp();
    let db = open(dir.path());
    assert!(!another_process_can_lock(dir.path()));
    for _ in 0..3 {
        assert!(matches!(Db::open(dir.path(), opts()), Err(Error::Busy(m)) if m.contains("LOCK")));
    }
    assert!(!another_process_can_lock(dir.path()));
    drop(db);
    assert!(another_process_can_lock(dir.path()));
}

/// A child process forked while the database is open, still running and
/// never exec'ing, does not hold the lock: a close and an immediate reopen
/// succeed. (An `flock` would be shared with the child.)
#[test]
fn a_forked_child_does_not_keep_the_database_locked() {
    let dir = tmp();
    let db = open(dir.path());
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
    drop(db);
    let reopened = Db::open(dir.path(), opts());
    // SAFETY: signals and reaps the child forked above.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    assert!(reopened.is_ok(), "{:?}", reopened.err());
}

#[test]
fn bad_directories_are_typed_errors_naming_the_path() {
    let dir = tmp();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap_or_else(|e| panic!("{e}"));
    match Db::open(&file, opts()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("plain-file"), "{m}"),
        other => panic!("file as dir: {:?}", other.err()),
    }
    match Db::open(file.join("sub"), opts()) {
        Err(Error::IoError(m)) => {
            assert!(m.contains("plain-file"), "{m}");
            // The OS's own kind survives (ENOTDIR), not a bare string.
            assert_eq!(m.kind(), std::io::ErrorKind::NotADirectory, "{m}");
        }
        other => panic!("dir under a file: {:?}", other.err()),
    }
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(foreign.join("notes.txt"), b"mine").unwrap_or_else(|e| panic!("{e}"));
    match Db::open(&foreign, opts()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("notes.txt"), "{m}"),
        other => panic!("foreign dir: {:?}", other.err()),
    }
    let missing = dir.path().join("missing");
    assert!(matches!(
        Db::open(&missing, opts().create_if_missing(false)),
        Err(Error::InvalidArgument(m)) if m.contains("missing")
    ));
    let created = dir.path().join("a/b/c");
    drop(Db::open(&created, opts()).unwrap_or_else(|e| panic!("{e}")));
    assert!(matches!(
        Db::open(&created, opts().error_if_exists(true)),
        Err(Error::InvalidArgument(_))
    ));
    // Unwritable: root ignores permission bits, so use a read-only
    // directory when not root and sysfs (refuses new files) when root.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ro = if root {
        std::path::PathBuf::from("/sys/kernel/vmemkv-test-db")
    } else {
        use std::os::unix::fs::PermissionsExt;
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555))
            .unwrap_or_else(|e| panic!("{e}"));
        ro.join("db")
    };
    match Db::open(&ro, opts()) {
        Err(Error::IoError(m)) => {
            assert!(m.contains("vmemkv-test-db") || m.contains("ro/db"), "{m}");
            assert_ne!(
                m.kind(),
                std::io::ErrorKind::Other,
                "{m}: the OS's kind is kept"
            );
        }
        other => panic!("unwritable: {:?}", other.err()),
    }
}

#[test]
fn files_are_mode_0644_or_stricter() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmp();
    let db = open(dir.path());
    db.put(b"k", &[1u8; 100]).unwrap_or_else(|e| panic!("{e}"));
    db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
    drop(db);
    for ent in std::fs::read_dir(dir.path()).unwrap_or_else(|e| panic!("{e}")) {
        let ent = ent.unwrap_or_else(|e| panic!("{e}"));
        let mode = ent
            .metadata()
            .map(|m| m.permissions().mode())
            .unwrap_or(0o777);
        assert_eq!(mode & 0o133, 0, "{:?} has mode {mode:o}", ent.file_name());
    }
}

#[test]
fn statistics_and_info_log_report_activity() {
    let dir = tmp();
    let db = open(dir.path());
    for i in 0..3000u64 {
        db.put(&key(i), &value(i, 0, 1000))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
    db.reorganize().unwrap_or_else(|e| panic!("{e}"));
    let s = db.statistics();
    assert_eq!(s.checkpoints, 1);
    assert!(s.checkpoint_last_bytes > 3000 * 16);
    assert_eq!(s.reorganizes, 1);
    assert!(s.t2_segments >= 3, "{s:?}");
    assert!(
        s.t2_live_bytes >= 3000 * 1000 && s.t2_live_bytes <= 3000 * 1100,
        "{s:?}"
    );
    assert_eq!(s.t1_entries, 3000);
    assert_eq!(s.log_bytes_since_checkpoint, 0);
    let text = s.to_string();
    assert!(text.contains("checkpoint: count=1"), "{text}");
    drop(db);
    let log = info_log(dir.path());
    for needle in [
        "open ",
        "recovery: replayed",
        "checkpoint 1:",
        "reorganize:",
        "close ",
    ] {
        assert!(log.contains(needle), "LOG lacks '{needle}':\n{log}");
    }
}

#[test]
fn group_commit_shares_msyncs_between_sync_writers() {
    let dir = tmp();
    let db = std::sync::Arc::new(open(dir.path()));
    let before = db.statistics();
    let hs: Vec<_> = (0..8u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..100u64 {
                    db.put_opt(&WriteOptions::sync(), &key(t << 32 | i), &value(t, i, 300))
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap_or_else(|_| panic!("writer panicked"));
    }
    let s = db.statistics();
    let waiters = s.sync_waiters - before.sync_waiters;
    let rounds = s.sync_rounds - before.sync_rounds;
    assert_eq!(waiters, 800);
    // Eight writers waiting on msync at once must share rounds.
    assert!(
        rounds < waiters,
        "{rounds} msync rounds for {waiters} sync writes"
    );
    eprintln!("group commit: {rounds} msync rounds for {waiters} sync writes");
    drop(db);
    let db = open(dir.path());
    assert_eq!(dump(&db).len(), 800);
}

#[test]
fn deletes_of_absent_keys_write_nothing_and_stay_correct() {
    let dir = tmp();
    let logged = |db: &Db| db.statistics().log_bytes_since_checkpoint;
    {
        let db = Db::open(dir.path(), Options::default().background(false))
            .unwrap_or_else(|e| panic!("{e}"));
        db.put(b"a", b"1").unwrap_or_else(|e| panic!("{e}"));
        db.put(b"b", b"2").unwrap_or_else(|e| panic!("{e}"));
        // A live key: logged.
        let before = logged(&db);
        db.delete(b"a").unwrap_or_else(|e| panic!("{e}"));
        assert!(logged(&db) > before);
        assert_eq!(db.statistics().deletes_elided, 0);
        // Deleted already, and never written: no record, read your writes.
        let before = logged(&db);
        db.delete(b"a").unwrap_or_else(|e| panic!("{e}"));
        db.delete(b"never").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(logged(&db), before);
        assert_eq!(db.statistics().deletes_elided, 2);
        assert_eq!(db.get(b"a").ok().flatten(), None);
        assert_eq!(db.get(b"never").ok().flatten(), None);
        // A sync delete promises durability: always logged.
        db.delete_opt(&WriteOptions::sync(), b"never")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(logged(&db) > before);
        assert_eq!(db.statistics().deletes_elided, 2);
        // The key comes back with a put, and goes with the next delete.
        db.put(b"a", b"3").unwrap_or_else(|e| panic!("{e}"));
        db.delete(b"a").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(db.get(b"a").ok().flatten(), None);
        assert_eq!(db.statistics().deletes_elided, 2);
    }
    let db = Db::open(dir.path(), Options::default().background(false))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(db.get(b"a").ok().flatten(), None);
    assert_eq!(db.get(b"b").ok().flatten(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"never").ok().flatten(), None);
}
