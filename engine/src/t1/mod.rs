//! T1: the in-memory ordered index. Every key lives here with an [`Entry`] saying where
//! its value is (inline, a T2 [`Locator`], or a tombstone) and which write made it.
//!
//! # Structure
//! A copy-on-write **directory** (`ArcSwap<Directory>`) range-partitions keys into
//! **shards**. Each shard publishes an immutable **state** (`ArcSwap<ShardState>`):
//! - `active`: a concurrent skip list (append region) taking new writes; its values are
//!   seqlocked slots updated in place, so a key never vanishes from it;
//! - `frozen`: an optional sealed skip list being merged (shared with the sibling shard,
//!   filtered by range, right after a split);
//! - `sorted`: an immutable sorted region (key arena, offsets, 8-byte search prefixes,
//!   24-byte records, blocked Bloom filter), also shareable by range after a split.
//!
//! Lookups go active → frozen → Bloom → sorted. Upper regions always hold the newer
//! version of a key (see the writer rule below), so the first hit wins.
//!
//! # Concurrency rules
//! - **Readers** (`get`, cursors) never lock or wait: they load the directory and a
//!   shard state through `arc_swap` and read whatever that snapshot references. Slots
//!   are read under a seqlock (a reader retries only while a writer is copying 24 bytes).
//! - **Writers** (`upsert`, `relocate`) mutate only the `active` map of the state they
//!   loaded. They first register in it (`AppendMap::enter`: publish the key's hash in
//!   one of 32 in-flight slots, or bump an overflow counter); if the map is sealed they
//!   unregister and reload the directory and state. If the state has a `frozen` map,
//!   the writer seals it (maintenance would, right after publishing; helping means no
//!   writer waits for the maintenance thread) and waits until no in-flight writer of
//!   the same key hash remains there (normally no wait at all). Then the key's records in every region below `active` are immutable,
//!   so a writer can compare seqs against them and insert into `active` knowing that
//!   an entry there supersedes anything below. Writers of one key race only inside one
//!   slot, where the seqlock's writer lock orders them and the higher seq wins.
//! - **Maintenance** (reorganize, split; the background thread, `reorganize_all`,
//!   `maintain`, `force_split`) holds `Inner::maint`, so it alone stores shard states
//!   and the directory. Reorganize publishes `{fresh active, frozen = old active}`,
//!   seals and drains the old map, merges it into a new sorted region (dropping
//!   tombstones) and publishes `{active, None, merged}`. A split publishes a new
//!   directory whose two halves share the old active map (as `frozen`) and the old
//!   sorted region, seals that map, then lets each half merge its range. No writer
//!   waits for a merge or a drain; a writer waits only for an in-flight write of its
//!   own key (hash) in the frozen map, i.e. for one skip-list insert.
//! - **Reclamation**: states, regions and directories are reference counted (`Arc`,
//!   with `arc_swap`'s debt lists for loads); a region is freed when the last state or
//!   cursor referencing it drops. An append map's nodes live in its arena and are
//!   freed with it, when its map drops. Nothing is freed while a reader can reach it.
//!
//! # Tombstones
//! A reorganize drops tombstones with `seq <=` the tombstone horizon (the sorted region
//! is the bottom level, so they hide nothing). Once a tombstone is gone, an older write
//! of the same key that arrives late would be inserted instead of rejected as stale.
//! The horizon defaults to `u64::MAX` (drop all); an engine whose writers can apply
//! writes to one key out of seq order sets it with [`T1::set_tombstone_horizon`] to a
//! seq below which every write has been applied.
//!
//! # Cursors
//! A cursor snapshots the directory when created and each shard's state when it enters
//! that shard. A cursor made by [`T1::cursor_at`] reads every key as of a registered
//! seq (see `versions.rs` and design.md §8): a point-in-time view. [`T1::cursor`]
//! (maintenance's) reads each key's newest version instead: it sees every key that
//! exists throughout its life exactly once, and writes that race with it may or may
//! not be seen. Holding a cursor keeps the regions of the shards it visits alive.
//!
//! # Versions
//! Reads at a seq, the visibility watermark and the old versions readers still need
//! are in `versions.rs`: a slot keeps the version it replaced, and versions pushed
//! out of T1 while a reader needs them wait in a store until it is done.

