//! EIO from a failing disk, through the engine's injectable I/O errors
//! (`vmemkv::failpoint::set_io_error`, feature `failpoints`): the failing
//! call is an `IoError` naming what failed and the engine keeps serving
//! reads. A failed write or sync of the log poisons the handle: the kernel
//! may have dropped the pages it could not write, so every later write and
//! sync is `Poisoned` even once the disk works again, and a reopen finds
//! every acknowledged write. Failures that lose nothing (creating a
//! segment, a snapshot) do not poison. Its own test binary: the switch is
//! process-wide.

use vmemkv::failpoint::set_io_error;
use vmemkv::{Db, Error, Options, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn val(i: u32) -> Vec<u8> {
    vec![(i % 251) as u8; 2000]
}

fn poisoned(r: vmemkv::Result<()>) {
    match r {
        Err(Error::Poisoned(m)) => assert!(m.contains("reopen"), "{m}"),
        other => panic!("expected Poisoned, got {other:?}"),
    }
}

fn io_error_naming(r: vmemkv::Result<()>, what: &str) {
    match r {
        Err(Error::IoError(m)) => assert!(m.contains(what) && m.contains("os error 5"), "{m}"),
        other => panic!("expected an IoError naming {what}, got {other:?}"),
    }
}

#[test]
fn eio_is_an_io_error_reads_go_on_and_the_engine_recovers() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let opts = || Options::default().segment_size(1 << 20).background(false);
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    let mut acked = Vec::new();
    {
        let db = Db::open(dir.path(), opts()).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..100 {
            db.put_opt(&sync, &key(i), &val(i))
                .unwrap_or_else(|e| panic!("{e}"));
            acked.push(i);
        }

        // msync fails: the sync write reports it, and from then on every
        // write, sync and checkpoint is Poisoned, even once the disk works.
        set_io_error("segment.msync", true);
        io_error_naming(db.put_opt(&sync, &key(100), &val(100)), "msync of");
        set_io_error("segment.msync", false);
        poisoned(db.put_opt(&sync, &key(101), &val(101)));
        poisoned(db.put(&key(102), &val(102)));
        poisoned(db.checkpoint());
        poisoned(db.flush());
        for &i in &acked {
            assert_eq!(
                db.get(&key(i)).ok().flatten(),
                Some(val(i)),
                "read {i} while poisoned"
            );
        }
    }
    reopen_finds(dir.path(), &acked, &[101, 102]);
    {
        // The sync fails after the kernel took the pages (fsyncgate): a
        // retry would find nothing dirty and report Ok for lost data.
        let db = Db::open(dir.path(), opts()).unwrap_or_else(|e| panic!("{e}"));
        set_io_error("segment.msync.after", true);
        io_error_naming(db.put_opt(&sync, &key(103), &val(103)), "msync of");
        set_io_error("segment.msync.after", false);
        poisoned(db.put_opt(&sync, &key(104), &val(104)));
        poisoned(db.flush());
    }
    reopen_finds(dir.path(), &acked, &[104]);
    {
        // Writing a record fails: the put reports it, the handle is
        // poisoned, and the reserved range is a hole recovery pads.
        let db = Db::open(dir.path(), opts()).unwrap_or_else(|e| panic!("{e}"));
        set_io_error("segment.write", true);
        io_error_naming(db.put_opt(&sync, &key(9000), &val(9000)), "writing");
        set_io_error("segment.write", false);
        assert_eq!(
            db.get(&key(9000)).ok().flatten(),
            None,
            "a failed put is visible"
        );
        poisoned(db.put_opt(&sync, &key(9001), &val(9001)));
    }
    reopen_finds(dir.path(), &acked, &[9000, 9001]);
    {
        let db = Db::open(dir.path(), opts()).unwrap_or_else(|e| panic!("{e}"));
        // The snapshot's fsync fails: the checkpoint fails, the old state stands.
        set_io_error("snapshot.sync", true);
        io_error_naming(db.checkpoint(), "CHECKPOINT-");
        set_io_error("snapshot.sync", false);
        db.checkpoint().unwrap_or_else(|e| panic!("{e}"));

        // Creating the next segment fails: the write that needs it fails,
        // and the one after the disk recovers goes through.
        set_io_error("segment.create", true);
        let mut failed = None;
        for i in 101..2000 {
            match db.put_opt(&sync, &key(i), &val(i)) {
                Ok(()) => acked.push(i),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let (i, e) = failed.unwrap_or_else(|| panic!("no write needed a new segment"));
        assert!(
            matches!(&e, Error::IoError(m) if m.contains("sizing segment")),
            "{e}"
        );
        set_io_error("segment.create", false);
        for j in i..i + 700 {
            db.put_opt(&sync, &key(j), &val(j))
                .unwrap_or_else(|e| panic!("write {j}: {e}"));
            acked.push(j);
        }

        // An unlogged batch whose values cannot be written fails whole:
        // none of it is visible or comes back, and the region goes on.
        let unlogged = WriteOptions {
            disable_wal: true,
            ..WriteOptions::default()
        };
        for j in 3000..3040 {
            db.put_opt(&unlogged, &key(j), &val(j))
                .unwrap_or_else(|e| panic!("{e}"));
            acked.push(j);
        }
        set_io_error("segment.write", true);
        let mut b = vmemkv::WriteBatch::new();
        for j in 9100..9103 {
            b.put(&key(j), &val(j));
        }
        io_error_naming(db.write(&unlogged, &b), "writing");
        set_io_error("segment.write", false);
        for j in 9100..9103 {
            assert_eq!(db.get(&key(j)).ok().flatten(), None, "failed put {j}");
        }
        for j in 3040..3080 {
            db.put_opt(&unlogged, &key(j), &val(j))
                .unwrap_or_else(|e| panic!("{e}"));
            acked.push(j);
        }
        // Sealing the region fails: the flush reports it, the handle is
        // poisoned, and the region's puts (never flushed) are not durable.
        set_io_error("segment.write", true);
        io_error_naming(db.flush(), "writing");
        set_io_error("segment.write", false);
        poisoned(db.flush());
        acked.retain(|&j| !(3000..3080).contains(&j));
    }
    reopen_finds(dir.path(), &acked, &[9100, 9101, 9102]);
}

/// Reopens `dir`: every acknowledged key is there, no failed one is.
fn reopen_finds(dir: &std::path::Path, acked: &[u32], failed: &[u32]) {
    let opts = Options::default().segment_size(1 << 20).background(false);
    let db = Db::open(dir, opts).unwrap_or_else(|e| panic!("reopen: {e}"));
    for &j in failed {
        assert_eq!(
            db.get(&key(j)).ok().flatten(),
            None,
            "the failed put {j} came back"
        );
    }
    for &i in acked {
        assert!(
            db.get(&key(i)).ok().flatten() == Some(val(i)),
            "key {i} after reopen"
        );
    }
}
