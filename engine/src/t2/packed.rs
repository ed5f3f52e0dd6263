//! The body of a packed relocation record ([`Kind::Packed`]): values moved
//! by defragment or the key-order pass, back to back, followed by a
//! directory of their keys. A relocation record per value puts a 48-byte
//! header and the key between every two values (640 bytes of log per
//! 512-byte value with 64-byte keys); here a run of moved values is one
//! extent of `value_crc | value` pairs (516 bytes each), so a scan of it
//! reads a fifth fewer bytes. The directory is only read by replay and by
//! defragment's record walk.
//!
//! ```text
//! values:    (value_crc u32 | value) x count        -- header `extra` bytes
//! directory: (key_len u32 | value_len u32 | seq u64 |
//!             old_segment u32 | old_offset u32 | key) x count
//! ```
//!
//! The header's `count_or_key_len` is `count`, `extra` the length of the
//! values part, `seq` the highest seq of the entries.
//!
//! [`Kind::Packed`]: super::record::Kind::Packed

use super::record::Header;
use super::value_crc::VALUE_CRC_LEN;
use super::Locator;

/// Fixed bytes of a directory entry before its key.
const DIR_FIXED: usize = 24;

/// One moved value as the directory describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    pub key: &'a [u8],
    /// The value's (unchanged) version.
    pub seq: u64,
    /// Where the value was before the move.
    pub old: Locator,
    /// Body offset of the value bytes (its checksum is the 4 bytes before).
    pub value_off: usize,
}

impl Entry<'_> {
    /// The value's locator in a record whose body starts at `body_off` of
    /// segment `segment`.
    pub(crate) fn located(&self, segment: u32, body_off: usize) -> Locator {
        Locator {
            segment,
            offset: (body_off + self.value_off) as u32,
            len: self.old.len,
        }
    }
}

/// The entries of a packed body whose values part is `values_len` bytes
/// and whose directory is `dir`. An `Err` carries the body offset where
/// the directory stops making sense; nothing after it is yielded.
pub(crate) fn entries(
    count: u32,
    values_len: usize,
    dir: &[u8],
) -> impl Iterator<Item = Result<Entry<'_>, usize>> + '_ {
    entries_padded(count, values_len, dir, false)
}

/// [`entries`], allowing zero bytes after the directory when `padded`
/// ([`Kind::PackedPuts`]: the unused end of the space those puts reserved).
///
/// [`Kind::PackedPuts`]: super::record::Kind::PackedPuts
pub(crate) fn entries_padded(
    count: u32,
    values_len: usize,
    dir: &[u8],
    padded: bool,
) -> impl Iterator<Item = Result<Entry<'_>, usize>> + '_ {
    let (mut left, mut pos, mut value_at) = (count, 0usize, 0usize);
    let mut broken = false;
    std::iter::from_fn(move || {
        if broken {
            return None;
        }
        let bad = |at: usize| Some(Err(values_len + at));
        if left == 0 {
            // Every byte is accounted for, or the record is malformed.
            let rest = dir.get(pos..).unwrap_or_default();
            let padding = padded && rest.iter().all(|&b| b == 0);
            if !(pos == dir.len() || padding) || value_at != values_len {
                broken = true;
                return bad(pos);
            }
            return None;
        }
        left -= 1;
        let Some(fixed) = dir.get(pos..pos + DIR_FIXED) else {
            broken = true;
            return bad(pos);
        };
        let u32_at =
            |i: usize| u32::from_le_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&fixed[8..16]);
        let (key_len, value_len) = (u32_at(0) as usize, u32_at(4));
        let old = Locator {
            segment: u32_at(16),
            offset: u32_at(20),
            len: value_len,
        };
        let key_at = pos + DIR_FIXED;
        let value_off = value_at + VALUE_CRC_LEN;
        let value_end = value_off + value_len as usize;
        let Some(key) = dir.get(key_at..key_at + key_len) else {
            broken = true;
            return bad(pos);
        };
        if value_end > values_len {
            broken = true;
            return bad(pos);
        }
        pos = key_at + key_len;
        value_at = value_end;
        Some(Ok(Entry {
            key,
            seq: u64::from_le_bytes(seq),
            old,
            value_off,
        }))
    })
}

