//! Write throttling by space: RocksDB's delayed writes, for T2 garbage.
//!
//! Defragment reclaims space at whatever CPU the writers leave it. With as
//! many busy writers as cores it fell behind: a 150 s overwrite of 200k x
//! 1 KB keys at 82k puts/s reached 4.5x the live bytes. So once T2 passes
//! `soft` (80% of `Options::max_space_amplification`) the maintenance
//! thread sets a write rate, and every write pays for its bytes on a shared
//! virtual clock (GCRA): a write whose slot lies more than [`BURST`] ahead
//! of now sleeps until it is. The rate adapts each tick: down by a fifth
//! while the amplification still grows, up by a twentieth while it shrinks,
//! halved past 90% of the limit (the peaks of a segment's worth and of a
//! defragment cycle's transient would otherwise cross it: measured, a
//! halving only past the limit itself let a 120 s run peak at 2.06x), and
//! lifted once it is back under `soft`.
//! It never falls below [`FLOOR`] bytes/s, so writers slow down but never
//! stop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Writers may run this far ahead of the rate before sleeping, so that
/// short spikes cost no syscall.
const BURST: Duration = Duration::from_millis(1);
/// One write never sleeps longer than this, and the clock never runs
/// further ahead of now: a huge value at a low rate is not a minute's stall.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// The slowest rate ever set, bytes per second.
pub(crate) const FLOOR: u64 = 1 << 20;

/// The shared write clock. `rate == 0`: not throttled.
pub(crate) struct Throttle {
    base: Instant,
    /// Bytes per second allowed, 0 = unlimited.
    rate: AtomicU64,
    /// Nanoseconds since `base` at which the next byte may be written.
    next_ns: AtomicU64,
    /// Writes that slept, and for how long in total.
    pub delayed_writes: AtomicU64,
    pub delay_ns: AtomicU64,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle {
            base: Instant::now(),
            rate: AtomicU64::new(0),
            next_ns: AtomicU64::new(0),
            delayed_writes: AtomicU64::new(0),
            delay_ns: AtomicU64::new(0),
        }
    }
}

impl Throttle {
    /// The current rate in bytes per second (0: unlimited).
    pub fn rate(&self) -> u64 {
        self.rate.load(Ordering::Relaxed)
    }

    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    pub fn set_rate(&self, bps: u64) {
        let old = self.rate.swap(bps, Ordering::Relaxed);
        if old == 0 && bps > 0 {
            // Start the clock now, not where an earlier episode left it.
            self.next_ns.store(self.now_ns(), Ordering::Relaxed);
        }
    }

    /// Charges a write of `bytes`; sleeps when writers are ahead of the
    /// rate. One relaxed load when not throttled.
    pub fn pay(&self, bytes: usize) {
        let rate = self.rate.load(Ordering::Relaxed);
        if rate == 0 {
            return;
        }
        let cost = (bytes as u128 * 1_000_000_000 / u128::from(rate)) as u64;
        let now = self.now_ns();
        // A clock left behind (writers were idle) restarts at now.
        let mut due = self.next_ns.load(Ordering::Relaxed);
        loop {
            let start = due.max(now.saturating_sub(BURST.as_nanos() as u64));
            match self.next_ns.compare_exchange_weak(
                due,
                (start + cost).min(now + MAX_SLEEP.as_nanos() as u64),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    due = start;
                    break;
                }
                Err(d) => due = d,
            }
        }
        let ahead = due.saturating_sub(now);
        if ahead > BURST.as_nanos() as u64 {
            let d = Duration::from_nanos(ahead).min(MAX_SLEEP);
            std::thread::sleep(d);
            self.delayed_writes.fetch_add(1, Ordering::Relaxed);
            self.delay_ns
                .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// The rate controller's state, kept by the maintenance thread.
#[derive(Default)]
pub(crate) struct Controller {
    last_amp: f64,
    last_appended: u64,
    last_tick: Option<Instant>,
}

impl Controller {
    /// One tick: `amp` is T2 total over live bytes now, `appended` the log
    /// bytes written since open, `limit` the configured maximum (0 = no
    /// throttling). Returns the new rate.
    pub fn tick(&mut self, t: &Throttle, amp: f64, appended: u64, limit: f64) -> u64 {
        let now = Instant::now();
        let secs = self
            .last_tick
            .map_or(0.0, |l| now.duration_since(l).as_secs_f64());
        let written = appended.saturating_sub(self.last_appended);
        let observed = if secs > 0.0 {
            (written as f64 / secs) as u64
        } else {
            0
        };
        let (rising, old) = (amp > self.last_amp, t.rate());
        self.last_amp = amp;
        self.last_appended = appended;
        self.last_tick = Some(now);
        let rate = next_rate(old, observed, amp, rising, limit);
        t.set_rate(rate);
        rate
    }
}

/// The controller's rule, separate so that it can be tested on numbers.
fn next_rate(old: u64, observed: u64, amp: f64, rising: bool, limit: f64) -> u64 {
    if limit <= 0.0 || amp < 0.8 * limit {
        return 0;
    }
    let r = if old == 0 {
        // Entering: start a little under what writers just did.
        observed.saturating_mul(3) / 4
    } else if amp >= 0.9 * limit {
        // Close to the limit: a segment or a cycle's transient would cross it.
        old / 2
    } else if rising {
        old - old / 5
    } else {
        old + old / 20
    };
    r.max(FLOOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_follows_the_amplification() {
        // Below 80% of the limit: unlimited.
        assert_eq!(next_rate(50 << 20, 100 << 20, 1.5, true, 2.0), 0);
        // Disabled.
        assert_eq!(next_rate(50 << 20, 100 << 20, 9.0, true, 0.0), 0);
        // Entering: three quarters of the observed rate.
        assert_eq!(next_rate(0, 100 << 20, 1.7, true, 2.0), 75 << 20);
        // Still growing: down a fifth; shrinking: up a twentieth.
        assert_eq!(next_rate(100 << 20, 0, 1.7, true, 2.0), 80 << 20);
        assert_eq!(next_rate(100 << 20, 0, 1.7, false, 2.0), 105 << 20);
        // Past 90% of the limit: halved, never under the floor.
        assert_eq!(next_rate(100 << 20, 0, 2.1, false, 2.0), 50 << 20);
        assert_eq!(next_rate(100 << 20, 0, 1.85, false, 2.0), 50 << 20);
        assert_eq!(next_rate(FLOOR, 0, 2.1, true, 2.0), FLOOR);
        assert_eq!(next_rate(0, 0, 1.9, true, 2.0), FLOOR);
    }

    #[test]
    fn writers_are_held_to_the_rate() {
        let t = Throttle::default();
        t.set_rate(10 << 20); // 10 MiB/s
        let start = Instant::now();
        for _ in 0..40 {
            t.pay(64 << 10); // 2.5 MiB in all: 250 ms at the rate
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(200), "{took:?}");
        assert!(t.delayed_writes.load(Ordering::Relaxed) > 0);
        // Lifted: free again (no write is delayed; a clock bound would
        // also count this thread being descheduled).
        t.set_rate(0);
        let delayed = t.delayed_writes.load(Ordering::Relaxed);
        for _ in 0..1000 {
            t.pay(64 << 10);
        }
        assert_eq!(t.delayed_writes.load(Ordering::Relaxed), delayed);
    }
}
