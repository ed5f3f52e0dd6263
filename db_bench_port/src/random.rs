//! The random number generators db_bench uses, reproduced so that a given
//! `--seed` draws the same key sequence as RocksDB's db_bench.
//!
//! * [`Random`]: the Park–Miller "minimal standard" Lehmer generator
//!   (multiplier 16807, modulus 2^31-1) behind RocksDB's `Random`; the value
//!   generator uses it seeded with 301.
//! * [`Random64`]: `std::mt19937_64` behind RocksDB's `Random64`, which each
//!   benchmark thread owns, seeded `seed_base + thread number`.
//!   `uniform(n)` follows libstdc++'s `uniform_int_distribution<uint64_t>`
//!   (Lemire's multiply-and-reject with a 128-bit product, GCC 11+).

/// RocksDB's `Random`: a 31-bit Lehmer generator.
#[derive(Debug, Clone)]
pub struct Random {
    seed: u32,
}

const M31: u32 = 2_147_483_647;

impl Random {
    /// A generator seeded like RocksDB's (`0` and `2^31-1` become 1).
    pub fn new(s: u32) -> Self {
        let s = s & M31;
        Random {
            seed: if s != 0 { s } else { 1 },
        }
    }

    /// Next value in `[1, 2^31-2]`.
    // Named after RocksDB's `Random::Next`; this is not an iterator.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u32 {
        let product = u64::from(self.seed) * 16807;
        let mut s = ((product >> 31) + (product & u64::from(M31))) as u32;
        if s > M31 {
            s -= M31;
        }
        self.seed = s;
        s
    }

    /// Uniform in `[0, n)`; `n` must be positive.
    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next() % n.max(1)
    }

    /// True for about `pct` percent of calls (always draws a value).
    pub fn percent_true(&mut self, pct: i32) -> bool {
        (self.uniform(100) as i32) < pct
    }
}

const NN: usize = 312;
const MM: usize = 156;
const MATRIX_A: u64 = 0xB502_6F5A_A966_19E9;
const UM: u64 = 0xFFFF_FFFF_8000_0000;
const LM: u64 = 0x7FFF_FFFF;

/// RocksDB's `Random64`: the 64-bit Mersenne Twister `std::mt19937_64`.
#[derive(Clone)]
pub struct Random64 {
    mt: Box<[u64; NN]>,
    idx: usize,
}

impl std::fmt::Debug for Random64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Random64").field("idx", &self.idx).finish()
    }
}

impl Random64 {
    /// Seeds the generator as `std::mt19937_64(seed)` does.
    pub fn new(seed: u64) -> Self {
        let mut mt = Box::new([0u64; NN]);
        mt[0] = seed;
        for i in 1..NN {
            mt[i] = 6_364_136_223_846_793_005u64
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 62))
                .wrapping_add(i as u64);
        }
        Random64 { mt, idx: NN }
    }

    fn refill(&mut self) {
        let mt = &mut self.mt;
        for i in 0..NN {
            let x = (mt[i] & UM) | (mt[(i + 1) % NN] & LM);
            let mut xa = x >> 1;
            if x & 1 != 0 {
                xa ^= MATRIX_A;
            }
            mt[i] = mt[(i + MM) % NN] ^ xa;
        }
        self.idx = 0;
    }

    /// Next 64-bit value.
    // Named after RocksDB's `Random64::Next`; this is not an iterator.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> u64 {
        if self.idx >= NN {
            self.refill();
        }
        let mut x = self.mt[self.idx];
        self.idx += 1;
        x ^= (x >> 29) & 0x5555_5555_5555_5555;
        x ^= (x << 17) & 0x71D6_7FFF_EDA6_0000;
        x ^= (x << 37) & 0xFFF7_EEE0_0000_0000;
        x ^= x >> 43;
        x
    }

    /// Uniform in `[0, n)` as libstdc++'s `uniform_int_distribution` draws
    /// it; `n == 0` is treated as the full 64-bit range.
    pub fn uniform(&mut self, n: u64) -> u64 {
        if n == 0 {
            return self.next();
        }
        let mut product = u128::from(self.next()) * u128::from(n);
        let mut low = product as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                product = u128::from(self.next()) * u128::from(n);
                low = product as u64;
            }
        }
        (product >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_64_reference_value() {
        // The C++ standard requires the 10000th output of a
        // default-constructed mt19937_64 (seed 5489) to be this value.
        let mut r = Random64::new(5489);
        let mut v = 0;
        for _ in 0..10000 {
            v = r.next();
        }
        assert_eq!(v, 9_981_545_732_273_789_042);
    }

    #[test]
    fn lehmer_reference_values() {
        // Park & Miller: seed 1 gives 16807, 282475249, 1622650073, ...
        let mut r = Random::new(1);
        assert_eq!(r.next(), 16807);
        assert_eq!(r.next(), 282_475_249);
        assert_eq!(r.next(), 1_622_650_073);
        // After 10000 draws from seed 1 the state is 1043618065.
        let mut r = Random::new(1);
        let mut v = 0;
        for _ in 0..10000 {
            v = r.next();
        }
        assert_eq!(v, 1_043_618_065);
    }

    #[test]
    fn uniform_stays_in_range() {
        let mut r = Random64::new(7);
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for _ in 0..1000 {
                assert!(r.uniform(n) < n);
            }
        }
    }
}

