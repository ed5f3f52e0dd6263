//! MultiScan: many key ranges in one call (RocksDB's `NewMultiScan`), with
//! every value read issued up front through io_uring.
//!
//! T1 knows in RAM where every value of every range lives, so the prepare
//! step needs no index I/O: it resolves each range against T1
//! (`plan::resolve`), computes the page-aligned T2 extents the values
//! need, drops pages already resident (`mincore`), coalesces extents closer
//! than `io_coalesce_threshold` and submits them all before the first key
//! is returned. Iterating then waits only for the extent the current value
//! needs. Ranges resolve in windows: a bounded range's first window holds
//! up to [`BOUNDED_WINDOW`] entries (all of them in typical scans), an
//! unbounded one [`UNBOUNDED_WINDOW`]; once a window is half consumed the
//! next one is resolved and its reads queued, so the queue stays full.
//!
//! **Prefetch is bounded by memory** (module `ahead`): a window also ends
//! at a quarter of `max_prefetch_ahead`, and ranges after the current one
//! are planned only while all scans of the process together hold less
//! than `max_prefetch_ahead` bytes planned and unconsumed (default an
//! eighth of the memory budget: 48 MiB in a 384 MiB cgroup). The rest are
//! planned as earlier ones are consumed. Unbounded, a 15 x 100-key scan of
//! 64 KiB values put 96 MB in flight, and 2 threads in a 384 MiB cgroup
//! evicted their own prefetch: cold db_bench `multiscan`, 48k x 64 KiB,
//! 6 s runs, 3 interleaved, async 10 -> 14 ops/s at 2 threads and 12 -> 14
//! at 4 (sync 15-17: at ~1.5 GB/s every path is at the disk's bandwidth).
//!
//! **Semantics** (RocksDB's): ranges in increasing start order, results
//! range by range, key by key; validation as [`MultiScanArgs::validate`].
//! Like `Iter`, a scan reads T1 as of one seq (its own registration, or a snapshot's). Values are never
//! torn: log records are immutable once written, and the scan holds an
//! `Arc` of every segment it read a locator from, so a value is always
//! bytes that were written to its key.
//!
//! **`max_prefetch_size`**: once that many bytes have been planned, the
//! scan *continues synchronously* (values past the budget are read
//! through the mapping) rather than failing with `PrefetchLimitReached`;
//! [`MultiScanStats::prefetch_limited`] reports that it happened. A caller
//! thus never has to retry a scan because it was large.
//!
//! **Synchronous path** (`use_async_io = false`): each range is resolved
//! when it is entered and its value pages are handed to the kernel with
//! `MADV_WILLNEED` ((module `readahead`)), so its faults overlap; only the current
//! range is read ahead, where the async path has every range in flight.
//!
//! **Without io_uring** (`io_uring_disabled`, seccomp, `ENOSYS`/`EPERM`, or
//! [`fallback::DISABLE_ENV`] set) one warning is printed and every scan
//! takes the synchronous path, with identical results.
//!
//! **Submission is pipelined**: reads are submitted while later ranges are
//! still being resolved, not after all of them, so the disk starts on the
//! first range while T1 resolves the rest (resolving 15 x 100 keys takes
//! ~125 us of a ~1.1 ms cold scan, during which the disk sat idle): range
//! by range for reads into owned buffers, after ranges 1, 3, 7, 15, ...
//! for page-cache advice (each submission wakes io-wq workers).
//!
//! **Buffers** ([`BufferMode`]; `Options::use_direct_reads` sets the
//! engine's default, db_bench `--use_direct_reads`):
//! * [`BufferMode::Direct`]: `O_DIRECT` `IORING_OP_READ` into page-aligned
//!   buffers the scan owns (module `buffers`; reused through the ring pool,
//!   so no allocation or zeroing per read). The read's completion is the
//!   signal that the value is there; values are served from the buffer
//!   with no page fault, and nothing enters the page cache. Reads hold
//!   whole values (with their checksum) and are cut only between values:
//!   a value split between two reads was served through the mapping, one
//!   4 KiB fault at a time (64 KiB values: 2 ops/s instead of 16). A
//!   read's ends are its first and last value's, rounded to the file's
//!   `O_DIRECT` alignment (512 B here) rather than to pages: 6-7% fewer
//!   bytes on the shape, 1536 -> 1664 ops/s at 2 threads (medians
//!   of 3 interleaved cold runs).
//! * [`BufferMode::PageCache`]: each extent is an
//!   `IORING_OP_FADVISE(POSIX_FADV_WILLNEED)`; the kernel's io-wq workers
//!   read the pages into the page cache and values are served from the
//!   mapping, a value still in flight blocking on its page lock. The pages
//!   stay cached, so data that fits in memory warms up.
//! * [`BufferMode::Owned`]: buffered `IORING_OP_READ` into owned buffers;
//!   the kernel retries uncached pages one by one and copies them, and it
//!   was the slowest in every measurement.
//! * [`BufferMode::Auto`] (default): `Direct`, the faster on cold data.
//!   When the log fits in half of the page cache the process can expect,
//!   a window whose bytes were read in the recent past goes through the
//!   page cache instead (module `admission`), so data scanned again warms
//!   up while one-off scans do not evict anything; and once scans have
//!   read a quarter of such a log, they are re-reading it, and every
//!   window goes through the page cache (10 s cold-start runs of the
//!   issue's shape at 2 threads: 2.5-2.9k -> 5.7-6.3k ops/s, sync 4.3-4.9k;
//!   short runs unchanged). A larger log is always read directly (caching
//!   it would only evict pages before their next use). A scan that starts
//!   while another async scan of the same database is running goes through
//!   the page cache too, when the log fits: concurrent scans compete for
//!   the disk, and pages cached by one serve the overlapping ranges of
//!   later ones, which direct reads fetch again (docs/performance.md,
//!   "Concurrent scans through the page cache").
//!
//! Cold db_bench `multiscan`, 15 x 100 keys, 5M x 512 B, 1 thread,
//! page cache dropped, interleaved runs (ops/s): key-order data 1044-1147
//! direct vs 755-995 page cache vs 643-860 owned; data ordered after a
//! random load 1268-1543 vs 1179-1265 vs 1128-1204. 48k x 64 KiB in a
//! 384 MiB cgroup: 16-19 direct vs 11-13 page cache (1 and 2 threads).
//! Direct wins because its completion is exact (the page cache path
//! faults on pages still under I/O and sleeps page by page) and because
//! the submitting thread issues the reads itself instead of handing each
//! advice to an io-wq worker that allocates and inserts page-cache pages.
//!
//! **Warm cache**: pages found resident are not read; once the first
//! residency probes of a window find nothing missing, the rest of the
//! window is served through the mapping without further `mincore` calls.
//! After a scan that read nothing, the next scan on the same thread probes
//! only its first window and one rotating sample window; a sample with
//! missing pages clears that hint. A warm 15 x 100-key scan then executes
//! 6.7% more instructions than the synchronous path (callgrind), plus at
//! most four `mincore` calls.
//!
//! **Rings**: a pool of io_uring instances (256 SQ entries each); a scan
//! holds one while it runs, so concurrent scans never share a lock beyond
//! the pool's pop/push. Reads beyond 256 in flight are queued and submitted
//! as completions arrive.

