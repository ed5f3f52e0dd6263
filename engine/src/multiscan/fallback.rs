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

/// False when the environment variable is set or io_uring was found
/// unavailable in this process (so later scans do not retry the setup
/// syscall).
pub(crate) fn io_uring_allowed() -> bool {
    !disabled_by_env() && !BROKEN.load(Ordering::Relaxed)
}

/// Whether a failed `io_uring_setup` means io_uring is unavailable for
/// good: no such syscall (old kernel), refused by `io_uring_disabled` or a
/// seccomp policy, or parameters this kernel does not know. Running out of
/// descriptors or locked memory passes: latching on it would leave the
/// process on synchronous reads for its lifetime.
fn is_permanent(err: &std::io::Error) -> bool {
    !matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN | libc::EINTR)
    )
}

/// Records that io_uring could not be set up and prints one warning per
/// process: the scan continues on the synchronous path with identical
/// results, only without read-ahead. Later scans try again unless the
/// error is permanent ([`is_permanent`]).
pub(crate) fn mark_unavailable(err: &std::io::Error) {
    let permanent = is_permanent(err);
    if permanent {
        BROKEN.store(true, Ordering::Relaxed);
    }
    if !WARNED.swap(true, Ordering::Relaxed) {
        let then = if permanent {
            "MultiScan falls back to synchronous reads"
        } else {
            "this MultiScan falls back to synchronous reads, later ones try again"
        };
        eprintln!(
            "vmemkv: warning: io_uring is unavailable ({err}; check \
             /proc/sys/kernel/io_uring_disabled and seccomp policy); {then} \
             (same results, no prefetch)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::is_permanent;
    use std::io::Error;

    #[test]
    fn running_out_of_descriptors_does_not_turn_io_uring_off() {
        // (A permanent error is not tried here: it would turn io_uring off
        // for the other tests of this process.)
        super::mark_unavailable(&Error::from_raw_os_error(libc::EMFILE));
        assert!(!super::BROKEN.load(std::sync::atomic::Ordering::Relaxed));
    }

    #[test]
    fn only_a_missing_or_refused_io_uring_is_permanent() {
        for e in [libc::ENOSYS, libc::EPERM, libc::EACCES, libc::EINVAL] {
            assert!(is_permanent(&Error::from_raw_os_error(e)), "{e}");
        }
        for e in [libc::EMFILE, libc::ENFILE, libc::ENOMEM, libc::EAGAIN] {
            assert!(!is_permanent(&Error::from_raw_os_error(e)), "{e}");
        }
    }
}
