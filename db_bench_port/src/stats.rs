//! Per-thread statistics, merged as db_bench merges them, and the result
//! line in db_bench's exact format.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::histogram::Histogram;

/// Whether stderr's last output was a line ended by `\r` (progress or a
/// long op), which a terminal overwrites but a log keeps.
static CR_PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ends a pending `\r` progress line on stderr with a newline when stderr
/// is not a terminal. RocksDB's db_bench gets the same effect from stdio
/// buffering its stdout into a pipe until exit; this port writes stdout as
/// it goes, so without it a `2>&1` log (RocksDB's benchmark.sh) would hold
/// `... finished N ops   \rfillseq      : ...` and `grep ^fillseq` would miss
/// the result line.
pub fn end_progress_line() {
    use std::io::IsTerminal as _;
    if CR_PENDING.swap(false, Ordering::Relaxed) && !std::io::stderr().is_terminal() {
        eprintln!();
    }
}

/// The operation a histogram sample belongs to (db_bench's `OperationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpType {
    /// Point or sequential read.
    Read,
    /// Write.
    Write,
    /// Delete.
    Delete,
    /// Seek (+ nexts).
    Seek,
    /// Read-modify-write.
    Update,
    /// Anything else.
    Others,
    /// One MultiScan.
    MultiScan,
}

