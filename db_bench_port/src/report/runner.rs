//! Runs `db_bench` as a child process and reads its standard output lines,
//! the same lines RocksDB users' scripts parse.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
    let (exit_code, max_rss_kib) = wait_with_rusage(child.id());
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
    fn parses_report_csv() {
        let csv = "secs_elapsed,interval_qps\n1,1000\n2,1500\n";
        assert_eq!(parse_report_csv(csv), vec![(1.0, 1000.0), (2.0, 1500.0)]);
    }
}
