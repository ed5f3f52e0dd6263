//! Online maintenance: defragment cycles, segment retirement, and the
//! background thread that triggers checkpoints and defragment.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

mod mover;
mod order;
pub(crate) mod prio;
mod quiet;
pub(crate) mod runs;

pub(crate) use order::{compact_range, order_all};

use crate::apply::relocation_old;
use crate::batch::{BatchIter, BatchOp};
use crate::error::{Error, Result};
use crate::index::Payload;
use crate::state::{Inner, LOG_PER_SNAPSHOT};
use crate::stats::Counters;
use crate::t2::record::{split_lsn, Kind, HEADER_LEN};
use crate::t2::scan;
use crate::t2::segment::Segment;
use crate::t2::value_crc::VALUE_CRC_LEN;
use mover::Mover;

/// What one defragment cycle did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefragReport {
    /// Segments whose live values were relocated.
    pub compacted_segments: Vec<u32>,
    /// Values relocated.
    pub moved_values: u64,
    /// Key and value bytes relocated.
    pub moved_bytes: u64,
    /// Segment files removed.
    pub retired_segments: Vec<u32>,
    /// Bytes of the removed files.
    pub reclaimed_bytes: u64,
}

impl DefragReport {
    /// Adds what `other` did.
    pub(crate) fn absorb(&mut self, other: DefragReport) {
        self.compacted_segments.extend(other.compacted_segments);
        self.moved_values += other.moved_values;
        self.moved_bytes += other.moved_bytes;
        self.retired_segments.extend(other.retired_segments);
        self.reclaimed_bytes += other.reclaimed_bytes;
    }
}

fn live(s: &Segment) -> u64 {
    s.live.load(Ordering::Relaxed).max(0) as u64
}

fn garbage_ratio(s: &Segment) -> f64 {
    1.0 - live(s) as f64 / s.size().max(1) as f64
}

/// Under space pressure, segments with this much garbage are compacted
/// too. Uniform overwrites age every segment at once: by the time the first
/// reaches `defrag_garbage_ratio` = 0.5, T2 is already near 2x the live
/// bytes, so near the limit defragment must take leaner segments.
const PRESSURE_GARBAGE_RATIO: f64 = 0.2;

/// T2's size over its live bytes, the measure the throttle and pressure
/// mode act on; 0 for a log of at most two segments (mostly its first
/// segments: nothing to reclaim) or with nothing live.
fn space_amplification(inner: &Inner) -> f64 {
    let total = inner.log.total_bytes();
    let live = inner.log.live_bytes();
    if live == 0 || total <= 2 * inner.log.segment_size() as u64 {
        0.0
    } else {
        total as f64 / live as f64
    }
}

/// T2 is past 70% of `max_space_amplification`: compact leaner segments
/// before the throttle (at 80%) has to slow writers.
fn under_pressure(inner: &Inner) -> bool {
    let limit = inner.opts.max_space_amplification;
    limit > 0.0 && space_amplification(inner) >= 0.7 * limit
}

/// Adds what a cycle, a range compaction or a checkpoint did to the
/// statistics.
fn count(c: &Counters, rep: &DefragReport) {
    Counters::add(&c.defrag_moved_bytes, rep.moved_bytes);
    Counters::add(&c.defrag_reclaimed_bytes, rep.reclaimed_bytes);
    Counters::add(
        &c.defrag_retired_segments,
        rep.retired_segments.len() as u64,
    );
}

/// Sealed segments worth compacting, most garbage first.
fn candidates(inner: &Inner) -> Vec<Arc<Segment>> {
    let active = inner.log.active_id();
    let mut min = inner.opts.defrag_garbage_ratio;
    if under_pressure(inner) {
        min = min.min(PRESSURE_GARBAGE_RATIO);
    }
    let mut c: Vec<Arc<Segment>> = inner
        .log
        .segments()
        .into_iter()
        .filter(|s| s.id < active && garbage_ratio(s) >= min)
        .collect();
    c.sort_by_key(|s| live(s));
    c
}

