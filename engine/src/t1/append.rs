//! The append region: an insert-only skip list of keys to seqlocked entry slots
//! (`skiplist.rs`), plus the writer registration (in-flight key-hash slots) that lets
//! maintenance freeze it.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::entry::Rec;
use super::skiplist::{Entry, SkipList, Splice};

/// One entry, updated in place under a seqlock, so the skip list only ever gains keys.
///
/// It also keeps the version it replaced (`p*`, read under the same seqlock): a
/// reader at a seq below the current version's reads that one (see `versions.rs`).
pub(crate) struct Slot {
    ver: AtomicU64,
    seq: AtomicU64,
    a: AtomicU64,
    b: AtomicU64,
    pseq: AtomicU64,
    pa: AtomicU64,
    /// [`NO_PREV`] when there is no previous version.
    pb: AtomicU64,
}

/// `pb` of a slot without a previous version (no record tag is all ones).
const NO_PREV: u64 = u64::MAX;

#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

impl Slot {
    pub fn new(r: Rec) -> Slot {
        Slot {
            ver: AtomicU64::new(0),
            seq: AtomicU64::new(r.seq),
            a: AtomicU64::new(r.a),
            b: AtomicU64::new(r.b),
            pseq: AtomicU64::new(0),
            pa: AtomicU64::new(0),
            pb: AtomicU64::new(NO_PREV),
        }
    }

    /// The current record and the one it replaced, read together.
    #[inline]
    pub fn read2(&self) -> (Rec, Option<Rec>) {
        let mut spins = 0;
        loop {
            let v1 = self.ver.load(Ordering::Acquire);
            if v1 & 1 == 0 {
                let r = Rec {
                    seq: self.seq.load(Ordering::Relaxed),
                    a: self.a.load(Ordering::Relaxed),
                    b: self.b.load(Ordering::Relaxed),
                };
                let pb = self.pb.load(Ordering::Relaxed);
                let p = Rec {
                    seq: self.pseq.load(Ordering::Relaxed),
                    a: self.pa.load(Ordering::Relaxed),
                    b: pb,
                };
                fence(Ordering::Acquire);
                if self.ver.load(Ordering::Relaxed) == v1 {
                    return (r, (pb != NO_PREV).then_some(p));
                }
            }
            backoff(&mut spins);
        }
    }

    /// A consistent snapshot; retries while a writer holds the slot (lock-free for readers
    /// in the sense that they never block a writer).
    #[inline]
    pub fn read(&self) -> Rec {
        let mut spins = 0;
        loop {
            let v1 = self.ver.load(Ordering::Acquire);
            if v1 & 1 == 0 {
                let r = Rec {
                    seq: self.seq.load(Ordering::Relaxed),
                    a: self.a.load(Ordering::Relaxed),
                    b: self.b.load(Ordering::Relaxed),
                };
                fence(Ordering::Acquire);
                if self.ver.load(Ordering::Relaxed) == v1 {
                    return r;
                }
            }
            backoff(&mut spins);
        }
    }

    /// Atomically replaces the record with `f(current)` when `f` returns `Some`.
    /// Returns the record seen and whether it was replaced.
    pub fn update(&self, f: impl FnOnce(Rec) -> Option<Rec>) -> (Rec, bool) {
        self.update_keeping(f, |_, _| {})
    }

