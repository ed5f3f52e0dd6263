//! The immutable sorted region: keys in one arena, an offsets array, fixed-size records,
//! an 8-byte search prefix per key and a blocked Bloom filter.
//!
//! Layout per key: key bytes, plus 4 (offset; 8 if the arena exceeds 4 GiB), 8 (prefix),
//! 24 (record) and bits_per_key/8 (Bloom). The prefix is the big-endian value of the
//! 8 key bytes that follow the region's common prefix, so most binary-search steps
//! compare one `u64` instead of chasing the arena.

use super::bloom::{hash_key, headroom, Bloom};
use super::entry::Rec;
use super::mem::{give, take};
use crate::prefetch;

/// The outcome of [`Sorted::probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The Bloom filter rules the key out.
    Filtered,
    /// The key is at this index.
    Found(usize),
    /// The key is absent (after passing the filter, if one was asked).
    Absent,
}

impl Probe {
    /// The index, if found.
    #[cfg(test)]
    pub fn found(self) -> Option<usize> {
        match self {
            Probe::Found(i) => Some(i),
            Probe::Filtered | Probe::Absent => None,
        }
    }
}

/// One sample per this many keys; a block of prefixes is then 4 cache lines.
const SAMPLE: usize = 32;

enum Offsets {
    /// Every key has this length: key `i` starts at `i * len`.
    Fixed(usize),
    Small(Vec<u32>),
    Large(Vec<u64>),
}

impl Offsets {
    #[inline]
    fn get(&self, i: usize) -> usize {
        match self {
            Offsets::Fixed(len) => i * len,
            Offsets::Small(v) => v.get(i).map_or(0, |&x| x as usize),
            Offsets::Large(v) => v.get(i).map_or(0, |&x| x as usize),
        }
    }

    /// Where key `i` starts and ends: one match, not one per end.
    #[inline]
    fn span(&self, i: usize) -> (usize, usize) {
        match self {
            Offsets::Fixed(len) => (i * len, (i + 1) * len),
            Offsets::Small(v) => match v.get(i..i + 2) {
                Some(&[s, e]) => (s as usize, e as usize),
                _ => (0, 0),
            },
            Offsets::Large(v) => match v.get(i..i + 2) {
                Some(&[s, e]) => (s as usize, e as usize),
                _ => (0, 0),
            },
        }
    }

    fn push(&mut self, x: usize) {
        match self {
            Offsets::Fixed(_) => {}
            // The builder picks Large whenever the arena can exceed u32::MAX.
            Offsets::Small(v) => v.push(x as u32),
            Offsets::Large(v) => v.push(x as u64),
        }
    }

    fn shrink(&mut self) {
        match self {
            Offsets::Fixed(_) => {}
            Offsets::Small(v) => v.shrink_to_fit(),
            Offsets::Large(v) => v.shrink_to_fit(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Offsets::Fixed(_) => 0,
            Offsets::Small(v) => v.capacity() * 4,
            Offsets::Large(v) => v.capacity() * 8,
        }
    }
}

/// An immutable, sorted run of unique keys with their records. Never mutated after
/// [`SortedBuilder::finish`]; shared between shards by `Arc` after a split.
pub(crate) struct Sorted {
    arena: Vec<u8>,
    offsets: Offsets,
    prefixes: Vec<u64>,
    /// `prefixes[i * SAMPLE]`: a cache-resident first level for the binary search.
    samples: Vec<u64>,
    /// A radix table over the prefixes: see [`Radix`].
    radix: Radix,
    recs: Vec<Rec>,
    /// Length of the prefix every key shares (that of the first and last key).
    skip: usize,
    /// The shared prefix as a zero-padded big-endian word, when `skip <= 8`.
    common_word: u64,
    /// `Some(len)` when every key is `len` bytes and its bytes past the
    /// shared prefix and the 8-byte search prefix are `tail`, the same in
    /// every key (none when `len <= skip + 8`; db_bench's zero padding
    /// otherwise): the shared prefix, a key's search prefix and the tail
    /// then spell the whole key, so a query of that length and tail that
    /// matches a prefix is found without reading the arena (a cache miss
    /// per point read saved).
    exact_len: Option<usize>,
    tail: Box<[u8]>,
    bloom: Bloom,
    /// Whether any record's value is in T2 (`ShardState::lower_stored`).
    stored: bool,
    /// Whether any record is a tombstone: a run copied from a region
    /// without one needs no look at its records (`SortedBuilder::push_run`).
    tombstones: bool,
}

#[inline]
fn prefix_of(s: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = s.len().min(8);
    w[..n].copy_from_slice(&s[..n]);
    u64::from_be_bytes(w)
}

/// Keys per radix bucket aimed at: a bucket of uniform keys then spans
/// one or two cache lines of prefixes.
const RADIX_KEYS_PER_BUCKET: usize = 8;
/// A bucket holding more prefixes than this is searched through the
/// samples instead (skewed keys).
const RADIX_MAX_BUCKET: usize = 4 * SAMPLE;

/// `first[t]` is the first index whose prefix `p` has
/// `(p - min) >> shift >= t`, so the first prefix `>= qp` lies in
/// `[first[t], first[t + 1]]` for `t = (qp - min) >> shift`: one load
/// instead of a binary search over the samples, whose halvings are
/// dependent loads (the largest part of a point read in the profiles of
/// docs/performance.md). Keys that are not spread over their range fall
/// back to the samples bucket by bucket.
struct Radix {
    first: Vec<u32>,
    min: u64,
    max: u64,
    shift: u32,
}

impl Radix {
    fn none() -> Radix {
        Radix {
            first: Vec::new(),
            min: 0,
            max: 0,
            shift: 0,
        }
    }

