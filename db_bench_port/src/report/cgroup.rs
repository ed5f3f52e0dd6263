//! Memory cgroups for larger-than-memory runs: cgroup v1 (`memory`
//! controller, as on this machine) or v2 (`memory.max`), whichever is
//! writable. When neither is, the report says so and LTM cells are "not run".

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Which cgroup interface a [`MemoryCgroup`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `/sys/fs/cgroup/memory/<name>/memory.limit_in_bytes`.
    V1,
    /// `/sys/fs/cgroup/<name>/memory.max`.
    V2,
}

/// Where the cgroup file systems are mounted (a parameter so tests can point
/// it at a scratch directory).
#[derive(Debug, Clone)]
pub struct Roots {
    /// cgroup v1 memory controller mount.
    pub v1_memory: PathBuf,
    /// cgroup v2 unified mount.
    pub v2: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            v1_memory: PathBuf::from("/sys/fs/cgroup/memory"),
            v2: PathBuf::from("/sys/fs/cgroup"),
        }
    }
}

/// A memory cgroup with a limit, removed on drop.
#[derive(Debug)]
pub struct MemoryCgroup {
    dir: PathBuf,
    version: Version,
}

/// Why no cgroup could be made: the report prints this in its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl MemoryCgroup {
    /// Creates `name` with `limit_bytes`, trying v1 then v2.
    pub fn create(
        roots: &Roots,
        name: &str,
        limit_bytes: u64,
    ) -> Result<MemoryCgroup, Unavailable> {
        let mut reasons = Vec::new();
        match Self::create_v1(&roots.v1_memory, name, limit_bytes) {
            Ok(cg) => return Ok(cg),
            Err(e) => reasons.push(format!("cgroup v1 ({}): {e}", roots.v1_memory.display())),
        }
        match Self::create_v2(&roots.v2, name, limit_bytes) {
            Ok(cg) => return Ok(cg),
            Err(e) => reasons.push(format!("cgroup v2 ({}): {e}", roots.v2.display())),
        }
        Err(Unavailable(reasons.join("; ")))
    }

    fn create_v1(root: &Path, name: &str, limit: u64) -> io::Result<MemoryCgroup> {
        if !root.join("memory.limit_in_bytes").exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no memory controller mounted",
            ));
        }
        let dir = root.join(name);
        if !dir.exists() {
            fs::create_dir(&dir)?;
        }
        let cg = MemoryCgroup {
            dir,
            version: Version::V1,
        };
        fs::write(cg.dir.join("memory.limit_in_bytes"), limit.to_string())?;
        // Keep the limit honest: no swap to spill into (writes fail harmlessly
        // where memsw accounting is off).
        let _ = fs::write(
            cg.dir.join("memory.memsw.limit_in_bytes"),
            limit.to_string(),
        );
        Ok(cg)
    }

    fn create_v2(root: &Path, name: &str, limit: u64) -> io::Result<MemoryCgroup> {
        let controllers = fs::read_to_string(root.join("cgroup.controllers"))?;
        if !controllers.split_whitespace().any(|c| c == "memory") {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "memory controller not enabled",
            ));
        }
        let dir = root.join(name);
        if !dir.exists() {
            fs::create_dir(&dir)?;
        }
        let cg = MemoryCgroup {
            dir,
            version: Version::V2,
        };
        fs::write(cg.dir.join("memory.max"), limit.to_string())?;
        let _ = fs::write(cg.dir.join("memory.swap.max"), "0");
        Ok(cg)
    }

    /// The interface in use.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The file a process id is written to in order to join.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Peak memory charged to the group (page cache included), if known.
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        };
        fs::read_to_string(self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Resets the peak counter between runs (v1 only; v2's is per group).
    pub fn reset_peak(&self) {
        if self.version == Version::V1 {
            let _ = fs::write(self.dir.join("memory.max_usage_in_bytes"), "0");
        }
    }

    /// Whether the OOM killer fired in this group.
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = match self.version {
            Version::V1 => ("memory.oom_control", "oom_kill"),
            Version::V2 => ("memory.events", "oom_kill"),
        };
        fs::read_to_string(self.dir.join(file))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse().ok()))
            })
            .unwrap_or(0)
    }

    /// Wraps a command line so the process joins this group before `exec`.
    pub fn wrap(&self, program: &Path, args: &[String]) -> (PathBuf, Vec<String>) {
        let script = format!(
            "echo $$ > '{}' && exec \"$0\" \"$@\"",
            self.procs_file().display()
        );
        let mut full = vec!["-c".to_string(), script, program.display().to_string()];
        full.extend(args.iter().cloned());
        (PathBuf::from("/bin/sh"), full)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // A cgroup directory is removed with rmdir once empty; its control
        // files are virtual.
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Drops the page cache, so every engine starts each cell cold. Falls back
/// to nothing (and says so) where `/proc/sys/vm/drop_caches` is not writable.
pub fn drop_page_cache() -> Result<(), String> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    fs::write("/proc/sys/vm/drop_caches", "1").map_err(|e| format!("/proc/sys/vm/drop_caches: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_writable_cgroup_is_reported_with_both_reasons() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let roots = Roots {
            v1_memory: tmp.path().join("nope-v1"),
            v2: tmp.path().join("nope-v2"),
        };
        let err = MemoryCgroup::create(&roots, "x", 1 << 20).expect_err("must fail");
        assert!(
            err.0.contains("cgroup v1") && err.0.contains("cgroup v2"),
            "{}",
            err.0
        );
    }

    #[test]
    fn v1_setup_and_teardown_on_a_fake_hierarchy() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let v1 = tmp.path().join("memory");
        fs::create_dir_all(&v1).expect("mkdir");
        fs::write(v1.join("memory.limit_in_bytes"), "max").expect("write");
        let roots = Roots {
            v1_memory: v1.clone(),
            v2: tmp.path().join("none"),
        };
        {
            let cg = MemoryCgroup::create(&roots, "bench", 512 << 20).expect("create");
            assert_eq!(cg.version(), Version::V1);
            let limit = fs::read_to_string(v1.join("bench/memory.limit_in_bytes")).expect("read");
            assert_eq!(limit, (512u64 << 20).to_string());
            fs::write(v1.join("bench/memory.max_usage_in_bytes"), "12345").expect("write");
            assert_eq!(cg.peak_bytes(), Some(12345));
            let (prog, args) = cg.wrap(Path::new("/bin/true"), &["--x".into()]);
            assert_eq!(prog, PathBuf::from("/bin/sh"));
            assert!(args[1].contains("bench/cgroup.procs"));
            assert_eq!(args[2], "/bin/true");
            // A fake hierarchy has real files, so rmdir fails on drop; clean
            // the files to check that drop removes the directory.
            for f in [
                "memory.limit_in_bytes",
                "memory.memsw.limit_in_bytes",
                "memory.max_usage_in_bytes",
            ] {
                let _ = fs::remove_file(v1.join("bench").join(f));
            }
        }
        assert!(!v1.join("bench").exists(), "drop removes the group");
    }

    #[test]
    fn v2_is_used_when_v1_is_absent() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let v2 = tmp.path().join("unified");
        fs::create_dir_all(&v2).expect("mkdir");
        fs::write(v2.join("cgroup.controllers"), "cpu io memory pids").expect("write");
        let roots = Roots {
            v1_memory: tmp.path().join("none"),
            v2: v2.clone(),
        };
        let cg = MemoryCgroup::create(&roots, "bench", 1 << 30).expect("create");
        assert_eq!(cg.version(), Version::V2);
        assert_eq!(
            fs::read_to_string(v2.join("bench/memory.max")).expect("read"),
            (1u64 << 30).to_string()
        );
        fs::write(v2.join("bench/memory.events"), "low 0\noom_kill 2\n").expect("write");
        assert_eq!(cg.oom_kills(), 2);
    }
}
