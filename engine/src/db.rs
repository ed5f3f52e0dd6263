//! The native API: [`Db`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::apply;
use crate::batch::{WriteBatch, OP_DELETE, OP_PUT};
use crate::checkpoint::{self, Manifest};
use crate::dir::{self, DirLock};
use crate::error::{Error, Result};
use crate::index::{Payload, T1Config, T1};
use crate::infolog::InfoLog;
use crate::iter::{Bounds, Iter};
use crate::maintenance::prio::niced;
use crate::maintenance::Background;
use crate::options::{Options, MAX_KEY_SIZE};
use crate::snapshot::Snapshot;
use crate::stats::{Counters, Statistics};
use crate::t2::durable::{DurableEnd, End};
use crate::t2::log::Log;
use crate::t2::packed;
use crate::t2::record::{lsn, split_lsn, Kind};
use crate::t2::scan;
use crate::t2::segment::{self, MapOpts, Segment};

/// Per-write options (RocksDB's `WriteOptions`).
///
/// * `sync = false`: the write is in the shared mapping when the call
///   returns, so it survives a process crash (SIGKILL), not a power loss.
/// * `sync = true`: the covering log range is `msync`ed before the call
///   returns (group commit).
/// * `disable_wal = true` (with `sync = false`): as in RocksDB, the write
///   may be lost in a crash until it is flushed. Puts so written are packed
///   into one record per 4 MiB of values, whose keys are written when the
///   record is sealed: when full, by [`Db::flush`], a checkpoint, close, or
///   any logged write (`docs/design.md` §2). Deletes are logged as usual.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Durable before returning.
    pub sync: bool,
    /// See the type's docs.
    pub disable_wal: bool,
}

impl WriteOptions {
    /// `sync = true`.
    pub fn sync() -> Self {
        WriteOptions {
            sync: true,
            disable_wal: false,
        }
    }
}

/// Which locks a write takes (see `stripes`).
enum Keys<'a> {
    /// One key's stripe, gate shared.
    One(&'a [u8]),
    /// The stripes of a batch's keys, gate shared.
    Batch(&'a WriteBatch),
    /// The gate exclusively (range deletes): nothing else is in flight.
    All,
}

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

/// Shared state behind [`Db`]; the maintenance thread holds it too.
pub(crate) struct Inner {
    pub dir: PathBuf,
    pub opts: Options,
    pub t1: T1,
    pub log: Log,
    /// Writers hold it shared from reservation until T1 is updated, so a
    /// checkpoint holding it exclusively sees every record below the tail
    /// published. Range deletes hold it exclusively.
    pub gate: RwLock<()>,
    pub info: Arc<InfoLog>,
    pub counters: Counters,
    pub ckpt: Mutex<CkptState>,
    /// Log bytes written since the last checkpoint, at open (replayed).
    pub since_ckpt_base: AtomicU64,
    /// Size of the current snapshot file (0 before the first).
    pub snapshot_bytes: AtomicU64,
    /// `log.appended` when the last checkpoint fixed its LSN.
    pub appended_at_ckpt: AtomicU64,
    pub defrag: Mutex<()>,
    /// Delays writers while defragment is behind (`maintenance::throttle`).
    pub throttle: crate::maintenance::throttle::Throttle,
    pub stripes: crate::stripes::Stripes,
    /// Where movers put values since the current sorted-run tail began.
    pub packed: crate::maintenance::runs::Packed,
    /// The open region of `disable_wal` puts (`unlogged.rs`).
    pub unlogged: crate::unlogged::Unlogged,
    pub max_value: usize,
    /// Failures of background work (`bgerror.rs`).
    pub bg_errors: crate::bgerror::BackgroundErrors,
    /// Bytes of emptied segments kept because snapshots were held at the
    /// last retirement.
    pub snapshot_pinned_bytes: AtomicU64,
    _lock: DirLock,
}

/// A write registered with T1's visibility watermark (see `Inner::begin_write`).
/// Dropped, it ends the registration; it never waits, because it is dropped
/// with the gate and stripes held, and an unlogged put that registered may be
/// waiting for the gate. The caller waits for visibility after releasing
/// them ([`Inner::visible_after`]).
struct WriteGuard<'a> {
    inner: &'a Inner,
    ticket: Option<crate::t1::WriteTicket>,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            let log = &self.inner.log;
            self.inner.t1.versions().end_write(t, || log.tail_lsn());
        }
    }
}

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

fn t1_config(o: &Options) -> T1Config {
    let mut c = T1Config::default();
    if o.split_threshold > 0 {
        c.split_threshold = o.split_threshold;
    }
    if !o.bloom {
        c.bloom_bits_per_key = 0;
    }
    c.background = o.background;
    c
}