/// Relocates every live value of `seg`; stops early once nothing is live.
fn compact(inner: &Inner, seg: &Segment, rep: &mut DefragReport) -> Result<()> {
    let mut mover = Mover::new(inner);
    for f in scan::records(seg, 0) {
        if live(seg) == 0 {
            break;
        }
        let body = scan::body(seg, &f);
        let body_off = f.off + HEADER_LEN;
        let malformed = |what: &dyn std::fmt::Display| Error::in_record(&seg.path, f.off, what);
        match f.header.kind {
            Kind::Batch => {
                for op in BatchIter::over(body) {
                    let op = op.map_err(|e| malformed(&e))?;
                    if let BatchOp::Put {
                        key,
                        value,
                        value_offset,
                    } = op
                    {
                        mover.move_if_live(key, value, seg, body_off + value_offset, rep)?;
                    }
                }
            }
            Kind::Relocation => {
                let kl = f.header.count_or_key_len as usize;
                let old = relocation_old(&f.header);
                let (key, rest) = body.split_at(kl.min(body.len()));
                let value = rest.get(VALUE_CRC_LEN..).unwrap_or_default();
                debug_assert_eq!(old.len as usize, value.len());
                mover.move_if_live(key, value, seg, body_off + kl + VALUE_CRC_LEN, rep)?;
            }
            Kind::Packed | Kind::PackedPuts => {
                for e in crate::t2::packed::of_record(&f.header, body) {
                    let e = e.map_err(|e| malformed(&e))?;
                    let end = e.value_off + e.old.len as usize;
                    let value = body.get(e.value_off..end).unwrap_or_default();
                    mover.move_if_live(e.key, value, seg, body_off + e.value_off, rep)?;
                }
            }
            Kind::Seal | Kind::Pad => {}
        }
    }
    mover.flush(rep)
}

/// Removes sealed segments that held no live value before a checkpoint
/// that starts now, once that checkpoint has made them unnecessary for
/// recovery. The order matters: drain in-flight writers, observe "no live
/// value", then checkpoint, so the snapshot cannot point into them.
pub(crate) fn checkpoint_and_retire(inner: &Inner, rep: &mut DefragReport) -> Result<()> {
    // Barrier: a writer that reserved space in a segment before it was
    // sealed may not have added its live bytes yet; it holds the gate until
    // it has. After this, sealed segments' live counts only go down.
    // An open unlogged region is sealed too: its segment may be below the
    // active one, and a put into it after `empty` was taken would be lost.
    {
        let _g = inner.gate.write();
        inner.unlogged.seal(inner)?;
    }
    let active = inner.log.active_id();
    let empty: Vec<Arc<Segment>> = inner
        .log
        .segments()
        .into_iter()
        .filter(|s| s.id < active && live(s) == 0)
        .collect();
    let p = inner.checkpoint()?;
    let (pseg, _) = split_lsn(p);
    let mut ids: Vec<u32> = empty.iter().map(|s| s.id).filter(|&id| id < pseg).collect();
    // Old versions a snapshot reads point into segments whose live count
    // no longer includes them: keep every segment while any is held. The
    // writes that emptied these segments are made visible first, so a
    // snapshot taken after the check reads their versions, not the ones
    // they replaced.
    let vs = inner.t1.versions();
    vs.wait_in_flight();
    vs.prune();
    if vs.oldest().is_some() || !vs.store_is_empty() {
        let pinned: u64 = empty
            .iter()
            .filter(|s| ids.contains(&s.id))
            .map(|s| s.size() as u64)
            .sum();
        inner
            .snapshot_pinned_bytes
            .store(pinned, std::sync::atomic::Ordering::Relaxed);
        ids.clear();
    } else {
        inner
            .snapshot_pinned_bytes
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }
    crate::failpoint::hit("defragment.before_retire");
    for s in inner.log.retire(&ids)? {
        rep.retired_segments.push(s.id);
        rep.reclaimed_bytes += s.size() as u64;
    }
    Ok(())
}

/// Relocates the live values of every segment in `ids` found by one walk of
/// T1, stopping once `budget` bytes moved. Cheaper than walking the
/// segments' records when they hold many more records than T1 has entries,
/// since each record would cost a T1 lookup.
fn compact_by_index_walk(
    inner: &Inner,
    ids: &HashSet<u32>,
    budget: u64,
    rep: &mut DefragReport,
) -> Result<()> {
    let mut mover = Mover::new(inner);
    let mut cur = inner.t1.cursor();
    cur.seek_to_first();
    while cur.valid() && rep.moved_bytes < budget {
        let e = cur.entry();
        if let Payload::Stored(l) = e.payload {
            if ids.contains(&l.segment) {
                mover.move_indexed(cur.key(), l, e, rep)?;
            }
        }
        cur.next();
    }
    mover.flush(rep)
}

