//! Per-value checksums. Every stored value is preceded in its log record by
//! the crc32c of its bytes, so a T1 locator's `offset - 4` holds it. Values
//! below the checkpoint LSN are never replayed, so without this a flipped
//! bit in an old record would be returned as data nobody wrote.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::t2::segment::Segment;

/// Bytes of the checksum stored just before each value.
pub(crate) const VALUE_CRC_LEN: usize = 4;

/// Values up to this long are checksummed a second time for the body
/// checksum: [`combine`]'s two carry-less multiplications in software wait
/// on ~200 cycles of dependent shifts, where the crc32 instructions cover
/// 2 KiB in about that time.
const COMBINE_FROM: usize = 2048;

/// The body checksum of a record whose body is `prefix` followed by
/// `value`, whose own crc32c is `value_crc`: a long value's crc is folded
/// in with [`combine`] instead of a second pass over its bytes, so a write
/// checksums each byte of it once.
pub(crate) fn body_crc(prefix: &[&[u8]], value: &[u8], value_crc: u32) -> u32 {
    let c = prefix
        .iter()
        .fold(0u32, |c, p| crate::crc::crc32c_append(c, p));
    if value.len() < COMBINE_FROM {
        return crate::crc::crc32c_append(c, value);
    }
    combine(c, value_crc, value.len())
}

/// The reflected CRC-32C polynomial.
const POLY: u32 = 0x82F6_3B78;

/// `a * b mod POLY` over GF(2), in the reflected bit order crc32c uses
/// (bit 31 is x^0). Branch-free: the bits of `a` are random, and a branch
/// per bit mispredicted about half the time (the combine of every put took
/// 5% of a 4-thread 8-byte `insert`'s samples that way).
const fn mult_mod_p(a: u32, mut b: u32) -> u32 {
    let mut p: u32 = 0;
    let mut i = 0;
    while i < 32 {
        p ^= b & ((a >> (31 - i)) & 1).wrapping_neg();
        b = (b >> 1) ^ (POLY & (b & 1).wrapping_neg());
        i += 1;
    }
    p
}

/// `X2N[k] = x^(2^k) mod POLY`, for every `k` a `usize` byte length
/// needs (bit lengths up to 2^(64+3)).
const X2N: [u32; 67] = {
    let mut t = [0u32; 67];
    let mut p: u32 = 1 << 30; // x^1
    let mut k = 0;
    while k < 67 {
        t[k] = p;
        p = mult_mod_p(p, p);
        k += 1;
    }
    t
};

/// `crc32c(a ++ b)` from `crc32c(a)`, `crc32c(b)` and `b.len()`: `crc_a`
/// is shifted by `len_b` zero bytes, i.e. multiplied by x^(8 len_b), using
/// the table of x^(2^k) (one multiplication per set bit of the length).
/// The `crc32c` crate's `crc32c_combine` squares 32x32 matrices instead:
/// 7.8 us at 1 KiB and 23 us at 64 KiB, ten times checksumming the bytes
/// again; this takes ~55 ns at any length.
pub(crate) fn combine(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    let mut op: u32 = 1 << 31; // x^0
    let mut n = len_b;
    let mut k = 3; // bytes to bits: x^(8n) = (x^(2^3))^n
    while n != 0 {
        if n & 1 != 0 {
            op = mult_mod_p(X2N[k], op);
        }
        n >>= 1;
        k += 1;
    }
    mult_mod_p(op, crc_a) ^ crc_b
}

/// The checksum stored for the value at `off` in `seg`, if it lies inside
/// the file.
pub(crate) fn stored(seg: &Segment, off: usize) -> Option<u32> {
    parse(seg.bytes(off.checked_sub(VALUE_CRC_LEN)?, VALUE_CRC_LEN)?)
}

/// The checksum at the start of `b` (a value's bytes preceded by its
/// checksum, as laid out in the record).
pub(crate) fn parse(b: &[u8]) -> Option<u32> {
    let w: [u8; VALUE_CRC_LEN] = b.get(..VALUE_CRC_LEN)?.try_into().ok()?;
    Some(u32::from_le_bytes(w))
}

/// Checks `value`, read from `off` in `seg`, against its stored checksum.
/// The error names the file and offset and never carries the bad bytes.
pub(crate) fn verify(seg: &Segment, off: usize, value: &[u8]) -> Result<u32> {
    verify_against(seg, off, stored(seg, off), value)
}

/// [`verify`] with the stored checksum already read (`want`), e.g. from a
/// buffer the record was read into.
pub(crate) fn verify_against(
    seg: &Segment,
    off: usize,
    want: Option<u32>,
    value: &[u8],
) -> Result<u32> {
    let got = crate::crc::crc32c(value);
    if want == Some(got) {
        return Ok(got);
    }
    Err(Error::Corruption(format!(
        "{} offset {off} (+{}): value checksum mismatch (stored {}, computed {got:08x})",
        seg.path.display(),
        value.len(),
        want.map_or_else(|| "none".to_string(), |w| format!("{w:08x}")),
    )))
}

/// Values at least this long are checked once while their pages stay in
/// memory ([`Verified`]); shorter ones cost less to check than to track.
/// Two such values start at least 64 bytes apart (60 + their 4-byte
/// checksum), so one bit per 64-byte grain names one value.
pub(crate) const ONCE_MIN_LEN: usize = 60;
const GRAIN: usize = 64;
/// Marks older than this are dropped, so a value read again is checked at
/// least this often even if the engine never saw its page leave memory.
const REVERIFY_MS: u64 = 30_000;
/// Bytes of a value prefetched before its mark is read; the hardware
/// prefetcher follows the rest once the copy streams.
const PREFETCH_VALUE: usize = 256;

