//! Maintenance: reorganize (freeze + merge) and median splits. Every function here runs
//! with `Inner::maint` held, so at most one maintenance operation changes shard states
//! or the directory at a time. Readers and writers never take that lock.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::append::AppendMap;
use super::shard::{Directory, Shard, ShardState};
use super::sorted::{Sorted, SortedBuilder};
use super::versions::Versions;
use super::{Inner, T1Event};

/// How a merge builds its output.
pub(crate) struct MergeOpts<'a> {
    /// Versions the merge drops go here if a reader still needs them; the
    /// merge also waits until every frozen version is visible, so that a read
    /// at the watermark never needs one it drops.
    pub versions: &'a Versions,
    pub bloom_bits: u32,
    /// Tombstones with `seq <= tombstone_horizon` are dropped (nothing lies below the
    /// sorted region for them to hide); newer ones are kept so a delayed older write
    /// of the same key is still recognised as stale.
    pub tombstone_horizon: u64,
}

/// Merges `frozen ∩ [lo,hi)` over `sorted[slo..shi)`; the frozen record wins a tie
/// unless the sorted one has a higher seq.
pub(crate) fn merge(
    frozen: Option<&AppendMap>,
    sorted: &Sorted,
    slo: usize,
    shi: usize,
    lo: &[u8],
    hi: Option<&[u8]>,
    opts: &MergeOpts<'_>,
) -> Sorted {
    let vs = opts.versions;
    let keep = |r: &super::entry::Rec| !r.is_tombstone() || r.seq > opts.tombstone_horizon;
    use std::ops::Bound;
    let range = (
        Bound::Included(lo),
        hi.map_or(Bound::Unbounded, Bound::Excluded),
    );
    let (mut fn_, mut fb) = (0usize, 0usize);
    if let Some(f) = frozen {
        for e in f.map.range(range) {
            fn_ += 1;
            fb += e.key().len();
        }
    }
    let mut b = SortedBuilder::new(fn_ + (shi - slo), fb + sorted.arena_bytes_in(slo, shi));
    // Merged whole, the region's filter already holds every key of it, so
    // the new one is a copy plus the keys only the frozen map has.
    let whole = slo == 0 && shi == sorted.len() && sorted.bloom_enabled();
    if whole {
        b = b.tracking_added(fn_);
    }
    let mut fit = frozen.map(|f| f.map.range(range));
    let mut fcur = fit.as_mut().and_then(|it| it.next());
    let mut i = slo;
    loop {
        let s_key = (i < shi).then(|| sorted.key(i));
        match (&fcur, s_key) {
            (None, None) => break,
            (Some(fe), s) => {
                let fk: &[u8] = fe.key();
                match s.map(|sk| fk.cmp(sk)) {
                    Some(std::cmp::Ordering::Greater) => {
                        // The sorted keys below the next frozen one are
                        // unchanged: copy them as one run.
                        let j = sorted.lower_bound_from(i, shi, fk);
                        copy_kept(&mut b, sorted, i, j, &keep);
                        i = j;
                    }
                    ord => {
                        let (c, p) = fe.value().read2();
                        vs.wait_visible(c.seq);
                        let mut r = c;
                        if let Some(p) = p {
                            vs.spill(fk, p, c.seq);
                        }
                        if ord == Some(std::cmp::Ordering::Equal) {
                            let sr = sorted.rec(i);
                            if sr.seq > r.seq {
                                r = sr;
                            } else {
                                vs.spill(fk, sr, p.map_or(c.seq, |p| p.seq));
                            }
                            i += 1;
                        }
                        if keep(&r) && ord == Some(std::cmp::Ordering::Equal) {
                            b.push(fk, r);
                        } else if keep(&r) {
                            b.push_added(fk, r);
                        }
                        fcur = fit.as_mut().and_then(|it| it.next());
                    }
                }
            }
            (None, Some(_)) => {
                copy_kept(&mut b, sorted, i, shi, &keep);
                i = shi;
            }
        }
    }
    b.finish_over(opts.bloom_bits, sorted, whole)
}

/// Pushes the entries of `sorted[i..j)` that `keep` keeps, as runs copied
/// whole: one run unless the region holds tombstones to drop.
fn copy_kept(
    b: &mut SortedBuilder,
    sorted: &Sorted,
    i: usize,
    j: usize,
    keep: &dyn Fn(&super::entry::Rec) -> bool,
) {
    if !sorted.has_tombstones() {
        b.push_run(sorted, i, j);
        return;
    }
    let mut start = i;
    for k in i..j {
        if !keep(&sorted.rec(k)) {
            b.push_run(sorted, start, k);
            start = k + 1;
        }
    }
    b.push_run(sorted, start, j);
}

impl Inner {
    fn emit(&self, ev: &T1Event) {
        if let Some(l) = self.listener.load().as_ref() {
            (l.0)(ev);
        }
    }

