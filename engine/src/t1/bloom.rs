//! A cache-line-blocked Bloom filter and the key hash it uses.
//!
//! Every key maps to one 512-bit block, so a probe costs one cache miss at most.

const M1: u64 = 0xa076_1d64_78bd_642f;
const M2: u64 = 0xe703_7ed1_a0b4_28db;

#[inline]
fn mix(a: u64, b: u64) -> u64 {
    let r = u128::from(a).wrapping_mul(u128::from(b));
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
fn read_u64(s: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = s.len().min(8);
    w[..n].copy_from_slice(&s[..n]);
    u64::from_le_bytes(w)
}

/// 64-bit key hash (wyhash-style folded multiply); quality is ample for Bloom probes.
#[inline]
pub(crate) fn hash_key(key: &[u8]) -> u64 {
    let mut h = M1 ^ (key.len() as u64).wrapping_mul(M2);
    let mut chunks = key.chunks_exact(16);
    for c in &mut chunks {
        h = mix(read_u64(&c[..8]) ^ M1, read_u64(&c[8..]) ^ h);
    }
    let rest = chunks.remainder();
    if rest.len() > 8 {
        h = mix(read_u64(&rest[..8]) ^ M1, read_u64(&rest[8..]) ^ h);
    } else {
        h = mix(read_u64(rest) ^ M1, h ^ M2);
    }
    mix(h ^ M2, h.rotate_left(29) ^ M1)
}

/// How many hashes ahead [`Bloom::insert_all`] hints a block: enough
/// misses in flight to cover a memory round trip at a few ns per key.
const FILL_AHEAD: usize = 16;

#[repr(C, align(64))]
#[derive(Clone, Copy, Default)]
pub(super) struct Block([u64; 8]);

/// Blocked Bloom filter. An empty filter (0 blocks) answers "maybe" for every key.
pub(crate) struct Bloom {
    blocks: Vec<Block>,
    probes: u32,
    /// Keys the filter was sized for at its `bits_per_key`.
    capacity: usize,
    /// Keys inserted so far, including keys since removed from the region
    /// (a Bloom filter cannot forget them).
    holds: usize,
}

/// Keys a merge's filter is sized for, beyond the region's own: room for
/// the next few merges to add their new keys to a copy of it
/// ([`Bloom::extended`]) rather than rehash every key (`docs/design.md` §7).
pub(crate) fn headroom(n: usize) -> usize {
    n + n / 4
}

impl Bloom {
    /// A filter for `n` keys at `bits_per_key`; `bits_per_key == 0` builds a disabled filter.
    pub fn with_capacity(n: usize, bits_per_key: u32) -> Bloom {
        if bits_per_key == 0 || n == 0 {
            return Bloom {
                blocks: Vec::new(),
                probes: 0,
                capacity: 0,
                holds: 0,
            };
        }
        let bits = n.saturating_mul(bits_per_key as usize);
        let nblocks = bits.div_ceil(512).max(1);
        // ln 2 * bits/key, a little lower because blocking raises the false-positive rate
        // less when fewer bits are set per key.
        let probes = ((bits_per_key as f64) * 0.69).round().clamp(1.0, 12.0) as u32;
        let mut blocks = super::mem::take(nblocks);
        blocks.resize(nblocks, Block::default());
        // A recycled array may be larger than this filter needs.
        blocks.shrink_to_fit();
        Bloom {
            blocks,
            probes,
            capacity: n,
            holds: 0,
        }
    }

    /// A copy of `self` with `added` inserted, for a region of `n` keys
    /// made of `self`'s keys (some perhaps gone) and the keys `added`
    /// hashes; `None` when that would overfill the filter past the size it
    /// was built for, or leave it sized for more than twice the keys it
    /// serves: the caller builds a new one. A copy is a memcpy of the
    /// blocks where a rebuild rehashes every key and waits on a cache miss
    /// per key (the filter of a 1M-key region is larger than L2).
    pub fn extended(&self, added: &[u64], n: usize) -> Option<Bloom> {
        let holds = self.holds.checked_add(added.len())?;
        if !self.enabled() || holds > self.capacity || n < self.capacity / 2 {
            return None;
        }
        let mut blocks = super::mem::take(self.blocks.len());
        blocks.extend_from_slice(&self.blocks);
        let mut b = Bloom {
            blocks,
            probes: self.probes,
            capacity: self.capacity,
            holds: self.holds,
        };
        b.insert_all(added.iter().copied());
        Some(b)
    }

    pub fn enabled(&self) -> bool {
        !self.blocks.is_empty()
    }

    #[inline]
    fn block_of(&self, h: u64) -> usize {
        // fastrange: map the high 32 bits onto [0, nblocks)
        (((h >> 32) * self.blocks.len() as u64) >> 32) as usize
    }

    pub fn insert_hash(&mut self, h: u64) {
        if self.blocks.is_empty() {
            return;
        }
        self.holds += 1;
        let bi = self.block_of(h);
        let probes = self.probes;
        if let Some(b) = self.blocks.get_mut(bi) {
            let mut x = h as u32;
            let step = ((h >> 32) as u32).rotate_right(9) | 1;
            for _ in 0..probes {
                let bit = (x & 511) as usize;
                b.0[bit >> 6] |= 1u64 << (bit & 63);
                x = x.wrapping_add(step);
            }
        }
    }

    /// Inserts every hash of `hashes`, hinting each one's block into the
    /// cache [`FILL_AHEAD`] hashes before its bits are set. A filter larger
    /// than the cache otherwise waits on one miss per key, one after the
    /// other: 63% of a 1M-key merge's `finish` (`perf annotate`).
    pub fn insert_all(&mut self, hashes: impl Iterator<Item = u64>) {
        if self.blocks.is_empty() {
            return;
        }
        let mut ring = [0u64; FILL_AHEAD];
        let mut n = 0usize;
        for h in hashes {
            let slot = n % FILL_AHEAD;
            if n >= FILL_AHEAD {
                let due = ring[slot];
                self.insert_hash(due);
            }
            self.prefetch(h);
            ring[slot] = h;
            n += 1;
        }
        for i in n.saturating_sub(FILL_AHEAD)..n {
            let due = ring[i % FILL_AHEAD];
            self.insert_hash(due);
        }
    }

    /// Hints the CPU to load the block [`Self::may_contain_hash`] reads.
    #[inline]
    pub fn prefetch(&self, h: u64) {
        if let Some(b) = self.blocks.get(self.block_of(h)) {
            crate::prefetch::line_of(b);
        }
    }

    /// False means the key is definitely absent.
    #[inline]
    pub fn may_contain_hash(&self, h: u64) -> bool {
        let Some(b) = self.blocks.get(self.block_of(h)) else {
            return true;
        };
        let mut x = h as u32;
        let step = ((h >> 32) as u32).rotate_right(9) | 1;
        for _ in 0..self.probes {
            let bit = (x & 511) as usize;
            if b.0[bit >> 6] & (1u64 << (bit & 63)) == 0 {
                return false;
            }
            x = x.wrapping_add(step);
        }
        true
    }

    /// Keys the filter was sized for.
    #[cfg(test)]
    pub fn sized_for(&self) -> usize {
        self.capacity
    }

    pub fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>()
    }
}

