//! Whether io_uring may be used, and the one warning printed when it cannot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Environment variable that forces the synchronous path (tests, or
/// hosts whose io_uring is known to misbehave).
pub const DISABLE_ENV: &str = "VMEMKV_DISABLE_IO_URING";

static BROKEN: AtomicBool = AtomicBool::new(false);
static WARNED: AtomicBool = AtomicBool::new(false);

fn disabled_by_env() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| std::env::var_os(DISABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0"))
}

/// False when the environment variable is set or io_uring already failed
/// once in this process (so later scans do not retry the setup syscall).
pub(crate) fn io_uring_allowed() -> bool {
    !disabled_by_env() && !BROKEN.load(Ordering::Relaxed)
}

/// Records that io_uring cannot be set up and prints one warning per
/// process: the scan continues on the synchronous path with identical
/// results, only without read-ahead.
pub(crate) fn mark_unavailable(err: &std::io::Error) {
    BROKEN.store(true, Ordering::Relaxed);
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "vmemkv: warning: io_uring is unavailable ({err}; check \
             /proc/sys/kernel/io_uring_disabled and seccomp policy); MultiScan \
             falls back to synchronous reads (same results, no prefetch)"
        );
    }
}
