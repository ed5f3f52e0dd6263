//! Multi-version reads: which writes are visible, which snapshots are held,
//! and the old versions they still need (design.md §8).
//!
//! * [`Versions::visible_below`]: every write with `seq <` it has been applied
//!   to T1 in full. Writers register a lower bound of their seq before they
//!   take one ([`Versions::begin_write`]) and drop it after applying; a batch's
//!   one seq therefore crosses the watermark at one instant.
//! * Snapshots register the watermark they read at ([`Versions::register`]);
//!   iterators and MultiScans in a per-thread slot ([`Versions::register_reader`]),
//!   with no lock, map or allocation.
//! * The store keeps versions displaced from T1's regions while a reader may
//!   still need them ([`Versions::needed`]), keyed `(key, seq)` newest first.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_skiplist::SkipMap;
use parking_lot::Mutex;

use super::entry::Rec;

type StoreKey = (Box<[u8]>, Reverse<u64>);

/// A displaced version and the seq of the version that replaced it.
#[derive(Clone, Copy)]
struct Old {
    rec: Rec,
    succ: u64,
}

/// Slots of writes being applied: `bound + 1` (0 = free), where `bound` is
/// the log tail read before the write reserved, so `bound <= seq`.
const WRITERS: usize = 32;

/// Reader slots (iterators, MultiScans). Each thread starts at its own
/// cache line (four slots per line), so that registering writes no line
/// another reader thread writes.
const READERS: usize = 64;
const SLOTS_PER_LINE: usize = 4;

/// A registered reader: `at + 1` (0 = free) and when it registered
/// (nanoseconds since [`Versions::base`]).
#[derive(Default)]
#[repr(align(16))]
struct ReaderSlot {
    at: AtomicU64,
    since_ns: AtomicU64,
}

#[derive(Default)]
struct Snaps {
    /// Registered read seqs (multiset) with the time of the oldest.
    at: BTreeMap<u64, (u32, Option<Instant>)>,
}

/// `T` starting a line pair of its own (see `thread_slot`).
#[repr(align(128))]
struct Lines<T>(T);

impl<T> std::ops::Deref for Lines<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Visibility, snapshot registry and old-version store of one T1.
pub(crate) struct Versions {
    /// On a line of its own: every write reads it, and the slots beside it
    /// took every writer's CAS.
    visible: Lines<AtomicU64>,
    writers: Lines<[AtomicU64; WRITERS]>,
    /// Bumped each time a slot is taken, so a wait for one write in a slot
    /// is not fooled by the next one.
    generation: Lines<[AtomicU64; WRITERS]>,
    snaps: Mutex<Snaps>,
    readers: [ReaderSlot; READERS],
    base: Instant,
    /// Registrations of both kinds.
    snap_count: AtomicUsize,
    unlogged: AtomicUsize,
    store: SkipMap<StoreKey, Old>,
}

/// A reader's registration ([`Versions::register_reader`]): its read seq
/// and where it is recorded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader {
    pub at: u64,
    /// The slot, or `None`: in the map (every slot it tried was taken).
    slot: Option<usize>,
}

/// A read seq registered for a scope: dropped, it unregisters (if it
/// registered; a caller's snapshot registered its own).
pub(crate) struct ReadReg<'a> {
    vs: &'a Versions,
    pub at: u64,
    own: Option<Reader>,
}

impl<'a> ReadReg<'a> {
    /// `at` if given (already registered by the caller), else a new one.
    pub fn new(vs: &'a Versions, at: Option<u64>) -> ReadReg<'a> {
        match at {
            Some(at) => ReadReg { vs, at, own: None },
            None => {
                let r = vs.register_reader();
                ReadReg {
                    vs,
                    at: r.at,
                    own: Some(r),
                }
            }
        }
    }
}

impl Drop for ReadReg<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.own {
            self.vs.unregister_reader(r);
        }
    }
}

/// A write in progress (see [`Versions::begin_write`]): its slot.
#[must_use]
pub(crate) struct WriteTicket(usize);

