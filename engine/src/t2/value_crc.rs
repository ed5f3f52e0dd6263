//! Per-value checksums. Every stored value is preceded in its log record by
//! the crc32c of its bytes, so a T1 locator's `offset - 4` holds it. Values
//! below the checkpoint LSN are never replayed, so without this a flipped
//! bit in an old record would be returned as data nobody wrote.

use crate::error::{Error, Result};
use crate::t2::segment::Segment;

/// Bytes of the checksum stored just before each value.
pub(crate) const VALUE_CRC_LEN: usize = 4;

/// The body checksum of a record whose body is `prefix` followed by a value
/// whose own crc32c is `value_crc`: the value's crc is folded in with
/// [`combine`] instead of a second pass over its bytes, so a write
/// checksums each value byte once.
pub(crate) fn body_crc(prefix: &[&[u8]], value_crc: u32, value_len: usize) -> u32 {
    let c = prefix
        .iter()
        .fold(0u32, |c, p| crate::crc::crc32c_append(c, p));
    combine(c, value_crc, value_len)
}

/// The reflected CRC-32C polynomial.
const POLY: u32 = 0x82F6_3B78;

/// `a * b mod POLY` over GF(2), in the reflected bit order crc32c uses
/// (bit 31 is x^0).
const fn mult_mod_p(a: u32, mut b: u32) -> u32 {
    let mut m: u32 = 1 << 31;
    let mut p: u32 = 0;
    while m != 0 {
        if a & m != 0 {
            p ^= b;
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
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

#[cfg(test)]
mod combine_tests {
    use super::combine;

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
