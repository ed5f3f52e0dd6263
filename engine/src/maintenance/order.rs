//! Key order in T2: rewriting scattered values so that a key range's values
//! lie back to back. Values land in the log in write order, so after a
//! random-order load a scan of 100 keys reads 100 pages; once ordered it
//! reads one extent. Three callers: `compact_range` (RocksDB's `CompactRange`,
//! every value of the range not yet packed in key order), the background
//! pass that runs once writes go quiet (windows that are mostly not packed
//! in key order; see [`BACKGROUND_MIN_SCATTERED`]), as RocksDB's automatic
//! compaction leaves SST files sorted without being asked, and sorted runs
//! while writes go on (`runs.rs`, which leaves key-order writes alone).

use std::time::Instant;

use super::mover::Mover;
use super::{checkpoint_and_retire, count, cycle_budget, DefragReport};
use crate::error::Result;
use crate::index::{Entry, Locator, Payload};
use crate::state::Inner;
use crate::stats::Counters;

/// What a walk keeps and what it moves.
#[derive(Clone, Copy)]
pub(crate) struct Policy {
    /// A value starting at most this many bytes after the end of the
    /// previous value of the walk, in the same segment, continues its run.
    max_gap: u64,
    /// A gap of at most this fraction of the value that follows it also
    /// continues the run: packing would save less than that share of a
    /// scan's bytes, not worth rewriting the values for.
    max_gap_share: f64,
    /// A window's scattered values move only when they are at least this
    /// fraction of it.
    min_scattered: f64,
    /// Runs of [`IN_ORDER_RUN`] values stay; when false, every selected
    /// value moves.
    keep_runs: bool,
    /// How many runs the walk follows at once. Several writers appending
    /// keys in order interleave in the log: in key order their values
    /// alternate between one ascending run per writer, each with a few
    /// records of the others in its gaps. Followed one at a time, every
    /// step breaks the run and all of it moves.
    chains: usize,
}

/// A merge of sorted runs while writes go on: runs whose gaps hold record
/// headers and keys count as in order, and only windows that are mostly
/// scattered move (see [`BACKGROUND_MIN_SCATTERED`]). One run at a time:
/// the runs being merged are each in key order, and followed side by side
/// they would all stay where they are.
pub(crate) const WHILE_WRITING: Policy = Policy {
    max_gap: 4096,
    max_gap_share: 0.0,
    min_scattered: BACKGROUND_MIN_SCATTERED,
    keep_runs: true,
    chains: 1,
};

/// A tail sort while writes go on ([`WHILE_WRITING`]'s rule), following up
/// to [`TAIL_CHAINS`] runs at once, so that a key-order load is not copied
/// while it is being written, by one writer or by several (copying it
/// would double `fillseq`'s writes; a 4-thread `insert` of 1 KiB values
/// spent a third of its samples rewriting its own key-order tail).
pub(crate) const TAIL_WHILE_WRITING: Policy = Policy {
    chains: TAIL_CHAINS,
    ..WHILE_WRITING
};

/// Interleaved key-order runs a tail sort leaves in place: one per writer
/// of a parallel key-order load, up to this many. A range then reads one
/// extent per run kept, so they count as that many sorted runs.
pub(crate) const TAIL_CHAINS: usize = 8;

/// The pass once writes go quiet, RocksDB's automatic compaction: values in
/// key order count as in order only when packed, so a key-order load is
/// packed once, in idle time, and a scan of it then reads a fifth fewer
/// bytes (512-byte values, 64-byte keys). Windows that are mostly in
/// order still stay (see [`BACKGROUND_MIN_SCATTERED`]), so sparse
/// overwrites of a packed load cost nothing. A key-order run whose
/// record overhead is below an eighth of its values ([`QUIET_GAP_SHARE`])
/// is left as written.
const WHEN_QUIET: Policy = Policy {
    max_gap: crate::t2::value_crc::VALUE_CRC_LEN as u64,
    max_gap_share: QUIET_GAP_SHARE,
    min_scattered: BACKGROUND_MIN_SCATTERED,
    keep_runs: true,
    chains: 1,
};

/// `compact_range`, a full rewrite asked for by the user: only values
/// already packed back to back (nothing but their checksum between them)
/// stay, so a key-order load is packed too and a scan of it reads a fifth
/// fewer bytes (512-byte values, 64-byte keys; nearly half with 100-byte
/// values and 16-byte keys).
const COMPACT_RANGE: Policy = Policy {
    max_gap: crate::t2::value_crc::VALUE_CRC_LEN as u64,
    max_gap_share: 0.0,
    min_scattered: 0.0,
    keep_runs: true,
    chains: 1,
};