fn adjust_in(segs: &BTreeMap<u32, Arc<Segment>>) -> impl Fn(u32, i64) + '_ {
    move |id, d| {
        if let Some(s) = segs.get(&id) {
            s.live.fetch_add(d, Ordering::Relaxed);
        }
    }
}

impl Db {
    /// Opens (or creates) the database in directory `path`, recovering
    /// from its last checkpoint and log.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let dir = path.as_ref().to_path_buf();
        let listing = dir::prepare(&dir, opts.create_if_missing, opts.error_if_exists)?;
        let lock = DirLock::acquire(&dir)?;
        for t in &listing.temps {
            let p = dir.join(t);
            std::fs::remove_file(&p)
                .map_err(|e| Error::io(format!("removing leftover {}", p.display()), e))?;
        }
        let info = Arc::new(InfoLog::open(&dir)?);
        info.log(format_args!(
            "open {} segment_size={} checkpoint_interval_bytes={} bloom={} inline={} prefault={} random_access={} pread_min_bytes={} background={} maintenance_nice={}",
            dir.display(), opts.segment_size, opts.checkpoint_interval_bytes, opts.bloom,
            opts.inline_values, opts.prefault, opts.random_access, opts.pread_min_bytes,
            opts.background, opts.maintenance_nice
        ));
        let t0 = Instant::now();
        let map_opts = MapOpts {
            prefault: opts.prefault,
            random: opts.random_access,
        };
        // Prefaulting existing segments reads them all in: worth it when
        // they fit in memory, a thrash when they are larger than it (the
        // case vmemkv is built for). New segments are always prefaulted.
        let existing = (listing.segments.len() as u64).saturating_mul(opts.segment_size as u64);
        let open_opts = match crate::membudget::budget() {
            Some(b) if opts.prefault && existing > b / 2 => {
                info.log(format_args!(
                    "open: not prefaulting {} existing segments ({existing} bytes): more than half of the {b}-byte memory budget",
                    listing.segments.len()
                ));
                MapOpts {
                    prefault: false,
                    ..map_opts
                }
            }
            _ => map_opts,
        };
        let mut segs: BTreeMap<u32, Arc<Segment>> = BTreeMap::new();
        for &id in &listing.segments {
            let p = dir.join(segment::file_name(id));
            segs.insert(id, Arc::new(Segment::open(&p, id, open_opts)?));
        }
        let contiguous_from_zero = segs.keys().copied().eq(0..segs.len() as u32);

