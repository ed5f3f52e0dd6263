//! Runs `db_bench` as a child process and reads its standard output lines,
//! the same lines RocksDB users' scripts parse.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::cgroup::MemoryCgroup;

/// One db_bench result line:
/// `name : X micros/op Y ops/sec Z seconds N operations; ...`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultLine {
    /// Benchmark name as printed.
    pub name: String,
    /// Per-thread latency.
    pub micros_per_op: f64,
    /// Total throughput.
    pub ops_per_sec: f64,
    /// Wall time.
    pub seconds: f64,
    /// Operations done.
    pub operations: u64,
    /// Whatever follows the `;` (MB/s, found counts, messages).
    pub extra: String,
}

/// Parses one db_bench result line, or `None` if `line` is not one.
pub fn parse_result_line(line: &str) -> Option<ResultLine> {
    let (name, rest) = line.split_once(" : ")?;
    let (figures, extra) = rest.split_once(';').unwrap_or((rest, ""));
    let t: Vec<&str> = figures.split_whitespace().collect();
    if t.len() != 8
        || t[1] != "micros/op"
        || t[3] != "ops/sec"
        || t[5] != "seconds"
        || t[7] != "operations"
    {
        return None;
    }
    Some(ResultLine {
        name: name.trim().to_string(),
        micros_per_op: t[0].parse().ok()?,
        ops_per_sec: t[2].parse().ok()?,
        seconds: t[4].parse().ok()?,
        operations: t[6].parse().ok()?,
        extra: extra.trim().to_string(),
    })
}

/// The bytes of the last `Device reads <benchmark> : B bytes, ...` line
/// (`--device_reads`).
pub fn parse_device_reads(stdout: &str) -> Option<u64> {
    stdout
        .lines()
        .rev()
        .filter_map(|l| l.strip_prefix("Device reads "))
        .filter_map(|l| l.split_once(" : "))
        .filter_map(|(_, rest)| {
            rest.strip_suffix(" bytes/op")
                .and(rest.split_once(" bytes,"))
        })
        .find_map(|(b, _)| b.trim().parse().ok())
}