impl OpType {
    /// The label db_bench prints in `Microseconds per <label>:`.
    pub fn label(self) -> &'static str {
        match self {
            OpType::Read => "read",
            OpType::Write => "write",
            OpType::Delete => "delete",
            OpType::Seek => "seek",
            OpType::Update => "update",
            OpType::Others => "op",
            OpType::MultiScan => "multiscan",
        }
    }

    const ALL: [OpType; 7] = [
        OpType::Read,
        OpType::Write,
        OpType::Delete,
        OpType::Seek,
        OpType::Update,
        OpType::Others,
        OpType::MultiScan,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// A per-thread ops counter on its own cache line, read by the reporter
/// without disturbing the worker.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct PaddedCounter(pub AtomicU64);

/// Settings that shape what `finished_ops` does.
#[derive(Debug, Clone, Copy)]
pub struct StatsConfig {
    /// Record a latency sample per `finished_ops` call.
    pub histogram: bool,
    /// Print `... finished N ops` progress.
    pub progress_reports: bool,
    /// `--stats_interval` (ops between interval reports; 0 = off).
    pub stats_interval: u64,
    /// `--stats_interval_seconds`.
    pub stats_interval_seconds: u64,
    /// `--slow_usecs`.
    pub slow_usecs: u64,
}

/// One thread's statistics (db_bench's `Stats`).
#[derive(Debug, Clone)]
pub struct Stats {
    cfg: StatsConfig,
    id: usize,
    start: Instant,
    finish: Instant,
    seconds: f64,
    done: u64,
    bytes: u64,
    message: String,
    hists: Vec<Option<Histogram>>,
    last_op_finish: Instant,
    next_report: u64,
    last_report_done: u64,
    last_report_finish: Instant,
    exclude_from_merge: bool,
}

fn append_with_space(s: &mut String, msg: &str) {
    if msg.is_empty() {
        return;
    }
    if !s.is_empty() {
        s.push(' ');
    }
    s.push_str(msg);
}

impl Stats {
    /// Fresh statistics for thread `id`; the clock starts now.
    pub fn new(cfg: StatsConfig, id: usize) -> Self {
        let now = Instant::now();
        Stats {
            cfg,
            id,
            start: now,
            finish: now,
            seconds: 0.0,
            done: 0,
            bytes: 0,
            message: String::new(),
            hists: vec![None; OpType::ALL.len()],
            last_op_finish: now,
            next_report: if cfg.stats_interval > 0 {
                cfg.stats_interval
            } else {
                100
            },
            last_report_done: 0,
            last_report_finish: now,
            exclude_from_merge: false,
        }
    }

    /// Restarts the clock (called when all threads are released together).
    pub fn start(&mut self) {
        let now = Instant::now();
        self.start = now;
        self.finish = now;
        self.last_op_finish = now;
        self.last_report_finish = now;
    }

    /// Restarts the per-op latency clock (after a rate-limiter wait).
    pub fn reset_last_op_time(&mut self) {
        self.last_op_finish = Instant::now();
    }

    /// Stops the clock.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.seconds = (self.finish - self.start).as_secs_f64();
    }

    /// Excludes this thread from the merged result (db_bench's background
    /// writer in readwhilewriting).
    pub fn set_exclude_from_merge(&mut self) {
        self.exclude_from_merge = true;
    }

    /// Appends a message (space-separated), e.g. `(N of M found)`.
    pub fn add_message(&mut self, msg: &str) {
        append_with_space(&mut self.message, msg);
    }

    /// Counts bytes moved.
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
    }

    /// Ops done so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Records that `n` ops finished; samples latency when `--histogram`.
    #[inline]
    pub fn finished_ops(&mut self, n: u64, op: OpType, counter: &PaddedCounter) {
        if self.cfg.histogram {
            let now = Instant::now();
            let micros = (now - self.last_op_finish).as_micros() as u64;
            self.hists[op.index()]
                .get_or_insert_with(Histogram::new)
                .add(micros);
            if micros >= self.cfg.slow_usecs && self.cfg.stats_interval == 0 {
                eprint!("long op: {micros} micros{:30}\r", "");
                CR_PENDING.store(true, Ordering::Relaxed);
            }
            self.last_op_finish = now;
        }
        self.done += n;
        counter.0.store(self.done, Ordering::Relaxed);
        if self.done >= self.next_report && self.cfg.progress_reports {
            self.report_progress();
        }
    }

    #[cold]
    fn report_progress(&mut self) {
        if self.cfg.stats_interval == 0 {
            self.next_report += match self.next_report {
                0..=999 => 100,
                1000..=4999 => 500,
                5000..=9999 => 1000,
                10000..=49999 => 5000,
                50000..=99999 => 10000,
                100000..=499999 => 50000,
                _ => 100000,
            };
            eprint!("... finished {} ops{:30}\r", self.done, "");
            CR_PENDING.store(true, Ordering::Relaxed);
        } else {
            let now = Instant::now();
            let since_last = (now - self.last_report_finish).as_secs_f64();
            if self.cfg.stats_interval_seconds > 0
                && since_last < self.cfg.stats_interval_seconds as f64
            {
                self.next_report += self.cfg.stats_interval;
            } else {
                let total = (now - self.start).as_secs_f64();
                eprintln!(
                    "{} ... thread {}: ({},{}) ops and ({:.1},{:.1}) ops/second in ({:.6},{:.6}) seconds",
                    crate::output::time_to_string(crate::output::unix_secs()),
                    self.id,
                    self.done - self.last_report_done,
                    self.done,
                    (self.done - self.last_report_done) as f64 / since_last,
                    self.done as f64 / total,
                    since_last,
                    total
                );
                self.next_report += self.cfg.stats_interval;
                self.last_report_finish = now;
                self.last_report_done = self.done;
            }
        }
        let _ = std::io::stderr().flush();
    }

    /// Merges another thread's statistics into these.
    pub fn merge(&mut self, other: &Stats) {
        if other.exclude_from_merge {
            return;
        }
        for (mine, theirs) in self.hists.iter_mut().zip(&other.hists) {
            if let Some(t) = theirs {
                match mine {
                    Some(m) => m.merge(t),
                    None => *mine = Some(t.clone()),
                }
            }
        }
        self.done += other.done;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
        if other.start < self.start {
            self.start = other.start;
        }
        if other.finish > self.finish {
            self.finish = other.finish;
        }
        if self.message.is_empty() {
            self.message = other.message.clone();
        }
    }

    /// Merges the threads' statistics as db_bench's `RunBenchmark` does.
    pub fn merge_all(threads: &[Stats]) -> Option<Stats> {
        let first = threads.iter().find(|s| !s.exclude_from_merge)?;
        let mut m = Stats::new(first.cfg, 0);
        m.start = first.start;
        m.finish = first.finish;
        for s in threads {
            m.merge(s);
        }
        Some(m)
    }

    /// The figures of a finished benchmark.
    pub fn summary(&self, name: &str) -> Summary {
        let done = self.done.max(1);
        let elapsed = (self.finish - self.start).as_secs_f64();
        let mb_per_sec = (self.bytes > 0).then(|| (self.bytes as f64 / 1_048_576.0) / elapsed);
        Summary {
            name: name.to_string(),
            micros_per_op: self.seconds * 1e6 / done as f64,
            ops_per_sec: done as f64 / elapsed,
            elapsed_seconds: elapsed,
            operations: done,
            bytes: self.bytes,
            mb_per_sec,
            message: self.message.clone(),
            histograms: OpType::ALL
                .iter()
                .filter_map(|op| self.hists[op.index()].clone().map(|h| (*op, h)))
                .collect(),
        }
    }
}

