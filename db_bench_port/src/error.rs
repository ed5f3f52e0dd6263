//! The port's error type. A variant keeps what a caller can act on (the
//! flag, the engine's error category, the path) while its text is what
//! db_bench prints: scripts parse that text, so each message is spelled as
//! the port has always printed it.

use std::path::PathBuf;

use crate::dbdir::DestroyError;
use crate::flags::FlagError;

/// Shorthand for results carrying [`BenchError`].
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Why a run, a benchmark or a setting failed. Every variant ends the run
/// with exit status 1.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The command line does not parse (gflags' messages, one per line).
    #[error("{}", .0.message)]
    CommandLine(FlagError),
    /// A flag's value is refused: malformed, out of range, inconsistent
    /// with another flag, or beyond the engine's limits.
    #[error("{message}")]
    Flag {
        /// The flag, without dashes (`threads`, `value_size_max`).
        flag: String,
        /// The whole message, naming the flag and its value.
        message: String,
    },
    /// The engine failed; `context` says what the port was doing
    /// (`put error`, `open error`, `Flush failed`).
    #[error("{context}: {source}")]
    Engine {
        /// What the port was doing.
        context: String,
        /// The engine's error, with its category.
        #[source]
        source: vmemkv_compat::Error,
    },
    /// The operating system refused `action` on `path`.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was attempted (`open error: cannot create`).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Another db_bench holds the run lock of the database directory.
    #[error(
        "open error: Resource busy: {} is in use by another db_bench ({} is locked)",
        db.display(),
        lock.display()
    )]
    InUse {
        /// The database directory.
        db: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The database directory a fresh run replaces was left in place.
    #[error(transparent)]
    Destroy(#[from] DestroyError),
    /// Something the port itself guarantees did not hold: a benchmark
    /// thread panicked or left no statistics, no database was open.
    #[error("{0}")]
    Invariant(String),
    /// Benchmark `name` failed; `source` says how.
    #[error("Fatal error during \"{name}\": {source}")]
    Benchmark {
        /// The benchmark, as `--benchmarks` names it.
        name: String,
        /// The failure.
        #[source]
        source: Box<BenchError>,
    },
}

impl BenchError {
    /// A refused value of `flag` (named without dashes).
    pub fn flag(flag: impl Into<String>, message: impl Into<String>) -> Self {
        BenchError::Flag {
            flag: flag.into(),
            message: message.into(),
        }
    }

    /// The engine's `source` while the port was doing `context`.
    pub fn engine(context: impl Into<String>, source: vmemkv_compat::Error) -> Self {
        BenchError::Engine {
            context: context.into(),
            source,
        }
    }

    /// The operating system's `source` for `action` on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// The engine's error behind this one, if an engine failed (directly,
    /// refusing to destroy a database, or inside a benchmark).
    pub fn engine_error(&self) -> Option<&vmemkv_compat::Error> {
        match self {
            BenchError::Engine { source, .. } => Some(source),
            BenchError::Destroy(DestroyError::Engine { source, .. }) => Some(source),
            BenchError::Benchmark { source, .. } => source.engine_error(),
            _ => None,
        }
    }

    /// The failure inside a [`BenchError::Benchmark`], or `self`.
    pub fn innermost(&self) -> &BenchError {
        match self {
            BenchError::Benchmark { source, .. } => source.innermost(),
            other => other,
        }
    }
}

impl From<FlagError> for BenchError {
    fn from(e: FlagError) -> Self {
        BenchError::CommandLine(e)
    }
}