/// Which values of a segment were checked since their pages were last
/// (possibly) read from the file: RocksDB checks a block when it reads it
/// from the file and not on a block-cache hit; through a mapping a value
/// in memory is a cache hit. A mark is dropped when the engine evicts the
/// segment, after [`REVERIFY_MS`], and never set while the log is larger
/// than memory (`Log::verify_once`), where pages come and go unseen.
pub(crate) struct Verified {
    since_ms: AtomicU64,
    bits: Box<[AtomicU64]>,
}

impl Verified {
    /// Marks for a segment of `size` bytes.
    pub fn new(size: usize) -> Verified {
        Verified {
            since_ms: AtomicU64::new(crate::clock::coarse_ms()),
            bits: (0..size.div_ceil(GRAIN).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    fn slot(&self, off: usize) -> Option<(&AtomicU64, u64)> {
        let g = off / GRAIN;
        Some((self.bits.get(g / 64)?, 1u64 << (g % 64)))
    }

    /// Whether the value at `off` was checked, and its mark still current.
    fn is_set(&self, off: usize) -> bool {
        if crate::clock::coarse_ms().saturating_sub(self.since_ms.load(Ordering::Relaxed))
            > REVERIFY_MS
        {
            self.forget();
            return false;
        }
        self.slot(off)
            .is_some_and(|(w, bit)| w.load(Ordering::Relaxed) & bit != 0)
    }

    fn set(&self, off: usize) {
        if let Some((w, bit)) = self.slot(off) {
            w.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Drops every mark: the next read of each value checks it.
    pub fn forget(&self) {
        self.since_ms
            .store(crate::clock::coarse_ms(), Ordering::Relaxed);
        for w in self.bits.iter() {
            w.store(0, Ordering::Relaxed);
        }
    }
}

/// [`verify`] for a value read through the mapping: with `once` (the log
/// fits in memory), a value long enough to track is checked on its first
/// read and then, while its mark lasts, not again.
pub(crate) fn verify_mapped(seg: &Segment, off: usize, value: &[u8], once: bool) -> Result<()> {
    if !once || value.len() < ONCE_MIN_LEN {
        return verify(seg, off, value).map(drop);
    }
    let marks = seg.verified();
    // The mark and the value are two misses with no dependency: start the
    // value's first lines (its checksum precedes it) before the mark.
    crate::prefetch::slice(value.get(..PREFETCH_VALUE).unwrap_or(value));
    if marks.is_set(off) {
        return Ok(());
    }
    verify(seg, off, value)?;
    marks.set(off);
    Ok(())
}

#[cfg(test)]
mod combine_tests {
    use super::{body_crc, combine, COMBINE_FROM};

    /// Either way of folding the value in (a second pass for short values,
    /// `combine` for long ones) gives the checksum of the whole body.
    #[test]
    fn body_crc_equals_checksum_of_the_whole_body() {
        let (h, key) = ([1u8, 2, 3, 4, 5, 6, 7, 8, 9], b"key-0000000000001");
        for len in [0, 1, 8, 1024, COMBINE_FROM - 1, COMBINE_FROM, 65_536] {
            let value: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let vcrc = crate::crc::crc32c(&value);
            let crc = vcrc.to_le_bytes();
            let whole: Vec<u8> = [&h[..], key, &crc, &value].concat();
            assert_eq!(
                body_crc(&[&h, key, &crc], &value, vcrc),
                crate::crc::crc32c(&whole),
                "value of {len} B"
            );
        }
    }

    #[test]
    fn combine_equals_checksum_of_concatenation() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for split in [0, 1, 7, 8, 63, 1000, 4096, 65_536, 69_999, 70_000] {
            let (a, b) = data.split_at(split);
            assert_eq!(
                combine(crate::crc::crc32c(a), crate::crc::crc32c(b), b.len()),
                crate::crc::crc32c(&data),
                "split at {split}"
            );
        }
    }

    #[test]
    fn combine_agrees_with_the_crate() {
        for len in [1usize, 2, 3, 100, 1 << 20, usize::MAX >> 3] {
            assert_eq!(
                combine(0xdead_beef, 0x1234_5678, len),
                crc32c::crc32c_combine(0xdead_beef, 0x1234_5678, len),
                "len {len}"
            );
        }
    }
}

#[cfg(test)]
mod verified_tests {
    use super::*;

    #[test]
    fn a_mark_names_one_value_and_forgetting_clears_all() {
        let v = Verified::new(1 << 20);
        assert!(!v.is_set(0));
        v.set(64);
        assert!(v.is_set(64) && v.is_set(127), "one grain");
        assert!(!v.is_set(128) && !v.is_set(0), "its neighbours");
        v.set((1 << 20) + 64); // past the end: ignored
        v.forget();
        assert!(!v.is_set(64));
    }

    #[test]
    fn marks_expire() {
        let v = Verified::new(4096);
        v.set(0);
        v.since_ms.store(
            crate::clock::coarse_ms().saturating_sub(REVERIFY_MS + 1),
            Ordering::Relaxed,
        );
        assert!(!v.is_set(0), "an old mark is dropped");
        v.set(0);
        assert!(v.is_set(0));
    }
}