    /// [`Slot::update`] that keeps the replaced record as the previous version
    /// when the new one has a higher seq. The previous version it displaces is
    /// passed to `displaced(old_prev, its_successor_seq)` first, while readers
    /// still see the old state (the caller spills it if a reader needs it).
    pub fn update_keeping(
        &self,
        f: impl FnOnce(Rec) -> Option<Rec>,
        displaced: impl FnOnce(Rec, u64),
    ) -> (Rec, bool) {
        let mut spins = 0;
        let v = loop {
            let v = self.ver.load(Ordering::Relaxed);
            if v & 1 == 0
                && self
                    .ver
                    .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                break v;
            }
            backoff(&mut spins);
        };
        fence(Ordering::Release);
        let cur = Rec {
            seq: self.seq.load(Ordering::Relaxed),
            a: self.a.load(Ordering::Relaxed),
            b: self.b.load(Ordering::Relaxed),
        };
        let new = f(cur);
        if let Some(n) = new {
            if n.seq > cur.seq {
                let pb = self.pb.load(Ordering::Relaxed);
                if pb != NO_PREV {
                    let p = Rec {
                        seq: self.pseq.load(Ordering::Relaxed),
                        a: self.pa.load(Ordering::Relaxed),
                        b: pb,
                    };
                    displaced(p, cur.seq);
                }
                self.pseq.store(cur.seq, Ordering::Relaxed);
                self.pa.store(cur.a, Ordering::Relaxed);
                self.pb.store(cur.b, Ordering::Relaxed);
            }
            self.seq.store(n.seq, Ordering::Relaxed);
            self.a.store(n.a, Ordering::Relaxed);
            self.b.store(n.b, Ordering::Relaxed);
        }
        self.ver.store(v + 2, Ordering::Release);
        (cur, new.is_some())
    }
}

/// A skip list that takes writes until it is sealed. After sealing and draining it is
/// immutable and serves as a shard's frozen region until the merge publishes.
pub(crate) struct AppendMap {
    pub map: SkipList,
    sealed: AtomicBool,
    drained: AtomicBool,
    /// Key hashes (| 1) of registered writers, 0 = free. All slots free (and no
    /// untracked writer) means drained; a writer of the successor map waits only for
    /// in-flight writes of its own key. See the module docs of `t1`.
    inflight: [AtomicU64; INFLIGHT],
    /// Registered writers that found no free `inflight` slot.
    untracked: AtomicUsize,
    /// Set once a writer has asked maintenance to reorganize this map.
    pub notified: AtomicBool,
    /// Set by a writer, while registered, before it puts a record whose
    /// value is in T2 (`ShardState::lower_stored`).
    stored: AtomicBool,
}

const INFLIGHT: usize = 32;
const UNTRACKED: usize = usize::MAX;

/// A writer's registration in an [`AppendMap`].
#[must_use]
pub(crate) struct Ticket(usize);

/// Outcome of inserting into the append region.
pub(crate) enum MapInsert {
    /// The key was absent and now holds the new record.
    Inserted,
    /// The key existed; the record seen and whether it was replaced.
    Existing(Rec, bool),
}