    /// The table for `prefixes` (sorted), about one entry per
    /// [`RADIX_KEYS_PER_BUCKET`] keys.
    fn build(prefixes: &[u64]) -> Radix {
        let n = prefixes.len();
        let (Some(&min), Some(&max)) = (prefixes.first(), prefixes.last()) else {
            return Radix::none();
        };
        if n < 2 * RADIX_KEYS_PER_BUCKET || u32::try_from(n).is_err() {
            return Radix::none();
        }
        let bits = (n / RADIX_KEYS_PER_BUCKET)
            .next_power_of_two()
            .trailing_zeros();
        let span_bits = 64 - (max - min).leading_zeros();
        let shift = span_bits.saturating_sub(bits);
        let buckets = ((max - min) >> shift) as usize + 1;
        let mut first = Vec::with_capacity(buckets + 1);
        for (i, &p) in prefixes.iter().enumerate() {
            let b = ((p - min) >> shift) as usize;
            while first.len() <= b {
                first.push(i as u32);
            }
        }
        first.push(n as u32);
        Radix {
            first,
            min,
            max,
            shift,
        }
    }

    /// `[lo, hi)`, the prefixes sharing `qp`'s bucket: the first prefix
    /// `>= qp` is in `lo..=hi`. `None` without a table.
    #[inline]
    fn bucket(&self, qp: u64) -> Option<(usize, usize)> {
        if self.first.is_empty() {
            return None;
        }
        if qp < self.min {
            return Some((0, 0));
        }
        if qp > self.max {
            let n = self.first.last().map_or(0, |&x| x as usize);
            return Some((n, n));
        }
        let t = ((qp - self.min) >> self.shift) as usize;
        let lo = self.first.get(t)?;
        let hi = self.first.get(t + 1)?;
        Some((*lo as usize, *hi as usize))
    }

    fn heap_bytes(&self) -> usize {
        self.first.capacity() * 4
    }
}

/// First index `i` with `a[i] >= x` (branch-free halving).
#[inline]
fn lower_u64(a: &[u64], x: u64) -> usize {
    let mut base = 0usize;
    let mut size = a.len();
    if size == 0 {
        return 0;
    }
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = if a.get(mid).is_some_and(|&v| v < x) {
            mid
        } else {
            base
        };
        size -= half;
    }
    base + usize::from(a.get(base).is_some_and(|&v| v < x))
}

impl Sorted {
    pub fn empty() -> Sorted {
        SortedBuilder::new(0, 0).finish(0)
    }

    pub fn len(&self) -> usize {
        self.recs.len()
    }

    #[inline]
    pub fn key(&self, i: usize) -> &[u8] {
        let (s, e) = self.offsets.span(i);
        self.arena.get(s..e).unwrap_or(&[])
    }

    #[inline]
    pub fn rec(&self, i: usize) -> Rec {
        self.recs.get(i).copied().unwrap_or_default()
    }

    /// First index whose key is `>= q` (`len()` if none).
    pub fn lower_bound(&self, q: &[u8]) -> usize {
        self.locate(q, None).map_or(0, |(i, _)| i)
    }

    /// Index of the entry for exactly `q`.
    #[cfg(test)]
    pub fn find(&self, q: &[u8]) -> Option<usize> {
        self.probe(q, None).found()
    }

    /// [`Self::find`] behind the Bloom filter, when enabled: `h` is `q`'s
    /// [`hash_key`]. The filter's block and the search prefixes are loaded
    /// together, so a hit costs one miss less than filter-then-search.
    #[inline]
    pub fn probe(&self, q: &[u8], h: Option<u64>) -> Probe {
        let h = h.filter(|_| self.bloom.enabled());
        match self.locate(q, h) {
            None => Probe::Filtered,
            Some((i, true)) => Probe::Found(i),
            Some((i, false)) if i < self.len() && self.key(i) == q => Probe::Found(i),
            Some(_) => Probe::Absent,
        }
    }