    /// Freezes the active map of `shard` (if there is no frozen map yet): publish a state
    /// with a fresh active map, then seal and drain the old one. Returns the
    /// seal-to-drain time.
    pub(crate) fn freeze(&self, shard: &Shard) -> Duration {
        let st = shard.state.load_full();
        if st.frozen.is_some() {
            return Duration::ZERO;
        }
        let next = ShardState::new(
            Arc::new(AppendMap::new()),
            Some(st.active.clone()),
            st.sorted.clone(),
            &shard.lo,
            shard.hi(),
        );
        shard.state.store(Arc::new(next));
        st.active.seal();
        let t = Instant::now();
        st.active.wait_drained();
        t.elapsed()
    }

    /// Merges the frozen map (if any) into a new sorted region and publishes it.
    fn finish_frozen(&self, shard: &Shard) -> Option<usize> {
        let st = shard.state.load_full();
        let f = st.frozen.as_ref()?;
        f.wait_drained();
        if !f.holds_any(&shard.lo, shard.hi()) {
            // Nothing of the shard's range to merge (the left half of an
            // append split): keep the sorted region rather than copy it.
            let next = ShardState::new(
                st.active.clone(),
                None,
                st.sorted.clone(),
                &shard.lo,
                shard.hi(),
            );
            shard.state.store(Arc::new(next));
            return Some(st.sorted_count());
        }
        let merged = merge(
            Some(f),
            &st.sorted,
            st.sorted_lo,
            st.sorted_hi,
            &shard.lo,
            shard.hi(),
            &MergeOpts {
                versions: &self.versions,
                bloom_bits: self.cfg.bloom_bits_per_key,
                // A tombstone a registered reader does not see yet stays: it
                // may hide a version that reader reads from the store.
                tombstone_horizon: self.tombstone_horizon.load(Ordering::Acquire).min(
                    self.versions
                        .oldest()
                        .map_or(u64::MAX, |o| o.saturating_sub(1)),
                ),
            },
        );
        let n = merged.len();
        // Only maintenance stores shard states and we hold the lock, so `st.active` is
        // still the shard's active map.
        let next = ShardState::new(
            st.active.clone(),
            None,
            Arc::new(merged),
            &shard.lo,
            shard.hi(),
        );
        shard.state.store(Arc::new(next));
        Some(n)
    }

    /// Full reorganize of one shard: freeze, drain, merge, publish.
    pub(crate) fn reorganize_shard(&self, shard: &Shard) {
        if !self.versions.store_is_empty() {
            self.versions.prune();
        }
        if shard.retired.load(Ordering::Acquire) {
            return;
        }
        let t = Instant::now();
        self.stats.op_start();
        let drain = self.freeze(shard);
        let entries = self.finish_frozen(shard).unwrap_or(0);
        let d = t.elapsed();
        let pause = self.stats.op_pause();
        self.stats.record_reorganize(d);
        self.stats.record_drain(drain);
        self.emit(&T1Event::Reorganized {
            shard_lo: shard.lo.to_vec(),
            entries,
            duration: d,
            pause,
        });
    }

    /// Splits `shard` at the median of its keys. The halves share the old active map
    /// (sealed, as their frozen region) and the old sorted region, each filtered by its
    /// range, so publishing the split is O(shards); each half then merges its part.
    /// Returns false if the shard is retired or has fewer than two keys.
    pub(crate) fn split_shard(&self, shard: &Arc<Shard>, at: Option<&[u8]>) -> bool {
        self.split_shard_opt(shard, at, true)
    }

    /// [`Inner::split_shard`]; with `merge_halves == false` the halves keep sharing the
    /// frozen map and sorted region until their next reorganize (tests use this to
    /// exercise the shared, range-filtered state).
    pub(crate) fn split_shard_opt(
        &self,
        shard: &Arc<Shard>,
        at: Option<&[u8]>,
        merge_halves: bool,
    ) -> bool {
        if shard.retired.load(Ordering::Acquire) {
            return false;
        }
        let t0 = Instant::now();
        let st = shard.state.load_full();
        if st.frozen.is_some() || st.active.len() > st.sorted_count() / 8 {
            // Pick the median from an up-to-date sorted region.
            self.reorganize_shard(shard);
        }
        let st = shard.state.load_full();
        let n = st.sorted_count();
        let mid: Box<[u8]> = match at {
            Some(k) => {
                if !shard.contains(k) || k == &*shard.lo {
                    return false;
                }
                k.into()
            }
            None => {
                if n < 2 {
                    return false;
                }
                st.sorted.key(st.sorted_lo + n / 2).into()
            }
        };
        self.split_at(shard, &st, mid, merge_halves, t0)
    }

