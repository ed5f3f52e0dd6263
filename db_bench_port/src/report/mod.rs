//! The rival comparison: the original VMemKV benchmark matrix, run through
//! `db_bench` against every engine, written as `results.json`, `report.md`
//! and a self-contained `report.html` with charts.
//!
//! Fairness is built into the run order: within each cell (scenario x
//! workload x threads) the engines' runs are interleaved and repeated, and
//! the median is reported, so machine drift hits every engine alike.

pub mod bgjobs;
pub mod cgroup;
pub mod device;
pub mod matrix;
pub mod readme;
pub mod render;
pub mod resume;
pub mod runner;
pub mod seed004;
pub mod stats;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use matrix::{Scale, Scenario, Variant, Workload};

/// Settings of one report run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Size of the run.
    pub scale: Scale,
    /// The `db_bench` binary to drive.
    pub db_bench: PathBuf,
    /// Scratch space for the corpora (several GiB at full scale).
    pub work_dir: PathBuf,
    /// Where the report is written.
    pub out_dir: PathBuf,
    /// Include RocksDB, BlobDB and LMDB (needs a db_bench built with them).
    pub with_rivals: bool,
    /// Only these scenarios (by name); empty = all.
    pub only_scenarios: Vec<String>,
    /// Only these engine variants (by label); empty = all.
    pub only_variants: Vec<String>,
    /// Thread counts instead of the scale's; empty = the scale's.
    pub threads: Vec<usize>,
    /// `--resume`: continue the run in `out_dir`, skipping the cells its
    /// `results.json` already holds.
    pub resume: bool,
    /// `--budget`: stop at the first cell boundary past this time.
    pub budget: Option<std::time::Duration>,
}

/// One db_bench run in the matrix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// Scenario name.
    pub scenario: String,
    /// Workload display name.
    pub workload: String,
    /// db_bench benchmark.
    pub bench: String,
    /// Engine variant label.
    pub variant: String,
    /// `--engine=` value.
    pub engine: String,
    /// Whether the variant is vmemkv.
    pub is_vmemkv: bool,
    /// Threads.
    pub threads: usize,
    /// Repeat index.
    pub rep: usize,
    /// `ok`, `failed`, `out of memory` (its cgroup's OOM killer ended it),
    /// `not supported` or `not run`.
    pub status: String,
    /// Throughput.
    pub ops_per_sec: Option<f64>,
    /// Per-thread latency.
    pub micros_per_op: Option<f64>,
    /// Operations done.
    pub operations: Option<u64>,
    /// Peak RSS of the db_bench process, KiB.
    pub max_rss_kib: Option<u64>,
    /// Peak charge of the memory cgroup (LTM cells), bytes.
    pub cgroup_peak_bytes: Option<u64>,
    /// OOM kills in the cgroup during the run.
    pub oom_kills: u64,
    /// Bytes db_bench read from storage while the benchmark ran (its
    /// `--device_reads` line: the open is left out; readahead, index reads
    /// and the engine's background threads are counted).
    #[serde(default)]
    pub device_read_bytes: Option<u64>,
    /// Per-second throughput (YCSB-E), `(second, ops/sec)`.
    pub timeline: Vec<(f64, f64)>,
    /// Why the run failed or did not run.
    pub note: Option<String>,
    /// The exact db_bench arguments.
    pub args: Vec<String>,
    /// Whether an uncounted warm-up of the same benchmark ran first, in the
    /// same process.
    #[serde(default)]
    pub warmup: bool,
    /// The database the run started from: `corpus` (the loaded corpus,
    /// reopened untouched), `copy` (a fresh copy of it, for a write cell),
    /// `empty`; empty for runs made before the rule.
    #[serde(default)]
    pub start: String,
}

