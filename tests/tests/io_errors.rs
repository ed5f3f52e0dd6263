//! I/O errors: ENOSPC on a small tmpfs. The database fills the filesystem
//! through the `Db` trait until writes fail; the failure must be an
//! `IoError` naming the path, earlier keys must stay readable, and once a
//! filler file beside the database is deleted the engine must continue and
//! reopen with every acknowledged write.
//!
//! Needs `mount` (root); prints why and passes when it cannot mount.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};

use vmemkv_compat::{Db, EngineKind, EngineOptions, Error, ReadOptions, WriteOptions};
use vmemkv_tests::crash::{decode_value, encode_value, key_name};

/// A tmpfs mounted for the test's lifetime; unmounted on drop, even when
/// the test fails.
struct Tmpfs {
    dir: PathBuf,
    _parent: tempfile::TempDir,
    /// Held (one test at a time) until after the unmount; see [`SERIAL`].
    _serial: MutexGuard<'static, ()>,
}

/// The tests mount and unmount tmpfs instances; they run one at a time so
/// that a mount never races another test's unmount. (They once also raced
/// on `LOCK`, when it was an `flock` that a spawned `mount` inherited until
/// it exec'd; the lock is now a POSIX record lock, which children do not
/// inherit.)
static SERIAL: Mutex<()> = Mutex::new(());

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        let parent = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let dir = parent.path().join("mnt");
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir: {e}"))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs {
            dir,
            _parent: parent,
            _serial: serial,
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds it open (a leaked handle after a
            // failure): detach it so the directory can go.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// Per key: the acknowledged sequence, and a sequence whose write failed
/// (it may or may not have landed).
#[derive(Default)]
struct Model {
    acked: BTreeMap<usize, u64>,
    failed: BTreeMap<usize, u64>,
}

impl Model {
    fn check(&self, db: &dyn Db, what: &str) {
        let ro = ReadOptions::default();
        for (&k, &s) in &self.acked {
            let v = db
                .get(&ro, &key_name(k))
                .unwrap_or_else(|e| panic!("{what}: get key {k}: {e}"));
            let got = v.as_deref().and_then(|v| decode_value(k, v));
            let ok = got == Some(s) || (got.is_some() && got == self.failed.get(&k).copied());
            assert!(ok, "{what}: key {k} holds {got:?}, acknowledged {s}");
        }
    }
}

fn opts() -> EngineOptions {
    EngineOptions::default()
        .set("segment_size", 1 << 20)
        .set("checkpoint_interval_bytes", 1u64 << 40)
}

/// Writes until the first failure; returns it and the number of writes.
fn fill(db: &dyn Db, m: &mut Model, seq: &mut u64) -> (Error, usize) {
    let wo = WriteOptions::default();
    for n in 0..100_000 {
        *seq += 1;
        let k = n % 5000;
        match db.put(&wo, &key_name(k), &encode_value(k, *seq)) {
            Ok(()) => {
                m.acked.insert(k, *seq);
                m.failed.remove(&k);
            }
            Err(e) => {
                m.failed.insert(k, *seq);
                return (e, n);
            }
        }
    }
    panic!("100,000 writes fit on a small filesystem");
}

fn assert_names_path(e: &Error, dir: &Path) {
    match e {
        Error::IoError(m) => assert!(
            m.contains(&*dir.to_string_lossy()),
            "IoError does not name the path: {m}"
        ),
        other => panic!("expected IoError, got {other}"),
    }
}

/// Fills the filesystem at `dir` to the last block with 4 KiB files.
fn pad_to_full(dir: &Path) -> Vec<PathBuf> {
    let mut pads = Vec::new();
    for i in 0.. {
        let p = dir.join(format!("pad{i}"));
        if std::fs::write(&p, vec![0u8; 4096]).is_err() {
            let _ = std::fs::remove_file(&p);
            break;
        }
        pads.push(p);
    }
    pads
}

fn enospc_cycle(background: bool) {
    let fs = match Tmpfs::mount("8m") {
        Ok(fs) => fs,
        Err(why) => {
            println!("SKIPPED: {why}");
            return;
        }
    };
    let db_dir = fs.dir.join("db");
    let filler = fs.dir.join("filler");
    std::fs::write(&filler, vec![1u8; 3 << 20]).unwrap_or_else(|e| panic!("filler: {e}"));
    let o = opts().set("background", background);
    let mut m = Model::default();
    let mut seq = 0;
    {
        let db = vmemkv_compat::open(EngineKind::Vmemkv, &db_dir, &o)
            .unwrap_or_else(|e| panic!("open: {e}"));
        let (err, n) = fill(db.as_ref(), &mut m, &mut seq);
        println!("background={background}: first failure after {n} writes: {err}");
        assert_names_path(&err, &db_dir);
        assert!(err.to_string().contains("No space left"), "{err}");
        // A second write fails the same way; nothing panics, reads go on.
        let (err2, _) = fill(db.as_ref(), &mut m, &mut seq);
        assert_names_path(&err2, &db_dir);
        m.check(db.as_ref(), "while full");
        // Leave not one block free, so that the snapshot cannot be written.
        let pads = pad_to_full(&fs.dir);
        match db.checkpoint() {
            Ok(()) => println!("checkpoint while full succeeded"),
            Err(e) => {
                println!("checkpoint while full: {e}");
                assert_names_path(&e, &db_dir);
            }
        }
        m.check(db.as_ref(), "after a failed checkpoint");
        // Free space: the same handle continues.
        std::fs::remove_file(&filler).unwrap_or_else(|e| panic!("rm filler: {e}"));
        for p in &pads {
            std::fs::remove_file(p).unwrap_or_else(|e| panic!("rm pad: {e}"));
        }
        let wo = WriteOptions::default();
        for i in 0..300 {
            seq += 1;
            let k = 6000 + i;
            db.put(&wo, &key_name(k), &encode_value(k, seq))
                .unwrap_or_else(|e| panic!("put after freeing space: {e}"));
            m.acked.insert(k, seq);
        }
        db.checkpoint()
            .unwrap_or_else(|e| panic!("checkpoint after freeing space: {e}"));
        m.check(db.as_ref(), "after freeing space");
    }
    let db = vmemkv_compat::open(EngineKind::Vmemkv, &db_dir, &o)
        .unwrap_or_else(|e| panic!("reopen: {e}"));
    m.check(db.as_ref(), "after reopen");
    println!(
        "background={background}: {} keys verified after reopen",
        m.acked.len()
    );
}

#[test]
fn enospc_on_tmpfs_foreground() {
    enospc_cycle(false);
}

#[test]
fn enospc_on_tmpfs_with_background_thread() {
    enospc_cycle(true);
}

/// Reopening a full filesystem must work too (recovery writes nothing it
/// cannot do without), and the data must all be there.
#[test]
fn reopen_while_full() {
    let fs = match Tmpfs::mount("6m") {
        Ok(fs) => fs,
        Err(why) => {
            println!("SKIPPED: {why}");
            return;
        }
    };
    let db_dir = fs.dir.join("db");
    let o = opts().set("background", false);
    let mut m = Model::default();
    let mut seq = 0;
    {
        let db = vmemkv_compat::open(EngineKind::Vmemkv, &db_dir, &o)
            .unwrap_or_else(|e| panic!("open: {e}"));
        let (err, _) = fill(db.as_ref(), &mut m, &mut seq);
        assert_names_path(&err, &db_dir);
    }
    let last = pad_to_full(&fs.dir);
    match vmemkv_compat::open(EngineKind::Vmemkv, &db_dir, &o) {
        Ok(db) => m.check(db.as_ref(), "reopen while full"),
        Err(e) => {
            println!("reopen while full: {e}");
            assert_names_path(&e, &db_dir);
            for p in &last {
                let _ = std::fs::remove_file(p);
            }
            let db = vmemkv_compat::open(EngineKind::Vmemkv, &db_dir, &o)
                .unwrap_or_else(|e| panic!("reopen after freeing: {e}"));
            m.check(db.as_ref(), "reopen after freeing");
        }
    }
}
