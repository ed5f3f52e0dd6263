//! Zipf-distributed key choice for the VMemKV workloads.
//!
//! Ranks are drawn by rejection-inversion (Hörmann & Derflinger 1996), which
//! needs O(1) setup for any exponent > 0 and any key count. Rank 1 is the
//! hottest; ranks are scattered over the keyspace by a fixed hash (as YCSB's
//! scrambled Zipfian does) so that hot keys are not all adjacent.

use crate::random::Random64;

/// A Zipf sampler over `[0, n)`.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    threshold: f64,
    count: u64,
}

impl Zipf {
    /// Exponent `alpha` (> 0) over `n` (≥ 1) items.
    pub fn new(n: u64, alpha: f64) -> Self {
        let n_f = n.max(1) as f64;
        let s = if alpha > 0.0 { alpha } else { 1.0 };
        let mut z = Zipf {
            n: n_f,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            threshold: 0.0,
            count: n.max(1),
        };
        z.h_x1 = z.h(1.5) - 1.0;
        z.h_n = z.h(n_f + 0.5);
        z.threshold = 2.0 - z.h_inv(z.h(2.5) - z.hf(2.0));
        z
    }

    fn hf(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.s) * log_x) * log_x
    }

    fn h_inv(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.s);
        if t < -1.0 {
            t = -1.0;
        }
        (helper1(t) * x).exp()
    }

    /// A rank in `[1, n]`.
    pub fn rank(&self, rng: &mut Random64) -> u64 {
        loop {
            let u01 = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            let u = self.h_n + u01 * (self.h_x1 - self.h_n);
            let x = self.h_inv(u);
            let mut k = (x + 0.5).floor();
            if k < 1.0 {
                k = 1.0;
            } else if k > self.n {
                k = self.n;
            }
            if k - x <= self.threshold || u >= self.h(k + 0.5) - self.hf(k) {
                return k as u64;
            }
        }
    }

    /// A key index in `[0, n)`: the rank scattered by a fixed hash.
    pub fn key(&self, rng: &mut Random64) -> u64 {
        scatter(self.rank(rng) - 1, self.count)
    }
}

/// Maps rank `r` to a key index in `[0, n)` with a fixed 64-bit mix.
pub fn scatter(r: u64, n: u64) -> u64 {
    let mut x = r.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x % n.max(1)
}

/// `log(1 + x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(exp(x) - 1) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_one_frequencies_follow_one_over_rank() {
        let z = Zipf::new(1000, 1.0);
        let mut rng = Random64::new(42);
        let mut counts = vec![0u64; 1001];
        let draws = 200_000;
        for _ in 0..draws {
            let r = z.rank(&mut rng) as usize;
            assert!((1..=1000).contains(&r));
            counts[r] += 1;
        }
        // P(1)/P(2) = 2 and P(1)/P(10) = 10 for alpha = 1.
        let r12 = counts[1] as f64 / counts[2] as f64;
        let r1_10 = counts[1] as f64 / counts[10] as f64;
        assert!((r12 - 2.0).abs() < 0.2, "{r12}");
        assert!((r1_10 - 10.0).abs() < 1.5, "{r1_10}");
        // H(1000) ≈ 7.485, so P(rank 1) ≈ 0.1336.
        let p1 = counts[1] as f64 / draws as f64;
        assert!((p1 - 0.1336).abs() < 0.01, "{p1}");
    }

    #[test]
    fn keys_stay_in_range() {
        let z = Zipf::new(17, 0.8);
        let mut rng = Random64::new(1);
        for _ in 0..10_000 {
            assert!(z.key(&mut rng) < 17);
        }
    }
}
