//! The directory lock every adapter holds while its database is open, and
//! that [`crate::destroy`] takes before removing anything.
//!
//! With vmemkv compiled in this is vmemkv's own `DirLock`: POSIX record
//! locks belong to the process, so a second lock of the same directory in
//! this process would be granted and its close would release the first.
//! vmemkv refuses that second lock through a registry of the directories
//! this process holds, and there must be one registry per process, not
//! one per crate. Without vmemkv (`--no-default-features`) the trait crate
//! keeps the same rule with its own registry, since no other holder of the
//! lock is compiled in.

use std::path::Path;

use crate::error::Result;

/// Holds a database directory's `LOCK` with a POSIX write lock
/// (`fcntl(F_SETLK)`), which a forked child does not inherit, until dropped.
#[derive(Debug)]
pub(crate) struct DirLock {
    _held: imp::Held,
}

impl DirLock {
    /// Takes the lock of `dir`, or fails with `Busy` when another handle
    /// (this process or another) holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock> {
        Ok(DirLock {
            _held: imp::acquire(dir)?,
        })
    }
}

#[cfg(feature = "vmemkv")]
mod imp {
    use super::*;

    pub(super) type Held = vmemkv::DirLock;

    pub(super) fn acquire(dir: &Path) -> Result<Held> {
        vmemkv::DirLock::acquire(dir).map_err(crate::engines::vmemkv::map_err)
    }
}

#[cfg(not(feature = "vmemkv"))]
mod imp {
    use std::collections::BTreeSet;
    use std::fs::{File, OpenOptions};
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    use std::sync::{Mutex, PoisonError};

    use super::*;
    use crate::error::Error;

    /// Directories (device, inode) whose `LOCK` this process holds.
    static LOCKED: Mutex<BTreeSet<(u64, u64)>> = Mutex::new(BTreeSet::new());

    #[derive(Debug)]
    pub(super) struct Held {
        file: Option<File>,
        key: (u64, u64),
    }

    pub(super) fn acquire(dir: &Path) -> Result<Held> {
        let path = dir.join("LOCK");
        let md = std::fs::metadata(dir)
            .map_err(|e| Error::io(format!("stat of {}", dir.display()), e))?;
        let key = (md.dev(), md.ino());
        let mut locked = LOCKED.lock().unwrap_or_else(PoisonError::into_inner);
        if locked.contains(&key) {
            return Err(Error::Busy(format!(
                "{} is locked by a database already open in this process",
                path.display()
            )));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(format!("opening lock file {}", path.display()), e))?;
        // SAFETY: `flock` is a plain C struct for which all-zero bytes are
        // a valid value; the fields that matter are set below.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
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
        Ok(Held {
            file: Some(file),
            key,
        })
    }

    impl Drop for Held {
        fn drop(&mut self) {
            let mut locked = LOCKED.lock().unwrap_or_else(PoisonError::into_inner);
            // Close (releasing the lock) before the directory leaves the
            // registry, as vmemkv does.
            drop(self.file.take());
            locked.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn a_second_lock_in_this_process_is_busy_until_the_first_drops() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = DirLock::acquire(dir.path()).expect("first lock");
        assert!(matches!(DirLock::acquire(dir.path()), Err(Error::Busy(_))));
        drop(first);
        assert!(DirLock::acquire(dir.path()).is_ok());
    }
}
