//! Sorted runs while writes go on. Values land in the log in write order,
//! and the key-order pass (module `order`) only runs once writes go quiet,
//! so a random load scanned as soon as it ends read one page per value:
//! 124 ops/s against RocksDB's 658 on the MultiScan issue's shape. Here,
//! each time [`Options::sorted_run_bytes`] of values have been written
//! since the last run, the maintenance thread rewrites them, in key order
//! and packed, as a new run (the role of RocksDB's memtable flush). A
//! range's values then lie in one extent per run, and the MultiScan
//! planner (which coalesces in disk order) reads one extent per run.
//!
//! Runs are merged when [`FANIN`] of one level have piled up: they become
//! one run of the next level, so their number stays logarithmic in the
//! data written and each value is rewritten once per level. Once writes go
//! quiet, the key-order pass puts everything into one order and the runs
//! are forgotten.
//!
//! **What a run covers.** The log is append-only and a run's output goes
//! to its tail, interleaved with what writers append meanwhile, so runs
//! are described by segment: run `k` was written from segment `start_k`
//! on, and everything the log held from there at the time a merge starts
//! is the newer runs, values written since, and nothing older (a segment
//! a run began in may still hold a few values of the run before; they
//! are merged too, which costs a copy and breaks nothing). The values of
//! the tail are those from `tail` on that are not in a packed record
//! ([`Packed`]): moved values were put where they are on purpose.
//!
//! A tail sort is one walk with one checkpoint at its end: a tail's values
//! are spread over every key, so none of its segments empties sooner. A
//! merge runs in steps of a defragment cycle's budget with a checkpoint
//! after each (a run's values lie in key order, so its segments empty as
//! the walk passes them) and resumes at the key where it stopped. A job's
//! own output is never walked again: it lies behind the walk, in key
//! order (but for a close that cut a tail sort short, [`Runs::close`]).
//! Runs and defragment take turns when both are due (module
//! `maintenance`).
//!
//! [`Options::sorted_run_bytes`]: crate::Options::sorted_run_bytes

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::order::{self, Step};
use super::{checkpoint_and_retire, count, cycle_budget, DefragReport};
use crate::error::Result;
use crate::index::Locator;
use crate::state::Inner;
use crate::stats::Counters;

/// Runs of one level merged into one of the next. A 100-key range reads
/// one extent per run, and there are at most `FANIN - 1` runs per level;
/// each value is rewritten once per level.
pub(crate) const FANIN: usize = 8;

/// A tail of at least `sorted_run_bytes / CLOSE_MIN_SHARE` is sorted at
/// close (see [`Runs::close`]).
const CLOSE_MIN_SHARE: u64 = 8;

fn in_spans(spans: &[(u32, u32, u32)], l: Locator) -> bool {
    let i = spans.partition_point(|&(s, o, _)| (s, o) <= (l.segment, l.offset));
    i > 0
        && spans
            .get(i - 1)
            .is_some_and(|&(s, _, e)| s == l.segment && l.offset < e)
}

/// Log bytes appended since open by writers (not by movers).
fn written(inner: &Inner) -> u64 {
    let all = inner.log.appended.get();
    all.saturating_sub(inner.packed.bytes.load(Ordering::Relaxed))
}

/// `Statistics::unsorted_bytes`: writer bytes since the current tail
/// began, as the maintenance thread last published it.
pub(crate) fn unsorted_bytes(inner: &Inner) -> u64 {
    if inner.opts.sorted_run_bytes == 0 || !inner.opts.background {
        return 0;
    }
    written(inner).saturating_sub(Counters::get(&inner.counters.tail_written))
}

#[derive(Clone, Copy)]
struct Run {
    /// First segment of the run's output, or of the values a tail sort
    /// left in place.
    start: u32,
    level: u8,
}