/// The bytes one cycle (defragment, a step of the background key-order
/// pass, or of a merge of sorted runs) may move. Relocated copies exist
/// beside their originals until the cycle's checkpoint retires the old
/// segments, so a cycle may add up to its budget to T2: an eighth of the
/// live bytes keeps that transient at 0.125x (a cycle moving all 200 MB
/// live at once peaked at 2.9x). That checkpoint rewrites all of T1,
/// though, and at 50M keys a 256 MiB cycle would write 4.5 GB of snapshot
/// for it; so the budget is raised to [`LOG_PER_SNAPSHOT`] snapshots, as
/// for the automatic checkpoint (`Inner::checkpoint_due`), and the
/// transient then allowed up to a quarter of the live bytes.
fn cycle_budget(inner: &Inner) -> u64 {
    let cap = inner.opts.defrag_max_bytes_per_cycle;
    let snapshots = inner
        .snapshot_bytes
        .load(Ordering::Relaxed)
        .saturating_mul(LOG_PER_SNAPSHOT);
    let (limit, share) = if snapshots > cap {
        (snapshots, 4)
    } else {
        (cap, 8)
    };
    limit.min((inner.log.live_bytes() / share).max(inner.log.segment_size() as u64))
}

/// One defragment cycle (bounded by [`cycle_budget`]).
pub(crate) fn defragment(inner: &Inner) -> Result<DefragReport> {
    let _g = inner.defrag.lock();
    let t0 = Instant::now();
    let mut rep = DefragReport::default();
    let budget = cycle_budget(inner);
    let mut chosen = Vec::new();
    let mut planned = 0u64;
    for s in candidates(inner) {
        if live(&s) == 0 {
            continue;
        }
        if !chosen.is_empty() && planned + live(&s) > budget {
            break;
        }
        planned += live(&s);
        chosen.push(s);
    }
    // Walking a segment costs a T1 lookup per record; walking T1 costs one
    // step per entry. Pick the cheaper, estimating records from the average
    // live entry size.
    let entries = inner.t1.len().max(1) as u64;
    let avg = (inner.log.live_bytes() / entries).max(64);
    let records: u64 = chosen.iter().map(|s| s.size() as u64 / avg).sum();
    let walk_index = inner
        .opts
        .defrag_index_walk
        .unwrap_or(records > entries / 4);
    if walk_index && !chosen.is_empty() {
        let ids: HashSet<u32> = chosen.iter().map(|s| s.id).collect();
        compact_by_index_walk(inner, &ids, budget, &mut rep)?;
    } else {
        for s in &chosen {
            compact(inner, s, &mut rep)?;
        }
    }
    rep.compacted_segments = chosen.iter().map(|s| s.id).collect();
    checkpoint_and_retire(inner, &mut rep)?;
    Counters::add(&inner.counters.defrag_cycles, 1);
    count(&inner.counters, &rep);
    let names: Vec<String> = rep
        .retired_segments
        .iter()
        .map(|&i| crate::files::segment(i))
        .collect();
    inner.info.log(format_args!(
        "defragment: compacted {} segments ({}), moved {} values ({} bytes), removed {} segments ({} bytes) in {:.3} ms: [{}]",
        rep.compacted_segments.len(),
        if walk_index { "index walk" } else { "segment walk" },
        rep.moved_values,
        rep.moved_bytes,
        rep.retired_segments.len(),
        rep.reclaimed_bytes,
        t0.elapsed().as_secs_f64() * 1e3,
        names.join(" ")
    ));
    Ok(rep)
}

/// Whether space overhead calls for a defragment cycle: garbage in sealed
/// segments that still hold live values (segments with none are freed by
/// the next checkpoint anyway) and T2 larger than twice the live bytes.
fn defrag_wanted(inner: &Inner) -> bool {
    let total = inner.log.total_bytes();
    let live_all = inner.log.live_bytes();
    if total <= 2 * inner.log.segment_size() as u64 || total < live_all.saturating_mul(3) / 2 {
        return false;
    }
    candidates(inner).iter().any(|s| live(s) > 0)
}

type StopFlag = Arc<(Mutex<bool>, Condvar)>;
/// The body of a background thread: runs until the stop flag is set.
type Job = Box<dyn FnOnce(&Inner, &(Mutex<bool>, Condvar)) + Send>;

