//! `report.md` and a self-contained `report.html` (inline SVG charts drawn
//! with plotters; nothing is fetched from the network).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use plotters::prelude::*;

use super::stats::{self, verdict};
use super::{Results, Run};

/// Median ops/sec per (scenario, workload, threads, variant).
type Medians = BTreeMap<(String, String, usize, String), f64>;

fn medians(results: &Results) -> Medians {
    repeats(results)
        .into_iter()
        .filter_map(|(k, v)| stats::median(&v).map(|m| (k, m)))
        .collect()
}

/// Whether `r` is a run of the harness's ceiling (the null engine): never
/// a rival.
pub fn is_ceiling(r: &Run) -> bool {
    r.engine == super::matrix::CEILING_ENGINE
}

/// The rival variants measured, in the order they ran.
pub fn rivals(results: &Results) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    let mut v: Vec<&str> = results
        .runs
        .iter()
        .filter(|r| !r.is_vmemkv && !is_ceiling(r))
        .map(|r| r.variant.as_str())
        .chain(
            results
                .seed004
                .iter()
                .filter(|r| !r.is_vmemkv)
                .map(|r| r.variant.as_str()),
        )
        .collect();
    v.retain(|x| seen.insert(*x));
    v
}

fn ordered_unique<'a>(runs: &'a [Run], f: impl Fn(&'a Run) -> &'a str) -> Vec<&'a str> {
    let mut seen = BTreeSet::new();
    runs.iter().map(f).filter(|s| seen.insert(*s)).collect()
}

/// One winner-table cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Best vmemkv variant and its median ops/sec.
    pub vmemkv: Option<(String, f64)>,
    /// Fastest rival and its median ops/sec.
    pub rival: Option<(String, f64)>,
}

impl Cell {
    /// vmemkv / rival.
    pub fn ratio(&self) -> Option<f64> {
        stats::ratio(self.vmemkv.as_ref()?.1, self.rival.as_ref()?.1)
    }

    fn text(&self, not_run: bool) -> String {
        match (self.ratio(), &self.vmemkv, &self.rival) {
            (Some(r), Some((vv, _)), Some((rv, _))) => {
                format!("**{}** {r:.2}x vs {rv} ({vv})", verdict(r).label())
            }
            (_, Some((vv, x)), None) => format!("{} ops/s ({vv}); no rival", fmt_ops(*x)),
            _ if not_run => "not run".into(),
            _ => "failed".into(),
        }
    }
}

/// The winner cell for a scenario and workload at `threads`.
pub fn winner_cell(
    results: &Results,
    m: &Medians,
    scenario: &str,
    workload: &str,
    threads: usize,
) -> Cell {
    let pick = |vmemkv: bool| {
        let cands: Vec<(String, f64)> = results
            .runs
            .iter()
            .filter(|r| {
                r.scenario == scenario
                    && r.workload == workload
                    && r.threads == threads
                    && r.is_vmemkv == vmemkv
                    && !is_ceiling(r)
            })
            .map(|r| r.variant.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|v| {
                m.get(&(
                    scenario.to_string(),
                    workload.to_string(),
                    threads,
                    v.clone(),
                ))
                .map(|x| (v, *x))
            })
            .collect();
        stats::best(cands.iter().map(|(n, x)| (n, *x))).map(|(n, x)| (n.clone(), x))
    };
    Cell {
        vmemkv: pick(true),
        rival: pick(false),
    }
}

/// The largest thread count measured: where the winner table compares.
pub fn max_threads(results: &Results) -> usize {
    results.threads.iter().copied().max().unwrap_or(1)
}

