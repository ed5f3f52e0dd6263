//! The benchmark's database directory: the marker that says this tool
//! created it, the run lock, and the only way the tool ever deletes it.
//!
//! Deleting a database is the one thing a benchmark must never get wrong,
//! so three checks stand before it, each enough alone to stop it:
//! - the run lock: another db_bench holding the same directory (even
//!   between two benchmarks, while no engine has it open) is `Busy`;
//! - the marker: only a directory this tool created, or one that holds an
//!   engine's own database (`vmemkv_compat::is_engine_database`), is deleted;
//! - [`vmemkv_compat::destroy`]: the engine's `LOCK` (held by any process
//!   with the database open) is `Busy`, and a file no engine creates stops
//!   it before anything is removed.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};

/// Suffix of the marker file that says a DB directory was created by this
/// tool. The marker sits beside the directory (`.<name>.db_bench_port`)
/// because engines such as vmemkv refuse foreign files inside theirs.
pub const MARKER_SUFFIX: &str = ".db_bench_port";

fn beside(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "db".into(), |n| n.to_string_lossy().into_owned());
    let parent = path.parent().unwrap_or_else(|| Path::new("."));
    parent.join(format!(".{name}{suffix}"))
}

/// The marker file for DB directory `path`.
pub fn marker_path(path: &Path) -> PathBuf {
    beside(path, MARKER_SUFFIX)
}

/// The run-lock file for DB directory `path` (`.<name>.db_bench_port.lock`).
pub fn run_lock_path(path: &Path) -> PathBuf {
    beside(path, &format!("{MARKER_SUFFIX}.lock"))
}

/// An exclusive `flock` on [`run_lock_path`], held for a whole run, so that
/// two db_bench processes never share one database directory.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Takes the lock, creating the directory's parent and the lock file,
    /// or fails naming the lock file when another process holds it.
    pub fn acquire(db: &Path) -> Result<RunLock> {
        let path = run_lock_path(db);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| BenchError::io("open error: cannot create", parent, e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| BenchError::io("open error: cannot open", &path, e))?;
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            return Err(if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                BenchError::InUse {
                    db: db.to_path_buf(),
                    lock: path,
                }
            } else {
                BenchError::io("open error: cannot lock", path, err)
            });
        }
        Ok(RunLock { _file: file })
    }
}

/// Why [`destroy_db`] left a directory in place.
#[derive(Debug)]
pub enum DestroyError {
    /// The directory is not empty, holds no engine's database (RocksDB's
    /// `CURRENT` + `MANIFEST-*`, LMDB's `data.mdb`, vmemkv's own files) and
    /// has no marker from this tool: it is someone else's.
    NotADatabase {
        /// The directory.
        dir: PathBuf,
        /// The marker that was looked for.
        marker: PathBuf,
    },
    /// The directory could not be listed.
    Unreadable {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The engine-side destroy refused (open elsewhere: `Busy`; a file no
    /// engine creates: `InvalidArgument`) or failed; nothing was removed
    /// unless the cause says so.
    Engine {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: vmemkv_compat::Error,
    },
}

impl std::fmt::Display for DestroyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DestroyError::NotADatabase { dir, marker } => write!(
                f,
                "refusing to destroy {}: it is not empty, holds no engine's database and was not created by db_bench_port (no {} file); remove it yourself or pass --use_existing_db=1",
                dir.display(),
                marker.display()
            ),
            DestroyError::Unreadable { dir, source } => {
                write!(f, "cannot read DB directory {}: {source}", dir.display())
            }
            DestroyError::Engine { dir, source } => {
                write!(f, "cannot destroy DB directory {}: {source}", dir.display())
            }
        }
    }
}

impl std::error::Error for DestroyError {}

/// The entries of `dir`, `None` if it does not exist.
fn entries_of(dir: &Path) -> Result<Option<std::fs::ReadDir>, DestroyError> {
    match std::fs::read_dir(dir) {
        Ok(e) => Ok(Some(e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(DestroyError::Unreadable {
            dir: dir.to_path_buf(),
            source,
        }),
    }
}

/// Removes a database directory as RocksDB's `DestroyDB` would: one this
/// tool created, or one holding an engine's own database (RocksDB's
/// `CURRENT` + `MANIFEST-*`, LMDB's `data.mdb`, vmemkv's files), and then
/// only the engine's own files, under the engine's `LOCK`
/// ([`vmemkv_compat::destroy`]). Anything else is refused, untouched.
pub fn destroy_db(path: &Path) -> Result<(), DestroyError> {
    let Some(mut entries) = entries_of(path)? else {
        return Ok(());
    };
    if entries.next().is_none() {
        return Ok(());
    }
    let marker = marker_path(path);
    if !marker.exists() && !vmemkv_compat::is_engine_database(path) {
        return Err(DestroyError::NotADatabase {
            dir: path.to_path_buf(),
            marker,
        });
    }
    vmemkv_compat::destroy(path).map_err(|e| DestroyError::Engine {
        dir: path.to_path_buf(),
        source: e,
    })
}

/// Removes RocksDB's write-ahead logs (`NNNNNN.log`) from a separate
/// `--wal_dir`, and the directory once empty, as `DestroyDB` does with
/// `Options::wal_dir`: a new database refuses to open over old logs. Other
/// files stay, and so does a directory that still holds them.
pub fn destroy_wal_dir(wal: &Path) -> Result<(), DestroyError> {
    let Some(entries) = entries_of(wal)? else {
        return Ok(());
    };
    let is_log = |n: &str| {
        n.strip_suffix(".log")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        if is_file && name.to_str().is_some_and(is_log) {
            std::fs::remove_file(e.path()).map_err(|source| DestroyError::Unreadable {
                dir: wal.to_path_buf(),
                source,
            })?;
        }
    }
    // Not empty: the user's files stay where they are.
    let _ = std::fs::remove_dir(wal);
    Ok(())
}
