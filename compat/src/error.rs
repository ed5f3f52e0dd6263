//! The one error type every engine maps its failures onto.

use std::fmt;

/// An I/O failure: the operating system's [`std::io::ErrorKind`] (so a
/// caller can tell a full disk, `StorageFull`, from a read-only one,
/// `ReadOnlyFilesystem`, or a permission problem) and a message naming the
/// path or action. It reads as its message (`Deref<Target = str>`).
///
/// The trait crate's own type, the same shape as vmemkv's, so that it
/// builds with no engine (`--no-default-features`); each adapter carries
/// its engine's kind and message across.
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
    /// error).
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

/// Shorthand for results carrying [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, in RocksDB's `Status` categories.
///
/// Every message names the thing at fault (the key size, the file and
/// offset, the option) so that a user can act on it without a debugger.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The caller passed something the engine refuses: an oversized key,
    /// an unknown option, ranges out of order.
    #[error("Invalid argument: {0}")]
    InvalidArgument(String),
    /// The engine does not implement this operation.
    #[error("Not supported: {0}")]
    NotSupported(String),
    /// On-disk data failed a check; the message names file and offset.
    #[error("Corruption: {0}")]
    Corruption(String),
    /// The operating system reported an error; the message names the path.
    #[error("IO error: {0}")]
    IoError(IoFailure),
    /// Another handle holds a resource, e.g. the directory's lock.
    #[error("Resource busy: {0}")]
    Busy(String),
    /// The operation stopped before finishing and may be retried.
    #[error("Operation incomplete: {0}")]
    Incomplete(String),
    /// A MultiScan hit `max_prefetch_size` (RocksDB's `PrefetchLimitReached`).
    #[error("Prefetch limit reached: {0}")]
    PrefetchLimitReached(String),
    /// The engine is shutting down or was closed.
    #[error("Shutdown in progress: {0}")]
    ShutdownInProgress(String),
    /// An earlier sync failed; writes fail until the database is reopened
    /// (RocksDB's background error that stops writes).
    #[error("Poisoned: {0}")]
    Poisoned(String),
}

impl Error {
    /// Wraps an `std::io::Error` with the path or action it concerns.
    pub fn io(context: impl fmt::Display, err: std::io::Error) -> Self {
        Error::IoError(IoFailure::new(err.kind(), format!("{context}: {err}")))
    }

    /// A short name for the category, e.g. `"InvalidArgument"`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Error::InvalidArgument(_) => "InvalidArgument",
            Error::NotSupported(_) => "NotSupported",
            Error::Corruption(_) => "Corruption",
            Error::IoError(_) => "IoError",
            Error::Busy(_) => "Busy",
            Error::Incomplete(_) => "Incomplete",
            Error::PrefetchLimitReached(_) => "PrefetchLimitReached",
            Error::ShutdownInProgress(_) => "ShutdownInProgress",
            Error::Poisoned(_) => "Poisoned",
        }
    }
}
