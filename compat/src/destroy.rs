//! Removing a database directory (RocksDB's `DestroyDB`), safely.
//!
//! [`destroy`] takes the directory's `LOCK` first, the same POSIX record
//! lock every adapter holds while its database is open, so a database that
//! any process has open is `Busy` and keeps every byte. It then removes only
//! files that some engine behind the trait creates ([`EngineKind::owns_file`]),
//! and refuses, before removing anything, a directory that holds anything
//! else: a user's file that found its way into a database directory is not
//! the benchmark's to delete.

use std::path::Path;

use crate::error::{Error, Result};
use crate::registry::EngineKind;

/// Whether `name` is a file that engine `kind` creates in its directory.
pub(crate) fn owns_file(kind: EngineKind, name: &str) -> bool {
    match kind {
        EngineKind::Vmemkv => vmemkv_file(name),
        EngineKind::RocksDb | EngineKind::BlobDb => rocksdb_file(name),
        // The adapter's LOCK beside LMDB's own two files.
        EngineKind::Lmdb => matches!(name, "data.mdb" | "lock.mdb" | "LOCK"),
        // fjall's lock and version marker, its `keyspaces` and journal
        // files, and the adapter's LOCK (and the lock it renews).
        EngineKind::Fjall | EngineKind::FjallBlob => fjall_file(name),
        // The log, the index, and the adapter's LOCK.
        EngineKind::Sparkey => matches!(name, "data.spl" | "data.spi" | "LOCK"),
        // Only the adapter's LOCK: it stores nothing.
        EngineKind::Null => name == "LOCK",
    }
}

/// vmemkv's files (`engine/src/files.rs`): `LOCK`, `LOG`, `LOG.old`,
/// `MANIFEST`, `LOGEND`, the segments `xxxxxxxx.seg`, the checkpoint
/// snapshots `CHECKPOINT-nnnnnnnn.t1`, and any of them with `.tmp`. Spelled
/// out here, as RocksDB's are, so that the trait crate knows them without
/// the engine; a test checks it against the engine's own rule.
fn vmemkv_file(name: &str) -> bool {
    let base = name.strip_suffix(".tmp").unwrap_or(name);
    let segment = base
        .strip_suffix(".seg")
        .is_some_and(|hex| hex.len() == 8 && u32::from_str_radix(hex, 16).is_ok());
    let snapshot = base
        .strip_prefix("CHECKPOINT-")
        .and_then(|s| s.strip_suffix(".t1"))
        .is_some_and(|d| digits(d) && d.parse::<u64>().is_ok());
    matches!(
        base,
        "LOCK" | "LOG" | "LOG.old" | "MANIFEST" | "LOGEND" | "APPMETA"
    ) || segment
        || snapshot
}

/// fjall's top-level files (`db.rs`, `file.rs`): `lock`, `version`, the
/// numbered journals, and the adapter's `LOCK` and `lock.new`. Its one
/// directory, `keyspaces`, is accepted by [`owns_dir`].
fn fjall_file(name: &str) -> bool {
    matches!(name, "lock" | "version" | "LOCK" | "lock.new")
        || name
            .strip_suffix(".jnl")
            .or_else(|| name.strip_suffix(".jnl.tmp"))
            .is_some_and(digits)
}