    /// [`Self::lower_bound`], and whether that key is known to equal `q`;
    /// `None` if the Bloom filter (consulted when `h` is given) rules `q` out.
    #[inline]
    fn locate(&self, q: &[u8], h: Option<u64>) -> Option<(usize, bool)> {
        if let Some(h) = h {
            self.bloom.prefetch(h);
        }
        let n = self.len();
        if n == 0 {
            return Some((0, false));
        }
        let qc = q.get(..self.skip).unwrap_or(q);
        // Outside the shared prefix: absent without a search, so a probe
        // counts it as filtered rather than as a filter false positive.
        let outside = |i| h.is_none().then_some((i, false));
        let order = if self.skip <= 8 {
            // Zero-padded words, then lengths: the byte order, without a
            // `memcmp` call (3% of a point read).
            (prefix_of(qc), qc.len()).cmp(&(self.common_word, self.skip))
        } else {
            let first = self.key(0);
            qc.cmp(first.get(..self.skip).unwrap_or(first))
        };
        match order {
            std::cmp::Ordering::Less => return outside(0),
            std::cmp::Ordering::Greater => return outside(n),
            std::cmp::Ordering::Equal => {}
        }
        let qp = prefix_of(q.get(self.skip..).unwrap_or(&[]));
        let block = self.prefix_block(qp);
        if let Some(h) = h {
            if !self.bloom.may_contain_hash(h) {
                return None;
            }
        }
        let i = block.0 + lower_u64(block.1, qp);
        if i >= n || self.prefixes.get(i) != Some(&qp) {
            return Some((i, false));
        }
        if self.exact_len == Some(q.len()) && q.get(self.skip + 8..).unwrap_or(&[]) == &*self.tail {
            return Some((i, true));
        }
        // The arena compare below is a miss: start the record's with it.
        if let Some(r) = self.recs.get(i) {
            prefetch::line_of(r);
        }
        if self.key(i) >= q {
            return Some((i, false));
        }
        // Several keys share this 8-byte prefix: binary search them on full keys.
        let end = self.lower_prefix(qp.saturating_add(1)).max(i + 1);
        let end = if qp == u64::MAX { n } else { end };
        let (mut lo, mut hi) = (i + 1, end);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.key(mid) < q {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Some((lo, false))
    }

    /// First index whose prefix is `>= qp`: search the samples, then one block.
    #[inline]
    fn lower_prefix(&self, qp: u64) -> usize {
        let (lo, block) = self.prefix_block(qp);
        lo + lower_u64(block, qp)
    }

    /// The block of prefixes, and its first index, that holds the first
    /// prefix `>= qp` (or whose end is it), found from the radix table or
    /// else the samples; its lines are prefetched so the search inside it
    /// waits for one miss, not one per halving.
    #[inline]
    fn prefix_block(&self, qp: u64) -> (usize, &[u64]) {
        if let Some((lo, hi)) = self.radix.bucket(qp) {
            if hi - lo <= RADIX_MAX_BUCKET {
                let block = self.prefixes.get(lo..hi).unwrap_or(&[]);
                prefetch::slice(block);
                // A small bucket's records too: the one the search picks is
                // then in flight already (one dependent miss less).
                if hi - lo <= RADIX_KEYS_PER_BUCKET * 2 {
                    let end = (hi + 1).min(self.recs.len());
                    prefetch::slice(self.recs.get(lo..end).unwrap_or(&[]));
                    // And their keys, which a match on the prefix compares
                    // unless the prefix spells the key (`exact_len`).
                    if let (Offsets::Fixed(len), None) = (&self.offsets, self.exact_len) {
                        prefetch::slice(self.arena.get(lo * len..end * len).unwrap_or(&[]));
                    }
                }
                return (lo, block);
            }
        }
        let j = lower_u64(&self.samples, qp);
        if j == 0 {
            return (0, &[]);
        }
        // samples[j-1] < qp <= samples[j]: the answer is in ((j-1)*SAMPLE, j*SAMPLE].
        let lo = (j - 1) * SAMPLE + 1;
        let hi = (j * SAMPLE).min(self.prefixes.len());
        let block = self.prefixes.get(lo..hi).unwrap_or(&[]);
        prefetch::slice(block);
        (lo, block)
    }

    /// Whether any record's value is in T2.
    pub fn holds_stored(&self) -> bool {
        self.stored
    }

    pub fn bloom_enabled(&self) -> bool {
        self.bloom.enabled()
    }

    /// False means `q` (with hash `h`) is certainly not in this region.
    #[cfg(test)]
    pub fn may_contain_hash(&self, h: u64) -> bool {
        self.bloom.may_contain_hash(h)
    }

    /// Index range `[lo, hi)` of the keys inside the key range `[lo_key, hi_key)`.
    pub fn index_range(&self, lo_key: &[u8], hi_key: Option<&[u8]>) -> (usize, usize) {
        let lo = if lo_key.is_empty() {
            0
        } else {
            self.lower_bound(lo_key)
        };
        let hi = hi_key.map_or(self.len(), |h| self.lower_bound(h));
        (lo, hi.max(lo))
    }

    /// First index in `[i, hi)` whose key is `>= q` (`hi` if none), for a
    /// `q` that sorts after key `i`: a gallop from `i`, so a short run costs
    /// a few compares and a long one a binary search of its length.
    pub fn lower_bound_from(&self, i: usize, hi: usize, q: &[u8]) -> usize {
        let (mut lo, mut step) = (i, 1usize);
        let mut top = hi;
        while lo + step < hi {
            if self.key(lo + step) >= q {
                top = lo + step;
                break;
            }
            lo += step;
            step *= 2;
        }
        // key(lo) < q, and key(top) >= q or top == hi.
        let (mut a, mut b) = (lo + 1, top);
        while a < b {
            let m = a + (b - a) / 2;
            if self.key(m) < q {
                a = m + 1;
            } else {
                b = m;
            }
        }
        a
    }

    pub fn has_tombstones(&self) -> bool {
        self.tombstones
    }

    pub fn arena_bytes_in(&self, lo: usize, hi: usize) -> usize {
        self.offsets.get(hi).saturating_sub(self.offsets.get(lo))
    }

    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity()
            + self.offsets.heap_bytes()
            + self.prefixes.capacity() * 8
            + self.samples.capacity() * 8
            + self.radix.heap_bytes()
            + self.recs.capacity() * std::mem::size_of::<Rec>()
            + self.bloom.heap_bytes()
    }
}

