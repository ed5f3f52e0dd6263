//! Damaged files and hostile directories: each case either recovers every
//! acknowledged write or fails with an error naming the file; nothing is
//! dropped silently, no link is followed, no open hangs, no disk-space
//! trick turns into a SIGBUS.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::*;
use vmemkv::{Db, Error, WriteOptions};

fn sync() -> WriteOptions {
    WriteOptions {
        sync: true,
        ..WriteOptions::default()
    }
}

/// A database of `n` keys with 700-byte values, written with sync=true and
/// closed cleanly; several 1 MiB segments from about 1,400 keys on.
fn build(dir: &Path, n: u64) {
    let db = open(dir);
    for i in 0..n {
        db.put_opt(&sync(), &key(i), &value(i, 1, 700))
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
    }
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len))
        .unwrap_or_else(|e| panic!("truncate {}: {e}", path.display()));
}

fn segments(dir: &Path) -> u32 {
    (0..).take_while(|&i| seg_path(dir, i).exists()).count() as u32
}

#[test]
fn a_segment_truncated_at_a_page_boundary_inside_its_data_is_corruption() {
    let dir = tmp();
    build(dir.path(), 3000);
    let n = segments(dir.path());
    assert!(n >= 3, "want several segments, have {n}");
    // The last segment, cut inside its data, and a sealed one, cut anywhere.
    for id in [n - 1, n - 2] {
        let copy = tmp();
        for e in std::fs::read_dir(dir.path()).unwrap_or_else(|e| panic!("{e}")) {
            let e = e.unwrap_or_else(|e| panic!("{e}"));
            std::fs::copy(e.path(), copy.path().join(e.file_name()))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let seg = seg_path(copy.path(), id);
        let offs = record_offsets(&seg);
        let cut = (offs[offs.len() / 2] as u64) & !4095;
        truncate(&seg, cut);
        assert_lost(copy.path(), &format!("{id:08x}.seg"));
    }
}

#[test]
fn zeroing_from_a_record_boundary_to_the_end_of_the_data_is_corruption() {
    let dir = tmp();
    build(dir.path(), 200);
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    let from = offs[150];
    let len = std::fs::metadata(&seg).map(|m| m.len()).unwrap_or(0) as usize - from;
    zero_range(&seg, from, len);
    assert_lost(dir.path(), "00000000.seg");
    // A record boundary in the middle: the same.
    let dir = tmp();
    build(dir.path(), 200);
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    zero_range(&seg, offs[50], offs[60] - offs[50]);
    assert_lost(dir.path(), "00000000.seg");
}

#[test]
fn a_missing_or_damaged_logend_is_corruption() {
    let dir = tmp();
    build(dir.path(), 100);
    let logend = dir.path().join("LOGEND");
    let bytes = std::fs::read(&logend).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&logend, vec![0u8; bytes.len()]).unwrap_or_else(|e| panic!("{e}"));
    assert_lost(dir.path(), "LOGEND");
    std::fs::remove_file(&logend).unwrap_or_else(|e| panic!("{e}"));
    assert_lost(dir.path(), "LOGEND");
}

#[test]
fn symlinked_files_are_refused_and_their_targets_untouched() {
    for name in ["00000000.seg", "LOG", "MANIFEST", "LOGEND"] {
        let dir = tmp();
        build(dir.path(), 50);
        {
            // A checkpoint, so that a MANIFEST exists.
            let db = open(dir.path());
            db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
        }
        let victim = tmp();
        let target = victim.path().join("precious");
        let p = dir.path().join(name);
        std::fs::rename(&p, &target).unwrap_or_else(|e| panic!("{name}: {e}"));
        std::os::unix::fs::symlink(&target, &p).unwrap_or_else(|e| panic!("{e}"));
        let before = std::fs::read(&target).unwrap_or_else(|e| panic!("{e}"));
        match Db::open(dir.path(), opts()) {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains(name) && m.contains("symbolic link"), "{m}")
            }
            other => panic!("{name}: expected InvalidArgument, got {:?}", other.err()),
        }
        let after = std::fs::read(&target).unwrap_or_else(|e| panic!("{e}"));
        assert!(before == after, "{name}: the link's target was modified");
    }
}

#[test]
fn a_fifo_in_place_of_an_engine_file_fails_fast() {
    for name in ["MANIFEST", "LOG", "LOGEND"] {
        let dir = tmp();
        build(dir.path(), 10);
        let p = dir.path().join(name);
        let _ = std::fs::remove_file(&p);
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: a valid NUL-terminated path; mkfifo has no other inputs.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(Db::open(&d, opts()).err());
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Some(Error::InvalidArgument(m))) => {
                assert!(m.contains(name) && m.contains("FIFO"), "{m}")
            }
            Ok(other) => panic!("{name}: expected InvalidArgument, got {other:?}"),
            Err(_) => panic!("{name}: open hung on a FIFO"),
        }
        // Unblock a reader, if any thread still waits.
        let _ = std::fs::remove_file(&p);
    }
}

#[test]
fn nothing_is_created_group_or_world_writable_under_umask_000() {
    let parent = tmp();
    let dir = parent.path().join("db");
    // SAFETY: umask has no memory-safety preconditions. It is process-wide:
    // other tests of this binary may create files meanwhile, with wider
    // modes only if they do not pass their own.
    let old = unsafe { libc::umask(0) };
    let built = std::panic::catch_unwind(|| build(&dir, 2000));
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    assert!(built.is_ok(), "build panicked");
    let mut paths = vec![dir.clone()];
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{e}")) {
        paths.push(e.unwrap_or_else(|e| panic!("{e}")).path());
    }
    for p in paths {
        let mode = std::fs::metadata(&p)
            .map(|m| m.permissions().mode())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mode & 0o022, 0, "{} has mode {mode:o}", p.display());
    }
}

#[test]
fn recovery_on_tmpfs_keeps_the_blocks_of_mapped_segments() {
    // tmpfs has no FALLOC_FL_ZERO_RANGE; the hole punch it used to fall
    // back on freed preallocated blocks of the mapped segment, and a store
    // through the mapping into them on a full tmpfs was a SIGBUS.
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("no /dev/shm; skipping");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap_or_else(|e| panic!("{e}"));
    {
        let db = open(dir.path());
        for i in 0..100 {
            db.put(&key(i), &value(i, 1, 700))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let seg = seg_path(dir.path(), 0);
    let blocks = std::fs::metadata(&seg).map(|m| m.blocks()).unwrap_or(0);
    // Garbage after the last record: a torn write the open must clear.
    let offs = record_offsets(&seg);
    let end = *offs.last().unwrap_or(&0) + 4096;
    let mut bytes = std::fs::read(&seg).unwrap_or_else(|e| panic!("{e}"));
    bytes[end..end + 64 * 1024].fill(0xab);
    std::fs::write(&seg, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let db = open(dir.path());
    let after = std::fs::metadata(&seg).map(|m| m.blocks()).unwrap_or(0);
    assert!(
        after >= blocks,
        "blocks freed by recovery: {blocks} before, {after} after"
    );
    let tail = std::fs::read(&seg).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        tail[end..end + 64 * 1024].iter().all(|&b| b == 0),
        "garbage survived"
    );
    check_all(&db, 100);
}

fn check_all(db: &Db, n: u64) {
    for i in 0..n {
        assert!(
            db.get(&key(i)).ok().flatten() == Some(value(i, 1, 700)),
            "key {i}"
        );
    }
}
