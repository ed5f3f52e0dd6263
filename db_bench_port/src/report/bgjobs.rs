//! The background-jobs table: each engine's maintenance calls, injected into
//! a running benchmark with two writer (or scanner) threads, timed, and
//! charged with the foreground throughput they cost.
//!
//! vmemkv's calls are `checkpoint`, `defragment` and `reorganize`; organic
//! shard splits are counted from its `LOG`. RocksDB and BlobDB get their
//! counterparts, a memtable `flush` and a full `compact_range`. LMDB has no
//! background work to measure and is left out.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::matrix::{Scale, Scenario, Variant};
use super::runner;
use super::stats;

/// The scenario the jobs run in: in memory, so the figures show the job's
/// own cost rather than the disk's.
pub const SCENARIO: &str = "1KB-mem";

/// Foreground threads, as the original measured: two.
pub const THREADS: usize = 2;

/// The foreground workloads: `(display name, db_bench benchmark, flags)`.
pub const WORKLOADS: &[(&str, &str, &[&str])] = &[
    ("Insert", "insert", &[]),
    ("Update (Zipf)", "update_zipf", &[]),
    ("Scan 100 (Uniform)", "scan_uniform", &["--seek_nexts=100"]),
];

/// Name of the no-job baseline.
pub const NONE: &str = "none";

/// The maintenance calls measured for an engine, as db_bench
/// `--inject_<call>_at` names.
pub fn jobs_for(engine: &str) -> &'static [&'static str] {
    match engine {
        "vmemkv" => &["checkpoint", "defragment", "reorganize"],
        "rocksdb" | "blobdb" => &["flush", "compact"],
        _ => &[],
    }
}

/// `(run seconds, second the job is injected at, repeats)` at a scale.
pub fn timing(scale: Scale) -> (u64, f64, usize) {
    match scale {
        Scale::Smoke => (1, 0.2, 1),
        Scale::Full => (4, 1.0, 3),
    }
}

/// The variants measured: one per engine that has jobs (the full vmemkv
/// configuration, not the ablations).
pub fn variants(all: &[Variant]) -> Vec<Variant> {
    all.iter()
        .filter(|v| v.all_threads && !jobs_for(v.engine).is_empty())
        .cloned()
        .collect()
}

/// Runs in the background-jobs phase, for the progress total.
pub fn run_count(scale: Scale, variants: &[Variant]) -> usize {
    let (_, _, reps) = timing(scale);
    variants
        .iter()
        .map(|v| (jobs_for(v.engine).len() + 1) * WORKLOADS.len() * reps)
        .sum()
}

/// One background-jobs run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BgRun {
    /// Foreground workload.
    pub workload: String,
    /// Engine variant label.
    pub variant: String,
    /// `--engine=` value.
    pub engine: String,
    /// The injected call, or `none` for the baseline.
    pub job: String,
    /// Repeat index.
    pub rep: usize,
    /// `ok` or `failed`.
    pub status: String,
    /// Foreground throughput over the whole run.
    pub ops_per_sec: Option<f64>,
    /// How long the call took.
    pub job_secs: Option<f64>,
    /// Foreground throughput while the call ran.
    pub ops_per_sec_during_job: Option<f64>,
    /// vmemkv: shard splits logged during the run.
    pub splits: u64,
    /// vmemkv: the longest writer pause of those splits, milliseconds.
    pub split_max_pause_ms: f64,
    /// Why the run failed.
    pub note: Option<String>,
    /// The exact db_bench arguments.
    pub args: Vec<String>,
}

/// `inject <call> at A s: started B s, took C ms, status S, N ops during it (R ops/sec)`
/// → `(call, took seconds, ops/sec during, ok)`.
pub fn parse_inject_line(line: &str) -> Option<(String, f64, f64, bool)> {
    let rest = line.strip_prefix("inject ")?;
    let (call, rest) = rest.split_once(" at ")?;
    let took = rest.split_once("took ")?.1.split_once(" ms")?.0;
    let ok = rest.split_once("status ")?.1.starts_with("OK,");
    let rate = rest.rsplit_once('(')?.1.split_once(" ops/sec")?.0;
    Some((
        call.to_string(),
        took.trim().parse::<f64>().ok()? / 1e3,
        rate.trim().parse().ok()?,
        ok,
    ))
}

