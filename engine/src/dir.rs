//! The database directory: validation (only the engine's own files), the
//! `LOCK` file, and classification of file names.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use crate::error::{Error, Result};
use crate::t2::segment;

/// Name of the lock file.
pub const LOCK_NAME: &str = "LOCK";
/// Name of the manifest.
pub const MANIFEST_NAME: &str = "MANIFEST";

/// Whether `name` is a file this engine creates.
pub fn is_own_file(name: &str) -> bool {
    let base = name.strip_suffix(".tmp").unwrap_or(name);
    matches!(base, LOCK_NAME | "LOG" | "LOG.old" | MANIFEST_NAME)
        || segment::parse_file_name(base).is_some()
        || crate::checkpoint::parse_snapshot_name(base).is_some()
}

/// What the directory holds.
#[derive(Debug, Default)]
pub struct Listing {
    /// Segment ids found, ascending.
    pub segments: Vec<u32>,
    /// Whether a MANIFEST exists.
    pub has_manifest: bool,
    /// Leftover temporary files (removed on open).
    pub temps: Vec<String>,
    /// Snapshot files found.
    pub snapshots: Vec<String>,
}

/// Checks the path, creating the directory when allowed, and lists it.
pub fn prepare(path: &Path, create_if_missing: bool, error_if_exists: bool) -> Result<Listing> {
    match std::fs::metadata(path) {
        Ok(md) if !md.is_dir() => {
            return Err(Error::InvalidArgument(format!(
                "{} exists and is not a directory",
                path.display()
            )))
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !create_if_missing {
                return Err(Error::InvalidArgument(format!(
                    "{} does not exist and create_if_missing is false",
                    path.display()
                )));
            }
            std::fs::create_dir_all(path)
                .map_err(|e| Error::io(format!("creating directory {}", path.display()), e))?;
        }
        Err(e) => return Err(Error::io(format!("stat of {}", path.display()), e)),
    }
    let rd = std::fs::read_dir(path)
        .map_err(|e| Error::io(format!("listing directory {}", path.display()), e))?;
    let mut l = Listing::default();
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(format!("listing directory {}", path.display()), e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        if !is_own_file(&name) {
            return Err(Error::InvalidArgument(format!(
                "{} holds a file that is not vmemkv's: {name}; refusing to open a foreign directory",
                path.display()
            )));
        }
        if name.ends_with(".tmp") {
            l.temps.push(name);
        } else if let Some(id) = segment::parse_file_name(&name) {
            l.segments.push(id);
        } else if name == MANIFEST_NAME {
            l.has_manifest = true;
        } else if crate::checkpoint::parse_snapshot_name(&name).is_some() {
            l.snapshots.push(name);
        }
    }
    l.segments.sort_unstable();
    let exists = l.has_manifest || !l.segments.is_empty();
    if exists && error_if_exists {
        return Err(Error::InvalidArgument(format!(
            "a database already exists at {} and error_if_exists is true",
            path.display()
        )));
    }
    if !exists && !create_if_missing {
        return Err(Error::InvalidArgument(format!(
            "{} holds no database and create_if_missing is false",
            path.display()
        )));
    }
    Ok(l)
}

/// Holds `LOCK` with `flock(LOCK_EX)` for the lifetime of the database.
/// `flock` locks belong to the open file description, so a second open in
/// the same process conflicts too.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock or fails with `Busy`.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .map_err(|e| Error::io(format!("opening lock file {}", path.display()), e))?;
        // SAFETY: plain syscall on an fd we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Busy(format!(
                    "{} is locked by another open database (this or another process)",
                    path.display()
                )));
            }
            return Err(Error::io(format!("locking {}", path.display()), err));
        }
        Ok(DirLock { _file: file })
    }
}
