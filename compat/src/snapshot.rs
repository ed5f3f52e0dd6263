//! Point-in-time read views (RocksDB's `GetSnapshot` / `ReadOptions::snapshot`).
//!
//! [`crate::Db::snapshot`] returns a [`Snapshot`]: an opaque, cloneable
//! handle to one engine's view of the database at the moment it was taken.
//! A read naming it in [`crate::ReadOptions::snapshot`] sees exactly that
//! view, whatever was written since. The view is released when the last
//! clone of the handle is dropped. No snapshot survives a reopen.
//!
//! Each engine stores its own state behind the handle and checks on every
//! read that the handle came from the same open database
//! ([`Snapshot::downcast`]); a foreign handle is an `InvalidArgument`.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};

/// A point-in-time view of one open database.
#[derive(Clone)]
pub struct Snapshot {
    engine: &'static str,
    /// Which open database took it (engines pick any unique number, e.g.
    /// the address of their shared state).
    owner: usize,
    state: Arc<dyn Any + Send + Sync>,
}

impl Snapshot {
    /// Wraps an engine's snapshot state. `owner` identifies the open
    /// database the snapshot belongs to.
    pub fn new<T: Any + Send + Sync>(engine: &'static str, owner: usize, state: T) -> Self {
        Snapshot {
            engine,
            owner,
            state: Arc::new(state),
        }
    }

    /// The engine that took the snapshot.
    pub fn engine(&self) -> &'static str {
        self.engine
    }

    /// The engine's state, if this snapshot was taken by the database
    /// `owner` of engine `engine`; `InvalidArgument` otherwise.
    pub fn downcast<T: Any + Send + Sync>(&self, engine: &'static str, owner: usize) -> Result<&T> {
        if self.engine != engine || self.owner != owner {
            return Err(Error::InvalidArgument(format!(
                "snapshot taken by another database ({} database {:#x}) passed to {engine} database {owner:#x}",
                self.engine, self.owner
            )));
        }
        self.state.downcast_ref::<T>().ok_or_else(|| {
            Error::InvalidArgument(format!("snapshot of an unexpected type for {engine}"))
        })
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("engine", &self.engine)
            .field("owner", &format_args!("{:#x}", self.owner))
            .finish()
    }
}