const N32: usize = 624;
const M32: usize = 397;

/// `std::mt19937`, the 32-bit Mersenne Twister, used by db_bench's
/// `RandomShuffle` (filluniquerandom's key order).
#[derive(Clone)]
pub struct Mt19937 {
    mt: Box<[u32; N32]>,
    idx: usize,
}

impl std::fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt19937").field("idx", &self.idx).finish()
    }
}

impl Mt19937 {
    /// Seeds the generator as `std::mt19937(seed)` does.
    pub fn new(seed: u32) -> Self {
        let mut mt = Box::new([0u32; N32]);
        mt[0] = seed;
        for i in 1..N32 {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { mt, idx: N32 }
    }

    /// Next 32-bit value.
    // Named after the C++ call operator; this is not an iterator.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u32 {
        if self.idx >= N32 {
            for i in 0..N32 {
                let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % N32] & 0x7fff_ffff);
                let mut v = self.mt[(i + M32) % N32] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.mt[i] = v;
            }
            self.idx = 0;
        }
        let mut y = self.mt[self.idx];
        self.idx += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `uniform_int_distribution` over `[0, n)` for `n <= 2^32`, as
    /// libstdc++ draws it from a 32-bit engine (Lemire's method).
    fn below(&mut self, n: u64) -> u64 {
        if n > u64::from(u32::MAX) {
            // Full 32-bit range: the engine's value as is.
            return u64::from(self.next());
        }
        let range = n as u32;
        let mut product = u64::from(self.next()) * u64::from(range);
        let mut low = product as u32;
        if low < range {
            let threshold = range.wrapping_neg() % range;
            while low < threshold {
                product = u64::from(self.next()) * u64::from(range);
                low = product as u32;
            }
        }
        product >> 32
    }
}

/// libstdc++'s `std::shuffle(first, last, std::mt19937(seed))`, which
/// db_bench's `RandomShuffle` calls: for short ranges it draws two swap
/// positions from one number, so the order differs from a plain
/// Fisher–Yates with the same engine.
pub fn std_shuffle<T>(v: &mut [T], seed: u32) {
    let n = v.len() as u64;
    if n == 0 {
        return;
    }
    let mut g = Mt19937::new(seed);
    let urngrange = u64::from(u32::MAX);
    if urngrange / n >= n {
        let mut i = 1u64;
        if n.is_multiple_of(2) {
            let j = g.below(2);
            v.swap(i as usize, j as usize);
            i += 1;
        }
        while i != n {
            let swap_range = i + 1;
            let x = g.below(swap_range * (swap_range + 1));
            let (a, b) = (x / (swap_range + 1), x % (swap_range + 1));
            v.swap(i as usize, a as usize);
            i += 1;
            v.swap(i as usize, b as usize);
            i += 1;
        }
        return;
    }
    for i in 1..n {
        let j = g.below(i + 1);
        v.swap(i as usize, j as usize);
    }
}

#[cfg(test)]
mod mt32_tests {
    use super::*;

    #[test]
    fn mt19937_reference_value() {
        // The C++ standard: the 10000th output of mt19937(5489) is 4123659995.
        let mut r = Mt19937::new(5489);
        let v = (0..10000).map(|_| r.next()).last();
        assert_eq!(v, Some(4_123_659_995));
    }

    #[test]
    fn shuffle_is_a_permutation() {
        for n in [0usize, 1, 2, 3, 10, 1001, 70_000] {
            let mut v: Vec<usize> = (0..n).collect();
            std_shuffle(&mut v, 42);
            let mut s = v.clone();
            s.sort_unstable();
            assert_eq!(s, (0..n).collect::<Vec<_>>());
            if n > 10 {
                assert_ne!(v, (0..n).collect::<Vec<_>>());
            }
        }
    }
}