fn fmt_ops(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn cell_not_run(results: &Results, scenario: &str, workload: &str) -> bool {
    results
        .runs
        .iter()
        .filter(|r| r.scenario == scenario && r.workload == workload)
        .all(|r| r.status == "not run")
}

/// Every winner cell at `threads`: `(scenario, workload, cell, not run)`,
/// scenarios and workloads in the order they ran.
pub fn winner_cells(results: &Results, threads: usize) -> Vec<(String, String, Cell, bool)> {
    let m = medians(results);
    let scenarios = ordered_unique(&results.runs, |r| r.scenario.as_str());
    let workloads = ordered_unique(&results.runs, |r| r.workload.as_str());
    let mut out = Vec::new();
    for w in &workloads {
        for sc in &scenarios {
            let c = winner_cell(results, &m, sc, w, threads);
            out.push((
                sc.to_string(),
                w.to_string(),
                c,
                cell_not_run(results, sc, w),
            ));
        }
    }
    out
}

/// The winner table as Markdown at the largest thread count measured.
pub fn winner_table_md(results: &Results) -> String {
    winner_table_md_at(results, max_threads(results))
}

/// The winner table as Markdown at `threads`: a row per workload, a column
/// per scenario.
pub fn winner_table_md_at(results: &Results, threads: usize) -> String {
    let scenarios = ordered_unique(&results.runs, |r| r.scenario.as_str());
    let cells = winner_cells(results, threads);
    let mut s = String::new();
    let _ = writeln!(s, "| workload | {} |", scenarios.join(" | "));
    let _ = writeln!(s, "|---|{}", "---|".repeat(scenarios.len()));
    for row in cells.chunks(scenarios.len().max(1)) {
        let Some((_, w, _, _)) = row.first() else {
            continue;
        };
        let texts: Vec<String> = row.iter().map(|(_, _, c, nr)| c.text(*nr)).collect();
        let _ = writeln!(s, "| {w} | {} |", texts.join(" | "));
    }
    s
}

/// The harness ceiling table: per workload and scenario, the null
/// engine's median (db_bench against an engine that stores nothing) and
/// the best vmemkv variant as a share of it. Empty when it did not run.
pub fn ceiling_md(results: &Results, threads: usize) -> String {
    let ceiling: Vec<&Run> = results
        .runs
        .iter()
        .filter(|r| is_ceiling(r) && r.threads == threads)
        .collect();
    let Some(label) = ceiling.first().map(|r| r.variant.clone()) else {
        return String::new();
    };
    let m = medians(results);
    let scenarios = ordered_unique(&results.runs, |r| r.scenario.as_str());
    let workloads = ordered_unique(&results.runs, |r| r.workload.as_str());
    let mut s = format!(
        "## Harness ceiling, {threads} thread{}\n\n\
         The same db_bench lines against the null engine, which stores nothing: how fast db_bench \
         itself goes. Each cell: the ceiling's median, and the best vmemkv variant as a share of it; \
         near 100% the cell measures db_bench, not the engine.\n\n\
         | workload | {} |\n|---|{}\n",
        if threads == 1 { "" } else { "s" },
        scenarios.join(" | "),
        "---|".repeat(scenarios.len())
    );
    for w in &workloads {
        let texts: Vec<String> = scenarios
            .iter()
            .map(|sc| {
                let key = |v: &str| (sc.to_string(), w.to_string(), threads, v.to_string());
                let cell = winner_cell(results, &m, sc, w, threads);
                match (m.get(&key(&label)), cell.vmemkv) {
                    (Some(c), Some((_, x))) if *c > 0.0 => {
                        format!("{} ops/s; vmemkv {:.0}%", fmt_ops(*c), 100.0 * x / c)
                    }
                    (Some(c), _) => format!("{} ops/s", fmt_ops(*c)),
                    _ => "-".into(),
                }
            })
            .collect();
        let _ = writeln!(s, "| {w} | {} |", texts.join(" | "));
    }
    s.push('\n');
    s
}

fn header_md(results: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# vmemkv vs {}\n", rivals(results).join(", "));
    let _ = writeln!(
        s,
        "Scale **{}**, {} UTC, git `{}`. Each run lasts {} s in memory and {} s larger than memory (0 = bounded by operation count); each cell is the median of {} interleaved repeats.\n",
        results.scale, results.date, results.git_revision, results.run_secs, results.ltm_run_secs, results.repeats
    );
    if let Some(note) = super::matrix::short_window_note(results.run_secs, results.ltm_run_secs) {
        let _ = writeln!(s, "{note}\n");
    }
    if !results.resumed_from.is_empty() {
        let _ = writeln!(
            s,
            "Resumed (`--resume`): this run continues the run(s) of {}; the cells those measured are theirs.\n",
            results.resumed_from.join(", ")
        );
    }
    s.push_str(&partial_md(results));
    let _ = writeln!(s, "## Machine\n");
    for (k, v) in &results.machine {
        let _ = writeln!(s, "* {k}: {v}");
    }
    let _ = writeln!(s, "\n## Engines\n");
    for (k, v) in &results.engines {
        let _ = writeln!(s, "* {k}: {v}");
    }
    let _ = writeln!(
        s,
        "\n## Larger-than-memory\n\n{}\n",
        if results.cgroup.is_empty() {
            "no LTM scenario in this run"
        } else {
            &results.cgroup
        }
    );
    s
}

/// The notice of a partial run: it stopped at its `--budget`, and these
/// cells (and phases) are missing. Empty for a complete run.
pub fn partial_md(results: &Results) -> String {
    if !results.is_partial() {
        return String::new();
    }
    let mut s = format!(
        "**Partial run.** It stopped at its `--budget` before measuring {} cell(s) or phase(s); \
         `vmemkv_report --resume=DIR` runs them. Missing:\n\n",
        results.missing.len()
    );
    for m in &results.missing {
        let _ = writeln!(s, "* {m}");
    }
    s.push('\n');
    s
}

fn fairness_md(results: &Results) -> String {
    let mut s = String::from("## Scaling and fairness\n\n");
    for (name, how) in &results.scenarios {
        let _ = writeln!(s, "* **{name}**: {how}");
    }
    s.push_str(
        "* Every engine gets the same db_bench key and value generator (16-byte keys, incompressible values: \
         `--compression_ratio=1`), the same durability (`sync=false`, WAL on), and no compression.\n\
         * Rivals use the original benchmark's settings adjusted to this machine (RocksDB: 256 MiB write buffers, \
         leveled compaction, background jobs = cores; BlobDB: `min_blob_size=256`, blob GC on; LMDB: write map). \
         In larger-than-memory scenarios RocksDB's write buffer is a quarter of the memory limit (two at most), \
         the original's 256 MiB-in-1 GiB proportion, so its memtables fit the cgroup.\n\
         * The page cache is dropped the same way (`/proc/sys/vm/drop_caches`) before every cold and every LTM run.\n\
         * Runs of different engines are interleaved within each cell and repeated; the median is reported.\n\
         * All vmemkv variants read the same loaded corpus; each rival loads its own with `fillseq`.\n",
    );
    s.push_str(&start_rules_md(results));
    s
}

/// How each run started (the same state for every engine) and whether a
/// warm-up preceded it, as the run recorded them; runs made before these
/// rules are described as they were.
fn start_rules_md(results: &Results) -> String {
    let mut s = String::new();
    if results.fresh_copies {
        s.push_str(
            "* **Same starting state.** A write cell (Update, YCSB-E, Delete) runs on a fresh copy of the \
             loaded corpus made just before the run (`cp -a --reflink=auto`: a reflink where the file \
             system offers one, else a copy) and removed after it; a read cell reopens the loaded corpus, \
             which no run changes; Insert starts from an empty database. No repeat, thread count or \
             workload inherits another run's writes.\n",
        );
    } else {
        s.push_str(
            "* Destructive workloads run after the read workloads, on the corpus the earlier cells changed; \
             Insert runs on a fresh, empty database.\n",
        );
    }
    let warm: Vec<&str> = ordered_unique(&results.runs, |r| r.workload.as_str())
        .into_iter()
        .filter(|w| results.runs.iter().any(|r| r.workload == *w && r.warmup))
        .collect();
    if !warm.is_empty() {
        let _ = writeln!(
            s,
            "* **Warm-up.** Before each measured run of {}, the same benchmark runs once in the same \
             process on the same open database and is not counted (`--benchmarks=b,b`, the second \
             result is reported), so page faults and first reads fall outside the measured window. \
             Insert and Delete take none (a second pass would find its keys written or deleted), nor \
             do the cold MultiScans (it would warm the cache they measure cold).",
            warm.join(", ")
        );
    }
    s
}

/// Every repeat's ops/sec per (scenario, workload, threads, variant).
fn repeats(results: &Results) -> BTreeMap<(String, String, usize, String), Vec<f64>> {
    let mut groups: BTreeMap<_, Vec<f64>> = BTreeMap::new();
    for r in &results.runs {
        if let Some(x) = r.ops_per_sec {
            groups
                .entry((
                    r.scenario.clone(),
                    r.workload.clone(),
                    r.threads,
                    r.variant.clone(),
                ))
                .or_default()
                .push(x);
        }
    }
    groups
}

/// The spread column: min-max and how far apart as a share of the median,
/// flagged when the repeats disagree by more than [`stats::UNSTEADY`].
fn spread_text(xs: &[f64]) -> String {
    match stats::spread(xs) {
        Some(_) if xs.len() < 2 => "- (1 run)".into(),
        Some((min, max, sp)) => {
            let flag = if sp > stats::UNSTEADY {
                " **unsteady**"
            } else {
                ""
            };
            format!(
                "{}-{} ({:.0}%){flag}",
                fmt_ops(min),
                fmt_ops(max),
                100.0 * sp
            )
        }
        None => "-".into(),
    }
}

/// The cells whose repeats disagree by more than [`stats::UNSTEADY`] of
/// their median, as `scenario | workload | Nt | variant`.
pub fn unsteady_cells(results: &Results) -> Vec<String> {
    repeats(results)
        .into_iter()
        .filter(|(_, xs)| xs.len() >= 2)
        .filter(|(_, xs)| stats::spread(xs).is_some_and(|(_, _, sp)| sp > stats::UNSTEADY))
        .map(|((sc, w, t, v), _)| format!("{sc} | {w} | {t}t | {v}"))
        .collect()
}

fn all_medians_md(results: &Results) -> String {
    let m = medians(results);
    let reps = repeats(results);
    let mut s = format!(
        "## All medians (ops/sec)\n\nspread: the slowest and fastest repeat and their distance as a share of the median; \
         **unsteady** marks repeats more than {:.0}% apart, a figure to rerun before trusting.\n\n\
         | scenario | workload | threads | variant | median ops/s | spread | peak mem |\n|---|---|---|---|---|---|---|\n",
        100.0 * stats::UNSTEADY
    );
    for ((sc, w, t, v), x) in &m {
        let spread = reps
            .get(&(sc.clone(), w.clone(), *t, v.clone()))
            .map_or_else(|| "-".to_string(), |xs| spread_text(xs));
        let peak = results
            .runs
            .iter()
            .filter(|r| &r.scenario == sc && &r.workload == w && r.threads == *t && &r.variant == v)
            .filter_map(|r| r.cgroup_peak_bytes.or(r.max_rss_kib.map(|k| k * 1024)))
            .max()
            .map_or("-".to_string(), |b| format!("{} MiB", b >> 20));
        let _ = writeln!(
            s,
            "| {sc} | {w} | {t} | {v} | {} | {spread} | {peak} |",
            fmt_ops(*x)
        );
    }
    let unsteady = unsteady_cells(results);
    if !unsteady.is_empty() {
        let _ = writeln!(
            s,
            "\n### Unsteady cells (repeats more than {:.0}% apart)\n",
            100.0 * stats::UNSTEADY
        );
        for c in unsteady {
            let _ = writeln!(s, "* {c}");
        }
    }
    for (status, title) in [
        ("failed", "Failed runs"),
        (
            super::OUT_OF_MEMORY,
            "Runs their scenario's memory cgroup killed",
        ),
    ] {
        let runs: Vec<&Run> = results.runs.iter().filter(|r| r.status == status).collect();
        if runs.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\n### {title}\n");
        for r in runs {
            let _ = writeln!(
                s,
                "* {} / {} / {}t / {}: {}",
                r.scenario,
                r.workload,
                r.threads,
                r.variant,
                r.note.as_deref().unwrap_or("")
            );
        }
    }
    s
}

/// The seed-004 section of `report.md`, empty when it did not run.
fn seed004_md(results: &Results) -> String {
    let table = super::seed004::table_md(&results.seed004);
    if table.is_empty() {
        return table;
    }
    format!(
        "## Seed 004: fill, then random reads on {} threads\n\n\
         `fillseq,flush` of {} keys (8 B keys, 1,024 B values), then `readrandom` with \
         `--threads={}` and `--reads={}` on the filled database, page cache warm; {} rounds, engines \
         interleaved, medians. Fill time counts the flush, where Sparkey builds its hash \
         index. Times relative to LMDB: below 1 is faster. The seed's columns are its own \
         machine's figures (koron/java-halodb-playground), as ratios to its LMDB.\n\n{table}\n",
        super::seed004::THREADS,
        results.seed004.first().map_or(0, |r| r.keys),
        super::seed004::THREADS,
        results.seed004.first().map_or(0, |r| r.reads_per_thread),
        results
            .seed004
            .iter()
            .map(|r| r.rep)
            .max()
            .map_or(0, |m| m + 1),
    )
}

fn fmt_bytes(b: f64) -> String {
    if b >= (1u64 << 20) as f64 {
        format!("{:.2} MiB", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// Median device bytes read per operation of `variant`'s runs in a cell.
fn bytes_per_op(results: &Results, sc: &str, w: &str, t: usize, variant: &str) -> Option<f64> {
    let per_op: Vec<f64> = results
        .runs
        .iter()
        .filter(|r| r.scenario == sc && r.workload == w && r.threads == t && r.variant == variant)
        .filter_map(|r| {
            let ops = r.operations.filter(|&n| n > 0)?;
            Some(r.device_read_bytes? as f64 / ops as f64)
        })
        .collect();
    stats::median(&per_op)
}

/// Median of fio's limit (ops/s) over a cell's repeats.
fn fio_limit(results: &Results, sc: &str, w: &str, t: usize) -> Option<f64> {
    let limits: Vec<f64> = results
        .device
        .runs
        .iter()
        .filter(|r| r.scenario == sc && r.workload == w && r.threads == t)
        .filter_map(|r| r.limit_ops)
        .collect();
    stats::median(&limits)
}

/// The best vmemkv variant's fraction of fio's limit, per workload of an
/// LTM scenario at `t` threads, for cells with both figures.
pub fn device_fractions(results: &Results, sc: &str, t: usize) -> Vec<(String, f64)> {
    let m = medians(results);
    ordered_unique(&results.runs, |r| r.workload.as_str())
        .into_iter()
        .filter_map(|w| {
            let limit = fio_limit(results, sc, w, t)?;
            let (_, x) = winner_cell(results, &m, sc, w, t).vmemkv?;
            Some((w.to_string(), x / limit))
        })
        .collect()
}

/// The device-limit tables, one per LTM scenario and thread count:
/// `(title, markdown table)`.
fn device_sections(results: &Results) -> Vec<(String, String)> {
    let d = &results.device;
    let m = medians(results);
    let rivals = rivals(results);
    let mut out = Vec::new();
    let mut cells: Vec<(&str, usize)> = d
        .runs
        .iter()
        .map(|r| (r.scenario.as_str(), r.threads))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // Scenarios in run order, threads ascending.
    let order = ordered_unique(&results.runs, |r| r.scenario.as_str());
    cells.sort_by_key(|(sc, t)| (order.iter().position(|o| o == sc), *t));
    for (sc, t) in cells {
        let mut table = String::from(
            "| workload | fio pattern | fio limit ops/s | best vmemkv ops/s | vmemkv / limit | bytes read per op: vmemkv |",
        );
        for r in &rivals {
            let _ = write!(table, " {r} |");
        }
        table.push_str("\n|---|---|---|---|---|---|");
        table.push_str(&"---|".repeat(rivals.len()));
        table.push('\n');
        let workloads = ordered_unique(&results.runs, |r| r.workload.as_str());
        for w in workloads {
            let fio: Vec<&super::device::FioRun> = d
                .runs
                .iter()
                .filter(|r| r.scenario == sc && r.workload == w && r.threads == t)
                .collect();
            let Some(first) = fio.first() else { continue };
            let limit = fio_limit(results, sc, w, t);
            let cell = winner_cell(results, &m, sc, w, t);
            let (pattern, limit_text) = match (limit, &first.note) {
                (Some(l), _) => (first.pattern.clone(), fmt_ops(l)),
                (None, Some(why)) if first.pattern.is_empty() => ("-".to_string(), why.clone()),
                (None, why) => (
                    first.pattern.clone(),
                    why.clone().unwrap_or_else(|| "-".into()),
                ),
            };
            let (vm_ops, frac, vm_bytes) = match &cell.vmemkv {
                Some((v, x)) => (
                    format!("{} ({v})", fmt_ops(*x)),
                    limit.map_or("-".into(), |l| format!("{:.0}%", 100.0 * x / l)),
                    bytes_per_op(results, sc, w, t, v).map_or("-".into(), fmt_bytes),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            let _ = write!(
                table,
                "| {w} | {pattern} | {limit_text} | {vm_ops} | {frac} | {vm_bytes} |"
            );
            for r in &rivals {
                let b = bytes_per_op(results, sc, w, t, r).map_or("-".into(), fmt_bytes);
                let _ = write!(table, " {b} |");
            }
            table.push('\n');
        }
        out.push((format!("{sc}, {t} threads"), table));
    }
    out
}

/// The device-limit section of `report.md`, empty when fio never ran.
fn device_md(results: &Results) -> String {
    let sections = device_sections(results);
    if sections.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "## Device limit (larger-than-memory cells)\n\n{}\n\n",
        device_intro(results)
    );
    for (title, table) in sections {
        let _ = writeln!(s, "### {title}\n\n{table}");
    }
    s
}

fn device_intro(results: &Results) -> String {
    format!(
        "Device `{}`; fio {}. After each repeat of a cell's engines, fio runs the I/O that one \
         operation of the cell needs when nothing is cached, with jobs = threads: a point read \
         reads its value's pages, a scan of 100 keys 100 values in one piece, a MultiScan 15 \
         such pieces (15 in flight when async), a write appends key and value. The limit is \
         fio's bytes/s over those bytes (median of the repeats). Bytes read per op are what each \
         engine's db_bench read from storage while the benchmark ran (`--device_reads`, from \
         /proc/self/io: the open left out; readahead, index reads and background threads \
         counted) over its operations, medians. Above 100% of the limit, part of the answers \
         came from the page cache.",
        results.device.disk, results.device.fio
    )
}

/// The whole `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut s = header_md(results);
    let _ = writeln!(
        s,
        "## Winner table\n\nBest vmemkv variant against the fastest rival at {} threads. WIN = at least 1.1x, LOSE = below 1/1.1x.\n",
        max_threads(results)
    );
    s.push_str(&winner_table_md(results));
    s.push('\n');
    s.push_str(&ceiling_md(results, max_threads(results)));
    s.push_str(&super::bgjobs::table_md(&results.background_jobs));
    s.push('\n');
    s.push_str(&device_md(results));
    s.push_str(&seed004_md(results));
    s.push_str(&fairness_md(results));
    s.push('\n');
    s.push_str(&all_medians_md(results));
    s
}

fn md_to_html_table(md: &str) -> String {
    let mut s = String::from("<table>\n");
    for (i, line) in md.lines().filter(|l| l.starts_with('|')).enumerate() {
        if i == 1 {
            continue; // the |---| separator
        }
        let tag = if i == 0 { "th" } else { "td" };
        s.push_str("<tr>");
        for cell in line.trim_matches('|').split('|') {
            let c = html_escape(cell.trim());
            let c = c
                .replace("**WIN**", "<b class=win>WIN</b>")
                .replace("**LOSE**", "<b class=lose>LOSE</b>")
                .replace("**EVEN**", "<b class=even>EVEN</b>");
            let _ = write!(s, "<{tag}>{c}</{tag}>");
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
    s
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn line_chart(title: &str, x_label: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (560, 320)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let xmax = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q.0))
            .fold(1.0f64, f64::max);
        let ymax = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q.1))
            .fold(1.0f64, f64::max)
            * 1.1;
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..xmax * 1.05, 0f64..ymax);
        let Ok(mut chart) = chart else {
            return svg_error(title);
        };
        let _ = chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc("ops/sec")
            .y_label_formatter(&|y| fmt_ops(*y))
            .draw();
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            if let Ok(ann) =
                chart.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            {
                ann.label(name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            }
            let _ = chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())));
        }
        let _ = chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw();
        let _ = root.present();
    }
    svg
}