impl AppendMap {
    pub fn new() -> AppendMap {
        AppendMap {
            map: SkipList::new(),
            sealed: AtomicBool::new(false),
            drained: AtomicBool::new(false),
            inflight: std::array::from_fn(|_| AtomicU64::new(0)),
            untracked: AtomicUsize::new(0),
            notified: AtomicBool::new(false),
            stored: AtomicBool::new(false),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// True if a key of the map lies in `[lo, hi)`.
    pub fn holds_any(&self, lo: &[u8], hi: Option<&[u8]>) -> bool {
        self.map
            .lower_bound(std::ops::Bound::Included(lo))
            .is_some_and(|e| hi.is_none_or(|h| e.key() < h))
    }

    /// Registers a writer of the key with hash `h`. Returns `None` (and unregisters) if
    /// the map is sealed, in which case the caller must reload the shard state.
    /// The returned ticket must be passed to [`AppendMap::leave`].
    #[inline]
    pub fn enter(&self, h: u64) -> Option<Ticket> {
        let tag = h | 1;
        // Publish the key before checking the seal (all SeqCst): a writer that then sees
        // the map unsealed is visible to anyone who later sees it sealed.
        let mut ticket = Ticket(UNTRACKED);
        let start = (h >> 32) as usize % INFLIGHT;
        for i in 0..INFLIGHT {
            let idx = (start + i) % INFLIGHT;
            if let Some(slot) = self.inflight.get(idx) {
                if slot
                    .compare_exchange(0, tag, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    ticket = Ticket(idx);
                    break;
                }
            }
        }
        if ticket.0 == UNTRACKED {
            self.untracked.fetch_add(1, Ordering::SeqCst);
        }
        if self.sealed.load(Ordering::SeqCst) {
            self.leave(ticket);
            return None;
        }
        Some(ticket)
    }

    #[inline]
    pub fn leave(&self, t: Ticket) {
        match self.inflight.get(t.0) {
            Some(slot) => slot.store(0, Ordering::SeqCst),
            None => {
                self.untracked.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// Called by a registered writer before it puts `rec`. SeqCst, like
    /// [`AppendMap::leave`] after it: a writer that then finds this map
    /// settled for its key (`is_settled_for`) sees the flag of every
    /// write of that key here.
    #[inline]
    pub fn note(&self, rec: Rec) {
        if rec.is_stored() && !self.stored.load(Ordering::Relaxed) {
            self.stored.store(true, Ordering::SeqCst);
        }
    }

    /// Whether any record put here had its value in T2.
    #[inline]
    pub fn holds_stored(&self) -> bool {
        self.stored.load(Ordering::SeqCst)
    }

    pub fn seal(&self) {
        self.sealed.store(true, Ordering::SeqCst);
    }

    pub fn is_drained(&self) -> bool {
        if self.drained.load(Ordering::Acquire) {
            return true;
        }
        if self.sealed.load(Ordering::SeqCst)
            && self.untracked.load(Ordering::SeqCst) == 0
            && self.inflight.iter().all(|s| s.load(Ordering::SeqCst) == 0)
        {
            self.drained.store(true, Ordering::Release);
            return true;
        }
        false
    }

    /// True once the map is sealed and no registered writer is (or may be) writing the
    /// key with hash `h`: from then on that key's record here never changes.
    #[inline]
    pub fn is_settled_for(&self, h: u64) -> bool {
        if self.drained.load(Ordering::Acquire) {
            return true;
        }
        if !self.sealed.load(Ordering::SeqCst) {
            return false;
        }
        let tag = h | 1;
        self.untracked.load(Ordering::SeqCst) == 0
            && self
                .inflight
                .iter()
                .all(|s| s.load(Ordering::SeqCst) != tag)
    }

    /// Waits until [`AppendMap::is_settled_for`] holds. Returns true if it had to wait.
    ///
    /// Only called on a map that a published state lists as `frozen`, which maintenance
    /// is about to seal anyway; sealing it here means a writer never waits for the
    /// maintenance thread to be scheduled.
    pub fn wait_settled_for(&self, h: u64) -> bool {
        self.seal();
        let mut spins = 0;
        let mut waited = false;
        while !self.is_settled_for(h) {
            waited = true;
            backoff(&mut spins);
        }
        waited
    }

    /// Waits until the map is sealed and no registered writer remains; from then on it
    /// never changes. Returns true if it had to wait.
    pub fn wait_drained(&self) -> bool {
        let mut spins = 0;
        let mut waited = false;
        while !self.is_drained() {
            waited = true;
            backoff(&mut spins);
        }
        waited
    }

    /// The current record for `key`, tombstones included.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Rec> {
        if self.map.is_empty() {
            return None;
        }
        self.map.get(key).map(|e| e.value().read())
    }

    /// The current record for `key` and the one it replaced.
    #[inline]
    pub fn get2(&self, key: &[u8]) -> Option<(Rec, Option<Rec>)> {
        if self.map.is_empty() {
            return None;
        }
        self.map.get(key).map(|e| e.value().read2())
    }

    /// Inserts `rec` if absent; otherwise lets `decide` replace the existing record.
    pub fn upsert(
        &self,
        key: &[u8],
        rec: Rec,
        decide: impl FnOnce(Rec) -> Option<Rec>,
        displaced: impl FnOnce(Rec, u64),
    ) -> MapInsert {
        SkipList::with_hint(|sp| match self.map.seek(key, sp) {
            Some(e) => {
                let (old, replaced) = e.value().update_keeping(decide, displaced);
                MapInsert::Existing(old, replaced)
            }
            None => self.insert_at(key, rec, sp, decide, displaced),
        })
    }

    /// The entry for `key`, leaving in `sp` where it would go.
    #[inline]
    pub fn seek(&self, key: &[u8], sp: &mut Splice) -> Option<Entry<'_>> {
        self.map.seek(key, sp)
    }

    /// Like [`AppendMap::upsert`] for a key that a [`AppendMap::seek`] just found
    /// absent: links it at the seek's splice, with no second search unless another
    /// writer linked a neighbour meanwhile.
    pub fn insert_at(
        &self,
        key: &[u8],
        rec: Rec,
        sp: &mut Splice,
        decide: impl FnOnce(Rec) -> Option<Rec>,
        displaced: impl FnOnce(Rec, u64),
    ) -> MapInsert {
        match self.map.insert(key, rec, sp) {
            (_, true) => MapInsert::Inserted,
            // Keys are never removed from an append map: the one found is there for good.
            (e, false) => {
                let (old, replaced) = e.value().update_keeping(decide, displaced);
                MapInsert::Existing(old, replaced)
            }
        }
    }

    /// Heap use: the arena holds every node, tower and key.
    pub fn heap_bytes(&self) -> usize {
        self.map.heap_bytes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> Rec {
        Rec {
            seq,
            a: seq * 3,
            b: 1,
        }
    }

    #[test]
    fn upsert_reports_insert_then_existing() {
        let m = AppendMap::new();
        assert!(matches!(
            m.upsert(b"k", rec(1), |_| None, |_, _| {}),
            MapInsert::Inserted
        ));
        match m.upsert(b"k", rec(2), |o| (o.seq <= 2).then_some(rec(2)), |_, _| {}) {
            MapInsert::Existing(old, true) => assert_eq!(old, rec(1)),
            _ => panic!("expected replace"),
        }
        assert_eq!(m.get(b"k"), Some(rec(2)));
        assert_eq!(m.get(b"x"), None);
    }

    #[test]
    fn seal_rejects_new_writers_and_drains() {
        let m = AppendMap::new();
        let t = m.enter(42).unwrap();
        // Fill every slot so the next writers go untracked.
        let more: Vec<Ticket> = (0..INFLIGHT + 1)
            .map(|i| m.enter(1000 + i as u64 * 2).unwrap())
            .collect();
        assert!(!m.is_settled_for(7), "unsealed map is never settled");
        m.seal();
        assert!(!m.is_drained());
        assert!(m.enter(5).is_none());
        assert!(
            !m.is_settled_for(7),
            "an untracked writer may write any key"
        );
        for t in more {
            m.leave(t);
        }
        assert!(m.is_settled_for(7));
        assert!(!m.is_settled_for(42), "42 is still in flight");
        assert!(!m.is_drained());
        m.leave(t);
        assert!(m.is_settled_for(42));
        assert!(m.is_drained());
        assert!(!m.wait_drained());
    }

    #[test]
    fn seqlock_readers_never_see_torn_records() {
        let slot = std::sync::Arc::new(Slot::new(rec(0)));
        let reader = {
            let slot = slot.clone();
            std::thread::spawn(move || {
                // 200k reads, and on until one saw an update, however the
                // scheduler interleaves the two threads.
                let t0 = std::time::Instant::now();
                let (mut reads, mut newest) = (0u64, 0u64);
                while (reads < 200_000 || newest == 0) && t0.elapsed().as_secs() < 10 {
                    let r = slot.read();
                    assert_eq!(r.a, r.seq * 3, "torn read");
                    newest = newest.max(r.seq);
                    reads += 1;
                }
                newest
            })
        };
        let mut s = 1u64;
        while !reader.is_finished() {
            slot.update(|_| Some(rec(s)));
            s += 1;
        }
        let newest = reader.join().unwrap_or_else(|_| panic!("torn read"));
        assert!(newest > 0, "the reader never overlapped an update");
    }
}