/// The background threads: `vmemkv-maint` (checkpoint by log bytes,
/// defragment by space), `vmemkv-segalloc` (spare segments, early
/// writeback) and `vmemkv-throttle` (write rate by space).
pub(crate) struct Background {
    stop: StopFlag,
    threads: Vec<JoinHandle<()>>,
    inner: Arc<Inner>,
}

impl Background {
    pub(crate) fn start(inner: Arc<Inner>) -> Result<Background> {
        let mut bg = Background {
            stop: Arc::new((Mutex::new(false), Condvar::new())),
            threads: Vec::new(),
            inner,
        };
        // Before any write can land: the first tail starts at open.
        let runs = runs::Runs::new(&bg.inner);
        let jobs: [(&str, Job); 3] = [
            ("vmemkv-maint", Box::new(move |i, s| run(i, s, runs))),
            ("vmemkv-segalloc", Box::new(preallocate)),
            ("vmemkv-throttle", Box::new(control_write_rate)),
        ];
        for (name, job) in jobs {
            let (inner, stop) = (bg.inner.clone(), bg.stop.clone());
            match std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    // A panic would otherwise end the thread unseen, and its work
                    // (defragment, spare segments, throttling) with it.
                    let run = std::panic::AssertUnwindSafe(|| job(&inner, &stop));
                    if let Err(p) = std::panic::catch_unwind(run) {
                        let msg = crate::bgerror::panic_message(&*p);
                        inner.background_failed(
                            &format!("background thread {name}"),
                            &Error::IoError(
                                format!(
                                    "panicked ({msg}); its work stops until the database is reopened"
                                )
                                .into(),
                            ),
                            true,
                        );
                    }
                }) {
                Ok(h) => bg.threads.push(h),
                Err(e) => {
                    // Stop the threads already started before failing.
                    bg.stop();
                    return Err(Error::io(format!("spawning thread {name}"), e));
                }
            }
        }
        Ok(bg)
    }

    /// Signals the threads and waits for them (an in-progress cycle finishes).
    pub(crate) fn stop(self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        self.inner.log.wake_spare_waiter();
        for t in self.threads {
            let _ = t.join();
        }
        if let Err(e) = self.inner.log.drop_spare() {
            self.inner.info.log(format_args!("close: {e}"));
        }
    }
}

/// Keeps empty segments ready (`Log::prepare_spare`) so rollovers never
/// wait for a file create and fsync, and starts writeback of each segment
/// once sealed.
fn preallocate(inner: &Inner, stop: &(Mutex<bool>, Condvar)) {
    let mut sealed_upto = inner.log.active_id();
    loop {
        if *stop.0.lock() {
            return;
        }
        // Spares first: a writer that fills the active segment before the
        // next exists waits for its create, and every writer with it (1 KB
        // `insert`: 34 waits of 77 ms in a 3 s run when the writeback below
        // went first).
        match inner.log.prepare_spare() {
            // Not niced: at nice 10 the writer reached the pages first and
            // `fillseq` gained nothing (431k / 421k against 437k / 438k).
            Ok(Some(seg)) => {
                seg.cache_ahead();
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                inner.background_failed("preallocating a segment", &e, false);
                let mut s = stop.0.lock();
                if !*s {
                    stop.1.wait_for(&mut s, Duration::from_secs(1));
                }
                continue;
            }
        }
        // A segment sealed since the last round: start its writeback now
        // rather than leaving it all to the next checkpoint's msync. One
        // per round, so that a rollover meanwhile finds its spare made
        // first (a 64 MiB writeback start takes 100 ms and more).
        if sealed_upto < inner.log.active_id() {
            if let Some(s) = inner.log.segment(sealed_upto) {
                s.start_writeback();
            }
            sealed_upto += 1;
            continue;
        }
        inner.log.wait_spare_needed(Duration::from_millis(200));
    }
}