        // 1. The checkpoint, or a full replay when there is none usable.
        let mut t1 = T1::new(t1_config(&opts));
        let mut start = 0u64;
        let mut ckpt_id = 0u64;
        let mut snapshot_bytes = 0u64;
        if listing.has_manifest {
            let t_load = Instant::now();
            let loaded = Manifest::load(&dir).and_then(|m| {
                let n = load_checkpoint(&dir, &m, &t1, &segs)?;
                Ok((m, n))
            });
            match loaded {
                Ok((m, n)) => {
                    info.log(format_args!(
                        "recovery: loaded checkpoint {} ({} entries, {} bytes) covering LSN {:016x} in {:.3} ms",
                        m.snapshot,
                        n,
                        m.snapshot_bytes,
                        m.lsn,
                        t_load.elapsed().as_secs_f64() * 1e3
                    ));
                    start = m.lsn;
                    ckpt_id = m.id;
                    snapshot_bytes = m.snapshot_bytes;
                }
                Err(e) if contiguous_from_zero => {
                    info.log(format_args!(
                        "recovery: checkpoint unusable ({e}); falling back to a full log replay"
                    ));
                    t1 = T1::new(t1_config(&opts));
                    for s in segs.values() {
                        s.live.store(0, Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    info.log(format_args!("recovery failed: {e}"));
                    return Err(e);
                }
            }
        } else if !contiguous_from_zero {
            return Err(Error::Corruption(format!(
                "{}: no MANIFEST and the segment files are not 00000000.seg onwards; \
                 the log cannot be replayed from its start",
                dir.display()
            )));
        }

        // 2. How far the acknowledged log reaches. A new database gets its
        // LOGEND before its first segment, so a log without one was damaged.
        let (durable, end) = if listing.has_log_end {
            DurableEnd::open(&dir)?
        } else if segs.is_empty() && !listing.has_manifest {
            let end = End {
                lsn: 0,
                seg_size: opts.segment_size as u64,
            };
            let d = DurableEnd::create(&dir, end)?;
            crate::fsutil::sync_dir(&dir)?;
            (d, end)
        } else {
            let e = Error::Corruption(format!(
                "{}: {} is missing, so how far the acknowledged log reaches is unknown",
                dir.display(),
                dir.join(crate::t2::durable::NAME).display()
            ));
            info.log(format_args!("recovery failed: {e}"));
            return Err(e);
        };
        check_sizes(&segs, end, opts.segment_size).inspect_err(|e| {
            info.log(format_args!("recovery failed: {e}"));
        })?;

        // 3. Replay the log from the checkpoint's LSN.
        let (start_seg, start_off) = split_lsn(start);
        if segs.is_empty() && start == 0 {
            segs.insert(
                0,
                Arc::new(Segment::create(&dir, 0, opts.segment_size, map_opts)?),
            );
            crate::fsutil::sync_dir(&dir)?;
        }
        let tail: Vec<Arc<Segment>> = segs.range(start_seg..).map(|(_, s)| s.clone()).collect();
        if tail.first().map(|s| s.id) != Some(start_seg)
            || !tail
                .iter()
                .map(|s| s.id)
                .eq(start_seg..start_seg + tail.len() as u32)
        {
            let e = Error::Corruption(format!(
                "{}: segment files from {} onwards must all exist to replay the log from LSN {start:016x}",
                dir.display(),
                segment::file_name(start_seg)
            ));
            info.log(format_args!("recovery failed: {e}"));
            return Err(e);
        }
        for s in segs.range(..start_seg).map(|(_, s)| s) {
            s.tail.store(s.size() as u64, Ordering::Release);
        }
        let t_replay = Instant::now();
        let rep = {
            let adjust = adjust_in(&segs);
            let inline = opts.inline_values;
            let t1r = &t1;
            scan::recover(&tail, start_off as usize, end.lsn, |seg, f, body| {
                apply::replay_record(t1r, inline, seg, f.off, &f.header, body, &adjust)
            })
        };
        let rep = match rep {
            Ok(r) => r,
            Err(e) => {
                info.log(format_args!("recovery failed: {e}"));
                return Err(e);
            }
        };
        for (s, from, to) in &rep.holes {
            info.log(format_args!(
                "recovery: padded {} bytes at {} offset {from}: a write in flight at the crash (never acknowledged)",
                to - from,
                segment::file_name(*s)
            ));
        }
        if let Some((s, off, len)) = rep.truncated {
            info.log(format_args!(
                "recovery: torn tail in {} at offset {off}: truncated {len} bytes (point-in-time recovery)",
                segment::file_name(s)
            ));
        }
        // The torn tail's zeroing and the removed segments' seals must be
        // gone from disk before any file is: a crash part-way through must
        // leave a contiguous prefix whose last segment is not sealed, or the
        // next open would report the removed segment as lost.
        if let Some((id, _, _)) = rep.truncated {
            if let Some(s) = segs.get(&id) {
                crate::fsutil::sync_file(s.file(), &s.path)?;
            }
        }
        for id in &rep.removed_segments {
            if let Some(s) = segs.get(id) {
                let at = crate::t2::record::seal_offset(s.size());
                s.zero_range(at, s.size() - at)?;
                crate::fsutil::sync_file(s.file(), &s.path)?;
            }
        }
        for id in rep.removed_segments.iter().rev() {
            if let Some(s) = segs.remove(id) {
                std::fs::remove_file(&s.path)
                    .map_err(|e| Error::io(format!("removing {}", s.path.display()), e))?;
                info.log(format_args!(
                    "recovery: removed {} (no valid record after the torn tail)",
                    s.path.display()
                ));
            }
        }
        info.log(format_args!(
            "recovery: replayed {} records ({} bytes) from LSN {start:016x} to {:016x} in {:.3} ms; open took {:.3} ms",
            rep.records,
            rep.bytes,
            rep.end,
            t_replay.elapsed().as_secs_f64() * 1e3,
            t0.elapsed().as_secs_f64() * 1e3
        ));
        let log = Log::new(&dir, opts.segment_size, map_opts, segs, start, durable)?;
        // Whatever a killed process left in the page cache becomes durable
        // now, so later sync writes never sit on a non-durable prefix.
        log.sync_to(rep.end)?;
        crate::t1_stats::log_events(&t1, info.clone());
        let max_value = opts.max_value_size();
        let inner = Arc::new(Inner {
            dir,
            t1,
            log,
            gate: RwLock::new(()),
            info,
            counters: Counters::default(),
            bg_errors: Default::default(),
            snapshot_pinned_bytes: AtomicU64::new(0),
            throttle: Default::default(),
            ckpt: Mutex::new(CkptState {
                id: ckpt_id,
                lsn: start,
            }),
            snapshot_bytes: AtomicU64::new(snapshot_bytes),
            since_ckpt_base: AtomicU64::new(rep.bytes),
            appended_at_ckpt: AtomicU64::new(0),
            defrag: Mutex::new(()),
            stripes: crate::stripes::Stripes::new(),
            packed: Default::default(),
            unlogged: Default::default(),
            max_value,
            opts,
            _lock: lock,
        });
        // Recovery applied everything it found: all of it is visible.
        inner.t1.versions().publish_all(inner.log.tail_lsn());
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
        self.inner.check_key(key)?;
        self.inner.check_value(value)?;
        if self.inner.unlogged_wanted(wo) && self.inner.write_unlogged(&[(key, value)])? {
            return Ok(());
        }
        let mut h = [0u8; 9];
        h[0] = OP_PUT;
        h[1..5].copy_from_slice(&(key.len() as u32).to_le_bytes());
        h[5..9].copy_from_slice(&(value.len() as u32).to_le_bytes());
        let value_crc = crate::crc::crc32c(value);
        let crc = value_crc.to_le_bytes();
        let body_crc = crate::value_crc::body_crc(&[&h, key, &crc], value_crc, value.len());
        self.inner.commit(
            wo,
            &[&h, key, &crc, value],
            Some(body_crc),
            1,
            Keys::One(key),
        )
    }

    /// Removes `key` (`sync = false`); removing a missing key succeeds.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    /// Removes `key`.
    pub fn delete_opt(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        self.inner.check_key(key)?;
        let mut h = [0u8; 5];
        h[0] = OP_DELETE;
        h[1..5].copy_from_slice(&(key.len() as u32).to_le_bytes());
        self.inner.commit(wo, &[&h, key], None, 1, Keys::One(key))
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
        if batch.is_empty() {
            return Ok(());
        }
        if batch.max_key > MAX_KEY_SIZE {
            return Err(key_too_large(batch.max_key));
        }
        if batch.max_value > self.inner.max_value {
            return Err(value_too_large(batch.max_value, self.inner.max_value));
        }
        if !batch.has_range && self.inner.unlogged_wanted(wo) {
            let puts = || {
                batch.iter().map_while(|op| match op {
                    Ok(crate::batch::BatchOp::Put { key, value, .. }) => Some((key, value)),
                    _ => None,
                })
            };
            if batch.count == 1 {
                if let Some(put) = puts().next() {
                    if self.inner.write_unlogged(&[put])? {
                        return Ok(());
                    }
                }
            } else {
                let puts: Vec<(&[u8], &[u8])> = puts().collect();
                if puts.len() == batch.count as usize && self.inner.write_unlogged(&puts)? {
                    return Ok(());
                }
            }
        }
        let keys = if batch.has_range {
            Keys::All
        } else {
            Keys::Batch(batch)
        };
        self.inner
            .commit(wo, &[&batch.rep], None, batch.count, keys)
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
        niced(inner.opts.maintenance_nice, || inner.reorganize());
        Ok(())
    }

    /// Makes every write so far durable (`msync` of the log), including
    /// `disable_wal` puts: their open region is sealed first.
    pub fn flush(&self) -> Result<()> {
        self.inner.unlogged.seal(&self.inner)?;
        let t = self.inner.log.tail_lsn();
        self.inner.log.sync_to(t)
    }

    /// Current statistics.
    pub fn statistics(&self) -> Statistics {
        self.inner.statistics()
    }

    /// Every segment, for the multiscan prefetcher (issue 6): callers get
    /// the mapping and the file of each.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.inner.log.segments()
    }

