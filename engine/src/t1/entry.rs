//! Entry types shared by every T1 region, and their fixed-size record encoding.

/// Values of at most this many bytes live inside the index entry and never touch T2.
pub const INLINE_MAX: usize = 8;

pub use crate::t2::Locator;

/// What an entry says about its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// A value of at most `INLINE_MAX` bytes, stored in the entry (`bytes[..len]`).
    Inline {
        /// Number of meaningful bytes in `bytes`.
        len: u8,
        /// The value, zero padded.
        bytes: [u8; 8],
    },
    /// The value lives in T2.
    Stored(Locator),
    /// The key was deleted.
    Tombstone,
}

impl Payload {
    /// An inline payload holding `value`, or `None` if it is longer than [`INLINE_MAX`].
    pub fn inline(value: &[u8]) -> Option<Payload> {
        if value.len() > INLINE_MAX {
            return None;
        }
        let mut bytes = [0u8; 8];
        bytes[..value.len()].copy_from_slice(value);
        Some(Payload::Inline {
            len: value.len() as u8,
            bytes,
        })
    }

    /// The value bytes of an inline payload.
    pub fn inline_bytes(&self) -> Option<&[u8]> {
        match self {
            Payload::Inline { len, bytes } => bytes.get(..usize::from(*len)),
            _ => None,
        }
    }

    #[cfg(any(test, feature = "internals"))]
    /// True for [`Payload::Tombstone`].
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Payload::Tombstone)
    }
}

/// One version of a key: the sequence number of the write that produced it and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Sequence number of the write; higher wins.
    pub seq: u64,
    /// Inline value, T2 locator or tombstone.
    pub payload: Payload,
}

impl Entry {
    /// The entry a cursor reports when it is not valid.
    pub const INVALID: Entry = Entry {
        seq: 0,
        payload: Payload::Tombstone,
    };
}

/// Outcome of [`super::T1::upsert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upsert {
    /// The key had no entry (in any region).
    Inserted,
    /// The key's previous entry (possibly a tombstone) was superseded.
    Replaced(Entry),
    /// The existing entry had a higher seq; nothing changed.
    Stale,
    /// Put into the append region by a write ordered with every other
    /// write of its key (`T1::upsert_ordered`) without reading the regions
    /// below, because they hold no stored value: whatever version it
    /// superseded there, if any, was inline or a tombstone and freed no
    /// bytes in T2.
    Added,
}

const TAG_TOMB: u64 = 0;
const TAG_INLINE: u64 = 1;
const TAG_STORED: u64 = 2;

/// Fixed-size (24-byte) encoding of an [`Entry`], used by sorted-region records and by
/// the seqlocked slots of the append region.
///
/// `b` holds the tag in its low byte; inline entries keep their length in bits 8..16,
/// stored entries keep `Locator::len` in bits 32..64 and `segment | offset << 32` in `a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Rec {
    pub seq: u64,
    pub a: u64,
    pub b: u64,
}

impl Rec {
    pub fn encode(e: &Entry) -> Rec {
        match e.payload {
            Payload::Inline { len, bytes } => Rec {
                seq: e.seq,
                a: u64::from_le_bytes(bytes),
                b: TAG_INLINE | (u64::from(len) << 8),
            },
            Payload::Stored(l) => Rec {
                seq: e.seq,
                a: u64::from(l.segment) | (u64::from(l.offset) << 32),
                b: TAG_STORED | (u64::from(l.len) << 32),
            },
            Payload::Tombstone => Rec {
                seq: e.seq,
                a: 0,
                b: TAG_TOMB,
            },
        }
    }

    #[inline]
    pub fn decode(&self) -> Entry {
        let payload = match self.b & 0xff {
            TAG_INLINE => Payload::Inline {
                len: ((self.b >> 8) & 0xff) as u8,
                bytes: self.a.to_le_bytes(),
            },
            TAG_STORED => Payload::Stored(Locator {
                segment: self.a as u32,
                offset: (self.a >> 32) as u32,
                len: (self.b >> 32) as u32,
            }),
            _ => Payload::Tombstone,
        };
        Entry {
            seq: self.seq,
            payload,
        }
    }

    pub fn is_tombstone(&self) -> bool {
        self.b & 0xff == TAG_TOMB
    }

    /// Whether the value is in T2 (its bytes count as live there).
    #[inline]
    pub fn is_stored(&self) -> bool {
        self.b & 0xff == TAG_STORED
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn rec_roundtrip() {
        let cases = [
            Entry {
                seq: 7,
                payload: Payload::Tombstone,
            },
            Entry {
                seq: u64::MAX,
                payload: Payload::Stored(Locator {
                    segment: u32::MAX,
                    offset: 12345,
                    len: u32::MAX - 1,
                }),
            },
            Entry {
                seq: 1,
                payload: Payload::inline(b"abcdefgh").unwrap_or(Payload::Tombstone),
            },
            Entry {
                seq: 2,
                payload: Payload::inline(b"").unwrap_or(Payload::Tombstone),
            },
        ];
        for e in cases {
            let r = Rec::encode(&e);
            assert_eq!(r.decode(), e);
            assert_eq!(r.is_tombstone(), e.payload.is_tombstone());
        }
    }

    #[test]
    fn inline_limits() {
        assert!(Payload::inline(b"123456789").is_none());
        let p = Payload::inline(b"xyz");
        assert_eq!(
            p.and_then(|p| p.inline_bytes().map(<[u8]>::to_vec)),
            Some(b"xyz".to_vec())
        );
        assert_eq!(Payload::Tombstone.inline_bytes(), None);
    }
}