pub(crate) mod admission;
mod ahead;
mod buffers;
pub mod fallback;

pub(crate) mod plan;
mod readahead;
mod uring;

use crate::error::{Error, Result};
use crate::index::{Cursor, T1};
use crate::t2::log::Log;
use crate::t2::value_crc::VALUE_CRC_LEN;
use plan::{Extent, Item, Planner, SegTable, Val, Window, NO_EXT};
use uring::Reader;

/// Bytes of an upcoming value [`MultiScanIter::prefetch`] pulls into the
/// CPU cache; longer values are streamed by the hardware prefetcher.
const PREFETCH_BYTES: usize = 1024;

/// Entries resolved per window of a bounded range.
pub const BOUNDED_WINDOW: usize = 4096;
/// Entries resolved per window of an unbounded range.
pub const UNBOUNDED_WINDOW: usize = 256;

// RocksDB's `MultiScanArgs` and its ranges live in `vmemkv-scan-args`, the
// one definition the engine and the trait crate share (see that crate for
// why); the engine's own knobs wrap it in [`MultiScanOptions`].
pub use vmemkv_scan_args::{InvalidScan, MultiScanArgs, ScanRange, DEFAULT_IO_COALESCE_THRESHOLD};

impl From<InvalidScan> for Error {
    fn from(e: InvalidScan) -> Self {
        Error::InvalidArgument(e.0)
    }
}