    /// Many ranges in one call (RocksDB's MultiScan). With
    /// `use_async_io`, every range is resolved against T1 and all of its
    /// value reads are submitted through io_uring before the first key is
    /// returned; see [`crate::multiscan`].
    pub fn multi_scan(
        &self,
        args: &crate::multiscan::MultiScanArgs,
    ) -> Result<crate::multiscan::MultiScanIter<'_>> {
        let mode = match self.inner.opts.use_direct_reads {
            None => crate::multiscan::BufferMode::Auto,
            Some(true) => crate::multiscan::BufferMode::Direct,
            Some(false) => crate::multiscan::BufferMode::PageCache,
        };
        crate::multiscan::multi_scan_with(&self.inner.t1, &self.inner.log, args, mode, None)
    }

    /// [`Db::multi_scan`] as of `snap`.
    pub fn multi_scan_at(
        &self,
        snap: &Snapshot,
        args: &crate::multiscan::MultiScanArgs,
    ) -> Result<crate::multiscan::MultiScanIter<'_>> {
        let at = snap.at_for(&self.inner.t1)?;
        let mode = match self.inner.opts.use_direct_reads {
            None => crate::multiscan::BufferMode::Auto,
            Some(true) => crate::multiscan::BufferMode::Direct,
            Some(false) => crate::multiscan::BufferMode::PageCache,
        };
        crate::multiscan::multi_scan_with(&self.inner.t1, &self.inner.log, args, mode, Some(at))
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

