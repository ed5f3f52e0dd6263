//! Per-value checksums. Every stored value is preceded in its log record by
//! the crc32c of its bytes, so a T1 locator's `offset - 4` holds it. Values
//! below the checkpoint LSN are never replayed, so without this a flipped
//! bit in an old record would be returned as data nobody wrote.

use crate::error::{Error, Result};
use crate::t2::segment::Segment;

/// Bytes of the checksum stored just before each value.
pub(crate) const VALUE_CRC_LEN: usize = 4;

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