/// Where prefetched bytes go (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BufferMode {
    /// [`Self::Direct`]; but when the value log fits in half of the page
    /// cache the process can expect (`membudget`), a window of entries
    /// whose bytes a scan read recently is advised into the page cache
    /// instead, so that data scanned again warms up, and so is every
    /// window once scans have read a quarter of the log (module
    /// `admission`); and a scan that starts while another async scan of
    /// the same database runs is [`Self::PageCache`]. The default.
    #[default]
    Auto,
    /// `IORING_OP_READ` into buffers owned by the scan; values are served
    /// from them.
    Owned,
    /// `IORING_OP_FADVISE(WILLNEED)`: the kernel reads the pages into the
    /// page cache and values are served from the mapping.
    PageCache,
    /// `O_DIRECT` `IORING_OP_READ` into page-aligned buffers owned by the
    /// scan, bypassing the page cache; values are served from them. Pages
    /// already resident are still served from the mapping. A filesystem
    /// without `O_DIRECT` gets buffered reads into the same buffers.
    Direct,
}

impl BufferMode {
    /// `self`, or `other` when `self` is `Auto`.
    pub fn or(self, other: BufferMode) -> BufferMode {
        match self {
            BufferMode::Auto => other,
            m => m,
        }
    }

    /// How the reader fetches extents in this mode (`Auto` decided for
    /// `log`, with `others` async scans of it running), and, when windows
    /// may go through the page cache instead (module `admission`), the
    /// size of the log.
    fn resolve(self, log: &Log, others: usize) -> (uring::Mode, Option<u64>) {
        match self {
            BufferMode::Auto => {
                let size = log.approx_total_bytes();
                let fits = size <= ahead::page_cache() / 2;
                if fits && others > 0 {
                    // Concurrent scans share the disk, so bytes count more
                    // than CPU: pages read through the cache serve the
                    // ranges of later scans that overlap them, which direct
                    // reads read again (2 threads: 5-11% fewer bytes per
                    // op, 5-7% more ops/s; alone, direct reads are 10-25%
                    // faster).
                    (uring::Mode::Advise, None)
                } else {
                    (uring::Mode::Direct, fits.then_some(size))
                }
            }
            BufferMode::Owned => (uring::Mode::Read, None),
            BufferMode::Direct => (uring::Mode::Direct, None),
            BufferMode::PageCache => (uring::Mode::Advise, None),
        }
    }
}