struct Job {
    /// Values from this segment on are sorted.
    from: u32,
    /// Moved values left where they are (a tail sort); empty for a merge.
    keep: Vec<(u32, u32, u32)>,
    /// The runs this job's output replaces, from this index on (a merge).
    merges: Option<usize>,
    level: u8,
    /// The active segment when the job began: the next tail starts there.
    began: u32,
    resume: Option<Vec<u8>>,
    /// Set by a close that cut this tail sort short at this key: what the
    /// job moved below it and what writers put behind it since the job
    /// began are moved again, all together, before the walk goes on (see
    /// [`Runs::close`]).
    redo_below: Option<Vec<u8>>,
    moved: u64,
    /// The most key-order runs a step of a tail sort left in place side by
    /// side (`order::Step::runs_kept`).
    runs_kept: usize,
    t0: Instant,
}

impl Job {
    fn word(&self, merge: &'static str, sort: &'static str) -> &'static str {
        if self.merges.is_some() {
            merge
        } else {
            sort
        }
    }
}

/// The runs and the job in progress; owned by the maintenance thread.
pub(crate) struct Runs {
    /// Oldest first; levels never increase along it.
    runs: Vec<Run>,
    /// Values written from this segment on belong to no run yet.
    tail: u32,
    /// [`written`] when the tail began.
    tail_written: u64,
    job: Option<Job>,
}

impl Runs {
    /// Nothing before the active segment is a tail: an earlier process's
    /// writes are left to the key-order pass.
    pub(crate) fn new(inner: &Inner) -> Runs {
        let tail = inner.log.active_id();
        inner.packed.forget_below(tail);
        let runs = Runs {
            runs: Vec::new(),
            tail,
            tail_written: written(inner),
            job: None,
        };
        runs.publish(inner);
        runs
    }

    /// Makes the run count and the tail's start visible to `statistics()`.
    fn publish(&self, inner: &Inner) {
        Counters::set(&inner.counters.sorted_runs, self.runs.len() as u64);
        Counters::set(&inner.counters.tail_written, self.tail_written);
    }

    /// The key-order pass that began with segment `began` active has put
    /// everything into one order: no run is left to merge.
    pub(crate) fn ordered(&mut self, inner: &Inner, began: u32) {
        if self.job.is_none() {
            self.runs.clear();
            self.tail = self.tail.max(began);
            // The pass runs while writes are quiet: what was written before
            // it is in order now.
            self.tail_written = written(inner);
            inner.packed.forget_below(self.tail);
            self.publish(inner);
        }
    }

    /// What is due: `Some(Some(i))` a merge of the runs from index `i`
    /// on, `Some(None)` a tail sort.
    fn next(&self, inner: &Inner) -> Option<Option<usize>> {
        let threshold = inner.opts.sorted_run_bytes;
        if threshold == 0 {
            return None;
        }
        if let Some(i) = self.runs.len().checked_sub(FANIN) {
            let newest = self.runs.get(i..).unwrap_or_default();
            let level = newest.first().map(|r| r.level);
            if newest.iter().all(|r| Some(r.level) == level) {
                return Some(Some(i));
            }
        }
        (self.unsorted(inner) >= threshold).then_some(None)
    }

    fn start(&self, inner: &Inner, merges: Option<usize>) -> Job {
        let (from, keep, level) = match merges.and_then(|i| self.runs.get(i)) {
            Some(first) => (first.start, Vec::new(), first.level + 1),
            None => (self.tail, inner.packed.snapshot(), 0),
        };
        Job {
            from,
            keep,
            merges,
            level,
            began: inner.log.active_id(),
            resume: None,
            redo_below: None,
            moved: 0,
            runs_kept: 0,
            t0: Instant::now(),
        }
    }

    /// Bytes written since the last run began, in no run yet.
    fn unsorted(&self, inner: &Inner) -> u64 {
        written(inner).saturating_sub(self.tail_written)
    }

