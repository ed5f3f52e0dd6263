//! The lock that every T2 rewrite holds (defragment cycles, key-order
//! passes, `compact_range`, sorted runs), and what it costs: the wall and
//! CPU time it is held. Those are RocksDB's compaction seconds
//! (`Comp(sec)`, `CompMergeCPU(sec)`) for T2, whose only compaction is
//! rewriting values, and timing the lock times each kind once, nested
//! calls included.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use crate::clock::thread_cpu_ns;

#[derive(Default)]
pub(crate) struct RewriteLock {
    lock: Mutex<()>,
    wall_ns: AtomicU64,
    cpu_ns: AtomicU64,
}

/// Held while a rewrite runs; its time is counted when it is dropped. A
/// rewrite runs on the thread that took the lock, so the thread's CPU
/// clock measures it.
pub(crate) struct Rewriting<'a> {
    _held: MutexGuard<'a, ()>,
    owner: &'a RewriteLock,
    wall: Instant,
    cpu_ns: u64,
}

impl RewriteLock {
    pub(crate) fn lock(&self) -> Rewriting<'_> {
        let held = self.lock.lock();
        Rewriting {
            _held: held,
            owner: self,
            wall: Instant::now(),
            cpu_ns: thread_cpu_ns(),
        }
    }

    /// Wall and CPU nanoseconds rewrites have held the lock since open.
    pub(crate) fn busy_ns(&self) -> (u64, u64) {
        (
            self.wall_ns.load(Ordering::Relaxed),
            self.cpu_ns.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Rewriting<'_> {
    fn drop(&mut self) {
        let wall = self.wall.elapsed().as_nanos() as u64;
        let cpu = thread_cpu_ns().saturating_sub(self.cpu_ns);
        self.owner.wall_ns.fetch_add(wall, Ordering::Relaxed);
        self.owner.cpu_ns.fetch_add(cpu, Ordering::Relaxed);
    }
}