/// A MultiScan as the engine runs it: RocksDB's arguments, plus the read
/// options' iterate bounds and the engine's own knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiScanOptions {
    /// RocksDB's arguments: the ranges, `use_async_io` (prefetch every
    /// range's values through io_uring before the first key),
    /// `io_coalesce_threshold` (reads closer than this are merged) and
    /// `max_prefetch_size` (bytes prefetched at most; 0 = unlimited; past
    /// it the scan continues synchronously).
    pub args: MultiScanArgs,
    /// Ranges after the current one are planned only while the bytes that
    /// all scans of the process have planned and not yet consumed are
    /// below this; 0 = an eighth of the memory budget (see the module
    /// docs). Windows of entries are cut at a quarter of it.
    pub max_prefetch_ahead: u64,
    /// `ReadOptions::iterate_lower_bound`, intersected with every range.
    pub lower_bound: Option<Vec<u8>>,
    /// `ReadOptions::iterate_upper_bound`, intersected with every range.
    pub upper_bound: Option<Vec<u8>>,
    /// Force the synchronous path even when `use_async_io` is set (tests
    /// of the io_uring-unavailable path); prints no warning.
    pub disable_io_uring: bool,
    /// Where prefetched bytes go.
    pub buffer_mode: BufferMode,
    /// Check each stored value's checksum as the scan reaches it
    /// (`ReadOptions::verify_checksums`); a mismatch is `Corruption`.
    pub verify_checksums: bool,
}

impl Default for MultiScanOptions {
    fn default() -> Self {
        MultiScanOptions::from(MultiScanArgs::default())
    }
}

impl From<MultiScanArgs> for MultiScanOptions {
    /// `args` with the engine's defaults for everything else.
    fn from(args: MultiScanArgs) -> Self {
        MultiScanOptions {
            args,
            max_prefetch_ahead: 0,
            lower_bound: None,
            upper_bound: None,
            disable_io_uring: false,
            buffer_mode: BufferMode::Auto,
            verify_checksums: true,
        }
    }
}

impl MultiScanOptions {
    /// `ranges` with default settings.
    pub fn new(ranges: Vec<ScanRange>) -> Self {
        MultiScanOptions::from(MultiScanArgs::new(ranges))
    }

    /// `ranges`, synchronous or with every value read prefetched through
    /// io_uring, with default settings otherwise.
    pub fn with_async_io(ranges: Vec<ScanRange>, use_async_io: bool) -> Self {
        MultiScanOptions::from(MultiScanArgs {
            use_async_io,
            ..MultiScanArgs::new(ranges)
        })
    }
}

/// What a scan did, for tests and benchmarks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MultiScanStats {
    /// Reads went through io_uring.
    pub io_uring: bool,
    /// Reads submitted.
    pub reads: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Reads that failed or came back short (served through the mapping).
    pub failed_reads: u64,
    /// Times the scan blocked on a read still in flight.
    pub waits: u64,
    /// Pages a value needed that were already resident (not read).
    pub resident_pages: u64,
    /// The `max_prefetch_size` budget ran out; the rest was read
    /// synchronously.
    pub prefetch_limited: bool,
    /// Stored values served from the scan's own read buffers
    /// ([`BufferMode::Direct`] and [`BufferMode::Owned`]).
    pub buffered_values: u64,
    /// Windows of entries that [`BufferMode::Auto`] advised into the page
    /// cache instead of reading directly, because their bytes were read
    /// recently.
    pub readmitted_windows: u64,
}

struct RangeState {
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
    /// The intersection with the read bounds is empty.
    empty: bool,
    window_cap: usize,
    cur: Window,
    next: Option<Window>,
    pos: usize,
}

struct Io {
    reader: Reader,
    planner: Planner,
    extents: Vec<Extent>,
    /// This scan's planned, unconsumed bytes in the process-wide budget.
    held: ahead::Held,
    /// First range whose first window is not planned yet.
    next_plan: usize,
    buffered_values: u64,
}

impl Io {
    /// Plans window `w`'s reads and queues them (`urgent`: ahead of the
    /// reads of other ranges).
    fn plan(&mut self, w: &mut Window, segs: &SegTable, urgent: bool) {
        let base = self.extents.len();
        self.planner.plan(w, segs, base, &mut self.extents);
        w.ext_lo = base;
        w.ext_hi = self.extents.len();
        let ids: Box<dyn Iterator<Item = usize>> = if urgent {
            Box::new((base..w.ext_hi).rev())
        } else {
            Box::new(base..w.ext_hi)
        };
        for id in ids {
            if let Some(x) = self.extents.get(id) {
                if let Some(seg) = segs.segs.get(x.seg as usize) {
                    self.reader.enqueue(id, seg, x, urgent);
                    self.held.add(u64::from(x.len));
                }
            }
        }
    }
}

