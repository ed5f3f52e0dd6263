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
    IoError(String),
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
        Error::IoError(format!("{context}: {err}"))
    }
}