/// Split events in a slice of vmemkv's `LOG`: `(count, longest writer
/// pause in ms)`.
pub fn splits_in_log(text: &str) -> (u64, f64) {
    text.lines()
        .filter(|l| l.contains("t1 split:"))
        .fold((0, 0.0f64), |(n, max), l| {
            let pause = l
                .split_once("writer pause ")
                .and_then(|(_, r)| r.split_once(" ms"))
                .and_then(|(x, _)| x.trim().parse::<f64>().ok())
                .unwrap_or(0.0);
            (n + 1, max.max(pause))
        })
}

fn log_len(db: &Path) -> u64 {
    fs::metadata(db.join("LOG")).map_or(0, |m| m.len())
}

fn log_tail(db: &Path, from: u64) -> String {
    fs::read(db.join("LOG"))
        .ok()
        .and_then(|b| {
            b.get(from as usize..)
                .map(|t| String::from_utf8_lossy(t).into_owned())
        })
        .unwrap_or_default()
}

/// Runs the whole phase against corpora already loaded at `corpus(v)`.
/// Baselines and jobs are interleaved within each repeat.
pub fn run(
    db_bench: &Path,
    scale: Scale,
    sc: &Scenario,
    variants: &[Variant],
    base_args: impl Fn(&Variant) -> Vec<String>,
    corpus: impl Fn(&Variant) -> std::path::PathBuf,
    mut tick: impl FnMut(&str),
) -> Vec<BgRun> {
    let (secs, at, reps) = timing(scale);
    let mut out = Vec::new();
    for &(wname, bench, wflags) in WORKLOADS {
        for rep in 0..reps {
            for v in variants {
                for job in std::iter::once(NONE).chain(jobs_for(v.engine).iter().copied()) {
                    tick(&format!(
                        "{} | background jobs | {wname} | {} | {job} | rep {}",
                        sc.name,
                        v.label,
                        rep + 1
                    ));
                    let db = corpus(v);
                    let mut args = base_args(v);
                    args.extend([
                        format!("--benchmarks={bench}"),
                        format!("--threads={THREADS}"),
                        format!("--duration={secs}"),
                        "--use_existing_db=1".into(),
                    ]);
                    args.extend(wflags.iter().map(|s| s.to_string()));
                    args.extend(v.flags.iter().map(|s| s.to_string()));
                    if job != NONE {
                        args.push(format!("--inject_{job}_at={at}"));
                    }
                    let log_from = log_len(&db);
                    let o = runner::run_db_bench(db_bench, &args, None);
                    let (splits, split_max_pause_ms) = splits_in_log(&log_tail(&db, log_from));
                    let inject = o.stdout.lines().find_map(parse_inject_line);
                    let mut r = BgRun {
                        workload: wname.into(),
                        variant: v.label.into(),
                        engine: v.engine.into(),
                        job: job.into(),
                        rep,
                        status: "ok".into(),
                        ops_per_sec: o.results.last().map(|r| r.ops_per_sec),
                        job_secs: inject.as_ref().map(|i| i.1),
                        ops_per_sec_during_job: inject.as_ref().map(|i| i.2),
                        splits,
                        split_max_pause_ms,
                        note: o.error.clone(),
                        args,
                    };
                    let job_failed = job != NONE && !inject.as_ref().is_some_and(|i| i.3);
                    if o.error.is_some() || r.ops_per_sec.is_none() || job_failed {
                        r.status = "failed".into();
                        if r.note.is_none() {
                            r.note = Some(format!("{job} did not run or failed"));
                        }
                    }
                    out.push(r);
                }
            }
        }
    }
    out
}

type Key = (String, String, String);