mod append;
mod bloom;
mod bulk;
mod cursor;
mod entry;
mod maint;
mod mem;
mod shard;
mod skiplist;
mod sorted;
#[cfg(test)]
mod tests;
mod versions;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use parking_lot::{Condvar, Mutex};

pub use cursor::Cursor;
pub use entry::{Entry, Locator, Payload, Upsert, INLINE_MAX};

use append::AppendMap;
use entry::Rec;
use shard::{Directory, Shard, ShardState};
use sorted::Sorted;
pub(crate) use versions::{ReadReg, Versions, WriteTicket};

/// Tuning of a [`T1`].
#[derive(Clone, Debug)]
pub struct T1Config {
    /// Entries per shard before it splits at its median.
    pub split_threshold: usize,
    /// Append-region entries before a background reorganize of that shard,
    /// at least; a shard with a large sorted region waits for an eighth of
    /// it (see `merge_due`).
    pub reorganize_threshold: usize,
    /// Bloom filter bits per key in sorted regions; 0 disables the filter.
    pub bloom_bits_per_key: u32,
    /// Run a background maintenance thread (stopped on drop). Without it the caller
    /// drives maintenance with [`T1::maintain`] and [`T1::reorganize_all`].
    pub background: bool,
}

impl Default for T1Config {
    fn default() -> Self {
        T1Config {
            split_threshold: 1 << 20,
            reorganize_threshold: 64 << 10,
            bloom_bits_per_key: 10,
            background: true,
        }
    }
}

/// A maintenance event, for the engine's LOG.
#[derive(Clone, Debug)]
pub enum T1Event {
    /// A shard split at `at`.
    Split {
        /// Lower bound of the shard that split.
        shard_lo: Vec<u8>,
        /// First key of the right half.
        at: Vec<u8>,
        /// Sorted entries of the left half after its merge.
        left_entries: usize,
        /// Sorted entries of the right half after its merge.
        right_entries: usize,
        /// Longest time a writer waited during the split. Writers never wait for the
        /// split itself, only for an in-flight write of their own key in the sealed
        /// append region, so this is normally zero.
        pause: Duration,
        /// Whole split, including the reorganize before and the merges after.
        duration: Duration,
    },
    /// A shard's append region was merged into a new sorted region.
    Reorganized {
        /// Lower bound of the shard.
        shard_lo: Vec<u8>,
        /// Entries in the new sorted region.
        entries: usize,
        /// Freeze, drain and merge.
        duration: Duration,
        /// Longest time a writer waited during the reorganize (see `Split::pause`).
        pause: Duration,
    },
}

/// A snapshot of T1's counters. Region counts add up per region, so a key present in
/// two regions counts twice.
#[derive(Clone, Debug, Default)]
pub struct T1Stats {
    /// Shards in the directory.
    pub shards: usize,
    /// Entries in append regions taking writes.
    pub active_entries: usize,
    /// Entries in frozen append regions awaiting their merge.
    pub frozen_entries: usize,
    /// Entries in sorted regions (each shard's range only).
    pub sorted_entries: usize,
    /// Completed splits.
    pub splits: u64,
    /// Writer-visible pause of the last split (see [`T1Event::Split`]).
    pub last_split_pause: Duration,
    /// Longest writer-visible split pause.
    pub max_split_pause: Duration,
    /// Longest seal-to-drain time of a frozen append region (split or reorganize):
    /// how long maintenance waited for in-flight writers. Writers do not wait for it.
    pub max_drain: Duration,
    /// Completed shard reorganizes (including those run by splits).
    pub reorganizes: u64,
    /// Duration of the last reorganize (background work; writers do not wait for it).
    pub last_reorganize: Duration,
    /// Longest reorganize.
    pub max_reorganize: Duration,
    /// Time spent reorganizing in total.
    pub total_reorganize: Duration,
    /// Writes that had to wait for the frozen map (its seal, or an in-flight write of
    /// the same key), and the longest such wait.
    pub writer_waits: u64,
    /// Longest wait of one write for a frozen map.
    pub max_writer_wait: Duration,
    /// Heap bytes: sorted regions exactly, append regions estimated.
    pub memory_bytes: usize,
    /// Lookups that passed the Bloom filter but missed the sorted region.
    pub bloom_false_positives: u64,
}

