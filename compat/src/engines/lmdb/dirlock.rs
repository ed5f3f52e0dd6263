//! An exclusive `flock` on `<dir>/LOCK`, so that a second open of the same
//! database fails with `Busy` whether it comes from this process or another.
//!
//! LMDB's own `lock.mdb` only coordinates readers and writers; opening one
//! environment twice in a process is documented as unsafe, so the adapter
//! refuses it up front.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::{Error, Result};

/// Holds the lock until dropped (closing the file releases it).
#[derive(Debug)]
pub(super) struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock on `dir/LOCK`, creating the file if needed.
    pub(super) fn acquire(dir: &Path) -> Result<Self> {
        let path = dir.join("LOCK");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("lmdb: open lock file {}", path.display()), e))?;
        // SAFETY: flock only reads the descriptor, which `file` keeps open
        // for the duration of the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Busy(format!(
                    "lmdb: lock file {} is held by another open handle of this database",
                    path.display()
                )));
            }
            return Err(Error::io(
                format!("lmdb: lock file {}", path.display()),
                err,
            ));
        }
        Ok(DirLock { _file: file })
    }
}
