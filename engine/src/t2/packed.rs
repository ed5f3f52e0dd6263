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

use super::record::{Header, Kind};
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

/// Why a packed directory does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirectoryFault {
    /// The entry's fixed fields run past the directory's end.
    EntryTruncated,
    /// The entry's key runs past the directory's end.
    KeyTruncated { key_len: usize },
    /// The entry's value runs past the end of the values part.
    ValueOutside { value_len: u32 },
    /// Bytes follow the last entry (non-zero ones, where zero padding is
    /// allowed).
    TrailingBytes { len: usize },
    /// The entries do not account for the whole values part.
    ValuesUnclaimed { claimed: usize, values_len: usize },
}

impl std::fmt::Display for DirectoryFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            DirectoryFault::EntryTruncated => {
                f.write_str("the entry's fixed fields run past the directory's end")
            }
            DirectoryFault::KeyTruncated { key_len } => {
                write!(
                    f,
                    "the entry's {key_len}-byte key runs past the directory's end"
                )
            }
            DirectoryFault::ValueOutside { value_len } => write!(
                f,
                "the entry's {value_len}-byte value runs past the values part"
            ),
            DirectoryFault::TrailingBytes { len } => {
                write!(f, "{len} bytes follow the last entry")
            }
            DirectoryFault::ValuesUnclaimed {
                claimed,
                values_len,
            } => write!(
                f,
                "the entries account for {claimed} of the values part's {values_len} bytes"
            ),
        }
    }
}

/// A packed directory that does not decode: where (a body offset) and why.
/// The decoder sees only the body, so the caller names the file and record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed {kind:?} directory at body offset {offset}: {fault}")]
pub(crate) struct MalformedDirectory {
    /// [`Kind::Packed`] or [`Kind::PackedPuts`].
    pub kind: Kind,
    /// Body offset of the entry (or of the end of the last one) at fault.
    pub offset: usize,
    pub fault: DirectoryFault,
}

/// The entries of a [`Kind::Packed`] body whose values part is `values_len`
/// bytes and whose directory is `dir`. Nothing is yielded after an `Err`.
pub(crate) fn entries(
    count: u32,
    values_len: usize,
    dir: &[u8],
) -> impl Iterator<Item = Result<Entry<'_>, MalformedDirectory>> + '_ {
    entries_of(Kind::Packed, count, values_len, dir)
}

/// [`entries`] of a record of `kind`; a [`Kind::PackedPuts`] directory may
/// be followed by zero bytes (the unused end of the space those puts
/// reserved).
pub(crate) fn entries_of(
    kind: Kind,
    count: u32,
    values_len: usize,
    dir: &[u8],
) -> impl Iterator<Item = Result<Entry<'_>, MalformedDirectory>> + '_ {
    let padded = kind == Kind::PackedPuts;
    let (mut left, mut pos, mut value_at) = (count, 0usize, 0usize);
    let mut broken = false;
    std::iter::from_fn(move || {
        if broken {
            return None;
        }
        let mut bad = |at: usize, fault: DirectoryFault| {
            broken = true;
            Some(Err(MalformedDirectory {
                kind,
                offset: values_len + at,
                fault,
            }))
        };
        if left == 0 {
            // Every byte is accounted for, or the record is malformed.
            let rest = dir.get(pos..).unwrap_or_default();
            let padding = padded && rest.iter().all(|&b| b == 0);
            if !(rest.is_empty() || padding) {
                return bad(pos, DirectoryFault::TrailingBytes { len: rest.len() });
            }
            if value_at != values_len {
                let fault = DirectoryFault::ValuesUnclaimed {
                    claimed: value_at,
                    values_len,
                };
                return bad(pos, fault);
            }
            return None;
        }
        left -= 1;
        let Some(fixed) = dir.get(pos..pos + DIR_FIXED) else {
            return bad(pos, DirectoryFault::EntryTruncated);
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
            return bad(pos, DirectoryFault::KeyTruncated { key_len });
        };
        if value_end > values_len {
            return bad(pos, DirectoryFault::ValueOutside { value_len });
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
) -> impl Iterator<Item = Result<Entry<'a>, MalformedDirectory>> + 'a {
    let values_len = usize::try_from(h.extra)
        .unwrap_or(usize::MAX)
        .min(body.len());
    entries_of(h.kind, h.count_or_key_len, values_len, &body[values_len..])
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
        let ok: Result<Vec<_>, _> = entries_of(Kind::PackedPuts, n, vl, &dir).collect();
        assert_eq!(ok.map(|v| v.len()), Ok(3));
        let unpadded: Result<Vec<_>, _> = entries_of(Kind::Packed, n, vl, &dir).collect();
        assert!(unpadded.is_err());
        dir[b.dir().len() + 50] = 1;
        let dirty: Result<Vec<_>, _> = entries_of(Kind::PackedPuts, n, vl, &dir).collect();
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

    #[test]
    fn a_malformed_directory_names_the_entry_at_fault_and_why() {
        let b = built();
        let (dir, n, vl) = (b.dir(), b.count(), b.values().len());
        let err = |kind: Kind, count: u32, values_len: usize, dir: &[u8]| {
            entries_of(kind, count, values_len, dir)
                .find_map(Result::err)
                .expect("malformed")
        };
        let e = err(Kind::Packed, n, vl, &dir[..10]);
        assert_eq!((e.offset, e.fault), (vl, DirectoryFault::EntryTruncated));
        let mut huge = dir.to_vec();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = err(Kind::Packed, n, vl, &huge);
        let key_len = u32::MAX as usize;
        assert_eq!(e.fault, DirectoryFault::KeyTruncated { key_len });
        // The third entry's 600-byte value no longer fits.
        let third = 2 * DIR_FIXED + 4 + 4;
        let e = err(Kind::Packed, n, vl - 1, dir);
        assert_eq!(
            (e.offset, e.fault),
            (
                vl - 1 + third,
                DirectoryFault::ValueOutside { value_len: 600 }
            )
        );
        let e = err(Kind::Packed, n, vl + 16, dir);
        let unclaimed = DirectoryFault::ValuesUnclaimed {
            claimed: vl,
            values_len: vl + 16,
        };
        assert_eq!((e.offset, e.fault), (vl + 16 + dir.len(), unclaimed));
        let mut padded = dir.to_vec();
        padded.extend_from_slice(&[0, 0, 1, 0]);
        let e = err(Kind::PackedPuts, n, vl, &padded);
        assert_eq!(
            (e.kind, e.offset, e.fault),
            (
                Kind::PackedPuts,
                vl + dir.len(),
                DirectoryFault::TrailingBytes { len: 4 }
            )
        );
        assert_eq!(
            e.to_string(),
            format!(
                "malformed PackedPuts directory at body offset {}: 4 bytes follow the last entry",
                vl + dir.len()
            )
        );
    }
}
