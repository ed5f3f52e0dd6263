//! Runs the rival comparison matrix through `db_bench` and writes a report
//! directory: `results.json`, `report.md`, `report.html`.
//!
//! ```text
//! vmemkv_report --scale=smoke|full [--out=DIR] [--work-dir=DIR] [--db-bench=PATH]
//!               [--rivals=auto|0|1] [--scenarios=8B-mem,1KB-LTM] [--threads=1,2,4]
//!               [--variants=vmemkv+Prefault,RocksDB] [--resume=DIR] [--budget=MINUTES]
//! vmemkv_report --readme[=README.md] [--results=docs/results] [--readme-check]
//! vmemkv_report --render=DIR
//! ```
//!
//! `--resume=DIR` continues the run whose report is in DIR (and writes
//! there): the cells its `results.json` holds are kept, the rest are run.
//! `--budget=MINUTES` starts no cell after that time; the report then says
//! it is partial and lists the missing cells.
//!
//! `--readme` runs nothing: it regenerates README.md's comparison block
//! from the committed `results.json` files (`report/readme.rs`).

#[path = "../report/mod.rs"]
mod report;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut scale = report::matrix::Scale::Smoke;
    let mut out = PathBuf::from("report");
    let mut work = std::env::temp_dir().join("vmemkv-report-work");
    let mut db_bench: Option<PathBuf> = None;
    let mut rivals = "auto".to_string();
    let mut only = Vec::new();
    let mut threads = Vec::new();
    let mut variants = Vec::new();
    let (default_readme, default_results) = report::readme::workspace_paths();
    let mut readme: Option<PathBuf> = None;
    let mut results_dir = default_results;
    let mut readme_check = false;
    let mut resume: Option<PathBuf> = None;
    let mut out_set = false;
    let mut budget = None;
    for arg in std::env::args().skip(1) {
        let (k, v) = arg.split_once('=').unwrap_or((arg.as_str(), ""));
        match k {
            "--scale" => match v.parse() {
                Ok(s) => scale = s,
                Err(e) => {
                    eprintln!("vmemkv_report: {e}");
                    return ExitCode::from(2);
                }
            },
            "--out" => {
                out = PathBuf::from(v);
                out_set = true;
            }
            "--resume" if v.is_empty() => {
                eprintln!("vmemkv_report: --resume: expected --resume=DIR, the directory of the run to continue");
                return ExitCode::from(2);
            }
            "--resume" => resume = Some(PathBuf::from(v)),
            "--budget" => match report::resume::parse_budget(v) {
                Ok(b) => budget = Some(b),
                Err(e) => {
                    eprintln!("vmemkv_report: {e}");
                    return ExitCode::from(2);
                }
            },
            "--work-dir" => work = PathBuf::from(v),
            "--db-bench" => db_bench = Some(PathBuf::from(v)),
            "--rivals" => rivals = v.to_string(),
            "--readme" if v.is_empty() => readme = Some(default_readme.clone()),
            "--readme" => readme = Some(PathBuf::from(v)),
            "--readme-check" => readme_check = true,
            "--render" => {
                return match report::rerender(std::path::Path::new(v)) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("vmemkv_report: {e}");
                        ExitCode::FAILURE
                    }
                };
            }
            "--results" => results_dir = PathBuf::from(v),
            "--scenarios" => only = v.split(',').map(str::to_string).collect(),
            "--variants" => variants = v.split(',').map(str::to_string).collect(),
            "--threads" => match v.split(',').map(str::parse::<usize>).collect() {
                Ok(t) if !v.is_empty() => threads = t,
                _ => {
                    eprintln!("vmemkv_report: --threads: expected a list like 1,2,4, got '{v}'");
                    return ExitCode::from(2);
                }
            },
            "--help" | "-h" => {
                println!("usage: vmemkv_report --scale=smoke|full [--out=DIR] [--work-dir=DIR] [--db-bench=PATH] [--rivals=auto|0|1] [--scenarios=a,b] [--threads=1,2,4] [--variants=label,..] [--resume=DIR] [--budget=MINUTES]");
                println!("       vmemkv_report --readme[=README.md] [--results=docs/results] [--readme-check]");
                println!("       vmemkv_report --render=DIR   (report.md and report.html again from DIR/results.json)");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("vmemkv_report: unknown flag '{arg}'");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(dir) = &resume {
        // A resumed run writes where the run it continues wrote.
        if out_set && out != *dir {
            eprintln!(
                "vmemkv_report: --resume={} writes there; drop --out={} or make it the same directory",
                dir.display(),
                out.display()
            );
            return ExitCode::from(2);
        }
        out = dir.clone();
    }
    if readme_check && readme.is_none() {
        readme = Some(default_readme);
    }
    if let Some(path) = readme {
        return match report::readme::update(&path, &results_dir, readme_check) {
            Ok(true) => {
                println!("{} is current", path.display());
                ExitCode::SUCCESS
            }
            Ok(false) if readme_check => {
                eprintln!(
                    "vmemkv_report: {}'s generated block is stale; run vmemkv_report --readme",
                    path.display()
                );
                ExitCode::FAILURE
            }
            Ok(false) => {
                println!(
                    "{} rewritten from {}",
                    path.display(),
                    results_dir.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("vmemkv_report: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // By default drive the db_bench built next to this binary.
    let db_bench = db_bench.unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("db_bench")))
            .unwrap_or_else(|| PathBuf::from("db_bench"))
    });
    let with_rivals = match rivals.as_str() {
        "1" | "true" => true,
        "0" | "false" => false,
        _ => rivals_compiled_into(&db_bench),
    };
    let cfg = report::Config {
        scale,
        db_bench,
        work_dir: work,
        out_dir: out.clone(),
        with_rivals,
        only_scenarios: only,
        only_variants: variants,
        threads,
        resume: resume.is_some(),
        budget,
    };
    match report::run(&cfg) {
        Ok(res) => {
            let failed = res.runs.iter().filter(|r| r.status == "failed").count();
            println!("{}", report::render::winner_table_md(&res));
            println!(
                "report written to {} ({} runs, {} failed)",
                out.display(),
                res.runs.len(),
                failed
            );
            if res.is_partial() {
                println!(
                    "partial: the budget ran out with {} cell(s) or phase(s) not measured; continue with --resume={}",
                    res.missing.len(),
                    out.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vmemkv_report: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Asks db_bench whether it can open RocksDB: an engine that is not compiled
/// in fails at once with a message naming the cargo feature.
fn rivals_compiled_into(db_bench: &std::path::Path) -> bool {
    let dir = std::env::temp_dir().join(format!("vmemkv-report-probe-{}", std::process::id()));
    let ok = std::process::Command::new(db_bench)
        .args(["--engine=rocksdb", "--benchmarks=fillseq", "--num=1"])
        .arg(format!("--db={}", dir.display()))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let _ = std::fs::remove_dir_all(&dir);
    ok
}