/// A running MultiScan. Consume it range by range ([`Self::next_range`]),
/// then entry by entry ([`Self::next_entry`]).
pub struct MultiScanIter<'a> {
    t1: &'a T1,
    log: &'a Log,
    cursor: Cursor<'a>,
    /// The one view every range reads (design.md §8).
    _view: crate::t1::ReadReg<'a>,
    segs: SegTable,
    ranges: Vec<RangeState>,
    io: Option<Io>,
    idx: usize,
    started: bool,
    /// Index in the current window of the current entry.
    at: Option<usize>,
    verify: bool,
    /// `io_coalesce_threshold`, for the synchronous path's readahead.
    coalesce: u64,
    /// `max_prefetch_ahead`, resolved.
    ahead_limit: u64,
}

impl Drop for MultiScanIter<'_> {
    fn drop(&mut self) {
        // What this scan planned counts toward re-reading the log.
        if let Some(io) = &self.io {
            self.log.scanned.add(io.planner.scanned);
            self.log.scanned.stop();
        }
    }
}

fn max_lower(a: &[u8], b: Option<&[u8]>) -> Vec<u8> {
    b.map_or(a, |b| a.max(b)).to_vec()
}

fn min_upper(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y).to_vec()),
        (x, y) => x.or(y).map(<[u8]>::to_vec),
    }
}

#[cfg(feature = "internals")]
/// Starts a MultiScan over the engine's T1 and value log. With
/// `use_async_io` (and io_uring available) each range's first window is
/// resolved and its reads submitted before the next range is resolved, all
/// before this returns. [`BufferMode::Auto`] is resolved by the size of the
/// log (see [`BufferMode`]).
pub fn multi_scan<'a>(
    t1: &'a T1,
    log: &'a Log,
    opts: &MultiScanOptions,
) -> Result<MultiScanIter<'a>> {
    multi_scan_with(t1, log, opts, BufferMode::Auto, None)
}

