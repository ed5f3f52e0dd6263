//! Runs that fit: `results.json` after every cell, `--resume DIR` and
//! `--budget=MINUTES`.
//!
//! A cell is one scenario x workload x thread count: every variant's
//! repeats, interleaved. It is the unit of resuming because the repeats
//! of one cell are interleaved across engines (fairness), so half a cell
//! would not be comparable with its other half measured another day.
//! `results.json` is rewritten after each cell, so a run stopped at any
//! point (killed, or out of budget) leaves every whole cell it measured.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{Results, Run};

/// One cell of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CellKey {
    /// Scenario name.
    pub scenario: String,
    /// Workload display name.
    pub workload: String,
    /// Threads.
    pub threads: usize,
}

impl CellKey {
    /// The cell `run` belongs to.
    pub fn of(run: &Run) -> CellKey {
        CellKey {
            scenario: run.scenario.clone(),
            workload: run.workload.clone(),
            threads: run.threads,
        }
    }
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} | {} | {}t",
            self.scenario, self.workload, self.threads
        )
    }
}

/// The cells `results` measured. A cell whose every run is `not run` (an
/// LTM scenario without a memory cgroup) is not done: a resumed run on a
/// machine that has one measures it.
pub fn done_cells(results: &Results) -> BTreeSet<CellKey> {
    results
        .runs
        .iter()
        .filter(|r| r.status != "not run")
        .map(CellKey::of)
        .collect()
}

/// Keeps only the runs of cells in `done` (drops a cell's `not run`
/// placeholders, which the resumed run replaces).
pub fn keep_done(runs: &mut Vec<Run>, done: &BTreeSet<CellKey>) {
    runs.retain(|r| done.contains(&CellKey::of(r)));
}

/// `dir`'s `results.json`, for `--resume`, checked to be of `scale`.
pub fn load(dir: &Path, scale: &str) -> Result<Results, String> {
    let p = dir.join("results.json");
    let text = std::fs::read_to_string(&p)
        .map_err(|e| format!("--resume: cannot read {}: {e}", p.display()))?;
    let prior: Results = serde_json::from_str(&text)
        .map_err(|e| format!("--resume: {} does not parse: {e}", p.display()))?;
    if prior.scale != scale {
        return Err(format!(
            "--resume: {} holds a --scale={} run; this run is --scale={scale}",
            p.display(),
            prior.scale
        ));
    }
    Ok(prior)
}

/// Parses `--budget=MINUTES`: a positive number of minutes (fractions
/// allowed).
pub fn parse_budget(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<f64>() {
        Ok(m) if m.is_finite() && m > 0.0 => Ok(Duration::from_secs_f64(m * 60.0)),
        _ => Err(format!(
            "--budget: expected a positive number of minutes, got '{v}'"
        )),
    }
}

/// The time a run may take, counted from its start.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    started: Instant,
    limit: Option<Duration>,
}

impl Budget {
    /// A budget of `limit` from now (`None`: unlimited).
    pub fn new(limit: Option<Duration>) -> Budget {
        Budget {
            started: Instant::now(),
            limit,
        }
    }

    /// Whether the run must stop before starting another cell or phase.
    /// Checked only at cell boundaries: a cell, once started, finishes.
    pub fn exhausted(&self) -> bool {
        self.limit.is_some_and(|l| self.started.elapsed() >= l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of the report's test fixture with `status`.
    fn run(sc: &str, wl: &str, threads: usize, status: &str) -> Run {
        Run {
            status: status.into(),
            ..crate::report::render::tests::run(sc, wl, "v", true, threads, 0, 1.0)
        }
    }

    #[test]
    fn a_cell_is_done_unless_every_run_of_it_was_not_run() {
        let mut runs = vec![
            run("8B-mem", "Get Miss", 1, "ok"),
            run("8B-mem", "Get Miss", 1, "failed"),
            run("8B-mem", "Get Miss", 2, "failed"),
            run("1KB-LTM", "Get Miss", 1, "not run"),
        ];
        let results = Results {
            runs: runs.clone(),
            ..Results::empty("smoke")
        };
        let done = done_cells(&results);
        let names: Vec<String> = done.iter().map(|c| c.to_string()).collect();
        assert_eq!(names, ["8B-mem | Get Miss | 1t", "8B-mem | Get Miss | 2t"]);
        keep_done(&mut runs, &done);
        assert_eq!(runs.len(), 3);
        assert!(runs.iter().all(|r| r.scenario == "8B-mem"));
    }

    #[test]
    fn budget_takes_positive_minutes_and_names_the_flag() {
        assert_eq!(parse_budget("2"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_budget("0.5"), Ok(Duration::from_secs(30)));
        for bad in ["", "0", "-1", "soon", "inf", "NaN"] {
            let e = parse_budget(bad).expect_err(bad);
            assert!(e.starts_with("--budget:") && e.contains(bad), "{e}");
        }
        assert!(!Budget::new(None).exhausted());
        assert!(Budget::new(Some(Duration::ZERO)).exhausted());
        assert!(!Budget::new(Some(Duration::from_secs(3600))).exhausted());
    }

    #[test]
    fn resume_refuses_a_missing_file_or_another_scale() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = load(dir.path(), "smoke").expect_err("no results.json");
        assert!(e.starts_with("--resume: cannot read"), "{e}");
        std::fs::write(dir.path().join("results.json"), "{").expect("write");
        let e = load(dir.path(), "smoke").expect_err("bad json");
        assert!(e.contains("does not parse"), "{e}");
        let json = serde_json::to_string(&Results::empty("full")).expect("json");
        std::fs::write(dir.path().join("results.json"), json).expect("write");
        let e = load(dir.path(), "smoke").expect_err("other scale");
        assert!(
            e.contains("--scale=full") && e.contains("--scale=smoke"),
            "{e}"
        );
        assert!(load(dir.path(), "full").is_ok());
    }
}