fn bar_chart(title: &str, groups: &[(String, Vec<(String, f64)>)]) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (560, 320)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let n = groups.len().max(1);
        let ymax = groups
            .iter()
            .flat_map(|(_, b)| b.iter().map(|x| x.1))
            .fold(1.0f64, f64::max)
            * 1.15;
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..n as f64, 0f64..ymax);
        let Ok(mut chart) = chart else {
            return svg_error(title);
        };
        let labels: Vec<String> = groups.iter().map(|g| g.0.clone()).collect();
        let _ = chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| labels.get(x.floor() as usize).cloned().unwrap_or_default())
            .y_label_formatter(&|y| fmt_ops(*y))
            .draw();
        let series_names: Vec<String> = groups
            .iter()
            .flat_map(|g| g.1.iter().map(|b| b.0.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let k = series_names.len().max(1) as f64;
        for (si, sname) in series_names.iter().enumerate() {
            let color = PALETTE[si % PALETTE.len()];
            let bars = groups.iter().enumerate().filter_map(|(gi, g)| {
                let v = g.1.iter().find(|b| &b.0 == sname)?.1;
                let x0 = gi as f64 + 0.1 + 0.8 * si as f64 / k;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + 0.8 / k, v)],
                    color.filled(),
                ))
            });
            if let Ok(ann) = chart.draw_series(bars) {
                ann.label(sname.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 10, y + 4)], color.filled())
                });
            }
        }
        let _ = chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw();
        let _ = root.present();
    }
    svg
}

