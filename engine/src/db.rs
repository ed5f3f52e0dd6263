//! The native API: [`Db`], a facade over the subsystems (`recovery`,
//! `write`, `read`, `iter`, `multiscan`, `checkpointing`, `maintenance`).

use std::path::Path;
use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::iter::{Bounds, Iter};
use crate::maintenance::prio::niced;
use crate::maintenance::Background;
use crate::options::{Options, MAX_KEY_SIZE};
use crate::snapshot::Snapshot;
use crate::state::Inner;
use crate::stats::Statistics;
#[cfg(feature = "internals")]
use crate::t2::segment::Segment;
use crate::write::WriteOptions;

/// A vmemkv database: keys in RAM (T1), values in mmap'd segment files
/// (T2), every write one record in the value log.
///
/// `Db` is `Send + Sync`; share it with `Arc` or references.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let db = vmemkv::Db::open(dir.path(), vmemkv::Options::default()).unwrap();
/// db.put(b"k", b"v").unwrap();
/// assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
/// ```
pub struct Db {
    inner: Arc<Inner>,
    bg: Option<Background>,
}

impl Db {
    /// Opens (or creates) the database in directory `path`, recovering
    /// from its last checkpoint and log.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = crate::recovery::open(path.as_ref(), opts)?;
        let bg = if inner.opts.background {
            Some(Background::start(inner.clone())?)
        } else {
            None
        };
        Ok(Db { inner, bg })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The application's metadata blob (file `APPMETA`), `None` if none
    /// was ever stored; `Corruption` naming the file when it fails its
    /// checksum.
    pub fn app_meta(&self) -> Result<Option<Vec<u8>>> {
        crate::appmeta::read(&self.inner.dir)
    }

    /// Replaces the application's metadata blob atomically and durably
    /// (temp file, fsync, rename, directory fsync). It lives outside the
    /// keyspace and the log, so it is not ordered with writes: write what
    /// it describes first, or make its readers tolerate either order.
    pub fn set_app_meta(&self, blob: &[u8]) -> Result<()> {
        crate::appmeta::write(&self.inner.dir, blob)
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Largest accepted key (64 KiB - 1).
    pub fn max_key_size(&self) -> usize {
        MAX_KEY_SIZE
    }

    /// Largest accepted value (`Options::max_value_size`).
    pub fn max_value_size(&self) -> usize {
        self.inner.max_value
    }

    /// Reads `key` into `out` (cleared first); returns whether it exists.
    /// Stored values are copied straight from the mapping, with no
    /// allocation when `out` has capacity. The value's checksum is
    /// verified; a mismatch is `Corruption` naming the segment file.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.inner.get_into(key, out, true, None)
    }

    /// [`Db::get_into`] with checksum verification chosen by the caller
    /// (`verify = false` trades detection of media corruption for speed).
    pub fn get_into_opt(&self, key: &[u8], out: &mut Vec<u8>, verify: bool) -> Result<bool> {
        self.inner.get_into(key, out, verify, None)
    }