impl Default for Versions {
    fn default() -> Self {
        Versions {
            visible: Lines(AtomicU64::new(u64::MAX)),
            writers: Lines(std::array::from_fn(|_| AtomicU64::new(0))),
            generation: Lines(std::array::from_fn(|_| AtomicU64::new(0))),
            snaps: Mutex::new(Snaps::default()),
            readers: std::array::from_fn(|_| ReaderSlot::default()),
            base: Instant::now(),
            snap_count: AtomicUsize::new(0),
            unlogged: AtomicUsize::new(0),
            store: SkipMap::new(),
        }
    }
}

/// A per-thread starting slot, so concurrent writers rarely try the same
/// one: threads in turn take the first slot of each cache line, then the
/// second of each, as reader slots do, so that the first few writer
/// threads each CAS a line of their own.
fn thread_slot() -> usize {
    use std::cell::Cell;
    const PER_LINE: usize = 64 / std::mem::size_of::<AtomicU64>();
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static SLOT: Cell<usize> = const { Cell::new(usize::MAX) });
    SLOT.with(|s| {
        if s.get() == usize::MAX {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let lines = WRITERS / PER_LINE;
            s.set((n % lines) * PER_LINE + (n / lines) % PER_LINE);
        }
        s.get()
    })
}

/// This thread's first reader slot: threads in turn take the first slot of
/// each cache line, then the second of each, and so on.
fn reader_slot() -> usize {
    use std::cell::Cell;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static SLOT: Cell<usize> = const { Cell::new(usize::MAX) });
    SLOT.with(|s| {
        if s.get() == usize::MAX {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let lines = READERS / SLOTS_PER_LINE;
            s.set((n % lines) * SLOTS_PER_LINE + (n / lines) % SLOTS_PER_LINE);
        }
        s.get()
    })
}

impl Versions {
    /// Writes with `seq <` this are applied in full and visible.
    #[inline]
    pub fn visible_below(&self) -> u64 {
        self.visible.load(Ordering::SeqCst)
    }

    /// Sets the watermark when no write is in flight (open, after recovery).
    pub fn publish_all(&self, tail: u64) {
        if self.writers.iter().all(|w| w.load(Ordering::SeqCst) == 0) {
            self.visible.store(tail, Ordering::SeqCst);
        }
    }

    /// Registers a write whose seq will be `>= bound()` (the log tail, read
    /// here, before the write reserves).
    pub fn begin_write(&self, bound: impl Fn() -> u64) -> WriteTicket {
        let b = bound();
        let start = thread_slot();
        let mut spins = 0u32;
        loop {
            for i in 0..WRITERS {
                let idx = (start + i) % WRITERS;
                if let Some(w) = self.writers.get(idx) {
                    if w.compare_exchange(0, b + 1, Ordering::SeqCst, Ordering::Relaxed)
                        .is_ok()
                    {
                        if let Some(g) = self.generation.get(idx) {
                            g.fetch_add(1, Ordering::SeqCst);
                        }
                        return WriteTicket(idx);
                    }
                }
            }
            // More writers in flight than slots: one finishes in a T1 insert.
            super::append::backoff(&mut spins);
        }
    }

    /// Ends the write of `t` and moves the watermark: to the lowest bound
    /// still registered, or to the log tail when none is.
    ///
    /// The tail is read *before* the slots: a writer this scan misses
    /// published its slot after the scan began, so it reserved after the
    /// tail was read and its seq is at least that tail. Every value this
    /// computes is therefore at most the seq of any write in flight then
    /// or later, and the largest of them is kept.
    pub fn end_write(&self, t: WriteTicket, tail: impl Fn() -> u64) {
        if let Some(w) = self.writers.get(t.0) {
            w.store(0, Ordering::SeqCst);
        }
        let mut v = tail();
        for w in self.writers.iter() {
            let b = w.load(Ordering::SeqCst);
            if b != 0 {
                v = v.min(b - 1);
            }
        }
        // The read-modify-write only when it moves the watermark: a writer
        // ending behind an earlier one's registration leaves it unchanged.
        if v > self.visible.load(Ordering::SeqCst) {
            self.visible.fetch_max(v, Ordering::SeqCst);
        }
    }