/// A directory some engine creates in its database directory: fjall's
/// `keyspaces`, removed whole only when fjall's `version` marker is beside
/// it.
fn owns_dir(path: &Path, name: &str) -> bool {
    name == "keyspaces" && path.join("version").is_file()
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// RocksDB's file names (`db/filename.cc`): numbered tables, logs, blobs and
/// temporaries, the numbered MANIFEST, OPTIONS and rotated LOG files, and
/// CURRENT, IDENTITY, LOCK and LOG.
fn rocksdb_file(name: &str) -> bool {
    if matches!(name, "CURRENT" | "IDENTITY" | "LOCK" | "LOG") {
        return true;
    }
    let base = name.strip_suffix(".dbtmp").unwrap_or(name);
    if let Some((num, ext)) = base.split_once('.') {
        if digits(num) && matches!(ext, "sst" | "ldb" | "log" | "blob") {
            return true;
        }
    }
    if digits(base) && base.len() != name.len() {
        return true; // "000012.dbtmp"
    }
    ["MANIFEST-", "OPTIONS-", "LOG.old."]
        .iter()
        .any(|p| base.strip_prefix(p).is_some_and(digits))
}

/// Whether `path` holds some engine's database by that engine's own
/// signature: RocksDB's `CURRENT` with a `MANIFEST-*`, LMDB's `data.mdb`,
/// fjall's `version` with `keyspaces`, Sparkey's `data.spl`, vmemkv's
/// `LOGEND` or a segment.
pub fn is_engine_database(path: &Path) -> bool {
    let Ok(listing) = std::fs::read_dir(path) else {
        return false;
    };
    let names: Vec<String> = listing
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let has = |f: &dyn Fn(&str) -> bool| names.iter().any(|n| f(n));
    (has(&|n| n == "CURRENT") && has(&|n| n.starts_with("MANIFEST-")))
        || has(&|n| n == "data.mdb")
        || (has(&|n| n == "version") && has(&|n| n == "keyspaces"))
        || has(&|n| n == "data.spl")
        || has(&|n| n == "LOGEND" || (n.ends_with(".seg") && vmemkv_file(n)))
}

/// Removes the database directory `path` and every engine file in it.
///
/// A missing directory is `Ok`. A directory that a process has open is
/// `Busy`; one that holds a file no engine creates, or a subdirectory (other than fjall's `keyspaces`), is
/// `InvalidArgument` naming it. In both cases nothing is removed.
pub fn destroy(path: &Path) -> Result<()> {
    let listing = match std::fs::read_dir(path) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("listing {}", path.display()), e)),
    };
    let mut names = Vec::new();
    let mut dirs = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", path.display()), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let file_type = entry
            .file_type()
            .map_err(|e| Error::io(format!("stat of {}", entry.path().display()), e))?;
        if file_type.is_dir() && owns_dir(path, &name) {
            dirs.push(name);
            continue;
        }
        if !file_type.is_file() || !EngineKind::ALL.iter().any(|k| owns_file(*k, &name)) {
            return Err(Error::InvalidArgument(format!(
                "refusing to destroy {}: {} is not a file any engine creates; nothing was removed",
                path.display(),
                entry.path().display()
            )));
        }
        names.push(name);
    }
    // Held until the directory is gone: no open can start in between.
    let lock = crate::lock::DirLock::acquire(path).map_err(|e| match e {
        Error::Busy(m) => Error::Busy(format!(
            "refusing to destroy {}: {m}; nothing was removed",
            path.display()
        )),
        other => other,
    })?;
    for name in &dirs {
        let dir = path.join(name);
        std::fs::remove_dir_all(&dir)
            .map_err(|e| Error::io(format!("removing {}", dir.display()), e))?;
    }
    for name in names.iter().filter(|n| n.as_str() != "LOCK") {
        let file = path.join(name);
        std::fs::remove_file(&file)
            .map_err(|e| Error::io(format!("removing {}", file.display()), e))?;
    }
    let lock_file = path.join("LOCK");
    std::fs::remove_file(&lock_file)
        .map_err(|e| Error::io(format!("removing {}", lock_file.display()), e))?;
    drop(lock);
    std::fs::remove_dir(path).map_err(|e| Error::io(format!("removing {}", path.display()), e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn vmemkv_names() {
        let own = [
            "LOCK",
            "LOG",
            "LOG.old",
            "MANIFEST",
            "MANIFEST.tmp",
            "LOGEND",
            "000000ab.seg",
            "CHECKPOINT-00000042.t1",
            "CHECKPOINT-00000042.t1.tmp",
        ];
        let other = [
            "notes.txt",
            "LOCK.bak",
            "0000000g.seg",
            "ab.seg",
            "CHECKPOINT-.t1",
            "CHECKPOINT-x.t1",
        ];
        for n in own {
            assert!(vmemkv_file(n), "{n}");
        }
        for n in other {
            assert!(!vmemkv_file(n), "{n}");
        }
        // The engine's own rule, when it is compiled in, agrees.
        #[cfg(feature = "vmemkv")]
        for n in own.iter().chain(&other) {
            assert_eq!(vmemkv_file(n), vmemkv::is_own_file(n), "{n}");
        }
    }

    #[test]
    fn rocksdb_names() {
        for n in [
            "CURRENT",
            "000012.sst",
            "000003.log",
            "000020.blob",
            "MANIFEST-000005",
            "OPTIONS-000007",
            "OPTIONS-000007.dbtmp",
            "000009.dbtmp",
            "LOG.old.1733140000123456",
        ] {
            assert!(rocksdb_file(n), "{n}");
        }
        for n in [
            "notes.txt",
            "12.txt",
            "MANIFEST-",
            "LOG.old.x",
            ".sst",
            "a.sst",
        ] {
            assert!(!rocksdb_file(n), "{n}");
        }
    }

    #[test]
    fn refuses_foreign_files_and_removes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        std::fs::create_dir(&db).unwrap();
        std::fs::write(db.join("CURRENT"), b"MANIFEST-000001\n").unwrap();
        std::fs::write(db.join("thesis.tex"), b"years of work").unwrap();
        let e = destroy(&db).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("thesis.tex")),
            "{e}"
        );
        assert!(db.join("thesis.tex").exists() && db.join("CURRENT").exists());
        std::fs::remove_file(db.join("thesis.tex")).unwrap();
        destroy(&db).unwrap();
        assert!(!db.exists());
        destroy(&db).unwrap();
    }

    #[test]
    fn an_open_database_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let opened = crate::open(EngineKind::Null, &db, &crate::EngineOptions::default()).unwrap();
        let e = destroy(&db).unwrap_err();
        assert!(matches!(e, Error::Busy(_)), "{e}");
        assert!(db.join("LOCK").exists());
        drop(opened);
        destroy(&db).unwrap();
        assert!(!db.exists());
    }
}