fn median_by(runs: &[BgRun], f: impl Fn(&BgRun) -> Option<f64>) -> Vec<(Key, f64)> {
    let mut groups: std::collections::BTreeMap<Key, Vec<f64>> = Default::default();
    for r in runs.iter().filter(|r| r.status == "ok") {
        if let Some(x) = f(r) {
            groups
                .entry((r.variant.clone(), r.workload.clone(), r.job.clone()))
                .or_default()
                .push(x);
        }
    }
    groups
        .into_iter()
        .filter_map(|(k, v)| stats::median(&v).map(|m| (k, m)))
        .collect()
}

/// One row of the table: a job under a workload on one engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Engine variant.
    pub variant: String,
    /// Foreground workload.
    pub workload: String,
    /// The call.
    pub job: String,
    /// Median duration, seconds.
    pub job_secs: f64,
    /// Median foreground ops/sec while it ran.
    pub during: f64,
    /// Median foreground ops/sec of the no-job runs.
    pub baseline: Option<f64>,
}

impl Row {
    /// Throughput while the job ran, as a fraction of the baseline.
    pub fn kept(&self) -> Option<f64> {
        stats::ratio(self.during, self.baseline?)
    }
}

/// The table's rows, in run order.
pub fn rows(runs: &[BgRun]) -> Vec<Row> {
    let dur = median_by(runs, |r| r.job_secs);
    let during = median_by(runs, |r| r.ops_per_sec_during_job);
    let base = median_by(runs, |r| (r.job == NONE).then_some(r.ops_per_sec).flatten());
    let mut order: Vec<Key> = Vec::new();
    for r in runs.iter().filter(|r| r.job != NONE) {
        let k = (r.variant.clone(), r.workload.clone(), r.job.clone());
        if !order.contains(&k) {
            order.push(k);
        }
    }
    order
        .into_iter()
        .filter_map(|k| {
            let find = |v: &[(Key, f64)], k: &Key| v.iter().find(|x| &x.0 == k).map(|x| x.1);
            let base_key = (k.0.clone(), k.1.clone(), NONE.to_string());
            Some(Row {
                job_secs: find(&dur, &k)?,
                during: find(&during, &k)?,
                baseline: find(&base, &base_key),
                variant: k.0,
                workload: k.1,
                job: k.2,
            })
        })
        .collect()
}

/// The background-jobs section of `report.md`.
pub fn table_md(runs: &[BgRun]) -> String {
    use std::fmt::Write as _;
    if runs.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "## Background jobs\n\nEach call is injected into a running benchmark with {THREADS} threads on the `{SCENARIO}` corpus. \
         *During* is the foreground ops/sec while the call ran (operations counted at its start and end, \
         over the time the call and the benchmark both ran); \
         *without* is the median of the same benchmark's runs with no call. Medians of the repeats.\n\n\
         | Engine | Workload | Job | Duration | Ops/sec during | Ops/sec without | Kept |\n|---|---|---|---|---|---|---|\n"
    );
    for r in rows(runs) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} ms | {:.0} | {} | {} |",
            r.variant,
            r.workload,
            r.job,
            r.job_secs * 1e3,
            r.during,
            r.baseline.map_or("–".into(), |b| format!("{b:.0}")),
            r.kept()
                .map_or("–".into(), |k| format!("{:.0}%", k * 100.0))
        );
    }
    let split_runs: Vec<&BgRun> = runs
        .iter()
        .filter(|r| r.engine == "vmemkv" && r.status == "ok")
        .collect();
    let splits: u64 = split_runs.iter().map(|r| r.splits).sum();
    let max_pause = split_runs
        .iter()
        .map(|r| r.split_max_pause_ms)
        .fold(0.0f64, f64::max);
    let _ = writeln!(
        s,
        "\nOrganic shard splits (vmemkv, counted from its `LOG` over these {} runs): {splits}, longest writer pause {max_pause:.3} ms.",
        split_runs.len()
    );
    let failed: Vec<&BgRun> = runs.iter().filter(|r| r.status != "ok").collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "\nFailed background-job runs:\n");
        for r in failed {
            let _ = writeln!(
                s,
                "* {} {} {} rep {}: {}",
                r.variant,
                r.workload,
                r.job,
                r.rep + 1,
                r.note.as_deref().unwrap_or("")
            );
        }
    }
    s
}