    /// A point-in-time view: reads naming it ([`Db::get_into_at`],
    /// [`Db::iter_at`], [`Db::multi_scan_at`]) see every write acknowledged
    /// before it was taken and none after; a batch is in it whole or not at
    /// all. Release it (drop) before closing the database.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::take(&self.inner.t1)
    }

    /// [`Db::get_into_opt`] as of `snap`; `InvalidArgument` for a snapshot
    /// of another database.
    pub fn get_into_at(
        &self,
        snap: &Snapshot,
        key: &[u8],
        out: &mut Vec<u8>,
        verify: bool,
    ) -> Result<bool> {
        let at = snap.at_for(&self.inner.t1)?;
        self.inner.get_into(key, out, verify, Some(at))
    }

    /// Reads `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut v = Vec::new();
        Ok(self.get_into(key, &mut v)?.then_some(v))
    }

    /// Sets `key` to `value` (`sync = false`).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    /// Sets `key` to `value`.
    pub fn put_opt(&self, wo: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.inner.put(wo, key, value)
    }

    /// Removes `key` (`sync = false`); removing a missing key succeeds.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    /// Removes `key`.
    pub fn delete_opt(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        self.inner.delete(wo, key)
    }

    /// Removes every key in `[begin, end)`.
    pub fn delete_range(&self, wo: &WriteOptions, begin: &[u8], end: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(begin, end);
        self.write(wo, &b)
    }

    /// Applies `batch` atomically: it is one log record with one checksum,
    /// and readers see all of it or none (`docs/design.md` §8).
    pub fn write(&self, wo: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        self.inner.write(wo, batch)
    }

    /// A cursor over live entries within `bounds`; each stored value's
    /// checksum is verified when the cursor lands on it.
    pub fn iter(&self, bounds: Bounds) -> Iter<'_> {
        Iter::new(&self.inner, bounds, true, None)
    }

    /// [`Db::iter`] with checksum verification chosen by the caller.
    pub fn iter_opt(&self, bounds: Bounds, verify: bool) -> Iter<'_> {
        Iter::new(&self.inner, bounds, verify, None)
    }

    /// [`Db::iter_opt`] as of `snap`.
    pub fn iter_at(&self, snap: &Snapshot, bounds: Bounds, verify: bool) -> Result<Iter<'_>> {
        let at = snap.at_for(&self.inner.t1)?;
        Ok(Iter::new(&self.inner, bounds, verify, Some(at)))
    }

    /// Persists a T1 snapshot and a MANIFEST so that recovery replays only
    /// the log written after it.
    ///
    /// Like every maintenance call, the work runs on a helper thread at
    /// `Options::maintenance_nice`, so that it yields CPU to writers.
    pub fn checkpoint(&self) -> Result<()> {
        let inner = &*self.inner;
        niced(inner.opts.maintenance_nice, || {
            inner.checkpoint().map(|_| ())
        })
    }

    /// One bounded defragment cycle: relocates live values out of mostly
    /// garbage segments, checkpoints, and removes the emptied segments.
    pub fn defragment(&self) -> Result<crate::maintenance::DefragReport> {
        let inner = &*self.inner;
        niced(inner.opts.maintenance_nice, || {
            crate::maintenance::defragment(inner)
        })
    }

    /// Rewrites the values of `[begin, end)` (`None` = open side) in key
    /// order, as RocksDB's `CompactRange` leaves SST files sorted: scans
    /// over data written in random order then read contiguous extents.
    /// Values already in key order stay in place. Needs free space for the
    /// values it moves until its closing checkpoint retires the old
    /// segments.
    pub fn compact_range(
        &self,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<crate::maintenance::DefragReport> {
        let inner = &*self.inner;
        niced(inner.opts.maintenance_nice, || {
            crate::maintenance::compact_range(inner, begin, end)
        })
    }

    /// Runs the background key-order pass to completion now, on this
    /// thread, whether or not writes have gone quiet: RocksDB's
    /// `WaitForCompact` for T2's layout (db_bench `waitforcompaction`).
    /// Unlike [`Db::compact_range`] it leaves windows that are mostly in
    /// key order alone.
    pub fn wait_for_compaction(&self) -> Result<crate::maintenance::DefragReport> {
        let inner = &*self.inner;
        niced(inner.opts.maintenance_nice, || {
            crate::maintenance::order_all(inner)
        })
    }

    /// T1's forced merge of every shard (drops tombstones).
    pub fn reorganize(&self) -> Result<()> {
        let inner = &*self.inner;
        niced(inner.opts.maintenance_nice, || {
            crate::maintenance::reorganize(inner)
        });
        Ok(())
    }

    /// Makes every write so far durable (`msync` of the log), including
    /// `disable_wal` puts: their open region is sealed first.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Current statistics.
    pub fn statistics(&self) -> Statistics {
        crate::statistics::statistics(&self.inner)
    }

    /// Drops every segment of the database from the page cache, so the
    /// next reads go to the disk (cold-cache tests and benchmarks): dirty
    /// pages are written back first, so nothing is lost. Pages other
    /// processes have mapped stay resident.
    pub fn evict_page_cache(&self) -> Result<()> {
        self.inner
            .log
            .segments()
            .iter()
            .try_for_each(|s| crate::t2::residency::evict(s))
    }

    /// Bytes of the segment files now in the page cache.
    pub fn resident_bytes(&self) -> u64 {
        let segs = self.inner.log.segments();
        segs.iter()
            .map(|s| crate::t2::residency::resident_bytes(s) as u64)
            .sum()
    }

    /// Every segment (white-box tests, feature `internals`).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.inner.log.segments()
    }

    /// Many ranges in one call (RocksDB's MultiScan). With
    /// `use_async_io`, every range is resolved against T1 and all of its
    /// value reads are submitted through io_uring before the first key is
    /// returned (`docs/design.md` §3).
    pub fn multi_scan(
        &self,
        opts: &crate::multiscan::MultiScanOptions,
    ) -> Result<crate::multiscan::MultiScanIter<'_>> {
        let mode = match self.inner.opts.use_direct_reads {
            None => crate::multiscan::BufferMode::Auto,
            Some(true) => crate::multiscan::BufferMode::Direct,
            Some(false) => crate::multiscan::BufferMode::PageCache,
        };
        crate::multiscan::multi_scan_with(&self.inner.t1, &self.inner.log, opts, mode, None)
    }

    /// [`Db::multi_scan`] as of `snap`.
    pub fn multi_scan_at(
        &self,
        snap: &Snapshot,
        opts: &crate::multiscan::MultiScanOptions,
    ) -> Result<crate::multiscan::MultiScanIter<'_>> {
        let at = snap.at_for(&self.inner.t1)?;
        let mode = match self.inner.opts.use_direct_reads {
            None => crate::multiscan::BufferMode::Auto,
            Some(true) => crate::multiscan::BufferMode::Direct,
            Some(false) => crate::multiscan::BufferMode::PageCache,
        };
        crate::multiscan::multi_scan_with(&self.inner.t1, &self.inner.log, opts, mode, Some(at))
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Err(e) = self.inner.unlogged.seal(&self.inner) {
            self.inner
                .info
                .log(format_args!("close: sealing the unlogged puts failed: {e}"));
        }
        if let Some(bg) = self.bg.take() {
            bg.stop();
        }
        if self.inner.close_checkpoint_due() {
            if let Err(e) = self.inner.checkpoint() {
                self.inner
                    .info
                    .log(format_args!("close: checkpoint failed: {e}"));
            }
        }
        let t = self.inner.log.tail_lsn();
        if let Err(e) = self.inner.log.sync_to(t) {
            self.inner
                .info
                .log(format_args!("close: final msync failed: {e}"));
        }
        self.inner
            .info
            .log(format_args!("close {}", self.inner.dir.display()));
    }
}
