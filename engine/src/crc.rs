//! CRC-32C (Castagnoli): the checksum of every log record, stored value and
//! checkpoint. `crc-fast` folds with carry-less multiplies fused with the
//! `crc32` instruction, where the `crc32c` crate runs one dependent `crc32`
//! chain below 768 bytes. A cold MultiScan checks every value it returns,
//! and that chain was a quarter of its CPU samples (`perf`, 5M x 512 B).
//! Per call on this machine: 13.5 vs 37.3 ns at 512 B, 50 vs 190 ns at
//! 4 KiB, 0.65 vs 2.5 us at 64 KiB (the format is unchanged: same CRC).
//!
//! Inputs under [`SHORT`] bytes (a record's headers, a key, an 8-byte
//! value) take one chain of `crc32` instructions instead: crc-fast's
//! per-call setup copies a `Digest` by value and dispatches, and for such
//! inputs that cost more than the bytes (6% of a 4-thread 8-byte
//! `insert`'s samples, `memmove` under `Digest::new_with_init_state`).

use crc_fast::{CrcAlgorithm, Digest};

/// Below this many bytes the `crc32` chain (8 bytes per 3 cycles) is
/// faster than crc-fast's setup plus its folding.
const SHORT: usize = 128;

/// The CRC-32C of `data`.
#[inline]
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    if data.len() < SHORT {
        if let Some(c) = short(0, data) {
            return c;
        }
    }
    crc_fast::crc32_iscsi(data)
}

/// The CRC-32C of `a ++ data`, given `crc = crc32c(a)`.
#[inline]
pub(crate) fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    if data.len() < SHORT {
        if let Some(c) = short(crc, data) {
            return c;
        }
    }
    // The register holds the complemented CRC between updates.
    let mut d = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(data);
    d.finalize() as u32
}

/// [`crc32c_append`] by the `crc32` instruction, where the CPU has it.
#[cfg(target_arch = "x86_64")]
#[inline]
fn short(crc: u32, data: &[u8]) -> Option<u32> {
    if !std::arch::is_x86_feature_detected!("sse4.2") {
        return None;
    }
    // SAFETY: the CPU supports SSE4.2, the one feature `short_sse42`
    // enables, as checked just above.
    Some(unsafe { short_sse42(crc, data) })
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn short(_crc: u32, _data: &[u8]) -> Option<u32> {
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn short_sse42(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut words = data.chunks_exact(8);
    let mut c = u64::from(!crc);
    for w in &mut words {
        let w: [u8; 8] = w.try_into().unwrap_or_default();
        c = _mm_crc32_u64(c, u64::from_le_bytes(w));
    }
    let mut c = c as u32;
    let mut rest = words.remainder();
    if let Some((w, r)) = rest.split_first_chunk::<4>() {
        c = _mm_crc32_u32(c, u32::from_le_bytes(*w));
        rest = r;
    }
    if let Some((w, r)) = rest.split_first_chunk::<2>() {
        c = _mm_crc32_u16(c, u16::from_le_bytes(*w));
        rest = r;
    }
    if let Some(&b) = rest.first() {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_an_independent_crc32c_at_every_length_and_split() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        for len in (0..600).chain([4095, 4096, 4097, 65_536, 70_000]) {
            let d = data.get(..len).unwrap_or_default();
            assert_eq!(crc32c(d), crc32c::crc32c(d), "length {len}");
            for cut in [0, 1, len / 3, len] {
                let (a, b) = d.split_at(cut.min(len));
                assert_eq!(
                    crc32c_append(crc32c(a), b),
                    crc32c::crc32c(d),
                    "length {len} split at {cut}"
                );
            }
        }
    }
}
