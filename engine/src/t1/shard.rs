//! A shard: one key range with its append, frozen and sorted regions.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::append::{AppendMap, MapInsert};
use super::bloom::hash_key;
use super::entry::{Entry, Rec, Upsert};
use super::sorted::{Probe, Sorted};
use super::versions::Versions;

/// What a read at a seq found in a shard's regions.
pub(crate) struct Found {
    /// The newest version visible at the read seq, tombstones included.
    pub rec: Option<Rec>,
    /// The lowest seq of a newer version the read passed over (`u64::MAX`:
    /// none), for [`Versions`]' retry rule.
    pub skipped: u64,
}

/// Picks, from a key's versions in the regions (newest region first, each
/// newest version first), the newest one with `seq < at`; consults the store
/// only when it passed over a newer one.
pub(crate) fn resolve<I: IntoIterator<Item = Rec>>(
    key: &[u8],
    at: u64,
    versions: I,
    vs: &Versions,
) -> Found {
    let mut skipped = u64::MAX;
    let mut rec = None;
    for r in versions {
        if r.seq < at {
            rec = Some(r);
            break;
        }
        skipped = skipped.min(r.seq);
    }
    if skipped != u64::MAX {
        if let Some(old) = vs.lookup(key, at) {
            // On a tie the stored copy wins: it left an upper region, so it
            // is the same version at its newer (relocated) location.
            if rec.is_none_or(|r: Rec| old.seq >= r.seq) {
                rec = Some(old);
            }
        }
    }
    Found { rec, skipped }
}

/// An immutable snapshot of a shard's regions. Maintenance publishes a new one; readers
/// and writers work on whichever snapshot they loaded.
pub(crate) struct ShardState {
    /// Takes new writes (until sealed).
    pub active: Arc<AppendMap>,
    /// Sealed map being merged; possibly shared with the sibling shard after a split, in
    /// which case only the keys inside this shard's range belong to it.
    pub frozen: Option<Arc<AppendMap>>,
    /// Possibly shared with the sibling after a split (filtered by range like `frozen`).
    pub sorted: Arc<Sorted>,
    /// Index range of this shard's keys inside `sorted`.
    pub sorted_lo: usize,
    pub sorted_hi: usize,
}

impl ShardState {
    pub fn new(
        active: Arc<AppendMap>,
        frozen: Option<Arc<AppendMap>>,
        sorted: Arc<Sorted>,
        lo: &[u8],
        hi: Option<&[u8]>,
    ) -> ShardState {
        let (sorted_lo, sorted_hi) = sorted.index_range(lo, hi);
        ShardState {
            active,
            frozen,
            sorted,
            sorted_lo,
            sorted_hi,
        }
    }

    pub fn sorted_count(&self) -> usize {
        self.sorted_hi - self.sorted_lo
    }

    /// The newest record for `key` below the active region (frozen, then sorted).
    /// Counts a Bloom false positive in `fp` when the filter passed but the key is absent.
    #[inline]
    pub fn get_lower(&self, key: &[u8], fp: &std::sync::atomic::AtomicU64) -> Option<Rec> {
        if let Some(f) = &self.frozen {
            if let Some(r) = f.get(key) {
                return Some(r);
            }
        }
        self.sorted_rec(key, fp)
    }

    /// The sorted region's record for `key`, behind its Bloom filter.
    #[inline]
    fn sorted_rec(&self, key: &[u8], fp: &std::sync::atomic::AtomicU64) -> Option<Rec> {
        let s = &*self.sorted;
        if self.sorted_hi == self.sorted_lo {
            return None;
        }
        let h = s.bloom_enabled().then(|| hash_key(key));
        match s.probe(key, h) {
            Probe::Found(i) => Some(s.rec(i)),
            Probe::Filtered => None,
            Probe::Absent => {
                if h.is_some() {
                    fp.fetch_add(1, Ordering::Relaxed);
                }
                None
            }
        }
    }

    /// The version of `key` visible at `at` (tombstones included). `top` is
    /// the active slot's pair, already read (a read without a registered seq
    /// reads it before loading the watermark).
    pub fn get_at(
        &self,
        key: &[u8],
        at: u64,
        top: Option<(Rec, Option<Rec>)>,
        vs: &Versions,
        fp: &std::sync::atomic::AtomicU64,
    ) -> Found {
        if let Some((c, _)) = top {
            if c.seq < at {
                return Found {
                    rec: Some(c),
                    skipped: u64::MAX,
                };
            }
        }
        let (c, p) = top.map_or((None, None), |(c, p)| (Some(c), p));
        // Lazily, region by region: `resolve` stops at the first version
        // below `at`, so a lower region is looked up only when needed.
        let frozen = std::iter::once_with(|| self.frozen.as_ref().and_then(|f| f.get2(key)))
            .flatten()
            .flat_map(|(c, p)| [Some(c), p]);
        let sorted = std::iter::once_with(|| self.sorted_rec(key, fp));
        resolve(
            key,
            at,
            [c, p].into_iter().chain(frozen).chain(sorted).flatten(),
            vs,
        )
    }

    /// The newest record for `key`, tombstones included.
    #[inline]
    pub fn get(&self, key: &[u8], fp: &std::sync::atomic::AtomicU64) -> Option<Rec> {
        if let Some(r) = self.active.get(key) {
            return Some(r);
        }
        self.get_lower(key, fp)
    }