    /// Waits until every write registered before this call is visible (not
    /// for later ones; returns at once when none is in flight).
    pub fn wait_in_flight(&self) {
        // Wait for these writers to end, not for the watermark to pass their
        // bounds: an unlogged put does not move the log tail, so after it the
        // watermark can stay at its bound for good.
        let busy: Vec<(usize, u64)> = (0..WRITERS)
            .filter_map(|i| {
                let g = self.generation.get(i)?.load(Ordering::SeqCst);
                let w = self.writers.get(i)?.load(Ordering::SeqCst);
                (w != 0).then_some((i, g))
            })
            .collect();
        let mut spins = 0u32;
        for (i, g) in busy {
            while self
                .writers
                .get(i)
                .is_some_and(|w| w.load(Ordering::SeqCst) != 0)
                && self
                    .generation
                    .get(i)
                    .is_some_and(|x| x.load(Ordering::SeqCst) == g)
            {
                super::append::backoff(&mut spins);
            }
        }
    }

    /// Waits until every write with `seq <= seq` is visible.
    pub fn wait_visible(&self, seq: u64) {
        let mut spins = 0u32;
        while self.visible_below() <= seq {
            super::append::backoff(&mut spins);
        }
    }

    /// An unlogged put (`unlogged.rs`) takes its seq from a region reserved
    /// earlier, so it could land below a registered reader's seq after that
    /// reader started. It may go ahead only while no reader is registered
    /// (false: take the logged path); [`Versions::unlogged_leave`] after.
    pub fn unlogged_enter(&self) -> bool {
        self.unlogged.fetch_add(1, Ordering::SeqCst);
        if self.snap_count.load(Ordering::SeqCst) == 0 {
            return true;
        }
        self.unlogged.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Ends an unlogged put begun with [`Versions::unlogged_enter`].
    pub fn unlogged_leave(&self) {
        self.unlogged.fetch_sub(1, Ordering::SeqCst);
    }

    /// Registers a reader at the current watermark; returns its read seq.
    /// For snapshots, which may live long; iterators use
    /// [`Self::register_reader`].
    pub fn register(&self) -> u64 {
        self.count_reader();
        self.register_in_map()
    }

    /// Counts a registration. Before the watermark is read: a writer that
    /// then sees no snapshot loaded the watermark earlier, so this
    /// reader's is newer.
    fn count_reader(&self) {
        self.snap_count.fetch_add(1, Ordering::SeqCst);
        // Unlogged puts that began before the count was seen finish first,
        // so the watermark read after this covers them (see `unlogged_enter`).
        let mut spins = 0u32;
        while self.unlogged.load(Ordering::SeqCst) != 0 {
            super::append::backoff(&mut spins);
        }
    }

    /// Registers an iterator or a MultiScan at the current watermark in
    /// this thread's slot (the map only when the slots it tries are
    /// taken): no lock, no allocation, and no write to a line that another
    /// reader thread writes. Undo with [`Self::unregister_reader`].
    ///
    /// The slot is written, then the watermark read again: a pruner or a
    /// merge that scanned the slots before the write read the watermark
    /// before its scan (`needed`, `oldest`'s callers), so it was at most
    /// the watermark this reader then reads, and the reader keeps the
    /// registration only once two reads agree; what such a scan let go was
    /// replaced at or below that watermark, so this reader never asks for it.
    pub fn register_reader(&self) -> Reader {
        self.count_reader();
        let start = reader_slot();
        for i in 0..SLOTS_PER_LINE {
            let idx = (start / SLOTS_PER_LINE) * SLOTS_PER_LINE + (start + i) % SLOTS_PER_LINE;
            let Some(slot) = self.readers.get(idx) else {
                continue;
            };
            let mut at = self.visible_below();
            if at == u64::MAX {
                // A T1 whose watermark was never published (used without a
                // log): a slot holds `at + 1`, so this one goes to the map.
                break;
            }
            if slot
                .at
                .compare_exchange(0, at + 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            loop {
                let again = self.visible_below();
                if again == at {
                    break;
                }
                at = again;
                slot.at.store(at + 1, Ordering::SeqCst);
            }
            slot.since_ns
                .store(self.base.elapsed().as_nanos() as u64, Ordering::Relaxed);
            return Reader {
                at,
                slot: Some(idx),
            };
        }
        Reader {
            at: self.register_in_map(),
            slot: None,
        }
    }

    /// Drops a registration made by [`Self::register_reader`].
    pub fn unregister_reader(&self, r: Reader) {
        match r.slot.and_then(|i| self.readers.get(i)) {
            Some(slot) => {
                slot.at.store(0, Ordering::SeqCst);
                self.snap_count.fetch_sub(1, Ordering::SeqCst);
            }
            None => self.unregister(r.at),
        }
    }

    /// The read seqs in the slots.
    fn slot_readers(&self) -> impl Iterator<Item = u64> + '_ {
        self.readers
            .iter()
            .filter_map(|s| match s.at.load(Ordering::SeqCst) {
                0 => None,
                a => Some(a - 1),
            })
    }

    fn register_in_map(&self) -> u64 {
        let mut s = self.snaps.lock();
        let at = self.visible_below();
        let e = s.at.entry(at).or_insert((0, None));
        e.0 += 1;
        e.1.get_or_insert_with(Instant::now);
        at
    }

    /// Drops one registration of `at`.
    pub fn unregister(&self, at: u64) {
        let mut s = self.snaps.lock();
        if let Some(e) = s.at.get_mut(&at) {
            e.0 -= 1;
            if e.0 == 0 {
                s.at.remove(&at);
            }
        }
        drop(s);
        self.snap_count.fetch_sub(1, Ordering::SeqCst);
    }

    /// Registered readers, and the oldest one's age.
    pub fn snapshots(&self) -> (usize, Option<std::time::Duration>) {
        let s = self.snaps.lock();
        let mut n: usize = s.at.values().map(|e| e.0 as usize).sum();
        let mut age = s.at.values().filter_map(|e| e.1).min().map(|t| t.elapsed());
        drop(s);
        let now = self.base.elapsed().as_nanos() as u64;
        for r in self
            .readers
            .iter()
            .filter(|r| r.at.load(Ordering::SeqCst) != 0)
        {
            let d = now.saturating_sub(r.since_ns.load(Ordering::Relaxed));
            let d = std::time::Duration::from_nanos(d);
            n += 1;
            age = Some(age.map_or(d, |a| a.max(d)));
        }
        (n, age)
    }

    /// The oldest registered read seq. A caller that bounds what it drops
    /// by it reads the watermark first (see [`Self::register_reader`]).
    pub fn oldest(&self) -> Option<u64> {
        if self.snap_count.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let in_map = self.snaps.lock().at.keys().next().copied();
        match (in_map, self.slot_readers().min()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether some reader may still need version `seq`, replaced by `succ`:
    /// `succ` is not yet visible (readers at the watermark read `seq`), or a
    /// registered reader reads at `S` with `seq < S <= succ`.
    pub fn needed(&self, seq: u64, succ: u64) -> bool {
        if succ >= self.visible_below() {
            return true;
        }
        if self.snap_count.load(Ordering::SeqCst) == 0 {
            return false;
        }
        if self.slot_readers().any(|at| seq < at && at <= succ) {
            return true;
        }
        let s = self.snaps.lock();
        s.at.range((Bound::Excluded(seq), Bound::Included(succ)))
            .next()
            .is_some()
    }

    /// Keeps `old` (replaced by a version with seq `succ`) if a reader may
    /// need it. Call before the replacement becomes visible to readers.
    pub fn spill(&self, key: &[u8], old: Rec, succ: u64) {
        if old.seq < succ && self.needed(old.seq, succ) {
            // A copy already here came from a region above this one: the
            // same version at its newer (relocated) location, so it stays.
            self.store
                .get_or_insert((key.into(), Reverse(old.seq)), Old { rec: old, succ });
        }
    }

    /// True if the store holds no version.
    #[inline]
    pub fn store_is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// Versions the store holds, and their value bytes (stored values).
    pub fn store_size(&self) -> (usize, u64) {
        let mut bytes = 0u64;
        for e in self.store.iter() {
            let d = e.value().rec.decode();
            if let super::entry::Payload::Stored(l) = d.payload {
                bytes += u64::from(l.len);
            }
        }
        (self.store.len(), bytes)
    }

    /// The newest stored version of `key` with `seq < at`.
    pub fn lookup(&self, key: &[u8], at: u64) -> Option<Rec> {
        if self.store.is_empty() || at == 0 {
            return None;
        }
        let from: StoreKey = (key.into(), Reverse(at - 1));
        let e = self.store.lower_bound(Bound::Included(&from))?;
        (&*e.key().0 == key).then(|| e.value().rec)
    }

    /// Removes versions no reader needs any more; returns how many.
    pub fn prune(&self) -> usize {
        let mut n = 0;
        for e in self.store.iter() {
            let (seq, old) = (e.key().1 .0, *e.value());
            if !self.needed(seq, old.succ) {
                e.remove();
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> Rec {
        Rec { seq, a: seq, b: 1 }
    }

    #[test]
    fn the_watermark_waits_for_the_lowest_writer() {
        let v = Versions::default();
        v.publish_all(100);
        let a = v.begin_write(|| 100);
        let b = v.begin_write(|| 150);
        assert_eq!(v.visible_below(), 100);
        v.end_write(b, || 200);
        assert_eq!(v.visible_below(), 100, "a is still applying");
        v.end_write(a, || 200);
        assert_eq!(v.visible_below(), 200);
    }

    #[test]
    fn spilled_versions_serve_registered_readers_until_pruned() {
        let v = Versions::default();
        v.publish_all(10);
        let s = v.register();
        assert_eq!(s, 10);
        // Version 5 replaced by 20 (visible once the watermark passes 20).
        let t = v.begin_write(|| 20);
        v.spill(b"k", rec(5), 20);
        v.end_write(t, || 30);
        assert_eq!(v.lookup(b"k", s).map(|r| r.seq), Some(5));
        assert_eq!(v.lookup(b"k", 5), None, "nothing older than 5");
        assert_eq!(v.lookup(b"j", s), None);
        assert_eq!(v.prune(), 0, "the reader at 10 needs it");
        v.unregister(s);
        assert_eq!(v.prune(), 1);
        assert!(v.store_is_empty());
        // Not needed at all: no reader between, successor visible.
        v.spill(b"k", rec(21), 25);
        assert!(v.store_is_empty());
    }

    #[test]
    fn readers_in_slots_and_in_the_map_count_alike() {
        let v = Versions::default();
        v.publish_all(10);
        // One thread holding more readers than its line has slots: the
        // rest go to the map, and every one is seen.
        let rs: Vec<Reader> = (0..SLOTS_PER_LINE + 2)
            .map(|_| v.register_reader())
            .collect();
        assert!(rs.iter().all(|r| r.at == 10));
        assert_eq!(rs.iter().filter(|r| r.slot.is_none()).count(), 2);
        assert_eq!(v.snapshots().0, SLOTS_PER_LINE + 2);
        let t = v.begin_write(|| 20);
        v.end_write(t, || 30);
        let late = v.register_reader();
        assert_eq!(late.at, 30);
        assert_eq!(v.oldest(), Some(10));
        // Version 5 replaced by 20: the readers at 10 need it, in a slot
        // or in the map.
        v.store.insert(
            (b"k".to_vec().into(), Reverse(5)),
            Old {
                rec: rec(5),
                succ: 20,
            },
        );
        for r in rs.iter().rev() {
            assert_eq!(v.prune(), 0, "a reader at 10 is registered");
            v.unregister_reader(*r);
        }
        assert_eq!(v.oldest(), Some(30));
        assert_eq!(v.prune(), 1, "only the reader at 30 is left");
        v.unregister_reader(late);
        assert_eq!(v.oldest(), None);
        assert_eq!(v.snapshots().0, 0);
    }
}