/// Parses a `--report_file` CSV (`secs_elapsed,interval_qps`).
pub fn parse_report_csv(text: &str) -> Vec<(f64, f64)> {
    text.lines()
        .filter_map(|l| {
            let (a, b) = l.split_once(',')?;
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .collect()
}

/// What one db_bench invocation produced.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Result lines, in order.
    pub results: Vec<ResultLine>,
    /// Peak resident set of the process, from `wait4`'s rusage (KiB).
    pub max_rss_kib: Option<u64>,
    /// Peak charge of its memory cgroup, page cache included.
    pub cgroup_peak_bytes: Option<u64>,
    /// OOM kills seen in the cgroup during the run.
    pub oom_kills: u64,
    /// Last lines of stderr when the run failed.
    pub error: Option<String>,
    /// Everything the run printed on stdout.
    pub stdout: String,
}

/// Runs `db_bench` with `args`, inside `cgroup` when given.
pub fn run_db_bench(db_bench: &Path, args: &[String], cgroup: Option<&MemoryCgroup>) -> Outcome {
    run_db_bench_within(db_bench, args, cgroup, None)
}

/// [`run_db_bench`], killed with SIGKILL and reported failed once it has
/// run `timeout`: one engine stuck (Sparkey rebuilding its hash index in a
/// small cgroup took over 12 minutes for a 2 s cell) must not stall the
/// whole matrix.
pub fn run_db_bench_within(
    db_bench: &Path,
    args: &[String],
    cgroup: Option<&MemoryCgroup>,
    timeout: Option<Duration>,
) -> Outcome {
    let (program, argv): (PathBuf, Vec<String>) = match cgroup {
        Some(cg) => {
            cg.reset_peak();
            cg.wrap(db_bench, args)
        }
        None => (db_bench.to_path_buf(), args.to_vec()),
    };
    let ooms_before = cgroup.map_or(0, MemoryCgroup::oom_kills);
    let child = Command::new(&program)
        .args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                error: Some(format!("spawn {}: {e}", program.display())),
                ..Outcome::default()
            }
        }
    };
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let out_pipe = child.stdout.take();
    let err_pipe = child.stderr.take();
    let out_t = std::thread::spawn(move || read_all(out_pipe));
    let err_t = std::thread::spawn(move || read_all(err_pipe));
    let pid = child.id();
    let exited = Arc::new((Mutex::new(false), Condvar::new()));
    let timed_out = Arc::new(AtomicBool::new(false));
    let watchdog = timeout.map(|limit| {
        let (exited, timed_out) = (Arc::clone(&exited), Arc::clone(&timed_out));
        std::thread::spawn(move || {
            let (lock, cv) = &*exited;
            let Ok(guard) = lock.lock() else { return };
            let Ok((guard, _)) = cv.wait_timeout_while(guard, limit, |done| !*done) else {
                return;
            };
            if !*guard {
                timed_out.store(true, Ordering::Relaxed);
                // SAFETY: kill(2) takes plain integers. The child is not
                // reaped before `exited` is set under this lock (see
                // wait_exited), so `pid` still names it, at worst a zombie.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        })
    });
    wait_exited(pid);
    if let Ok(mut done) = exited.0.lock() {
        *done = true;
    }
    exited.1.notify_all();
    if let Some(w) = watchdog {
        let _ = w.join();
    }
    let (exit_code, max_rss_kib) = wait_with_rusage(pid);
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    let results: Vec<ResultLine> = stdout.lines().filter_map(parse_result_line).collect();
    let failed = exit_code != Some(0) || results.is_empty();
    Outcome {
        results,
        max_rss_kib,
        cgroup_peak_bytes: cgroup.and_then(MemoryCgroup::peak_bytes),
        oom_kills: cgroup
            .map_or(0, MemoryCgroup::oom_kills)
            .saturating_sub(ooms_before),
        error: failed.then(|| {
            if timed_out.load(Ordering::Relaxed) {
                let limit = timeout.unwrap_or_default().as_secs();
                return format!("timed out: killed after {limit} s");
            }
            let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
            let mut tail: Vec<&str> = tail.into_iter().rev().collect();
            if tail.is_empty() {
                tail.push("(no stderr)");
            }
            format!("exit {exit_code:?}: {}", tail.join(" | "))
        }),
        stdout,
    }
}

fn read_all<R: std::io::Read>(pipe: Option<R>) -> String {
    let mut s = String::new();
    if let Some(mut p) = pipe {
        let _ = p.read_to_string(&mut s);
    }
    s
}

/// Blocks until `pid` has exited, without reaping it: until
/// [`wait_with_rusage`] runs, the pid cannot be reused, so a watchdog may
/// still signal it.
fn wait_exited(pid: u32) {
    loop {
        // SAFETY: siginfo_t is plain old data, so all-zero bytes are valid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child; `info` is a live local.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Waits for `pid` and returns its exit code and peak RSS.
fn wait_with_rusage(pid: u32) -> (Option<i32>, Option<u64>) {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data, so all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own unreaped child (std's Child is never waited
    // on after this), and both out-pointers reference live locals.
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    if r < 0 {
        return (None, None);
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, Some(usage.ru_maxrss.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_db_bench_result_lines() {
        let l = "readrandom   :       2.345 micros/op 426439 ops/sec 10.001 seconds 4264390 operations;  100.2 MB/s (4264390 of 4264390 found)";
        let r = parse_result_line(l).expect("parse");
        assert_eq!(r.name, "readrandom");
        assert_eq!(r.micros_per_op, 2.345);
        assert_eq!(r.ops_per_sec, 426439.0);
        assert_eq!(r.operations, 4264390);
        assert!(r.extra.contains("found"));
        let ms = "multiscan : 837.941 micros/op 1193 ops/sec 60.001 seconds 71605 operations; (multscans:71605)";
        assert_eq!(parse_result_line(ms).map(|r| r.ops_per_sec), Some(1193.0));
        assert_eq!(parse_result_line("DB path: [/tmp/x]"), None);
        assert_eq!(parse_result_line("Keys : 16 bytes each"), None);
    }

    #[test]
    fn a_run_past_its_timeout_is_killed_and_reported() {
        let started = std::time::Instant::now();
        let out = run_db_bench_within(
            Path::new("/bin/sleep"),
            &["30".to_string()],
            None,
            Some(Duration::from_millis(300)),
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(out.error.as_deref(), Some("timed out: killed after 0 s"));
        // A run that ends in time is not touched.
        let out = run_db_bench_within(
            Path::new("/bin/echo"),
            &["x : 1.0 micros/op 1 ops/sec 1.0 seconds 1 operations;".to_string()],
            None,
            Some(Duration::from_secs(30)),
        );
        assert_eq!(out.error, None);
        assert_eq!(out.results.len(), 1);
    }

    #[test]
    fn parses_device_reads_lines() {
        let out = "gethit_zipf : 1.0 micros/op 2 ops/sec 1 seconds 2 operations;\n\
                   Device reads gethit_zipf : 8192 bytes, 4096.0 bytes/op\n";
        assert_eq!(parse_device_reads(out), Some(8192));
        assert_eq!(
            parse_device_reads("Device reads x : unknown (/proc/self/io unreadable)"),
            None
        );
        assert_eq!(parse_device_reads("no such line"), None);
    }

    #[test]
    fn parses_report_csv() {
        let csv = "secs_elapsed,interval_qps\n1,1000\n2,1500\n";
        assert_eq!(parse_report_csv(csv), vec![(1.0, 1000.0), (2.0, 1500.0)]);
    }
}
