//! `--benchmark_write_rate_limit` (bytes/s) and
//! `--benchmark_read_rate_limit` (ops/s): a shared virtual-clock limiter.
//!
//! Each request reserves its share of a global budget; the caller sleeps
//! until the moment that budget would be earned at the configured rate.
//! RocksDB's GenericRateLimiter refills every 100 ms; this one grants at the
//! same long-run rate with finer granularity.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A limiter shared by a benchmark's threads.
#[derive(Debug)]
pub struct RateLimiter {
    per_sec: f64,
    start: Instant,
    granted: AtomicU64,
}

impl RateLimiter {
    /// A limiter granting `per_sec` units per second; `None` for 0.
    pub fn new(per_sec: u64) -> Option<Self> {
        (per_sec > 0).then(|| RateLimiter {
            per_sec: per_sec as f64,
            start: Instant::now(),
            granted: AtomicU64::new(0),
        })
    }

    /// Takes `n` units, sleeping until they are available.
    pub fn request(&self, n: u64) {
        let total = self.granted.fetch_add(n, Ordering::Relaxed) + n;
        let due = self.start + Duration::from_secs_f64(total as f64 / self.per_sec);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_the_long_run_rate() {
        let Some(l) = RateLimiter::new(1000) else {
            panic!("limiter");
        };
        let t0 = Instant::now();
        for _ in 0..10 {
            l.request(20);
        }
        // 200 units at 1000/s take at least 0.2 s.
        assert!(t0.elapsed() >= Duration::from_millis(195));
        assert!(RateLimiter::new(0).is_none());
    }
}