/// Segments are created at full size and never shrink, so one shorter
/// than it was created was truncated: the segment `LOGEND` points into must
/// have the size it records, and later ones (created since) that size or
/// the configured one. Sealed segments are checked by their seal.
fn check_sizes(segs: &BTreeMap<u32, Arc<Segment>>, end: End, configured: usize) -> Result<()> {
    let (end_seg, _) = split_lsn(end.lsn);
    for s in segs.range(end_seg..).map(|(_, s)| s) {
        let size = s.size() as u64;
        let ok = size == end.seg_size || (s.id > end_seg && size == configured as u64);
        if !ok {
            return Err(Error::Corruption(format!(
                "{} has {size} bytes but was created with {} (truncated?)",
                s.path.display(),
                end.seg_size
            )));
        }
    }
    Ok(())
}

fn key_too_large(n: usize) -> Error {
    Error::InvalidArgument(format!(
        "key of {n} bytes exceeds the maximum key size of {MAX_KEY_SIZE} bytes"
    ))
}

fn value_too_large(n: usize, max: usize) -> Error {
    Error::InvalidArgument(format!(
        "value of {n} bytes exceeds the maximum value size of {max} bytes"
    ))
}

/// Loads a checkpoint, checking every stored locator against the segments.
fn load_checkpoint(
    dir: &Path,
    m: &Manifest,
    t1: &T1,
    segs: &BTreeMap<u32, Arc<Segment>>,
) -> Result<u64> {
    let snap = m.snapshot.clone();
    checkpoint::load_snapshot(dir, m, t1, |key, e| {
        if let Payload::Stored(l) = e.payload {
            let seg = segs.get(&l.segment).filter(|s| {
                (l.offset as usize)
                    .checked_add(l.len as usize)
                    .is_some_and(|end| end <= s.size())
            });
            match seg {
                Some(s) => {
                    s.live.fetch_add(
                        crate::stats::live_cost(key.len(), l.len as usize),
                        Ordering::Relaxed,
                    );
                }
                None => {
                    return Err(Error::Corruption(format!(
                        "{}: an entry points at {} offset {} (+{}), which does not exist",
                        dir.join(&snap).display(),
                        segment::file_name(l.segment),
                        l.offset,
                        l.len
                    )))
                }
            }
        }
        Ok(())
    })
}

