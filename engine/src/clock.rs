//! Clocks `std` does not offer: the coarse monotonic clock and the calling
//! thread's CPU time. A leaf: it imports nothing from the crate.

fn read(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration,
    // and clock_gettime writes nothing else.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Milliseconds of the coarse monotonic clock (a few ns per call, against
/// 20+ for the precise one), `u64::MAX` if it cannot be read.
pub(crate) fn coarse_ms() -> u64 {
    read(libc::CLOCK_MONOTONIC_COARSE).map_or(u64::MAX, |ns| ns / 1_000_000)
}

/// CPU time the calling thread has used, in nanoseconds (0 if the clock
/// cannot be read, so that a difference of two readings is never wrong by
/// more than the interval itself).
pub(crate) fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_advances_with_work_and_not_with_sleep() {
        let t0 = thread_cpu_ns();
        let mut x = 0u64;
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let t1 = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let t2 = thread_cpu_ns();
        assert!(
            t1 - t0 >= 10_000_000,
            "30 ms of spinning gave {} ns",
            t1 - t0
        );
        assert!(t2 - t1 < 20_000_000, "a 50 ms sleep gave {} ns", t2 - t1);
        assert!(coarse_ms() != u64::MAX);
    }
}
