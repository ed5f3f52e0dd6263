//! What the facade, the write and read paths and the background workers
//! share: [`Inner`], one per open database, and the small state types it
//! holds. Below it are only T1, T2 and leaf helpers; every subsystem
//! (`write`, `read`, `recovery`, `checkpointing`, `iter`, `multiscan`,
//! `maintenance`, `unlogged`) imports it, and it imports none of them.

pub(crate) mod gate;
pub(crate) mod moved;
pub(crate) mod rewrite;
pub(crate) mod throttle;
pub(crate) mod unlogged;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::dir::DirLock;
use crate::error::{Error, Result};
use crate::index::T1;
use crate::infolog::InfoLog;
use crate::options::{Options, MAX_KEY_SIZE};
use crate::stats::Counters;
use crate::t2::log::Log;

pub(crate) struct CkptState {
    pub id: u64,
    pub lsn: u64,
}

/// The automatic checkpoint waits for at least this multiple of the
/// current snapshot's size of new log. A checkpoint rewrites all of T1,
/// so at a fixed interval a large index is rewritten back to back (at 50M
/// keys, ~4.5 GB per 256 MiB of log). With the ratio, snapshots write at
/// most half as many bytes as the log, and a replay reads about twice
/// what loading the snapshot reads.
pub(crate) const LOG_PER_SNAPSHOT: u64 = 2;

/// Shared state behind `Db`; the background workers hold it too.
pub(crate) struct Inner {
    pub dir: PathBuf,
    pub opts: Options,
    pub t1: T1,
    pub log: Log,
    /// Writers hold it shared from reservation until T1 is updated, so a
    /// checkpoint holding it exclusively sees every record below the tail
    /// published. Range deletes hold it exclusively.
    pub gate: gate::Gate,
    pub info: Arc<InfoLog>,
    pub counters: Counters,
    pub ckpt: Mutex<CkptState>,
    /// Log bytes written since the last checkpoint, at open (replayed).
    pub since_ckpt_base: AtomicU64,
    /// Size of the current snapshot file (0 before the first).
    pub snapshot_bytes: AtomicU64,
    /// `log.appended` when the last checkpoint fixed its LSN.
    pub appended_at_ckpt: AtomicU64,
    /// Held by every T2 rewrite, which it times (`state::rewrite`).
    pub defrag: rewrite::RewriteLock,
    /// Delays writers while defragment is behind (`state::throttle`).
    pub throttle: throttle::Throttle,
    pub stripes: crate::stripes::Stripes,
    /// Where movers put values since the current sorted-run tail began.
    pub packed: moved::Packed,
    /// The open region of `disable_wal` puts (`unlogged.rs`).
    pub unlogged: unlogged::Unlogged,
    pub max_value: usize,
    /// Failures of background work (`bgerror.rs`).
    pub bg_errors: crate::bgerror::BackgroundErrors,
    /// Bytes of emptied segments kept because snapshots were held at the
    /// last retirement.
    pub snapshot_pinned_bytes: AtomicU64,
    /// Held while the database is open (`dir::DirLock`).
    pub _lock: DirLock,
}

impl Inner {
    pub(crate) fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY_SIZE {
            return Err(key_too_large(key.len()));
        }
        Ok(())
    }

    pub(crate) fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.max_value {
            return Err(value_too_large(value.len(), self.max_value));
        }
        Ok(())
    }

    pub(crate) fn adjust(&self, id: u32, d: i64) {
        self.log
            .with_segment(id, |s| s.live.fetch_add(d, Ordering::Relaxed));
    }

    /// Logs and records a failure of background work `what`.
    pub(crate) fn background_failed(&self, what: &str, e: &Error, for_writers: bool) {
        self.info.log(format_args!("{what} failed: {e}"));
        self.bg_errors.record(what, e, for_writers);
    }
}

pub(crate) fn key_too_large(n: usize) -> Error {
    Error::InvalidArgument(format!(
        "key of {n} bytes exceeds the maximum key size of {MAX_KEY_SIZE} bytes"
    ))
}

pub(crate) fn value_too_large(n: usize, max: usize) -> Error {
    Error::InvalidArgument(format!(
        "value of {n} bytes exceeds the maximum value size of {max} bytes"
    ))
}