/// [`multi_scan`], with `default_mode` used when `opts.buffer_mode` is
/// [`BufferMode::Auto`] (the engine passes `Options::use_direct_reads`).
pub(crate) fn multi_scan_with<'a>(
    t1: &'a T1,
    log: &'a Log,
    opts: &MultiScanOptions,
    default_mode: BufferMode,
    at: Option<u64>,
) -> Result<MultiScanIter<'a>> {
    let args = &opts.args;
    args.validate()?;
    let view = crate::t1::ReadReg::new(t1.versions(), at);
    let ranges = args
        .ranges
        .iter()
        .map(|r| {
            let lo = max_lower(
                r.start.as_deref().unwrap_or_default(),
                opts.lower_bound.as_deref(),
            );
            let hi = min_upper(r.limit.as_deref(), opts.upper_bound.as_deref());
            let empty = hi.as_deref().is_some_and(|h| lo.as_slice() >= h);
            RangeState {
                window_cap: if r.limit.is_some() {
                    BOUNDED_WINDOW
                } else {
                    UNBOUNDED_WINDOW
                },
                lo,
                hi,
                empty,
                cur: Window::default(),
                next: None,
                pos: 0,
            }
        })
        .collect();
    let io = if args.use_async_io && !opts.disable_io_uring {
        let others = log.scanned.start();
        let (mode, admit) = opts.buffer_mode.or(default_mode).resolve(log, others);
        let io = Reader::new(mode).map(|reader| Io {
            planner: Planner::new(
                args.io_coalesce_threshold,
                args.max_prefetch_size,
                reader.keeps_buffers(),
                mode == uring::Mode::Direct,
                admit.is_some(),
                admit.is_some_and(|size| admission::rereading(&log.scanned, size)),
            ),
            reader,
            extents: Vec::new(),
            held: ahead::Held::default(),
            next_plan: 0,
            buffered_values: 0,
        });
        if io.is_none() {
            log.scanned.stop();
        }
        io
    } else {
        None
    };
    let mut ms = MultiScanIter {
        t1,
        log,
        cursor: t1.cursor_at(view.at),
        _view: view,
        segs: SegTable::default(),
        ranges,
        io,
        idx: 0,
        started: false,
        at: None,
        verify: opts.verify_checksums,
        coalesce: args.io_coalesce_threshold,
        ahead_limit: match opts.max_prefetch_ahead {
            0 => ahead::limit(),
            n => n,
        },
    };
    if ms.io.is_some() {
        // Reads go out while later ranges are still being resolved:
        // submitting once after all 15 ranges of the shape left the
        // disk idle for the whole resolve (~125 us of ~1.1 ms per scan).
        // Reads into owned buffers are submitted range by range. Advice is
        // submitted after ranges 1, 3, 7, 15, ...: each submission wakes
        // io-wq workers and kicks the virtio queue (a VM exit here), and
        // batching them measured +12% at 1 thread and +5% at 2, while
        // batching direct reads made 2-thread runs bimodal (1000 or 1600
        // ops/s).
        let each = ms.io.as_ref().is_some_and(|io| io.reader.keeps_buffers());
        let n = ms.ranges.len();
        for r in 0..n {
            let w = ms.resolve_window(r, None)?;
            if let Some(rs) = ms.ranges.get_mut(r) {
                rs.cur = w;
            }
            if each || (r + 2).is_power_of_two() || r + 1 == n {
                ms.plan_upto(r + 1);
            }
        }
    }
    Ok(ms)
}

impl<'a> MultiScanIter<'a> {
    /// Resolves a window of range `r` after `after` against T1.
    fn resolve_window(&mut self, r: usize, after: Option<&[u8]>) -> Result<Window> {
        let Some(rs) = self.ranges.get(r) else {
            return Ok(Window::default());
        };
        if rs.empty {
            return Ok(Window::default());
        }
        plan::resolve(
            &mut self.cursor,
            self.t1,
            self.log,
            &mut self.segs,
            &rs.lo,
            after,
            rs.hi.as_deref(),
            rs.window_cap,
            ahead::window_bytes(self.ahead_limit),
        )
    }

    /// Resolves a window of the current range after `after` and starts
    /// reading it: with io_uring its reads go to the front of the queue,
    /// without, its pages are advised.
    fn fetch_window(&mut self, r: usize, after: Option<&[u8]>) -> Result<Window> {
        let mut w = self.resolve_window(r, after)?;
        match self.io.as_mut() {
            Some(io) => {
                io.plan(&mut w, &self.segs, true);
                io.reader.flush();
            }
            None => readahead::advise_window(&w, &self.segs, self.coalesce),
        }
        Ok(w)
    }

    /// Plans the first windows of the ranges from the current one on: the
    /// current range always, later ones while the process-wide prefetch
    /// budget has room (module `ahead`).
    fn plan_ahead(&mut self) {
        self.plan_upto(self.ranges.len());
    }

    /// [`Self::plan_ahead`] for the ranges before `end` only (the prepare
    /// step plans each range as soon as it is resolved), then submits.
    fn plan_upto(&mut self, end: usize) {
        let Some(io) = self.io.as_mut() else {
            return;
        };
        // Ranges skipped over are never planned.
        io.next_plan = io.next_plan.max(self.idx);
        while io.next_plan < end.min(self.ranges.len())
            && (io.next_plan == self.idx || ahead::has_room(self.ahead_limit))
        {
            let r = io.next_plan;
            let Some(rs) = self.ranges.get_mut(r) else {
                break;
            };
            io.next_plan += 1;
            io.plan(&mut rs.cur, &self.segs, r == self.idx);
        }
        io.reader.flush();
    }

