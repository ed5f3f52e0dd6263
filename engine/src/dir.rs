//! The database directory: validation (only the engine's own files), the
//! `LOCK` file, and classification of file names.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::files::{self, is_own_file};

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
    /// Whether a `LOGEND` exists.
    pub has_log_end: bool,
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
            // 0755 whatever the umask: a directory others may write to lets
            // them plant a link where the engine's next file goes.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(path)
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
        let kind = ent
            .file_type()
            .map_err(|e| Error::io(format!("stat of {}", ent.path().display()), e))?;
        if is_own_file(&name) && !kind.is_file() {
            return Err(Error::InvalidArgument(format!(
                "{} is {}; vmemkv's files must be regular files",
                ent.path().display(),
                crate::fsutil::file_kind(&kind)
            )));
        }
        if !is_own_file(&name) {
            return Err(Error::InvalidArgument(format!(
                "{} holds a file that is not vmemkv's: {name}; refusing to open a foreign directory",
                path.display()
            )));
        }
        if name.ends_with(files::TMP_SUFFIX) {
            l.temps.push(name);
        } else if let Some(id) = files::parse_segment(&name) {
            l.segments.push(id);
        } else if name == files::MANIFEST {
            l.has_manifest = true;
        } else if name == files::LOGEND {
            l.has_log_end = true;
        } else if files::parse_snapshot(&name).is_some() {
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

/// Directories (device, inode) whose `LOCK` this process holds. POSIX
/// record locks belong to the process, so a second open in this process
/// would be granted the lock it already holds, and closing that second
/// descriptor would release the first one's lock: the registry refuses the
/// second open before it opens the file.
static LOCKED: Mutex<BTreeSet<(u64, u64)>> = Mutex::new(BTreeSet::new());

/// Holds `LOCK` with a POSIX write lock (`fcntl(F_SETLK)`) for the lifetime
/// of the database. Unlike an `flock`, which belongs to the open file
/// description, it is not inherited by a child process: with `flock`, a
/// child forked by any thread while the database was open held the lock
/// until it exec'd, and a close and reopen in that window got `Busy`
/// (seen in CI, with a test spawning `mount`). RocksDB locks the same way.
#[derive(Debug)]
pub struct DirLock {
    file: Option<File>,
    key: (u64, u64),
}

impl DirLock {
    /// Takes the lock or fails with `Busy`.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(files::LOCK);
        let md = std::fs::metadata(dir)
            .map_err(|e| Error::io(format!("stat of {}", dir.display()), e))?;
        let key = (md.dev(), md.ino());
        let mut locked = LOCKED.lock();
        if locked.contains(&key) {
            return Err(Error::Busy(format!(
                "{} is locked by a database already open in this process",
                path.display()
            )));
        }
        let file = crate::fsutil::open_file(
            &path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
            0,
            "lock file",
        )?;
        // SAFETY: `flock` is a plain C struct for which all-zero bytes are
        // a valid value; the fields that matter are set below.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        // l_start = l_len = 0: the whole file.
        // SAFETY: fcntl on an fd this function owns, with a pointer to a
        // live, initialised `flock`.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &fl) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) {
                return Err(Error::Busy(format!(
                    "{} is locked by a database open in another process",
                    path.display()
                )));
            }
            return Err(Error::io(format!("locking {}", path.display()), err));
        }
        locked.insert(key);
        Ok(DirLock {
            file: Some(file),
            key,
        })
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let mut locked = LOCKED.lock();
        // Close (releasing the lock) before the directory leaves the
        // registry: an open in this process in between could otherwise
        // take the lock and then lose it to this close.
        drop(self.file.take());
        locked.remove(&self.key);
    }
}