fn svg_error(title: &str) -> String {
    format!("<p>chart '{}' could not be drawn</p>", html_escape(title))
}

/// The whole `report.html`: tables plus inline SVG charts.
pub fn html(results: &Results) -> String {
    let m = medians(results);
    let mut s = String::from(
        "<!doctype html><html><head><meta charset=utf-8><title>vmemkv comparison</title><style>\
         body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}\
         table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px}\
         th{background:#f3f3f3}.win{color:#1a7f37}.lose{color:#cf222e}.even{color:#9a6700}\
         .charts{display:flex;flex-wrap:wrap;gap:8px}.charts div{border:1px solid #eee}</style></head><body>\n",
    );
    // Header and fairness notes as simple paragraphs.
    for line in header_md(results).lines() {
        if let Some(h) = line.strip_prefix("# ") {
            let _ = writeln!(s, "<h1>{}</h1>", html_escape(h));
        } else if let Some(h) = line.strip_prefix("## ") {
            let _ = writeln!(s, "<h2>{}</h2>", html_escape(h));
        } else if let Some(li) = line.strip_prefix("* ") {
            let _ = writeln!(s, "<li>{}</li>", html_escape(li));
        } else if !line.trim().is_empty() {
            let _ = writeln!(s, "<p>{}</p>", html_escape(line).replace("**", ""));
        }
    }
    let _ = writeln!(s, "<h2>Winner table</h2>");
    s.push_str(&md_to_html_table(&winner_table_md(results)));
    let ceiling = ceiling_md(results, max_threads(results));
    if !ceiling.is_empty() {
        let _ = writeln!(s, "<h2>Harness ceiling</h2>");
        s.push_str(&md_to_html_table(&ceiling));
    }
    let device = device_sections(results);
    if !device.is_empty() {
        let _ = writeln!(
            s,
            "<h2>Device limit (larger-than-memory cells)</h2><p>{}</p>",
            html_escape(&device_intro(results))
        );
        for (title, table) in device {
            let _ = writeln!(s, "<h3>{}</h3>", html_escape(&title));
            s.push_str(&md_to_html_table(&table));
        }
    }

    let scenarios = ordered_unique(&results.runs, |r| r.scenario.as_str());
    let workloads = ordered_unique(&results.runs, |r| r.workload.as_str());
    let variants = ordered_unique(&results.runs, |r| r.variant.as_str());

    let _ = writeln!(s, "<h2>Throughput against threads</h2>");
    for sc in &scenarios {
        let _ = writeln!(s, "<h3>{}</h3><div class=charts>", html_escape(sc));
        for w in &workloads {
            let series: Vec<(String, Vec<(f64, f64)>)> = variants
                .iter()
                .map(|v| {
                    let pts: Vec<(f64, f64)> = results
                        .threads
                        .iter()
                        .filter_map(|&t| {
                            m.get(&(sc.to_string(), w.to_string(), t, v.to_string()))
                                .map(|x| (t as f64, *x))
                        })
                        .collect();
                    (v.to_string(), pts)
                })
                .filter(|(_, p)| !p.is_empty())
                .collect();
            if !series.is_empty() {
                let _ = writeln!(
                    s,
                    "<div>{}</div>",
                    line_chart(&format!("{sc}: {w}"), "threads", &series)
                );
            }
        }
        s.push_str("</div>\n");
    }

    let _ = writeln!(s, "<h2>YCSB-E timeline</h2><div class=charts>");
    for sc in &scenarios {
        let series: Vec<(String, Vec<(f64, f64)>)> = results
            .runs
            .iter()
            .filter(|r| {
                &r.scenario == sc && r.workload == "YCSB-E" && r.rep == 0 && !r.timeline.is_empty()
            })
            .filter(|r| r.threads == max_threads(results))
            .map(|r| (r.variant.clone(), r.timeline.clone()))
            .collect();
        if !series.is_empty() {
            let _ = writeln!(
                s,
                "<div>{}</div>",
                line_chart(&format!("{sc}: YCSB-E per second"), "seconds", &series)
            );
        }
    }
    s.push_str("</div>\n");

    let _ = writeln!(
        s,
        "<h2>MultiScan: async against sync (cold cache)</h2><div class=charts>"
    );
    let t = max_threads(results);
    for sc in &scenarios {
        let groups: Vec<(String, Vec<(String, f64)>)> = variants
            .iter()
            .filter_map(|v| {
                let get = |w: &str| {
                    m.get(&(sc.to_string(), w.to_string(), t, v.to_string()))
                        .copied()
                };
                let bars: Vec<(String, f64)> = [
                    ("async", get("MultiScan async (cold)")),
                    ("sync", get("MultiScan sync (cold)")),
                ]
                .into_iter()
                .filter_map(|(n, x)| x.map(|x| (n.to_string(), x)))
                .collect();
                (!bars.is_empty()).then(|| (v.to_string(), bars))
            })
            .collect();
        if !groups.is_empty() {
            let _ = writeln!(
                s,
                "<div>{}</div>",
                bar_chart(&format!("{sc}: multiscan ops/sec, {t} threads"), &groups)
            );
        }
    }
    s.push_str("</div>\n");

    let bg = super::bgjobs::table_md(&results.background_jobs);
    if !bg.is_empty() {
        let _ = writeln!(s, "<h2>Background jobs</h2>");
        for p in bg
            .lines()
            .skip(1)
            .filter(|l| !l.starts_with('|') && !l.trim().is_empty())
        {
            let _ = writeln!(s, "<p>{}</p>", html_escape(p).replace(['*', '`'], ""));
        }
        s.push_str(&md_to_html_table(&bg));
        let groups = super::bgjobs::chart_groups(&results.background_jobs);
        if !groups.is_empty() {
            let _ = writeln!(
                s,
                "<div class=charts><div>{}</div></div>",
                bar_chart("Foreground throughput kept while the job runs (%)", &groups)
            );
        }
    }

    let seed = super::seed004::table_md(&results.seed004);
    if !seed.is_empty() {
        let _ = writeln!(s, "<h2>Seed 004: fill, then random reads on 8 threads</h2>");
        s.push_str(&md_to_html_table(&seed));
        let _ = writeln!(s, "<ul>");
        for l in seed.lines().filter_map(|l| l.strip_prefix("- ")) {
            let _ = writeln!(s, "<li>{}</li>", html_escape(l));
        }
        let _ = writeln!(s, "</ul>");
    }

    let _ = writeln!(s, "<h2>Scaling and fairness</h2><ul>");
    for line in fairness_md(results)
        .lines()
        .filter_map(|l| l.strip_prefix("* "))
    {
        let _ = writeln!(
            s,
            "<li>{}</li>",
            html_escape(line).replace("**", "").replace('`', "")
        );
    }
    s.push_str("</ul>\n");
    let _ = writeln!(s, "<h2>All medians</h2>");
    let all = all_medians_md(results);
    s.push_str(&md_to_html_table(
        all.split("### Failed runs").next().unwrap_or(""),
    ));
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::report) fn run(
        sc: &str,
        w: &str,
        v: &str,
        vm: bool,
        t: usize,
        rep: usize,
        x: f64,
    ) -> Run {
        Run {
            scenario: sc.into(),
            workload: w.into(),
            bench: "b".into(),
            variant: v.into(),
            engine: "e".into(),
            is_vmemkv: vm,
            threads: t,
            rep,
            status: "ok".into(),
            ops_per_sec: Some(x),
            micros_per_op: Some(1.0),
            operations: Some(1),
            max_rss_kib: None,
            cgroup_peak_bytes: None,
            oom_kills: 0,
            device_read_bytes: None,
            timeline: vec![],
            note: None,
            args: vec![],
            warmup: false,
            start: String::new(),
        }
    }

    pub(in crate::report) fn results(runs: Vec<Run>) -> Results {
        Results {
            scale: "smoke".into(),
            date: "d".into(),
            git_revision: "g".into(),
            machine: vec![],
            engines: vec![],
            scenarios: vec![],
            run_secs: 1,
            ltm_run_secs: 2,
            background_jobs: Vec::new(),
            seed004: Vec::new(),
            device: Default::default(),
            threads: vec![1, 4],
            repeats: 3,
            cgroup: String::new(),
            runs,
            missing: Vec::new(),
            resumed_from: Vec::new(),
            fresh_copies: false,
        }
    }

    #[test]
    fn the_header_says_when_windows_are_short() {
        let mut r = results(vec![]);
        assert!(header_md(&r).contains("**Short windows**"));
        r.run_secs = super::super::matrix::MEASURED_SECS;
        r.ltm_run_secs = super::super::matrix::MEASURED_SECS;
        assert!(!header_md(&r).contains("Short windows"));
    }

    #[test]
    fn spread_beside_the_median_and_unsteady_cells_flagged() {
        let mut runs = Vec::new();
        for (rep, (steady, wobbly)) in [(100.0, 100.0), (104.0, 130.0), (96.0, 90.0)]
            .into_iter()
            .enumerate()
        {
            runs.push(run("S", "W", "steady", true, 1, rep, steady));
            runs.push(run("S", "W", "wobbly", false, 1, rep, wobbly));
        }
        let r = results(runs);
        assert_eq!(unsteady_cells(&r), vec!["S | W | 1t | wobbly".to_string()]);
        let md = markdown(&r);
        assert!(
            md.contains("| S | W | 1 | steady | 100 | 96-104 (8%) |"),
            "{md}"
        );
        assert!(
            md.contains("| S | W | 1 | wobbly | 100 | 90-130 (40%) **unsteady** |"),
            "{md}"
        );
        assert!(md.contains("### Unsteady cells"), "{md}");
        assert_eq!(spread_text(&[5.0]), "- (1 run)");
    }

    #[test]
    fn the_report_states_the_starting_state_and_warm_up_rules() {
        let mut old = results(vec![run("S", "Get Miss", "v", true, 1, 0, 1.0)]);
        let md = markdown(&old);
        assert!(
            md.contains("Destructive workloads run after the read workloads"),
            "{md}"
        );
        assert!(!md.contains("Same starting state") && !md.contains("**Warm-up.**"));
        old.fresh_copies = true;
        old.runs[0].warmup = true;
        let md = markdown(&old);
        assert!(md.contains("**Same starting state.** A write cell"), "{md}");
        assert!(md.contains("`cp -a --reflink=auto`"), "{md}");
        assert!(
            md.contains("**Warm-up.** Before each measured run of Get Miss,"),
            "{md}"
        );
    }

    #[test]
    fn the_null_engine_is_a_ceiling_never_a_rival() {
        let mut runs = Vec::new();
        for rep in 0..3 {
            runs.push(run("S", "W", "vm", true, 4, rep, 300.0));
            runs.push(run("S", "W", "rival", false, 4, rep, 100.0));
            let mut c = run("S", "W", "null-ceiling", false, 4, rep, 1000.0);
            c.engine = "null".into();
            runs.push(c);
        }
        let r = results(runs);
        assert_eq!(rivals(&r), vec!["rival"]);
        let cells = winner_cells(&r, 4);
        assert_eq!(cells[0].2.rival, Some(("rival".to_string(), 100.0)));
        let md = markdown(&r);
        assert!(md.contains("## Harness ceiling, 4 threads"), "{md}");
        assert!(md.contains("| W | 1.0k ops/s; vmemkv 30% |"), "{md}");
        assert!(html(&r).contains("<h2>Harness ceiling</h2>"));
        // No ceiling runs, no section.
        assert_eq!(ceiling_md(&results(Vec::new()), 4), "");
    }

    #[test]
    fn a_partial_run_says_so_and_lists_what_is_missing() {
        let mut r = results(Vec::new());
        assert_eq!(partial_md(&r), "");
        assert!(!markdown(&r).contains("Partial run"));
        r.missing = vec!["8B-mem | Delete | 4t".into(), "seed 004".into()];
        let md = markdown(&r);
        assert!(md.contains("**Partial run.**"), "{md}");
        assert!(md.contains("* 8B-mem | Delete | 4t\n* seed 004\n"), "{md}");
    }

    #[test]
    fn winner_uses_medians_best_variant_and_fastest_rival() {
        let mut runs = Vec::new();
        for (rep, (a, b, r1, r2)) in [
            (100.0, 300.0, 100.0, 90.0),
            (110.0, 310.0, 150.0, 95.0),
            (900.0, 10.0, 120.0, 99.0),
        ]
        .into_iter()
        .enumerate()
        {
            runs.push(run("S", "W", "vm-a", true, 4, rep, a));
            runs.push(run("S", "W", "vm-b", true, 4, rep, b));
            runs.push(run("S", "W", "Rocks", false, 4, rep, r1));
            runs.push(run("S", "W", "LMDB", false, 4, rep, r2));
        }
        let res = results(runs);
        let m = medians(&res);
        let c = winner_cell(&res, &m, "S", "W", max_threads(&res));
        assert_eq!(c.vmemkv, Some(("vm-b".to_string(), 300.0)));
        assert_eq!(c.rival, Some(("Rocks".to_string(), 120.0)));
        assert_eq!(c.ratio(), Some(2.5));
        let table = winner_table_md(&res);
        assert!(
            table.contains("| W | **WIN** 2.50x vs Rocks (vm-b) |"),
            "{table}"
        );
    }

    #[test]
    fn html_is_self_contained_and_has_charts() {
        let runs = vec![
            run("S", "W", "vm", true, 1, 0, 5.0),
            run("S", "W", "vm", true, 4, 0, 9.5),
            run("S", "W", "R", false, 4, 0, 10.0),
        ];
        let h = html(&results(runs));
        assert!(h.contains("<svg"), "charts are inline SVG");
        for needle in ["src=", "href=", "<link", "@import", "url("] {
            assert!(
                !h.contains(needle),
                "report.html must not fetch anything ({needle})"
            );
        }
        assert!(h.contains("EVEN"));
    }

    #[test]
    fn device_table_gives_the_limit_the_fraction_and_bytes_per_op() {
        let w = "Get Hit (Uniform)";
        let mut vm = run("L", w, "vm", true, 2, 0, 900.0);
        vm.device_read_bytes = Some(4096 * 100);
        vm.operations = Some(100);
        let mut rival = run("L", w, "Rocks", false, 2, 0, 600.0);
        rival.device_read_bytes = Some(8192 * 100);
        rival.operations = Some(100);
        let mut res = results(vec![vm, rival]);
        res.device.disk = "vda".into();
        res.device.fio = "fio-3.33".into();
        res.device.runs.push(super::super::device::FioRun {
            scenario: "L".into(),
            workload: w.into(),
            threads: 2,
            rep: 0,
            pattern: "randread 4k qd1".into(),
            op_bytes: 4096,
            bw_bytes: Some(4096.0 * 1000.0),
            limit_ops: Some(1000.0),
            note: None,
        });
        let md = markdown(&res);
        assert!(md.contains("### L, 2 threads"), "{md}");
        assert!(
            md.contains("| Get Hit (Uniform) | randread 4k qd1 | 1.0k | 900 (vm) | 90% | 4.0 KiB | 8.0 KiB |"),
            "{md}"
        );
        assert!(html(&res).contains("<h3>L, 2 threads</h3>"));
        assert_eq!(device_fractions(&res, "L", 2), vec![(w.to_string(), 0.9)]);
        // No fio runs: no section at all.
        assert!(!markdown(&results(vec![])).contains("Device limit"));
    }
}