    /// At close, sorts the tail into one last run (RocksDB flushes its
    /// memtables at close too), so a load closed as soon as it ends and
    /// scanned after a reopen reads one extent per run instead of a page
    /// per value of its last `sorted_run_bytes`. A tail under
    /// `sorted_run_bytes / CLOSE_MIN_SHARE` is left: every tail sort walks
    /// all of T1 and ends with a checkpoint, which a small tail does not
    /// repay. A tail sort cut short by the close is finished; a merge is
    /// not (it may be eight runs long). Writes have stopped: the database
    /// is being dropped. Logs what is left out of every run.
    ///
    /// A tail sort cut short at key `k` has left behind it, in the keys
    /// below `k`, the values writers put there while it ran. Sorted on
    /// their own they made one more run, a small one (50-140k values
    /// after a 5M-key load) that a range below `k` holding one of them
    /// reads as an extent of its own. So the close moves what the sort
    /// had already moved below `k` again, together with those values, and
    /// the sort then goes on from `k`: one run, for about the prefix's
    /// moves again.
    pub(crate) fn close(&mut self, inner: &Inner) {
        if inner.opts.sorted_run_bytes == 0 {
            return;
        }
        if self.job.as_ref().is_some_and(|j| j.merges.is_some()) {
            self.job = None;
            inner.info.log(format_args!(
                "sorted run: close cut a merge short; its runs stay as they are"
            ));
        }
        let mut redone = false;
        if let Some(job) = self.job.as_mut().filter(|_| inner.opts.sort_tail_at_close) {
            if job.moved > 0 {
                if let Some(k) = job.resume.take() {
                    inner.info.log(format_args!(
                        "sorted run: close moves again what the cut-short sort moved below the key where it stopped, with what was written behind it"
                    ));
                    job.redo_below = Some(k);
                    redone = true;
                }
            }
        }
        let min = (inner.opts.sorted_run_bytes / CLOSE_MIN_SHARE).max(1);
        let mut sorting = inner.opts.sort_tail_at_close;
        while sorting {
            if self.job.is_none() {
                if redone {
                    // Everything written so far went into that run.
                    redone = false;
                    self.tail = inner.log.active_id();
                    self.tail_written = written(inner);
                    inner.packed.forget_below(self.tail);
                    self.publish(inner);
                }
                if self.unsorted(inner) < min {
                    sorting = false;
                    continue;
                }
                self.begin(inner, None);
            }
            if let Err(e) = self.step(inner, &|| true) {
                inner.info.log(format_args!(
                    "sorted run: sorting the tail at close failed: {e}"
                ));
                break;
            }
        }
        let left = self.unsorted(inner);
        if left > 0 {
            inner.info.log(format_args!(
                "sorted run: close leaves {left} bytes written since the last run began out of every run{}",
                if self.job.is_some() {
                    "; the run under way was cut short"
                } else {
                    ""
                }
            ));
        }
    }

    /// A job is under way or due.
    pub(crate) fn due(&self, inner: &Inner) -> bool {
        self.job.is_some() || self.next(inner).is_some()
    }

    /// Runs one step of the current job, starting one if due; returns
    /// whether anything ran. `go_on` false ends a step early.
    pub(crate) fn tick(&mut self, inner: &Inner, go_on: &dyn Fn() -> bool) -> Result<bool> {
        if self.job.is_none() {
            match self.next(inner) {
                Some(merges) => self.begin(inner, merges),
                None => return Ok(false),
            }
        }
        self.step(inner, go_on)?;
        Ok(true)
    }

    fn begin(&mut self, inner: &Inner, merges: Option<usize>) {
        let j = self.start(inner, merges);
        inner.info.log(format_args!(
            "sorted run: {} values from segment {} on ({} bytes written since the last run)",
            j.word("merging", "sorting"),
            j.from,
            self.unsorted(inner)
        ));
        if j.merges.is_none() {
            self.tail_written = written(inner);
            self.publish(inner);
        }
        self.job = Some(j);
    }

