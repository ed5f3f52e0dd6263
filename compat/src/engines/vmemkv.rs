//! The vmemkv adapter (placeholder until the engine lands; replaced by the engine work item).

use std::path::Path;

use crate::{Db, EngineOptions, Error, Result};

/// Opens vmemkv at `path`.
pub fn open(_path: &Path, _opts: &EngineOptions) -> Result<Box<dyn Db>> {
    Err(Error::NotSupported("vmemkv adapter not built yet".into()))
}
