//! RocksDB's `HistogramImpl`: the same bucket limits, statistics and text
//! format, so that scripts parsing `Percentiles:` lines keep working.

use std::fmt::Write as _;
use std::sync::OnceLock;

/// db_bench's bucket limits: 1, 2, then ×1.5 each step, rounded down to two
/// significant digits, up to `u64::MAX`.
pub fn bucket_limits() -> &'static [u64] {
    static LIMITS: OnceLock<Vec<u64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut v: Vec<u64> = vec![1, 2];
        let mut val = 2.0f64;
        loop {
            val *= 1.5;
            if val > u64::MAX as f64 {
                break;
            }
            let mut b = val as u64;
            let mut pow = 1u64;
            while b / 10 > 10 {
                b /= 10;
                pow *= 10;
            }
            v.push(b * pow);
        }
        v
    })
}

/// Bucket index for every value below this, precomputed: latencies in
/// microseconds almost always fall here, and a table lookup keeps the
/// per-op cost of `--histogram` low.
const FAST: usize = 4096;

fn fast_index() -> &'static [u8; FAST] {
    static TABLE: OnceLock<[u8; FAST]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0u8; FAST];
        for (v, slot) in t.iter_mut().enumerate() {
            *slot = slow_index(v as u64) as u8;
        }
        t
    })
}

#[inline]
fn index_for(value: u64) -> usize {
    if (value as usize) < FAST && value < FAST as u64 {
        return fast_index()[value as usize] as usize;
    }
    slow_index(value)
}

fn slow_index(value: u64) -> usize {
    let limits = bucket_limits();
    let last = limits.len() - 1;
    if value >= limits[last] {
        return last;
    }
    limits.partition_point(|&l| l < value)
}

/// A latency histogram in microseconds (or any unit).
#[derive(Debug, Clone)]
pub struct Histogram {
    min: u64,
    max: u64,
    num: u64,
    sum: u64,
    sum_squares: u128,
    buckets: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        let limits = bucket_limits();
        Histogram {
            min: limits[limits.len() - 1],
            max: 0,
            num: 0,
            sum: 0,
            sum_squares: 0,
            buckets: vec![0; limits.len()],
        }
    }

    /// Records one value.
    #[inline]
    pub fn add(&mut self, value: u64) {
        self.buckets[index_for(value)] += 1;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.num += 1;
        self.sum = self.sum.wrapping_add(value);
        self.sum_squares += u128::from(value) * u128::from(value);
    }

    /// Adds `other`'s samples.
    pub fn merge(&mut self, other: &Histogram) {
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.num += other.num;
        self.sum = self.sum.wrapping_add(other.sum);
        self.sum_squares += other.sum_squares;
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
    }

    /// Sum of the samples.
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.num
    }

    /// Smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        if self.num == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest sample.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean.
    pub fn average(&self) -> f64 {
        if self.num == 0 {
            0.0
        } else {
            self.sum as f64 / self.num as f64
        }
    }

    /// Population standard deviation, computed as RocksDB does.
    pub fn std_dev(&self) -> f64 {
        if self.num == 0 {
            return 0.0;
        }
        let n = self.num as f64;
        let s = self.sum as f64;
        let sq = self.sum_squares as f64;
        ((sq * n - s * s) / (n * n)).max(0.0).sqrt()
    }

    /// The `p`th percentile, interpolated linearly inside its bucket.
    pub fn percentile(&self, p: f64) -> f64 {
        let limits = bucket_limits();
        let threshold = self.num as f64 * (p / 100.0);
        let mut cumulative = 0u64;
        for (b, &count) in self.buckets.iter().enumerate() {
            cumulative += count;
            if cumulative as f64 >= threshold {
                let left = if b == 0 { 0 } else { limits[b - 1] };
                let right = limits[b];
                let left_sum = cumulative - count;
                let pos = if count != 0 {
                    (threshold - left_sum as f64) / count as f64
                } else {
                    0.0
                };
                let mut r = left as f64 + (right - left) as f64 * pos;
                if r < self.min as f64 {
                    r = self.min as f64;
                }
                if r > self.max as f64 {
                    r = self.max as f64;
                }
                return r;
            }
        }
        self.max as f64
    }

    /// Median.
    pub fn median(&self) -> f64 {
        self.percentile(50.0)
    }

    /// RocksDB's `HistogramStat::ToString` text.
    pub fn to_text(&self) -> String {
        let mut r = String::new();
        let _ = writeln!(
            r,
            "Count: {} Average: {:.4}  StdDev: {:.2}",
            self.num,
            self.average(),
            self.std_dev()
        );
        let _ = writeln!(
            r,
            "Min: {}  Median: {:.4}  Max: {}",
            self.min(),
            self.median(),
            if self.num == 0 { 0 } else { self.max }
        );
        let _ = writeln!(
            r,
            "Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}",
            self.percentile(50.0),
            self.percentile(75.0),
            self.percentile(99.0),
            self.percentile(99.9),
            self.percentile(99.99)
        );
        r.push_str("------------------------------------------------------\n");
        if self.num == 0 {
            return r;
        }
        let limits = bucket_limits();
        let mult = 100.0 / self.num as f64;
        let mut cumulative = 0u64;
        for (b, &count) in self.buckets.iter().enumerate() {
            if count == 0 {
                continue;
            }
            cumulative += count;
            let _ = write!(
                r,
                "{} {:>7}, {:>7} ] {:>8} {:>7.3}% {:>7.3}% ",
                if b == 0 { '[' } else { '(' },
                if b == 0 { 0 } else { limits[b - 1] },
                limits[b],
                count,
                mult * count as f64,
                mult * cumulative as f64
            );
            let marks = (mult * count as f64 / 5.0 + 0.5) as usize;
            r.push_str(&"#".repeat(marks));
            r.push('\n');
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_limits_match_rocksdb() {
        let l = bucket_limits();
        assert_eq!(
            &l[..20],
            &[
                1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110, 170, 250, 380, 580, 870, 1300, 1900,
                2900
            ]
        );
        assert_eq!(l.len(), 109);
        assert_eq!(index_for(0), 0);
        assert_eq!(index_for(1), 0);
        assert_eq!(index_for(2), 1);
        assert_eq!(index_for(5), 4);
        for v in [
            0u64,
            1,
            2,
            3,
            9,
            10,
            11,
            4095,
            4096,
            5000,
            1 << 40,
            u64::MAX,
        ] {
            assert_eq!(index_for(v), slow_index(v), "{v}");
        }
    }

    #[test]
    fn statistics() {
        let mut h = Histogram::new();
        for v in 1..=100 {
            h.add(v);
        }
        assert_eq!(h.count(), 100);
        assert!((h.average() - 50.5).abs() < 1e-9);
        assert!((h.std_dev() - 28.866).abs() < 0.01);
        assert_eq!(h.min(), 1);
        assert_eq!(h.max(), 100);
        let p99 = h.percentile(99.0);
        assert!(p99 > 95.0 && p99 <= 100.0, "{p99}");
    }
}
