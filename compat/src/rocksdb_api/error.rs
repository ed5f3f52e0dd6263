//! The facade's error: the `rocksdb` crate's `Error` and `ErrorKind` shape
//! over [`crate::Error`].

use std::fmt;

/// The category of an [`Error`], with the `rocksdb` crate's variant names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// RocksDB's `NotFound` (no engine behind the facade reports it: a
    /// missing key is `Ok(None)`).
    NotFound,
    /// On-disk data failed a check.
    Corruption,
    /// The engine does not implement the operation.
    NotSupported,
    /// The caller passed something the engine refuses.
    InvalidArgument,
    /// The operating system reported an error.
    IOError,
    /// RocksDB's `MergeInProgress` (merge operators are not offered).
    MergeInProgress,
    /// The operation stopped before finishing.
    Incomplete,
    /// The engine is shutting down or was closed.
    ShutdownInProgress,
    /// RocksDB's `TimedOut` (not reported by the facade).
    TimedOut,
    /// RocksDB's `Aborted` (not reported by the facade).
    Aborted,
    /// Another handle holds a resource, e.g. the directory's lock.
    Busy,
    /// RocksDB's `Expired` (not reported by the facade).
    Expired,
    /// RocksDB's `TryAgain` (not reported by the facade).
    TryAgain,
    /// RocksDB's `CompactionTooLarge` (not reported by the facade).
    CompactionTooLarge,
    /// RocksDB's `ColumnFamilyDropped` (a dropped family's handle is
    /// `InvalidArgument` here, as the trait reports it).
    ColumnFamilyDropped,
    /// Anything else: a prefetch limit, a poisoned database.
    Unknown,
}

/// An error from the facade: a message in RocksDB's `Status` form
/// (`"Invalid argument: ..."`) and the [`crate::Error`] behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    inner: crate::Error,
    message: String,
}

impl Error {
    /// The category, as the `rocksdb` crate's `Error::kind` gives it.
    pub fn kind(&self) -> ErrorKind {
        match &self.inner {
            crate::Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            crate::Error::NotSupported(_) => ErrorKind::NotSupported,
            crate::Error::Corruption(_) => ErrorKind::Corruption,
            crate::Error::IoError(_) => ErrorKind::IOError,
            crate::Error::Busy(_) => ErrorKind::Busy,
            crate::Error::Incomplete(_) => ErrorKind::Incomplete,
            crate::Error::ShutdownInProgress(_) => ErrorKind::ShutdownInProgress,
            crate::Error::PrefetchLimitReached(_) | crate::Error::Poisoned(_) => ErrorKind::Unknown,
        }
    }

    /// The message, as the `rocksdb` crate's `Error::into_string` gives it.
    pub fn into_string(self) -> String {
        self.message
    }

    /// The engine-neutral error behind this one (facade only).
    pub fn as_compat(&self) -> &crate::Error {
        &self.inner
    }

    pub(crate) fn invalid(message: String) -> Self {
        crate::Error::InvalidArgument(message).into()
    }
}

impl From<crate::Error> for Error {
    fn from(inner: crate::Error) -> Self {
        Error {
            message: inner.to_string(),
            inner,
        }
    }
}

impl From<Error> for String {
    fn from(e: Error) -> String {
        e.into_string()
    }
}

impl AsRef<str> for Error {
    fn as_ref(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