/// Every selected value moves, in key order (a close that cut a sort
/// short, `runs.rs`).
pub(crate) const EVERY: Policy = Policy {
    max_gap: 0,
    max_gap_share: 0.0,
    min_scattered: 0.0,
    keep_runs: false,
    chains: 1,
};

/// The idle pass packs a key-order run only when its gaps (record header,
/// key) are more than this share of its values. Packing a 1M x 1 KiB
/// `fillseq` load (77-byte gaps, 7.5%) rewrote 1 GB and checkpointed
/// T1 every 0.7 s for a few seconds of every later open, while the read
/// benchmarks measured it; a 512-byte value with a 64-byte key (24%)
/// still packs.
const QUIET_GAP_SHARE: f64 = 0.125;

/// Runs of at least this many values already in key order stay where they
/// are; shorter ones move, so that a segment of scattered values empties
/// completely and can be retired.
const IN_ORDER_RUN: usize = 16;
/// Stored values per decision window: the background pass judges (and
/// moves) scattered values a window at a time, which also bounds the keys
/// held in memory.
const WINDOW: usize = 4096;
/// The background pass moves a window's scattered values only when they
/// are at least this fraction of it. A random-order load is ~100%
/// scattered; a packed load with sparse overwrites is a few percent,
/// and rewriting those would cost a copy per overwrite for one saved
/// extent each.
pub(crate) const BACKGROUND_MIN_SCATTERED: f64 = 0.25;

type Held = (Vec<u8>, Locator, Entry);

/// A run of values lying back to back in one segment, as the walk follows
/// it.
struct Chain {
    /// The run's values, held until it proves long enough to keep.
    run: Vec<Held>,
    /// Segment and end offset of its last value.
    end: (u32, u64),
    keeping: bool,
    /// When the walk last extended it (values seen), for eviction.
    used: u64,
    /// The last [`RANGE`] of the walk (1-based) it kept a value in.
    counted_in: u64,
}

/// The walk counts the runs it keeps per this many values: about a short
/// scan's reach.
const RANGE: u64 = 64;

/// One walk of T1 in key order, classifying each stored value as in a
/// long run (kept) or scattered (moved, window by window).
struct Walk<'a> {
    mover: Mover<'a>,
    policy: Policy,
    /// The runs followed, at most `policy.chains`.
    chains: Vec<Chain>,
    /// Scattered values of the current window.
    scattered: Vec<Held>,
    seen: usize,
    kept: u64,
    /// Values observed so far (the chains' clock).
    clock: u64,
    /// Over every [`RANGE`] of the walk, the runs that kept a value in it.
    kept_in_ranges: u64,
}