/// Everything `results.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// `smoke` or `full`.
    pub scale: String,
    /// UTC date of the run.
    pub date: String,
    /// Git revision of the tree that built db_bench.
    pub git_revision: String,
    /// CPU, cores, memory, kernel, disk.
    pub machine: Vec<(String, String)>,
    /// Engine versions.
    pub engines: Vec<(String, String)>,
    /// How each scenario was scaled.
    pub scenarios: Vec<(String, String)>,
    /// Seconds per in-memory run (0: bounded by operation count instead).
    pub run_secs: u64,
    /// Seconds per larger-than-memory run.
    #[serde(default)]
    pub ltm_run_secs: u64,
    /// Thread counts measured.
    pub threads: Vec<usize>,
    /// Repeats per cell.
    pub repeats: usize,
    /// Memory-limit status: which cgroup version, or why none.
    pub cgroup: String,
    /// Every run.
    pub runs: Vec<Run>,
    /// The background-jobs phase.
    #[serde(default)]
    pub background_jobs: Vec<bgjobs::BgRun>,
    /// Seed 004's fill-then-read benchmark.
    #[serde(default)]
    pub seed004: Vec<seed004::SeedRun>,
    /// The device: its name and fio's limit for each LTM cell.
    #[serde(default)]
    pub device: device::DeviceReport,
    /// What this run did not measure because it stopped at its
    /// `--budget` (cells as `scenario | workload | Nt`, and phases); empty
    /// when complete. `--resume` measures them.
    #[serde(default)]
    pub missing: Vec<String>,
    /// The earlier runs this one continues (`--resume`), each as its date
    /// and git revision; empty for a run made in one go.
    #[serde(default)]
    pub resumed_from: Vec<String>,
    /// Whether each write cell ran on a fresh copy of the loaded corpus
    /// and each read cell on the corpus untouched (false for runs made
    /// before that rule, when cells inherited each other's writes).
    #[serde(default)]
    pub fresh_copies: bool,
}

impl Results {
    /// No runs yet, at `scale`.
    pub fn empty(scale: &str) -> Results {
        Results {
            scale: scale.to_string(),
            date: String::new(),
            git_revision: String::new(),
            machine: Vec::new(),
            engines: Vec::new(),
            scenarios: Vec::new(),
            run_secs: 0,
            ltm_run_secs: 0,
            threads: Vec::new(),
            repeats: 0,
            cgroup: String::new(),
            runs: Vec::new(),
            background_jobs: Vec::new(),
            seed004: Vec::new(),
            device: device::DeviceReport::default(),
            missing: Vec::new(),
            resumed_from: Vec::new(),
            fresh_copies: false,
        }
    }

    /// Whether the run stopped before measuring everything.
    pub fn is_partial(&self) -> bool {
        !self.missing.is_empty()
    }
}

