//! The writer gate: every write holds it shared from its log reservation
//! until T1 has it; a checkpoint's cut, a segment retirement's barrier, a
//! range delete and the opening of an unlogged region hold it exclusively.
//!
//! Shared holders count themselves in per-thread slots (`crate::sharded`)
//! instead of one lock word: a read-write lock's word took two
//! read-modify-writes from every write on one cache line (two fifths of
//! `commit`'s own samples in an 8-byte `delete` at 4 threads). An
//! exclusive holder raises a flag and waits for the slots to sum to zero;
//! a shared one adds to its slot and then reads the flag. Both steps are
//! SeqCst, so at least one side sees the other: either the shared holder
//! sees the flag and backs off, or the exclusive one counts it and waits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::sharded::{Line, Sharded};

#[derive(Default)]
pub(crate) struct Gate {
    shared: Sharded,
    /// On a line of its own: every shared acquisition reads it.
    closed: Line<AtomicBool>,
    /// Exclusive holders one at a time.
    exclusive: Mutex<()>,
}

/// The gate held shared; released on drop.
pub(crate) struct Shared<'a> {
    slot: &'a AtomicU64,
}

impl Drop for Shared<'_> {
    fn drop(&mut self) {
        self.slot.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The gate held exclusively; released on drop.
pub(crate) struct Exclusive<'a> {
    gate: &'a Gate,
    _one: MutexGuard<'a, ()>,
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        self.gate.closed.store(false, Ordering::SeqCst);
    }
}

/// Spins, then yields, then sleeps: an exclusive holder may be a range
/// delete applying many keys, and 2 cores shared by more waiters than
/// that must leave it the CPU.
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 1024 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

impl Gate {
    /// Holds the gate shared, once no exclusive holder has it.
    pub(crate) fn read(&self) -> Shared<'_> {
        let slot = self.shared.mine();
        loop {
            slot.fetch_add(1, Ordering::SeqCst);
            if !self.closed.load(Ordering::SeqCst) {
                return Shared { slot };
            }
            slot.fetch_sub(1, Ordering::SeqCst);
            let mut spins = 0;
            while self.closed.load(Ordering::SeqCst) {
                backoff(&mut spins);
            }
        }
    }

    /// Holds the gate alone, once every shared holder has left.
    pub(crate) fn write(&self) -> Exclusive<'_> {
        let one = self.exclusive.lock();
        self.closed.store(true, Ordering::SeqCst);
        let mut spins = 0;
        while self.shared.sum(Ordering::SeqCst) != 0 {
            backoff(&mut spins);
        }
        Exclusive {
            gate: self,
            _one: one,
        }
    }
}

impl<'a> Exclusive<'a> {
    /// Holds the gate shared without letting another exclusive holder in
    /// between.
    pub(crate) fn downgrade(self) -> Shared<'a> {
        let slot = self.gate.shared.mine();
        slot.fetch_add(1, Ordering::SeqCst);
        Shared { slot }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// No shared holder is inside while an exclusive one is, and shared
    /// holders on two threads are inside together.
    #[test]
    fn exclusive_holders_exclude_shared_ones() {
        let gate = Gate::default();
        let (inside, most, bad) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicBool::new(false),
        );
        std::thread::scope(|s| {
            for t in 0..6 {
                let (gate, inside, most, bad) = (&gate, &inside, &most, &bad);
                s.spawn(move || {
                    for i in 0..2000 {
                        if (i + t) % 97 == 0 {
                            let x = gate.write();
                            if inside.load(Ordering::SeqCst) != 0 {
                                bad.store(true, Ordering::SeqCst);
                            }
                            let r = x.downgrade();
                            inside.fetch_add(1, Ordering::SeqCst);
                            inside.fetch_sub(1, Ordering::SeqCst);
                            drop(r);
                        } else {
                            let _r = gate.read();
                            let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(n, Ordering::SeqCst);
                            std::hint::spin_loop();
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert!(
            !bad.load(Ordering::SeqCst),
            "a shared holder was inside an exclusive hold"
        );
        assert!(most.load(Ordering::SeqCst) >= 1);
        assert_eq!(gate.shared.sum(Ordering::SeqCst), 0);
        // Shared holders do not wait for one another (this would hang).
        let first = gate.read();
        std::thread::scope(|s| {
            s.spawn(|| drop(gate.read()));
        });
        drop(first);
        drop(gate.write());
    }
}