    /// The merge of an append region whose every key sorts after the
    /// shard's sorted region (an in-order load, keys past the end): split
    /// the shard at the region's first key, so that the left half keeps its
    /// sorted region as it is and the right half's is built from the new
    /// entries alone. A merge then copies what changed, not the shard.
    /// Only for a shard whose sorted region holds `split_threshold / 8`
    /// keys or more, so that an in-order load makes shards of that size
    /// and up, not one per merge. Returns false (nothing done) otherwise.
    pub(crate) fn append_split(&self, shard: &Arc<Shard>) -> bool {
        let t0 = Instant::now();
        let st = shard.state.load_full();
        let n = st.sorted_count();
        if shard.retired.load(Ordering::Acquire)
            || st.frozen.is_some()
            || n == 0
            || n < self.cfg.split_threshold / 8
        {
            return false;
        }
        let Some(first) = st.active.map.lower_bound(std::ops::Bound::Unbounded) else {
            return false;
        };
        let first = first.key();
        if first <= st.sorted.key(st.sorted_hi - 1) {
            return false;
        }
        // A key below `first` written before the seal lands in the left
        // half's frozen range, which then merges as usual.
        self.split_at(shard, &st, first.into(), true, t0)
    }

    /// Replaces `shard` (whose current state is `st`) by its halves below
    /// and from `mid`.
    fn split_at(
        &self,
        shard: &Arc<Shard>,
        st: &ShardState,
        mid: Box<[u8]>,
        merge_halves: bool,
        t0: Instant,
    ) -> bool {
        let dir = self.dir.load_full();
        let Some(pos) = dir.shards.iter().position(|s| Arc::ptr_eq(s, shard)) else {
            return false;
        };
        let mk = |lo: Box<[u8]>, hi: Option<Box<[u8]>>| {
            let state = ShardState::new(
                Arc::new(AppendMap::new()),
                Some(st.active.clone()),
                st.sorted.clone(),
                &lo,
                hi.as_deref(),
            );
            Arc::new(Shard::new(lo, hi, state))
        };
        let left = mk(shard.lo.clone(), Some(mid.clone()));
        let right = mk(mid.clone(), shard.hi.clone());
        let mut shards = Vec::with_capacity(dir.shards.len() + 1);
        shards.extend(dir.shards.iter().take(pos).cloned());
        shards.push(left.clone());
        shards.push(right.clone());
        shards.extend(dir.shards.iter().skip(pos + 1).cloned());
        // Publish the directory before sealing so a writer bounced by the seal always
        // finds the new shards when it reloads.
        self.stats.op_start();
        self.dir.store(Arc::new(Directory { shards }));
        shard.retired.store(true, Ordering::Release);
        st.active.seal();
        let t = Instant::now();
        st.active.wait_drained();
        let drain = t.elapsed();
        let (ln, rn) = if merge_halves {
            (
                self.finish_frozen(&left).unwrap_or(0),
                self.finish_frozen(&right).unwrap_or(0),
            )
        } else {
            (
                left.state.load().approx_len(),
                right.state.load().approx_len(),
            )
        };
        let d = t0.elapsed();
        let pause = self.stats.op_pause();
        self.stats.record_split(pause);
        self.stats.record_drain(drain);
        self.emit(&T1Event::Split {
            shard_lo: shard.lo.to_vec(),
            at: mid.to_vec(),
            left_entries: ln,
            right_entries: rn,
            pause,
            duration: d,
        });
        true
    }

    /// One maintenance pass: finish pending merges, reorganize maps over the threshold,
    /// split shards over the split threshold.
    pub(crate) fn maintain_once(&self) {
        let _g = self.maint.lock();
        let dir = self.dir.load_full();
        for shard in &dir.shards {
            if shard.retired.load(Ordering::Acquire) {
                continue;
            }
            let st = shard.state.load_full();
            let due = super::merge_due(
                st.active.len(),
                st.sorted_count(),
                self.cfg.reorganize_threshold,
            );
            if st.frozen.is_some() || due {
                drop(st);
                if !self.append_split(shard) {
                    self.reorganize_shard(shard);
                }
            }
            let st = shard.state.load_full();
            if st.approx_len() > self.cfg.split_threshold.max(2) {
                self.split_shard(shard, None);
            }
        }
    }

    /// Reorganizes the shards whose append region holds anything, while
    /// `go_on` says so (checked between shards); returns how many.
    pub(crate) fn merge_append_regions(&self, go_on: &dyn Fn() -> bool) -> usize {
        let _g = self.maint.lock();
        let dir = self.dir.load_full();
        let mut merged = 0;
        for shard in &dir.shards {
            if !go_on() {
                break;
            }
            let st = shard.state.load();
            if shard.retired.load(Ordering::Acquire) || st.frozen.is_none() && st.active.is_empty()
            {
                continue;
            }
            drop(st);
            self.reorganize_shard(shard);
            merged += 1;
        }
        merged
    }

    pub(crate) fn reorganize_all(&self) {
        let _g = self.maint.lock();
        let dir = self.dir.load_full();
        for shard in &dir.shards {
            self.reorganize_shard(shard);
        }
    }
}