fn sh(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn machine_description(work_dir: &Path) -> Vec<(String, String)> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.trim_start_matches("MemTotal:").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let disk = sh("df", &["-hT", &work_dir.display().to_string()])
        .and_then(|s| {
            s.lines()
                .nth(1)
                .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_default();
    vec![
        ("cpu".into(), cpu),
        ("cores".into(), cores.to_string()),
        ("memory".into(), mem),
        ("kernel".into(), kernel.trim().to_string()),
        ("disk (device, fs, size)".into(), disk),
    ]
}

fn engine_versions(with_rivals: bool) -> Vec<(String, String)> {
    let mut v = vec![("vmemkv".to_string(), env!("CARGO_PKG_VERSION").to_string())];
    if with_rivals {
        v.push((
            "RocksDB".into(),
            "crate rocksdb 0.25 (bundled RocksDB, see db_bench header)".into(),
        ));
        v.push((
            "RocksDB-BlobDB".into(),
            "same build, integrated blob files".into(),
        ));
        v.push(("LMDB".into(), "crate heed 0.23 (bundled LMDB 0.9.x)".into()));
        v.push(("fjall".into(), "crate fjall 3, default options".into()));
        v.push((
            "fjall-blob".into(),
            "crate fjall 3, key-value separation (values of 1 KiB and more in blob files)".into(),
        ));
        v.push((
            "Sparkey".into(),
            "crate sparkey 0.1, write-once hash store: point operations only, its scan and MultiScan cells are 'not supported'".into(),
        ));
    }
    v.push((
        matrix::CEILING_LABEL.into(),
        "the null engine: stores nothing, so its figure is db_bench's own ceiling; not a rival"
            .into(),
    ));
    v.push((
        "HaloDB".into(),
        "not run: Java, not reachable from this machine's registries".into(),
    ));
    v
}

/// Progress on stderr: the current cell, runs done and left, elapsed, ETA.
struct Progress {
    total: usize,
    done: usize,
    started: Instant,
}

impl Progress {
    fn tick(&mut self, what: &str) {
        self.done += 1;
        let el = self.started.elapsed().as_secs_f64();
        let eta = if self.done > 0 {
            el / self.done as f64 * (self.total.saturating_sub(self.done)) as f64
        } else {
            0.0
        };
        eprint!(
            "\r\x1b[2K[{}/{}] {:>5.0}s elapsed, ETA {:>5.0}s  {what}",
            self.done, self.total, el, eta
        );
        let _ = std::io::stderr().flush();
    }
}

fn base_args(sc: &Scenario, db: &Path, engine: &str) -> Vec<String> {
    let mut args = vec![
        format!("--engine={engine}"),
        format!("--db={}", db.display()),
        format!("--num={}", sc.keys),
        "--key_size=16".into(),
        format!("--value_size={}", sc.value_size),
        "--compression_ratio=1".into(),
        "--compression_type=none".into(),
    ];
    if let (Some(limit), "rocksdb" | "blobdb") = (sc.mem_limit, engine) {
        // The original ran 256 MiB memtables in a 1 GiB budget; keep that
        // proportion, or the memtables alone exceed the cgroup and the
        // kernel OOM-kills RocksDB.
        args.push(format!("--write_buffer_size={}", rival_write_buffer(limit)));
        args.push("--max_write_buffer_number=2".into());
    }
    args
}

/// RocksDB's write buffer in a memory-limited scenario: a quarter of the
/// limit, as 256 MiB is of the original's 1 GiB.
pub fn rival_write_buffer(mem_limit: u64) -> u64 {
    mem_limit / 4
}

fn corpus_dir(cfg: &Config, sc: &Scenario, v: &Variant) -> PathBuf {
    // All vmemkv variants share one corpus: the ablation switches are
    // runtime settings over the same files.
    cfg.work_dir.join(sc.name).join(v.engine)
}

/// Runs the matrix and writes the report files. Returns the results.
pub fn run(cfg: &Config) -> Result<Results, String> {
    fs::create_dir_all(&cfg.work_dir).map_err(|e| format!("{}: {e}", cfg.work_dir.display()))?;
    fs::create_dir_all(&cfg.out_dir).map_err(|e| format!("{}: {e}", cfg.out_dir.display()))?;
    let (run_secs, ltm_run_secs, repeats) = matrix::timing(cfg.scale);
    let scenarios: Vec<Scenario> = matrix::scenarios(cfg.scale)
        .into_iter()
        .filter(|s| cfg.only_scenarios.is_empty() || cfg.only_scenarios.iter().any(|o| o == s.name))
        .collect();
    let mut variants = matrix::variants(cfg.scale, cfg.with_rivals);
    if let Some(bad) = cfg
        .only_variants
        .iter()
        .find(|o| !variants.iter().any(|v| v.label == o.as_str()))
    {
        let known: Vec<&str> = variants.iter().map(|v| v.label).collect();
        return Err(format!(
            "--variants: no variant '{bad}' (known: {})",
            known.join(", ")
        ));
    }
    if !cfg.only_variants.is_empty() {
        variants.retain(|v| cfg.only_variants.iter().any(|o| o == v.label));
    }
    let thread_counts = if cfg.threads.is_empty() {
        matrix::threads(cfg.scale)
    } else {
        cfg.threads.clone()
    };
    let workloads = matrix::workloads();
    let max_threads = thread_counts.iter().copied().max().unwrap_or(1);
    let runs_per_scenario: usize = thread_counts
        .iter()
        .map(|&t| {
            variants
                .iter()
                .filter(|v| v.all_threads || t == max_threads)
                .count()
        })
        .sum::<usize>()
        * repeats
        * workloads.len();
    let bg_variants = bgjobs::variants(&variants);
    let bg_runs = if scenarios.iter().any(|s| s.name == bgjobs::SCENARIO) {
        bgjobs::run_count(cfg.scale, &bg_variants)
    } else {
        0
    };
    let seed_variants = seed004::variants(&variants);
    let want_seed =
        cfg.only_scenarios.is_empty() || cfg.only_scenarios.iter().any(|o| o == seed004::SCENARIO);
    let seed_runs = if want_seed {
        seed004::run_count(cfg.scale, &seed_variants)
    } else {
        0
    };
    let scale = format!("{:?}", cfg.scale).to_lowercase();
    let prior = if cfg.resume {
        Some(resume::load(&cfg.out_dir, &scale)?)
    } else {
        None
    };
    let done = prior.as_ref().map(resume::done_cells).unwrap_or_default();
    let prior_cgroup = prior.as_ref().map(|p| p.cgroup.clone()).unwrap_or_default();
    let budget = resume::Budget::new(cfg.budget);
    let mut progress = Progress {
        total: (runs_per_scenario * scenarios.len() + bg_runs + seed_runs)
            .saturating_sub(prior.as_ref().map_or(0, |p| p.runs.len())),
        done: 0,
        started: Instant::now(),
    };
    let mut results = Results {
        scale: scale.clone(),
        date: sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).unwrap_or_default(),
        git_revision: sh("git", &["rev-parse", "--short", "HEAD"])
            .unwrap_or_else(|| "unknown".into()),
        machine: machine_description(&cfg.work_dir),
        engines: engine_versions(cfg.with_rivals),
        scenarios: scenarios
            .iter()
            .map(|s| (s.name.to_string(), s.scaling.to_string()))
            .collect(),
        run_secs,
        ltm_run_secs,
        threads: thread_counts.clone(),
        repeats,
        fresh_copies: true,
        ..Results::empty(&scale)
    };
    if let Some(prior) = prior {
        // Append to the earlier run: its measured cells, phases and fio
        // figures stay as they were; its date and revision are recorded.
        results.resumed_from = prior.resumed_from;
        results
            .resumed_from
            .push(format!("{} at git {}", prior.date, prior.git_revision));
        // A resumed run may cover other scenarios or thread counts: the
        // report describes both.
        for sc in prior.scenarios.into_iter().rev() {
            if !results.scenarios.iter().any(|(n, _)| *n == sc.0) {
                results.scenarios.insert(0, sc);
            }
        }
        results.threads.extend(prior.threads);
        results.threads.sort_unstable();
        results.threads.dedup();
        results.runs = prior.runs;
        resume::keep_done(&mut results.runs, &done);
        results.background_jobs = prior.background_jobs;
        results.seed004 = prior.seed004;
        results.device.runs = prior.device.runs;
        results.device.fio = prior.device.fio;
    }
    results.device.disk = match device::Disk::of(&cfg.work_dir) {
        Ok(d) => d.name,
        Err(e) => format!("unknown: {e}"),
    };
    // fio is looked for (and installed) only when an LTM scenario runs.
    let mut fio_program: Option<Result<(PathBuf, String), String>> = None;
    let mut cgroup_notes = Vec::new();
    for sc in &scenarios {
        let cell = |wl: &Workload, threads: usize| resume::CellKey {
            scenario: sc.name.to_string(),
            workload: wl.name.to_string(),
            threads,
        };
        let cells_left: Vec<resume::CellKey> = workloads
            .iter()
            .flat_map(|wl| thread_counts.iter().map(move |&t| (wl, t)))
            .map(|(wl, t)| cell(wl, t))
            .filter(|c| !done.contains(c))
            .collect();
        let bg_left = sc.name == bgjobs::SCENARIO
            && !sc.is_ltm()
            && !bg_variants.is_empty()
            && results.background_jobs.is_empty();
        if cells_left.is_empty() && !bg_left {
            // Measured by the run this one resumes: no corpus to load.
            let prefix = format!("{}: ", sc.name);
            cgroup_notes.extend(
                prior_cgroup
                    .split("; ")
                    .filter(|n| n.starts_with(&prefix))
                    .map(str::to_string),
            );
            continue;
        }
        if budget.exhausted() {
            results
                .missing
                .extend(cells_left.iter().map(|c| c.to_string()));
            if bg_left {
                results
                    .missing
                    .push(format!("{}: background jobs", sc.name));
            }
            continue;
        }
        let cg = match sc.mem_limit {
            Some(limit) => match cgroup::MemoryCgroup::create(
                &cgroup::Roots::default(),
                // One group per report process: two reports at once (a
                // CI smoke run beside a full run) must not share a limit,
                // or remove each other's group.
                &format!("vmemkv-report-{}", std::process::id()),
                limit,
            ) {
                Ok(cg) => {
                    cgroup_notes.push(format!(
                        "{}: cgroup {:?}, limit {} MiB",
                        sc.name,
                        cg.version(),
                        limit >> 20
                    ));
                    Some(Ok(cg))
                }
                Err(e) => {
                    cgroup_notes.push(format!(
                        "{}: NOT RUN, no writable memory cgroup: {}",
                        sc.name, e.0
                    ));
                    Some(Err(e))
                }
            },
            None => None,
        };
        let ltm_unavailable = matches!(cg, Some(Err(_)));
        if !ltm_unavailable {
            load_corpora(cfg, sc, &variants)?;
        }
        let fio = if sc.is_ltm() && !ltm_unavailable {
            prepare_fio(cfg, sc, &mut fio_program, &mut results.device)
        } else {
            None
        };
        let mut fio_seen = std::collections::BTreeMap::new();
        for wl in &workloads {
            for &threads in &thread_counts {
                let key = cell(wl, threads);
                if done.contains(&key) {
                    continue;
                }
                if budget.exhausted() {
                    // Stop cleanly at a cell boundary: the report says
                    // which cells are missing and `--resume` runs them.
                    results.missing.push(key.to_string());
                    continue;
                }
                for rep in 0..repeats {
                    for v in variants
                        .iter()
                        .filter(|v| v.all_threads || threads == max_threads)
                    {
                        let label = format!(
                            "{} | {} | {}t | {} | rep {}",
                            sc.name,
                            wl.name,
                            threads,
                            v.label,
                            rep + 1
                        );
                        progress.tick(&label);
                        let mut run = Run {
                            scenario: sc.name.into(),
                            workload: wl.name.into(),
                            bench: wl.bench.into(),
                            variant: v.label.into(),
                            engine: v.engine.into(),
                            is_vmemkv: v.is_vmemkv,
                            threads,
                            rep,
                            status: "not run".into(),
                            ops_per_sec: None,
                            micros_per_op: None,
                            operations: None,
                            max_rss_kib: None,
                            cgroup_peak_bytes: None,
                            oom_kills: 0,
                            device_read_bytes: None,
                            timeline: Vec::new(),
                            note: None,
                            args: Vec::new(),
                            warmup: false,
                            start: String::new(),
                        };
                        if ltm_unavailable {
                            run.note = Some(
                                "no writable memory cgroup; never run in memory instead".into(),
                            );
                            results.runs.push(run);
                            continue;
                        }
                        let cg_ref = cg.as_ref().and_then(|r| r.as_ref().ok());
                        run_cell(
                            cfg,
                            sc,
                            wl,
                            v,
                            threads,
                            if sc.is_ltm() { ltm_run_secs } else { run_secs },
                            max_threads,
                            cg_ref,
                            &mut run,
                        );
                        results.runs.push(run);
                    }
                    if sc.is_ltm() && !ltm_unavailable {
                        let r = fio_limit(
                            fio.as_ref(),
                            sc,
                            wl,
                            threads,
                            rep,
                            ltm_run_secs.max(1),
                            &mut fio_seen,
                        );
                        results.device.runs.push(r);
                    }
                }
                // After every cell: a run stopped part-way (killed, or
                // out of budget) leaves every whole cell it measured, for
                // `--resume`.
                write_results_json(cfg, &results)?;
            }
            // The reports after every workload (rendering every cell
            // would cost more than a smoke cell).
            results.cgroup = cgroup_notes.join("; ");
            write_outputs(cfg, &results)?;
        }
        if bg_left && budget.exhausted() {
            results
                .missing
                .push(format!("{}: background jobs", sc.name));
        } else if bg_left {
            // The write cells ran on copies, but the read cells' opens may
            // have changed a corpus's layout (vmemkv's key-order pass):
            // start the jobs from freshly loaded ones.
            load_corpora(cfg, sc, &bg_variants)?;
            results.background_jobs = bgjobs::run(
                &cfg.db_bench,
                cfg.scale,
                sc,
                &bg_variants,
                |v| base_args(sc, &corpus_dir(cfg, sc, v), v.engine),
                |v| corpus_dir(cfg, sc, v),
                |label| progress.tick(label),
            );
        }
        // Free the disk before the next scenario's corpora.
        let _ = fs::remove_dir_all(cfg.work_dir.join(sc.name));
        // Write what is done so far: a run stopped part-way (or killed)
        // still leaves every finished scenario in the report.
        results.cgroup = cgroup_notes.join("; ");
        write_outputs(cfg, &results)?;
    }
    if want_seed && !results.seed004.is_empty() {
        // Measured by the run this one resumes.
    } else if want_seed && budget.exhausted() {
        results.missing.push("seed 004".into());
    } else if want_seed {
        results.seed004 = seed004::run(
            &cfg.db_bench,
            cfg.scale,
            &cfg.work_dir,
            &seed_variants,
            |label| progress.tick(label),
        );
    }
    eprintln!();
    results.cgroup = cgroup_notes.join("; ");
    write_outputs(cfg, &results)?;
    Ok(results)
}

/// fio on a scratch file beside `sc`'s corpora, or `None` (with the reason
/// in `device.fio`) when fio is missing or cannot run.
fn prepare_fio(
    cfg: &Config,
    sc: &Scenario,
    program: &mut Option<Result<(PathBuf, String), String>>,
    device: &mut device::DeviceReport,
) -> Option<device::Fio> {
    let (path, version) = match program.get_or_insert_with(device::find_fio) {
        Ok(p) => p.clone(),
        Err(e) => {
            device.fio = e.clone();
            return None;
        }
    };
    // Random offsets over at most 1 GiB: a virtual disk has no seek cost,
    // and laying out more would only lengthen the run.
    let size = (sc.keys * sc.value_size as u64).clamp(64 << 20, 1 << 30);
    eprint!(
        "\r\x1b[2Klaying out {} MiB for fio ({})",
        size >> 20,
        sc.name
    );
    match device::Fio::prepare(path, cfg.work_dir.join(sc.name).join("fio.dat"), size) {
        Ok(f) => {
            device.fio = format!("{version}, {}", f.describe());
            Some(f)
        }
        Err(e) => {
            device.fio = format!("{version} could not run: {e}");
            None
        }
    }
}

/// fio's limit for one LTM cell at one repeat. Cells that share a pattern
/// share one measurement per repeat and thread count.
fn fio_limit(
    fio: Option<&device::Fio>,
    sc: &Scenario,
    wl: &Workload,
    threads: usize,
    rep: usize,
    secs: u64,
    seen: &mut std::collections::BTreeMap<(device::Pattern, usize, usize), Result<f64, String>>,
) -> device::FioRun {
    let mut r = device::FioRun {
        scenario: sc.name.into(),
        workload: wl.name.into(),
        threads,
        rep,
        pattern: String::new(),
        op_bytes: 0,
        bw_bytes: None,
        limit_ops: None,
        note: None,
    };
    let p = match device::pattern(sc, wl) {
        Ok(p) => p,
        Err(why) => {
            r.note = Some(why.into());
            return r;
        }
    };
    r.pattern = p.label();
    r.op_bytes = p.op_bytes;
    let Some(fio) = fio else {
        r.note = Some("fio did not run".into());
        return r;
    };
    let bw = seen
        .entry((p, threads, rep))
        .or_insert_with(|| fio.measure(&p, threads, secs))
        .clone();
    match bw {
        Ok(bw) => {
            r.bw_bytes = Some(bw);
            r.limit_ops = Some(bw / p.op_bytes as f64);
        }
        Err(e) => r.note = Some(e),
    }
    r
}

fn load_corpora(cfg: &Config, sc: &Scenario, variants: &[Variant]) -> Result<(), String> {
    let mut loaded = std::collections::BTreeSet::new();
    for v in variants {
        if !loaded.insert(v.engine) {
            continue;
        }
        let dir = corpus_dir(cfg, sc, v);
        let _ = fs::remove_dir_all(&dir);
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let mut args = base_args(sc, &dir, v.engine);
        args.push("--benchmarks=fillseq".into());
        args.push("--use_existing_db=0".into());
        eprint!(
            "\r\x1b[2Kloading {} corpus for {} ({} keys)",
            sc.name, v.engine, sc.keys
        );
        let out = runner::run_db_bench(&cfg.db_bench, &args, None);
        if let Some(e) = out.error {
            return Err(format!("loading {} for {}: {e}", sc.name, v.engine));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_cell(
    cfg: &Config,
    sc: &Scenario,
    wl: &Workload,
    v: &Variant,
    threads: usize,
    run_secs: u64,
    max_threads: usize,
    cg: Option<&cgroup::MemoryCgroup>,
    run: &mut Run,
) {
    // The same starting state for every run: a read cell reopens the
    // loaded corpus, which no run changes; a write cell gets a fresh copy
    // of it (a reflink where the file system offers one), so no repeat,
    // thread count or later workload inherits another run's writes.
    let (db, start) = if wl.fresh_db {
        let d = cfg
            .work_dir
            .join(sc.name)
            .join(format!("fresh-{}", v.engine));
        let _ = fs::remove_dir_all(&d);
        (d, "empty")
    } else if wl.writes {
        let d = cfg
            .work_dir
            .join(sc.name)
            .join(format!("copy-{}", v.engine));
        if let Err(e) = fresh_copy(&corpus_dir(cfg, sc, v), &d) {
            run.status = "failed".into();
            run.note = Some(e);
            return;
        }
        (d, "copy")
    } else {
        (corpus_dir(cfg, sc, v), "corpus")
    };
    run.start = start.into();
    let secs = if wl.timeline && threads == max_threads && run_secs > 0 {
        run_secs.max(matrix::TIMELINE_SECS)
    } else {
        run_secs
    };
    let mut args = base_args(sc, &db, v.engine);
    // The warm-up: the same benchmark first, in the same process and on
    // the same open database; run_db_bench keeps the last result line and
    // the last device-reads line, the measured run's.
    run.warmup = wl.warmup;
    if wl.warmup {
        args.push(format!("--benchmarks={},{}", wl.bench, wl.bench));
    } else {
        args.push(format!("--benchmarks={}", wl.bench));
    }
    args.push(format!("--threads={threads}"));
    if secs == 0 {
        let n = matrix::SMOKE_OPS;
        args.extend([
            format!("--reads={n}"),
            format!("--writes={n}"),
            format!("--deletes={n}"),
        ]);
    } else {
        args.push(format!("--duration={secs}"));
        if wl.cold || sc.is_ltm() {
            // db_bench reads the clock every 1,000 ops by default. A cold
            // 64 KiB scan takes ~10 ms, so a "2 s" run went on for 30-50 s
            // and measured a cache it had warmed itself. Check every op.
            args.push("--ops_between_duration_checks=1".into());
        }
    }
    args.push(format!("--use_existing_db={}", u8::from(!wl.fresh_db)));
    args.push("--device_reads=1".into());
    args.extend(wl.flags.iter().map(|s| s.to_string()));
    args.extend(v.flags.iter().map(|s| s.to_string()));
    if wl.bench == "multiscan" {
        // Spread the ranges across the key space as the seed run does.
        let stride = (sc.keys / 200).max(1);
        args.push(format!("--multiscan_stride={stride}"));
    }
    let report_file = wl.timeline.then(|| cfg.work_dir.join("timeline.csv"));
    if let Some(f) = &report_file {
        let _ = fs::remove_file(f);
        args.push(format!("--report_file={}", f.display()));
        args.push("--report_interval_seconds=1".into());
    }
    if wl.cold || sc.is_ltm() {
        if let Err(e) = cgroup::drop_page_cache() {
            run.note = Some(format!("page cache not dropped: {e}"));
        }
    }
    // A timed run that takes ten times its length and a minute more is
    // stuck, not slow; op-bounded smoke runs get ten minutes.
    let timeout = if secs == 0 { 600 } else { 60 + 10 * secs };
    let out = runner::run_db_bench_within(
        &cfg.db_bench,
        &args,
        cg,
        Some(std::time::Duration::from_secs(timeout)),
    );
    if start == "copy" || start == "empty" {
        // Free the disk for the next run's copy; keep nothing a later
        // run could start from.
        let _ = fs::remove_dir_all(&db);
    }
    run.device_read_bytes = runner::parse_device_reads(&out.stdout);
    run.args = args;
    run.max_rss_kib = out.max_rss_kib;
    run.cgroup_peak_bytes = out.cgroup_peak_bytes;
    run.oom_kills = out.oom_kills;
    if let Some(f) = &report_file {
        run.timeline = fs::read_to_string(f)
            .map(|t| runner::parse_report_csv(&t))
            .unwrap_or_default();
    }
    let skipped = format!("Skipped benchmark {}: ", wl.bench);
    if let Some(why) = out.stdout.lines().find_map(|l| l.strip_prefix(&skipped)) {
        // The engine lacks what the workload needs (Sparkey has no key
        // order): not a failure, and no figure for the winner table.
        run.status = "not supported".into();
        run.note = Some(why.to_string());
        return;
    }
    // With a warm-up, the measured run is the second result line; one line
    // alone is the warm-up's, and must not pass for the measurement.
    let measured = if wl.warmup && out.results.len() < 2 {
        None
    } else {
        out.results.last()
    };
    match (&out.error, measured) {
        (None, Some(r)) => {
            run.status = "ok".into();
            run.ops_per_sec = Some(r.ops_per_sec);
            run.micros_per_op = Some(r.micros_per_op);
            run.operations = Some(r.operations);
        }
        (err, _) => {
            let err = err.clone().unwrap_or_else(|| "no result line".into());
            let (status, note) = failure_status(&err, out.oom_kills, sc.mem_limit);
            run.status = status.into();
            run.note = Some(note);
        }
    }
}

/// A fresh copy of the corpus `from` at `to` (replacing it):
/// `cp -a --reflink=auto`, a reflink where the file system offers one
/// (btrfs, XFS), else a plain copy.
fn fresh_copy(from: &Path, to: &Path) -> Result<(), String> {
    let _ = fs::remove_dir_all(to);
    let out = std::process::Command::new("cp")
        .arg("-a")
        .arg("--reflink=auto")
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| format!("copying the corpus {}: cp: {e}", from.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "copying the corpus {} to {}: {}",
            from.display(),
            to.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// What a run that gave no result is: an engine that the scenario's memory
/// cgroup killed did not fit the scenario, which is a finding about that
/// engine (the report lists it), not a fault of the harness.
fn failure_status(err: &str, oom_kills: u64, mem_limit: Option<u64>) -> (&'static str, String) {
    match mem_limit {
        Some(limit) if oom_kills > 0 => (
            OUT_OF_MEMORY,
            format!(
                "killed by its {} MiB memory cgroup's OOM killer ({oom_kills} kill(s)): {err}",
                limit >> 20
            ),
        ),
        _ => ("failed", err.to_string()),
    }
}

/// The status of a run that its scenario's memory cgroup killed.
pub const OUT_OF_MEMORY: &str = "out of memory";

fn write_outputs(cfg: &Config, results: &Results) -> Result<(), String> {
    write_results_json(cfg, results)?;
    write_reports(&cfg.out_dir, results)
}

/// `results.json`, written whole to a temporary file and renamed over the
/// old one, so a run killed while writing leaves the previous cell's file
/// rather than half of this one's.
fn write_results_json(cfg: &Config, results: &Results) -> Result<(), String> {
    let json = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    let p = cfg.out_dir.join("results.json");
    let tmp = cfg.out_dir.join("results.json.tmp");
    fs::write(&tmp, json).map_err(|e| format!("{}: {e}", tmp.display()))?;
    fs::rename(&tmp, &p).map_err(|e| format!("{}: {e}", p.display()))
}

/// `report.md` and `report.html` of `results` into `dir`.
pub fn write_reports(dir: &Path, results: &Results) -> Result<(), String> {
    let write = |name: &str, body: &str| {
        let p = dir.join(name);
        fs::write(&p, body).map_err(|e| format!("{}: {e}", p.display()))
    };
    write("report.md", &render::markdown(results))?;
    write("report.html", &render::html(results))
}

/// Re-renders `dir`'s reports from its `results.json` (after a change to
/// the rendering; the figures are the run's own).
pub fn rerender(dir: &Path) -> Result<(), String> {
    let p = dir.join("results.json");
    let text = fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let results: Results =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
    write_reports(dir, &results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_copy_replaces_the_target_and_leaves_the_corpus_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let corpus = dir.path().join("corpus");
        let copy = dir.path().join("copy");
        fs::create_dir_all(corpus.join("sub")).expect("mkdir");
        fs::write(corpus.join("a.seg"), b"loaded").expect("write");
        fs::write(corpus.join("sub/b"), b"x").expect("write");
        // A previous run's copy, with its writes, is replaced whole.
        fs::create_dir_all(&copy).expect("mkdir");
        fs::write(copy.join("stale"), b"old run").expect("write");
        fresh_copy(&corpus, &copy).expect("copy");
        assert!(!copy.join("stale").exists());
        assert_eq!(fs::read(copy.join("a.seg")).expect("read"), b"loaded");
        assert_eq!(fs::read(copy.join("sub/b")).expect("read"), b"x");
        // Writing to the copy (a reflink or not) leaves the corpus as loaded.
        fs::write(copy.join("a.seg"), b"changed").expect("write");
        assert_eq!(fs::read(corpus.join("a.seg")).expect("read"), b"loaded");
        let e = fresh_copy(&dir.path().join("missing"), &copy).expect_err("no corpus");
        assert!(e.contains("copying the corpus"), "{e}");
    }

    #[test]
    fn a_cgroup_kill_is_out_of_memory_and_any_other_end_a_failure() {
        let (status, note) = failure_status("exit None", 1, Some(256 << 20));
        assert_eq!(status, OUT_OF_MEMORY);
        assert!(
            note.contains("256 MiB") && note.contains("exit None"),
            "{note}"
        );
        // Without a cgroup, or with no kill counted, nothing says it was memory.
        assert_eq!(failure_status("exit None", 0, Some(256 << 20)).0, "failed");
        assert_eq!(failure_status("exit None", 3, None).0, "failed");
    }
}