#[derive(Default)]
struct Counters {
    splits: AtomicU64,
    last_split_pause_ns: AtomicU64,
    max_split_pause_ns: AtomicU64,
    max_drain_ns: AtomicU64,
    reorganizes: AtomicU64,
    last_reorganize_ns: AtomicU64,
    max_reorganize_ns: AtomicU64,
    total_reorganize_ns: AtomicU64,
    max_writer_wait_ns: AtomicU64,
    /// Longest writer wait since the current maintenance operation started.
    op_writer_wait_ns: AtomicU64,
    writer_waits: AtomicU64,
    bloom_fp: AtomicU64,
}

/// Whether a shard whose append region holds `active` entries over a
/// sorted region of `sorted` is due for a merge. A merge rebuilds the
/// sorted region whole, so merging every `threshold` entries made each
/// entry of a 1M-key shard be copied 16 times per 1M writes (`t1-maint`
/// was 29% of a 4-thread 8-byte `insert`'s samples); waiting for an eighth
/// of the region bounds that at 8 copies, whatever the shard's size.
pub(crate) fn merge_due(active: usize, sorted: usize, threshold: usize) -> bool {
    active >= threshold.max(sorted / 8).max(1)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Counters {
    fn record_split(&self, pause: Duration) {
        self.splits.fetch_add(1, Ordering::Relaxed);
        self.last_split_pause_ns
            .store(nanos(pause), Ordering::Relaxed);
        self.max_split_pause_ns
            .fetch_max(nanos(pause), Ordering::Relaxed);
    }

    /// Starts measuring writer waits for one maintenance operation.
    fn op_start(&self) {
        self.op_writer_wait_ns.store(0, Ordering::Relaxed);
    }

    /// The longest writer wait since `op_start`.
    fn op_pause(&self) -> Duration {
        Duration::from_nanos(self.op_writer_wait_ns.load(Ordering::Relaxed))
    }

    fn record_drain(&self, d: Duration) {
        self.max_drain_ns.fetch_max(nanos(d), Ordering::Relaxed);
    }

    fn record_reorganize(&self, d: Duration) {
        self.reorganizes.fetch_add(1, Ordering::Relaxed);
        self.last_reorganize_ns.store(nanos(d), Ordering::Relaxed);
        self.max_reorganize_ns
            .fetch_max(nanos(d), Ordering::Relaxed);
        self.total_reorganize_ns
            .fetch_add(nanos(d), Ordering::Relaxed);
    }
}

struct Listener(Box<dyn Fn(&T1Event) + Send + Sync>);

pub(crate) struct Inner {
    cfg: T1Config,
    dir: ArcSwap<Directory>,
    maint: Mutex<()>,
    stats: Counters,
    listener: ArcSwapOption<Listener>,
    stop: AtomicBool,
    tombstone_horizon: AtomicU64,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    versions: Versions,
}

/// Keeps one T1's [`Versions`] alive (see [`T1::pin`]).
#[derive(Clone)]
pub(crate) struct VersionsPin(Arc<Inner>);

impl VersionsPin {
    pub(crate) fn versions(&self) -> &Versions {
        &self.0.versions
    }

    /// Whether this pin came from `t1`.
    pub(crate) fn of(&self, t1: &T1) -> bool {
        Arc::ptr_eq(&self.0, &t1.inner)
    }
}

/// The in-memory ordered index. `Send + Sync`; see the module docs for the rules.
pub struct T1 {
    inner: Arc<Inner>,
    bg: Option<JoinHandle<()>>,
}

impl T1 {
    /// An empty index with one shard covering every key.
    pub fn new(cfg: T1Config) -> T1 {
        mem::user_opened();
        let sorted = Arc::new(Sorted::empty());
        let st = ShardState::new(Arc::new(AppendMap::new()), None, sorted, b"", None);
        let shard = Arc::new(Shard::new(Box::default(), None, st));
        let background = cfg.background;
        let inner = Arc::new(Inner {
            cfg,
            dir: ArcSwap::from_pointee(Directory {
                shards: vec![shard],
            }),
            maint: Mutex::new(()),
            stats: Counters::default(),
            listener: ArcSwapOption::empty(),
            stop: AtomicBool::new(false),
            tombstone_horizon: AtomicU64::new(u64::MAX),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            versions: Versions::default(),
        });
        let bg = if background {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("vmemkv-t1-maint".into())
                .spawn(move || background_loop(&inner))
                .ok()
        } else {
            None
        };
        T1 { inner, bg }
    }

    /// Runs `f` on the state of `key`'s shard with the writer registered in its active
    /// map and every lower region immutable (see "Concurrency rules").
    fn with_writer<R>(&self, key: &[u8], f: impl FnOnce(&ShardState) -> R) -> R {
        let inner = &*self.inner;
        let h = bloom::hash_key(key);
        loop {
            let dir = inner.dir.load();
            let Some(shard) = dir.shard_for(key) else {
                // The directory always has a shard; keep going rather than panic.
                std::thread::yield_now();
                continue;
            };
            let st = shard.state.load();
            drop(dir);
            let Some(ticket) = st.active.enter(h) else {
                std::hint::spin_loop();
                continue;
            };
            if let Some(fz) = &st.frozen {
                if !fz.is_settled_for(h) {
                    let t = std::time::Instant::now();
                    fz.wait_settled_for(h);
                    let ns = nanos(t.elapsed());
                    inner.stats.writer_waits.fetch_add(1, Ordering::Relaxed);
                    let c = &inner.stats;
                    c.max_writer_wait_ns.fetch_max(ns, Ordering::Relaxed);
                    c.op_writer_wait_ns.fetch_max(ns, Ordering::Relaxed);
                }
            }
            let r = f(&st);
            st.active.leave(ticket);
            if merge_due(
                st.active.len(),
                st.sorted_count(),
                inner.cfg.reorganize_threshold,
            ) && !st.active.notified.swap(true, Ordering::Relaxed)
            {
                inner.wake();
            }
            return r;
        }
    }

    /// Inserts `entry`, or replaces the key's entry if `entry.seq >= existing.seq` (an
    /// equal seq is the same version moved). Tombstones are entries too.
    /// `Replaced` carries the previous entry, which may be a tombstone.
    pub fn upsert(&self, key: &[u8], entry: Entry) -> Upsert {
        self.upsert_opt(key, entry, false)
    }

    /// [`T1::upsert`] for a write ordered with every other write of `key`
    /// and newer than all of them: it may return [`Upsert::Added`] without
    /// reading the regions below the active one, when they hold no value
    /// stored in T2 (so nothing there has bytes to account for).
    pub fn upsert_ordered(&self, key: &[u8], entry: Entry) -> Upsert {
        self.upsert_opt(key, entry, true)
    }

    fn upsert_opt(&self, key: &[u8], entry: Entry, ordered: bool) -> Upsert {
        let fp = &self.inner.stats.bloom_fp;
        let vs = &self.inner.versions;
        self.with_writer(key, |st| st.upsert(key, entry, vs, fp, ordered))
    }

    /// Visibility, snapshot registrations and old versions (design.md §8).
    pub(crate) fn versions(&self) -> &Versions {
        &self.inner.versions
    }

    /// A handle that keeps [`T1::versions`] alive without the index, for a
    /// snapshot that may outlive a borrow of it.
    pub(crate) fn pin(&self) -> VersionsPin {
        VersionsPin(self.inner.clone())
    }

    /// The version of `key` a reader sees now: the newest whose write has
    /// been applied in full (a batch is seen whole or not at all). `None` if
    /// absent or deleted. Does not allocate or block.
    #[inline]
    pub fn get_visible(&self, key: &[u8]) -> Option<Entry> {
        let vs = &self.inner.versions;
        let fp = &self.inner.stats.bloom_fp;
        loop {
            let dir = self.inner.dir.load();
            let shard = dir.shard_for(key)?;
            let st = shard.state.load();
            // The slot before the watermark: if its version is below the
            // watermark read after it, it was the latest visible one then.
            let top = st.active.get2(key);
            let at = vs.visible_below();
            let f = st.get_at(key, at, top, vs, fp);
            // A version passed over that is visible now may have let the
            // store drop the one this read needed: read again.
            if f.skipped != u64::MAX && f.skipped < vs.visible_below() {
                continue;
            }
            return f.rec.filter(|r| !r.is_tombstone()).map(|r| r.decode());
        }
    }

    /// The version of `key` visible at `at`, a seq registered with
    /// `Versions::register` (so nothing it needs is dropped).
    #[inline]
    pub fn get_at(&self, key: &[u8], at: u64) -> Option<Entry> {
        let vs = &self.inner.versions;
        let dir = self.inner.dir.load();
        let shard = dir.shard_for(key)?;
        let st = shard.state.load();
        let top = st.active.get2(key);
        let f = st.get_at(key, at, top, vs, &self.inner.stats.bloom_fp);
        f.rec.filter(|r| !r.is_tombstone()).map(|r| r.decode())
    }

    /// Defragmentation: points `key` at `new` only if its entry is still
    /// `(expected_seq, Stored(old))`.
    pub fn relocate(&self, key: &[u8], expected_seq: u64, old: Locator, new: Locator) -> bool {
        let expect = Rec::encode(&Entry {
            seq: expected_seq,
            payload: Payload::Stored(old),
        });
        let new = Rec::encode(&Entry {
            seq: expected_seq,
            payload: Payload::Stored(new),
        });
        let fp = &self.inner.stats.bloom_fp;
        self.with_writer(key, |st| st.relocate(key, expect, new, fp))
    }

    /// The live entry for `key`; `None` if absent or deleted. Does not allocate or block.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        let dir = self.inner.dir.load();
        let shard = dir.shard_for(key)?;
        let st = shard.state.load();
        let r = st.get(key, &self.inner.stats.bloom_fp)?;
        (!r.is_tombstone()).then(|| r.decode())
    }

    /// The newest entry for `key`, tombstones included (`None` if T1 has none).
    #[inline]
    pub fn get_entry(&self, key: &[u8]) -> Option<Entry> {
        let dir = self.inner.dir.load();
        let shard = dir.shard_for(key)?;
        let st = shard.state.load();
        st.get(key, &self.inner.stats.bloom_fp).map(|r| r.decode())
    }

    #[cfg(any(test, feature = "internals"))]
    /// Reorganizes from now on keep tombstones with a seq above `seq` and drop the
    /// rest. Set it to a seq such that every write with a lower or equal seq has been
    /// applied to T1 (see "Tombstones" in the module docs). Default `u64::MAX`.
    pub fn set_tombstone_horizon(&self, seq: u64) {
        self.inner.tombstone_horizon.store(seq, Ordering::Release);
    }

    /// A cursor over live entries in bytewise key order, positioned nowhere (not valid)
    /// until a seek.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor::new(self, self.inner.dir.load(), None)
    }

    /// A cursor reading as of `at`, a seq registered with
    /// `Versions::register` by the caller for the cursor's life.
    pub fn cursor_at(&self, at: u64) -> Cursor<'_> {
        Cursor::new(self, self.inner.dir.load(), Some(at))
    }

    /// Merges every shard's append region into its sorted region (blocking the caller,
    /// never readers or writers).
    pub fn reorganize_all(&self) {
        self.inner.reorganize_all();
    }

    /// Merges the append region of every shard that has one (a quiet
    /// database's housekeeping), checking `go_on` between shards; returns
    /// the shards merged.
    pub fn merge_append_regions(&self, go_on: &dyn Fn() -> bool) -> usize {
        self.inner.merge_append_regions(go_on)
    }

    /// Frees the sorted-region arrays kept for the next merges (writes
    /// went quiet: no merge is due soon).
    pub fn release_recycled(&self) {
        mem::release_pooled();
    }

    #[cfg(any(test, feature = "internals"))]
    /// One synchronous maintenance pass (what the background thread runs): reorganizes
    /// shards whose append region passed `reorganize_threshold`, splits shards larger
    /// than `split_threshold`.
    pub fn maintain(&self) {
        self.inner.maintain_once();
    }

    #[cfg(any(test, feature = "internals"))]
    /// Splits the shard holding `key` at its median key (or at `key` itself when
    /// `at_key`). Returns false if the shard cannot split (fewer than two keys, or
    /// `key` is the shard's lower bound).
    pub fn force_split(&self, key: &[u8], at_key: bool) -> bool {
        let _g = self.inner.maint.lock();
        let dir = self.inner.dir.load_full();
        let Some(shard) = dir.shard_for(key) else {
            return false;
        };
        self.inner.split_shard(shard, at_key.then_some(key))
    }

    /// Entries across all regions. Approximate: a key with versions in two regions
    /// (not yet merged) counts twice, and tombstones count until the next reorganize.
    pub fn len(&self) -> usize {
        let dir = self.inner.dir.load();
        dir.shards.iter().map(|s| s.state.load().approx_len()).sum()
    }

    #[cfg(any(test, feature = "internals"))]
    /// True if no region holds any entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters and sizes; walks the directory (cheap, but not for hot paths).
    pub fn stats(&self) -> T1Stats {
        let c = &self.inner.stats;
        let ns = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        let mut s = T1Stats {
            splits: c.splits.load(Ordering::Relaxed),
            last_split_pause: ns(&c.last_split_pause_ns),
            max_split_pause: ns(&c.max_split_pause_ns),
            max_drain: ns(&c.max_drain_ns),
            reorganizes: c.reorganizes.load(Ordering::Relaxed),
            last_reorganize: ns(&c.last_reorganize_ns),
            max_reorganize: ns(&c.max_reorganize_ns),
            total_reorganize: ns(&c.total_reorganize_ns),
            writer_waits: c.writer_waits.load(Ordering::Relaxed),
            max_writer_wait: ns(&c.max_writer_wait_ns),
            bloom_false_positives: c.bloom_fp.load(Ordering::Relaxed),
            ..T1Stats::default()
        };
        let dir = self.inner.dir.load_full();
        s.shards = dir.shards.len();
        let mut seen_sorted: Vec<*const Sorted> = Vec::new();
        let mut seen_maps: Vec<*const AppendMap> = Vec::new();
        s.memory_bytes = std::mem::size_of::<Inner>();
        for sh in &dir.shards {
            let st = sh.state.load_full();
            s.active_entries += st.active.len();
            s.sorted_entries += st.sorted_count();
            s.memory_bytes += std::mem::size_of::<Shard>()
                + std::mem::size_of::<ShardState>()
                + sh.lo.len()
                + sh.hi().map_or(0, <[u8]>::len);
            let mut maps = vec![&st.active];
            if let Some(f) = &st.frozen {
                s.frozen_entries += f.len();
                maps.push(f);
            }
            for m in maps {
                let p = Arc::as_ptr(m);
                if !seen_maps.contains(&p) {
                    seen_maps.push(p);
                    s.memory_bytes += m.heap_bytes() + std::mem::size_of::<AppendMap>();
                }
            }
            let p = Arc::as_ptr(&st.sorted);
            if !seen_sorted.contains(&p) {
                seen_sorted.push(p);
                s.memory_bytes += st.sorted.heap_bytes() + std::mem::size_of::<Sorted>();
            }
        }
        s
    }

    /// Installs the maintenance event listener (replacing any previous one). It runs on
    /// the maintenance thread; keep it short.
    pub fn set_listener(&self, l: Box<dyn Fn(&T1Event) + Send + Sync>) {
        self.inner.listener.store(Some(Arc::new(Listener(l))));
    }
}

impl Inner {
    fn wake(&self) {
        let mut w = self.wake.lock();
        *w = true;
        self.wake_cv.notify_one();
    }
}

fn background_loop(inner: &Inner) {
    while !inner.stop.load(Ordering::Acquire) {
        {
            let mut w = inner.wake.lock();
            if !*w {
                inner.wake_cv.wait_for(&mut w, Duration::from_millis(50));
            }
            *w = false;
        }
        if inner.stop.load(Ordering::Acquire) {
            break;
        }
        inner.maintain_once();
    }
}

impl Drop for T1 {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Release);
        self.inner.wake();
        if let Some(h) = self.bg.take() {
            // A panicking maintenance thread has nothing left to clean up.
            let _ = h.join();
        }
        mem::user_closed();
    }
}