impl Drop for Bloom {
    fn drop(&mut self) {
        super::mem::give(std::mem::take(&mut self.blocks));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_low_fp_rate() {
        let n = 100_000u64;
        let mut bf = Bloom::with_capacity(n as usize, 10);
        for i in 0..n {
            bf.insert_hash(hash_key(format!("k{i:015x}").as_bytes()));
        }
        for i in 0..n {
            assert!(bf.may_contain_hash(hash_key(format!("k{i:015x}").as_bytes())));
        }
        let fp = (n..2 * n)
            .filter(|i| bf.may_contain_hash(hash_key(format!("k{i:015x}").as_bytes())))
            .count();
        let rate = fp as f64 / n as f64;
        assert!(rate < 0.02, "false-positive rate {rate}");
    }

    #[test]
    fn insert_all_sets_the_bits_of_one_insert_per_hash() {
        for n in [0usize, 1, FILL_AHEAD - 1, FILL_AHEAD, FILL_AHEAD + 1, 1000] {
            let hashes: Vec<u64> = (0..n)
                .map(|i| hash_key(format!("k{i:015x}").as_bytes()))
                .collect();
            let mut one = Bloom::with_capacity(1000, 10);
            hashes.iter().for_each(|&h| one.insert_hash(h));
            let mut all = Bloom::with_capacity(1000, 10);
            all.insert_all(hashes.iter().copied());
            let bits = |b: &Bloom| b.blocks.iter().map(|x| x.0).collect::<Vec<_>>();
            assert_eq!(bits(&one), bits(&all), "{n} hashes");
        }
    }

    #[test]
    fn disabled_filter_says_maybe() {
        let bf = Bloom::with_capacity(10, 0);
        assert!(!bf.enabled());
        assert!(bf.may_contain_hash(hash_key(b"x")));
        assert_eq!(bf.heap_bytes(), 0);
    }

    #[test]
    fn hash_depends_on_every_byte_and_length() {
        let base = hash_key(b"0123456789abcdefXYZ");
        assert_ne!(base, hash_key(b"0123456789abcdefXYz"));
        assert_ne!(base, hash_key(b"1123456789abcdefXYZ"));
        assert_ne!(hash_key(b"a"), hash_key(b"a\0"));
    }
}