    fn release(&mut self, w: &Window) {
        if let Some(io) = self.io.as_mut() {
            for id in w.ext_lo..w.ext_hi {
                io.reader.release(id);
                if let Some(x) = io.extents.get(id) {
                    io.held.sub(u64::from(x.len));
                }
            }
        }
    }

    /// Moves to the next range; `Ok(false)` once every range is done.
    /// Entries left unread in the current range are skipped.
    pub fn next_range(&mut self) -> Result<bool> {
        if self.started {
            if let Some(rs) = self.ranges.get_mut(self.idx) {
                let cur = std::mem::take(&mut rs.cur);
                let next = rs.next.take();
                self.release(&cur);
                if let Some(n) = next {
                    self.release(&n);
                }
            }
            self.idx += 1;
        }
        self.started = true;
        self.at = None;
        let Some(rs) = self.ranges.get(self.idx) else {
            return Ok(false);
        };
        if self.io.is_some() {
            self.plan_ahead();
        } else if !rs.empty {
            // Synchronous path: resolve on entry to the range.
            let w = self.fetch_window(self.idx, None)?;
            if let Some(rs) = self.ranges.get_mut(self.idx) {
                rs.cur = w;
                rs.pos = 0;
            }
        }
        Ok(true)
    }

    /// Moves to the next entry of the current range; `Ok(false)` at its end.
    pub fn next_entry(&mut self) -> Result<bool> {
        self.at = None;
        if !self.started {
            return Ok(false);
        }
        let r = self.idx;
        let Some(rs) = self.ranges.get(r) else {
            return Ok(false);
        };
        let (len, pos) = (rs.cur.items.len(), rs.pos);
        // Keep the queue full: resolve the following window halfway. (The
        // resume key is copied only then, not on every entry.)
        let due = rs.next.is_none() && (pos >= len || self.io.is_some() && pos * 2 >= len);
        if let Some(after) = rs.cur.resume.as_ref().filter(|_| due).cloned() {
            let w = self.fetch_window(r, Some(&after))?;
            if let Some(rs) = self.ranges.get_mut(r) {
                rs.next = Some(w);
            }
        }
        if pos >= len {
            let Some(rs) = self.ranges.get_mut(r) else {
                return Ok(false);
            };
            let Some(next) = rs.next.take() else {
                return Ok(false);
            };
            let old = std::mem::replace(&mut rs.cur, next);
            rs.pos = 0;
            self.release(&old);
            self.plan_ahead();
            return self.next_entry();
        }
        if let Some(rs) = self.ranges.get_mut(r) {
            rs.pos += 1;
        }
        self.at = Some(pos);
        let item = self
            .ranges
            .get(r)
            .and_then(|rs| rs.cur.items.get(pos))
            .copied();
        if let (
            Some(io),
            Some(Item {
                val: Val::Stored { ext, ext_last, .. },
                ..
            }),
        ) = (self.io.as_mut(), item)
        {
            if ext != NO_EXT {
                for id in ext..=ext_last {
                    io.reader.wait(id as usize);
                }
            }
        }
        self.prefetch(r, pos + 2);
        self.verify_current(item)?;
        if self.buffered(0).is_some() {
            if let Some(io) = self.io.as_mut() {
                io.buffered_values += 1;
            }
        }
        Ok(true)
    }