/// Sets the write rate every tick from T2's space amplification (module
/// `throttle`). Its own thread, because a defragment cycle keeps the
/// maintenance thread busy for seconds: the rate must adapt meanwhile.
fn control_write_rate(inner: &Inner, stop: &(Mutex<bool>, Condvar)) {
    let every = Duration::from_millis(inner.opts.maintenance_interval_ms.clamp(10, 1000));
    let mut ctl = crate::state::throttle::Controller::default();
    let mut was = 0u64;
    loop {
        {
            let mut s = stop.0.lock();
            if *s {
                inner.throttle.set_rate(0);
                return;
            }
            stop.1.wait_for(&mut s, every);
        }
        let total = inner.log.total_bytes();
        let amp = space_amplification(inner);
        let appended = inner.log.appended.get();
        let rate = ctl.tick(
            &inner.throttle,
            amp,
            appended,
            inner.opts.max_space_amplification,
        );
        if (rate == 0) != (was == 0) {
            if rate > 0 {
                inner.info.log(format_args!(
                    "write throttle: on at {rate} bytes/s, T2 {total} bytes = {amp:.2}x live"
                ));
            } else {
                inner.info.log(format_args!(
                    "write throttle: off, T2 {total} bytes = {amp:.2}x live"
                ));
            }
        }
        was = rate;
    }
}

/// The nice value for the next background task: the configured one, or 0
/// once T2 has grown past 2x the live bytes (the space target), so that
/// defragment catches up even when writers keep every core busy (a niced
/// thread would starve).
fn urgency_nice(inner: &Inner) -> i32 {
    let live = inner.log.live_bytes();
    let total = inner.log.total_bytes();
    if inner.throttle.rate() > 0 || live > 0 && total > live.saturating_mul(2) {
        0
    } else {
        inner.opts.maintenance_nice
    }
}

fn run(inner: &Inner, stop: &(Mutex<bool>, Condvar), mut runs: runs::Runs) {
    let every = Duration::from_millis(inner.opts.maintenance_interval_ms);
    let mut order = order::Schedule::new(inner.opts.order_idle_ms);
    let mut merge = quiet::MergeWhenQuiet::new(inner.opts.merge_idle_ms);
    // Sorted runs and defragment take turns when both are due: a run
    // cannot wait for defragment's cycles during a long random load (the
    // unsorted tail at its end grew to 40% of it), and defragment cannot
    // wait for runs that come due again as soon as one ends.
    let mut sorted_last = false;
    let stopping = || *stop.0.lock();
    let go_on = || !stopping();
    loop {
        {
            let mut s = stop.0.lock();
            if *s {
                break;
            }
            stop.1.wait_for(&mut s, every);
            if *s {
                break;
            }
        }
        if runs.due(inner) && !(sorted_last && defrag_wanted(inner)) {
            sorted_last = true;
            if let Err(e) = prio::niced(urgency_nice(inner), || runs.tick(inner, &go_on)) {
                inner.background_failed("background sorted run", &e, true);
            }
            continue;
        }
        sorted_last = false;
        if defrag_wanted(inner) {
            if let Err(e) = prio::niced(urgency_nice(inner), || defragment(inner)) {
                inner.background_failed("background defragment", &e, true);
            }
        } else if inner.checkpoint_due() {
            let mut rep = DefragReport::default();
            let res = prio::niced(inner.opts.maintenance_nice, || {
                checkpoint_and_retire(inner, &mut rep)
            });
            match res {
                Ok(()) if !rep.retired_segments.is_empty() => {
                    count(&inner.counters, &rep);
                    inner.info.log(format_args!(
                        "checkpoint: removed {} segments without live values ({} bytes)",
                        rep.retired_segments.len(),
                        rep.reclaimed_bytes
                    ));
                }
                Ok(()) => {}
                Err(e) => inner.background_failed("background checkpoint", &e, true),
            }
        } else {
            let ordered = order.tick(inner, &stopping);
            if let Some(began) = order.finished() {
                runs.ordered(inner, began);
            }
            match ordered {
                Ok(true) => {}
                // The key-order pass first: it writes, and its relocations
                // land in the append regions this merge empties.
                Ok(false) => {
                    merge.tick(inner, &stopping);
                }
                Err(e) => inner.background_failed("background key ordering", &e, true),
            }
        }
    }
    runs.close(inner);
}

/// T1's forced merge of every shard (drops tombstones).
pub(crate) fn reorganize(inner: &Inner) {
    let t0 = Instant::now();
    inner.t1.reorganize_all();
    crate::failpoint::hit("reorganize.merged");
    let ns = t0.elapsed().as_nanos() as u64;
    Counters::add(&inner.counters.reorganizes, 1);
    Counters::set(&inner.counters.reorganize_last_ns, ns);
    Counters::add(&inner.counters.reorganize_total_ns, ns);
    inner
        .info
        .log(format_args!("reorganize: {:.3} ms", ns as f64 / 1e6));
}
