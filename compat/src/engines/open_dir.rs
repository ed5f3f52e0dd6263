//! The directory preamble of the adapters whose engines do not apply
//! `create_if_missing` / `error_if_exists` themselves (LMDB, fjall,
//! Sparkey, and the null engine, which has no files of its own): one rule, one message per refusal, one lock.

use std::path::Path;

use crate::lock::DirLock;
use crate::{EngineOptions, Error, Result};

/// Refuses `path` as `opts` asks (`exists`: whether the engine's main file
/// is there), creates the directory, and takes vmemkv's POSIX record lock
/// on it, which a forked child does not inherit. `name` starts every
/// message.
pub(crate) fn prepare(
    name: &str,
    path: &Path,
    exists: bool,
    opts: &EngineOptions,
) -> Result<DirLock> {
    if exists && opts.error_if_exists {
        return Err(Error::InvalidArgument(format!(
            "{name}: {} already holds a database (error_if_exists)",
            path.display()
        )));
    }
    if !exists && !opts.create_if_missing {
        return Err(Error::InvalidArgument(format!(
            "{name}: {} holds no database and create_if_missing is false",
            path.display()
        )));
    }
    std::fs::create_dir_all(path)
        .map_err(|e| Error::io(format!("{name}: create directory {}", path.display()), e))?;
    DirLock::acquire(path)
}