    fn verify_current(&mut self, item: Option<Item>) -> Result<()> {
        if self.verify {
            if let Some(Item {
                val: Val::Stored { seg, off, .. },
                ..
            }) = item
            {
                if let Some(s) = self.segs.segs.get(seg as usize) {
                    let want = match self.buffered(VALUE_CRC_LEN) {
                        Some(b) => crate::t2::value_crc::parse(b),
                        None => crate::t2::value_crc::stored(s, off as usize),
                    };
                    if let Err(e) =
                        crate::t2::value_crc::verify_against(s, off as usize, want, self.value())
                    {
                        // Never expose the damaged bytes.
                        self.at = None;
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    fn item(&self) -> Option<(&Window, &Item)> {
        let rs = self.ranges.get(self.idx)?;
        let it = rs.cur.items.get(self.at?)?;
        Some((&rs.cur, it))
    }

    /// Index of the current range in `MultiScanArgs::ranges`.
    pub fn range_index(&self) -> usize {
        self.idx
    }

    /// Key of the current entry (empty when there is none).
    pub fn key(&self) -> &[u8] {
        self.item().map_or(&[], |(w, it)| w.key(it))
    }

    /// Value of the current entry (empty when there is none).
    pub fn value(&self) -> &[u8] {
        let Some((_, it)) = self.item() else {
            return &[];
        };
        match &it.val {
            Val::Inline { len, bytes } => bytes.get(..*len as usize).unwrap_or_default(),
            Val::Stored { seg, off, len, .. } => {
                if let Some(v) = self.buffered(0) {
                    return v;
                }
                self.segs
                    .segs
                    .get(*seg as usize)
                    .and_then(|s| s.bytes(*off as usize, *len as usize))
                    .unwrap_or_default()
            }
        }
    }

    /// The current stored value in its read buffer, preceded by `before`
    /// bytes of the record (its checksum), when the scan owns one.
    fn buffered(&self, before: usize) -> Option<&[u8]> {
        let (_, it) = self.item()?;
        self.buffer_of(it, before)
    }

    /// Stored value `it` in its read buffer, preceded by `before` bytes.
    fn buffer_of(&self, it: &Item, before: usize) -> Option<&[u8]> {
        let Val::Stored {
            off,
            len,
            ext,
            in_one: true,
            ..
        } = it.val
        else {
            return None;
        };
        let io = self.io.as_ref().filter(|io| io.reader.keeps_buffers())?;
        let x = io.extents.get(ext as usize)?;
        let buf = io.reader.buffer(ext as usize)?;
        let s = (u64::from(off) - x.start) as usize;
        buf.get(s.checked_sub(before)?..s + len as usize)
    }

    /// Starts loading the first bytes (checksum included) of entry `pos`
    /// of range `r` into the CPU cache, so that checking it two entries
    /// from now does not stall on memory: freshly read values are never
    /// cached (+3% cold, 1 thread, 4 interleaved runs; warm +0-5%).
    fn prefetch(&self, r: usize, pos: usize) {
        let Some(it) = self.ranges.get(r).and_then(|rs| rs.cur.items.get(pos)) else {
            return;
        };
        let Val::Stored { seg, off, len, .. } = it.val else {
            return;
        };
        // From its read buffer, or else (resident, or advised into the
        // page cache) through the mapping.
        let bytes = self.buffer_of(it, VALUE_CRC_LEN).or_else(|| {
            self.segs.segs.get(seg as usize).and_then(|s| {
                s.bytes(
                    (off as usize).saturating_sub(VALUE_CRC_LEN),
                    len as usize + VALUE_CRC_LEN,
                )
            })
        });
        if let Some(b) = bytes {
            crate::prefetch::slice(b.get(..PREFETCH_BYTES).unwrap_or(b));
        }
    }

    /// What the scan did so far.
    pub fn stats(&self) -> MultiScanStats {
        match &self.io {
            None => MultiScanStats::default(),
            Some(io) => MultiScanStats {
                io_uring: true,
                reads: io.reader.stats.submitted,
                bytes: io.reader.stats.bytes,
                failed_reads: io.reader.stats.failed,
                waits: io.reader.stats.waits,
                resident_pages: io.planner.resident_pages,
                prefetch_limited: io.planner.limited,
                buffered_values: io.buffered_values,
                readmitted_windows: io.planner.readmitted,
            },
        }
    }
}
