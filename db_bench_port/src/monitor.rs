//! Work that runs beside a benchmark's threads: the `--report_file` CSV,
//! the per-second timeline, and injected maintenance calls.
//!
//! The reporter reads each worker's own counter (one cache line each), so
//! the workers never contend on a shared atomic as db_bench's
//! `ReporterAgent` makes them do.

use std::io::Write as _;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use vmemkv_compat::Db;

use crate::config::Maintenance;
use crate::workloads::Shared;

/// A stop signal for the helper threads.
#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl StopSignal {
    /// Wakes every waiter and makes later waits return at once.
    pub fn stop(&self) {
        if let Ok(mut s) = self.stopped.lock() {
            *s = true;
        }
        self.cv.notify_all();
    }

    /// Sleeps until `deadline` or a stop; returns true if stopped.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let Ok(mut s) = self.stopped.lock() else {
            return true;
        };
        loop {
            if *s {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            match self.cv.wait_timeout(s, deadline - now) {
                Ok((g, _)) => s = g,
                Err(_) => return true,
            }
        }
    }
}

/// What the reporter produced.
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    /// `(seconds elapsed, ops in that second)` for every full second.
    pub per_second: Vec<(u64, u64)>,
    /// A failure writing the report file.
    pub report_error: Option<String>,
}

/// Samples the workers' counters every second (timeline) and every
/// `report_interval` seconds (`secs_elapsed,interval_qps` CSV rows).
pub fn run_reporter(
    shared: &Shared,
    stop: &StopSignal,
    start: Instant,
    timeline: bool,
    report: Option<(&str, u64)>,
) -> Timeline {
    let mut out = Timeline::default();
    let mut file = None;
    if let Some((path, _)) = report {
        match std::fs::File::create(path) {
            Ok(mut f) => {
                if let Err(e) = writeln!(f, "secs_elapsed,interval_qps") {
                    out.report_error = Some(format!("Can't write to report file {path}: {e}"));
                } else {
                    file = Some(f);
                }
            }
            Err(e) => out.report_error = Some(format!("Can't open {path}: {e}")),
        }
    }
    let interval = report.map_or(0, |(_, s)| s);
    let mut next_sec = 1u64;
    let mut next_report = interval;
    let mut last_sec_ops = 0u64;
    let mut last_report_ops = 0u64;
    loop {
        let mut wake = u64::MAX;
        if timeline {
            wake = wake.min(next_sec);
        }
        if file.is_some() && interval > 0 {
            wake = wake.min(next_report);
        }
        if wake == u64::MAX {
            stop.wait_until(start + Duration::from_secs(3600 * 24 * 365));
            return out;
        }
        if stop.wait_until(start + Duration::from_secs(wake)) {
            return out;
        }
        let ops = shared.total_ops();
        if timeline && wake == next_sec {
            out.per_second.push((next_sec, ops - last_sec_ops));
            last_sec_ops = ops;
            next_sec += 1;
        }
        if interval > 0 && wake == next_report {
            if let Some(f) = file.as_mut() {
                let secs = (start.elapsed().as_micros() as u64 + 500_000) / 1_000_000;
                let r = writeln!(f, "{secs},{}", ops - last_report_ops).and_then(|_| f.flush());
                if let Err(e) = r {
                    out.report_error = Some(format!(
                        "Can't write to report file ({e}), stopping the reporting"
                    ));
                    file = None;
                }
            }
            last_report_ops = ops;
            next_report += interval;
        }
    }
}

/// One injected maintenance call.
#[derive(Debug, Clone)]
pub struct Injection {
    /// Which call.
    pub what: Maintenance,
    /// Requested second.
    pub at_secs: f64,
    /// When it actually started, seconds after the benchmark started.
    pub started_secs: f64,
    /// How long it took.
    pub took_secs: f64,
    /// Operations the benchmark's threads completed while the call ran: the
    /// foreground cost of the job, measured on the same counters as the
    /// timeline.
    pub ops_during: u64,
    /// The engine's error, if any.
    pub error: Option<vmemkv_compat::Error>,
    /// False when the benchmark ended before the call's second.
    pub ran: bool,
}

/// Calls the maintenance operations at their seconds (skipping those the
/// benchmark outlives).
pub fn run_injector(
    db: &dyn Db,
    shared: &Shared,
    stop: &StopSignal,
    start: Instant,
    plan: &[(f64, Maintenance)],
) -> Vec<Injection> {
    let mut done = Vec::new();
    for &(at, what) in plan {
        if stop.wait_until(start + Duration::from_secs_f64(at)) {
            done.push(Injection {
                what,
                at_secs: at,
                started_secs: 0.0,
                took_secs: 0.0,
                ops_during: 0,
                error: None,
                ran: false,
            });
            continue;
        }
        let ops0 = shared.total_ops();
        let t0 = Instant::now();
        let r = match what {
            Maintenance::Checkpoint => db.checkpoint(),
            Maintenance::Defragment => db.defragment(),
            Maintenance::Reorganize => db.reorganize(),
            Maintenance::Flush => db.flush(),
            Maintenance::Compact => db.compact_range(None, None),
        };
        let took = t0.elapsed();
        let ops_during = shared.total_ops().saturating_sub(ops0);
        done.push(Injection {
            what,
            at_secs: at,
            started_secs: (t0 - start).as_secs_f64(),
            took_secs: took.as_secs_f64(),
            ops_during,
            error: r.err(),
            ran: true,
        });
    }
    done
}