impl Drop for Sorted {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.arena));
        give(std::mem::take(&mut self.prefixes));
        give(std::mem::take(&mut self.recs));
        match std::mem::replace(&mut self.offsets, Offsets::Fixed(0)) {
            Offsets::Small(v) => give(v),
            Offsets::Large(v) => give(v),
            Offsets::Fixed(_) => {}
        }
    }
}

/// Builds a [`Sorted`] from keys pushed in strictly increasing order.
pub(crate) struct SortedBuilder {
    arena: Vec<u8>,
    /// `None` while every key pushed has the same length: the offsets are
    /// then `i * len`, written out only if a key of another length comes
    /// (db_bench's fixed-length keys never do, which spares a merge of 1M
    /// keys 4 MB of fresh pages).
    offsets: Option<Offsets>,
    recs: Vec<Rec>,
    /// The common key length while every key pushed so far has it.
    uniform: Option<usize>,
    pushed: usize,
    max_keys: usize,
    large: bool,
    /// With [`SortedBuilder::tracking_added`]: the hashes of the keys
    /// pushed with [`SortedBuilder::push_added`].
    added: Option<Vec<u64>>,
    stored: bool,
    tombstones: bool,
    /// The runs pushed with [`SortedBuilder::push_run`], in order: their
    /// search prefixes are copied at finish rather than recomputed.
    copied: Vec<Copied>,
}

/// `len` entries of a source region, from its index `from`, pushed whole
/// at index `at`.
#[derive(Clone, Copy)]
struct Copied {
    at: usize,
    from: usize,
    len: usize,
}

/// The indices below `n` that no run of `copied` (in order) covers.
fn uncopied(copied: &[Copied], n: usize) -> impl Iterator<Item = usize> + '_ {
    let mut k = 0;
    copied
        .iter()
        .map(|c| (c.at, c.at + c.len))
        .chain(std::iter::once((n, n)))
        .flat_map(move |(at, end)| {
            let r = k..at;
            k = end;
            r
        })
}

impl SortedBuilder {
    /// `max_keys` / `max_bytes` are upper bounds used to reserve exactly once.
    pub fn new(max_keys: usize, max_bytes: usize) -> SortedBuilder {
        let (arena, recs) = (take(max_bytes), take(max_keys));
        SortedBuilder {
            arena,
            offsets: None,
            recs,
            uniform: None,
            pushed: 0,
            max_keys,
            large: max_bytes > u32::MAX as usize,
            added: None,
            stored: false,
            tombstones: false,
            copied: Vec::new(),
        }
    }

    /// A builder that records which keys are new to the region whose
    /// filter [`SortedBuilder::finish_over`] copies; at most
    /// `max_added` of them.
    pub fn tracking_added(mut self, max_added: usize) -> SortedBuilder {
        self.added = Some(take(max_added));
        self
    }

    /// [`SortedBuilder::push`] for a key the extended filter lacks.
    pub fn push_added(&mut self, key: &[u8], rec: Rec) {
        if let Some(a) = &mut self.added {
            a.push(hash_key(key));
        }
        self.push(key, rec);
    }

    /// The offsets of the keys pushed so far, written out.
    fn offsets(&mut self) -> &mut Offsets {
        let (u, pushed, cap, large) = (
            self.uniform.unwrap_or(0),
            self.pushed,
            self.max_keys.max(self.pushed) + 1,
            self.large,
        );
        self.offsets.get_or_insert_with(|| {
            let mut o = if large {
                Offsets::Large(take(cap))
            } else {
                Offsets::Small(take(cap))
            };
            (0..=pushed).for_each(|i| o.push(i * u));
            o
        })
    }

    pub fn push(&mut self, key: &[u8], rec: Rec) {
        if self.pushed == 0 {
            self.uniform = Some(key.len());
        } else if self.uniform.is_some_and(|u| u != key.len()) {
            self.offsets();
            self.uniform = None;
        }
        if let Some(Offsets::Small(v)) = &self.offsets {
            if self.arena.len() + key.len() > u32::MAX as usize {
                // The caller's byte bound was too small; widen rather than truncate.
                self.offsets = Some(Offsets::Large(v.iter().map(|&x| u64::from(x)).collect()));
            }
        }
        self.pushed += 1;
        self.stored |= rec.is_stored();
        self.tombstones |= rec.is_tombstone();
        self.arena.extend_from_slice(key);
        if let Some(o) = &mut self.offsets {
            o.push(self.arena.len());
        }
        self.recs.push(rec);
    }

