//! Small filesystem helpers: directory fsync, atomic file replacement.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

/// fsyncs a directory so that creates, renames and unlinks in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(format!("fsync of directory {}", dir.display()), e))
}

/// Creates (truncating) a file with mode 0644.
pub fn create_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))
}

/// Writes `bytes` to `dir/name` atomically: temp file, fsync, rename,
/// directory fsync.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    let mut f = create_file(&tmp)?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
    drop(f);
    std::fs::rename(&tmp, &dst).map_err(|e| {
        Error::io(
            format!("renaming {} to {}", tmp.display(), dst.display()),
            e,
        )
    })?;
    sync_dir(dir)
}

/// fdatasyncs a file (zeroed ranges, truncations) so it is durable.
pub fn sync_file(f: &File, path: &Path) -> Result<()> {
    f.sync_data()
        .map_err(|e| Error::io(format!("fdatasync of {}", path.display()), e))
}