/// The entries of the packed record with header `h` and body `body`.
pub(crate) fn of_record<'a>(
    h: &Header,
    body: &'a [u8],
) -> impl Iterator<Item = Result<Entry<'a>, usize>> + 'a {
    let values_len = usize::try_from(h.extra)
        .unwrap_or(usize::MAX)
        .min(body.len());
    let padded = h.kind == super::record::Kind::PackedPuts;
    entries_padded(h.count_or_key_len, values_len, &body[values_len..], padded)
}

/// The directory of a packed body under construction, with the running
/// checksum of its values part (wherever those bytes are kept: in a
/// [`Builder`], or already in the log for unlogged puts).
#[derive(Default)]
pub(crate) struct Directory {
    dir: Vec<u8>,
    count: u32,
    values_len: usize,
    /// crc32c of the values part so far, kept as values are added so that
    /// each value's bytes are checksummed once (its own checksum is folded
    /// in).
    values_crc: u32,
    max_seq: u64,
}

impl Directory {
    /// Records a value whose crc32c is `value_crc`, appended to the values
    /// part as `value_crc | value`.
    pub(crate) fn push(
        &mut self,
        key: &[u8],
        seq: u64,
        old: Locator,
        value_crc: u32,
        value_len: usize,
    ) {
        let crc_bytes = value_crc.to_le_bytes();
        self.values_crc = crate::crc::crc32c_append(self.values_crc, &crc_bytes);
        self.values_crc = crate::t2::value_crc::combine(self.values_crc, value_crc, value_len);
        self.values_len += VALUE_CRC_LEN + value_len;
        self.dir
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.dir
            .extend_from_slice(&(value_len as u32).to_le_bytes());
        self.dir.extend_from_slice(&seq.to_le_bytes());
        self.dir.extend_from_slice(&old.segment.to_le_bytes());
        self.dir.extend_from_slice(&old.offset.to_le_bytes());
        self.dir.extend_from_slice(key);
        self.count += 1;
        self.max_seq = self.max_seq.max(seq);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Length of the values part; the header's `extra`.
    pub(crate) fn values_len(&self) -> usize {
        self.values_len
    }

    pub(crate) fn body_len(&self) -> usize {
        self.values_len + self.dir.len()
    }

    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    pub(crate) fn max_seq(&self) -> u64 {
        self.max_seq
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.dir
    }

    /// crc32c of the values part followed by the directory.
    pub(crate) fn body_crc(&self) -> u32 {
        crate::crc::crc32c_append(self.values_crc, &self.dir)
    }

    pub(crate) fn clear(&mut self) {
        self.dir.clear();
        self.count = 0;
        self.values_len = 0;
        self.values_crc = 0;
        self.max_seq = 0;
    }
}

/// Body bytes a value of `value_len` with a `key_len` key adds.
pub(crate) fn cost(key_len: usize, value_len: usize) -> usize {
    VALUE_CRC_LEN + value_len + DIR_FIXED + key_len
}

/// Accumulates a packed body in memory.
#[derive(Default)]
pub(crate) struct Builder {
    values: Vec<u8>,
    dir: Directory,
}

impl Builder {
    /// Adds a value whose crc32c is `value_crc` (already verified by the
    /// caller against the stored one).
    pub(crate) fn push(
        &mut self,
        key: &[u8],
        seq: u64,
        old: Locator,
        value_crc: u32,
        value: &[u8],
    ) {
        self.values.extend_from_slice(&value_crc.to_le_bytes());
        self.values.extend_from_slice(value);
        self.dir.push(key, seq, old, value_crc, value.len());
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.dir.is_empty()
    }

    pub(crate) fn body_len(&self) -> usize {
        self.dir.body_len()
    }

    pub(crate) fn count(&self) -> u32 {
        self.dir.count()
    }

