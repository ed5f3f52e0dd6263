//! The immutable sorted region: keys in one arena, an offsets array, fixed-size records,
//! an 8-byte search prefix per key and a blocked Bloom filter.
//!
//! Layout per key: key bytes, plus 4 (offset; 8 if the arena exceeds 4 GiB), 8 (prefix),
//! 24 (record) and bits_per_key/8 (Bloom). The prefix is the big-endian value of the
//! 8 key bytes that follow the region's common prefix, so most binary-search steps
//! compare one `u64` instead of chasing the arena.

use super::bloom::{hash_key, Bloom};
use super::entry::Rec;
use super::mem::advise_huge;

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
    recs: Vec<Rec>,
    /// Length of the prefix every key shares (that of the first and last key).
    skip: usize,
    bloom: Bloom,
}

#[inline]
fn prefix_of(s: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = s.len().min(8);
    w[..n].copy_from_slice(&s[..n]);
    u64::from_be_bytes(w)
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
        let (s, e) = (self.offsets.get(i), self.offsets.get(i + 1));
        self.arena.get(s..e).unwrap_or(&[])
    }

    #[inline]
    pub fn rec(&self, i: usize) -> Rec {
        self.recs.get(i).copied().unwrap_or_default()
    }

    /// First index whose key is `>= q` (`len()` if none).
    pub fn lower_bound(&self, q: &[u8]) -> usize {
        let n = self.len();
        if n == 0 {
            return 0;
        }
        let first = self.key(0);
        let common = first.get(..self.skip).unwrap_or(first);
        let qc = q.get(..self.skip).unwrap_or(q);
        match qc.cmp(common) {
            std::cmp::Ordering::Less => return 0,
            std::cmp::Ordering::Greater => return n,
            std::cmp::Ordering::Equal => {}
        }
        let qp = prefix_of(q.get(self.skip..).unwrap_or(&[]));
        let i = self.lower_prefix(qp);
        if i >= n || self.prefixes.get(i) != Some(&qp) || self.key(i) >= q {
            return i;
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
        lo
    }

    /// First index whose prefix is `>= qp`: search the samples, then one block.
    #[inline]
    fn lower_prefix(&self, qp: u64) -> usize {
        let j = lower_u64(&self.samples, qp);
        if j == 0 {
            return 0;
        }
        // samples[j-1] < qp <= samples[j]: the answer is in ((j-1)*SAMPLE, j*SAMPLE].
        let lo = (j - 1) * SAMPLE + 1;
        let hi = (j * SAMPLE).min(self.prefixes.len());
        let block = self.prefixes.get(lo..hi).unwrap_or(&[]);
        lo + lower_u64(block, qp)
    }

    /// Index of the entry for exactly `q`.
    #[inline]
    pub fn find(&self, q: &[u8]) -> Option<usize> {
        let i = self.lower_bound(q);
        (i < self.len() && self.key(i) == q).then_some(i)
    }

    pub fn bloom_enabled(&self) -> bool {
        self.bloom.enabled()
    }

    /// False means `q` (with hash `h`) is certainly not in this region.
    #[inline]
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

    pub fn arena_bytes_in(&self, lo: usize, hi: usize) -> usize {
        self.offsets.get(hi).saturating_sub(self.offsets.get(lo))
    }

    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity()
            + self.offsets.heap_bytes()
            + self.prefixes.capacity() * 8
            + self.samples.capacity() * 8
            + self.recs.capacity() * std::mem::size_of::<Rec>()
            + self.bloom.heap_bytes()
    }
}

/// Builds a [`Sorted`] from keys pushed in strictly increasing order.
pub(crate) struct SortedBuilder {
    arena: Vec<u8>,
    offsets: Offsets,
    recs: Vec<Rec>,
    /// The common key length while every key pushed so far has it.
    uniform: Option<usize>,
    pushed: usize,
}

impl SortedBuilder {
    /// `max_keys` / `max_bytes` are upper bounds used to reserve exactly once.
    pub fn new(max_keys: usize, max_bytes: usize) -> SortedBuilder {
        let mut offsets = if max_bytes > u32::MAX as usize {
            Offsets::Large(Vec::with_capacity(max_keys + 1))
        } else {
            Offsets::Small(Vec::with_capacity(max_keys + 1))
        };
        offsets.push(0);
        let (arena, recs) = (Vec::with_capacity(max_bytes), Vec::with_capacity(max_keys));
        advise_huge(&arena);
        advise_huge(&recs);
        SortedBuilder {
            arena,
            offsets,
            recs,
            uniform: None,
            pushed: 0,
        }
    }

    pub fn push(&mut self, key: &[u8], rec: Rec) {
        if let Offsets::Small(v) = &self.offsets {
            if self.arena.len() + key.len() > u32::MAX as usize {
                // The caller's byte bound was too small; widen rather than truncate.
                self.offsets = Offsets::Large(v.iter().map(|&x| u64::from(x)).collect());
            }
        }
        if self.pushed == 0 {
            self.uniform = Some(key.len());
        } else if self.uniform != Some(key.len()) {
            self.uniform = None;
        }
        self.pushed += 1;
        self.arena.extend_from_slice(key);
        self.offsets.push(self.arena.len());
        self.recs.push(rec);
    }

    pub fn finish(mut self, bloom_bits_per_key: u32) -> Sorted {
        self.arena.shrink_to_fit();
        if let Some(len) = self.uniform.filter(|&l| l > 0) {
            self.offsets = Offsets::Fixed(len);
        }
        self.offsets.shrink();
        self.recs.shrink_to_fit();
        let mut s = Sorted {
            arena: self.arena,
            offsets: self.offsets,
            prefixes: Vec::new(),
            samples: Vec::new(),
            recs: self.recs,
            skip: 0,
            bloom: Bloom::with_capacity(0, 0),
        };
        let n = s.len();
        if n == 0 {
            return s;
        }
        let (first, last) = (s.key(0), s.key(n - 1));
        s.skip = first
            .iter()
            .zip(last.iter())
            .take_while(|(a, b)| a == b)
            .count();
        let mut prefixes = Vec::with_capacity(n);
        advise_huge(&prefixes);
        let mut bloom = Bloom::with_capacity(n, bloom_bits_per_key);
        for i in 0..n {
            let k = s.key(i);
            prefixes.push(prefix_of(k.get(s.skip..).unwrap_or(&[])));
            if bloom.enabled() {
                bloom.insert_hash(hash_key(k));
            }
        }
        s.samples = prefixes.iter().step_by(SAMPLE).copied().collect();
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
    fn empty_region() {
        let s = Sorted::empty();
        assert_eq!(s.len(), 0);
        assert_eq!(s.lower_bound(b"x"), 0);
        assert_eq!(s.find(b"x"), None);
        assert_eq!(s.key(0), b"");
    }
}