    /// Pushes `src[i..j)`, whose keys sort after every key pushed so far,
    /// as one copy of its keys and records. A merge copies the stretches
    /// of the old region that the frozen map leaves alone this way, so it
    /// costs what changed plus a `memcpy` of the rest; [`SortedBuilder::finish_over`]
    /// then copies their search prefixes too.
    pub fn push_run(&mut self, src: &Sorted, i: usize, j: usize) {
        let j = j.min(src.len());
        if i >= j {
            return;
        }
        let at = self.pushed;
        match src.offsets {
            Offsets::Fixed(len)
                if self.offsets.is_none() && (at == 0 || self.uniform == Some(len)) =>
            {
                self.uniform = Some(len);
                self.arena
                    .extend_from_slice(src.arena.get(i * len..j * len).unwrap_or(&[]));
                self.recs
                    .extend_from_slice(src.recs.get(i..j).unwrap_or(&[]));
                self.pushed += j - i;
                let span = src.recs.get(i..j).unwrap_or(&[]);
                if src.stored {
                    self.stored |= span.iter().any(Rec::is_stored);
                }
                if src.tombstones {
                    self.tombstones |= span.iter().any(Rec::is_tombstone);
                }
            }
            // Keys of several lengths: their offsets are rebased one by one.
            _ => (i..j).for_each(|k| self.push(src.key(k), src.rec(k))),
        }
        match self.copied.last_mut() {
            Some(c) if c.at + c.len == at && c.from + c.len == i => c.len += j - i,
            _ => self.copied.push(Copied {
                at,
                from: i,
                len: j - i,
            }),
        }
    }

    pub fn finish(self, bloom_bits_per_key: u32) -> Sorted {
        self.finish_with(bloom_bits_per_key, None, None)
    }

    /// [`SortedBuilder::finish`] for a region built from `base`'s keys (some
    /// perhaps gone, runs of them pushed with [`SortedBuilder::push_run`])
    /// and others. With `extend`, the region holds all of `base`'s keys
    /// and those pushed with [`SortedBuilder::push_added`], and its filter
    /// is a copy of `base`'s with the added keys inserted, when that one
    /// has room for them (`Bloom::extended`).
    pub fn finish_over(self, bloom_bits_per_key: u32, base: &Sorted, extend: bool) -> Sorted {
        let bloom = extend.then_some(&base.bloom);
        self.finish_with(bloom_bits_per_key, bloom, Some(base))
    }

    fn finish_with(
        mut self,
        bloom_bits_per_key: u32,
        base: Option<&Bloom>,
        src: Option<&Sorted>,
    ) -> Sorted {
        let added = self.added.take();
        self.arena.shrink_to_fit();
        let mut offsets = match self.uniform.filter(|&l| l > 0) {
            Some(len) => Offsets::Fixed(len),
            None => std::mem::replace(self.offsets(), Offsets::Fixed(0)),
        };
        offsets.shrink();
        self.recs.shrink_to_fit();
        let mut s = Sorted {
            arena: self.arena,
            offsets,
            prefixes: Vec::new(),
            samples: Vec::new(),
            radix: Radix::none(),
            recs: self.recs,
            skip: 0,
            common_word: 0,
            exact_len: None,
            tail: Box::default(),
            bloom: Bloom::with_capacity(0, 0),
            stored: self.stored,
            tombstones: self.tombstones,
        };
        let n = s.len();
        if n == 0 {
            return s;
        }
        let (first, last) = (s.key(0), s.key(n - 1));
        let skip = first
            .iter()
            .zip(last.iter())
            .take_while(|(a, b)| a == b)
            .count();
        let common_word = prefix_of(first.get(..skip.min(8)).unwrap_or(&[]));
        (s.skip, s.common_word) = (skip, common_word);
        // The copied runs' prefixes (and tails) are the source's when the
        // common prefix is the same length: only the other keys are read.
        let copied = match src {
            Some(src) if src.skip == skip && src.prefixes.len() == src.len() => {
                std::mem::take(&mut self.copied)
            }
            _ => Vec::new(),
        };
        if let Offsets::Fixed(len) = s.offsets {
            fn tail(k: &[u8], skip: usize) -> &[u8] {
                k.get(skip + 8..).unwrap_or(&[])
            }
            let t: Box<[u8]> = tail(s.key(0), skip).into();
            let src_same = src.is_some_and(|src| src.exact_len == Some(len) && src.tail == t);
            let same = |i: usize| tail(s.key(i), skip) == &*t;
            let all = if src_same && !copied.is_empty() {
                uncopied(&copied, n).all(same)
            } else {
                (1..n).all(same)
            };
            if all {
                s.tail = t;
                s.exact_len = Some(len);
            }
        }
        let mut prefixes = take(n);
        let prefix = |i: usize| prefix_of(s.key(i).get(skip..).unwrap_or(&[]));
        match src {
            Some(src) if !copied.is_empty() => {
                let mut k = 0;
                for c in &copied {
                    prefixes.extend((k..c.at).map(prefix));
                    prefixes
                        .extend_from_slice(src.prefixes.get(c.from..c.from + c.len).unwrap_or(&[]));
                    k = c.at + c.len;
                }
                prefixes.extend((k..n).map(prefix));
            }
            _ => prefixes.extend((0..n).map(prefix)),
        }
        let extended = match (base, &added) {
            (Some(b), Some(a)) if bloom_bits_per_key > 0 => b.extended(a, n),
            _ => None,
        };
        let bloom = extended.unwrap_or_else(|| {
            let mut b = Bloom::with_capacity(headroom(n), bloom_bits_per_key);
            b.insert_all((0..n).map(|i| hash_key(s.key(i))));
            b
        });
        if let Some(a) = added {
            super::mem::give(a);
        }
        s.samples = prefixes.iter().step_by(SAMPLE).copied().collect();
        s.radix = Radix::build(&prefixes);
        s.prefixes = prefixes;
        s.bloom = bloom;
        s
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn build(keys: &[&[u8]], bits: u32) -> Sorted {
        let mut b = SortedBuilder::new(keys.len(), keys.iter().map(|k| k.len()).sum());
        for (i, k) in keys.iter().enumerate() {
            b.push(
                k,
                Rec {
                    seq: i as u64,
                    a: 0,
                    b: 1,
                },
            );
        }
        b.finish(bits)
    }

    #[test]
    fn lower_bound_matches_linear_scan() {
        // Keys with long shared parts, zero bytes and prefixes of each other stress the
        // prefix array's tie handling.
        let mut owned: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"a\0\0".to_vec(),
            b"ab".to_vec(),
            b"abcdefghij0".to_vec(),
            b"abcdefghij1".to_vec(),
            b"abcdefghijk".to_vec(),
            b"abcdefghijkl".to_vec(),
            vec![0xff; 9],
            vec![0xff; 10],
        ];
        owned.sort();
        owned.dedup();
        let keys: Vec<&[u8]> = owned.iter().map(|k| k.as_slice()).collect();
        let s = build(&keys, 10);
        let mut probes = owned.clone();
        probes.extend([
            b"0".to_vec(),
            b"abcdefghij".to_vec(),
            b"b".to_vec(),
            vec![0xff; 11],
        ]);
        for q in &probes {
            let expect = keys
                .iter()
                .position(|k| *k >= q.as_slice())
                .unwrap_or(keys.len());
            assert_eq!(s.lower_bound(q), expect, "query {q:?}");
            assert_eq!(s.find(q).is_some(), keys.contains(&q.as_slice()));
        }
    }

