//! Named crash points for the kill tests (cargo feature `failpoints`).
//!
//! `VMEMKV_FAILPOINTS=name[@n][,name[@n]...]` makes the process SIGKILL
//! itself the `n`-th time (default: first) it reaches `name`, which is the
//! same as a kill arriving at exactly that instant of a maintenance
//! operation. `VMEMKV_FAILPOINT_MARK=path` first appends the name to `path`,
//! so the harness can tell a failpoint death from its own random kill.
//! Without the feature every hook compiles to nothing.

/// Every hook's name, for the harness and the docs.
pub const NAMES: &[&str] = &[
    "checkpoint.snapshot_synced",
    "checkpoint.manifest_stored",
    "defragment.relocated",
    "defragment.before_retire",
    "retire.unlinked",
    "rollover.sealed",
    "segment.built",
    "reorganize.merged",
    "split.published",
];

#[cfg(feature = "failpoints")]
mod imp {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    struct Point {
        name: String,
        at: u64,
        hits: AtomicU64,
    }

    fn armed() -> &'static [Point] {
        static P: OnceLock<Vec<Point>> = OnceLock::new();
        P.get_or_init(|| {
            std::env::var("VMEMKV_FAILPOINTS")
                .unwrap_or_default()
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    let (name, at) = s.split_once('@').unwrap_or((s, "1"));
                    Point {
                        name: name.trim().to_string(),
                        at: at.trim().parse().unwrap_or(1).max(1),
                        hits: AtomicU64::new(0),
                    }
                })
                .collect()
        })
    }

    pub fn hit(name: &str) {
        let points = armed();
        if points.is_empty() {
            return;
        }
        for p in points.iter().filter(|p| p.name == name) {
            if p.hits.fetch_add(1, Ordering::Relaxed) + 1 == p.at {
                if let Some(mark) = std::env::var_os("VMEMKV_FAILPOINT_MARK") {
                    use std::io::Write as _;
                    if let Ok(mut f) = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(mark)
                    {
                        let _ = writeln!(f, "{name}");
                    }
                }
                // SAFETY: raising a signal has no memory-safety
                // preconditions; SIGKILL ends the process here.
                unsafe {
                    libc::raise(libc::SIGKILL);
                }
            }
        }
    }
}

/// I/O calls that tests can make fail with `EIO` (see [`io_error`]).
pub const IO_POINTS: &[&str] = &[
    "segment.msync",
    "segment.create",
    "segment.write",
    "snapshot.sync",
    "segment.msync.after",
    "logend.write",
];

#[cfg(feature = "failpoints")]
static IO_FAILING: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
/// `!IO_FAILING.is_empty()`, read without the mutex: a build with the
/// feature on (a workspace build unifies it in through `tests/`) then pays
/// one relaxed load per I/O call while no error is injected, not a lock.
#[cfg(feature = "failpoints")]
static ANY_IO_FAILING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes the I/O call `name` (one of [`IO_POINTS`]) fail with `EIO` until
/// cleared, in this process (feature `failpoints`; a no-op without it).
/// Models a disk that starts returning errors.
pub fn set_io_error(name: &'static str, failing: bool) {
    #[cfg(feature = "failpoints")]
    if let Ok(mut v) = IO_FAILING.lock() {
        v.retain(|n| *n != name);
        if failing {
            v.push(name);
        }
        ANY_IO_FAILING.store(!v.is_empty(), std::sync::atomic::Ordering::Release);
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = (name, failing);
}

/// `Err(EIO)` if `name` was made to fail with [`set_io_error`].
#[inline]
pub fn io_error(name: &'static str) -> std::io::Result<()> {
    debug_assert!(IO_POINTS.contains(&name), "unknown I/O point {name}");
    #[cfg(feature = "failpoints")]
    if ANY_IO_FAILING.load(std::sync::atomic::Ordering::Acquire)
        && IO_FAILING.lock().is_ok_and(|v| v.contains(&name))
    {
        return Err(std::io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

/// Marks the point `name` (see the module docs).
#[inline]
pub fn hit(name: &'static str) {
    debug_assert!(NAMES.contains(&name), "unknown failpoint {name}");
    #[cfg(feature = "failpoints")]
    imp::hit(name);
}
