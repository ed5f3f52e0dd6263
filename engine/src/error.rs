//! The engine's error type.

use std::fmt;

/// Shorthand for results carrying [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong. Every message names the file, offset, option or size at
/// fault so that an operator can act on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The caller passed something the engine refuses (an oversized key, a
    /// bad option, a directory holding foreign files).
    #[error("Invalid argument: {0}")]
    InvalidArgument(String),
    /// On-disk data failed a check; the message names file and offset.
    #[error("Corruption: {0}")]
    Corruption(String),
    /// The operating system reported an error; the message names the path.
    #[error("IO error: {0}")]
    IoError(IoFailure),
    /// Another handle (this process or another) holds the directory's lock.
    #[error("Resource busy: {0}")]
    Busy(String),
    /// The database was closed or is shutting down.
    #[error("Shutdown in progress: {0}")]
    ShutdownInProgress(String),
    /// A write or sync failed after the kernel may have dropped the data
    /// (a failed `msync`/`fdatasync` clears the dirty state of the pages it
    /// could not write): nothing written since can be promised durable, so
    /// every later write and sync fails until the database is reopened and
    /// recovery establishes what survived. Reads still work.
    #[error("Poisoned: {0}")]
    Poisoned(String),
}

impl Error {
    /// Wraps an `std::io::Error` with the path or action it concerns.
    pub fn io(context: impl fmt::Display, err: std::io::Error) -> Self {
        Error::IoError(IoFailure::new(err.kind(), format!("{context}: {err}")))
    }

    /// Corruption inside the record at `record_off` of file `path`. `what`
    /// is a body decoder's error, which cannot know the file or the record.
    pub(crate) fn in_record(
        path: &std::path::Path,
        record_off: usize,
        what: impl fmt::Display,
    ) -> Self {
        Error::Corruption(format!("{} offset {record_off}: {what}", path.display()))
    }
}

/// An I/O failure: the operating system's [`std::io::ErrorKind`] (so a
/// caller can tell a full disk, `StorageFull`, from a read-only one,
/// `ReadOnlyFilesystem`, or a permission problem) and a message naming the
/// path or action. It reads as its message (`Deref<Target = str>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoFailure {
    kind: std::io::ErrorKind,
    message: String,
}

impl IoFailure {
    /// A failure of `kind` with `message`.
    pub fn new(kind: std::io::ErrorKind, message: impl Into<String>) -> Self {
        IoFailure {
            kind,
            message: message.into(),
        }
    }

    /// What the operating system reported (`Other` when it was not an OS
    /// error, e.g. a panicked background thread).
    pub fn kind(&self) -> std::io::ErrorKind {
        self.kind
    }

    /// The message, naming the path or action.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<String> for IoFailure {
    fn from(message: String) -> Self {
        IoFailure::new(std::io::ErrorKind::Other, message)
    }
}

impl std::ops::Deref for IoFailure {
    type Target = str;
    fn deref(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for IoFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl PartialEq<&str> for IoFailure {
    fn eq(&self, other: &&str) -> bool {
        self.message == *other
    }
}
