//! The memory this process can fill with page cache: the smaller of the
//! system's `MemAvailable` and its memory cgroup's limit (v2 `memory.max`,
//! v1 `memory.limit_in_bytes`). Used to decide whether prefaulting every
//! segment at open would help (the data fits) or thrash (it does not).

use std::fs;

fn mem_available() -> Option<u64> {
    let s = fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The limit of this process's memory cgroup, if it has one.
fn cgroup_limit() -> Option<u64> {
    let cg = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<u64> = None;
    for line in cg.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let file = if controllers.is_empty() {
            format!("/sys/fs/cgroup{path}/memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")
        } else {
            continue;
        };
        // "max" (v2) or a huge number (v1) means no limit.
        if let Some(v) = fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|&v| v < 1 << 60)
        {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
    }
    best
}

/// Bytes of page cache this process can expect to keep, or `None` when
/// neither source is readable.
pub fn budget() -> Option<u64> {
    match (mem_available(), cgroup_limit()) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn budget_is_known_and_positive_on_linux() {
        assert!(super::budget().is_some_and(|b| b > 0));
    }
}