/// A finished benchmark's figures.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Benchmark name.
    pub name: String,
    /// Summed thread time / ops, in microseconds.
    pub micros_per_op: f64,
    /// Ops / wall time.
    pub ops_per_sec: f64,
    /// Wall time from the first thread's start to the last one's finish.
    pub elapsed_seconds: f64,
    /// Ops done (at least 1, as db_bench pretends).
    pub operations: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// MB/s when bytes were counted.
    pub mb_per_sec: Option<f64>,
    /// The benchmark's message, e.g. `(N of M found)`.
    pub message: String,
    /// Latency histograms by op type (with `--histogram`).
    pub histograms: Vec<(OpType, Histogram)>,
}

impl Summary {
    /// The result line(s) exactly as db_bench prints them, histograms included.
    pub fn report_text(&self) -> String {
        let mut extra = String::new();
        if let Some(mbs) = self.mb_per_sec {
            extra = format!("{mbs:6.1} MB/s");
        }
        append_with_space(&mut extra, &self.message);
        let mut out = format!(
            "{:<12} : {:11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}\n",
            self.name,
            self.micros_per_op,
            self.ops_per_sec as i64,
            self.elapsed_seconds,
            self.operations,
            if extra.is_empty() { "" } else { " " },
            extra
        );
        for (op, h) in &self.histograms {
            let _ = writeln!(out, "Microseconds per {}:\n{}", op.label(), h.to_text());
        }
        out
    }
}

/// db_bench's `CombinedStats`: averages over `[X<n>]` repeats.
#[derive(Debug, Default, Clone)]
pub struct CombinedStats {
    ops: Vec<f64>,
    mbs: Vec<f64>,
}

