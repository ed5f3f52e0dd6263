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

/// Opens one of the engine's files with `opts` (whose `custom_flags` this
/// replaces, adding `extra`), refusing what a hostile or confused directory
/// may hold in its place: a symlink (`O_NOFOLLOW`: it would have the
/// engine zero or append to its target), a FIFO (`O_NONBLOCK`: its open
/// would hang), a device or a directory (checked with `fstat` on the
/// descriptor, so a swap after the check cannot matter). Files are created
/// with mode 0644, which no umask widens: nothing the engine creates is
/// writable by group or others.
pub fn open_file(path: &Path, opts: &mut OpenOptions, extra: i32, what: &str) -> Result<File> {
    let f = opts
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | extra)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                Error::InvalidArgument(format!(
                    "{what} {} is a symbolic link; vmemkv's files must be regular files",
                    path.display()
                ))
            } else {
                Error::io(format!("opening {what} {}", path.display()), e)
            }
        })?;
    let md = f
        .metadata()
        .map_err(|e| Error::io(format!("stat of {what} {}", path.display()), e))?;
    if !md.file_type().is_file() {
        return Err(Error::InvalidArgument(format!(
            "{what} {} is not a regular file ({}); refusing to use it",
            path.display(),
            file_kind(&md.file_type())
        )));
    }
    Ok(f)
}

/// A file type's name for error messages.
pub fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_file() {
        "a regular file"
    } else {
        "an unknown kind of file"
    }
}

/// Reads all of one of the engine's files (see [`open_file`]).
pub fn read_file(path: &Path, what: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut f = open_file(path, OpenOptions::new().read(true), 0, what)?;
    let mut v = Vec::new();
    f.read_to_end(&mut v)
        .map_err(|e| Error::io(format!("reading {what} {}", path.display()), e))?;
    Ok(v)
}

/// Creates (truncating) a file with mode 0644 (see [`open_file`]).
pub fn create_file(path: &Path) -> Result<File> {
    open_file(
        path,
        OpenOptions::new().write(true).create(true).truncate(true),
        0,
        "file",
    )
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