    pub(crate) fn max_seq(&self) -> u64 {
        self.dir.max_seq()
    }

    /// The values part; its length is the header's `extra`.
    pub(crate) fn values(&self) -> &[u8] {
        &self.values
    }

    pub(crate) fn dir(&self) -> &[u8] {
        self.dir.bytes()
    }

    /// crc32c of the whole body.
    pub(crate) fn body_crc(&self) -> u32 {
        self.dir.body_crc()
    }

    pub(crate) fn clear(&mut self) {
        self.values.clear();
        self.dir.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(segment: u32, offset: u32, len: u32) -> Locator {
        Locator {
            segment,
            offset,
            len,
        }
    }

    fn built() -> Builder {
        let mut b = Builder::default();
        for (i, v) in [&b"first value"[..], b"", &[7u8; 600]]
            .into_iter()
            .enumerate()
        {
            let key = format!("key{i}");
            b.push(
                key.as_bytes(),
                10 + i as u64,
                loc(3, 64 * i as u32, v.len() as u32),
                crate::crc::crc32c(v),
                v,
            );
        }
        b
    }

    #[test]
    fn entries_point_at_their_values_and_checksums() {
        let b = built();
        let body = [b.values(), b.dir()].concat();
        assert_eq!(b.body_crc(), crate::crc::crc32c(&body));
        assert_eq!(b.max_seq(), 12);
        let got: Vec<Entry<'_>> = entries(b.count(), b.values().len(), b.dir())
            .collect::<Result<_, _>>()
            .expect("well formed");
        assert_eq!(got.len(), 3);
        for (i, e) in got.iter().enumerate() {
            assert_eq!(e.key, format!("key{i}").as_bytes());
            assert_eq!(e.seq, 10 + i as u64);
            assert_eq!(e.old.segment, 3);
            let value = &body[e.value_off..e.value_off + e.old.len as usize];
            let stored = crate::t2::value_crc::parse(&body[e.value_off - VALUE_CRC_LEN..]);
            assert_eq!(stored, Some(crate::crc::crc32c(value)));
        }
        assert_eq!(
            &body[got[2].value_off..got[2].value_off + 600],
            &[7u8; 600][..]
        );
    }

    #[test]
    fn only_a_padded_directory_may_be_followed_by_zeros_and_only_zeros() {
        let b = built();
        let mut dir = b.dir().to_vec();
        dir.extend_from_slice(&[0u8; 100]);
        let (n, vl) = (b.count(), b.values().len());
        let ok: Result<Vec<_>, _> = entries_padded(n, vl, &dir, true).collect();
        assert_eq!(ok.map(|v| v.len()), Ok(3));
        let unpadded: Result<Vec<_>, _> = entries_padded(n, vl, &dir, false).collect();
        assert!(unpadded.is_err());
        dir[b.dir().len() + 50] = 1;
        let dirty: Result<Vec<_>, _> = entries_padded(n, vl, &dir, true).collect();
        assert!(dirty.is_err());
    }

    #[test]
    fn a_malformed_directory_is_an_error_not_a_panic() {
        let b = built();
        let dir = b.dir();
        // Cut anywhere, claim more or fewer entries, or a shorter values
        // part: every variant ends in an Err.
        for cut in 0..dir.len() {
            let r: Result<Vec<_>, _> = entries(b.count(), b.values().len(), &dir[..cut]).collect();
            assert!(r.is_err(), "cut at {cut}");
        }
        for count in [0, 2, 4, u32::MAX] {
            let r: Result<Vec<_>, _> = entries(count, b.values().len(), dir).collect();
            assert!(r.is_err(), "count {count}");
        }
        let r: Result<Vec<_>, _> = entries(b.count(), b.values().len() - 1, dir).collect();
        assert!(r.is_err());
        let mut huge = dir.to_vec();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let r: Result<Vec<_>, _> = entries(b.count(), b.values().len(), &huge).collect();
        assert!(r.is_err());
    }
}