    #[test]
    fn common_prefix_is_skipped() {
        let owned: Vec<Vec<u8>> = (0..1000u32)
            .map(|i| format!("k{i:015x}").into_bytes())
            .collect();
        let keys: Vec<&[u8]> = owned.iter().map(|k| k.as_slice()).collect();
        let s = build(&keys, 10);
        assert_eq!(s.skip, 13);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.find(k), Some(i));
            assert_eq!(s.rec(i).seq, i as u64);
            assert!(s.may_contain_hash(hash_key(k)));
        }
        assert_eq!(s.find(b"k0"), None);
        assert_eq!(s.lower_bound(b"j"), 0);
        assert_eq!(s.lower_bound(b"l"), 1000);
        assert_eq!(s.index_range(keys[10], Some(keys[20])), (10, 20));
        assert_eq!(s.index_range(b"", None), (0, 1000));
    }

    #[test]
    fn two_level_search_matches_partition_point() {
        // Variable-length keys with shared 8-byte prefixes spanning many sample blocks.
        let mut owned: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| {
                let mut k = format!("p{:03}", i % 97).into_bytes();
                k.extend_from_slice(&(i / 97).to_be_bytes()[..1 + (i % 4) as usize]);
                k
            })
            .collect();
        owned.sort();
        owned.dedup();
        let keys: Vec<&[u8]> = owned.iter().map(|k| k.as_slice()).collect();
        let s = build(&keys, 0);
        assert!(matches!(s.offsets, Offsets::Small(_)));
        let mut probes: Vec<Vec<u8>> = owned.clone();
        for k in &owned {
            let mut a = k.clone();
            a.push(0);
            probes.push(a);
            let mut b = k.clone();
            b.pop();
            probes.push(b);
        }
        for q in &probes {
            let expect = keys.partition_point(|k| *k < q.as_slice());
            assert_eq!(s.lower_bound(q), expect, "query {q:?}");
        }
        // Uniform lengths drop the offsets array.
        let fixed: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| format!("f{i:07}").into_bytes())
            .collect();
        let fk: Vec<&[u8]> = fixed.iter().map(|k| k.as_slice()).collect();
        let f = build(&fk, 10);
        assert!(matches!(f.offsets, Offsets::Fixed(8)));
        for (i, k) in fk.iter().enumerate() {
            assert_eq!(f.find(k), Some(i));
            assert_eq!(f.key(i), *k);
        }
    }

    #[test]
    fn keys_spelled_by_their_prefixes_are_found_without_the_arena() {
        // 8-byte big-endian integers with zero bytes, as db_bench writes them.
        let owned: Vec<Vec<u8>> = (0..4000u64)
            .map(|i| (i * 3).to_be_bytes().to_vec())
            .collect();
        let keys: Vec<&[u8]> = owned.iter().map(|k| k.as_slice()).collect();
        let s = build(&keys, 0);
        assert_eq!((s.exact_len, s.skip), (Some(8), 6));
        let past = 0x0100_0000_0000u64.to_be_bytes();
        assert_eq!(s.lower_bound(&past), keys.len());
        for i in 0..12_000u64 {
            let q = i.to_be_bytes();
            let want = (i % 3 == 0).then_some((i / 3) as usize);
            assert_eq!(s.find(&q), want, "query {i}");
            assert_eq!(s.lower_bound(&q), i.div_ceil(3) as usize);
            // Shorter and longer queries with the same padded prefix.
            let mut longer = q.to_vec();
            longer.push(0);
            assert_eq!(s.find(&longer), None);
            assert_eq!(s.find(&q[..7]), None);
            // Shorter than the shared prefix (6 bytes here), and past it.
            for short in [&q[..5], &q[..7]] {
                let expect = keys.partition_point(|k| *k < short);
                assert_eq!(s.lower_bound(short), expect, "query {short:?}");
            }
            assert_eq!(
                s.lower_bound(&longer),
                keys.partition_point(|k| *k < longer.as_slice())
            );
        }
        // Keys longer than the shared prefix plus 8 bytes still read the arena.
        let long: Vec<Vec<u8>> = (0..100u32)
            .map(|i| format!("{i:04}-suffix-{i:04}").into_bytes())
            .collect();
        let lk: Vec<&[u8]> = long.iter().map(|k| k.as_slice()).collect();
        let l = build(&lk, 0);
        assert_eq!(l.exact_len, None);
        assert_eq!(l.find(b"0007-suffix-0008"), None);
        assert_eq!(l.find(b"0007-suffix-0007"), Some(7));
    }

    #[test]
    fn keys_with_one_shared_tail_are_found_without_the_arena() {
        // db_bench's 16-byte keys: an 8-byte big-endian integer, then '0's.
        let key = |i: u64, pad: &[u8; 8]| [i.to_be_bytes(), *pad].concat();
        let owned: Vec<Vec<u8>> = (0..4000u64).map(|i| key(i * 3, b"00000000")).collect();
        let keys: Vec<&[u8]> = owned.iter().map(|k| k.as_slice()).collect();
        let s = build(&keys, 0);
        assert_eq!((s.exact_len, s.skip), (Some(16), 6));
        assert_eq!(&*s.tail, b"00");
        for i in 0..12_000u64 {
            let q = key(i, b"00000000");
            let want = (i % 3 == 0).then_some((i / 3) as usize);
            assert_eq!(s.find(&q), want, "query {i}");
            // The same search prefix with another tail is another key.
            for pad in [b"0000000/", b"00000001", b"000000/0"] {
                let other = key(i, pad);
                assert_eq!(s.find(&other), None, "query {other:?}");
                assert_eq!(
                    s.lower_bound(&other),
                    keys.partition_point(|k| *k < other.as_slice())
                );
            }
        }
        // One key with another tail: every lookup reads the arena again.
        let mut mixed = owned.clone();
        mixed.push(key(20_000, b"00000001"));
        let mk: Vec<&[u8]> = mixed.iter().map(|k| k.as_slice()).collect();
        let m = build(&mk, 0);
        assert_eq!(m.exact_len, None);
        assert_eq!(m.find(&key(20_000, b"00000000")), None);
        assert_eq!(m.find(&key(20_000, b"00000001")), Some(4000));
        assert_eq!(m.find(&key(9, b"00000000")), Some(3));
    }

    #[test]
    fn skewed_keys_fall_back_to_the_samples() {
        // Most keys crowd one radix bucket; a few spread the range wide.
        let mut owned: Vec<Vec<u8>> = (0..3000u64)
            .map(|i| (1_000_000 + i).to_be_bytes().to_vec())
            .collect();
        owned.extend((1..50u64).map(|i| (i << 56).to_be_bytes().to_vec()));
        owned.push(vec![0; 8]);
        owned.sort();
        let keys: Vec<&[u8]> = owned.iter().map(|k| k.as_slice()).collect();
        let s = build(&keys, 10);
        let (lo, hi) = s
            .radix
            .bucket(prefix_of(&1_000_500u64.to_be_bytes()))
            .unwrap();
        assert!(hi - lo > RADIX_MAX_BUCKET, "the crowded bucket is large");
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.probe(k, Some(hash_key(k))), Probe::Found(i));
            assert_eq!(s.probe(k, None), Probe::Found(i));
        }
        for q in [
            0u64,
            999_999,
            1_000_000,
            1_002_999,
            1_003_000,
            7 << 56,
            u64::MAX,
        ] {
            let q = q.to_be_bytes();
            let expect = keys.partition_point(|k| *k < q.as_slice());
            assert_eq!(s.lower_bound(&q), expect, "query {q:?}");
            let present = keys.contains(&q.as_slice());
            let p = s.probe(&q, Some(hash_key(&q)));
            assert_eq!(p.found().is_some(), present, "query {q:?}: {p:?}");
        }
    }

    #[test]
    fn keys_of_one_length_then_another_keep_their_bytes() {
        // The offsets are written out only at the first key of another
        // length: every key before and after it must read back whole.
        for first in [1usize, 2, 5] {
            let mut owned: Vec<Vec<u8>> = (0..first)
                .map(|i| format!("k{i:02}").into_bytes())
                .collect();
            owned.extend([b"k99x".to_vec(), b"z".to_vec(), b"zzzzzzzzzzzz".to_vec()]);
            let keys: Vec<&[u8]> = owned.iter().map(|k| k.as_slice()).collect();
            let s = build(&keys, 10);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(s.key(i), *k, "key {i} after {first} of one length");
                assert_eq!(s.find(k), Some(i));
            }
        }
    }

    #[test]
    fn runs_copied_whole_read_back_as_keys_pushed_one_by_one() {
        // Fixed-length keys (copied as slices) and mixed lengths (rebased
        // one by one), with a shared tail and without, runs that are joined
        // and runs that are not: the result must equal a region built by
        // pushing every key.
        let fixed = |i: usize| format!("k{i:07}").into_bytes();
        let padded = |i: usize| {
            let mut k = format!("{i:08}").into_bytes();
            k.resize(16, 0);
            k
        };
        let mixed = |i: usize| format!("m{i}").into_bytes();
        let rec = |i: usize| Rec {
            seq: i as u64,
            a: i as u64,
            b: if i.is_multiple_of(7) { 0 } else { 1 },
        };
        let gens: [&dyn Fn(usize) -> Vec<u8>; 3] = [&fixed, &padded, &mixed];
        for (g, key) in gens.iter().enumerate() {
            let mut src_keys: Vec<Vec<u8>> = (0..3000).step_by(3).map(key).collect();
            src_keys.sort();
            let src = {
                let mut b = SortedBuilder::new(src_keys.len(), src_keys.len() * 16);
                src_keys
                    .iter()
                    .enumerate()
                    .for_each(|(i, k)| b.push(k, rec(i)));
                b.finish(10)
            };
            // New keys between runs, a gap of dropped keys, and runs back
            // to back.
            let mut b = SortedBuilder::new(src.len() + 100, (src.len() + 100) * 16);
            let mut want: Vec<(Vec<u8>, Rec)> = Vec::new();
            let mut i = 0;
            for (n, cut) in [
                (0usize, 10usize),
                (1, 25),
                (0, 40),
                (2, 300),
                (0, 301),
                (1, 1000),
            ] {
                let cut = cut.min(src.len());
                b.push_run(&src, i, cut);
                want.extend((i..cut).map(|k| (src.key(k).to_vec(), src.rec(k))));
                i = cut + n;
                if let Some(next) = (i < src.len()).then(|| src.key(i).to_vec()) {
                    // A key between the last copied one and the next.
                    let mut k = want.last().map_or(Vec::new(), |w| w.0.clone());
                    k.push(0);
                    if k < next && !want.iter().any(|w| w.0 == k) {
                        b.push(&k, rec(7));
                        want.push((k, rec(7)));
                    }
                }
            }
            let got = b.finish_over(10, &src, false);
            let plain = {
                let mut b = SortedBuilder::new(want.len(), want.len() * 16);
                want.iter().for_each(|(k, r)| b.push(k, *r));
                b.finish(10)
            };
            assert_eq!(got.len(), want.len(), "generator {g}");
            assert_eq!(got.prefixes, plain.prefixes, "generator {g}");
            assert_eq!(got.exact_len, plain.exact_len, "generator {g}");
            assert_eq!(
                got.has_tombstones(),
                plain.has_tombstones(),
                "generator {g}"
            );
            for (j, (k, r)) in want.iter().enumerate() {
                assert_eq!(got.key(j), k.as_slice(), "generator {g}, key {j}");
                assert_eq!(got.rec(j), *r, "generator {g}, rec {j}");
                assert_eq!(got.find(k), Some(j), "generator {g}, find {j}");
                let from = j.saturating_sub(5);
                if got.key(from) < k.as_slice() {
                    assert_eq!(got.lower_bound_from(from, got.len(), k), j);
                }
            }
        }
    }

    #[test]
    fn a_merge_extends_its_filter_while_it_has_room_and_rebuilds_after() {
        let key = |i: usize| format!("k{i:07}").into_bytes();
        let rec = |i: usize| Rec {
            seq: i as u64,
            a: 0,
            b: 1,
        };
        // Even keys first, then merges that add odd ones in steps.
        let mut base = {
            let mut b = SortedBuilder::new(1000, 8000);
            (0..2000).step_by(2).for_each(|i| b.push(&key(i), rec(i)));
            b.finish(10)
        };
        let mut have: Vec<usize> = (0..2000).step_by(2).collect();
        for (step, add) in [(0, 100), (1, 100), (2, 400)] {
            let added: Vec<usize> = (0..add).map(|j| 1 + 2 * (step * 100 + j)).collect();
            let mut all: Vec<usize> = have.iter().chain(&added).copied().collect();
            all.sort_unstable();
            all.dedup();
            let mut b = SortedBuilder::new(all.len(), all.len() * 8).tracking_added(added.len());
            for &i in &all {
                if added.contains(&i) && !have.contains(&i) {
                    b.push_added(&key(i), rec(i));
                } else {
                    b.push(&key(i), rec(i));
                }
            }
            let before = base.bloom.sized_for();
            let next = b.finish_over(10, &base, true);
            // 1000 keys sized for 1250: the first two merges fit, the
            // third (1200 + 400) does not and is sized for its own keys.
            let grew = next.bloom.sized_for() > before;
            assert_eq!(
                grew,
                step == 2,
                "merge {step}: {before} -> {} blocks",
                next.bloom.sized_for()
            );
            for &i in &all {
                assert!(
                    next.may_contain_hash(hash_key(&key(i))),
                    "merge {step} lost key {i}"
                );
                assert_eq!(next.find(&key(i)).map(|x| next.key(x)), Some(&key(i)[..]));
            }
            (base, have) = (next, all);
        }
    }

    #[test]
    fn empty_region() {
        let s = Sorted::empty();
        assert_eq!(s.len(), 0);
        assert_eq!(s.lower_bound(b"x"), 0);
        assert_eq!(s.find(b"x"), None);
        assert_eq!(s.key(0), b"");
    }
}