/// Bar-chart groups for the HTML: per engine and job, the share of
/// throughput kept under each workload (percent).
pub fn chart_groups(runs: &[BgRun]) -> Vec<(String, Vec<(String, f64)>)> {
    let mut groups: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for r in rows(runs) {
        let Some(k) = r.kept() else { continue };
        let name = format!("{} {}", r.variant, r.job);
        let bar = (r.workload.clone(), k * 100.0);
        match groups.iter_mut().find(|g| g.0 == name) {
            Some(g) => g.1.push(bar),
            None => groups.push((name, vec![bar])),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_inject_lines() {
        let l = "inject checkpoint at 1.000 s: started 1.001 s, took 250.000 ms, status OK, 5000 ops during it (20000 ops/sec)";
        assert_eq!(
            parse_inject_line(l),
            Some(("checkpoint".into(), 0.25, 20000.0, true))
        );
        let bad = "inject flush at 1.000 s: started 1.001 s, took 2.000 ms, status Not supported: x, 10 ops during it (5000 ops/sec)";
        assert_eq!(parse_inject_line(bad).map(|x| x.3), Some(false));
        assert_eq!(
            parse_inject_line("inject defragment at 1.000 s: not run (the benchmark ended first)"),
            None
        );
        assert_eq!(parse_inject_line("fillseq : 1 micros/op"), None);
    }

    #[test]
    fn counts_splits_and_longest_pause() {
        let log = "x t1 split: shard starting at \"a\" split at \"m\" into 1 + 2 entries; writer pause 0.010 ms, total 3.0 ms\n\
                   x t1 reorganize: shard starting at \"a\", 5 sorted entries; writer pause 9.000 ms, total 1 ms\n\
                   x t1 split: shard starting at \"m\" split at \"t\" into 1 + 2 entries; writer pause 0.250 ms, total 2.0 ms\n";
        assert_eq!(splits_in_log(log), (2, 0.25));
        assert_eq!(splits_in_log(""), (0, 0.0));
    }

    fn bg(variant: &str, wl: &str, job: &str, rep: usize, ops: f64, during: Option<f64>) -> BgRun {
        BgRun {
            workload: wl.into(),
            variant: variant.into(),
            engine: "vmemkv".into(),
            job: job.into(),
            rep,
            status: "ok".into(),
            ops_per_sec: Some(ops),
            job_secs: during.map(|_| 0.1 * (rep + 1) as f64),
            ops_per_sec_during_job: during,
            splits: 1,
            split_max_pause_ms: 0.5,
            note: None,
            args: Vec::new(),
        }
    }

    #[test]
    fn rows_use_medians_against_the_no_job_baseline() {
        let runs = vec![
            bg("v", "Insert", NONE, 0, 100.0, None),
            bg("v", "Insert", NONE, 1, 300.0, None),
            bg("v", "Insert", NONE, 2, 200.0, None),
            bg("v", "Insert", "checkpoint", 0, 90.0, Some(150.0)),
            bg("v", "Insert", "checkpoint", 1, 90.0, Some(50.0)),
            bg("v", "Insert", "checkpoint", 2, 90.0, Some(100.0)),
        ];
        let r = rows(&runs);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].baseline, Some(200.0));
        assert_eq!(r[0].during, 100.0);
        assert!((r[0].job_secs - 0.2).abs() < 1e-9);
        assert_eq!(r[0].kept(), Some(0.5));
        let md = table_md(&runs);
        assert!(
            md.contains("| v | Insert | checkpoint | 200.0 ms | 100 | 200 | 50% |"),
            "{md}"
        );
        assert!(md.contains("splits (vmemkv, counted from its `LOG` over these 6 runs): 6, longest writer pause 0.500 ms"), "{md}");
        assert_eq!(
            chart_groups(&runs),
            vec![("v checkpoint".into(), vec![("Insert".into(), 50.0)])]
        );
    }
}
