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
/// `crc32c_combine` (O(log len)) instead of a second pass over its bytes,
/// so a write checksums each value byte once.
pub(crate) fn body_crc(prefix: &[&[u8]], value_crc: u32, value_len: usize) -> u32 {
    let c = prefix.iter().fold(0u32, |c, p| crc32c::crc32c_append(c, p));
    crc32c::crc32c_combine(c, value_crc, value_len)
}

/// The checksum stored for the value at `off` in `seg`, if it lies inside
/// the file.
pub(crate) fn stored(seg: &Segment, off: usize) -> Option<u32> {
    let b = seg.bytes(off.checked_sub(VALUE_CRC_LEN)?, VALUE_CRC_LEN)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Checks `value`, read from `off` in `seg`, against its stored checksum.
/// The error names the file and offset and never carries the bad bytes.
pub(crate) fn verify(seg: &Segment, off: usize, value: &[u8]) -> Result<u32> {
    let want = stored(seg, off);
    let got = crc32c::crc32c(value);
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