fn avg(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn ci95(v: &[f64]) -> f64 {
    let a = avg(v);
    let var = v.iter().map(|x| (x - a).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    1.959964 * var.sqrt() / (v.len() as f64).sqrt()
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let mid = s.len() / 2;
    if s.len() % 2 == 1 {
        s[mid]
    } else {
        (s[mid] + s[mid - 1]) / 2.0
    }
}

impl CombinedStats {
    /// Adds one run.
    pub fn add(&mut self, s: &Summary) {
        self.ops.push(s.ops_per_sec);
        if let Some(m) = s.mb_per_sec {
            self.mbs.push(m);
        }
    }

    /// The `[AVG n runs]` line (or `[CI95 n runs]`), once 2+ runs exist.
    pub fn report(&self, name: &str, ci_only: bool) -> Option<String> {
        let n = self.ops.len();
        if n < 2 {
            return None;
        }
        let (oa, oc) = (avg(&self.ops), ci95(&self.ops));
        let with_mb = self.mbs.len() == n;
        Some(if ci_only {
            if with_mb {
                let (ma, mc) = (avg(&self.mbs), ci95(&self.mbs));
                format!(
                    "{name} [CI95 {n} runs] : ({}, {}) ops/sec; ({:.1}, {:.1}) MB/sec\n",
                    (oa as i32) - (oc as i32),
                    (oa as i32) + (oc as i32),
                    ma - mc,
                    ma + mc
                )
            } else {
                format!(
                    "{name} [CI95 {n} runs] : ({}, {}) ops/sec\n",
                    (oa as i32) - (oc as i32),
                    (oa as i32) + (oc as i32)
                )
            }
        } else if with_mb {
            format!(
                "{name} [AVG {n} runs] : {} (\u{b1} {}) ops/sec; {:6.1} (\u{b1} {:.1}) MB/sec\n",
                oa as i32,
                oc as i32,
                avg(&self.mbs),
                ci95(&self.mbs)
            )
        } else {
            format!(
                "{name} [AVG {n} runs] : {} (\u{b1} {}) ops/sec\n",
                oa as i32, oc as i32
            )
        })
    }

    /// The final `[AVG    n runs]` / `[MEDIAN n runs]` block.
    pub fn report_final(&self, name: &str) -> Option<String> {
        let n = self.ops.len();
        if n < 2 {
            return None;
        }
        let oa = avg(&self.ops);
        let ms = if oa > 0.0 { 1000.0 / oa } else { 0.0 };
        Some(if self.mbs.len() == n {
            format!(
                "\n{name} [AVG    {n} runs] : {} (\u{b1} {}) ops/sec; {ms:.3} ms/op; {:6.1} (\u{b1} {:.1}) MB/sec\n{name} [MEDIAN {n} runs] : {} ops/sec; {:6.1} MB/sec\n",
                oa as i32,
                ci95(&self.ops) as i32,
                avg(&self.mbs),
                ci95(&self.mbs),
                median(&self.ops) as i32,
                median(&self.mbs)
            )
        } else {
            format!(
                "\n{name} [AVG    {n} runs] : {} (\u{b1} {}) ops/sec; {ms:.3} ms/op\n{name} [MEDIAN {n} runs] : {} ops/sec\n",
                oa as i32,
                ci95(&self.ops) as i32,
                median(&self.ops) as i32
            )
        })
    }
}

/// db_bench's `Duration`: a loop ends after `max_ops` ops, or after
/// `max_seconds` when that is positive (checked every
/// `--ops_between_duration_checks` ops), or when another thread failed.
#[derive(Debug)]
pub struct Duration<'a> {
    max_seconds: u64,
    max_ops: i64,
    ops: i64,
    start: Instant,
    granularity: i64,
    abort: &'a AtomicBool,
}

impl<'a> Duration<'a> {
    /// A new loop budget.
    pub fn new(max_seconds: u64, max_ops: i64, granularity: i64, abort: &'a AtomicBool) -> Self {
        Duration {
            max_seconds,
            max_ops,
            ops: 0,
            start: Instant::now(),
            granularity: granularity.max(1),
            abort,
        }
    }

    /// db_bench's `Duration::GetStage`: which of the stages of
    /// `ops_per_stage` ops the loop is in (ops past the budget, under
    /// `--duration`, stay in the last one).
    pub fn stage(&self, ops_per_stage: i64) -> i64 {
        self.ops.min(self.max_ops - 1).max(0) / ops_per_stage.max(1)
    }

    /// Counts `increment` ops and says whether the loop is over.
    #[inline]
    pub fn done(&mut self, increment: i64) -> bool {
        let increment = increment.max(1);
        let prev = self.ops;
        self.ops += increment;
        if self.ops / self.granularity != prev / self.granularity {
            if self.abort.load(Ordering::Relaxed) {
                return true;
            }
            if self.max_seconds > 0 && self.start.elapsed().as_secs() >= self.max_seconds {
                return true;
            }
        }
        if self.max_seconds > 0 {
            false
        } else {
            self.ops > self.max_ops
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_counts_ops() {
        let abort = AtomicBool::new(false);
        let mut d = Duration::new(0, 10, 1000, &abort);
        let mut n = 0;
        while !d.done(1) {
            n += 1;
        }
        assert_eq!(n, 10);
        let mut d = Duration::new(0, 10, 1000, &abort);
        let mut n = 0;
        while !d.done(3) {
            n += 3;
        }
        assert_eq!(n, 9);
    }

    #[test]
    fn abort_stops_at_granularity() {
        let abort = AtomicBool::new(true);
        let mut d = Duration::new(0, 1_000_000, 10, &abort);
        let mut n = 0;
        while !d.done(1) {
            n += 1;
        }
        assert_eq!(n, 9);
    }
}