impl<'a> Walk<'a> {
    fn new(inner: &'a Inner, policy: Policy) -> Walk<'a> {
        Walk {
            mover: Mover::new(inner),
            policy,
            chains: Vec::with_capacity(policy.chains.max(1)),
            scattered: Vec::new(),
            seen: 0,
            kept: 0,
            clock: 0,
            kept_in_ranges: 0,
        }
    }

    /// The chain `l` continues: same segment, at most the policy's gap past
    /// its end; the nearest of several.
    fn continued(&self, l: Locator) -> Option<usize> {
        let off = u64::from(l.offset);
        let p = self.policy;
        let mut best: Option<(usize, u64)> = None;
        for (i, c) in self.chains.iter().enumerate() {
            let (seg, end) = c.end;
            if seg != l.segment || off < end {
                continue;
            }
            let gap = off - end;
            let near = gap <= p.max_gap || gap as f64 <= p.max_gap_share * f64::from(l.len);
            if near && best.is_none_or(|(_, g)| gap < g) {
                best = Some((i, gap));
            }
        }
        best.map(|(i, _)| i)
    }

    fn observe(&mut self, key: &[u8], l: Locator, e: Entry) {
        self.clock += 1;
        let i = match self.continued(l) {
            Some(i) => i,
            None if self.chains.len() < self.policy.chains.max(1) => {
                self.chains.push(Chain {
                    run: Vec::new(),
                    end: (0, 0),
                    keeping: false,
                    used: 0,
                    counted_in: 0,
                });
                self.chains.len() - 1
            }
            None => {
                // The run followed longest ago ends, and `l` starts anew.
                let i = (0..self.chains.len())
                    .min_by_key(|&i| self.chains.get(i).map_or(0, |c| c.used))
                    .unwrap_or(0);
                self.end_chain(i);
                i
            }
        };
        self.seen += 1;
        let Some(c) = self.chains.get_mut(i) else {
            return;
        };
        c.end = (l.segment, u64::from(l.offset) + u64::from(l.len));
        c.used = self.clock;
        if c.keeping {
            self.kept += 1;
        } else {
            c.run.push((key.to_vec(), l, e));
            if self.policy.keep_runs && c.run.len() >= IN_ORDER_RUN {
                self.kept += c.run.len() as u64;
                c.run.clear();
                c.keeping = true;
            }
        }
        let range = (self.clock - 1) / RANGE + 1;
        if c.keeping && c.counted_in != range {
            c.counted_in = range;
            self.kept_in_ranges += 1;
        }
    }

    /// Runs kept per [`RANGE`] of the walk, rounded: the extents a short
    /// range of what it walked reads, besides what it moved.
    fn runs_kept(&self) -> usize {
        let ranges = self.clock.div_ceil(RANGE).max(1);
        match self.kept_in_ranges {
            0 => 0,
            k => ((k as f64 / ranges as f64).round() as usize).max(1),
        }
    }

    /// Chain `i`'s run ends; if it was too short to keep, its values are
    /// scattered.
    fn end_chain(&mut self, i: usize) {
        if let Some(c) = self.chains.get_mut(i) {
            self.scattered.append(&mut c.run);
            c.keeping = false;
            c.counted_in = 0;
        }
    }

    /// Every run ends (the walk does).
    fn end_runs(&mut self) {
        for i in 0..self.chains.len() {
            self.end_chain(i);
        }
    }

    /// Closes the window: moves its scattered values if there are enough.
    fn close_window(&mut self, rep: &mut DefragReport) -> Result<()> {
        let enough = self.scattered.len() as f64 >= self.policy.min_scattered * self.seen as f64;
        if enough {
            // Runs followed side by side end out of key order; the moved
            // values are packed in key order all the same.
            if self.chains.len() > 1 {
                self.scattered.sort_by(|a, b| a.0.cmp(&b.0));
            }
            for (k, l, e) in std::mem::take(&mut self.scattered) {
                self.mover.move_indexed(&k, l, e, rep)?;
            }
        } else {
            self.kept += self.scattered.len() as u64;
            self.scattered.clear();
        }
        self.seen = 0;
        Ok(())
    }
}

/// Where a walk stopped.
pub(crate) struct Step {
    pub rep: DefragReport,
    /// Values left in place (long runs, or windows not worth moving).
    pub kept: u64,
    /// The runs the walk kept in place side by side (`Walk::runs_kept`).
    pub runs_kept: usize,
    /// The key to resume from, or `None` once the range is done.
    pub resume: Option<Vec<u8>>,
}

/// Which stored values a walk looks at; the others are passed over as if
/// absent, so that the values a selection holds count as in order when
/// they lie back to back among themselves.
pub(crate) type Select<'s> = &'s dyn Fn(Locator) -> bool;

/// Every stored value.
pub(crate) fn every(_: Locator) -> bool {
    true
}

/// Walks `[begin, end)` and moves the selected values that lie scattered
/// by `policy`'s rule (see [`Walk`]) until the range ends, `budget` bytes
/// have moved, or `go_on` says stop (checked between windows). Does not
/// checkpoint.
pub(crate) fn walk_with(
    inner: &Inner,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
    policy: Policy,
    select: Select<'_>,
    budget: u64,
    go_on: &dyn Fn() -> bool,
) -> Result<Step> {
    let mut rep = DefragReport::default();
    let mut w = Walk::new(inner, policy);
    let mut cur = inner.t1.cursor();
    match begin {
        Some(b) => cur.seek(b),
        None => cur.seek_to_first(),
    }
    let mut resume = None;
    while cur.valid() && end.is_none_or(|e| cur.key() < e) {
        if w.seen >= WINDOW {
            w.close_window(&mut rep)?;
            // Values still gathered for a packed record count towards the
            // budget only once written: at most one record over.
            if rep.moved_bytes >= budget || !go_on() {
                resume = Some(cur.key().to_vec());
                break;
            }
        }
        let e = cur.entry();
        if let Payload::Stored(l) = e.payload {
            if select(l) {
                w.observe(cur.key(), l, e);
            }
        }
        cur.next();
    }
    w.end_runs();
    w.close_window(&mut rep)?;
    w.mover.flush(&mut rep)?;
    Ok(Step {
        rep,
        kept: w.kept,
        runs_kept: w.runs_kept(),
        resume,
    })
}

/// RocksDB's `CompactRange` for T2: rewrites the stored values of
/// `[begin, end)` in key order, packed. Runs of [`IN_ORDER_RUN`] or more
/// values already packed in key order are left in place, so a second call
/// costs a T1 walk and nothing more. Segments emptied by the rewrite are
/// retired by the closing checkpoint; until then T2 holds both copies of
/// what moved (up to 2x, as a RocksDB full compaction needs).
pub(crate) fn compact_range(
    inner: &Inner,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Result<DefragReport> {
    let _g = inner.defrag.lock();
    let t0 = Instant::now();
    let mut step = walk_with(inner, begin, end, COMPACT_RANGE, &every, u64::MAX, &|| true)?;
    checkpoint_and_retire(inner, &mut step.rep)?;
    finish(inner, "compact_range", &step, t0);
    Ok(step.rep)
}

/// One bounded step of the background pass from `from` (`None` = the
/// first key): moves at most a defragment cycle's budget, stops early once
/// `go_on` turns false, and checkpoints if anything moved so that emptied
/// segments go at once.
pub(crate) fn background_step(
    inner: &Inner,
    from: Option<&[u8]>,
    go_on: &dyn Fn() -> bool,
) -> Result<Step> {
    let _g = inner.defrag.lock();
    let t0 = Instant::now();
    let budget = cycle_budget(inner);
    let mut step = walk_with(inner, from, None, WHEN_QUIET, &every, budget, go_on)?;
    if step.rep.moved_values > 0 {
        checkpoint_and_retire(inner, &mut step.rep)?;
        finish(inner, "key order (background)", &step, t0);
    }
    Ok(step)
}

fn finish(inner: &Inner, what: &str, step: &Step, t0: Instant) {
    let rep = &step.rep;
    count(&inner.counters, rep);
    Counters::add(&inner.counters.ordered_values, rep.moved_values);
    inner.info.log(format_args!(
        "{what}: moved {} values ({} bytes) into key order, {} left in place, removed {} segments ({} bytes) in {:.3} ms{}",
        rep.moved_values,
        rep.moved_bytes,
        step.kept,
        rep.retired_segments.len(),
        rep.reclaimed_bytes,
        t0.elapsed().as_secs_f64() * 1e3,
        if step.resume.is_some() { "; continues" } else { "" }
    ));
}

/// The background pass from the first key to the last, step after step,
/// without waiting for quiet ([`crate::Db::wait_for_compaction`]).
pub(crate) fn order_all(inner: &Inner) -> Result<DefragReport> {
    let mut total = DefragReport::default();
    let mut from: Option<Vec<u8>> = None;
    loop {
        let step = background_step(inner, from.as_deref(), &|| true)?;
        total.absorb(step.rep);
        match step.resume {
            Some(k) => from = Some(k),
            None => return Ok(total),
        }
    }
}

/// When the background pass runs: once writes have been quiet for
/// `Options::order_idle_ms`, and again after each later burst of writes.
/// A pass interrupted by writes resumes where it stopped.
pub(crate) struct Schedule {
    quiet: super::quiet::Quiet,
    /// The write count a finished pass covered (`None`: no pass yet since
    /// open, so one runs once to order what an earlier process loaded).
    done_at: Option<u64>,
    started_at: u64,
    /// The active segment when the pass under way began.
    began: u32,
    /// Set when a pass has just finished: the segment it began with.
    finished: Option<u32>,
    resume: Option<Vec<u8>>,
}

impl Schedule {
    pub(crate) fn new(idle_ms: u64) -> Schedule {
        Schedule {
            quiet: super::quiet::Quiet::new(idle_ms),
            done_at: None,
            started_at: 0,
            began: 0,
            finished: None,
            resume: None,
        }
    }

    /// The segment active when the pass that has just finished began, once.
    pub(crate) fn finished(&mut self) -> Option<u32> {
        self.finished.take()
    }

    /// Runs one step if the pass is due; returns whether it ran. The step
    /// ends early when a write arrives or `stopping` turns true (close
    /// must not wait for a whole step).
    pub(crate) fn tick(
        &mut self,
        inner: &Inner,
        stopping: &(dyn Fn() -> bool + Sync),
    ) -> Result<bool> {
        let Some(writes) = self.quiet.quiet(inner) else {
            return Ok(false);
        };
        if self.done_at == Some(writes) {
            return Ok(false);
        }
        if self.resume.is_none() {
            self.started_at = writes;
            self.began = inner.log.active_id();
        }
        let from = self.resume.take();
        let go_on = || inner.counters.writes.get() == writes && !stopping();
        let step = super::prio::niced(inner.opts.maintenance_nice, || {
            background_step(inner, from.as_deref(), &go_on)
        })?;
        match step.resume {
            Some(k) => self.resume = Some(k),
            None => {
                self.done_at = Some(self.started_at);
                self.finished = Some(self.began);
            }
        }
        Ok(true)
    }
}