impl Inner {
    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY_SIZE {
            return Err(key_too_large(key.len()));
        }
        Ok(())
    }

    fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.max_value {
            return Err(value_too_large(value.len(), self.max_value));
        }
        Ok(())
    }

    pub(crate) fn adjust(&self, id: u32, d: i64) {
        self.log
            .with_segment(id, |s| s.live.fetch_add(d, Ordering::Relaxed));
    }

    /// Whether a write with `wo` goes into a region of unlogged puts.
    /// A sync write is logged: it asks for durability now.
    fn unlogged_wanted(&self, wo: &WriteOptions) -> bool {
        wo.disable_wal && !wo.sync && self.unlogged.wants()
    }

    /// `puts` as unlogged puts (`unlogged.rs`). The throttle is paid
    /// before the stripes are taken, as in `commit`.
    /// Returns false, having written nothing, when a snapshot is held: an
    /// unlogged put's seq comes from a region reserved earlier and could land
    /// below the snapshot's (`Versions::unlogged_enter`); the caller then
    /// takes the logged path.
    fn write_unlogged(&self, puts: &[(&[u8], &[u8])]) -> Result<bool> {
        if let Some(e) = self.bg_errors.take() {
            return Err(e);
        }
        let vs = self.t1.versions();
        if !vs.unlogged_enter() {
            return Ok(false);
        }
        let r = self.write_unlogged_entered(puts);
        vs.unlogged_leave();
        r.map(|()| true)
    }

    fn write_unlogged_entered(&self, puts: &[(&[u8], &[u8])]) -> Result<()> {
        self.throttle.pay(
            puts.iter()
                .map(|(k, v)| packed::cost(k.len(), v.len()))
                .sum(),
        );
        let seq = {
            let _stripes = self.stripes.many(puts.iter().map(|p| p.0));
            let _visible = self.begin_write();
            self.unlogged.write(self, puts)?
        };
        self.visible_after(seq);
        Counters::add(&self.counters.writes, 1);
        Ok(())
    }

    /// Appends one batch record and applies it to T1.
    /// `body_crc`: the crc32c of `parts` when the caller already has it.
    fn commit(
        &self,
        wo: &WriteOptions,
        parts: &[&[u8]],
        body_crc: Option<u32>,
        count: u32,
        keys: Keys<'_>,
    ) -> Result<()> {
        // A background failure nobody has heard of fails this write, which
        // is not applied (as RocksDB reports a background error).
        if let Some(e) = self.bg_errors.take() {
            return Err(e);
        }
        self.throttle.pay(parts.iter().map(|p| p.len()).sum());
        let (seq, end) = {
            let (_one, _many, _shared, _excl);
            match keys {
                Keys::One(k) => {
                    _one = self.stripes.one(k);
                    _shared = self.gate.read();
                }
                Keys::Batch(b) => {
                    _many = self.stripes.many(b.iter().filter_map(|op| match op {
                        Ok(crate::batch::BatchOp::Put { key, .. })
                        | Ok(crate::batch::BatchOp::Delete { key }) => Some(key),
                        _ => None,
                    }));
                    _shared = self.gate.read();
                }
                Keys::All => _excl = self.gate.write(),
            }
            self.unlogged
                .before_logged(self, wo.disable_wal && !wo.sync)?;
            // Readers see the batch once all of it is in T1 (design.md §8.1).
            let _visible = self.begin_write();
            let a = match body_crc {
                Some(c) => self
                    .log
                    .append_with_crc(Kind::Batch, count, None, 0, parts, c)?,
                None => self.log.append(Kind::Batch, count, None, 0, parts)?,
            };
            // A one-part body (every `write(batch)`) is parsed from the
            // caller's buffer: the same bytes, without reading the record
            // back through the mapping, which for a pwritten record costs a
            // page fault per new page.
            let body: &[u8] = match parts {
                [one] => one,
                _ => a
                    .seg
                    .bytes(a.body_off, parts.iter().map(|p| p.len()).sum())
                    .unwrap_or_default(),
            };
            let seg = &a.seg;
            let adjust = |id: u32, d: i64| {
                if id == seg.id {
                    seg.live.fetch_add(d, Ordering::Relaxed);
                } else {
                    self.adjust(id, d);
                }
            };
            apply::apply_batch(
                &self.t1,
                self.opts.inline_values,
                a.seg.id,
                a.body_off,
                a.lsn,
                body,
                &adjust,
            )
            .map_err(|at| Error::InvalidArgument(format!("malformed write batch at byte {at}")))?;
            (a.lsn, a.end_lsn)
        };
        self.visible_after(seq);
        Counters::add(&self.counters.writes, 1);
        if wo.sync {
            self.log.sync_to(end)?;
        }
        Ok(())
    }

    /// Registers a write with T1's visibility watermark until dropped.
    fn begin_write(&self) -> WriteGuard<'_> {
        let vs = self.t1.versions();
        WriteGuard {
            inner: self,
            ticket: Some(vs.begin_write(|| self.log.tail_lsn())),
        }
    }

    /// Read your writes: returns once the write with `seq` is visible, i.e.
    /// once the writes begun before it are applied too (a T1 insert each).
    /// Called with no lock held.
    fn visible_after(&self, seq: u64) {
        self.t1.versions().wait_visible(seq);
    }

    /// Reads `key` as of `at` (a registered seq), or as of now.
    pub(crate) fn get_into(
        &self,
        key: &[u8],
        out: &mut Vec<u8>,
        verify: bool,
        at: Option<u64>,
    ) -> Result<bool> {
        out.clear();
        // A value relocated by defragment may have its old segment retired
        // between the index lookup and the read; the retry then finds the
        // new location. Two misses in a row cannot be a race.
        for _ in 0..3 {
            let e = match at {
                Some(at) => self.t1.get_at(key, at),
                None => self.t1.get_visible(key),
            };
            let Some(e) = e else {
                return Ok(false);
            };
            match e.payload {
                Payload::Inline { .. } => {
                    out.extend_from_slice(e.payload.inline_bytes().unwrap_or_default());
                    return Ok(true);
                }
                Payload::Tombstone => return Ok(false),
                Payload::Stored(l) => {
                    let (off, len) = (l.offset as usize, l.len as usize);
                    let pread = len >= self.opts.pread_min_bytes;
                    let res = self.log.with_segment(l.segment, |seg| {
                        if pread {
                            seg.pread_into(off, len, out)?;
                            if verify {
                                if let Err(e) = crate::value_crc::verify(seg, off, out) {
                                    out.clear();
                                    return Err(e);
                                }
                            }
                            return Ok(());
                        }
                        let b = seg.bytes(off, len).ok_or_else(|| {
                            Error::Corruption(format!(
                                "{} offset {off} (+{len}): value lies outside the file",
                                seg.path.display()
                            ))
                        })?;
                        if verify {
                            crate::value_crc::verify(seg, off, b)?;
                        }
                        out.extend_from_slice(b);
                        Ok(())
                    });
                    match res {
                        Some(r) => return r.map(|()| true),
                        // Relocated and retired meanwhile: look up again.
                        None => continue,
                    }
                }
            }
        }
        Err(Error::Corruption(format!(
            "the index points at a removed segment for a key of {} bytes",
            key.len()
        )))
    }

    /// Whether the automatic checkpoint is due: `checkpoint_interval_bytes`
    /// of log since the last one, and [`LOG_PER_SNAPSHOT`] times the
    /// snapshot's size.
    /// Logs and records a failure of background work `what`.
    pub(crate) fn background_failed(&self, what: &str, e: &Error, for_writers: bool) {
        self.info.log(format_args!("{what} failed: {e}"));
        self.bg_errors.record(what, e, for_writers);
    }

    pub(crate) fn checkpoint_due(&self) -> bool {
        let every = self.opts.checkpoint_interval_bytes;
        let snapshot = self.snapshot_bytes.load(Ordering::Relaxed);
        every > 0
            && self.log_bytes_since_checkpoint()
                >= every.max(snapshot.saturating_mul(LOG_PER_SNAPSHOT))
    }

    /// Whether close should checkpoint: the log since the last checkpoint
    /// is at least a quarter of `checkpoint_interval_bytes` and an eighth
    /// of the snapshot. Otherwise every later open replays it and T1
    /// then merges the replayed entries into its sorted regions: opening
    /// the 5M key-order database with 184 MB of log pending took 0.79-1.16
    /// s, against 0.61-0.63 s after a close that checkpointed. RocksDB
    /// flushes its memtables at close for the same reason.
    pub(crate) fn close_checkpoint_due(&self) -> bool {
        let every = self.opts.checkpoint_interval_bytes;
        let since = self.log_bytes_since_checkpoint();
        every > 0 && since >= every / 4 && since >= self.snapshot_bytes.load(Ordering::Relaxed) / 8
    }

    pub(crate) fn log_bytes_since_checkpoint(&self) -> u64 {
        let appended = self.log.appended.load(Ordering::Relaxed);
        self.since_ckpt_base.load(Ordering::Relaxed)
            + appended.saturating_sub(self.appended_at_ckpt.load(Ordering::Relaxed))
    }

    /// The checkpoint protocol (see `docs/design.md`). Returns its LSN.
    pub(crate) fn checkpoint(&self) -> Result<u64> {
        let mut st = self.ckpt.lock();
        let t0 = Instant::now();
        let (p, appended) = {
            let _g = self.gate.write();
            // Unlogged puts below P must be in a sealed record, since replay
            // starts at P.
            self.unlogged.seal(self)?;
            (
                self.log.tail_lsn(),
                self.log.appended.load(Ordering::Relaxed),
            )
        };
        let pause = t0.elapsed().as_nanos() as u64;
        self.counters
            .checkpoint_max_pause_ns
            .fetch_max(pause, Ordering::Relaxed);
        // Every record below P is complete and published: make it durable.
        self.log.sync_to(p)?;
        let id = st.id + 1;
        let name = checkpoint::snapshot_name(id);
        let snap = checkpoint::write_snapshot(&self.dir, &name, p, &self.t1)?;
        crate::failpoint::hit("checkpoint.snapshot_synced");
        // Entries newer than P that the snapshot caught must be durable
        // before the MANIFEST makes recovery skip to P; unlogged ones lie in
        // the region open now or in one sealed since P (regions follow one
        // another), and recovery drops an unsealed region, so seal it.
        self.unlogged.seal(self)?;
        let tail = self.log.tail_lsn();
        self.log.sync_to_untracked(p, tail)?;
        Manifest {
            id,
            lsn: p,
            snapshot: name.clone(),
            snapshot_bytes: snap.bytes,
            snapshot_crc: snap.crc,
        }
        .store(&self.dir)?;
        crate::failpoint::hit("checkpoint.manifest_stored");
        if st.id > 0 {
            let old = self.dir.join(checkpoint::snapshot_name(st.id));
            if let Err(e) = std::fs::remove_file(&old) {
                self.info.log(format_args!(
                    "checkpoint: could not remove {}: {e}",
                    old.display()
                ));
            }
        }
        st.id = id;
        st.lsn = p;
        self.snapshot_bytes.store(snap.bytes, Ordering::Relaxed);
        self.since_ckpt_base.store(0, Ordering::Relaxed);
        self.appended_at_ckpt.store(appended, Ordering::Relaxed);
        let ns = t0.elapsed().as_nanos() as u64;
        Counters::add(&self.counters.checkpoints, 1);
        Counters::set(&self.counters.checkpoint_last_ns, ns);
        Counters::set(&self.counters.checkpoint_last_bytes, snap.bytes);
        let (s, o) = split_lsn(p);
        self.info.log(format_args!(
            "checkpoint {id}: {name} {} entries {} bytes, LSN {:016x} ({} offset {o}), writer gate {:.3} ms, total {:.3} ms",
            snap.entries,
            snap.bytes,
            lsn(s, o),
            segment::file_name(s),
            pause as f64 / 1e6,
            ns as f64 / 1e6
        ));
        Ok(p)
    }

    pub(crate) fn reorganize(&self) {
        let t0 = Instant::now();
        self.t1.reorganize_all();
        crate::failpoint::hit("reorganize.merged");
        let ns = t0.elapsed().as_nanos() as u64;
        Counters::add(&self.counters.reorganizes, 1);
        Counters::set(&self.counters.reorganize_last_ns, ns);
        Counters::add(&self.counters.reorganize_total_ns, ns);
        self.info
            .log(format_args!("reorganize: {:.3} ms", ns as f64 / 1e6));
    }

    pub(crate) fn statistics(&self) -> Statistics {
        let c = &self.counters;
        let us = |a: &AtomicU64| Counters::get(a) / 1000;
        let segs = self.log.segments();
        let t = crate::t1_stats::stats(&self.t1);
        Statistics {
            shards: t.shards as u64,
            splits: t.splits,
            split_last_pause_us: t.last_split_pause.as_micros() as u64,
            split_max_pause_us: t.max_split_pause.as_micros() as u64,
            t1_reorganizes: t.reorganizes,
            t1_reorganize_max_us: t.max_reorganize.as_micros() as u64,
            t1_max_writer_wait_us: t.max_writer_wait.as_micros() as u64,
            checkpoints: Counters::get(&c.checkpoints),
            checkpoint_last_us: us(&c.checkpoint_last_ns),
            checkpoint_last_bytes: Counters::get(&c.checkpoint_last_bytes),
            checkpoint_max_pause_us: us(&c.checkpoint_max_pause_ns),
            reorganizes: Counters::get(&c.reorganizes),
            reorganize_last_us: us(&c.reorganize_last_ns),
            reorganize_total_us: us(&c.reorganize_total_ns),
            defrag_cycles: Counters::get(&c.defrag_cycles),
            defrag_moved_bytes: Counters::get(&c.defrag_moved_bytes),
            defrag_reclaimed_bytes: Counters::get(&c.defrag_reclaimed_bytes),
            defrag_retired_segments: Counters::get(&c.defrag_retired_segments),
            ordered_values: Counters::get(&c.ordered_values),
            t2_live_bytes: segs
                .iter()
                .map(|s| s.live.load(Ordering::Relaxed).max(0) as u64)
                .sum(),
            t2_total_bytes: segs.iter().map(|s| s.size() as u64).sum(),
            t2_segments: segs.len() as u64,
            t1_memory_bytes: t.memory_bytes as u64,
            t1_entries: self.t1.len() as u64,
            log_bytes_since_checkpoint: self.log_bytes_since_checkpoint(),
            sync_rounds: self.log.sync_counters.rounds.load(Ordering::Relaxed),
            sync_waiters: self.log.sync_counters.waiters.load(Ordering::Relaxed),
            rollover_max_us: self.log.max_rollover_ns.load(Ordering::Relaxed) / 1000,
            sorted_runs: Counters::get(&c.sorted_runs),
            unsorted_bytes: crate::maintenance::runs::unsorted_bytes(self),
            unlogged_regions: self.unlogged.sealed(),
            unlogged_open_bytes: self.unlogged.open_bytes(),
            write_rate_limit: self.throttle.rate(),
            delayed_writes: self.throttle.delayed_writes.load(Ordering::Relaxed),
            write_delay_us: self.throttle.delay_ns.load(Ordering::Relaxed) / 1000,
            background_errors: self.bg_errors.count(),
            last_background_error: self.bg_errors.last(),
            snapshots: {
                let (n, _) = self.t1.versions().snapshots();
                n as u64
            },
            oldest_snapshot_age_ms: self
                .t1
                .versions()
                .snapshots()
                .1
                .map_or(0, |d| d.as_millis() as u64),
            snapshot_versions: self.t1.versions().store_size().0 as u64,
            snapshot_pinned_bytes: self.t1.versions().store_size().1
                + self.snapshot_pinned_bytes.load(Ordering::Relaxed),
        }
    }
}