    /// One step of the job under way, if any.
    fn step(&mut self, inner: &Inner, go_on: &dyn Fn() -> bool) -> Result<()> {
        let Some(job) = self.job.as_mut() else {
            return Ok(());
        };
        let _g = inner.defrag.lock();
        let (from, keep) = (job.from, &job.keep);
        let select = |l: Locator| l.segment >= from && !in_spans(keep, l);
        // A tail's values are spread over the whole key range, so its
        // segments empty only when the walk ends: checkpoints in between
        // would free nothing (a 5M-key T1 is a 300 MB snapshot). A run's
        // values lie in key order, so a merge empties segments as it goes.
        let budget = match job.merges {
            Some(_) => cycle_budget(inner),
            None => u64::MAX,
        };
        let mut redo = DefragReport::default();
        if let Some(k) = job.redo_below.take() {
            // Only a close sets this, for a tail job: its walk has no byte
            // budget and `go_on` always true, so it covers all of `..k`
            // and its resume point is not needed.
            let began = job.began;
            let again = |l: Locator| select(l) && l.segment >= began;
            match order::walk_with(inner, None, Some(&k), order::EVERY, &again, budget, go_on) {
                Ok(step) => redo = step.rep,
                Err(e) => {
                    self.job = None;
                    return Err(e);
                }
            }
            job.resume = Some(k);
        }
        let policy = match job.merges {
            Some(_) => order::WHILE_WRITING,
            None => order::TAIL_WHILE_WRITING,
        };
        let walked = order::walk_with(
            inner,
            job.resume.as_deref(),
            None,
            policy,
            &select,
            budget,
            go_on,
        );
        let Step {
            mut rep,
            resume,
            runs_kept,
            ..
        } = match walked {
            Ok(step) => step,
            Err(e) => {
                // Dropped: a tail sort comes due again only once another
                // `sorted_run_bytes` are written, and takes this tail with
                // it; a merge is due again at once, as defragment is.
                self.job = None;
                return Err(e);
            }
        };
        rep.absorb(redo);
        job.moved += rep.moved_values;
        job.runs_kept = job.runs_kept.max(runs_kept);
        let done = resume.is_none();
        job.resume = resume;
        if (done && job.moved > 0) || (job.merges.is_some() && rep.moved_values > 0) {
            checkpoint_and_retire(inner, &mut rep)?;
        }
        count(&inner.counters, &rep);
        Counters::add(&inner.counters.ordered_values, rep.moved_values);
        if done {
            self.finish(inner);
        }
        Ok(())
    }

    fn finish(&mut self, inner: &Inner) {
        let Some(job) = self.job.take() else {
            return;
        };
        if let Some(i) = job.merges {
            self.runs.truncate(i);
        } else {
            self.tail = job.began;
            inner.packed.forget_below(self.tail);
        }
        // A tail kept as several interleaved key-order runs reads one
        // extent per run, so it counts as that many: FANIN of them merge.
        // What it kept lies where it was written, from the tail's first
        // segment on, so a merge must start there. A merge's output is one
        // run.
        let (kept, start) = match job.merges {
            None if job.runs_kept > 0 => (job.runs_kept, job.from),
            _ => (1, job.began),
        };
        for _ in 0..kept {
            self.runs.push(Run {
                start,
                level: job.level,
            });
        }
        self.publish(inner);
        inner.info.log(format_args!(
            "sorted run: {} {} values from segment {} on into a level-{} run in {:.3} s{}; {} runs",
            job.word("merged", "sorted"),
            job.moved,
            job.from,
            job.level,
            job.t0.elapsed().as_secs_f64(),
            if kept > 1 {
                format!(", {kept} key-order runs left in place")
            } else {
                String::new()
            },
            self.runs.len()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::moved::Packed;

    fn loc(segment: u32, offset: u32) -> Locator {
        Locator {
            segment,
            offset,
            len: 1,
        }
    }

    #[test]
    fn a_value_is_kept_only_inside_a_recorded_packed_extent() {
        let p = Packed::default();
        p.add(3, 100, 200, 0);
        p.add(2, 0, 50, 0);
        p.add(3, 500, 600, 0);
        let s = p.snapshot();
        assert!(in_spans(&s, loc(2, 0)));
        assert!(in_spans(&s, loc(2, 49)));
        assert!(!in_spans(&s, loc(2, 50)));
        assert!(!in_spans(&s, loc(3, 99)));
        assert!(in_spans(&s, loc(3, 150)));
        assert!(!in_spans(&s, loc(3, 200)));
        assert!(in_spans(&s, loc(3, 599)));
        assert!(!in_spans(&s, loc(4, 0)));
        p.forget_below(3);
        assert!(!in_spans(&p.snapshot(), loc(2, 0)));
        assert!(in_spans(&p.snapshot(), loc(3, 150)));
    }
}