    /// Applies a write to this snapshot. The caller has registered in `active` and
    /// waited until `frozen` is settled for this key, so the key's records in every
    /// region below `active` are immutable here.
    /// Whether the regions below the active one may hold a value stored in
    /// T2. Called by a registered writer after `T1::with_writer`'s wait, so
    /// the frozen map's flag covers every write of the writer's key there.
    #[inline]
    fn lower_stored(&self) -> bool {
        self.sorted.holds_stored() || self.frozen.as_ref().is_some_and(|f| f.holds_stored())
    }

    /// `ordered`: the caller's write is ordered with every other write of
    /// `key` (the engine's writers hold the key's stripe), so no version
    /// below can be newer than `entry`; when, besides, nothing below holds
    /// a stored value, no version there needs accounting for either, and
    /// the write does not read them ([`Upsert::Added`]). Replay is not
    /// ordered this way: a checkpoint can hold versions newer than the
    /// records replayed after it.
    pub fn upsert(
        &self,
        key: &[u8],
        entry: Entry,
        vs: &Versions,
        fp: &std::sync::atomic::AtomicU64,
        ordered: bool,
    ) -> Upsert {
        let new = Rec::encode(&entry);
        self.active.note(new);
        let decide = |old: Rec| (entry.seq >= old.seq).then_some(new);
        // A slot's previous version, pushed out by this write, goes to the
        // store if a reader may still need it.
        let displaced = |old: Rec, succ: u64| vs.spill(key, old, succ);
        // One search of the active map, starting where this thread's last one
        // ended: if the key is absent it leaves the splice where the insert
        // links it.
        super::skiplist::SkipList::with_hint(|sp| {
            if let Some(e) = self.active.seek(key, sp) {
                // An active entry supersedes every region below it.
                return match e.value().update_keeping(decide, displaced) {
                    (old, true) => Upsert::Replaced(old.decode()),
                    (_, false) => Upsert::Stale,
                };
            }
            if ordered && !self.lower_stored() {
                return match self.active.insert_at(key, new, sp, decide, displaced) {
                    MapInsert::Inserted => Upsert::Added,
                    MapInsert::Existing(old, true) => Upsert::Replaced(old.decode()),
                    MapInsert::Existing(_, false) => Upsert::Stale,
                };
            }
            let lower = self.get_lower(key, fp);
            if let Some(l) = lower {
                if l.seq > entry.seq {
                    return Upsert::Stale;
                }
            }
            match self.active.insert_at(key, new, sp, decide, displaced) {
                MapInsert::Inserted => match lower {
                    Some(l) => Upsert::Replaced(l.decode()),
                    None => Upsert::Inserted,
                },
                MapInsert::Existing(old, true) => Upsert::Replaced(old.decode()),
                MapInsert::Existing(_, false) => Upsert::Stale,
            }
        })
    }

    /// Swaps the locator of the entry for `key` if it is still (`seq`, `old`).
    pub fn relocate(
        &self,
        key: &[u8],
        expect: Rec,
        new: Rec,
        fp: &std::sync::atomic::AtomicU64,
    ) -> bool {
        self.active.note(new);
        let decide = |cur: Rec| (cur == expect).then_some(new);
        if let Some(e) = self.active.map.get(key) {
            return e.value().update(decide).1;
        }
        if self.get_lower(key, fp) != Some(expect) {
            return false;
        }
        match self.active.upsert(key, new, decide, |_, _| {}) {
            MapInsert::Inserted => true,
            MapInsert::Existing(_, replaced) => replaced,
        }
    }

    /// Entries in all regions, counting a key once per region holding it.
    pub fn approx_len(&self) -> usize {
        self.active.len() + self.frozen.as_ref().map_or(0, |f| f.len()) + self.sorted_count()
    }
}

/// One key range `[lo, hi)` of the directory.
pub(crate) struct Shard {
    pub lo: Box<[u8]>,
    /// Exclusive upper bound; `None` is +infinity.
    pub hi: Option<Box<[u8]>>,
    pub state: ArcSwap<ShardState>,
    /// Set once a split replaced this shard in the directory; its state is final.
    pub retired: AtomicBool,
}

impl Shard {
    pub fn new(lo: Box<[u8]>, hi: Option<Box<[u8]>>, state: ShardState) -> Shard {
        Shard {
            lo,
            hi,
            state: ArcSwap::from_pointee(state),
            retired: AtomicBool::new(false),
        }
    }

    pub fn hi(&self) -> Option<&[u8]> {
        self.hi.as_deref()
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        key >= &*self.lo && self.hi().is_none_or(|h| key < h)
    }
}

/// The shard list, sorted by `lo`; the first shard starts at the empty key and the last
/// one is unbounded. Replaced wholesale (copy-on-write) by a split.
pub(crate) struct Directory {
    pub shards: Vec<Arc<Shard>>,
}

impl Directory {
    /// Index of the shard whose range holds `key`.
    #[inline]
    pub fn find(&self, key: &[u8]) -> usize {
        self.shards
            .partition_point(|s| &*s.lo <= key)
            .saturating_sub(1)
    }

    #[inline]
    pub fn shard_for(&self, key: &[u8]) -> Option<&Arc<Shard>> {
        self.shards.get(self.find(key))
    }
}
