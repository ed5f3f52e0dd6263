//! The log record format: a 48-byte header, the body, zero padding to a
//! 16-byte boundary. Byte layout is documented in `docs/design.md`.

/// Records start on this alignment.
pub const ALIGN: usize = 16;
/// Header size in bytes.
pub const HEADER_LEN: usize = 48;
/// `"VMKV"` read as a little-endian u32.
pub const MAGIC: u32 = 0x564B_4D56;
/// Format version stored in every header. 2: stored values carry their own
/// crc32c just before the value bytes (version 1 had none).
pub const VERSION: u8 = 2;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A batch of puts, deletes and range deletes (every user write).
    Batch = 1,
    /// A live value moved by defragment; keeps the original seq.
    Relocation = 2,
    /// Written into a segment's last `SEAL_LEN` bytes when the log rolls
    /// over to the next segment (`extra` = that segment's id). Recovery
    /// thereby knows the next segment existed: if it is missing, its writes
    /// were lost, which is reported instead of passing silently.
    Seal = 3,
    /// Many values moved by defragment or the key-order pass, back to back,
    /// then a directory of their keys (`t2/packed.rs`).
    Packed = 4,
    /// Puts written with `disable_wal`, in the same layout as [`Kind::Packed`]
    /// (the directory's old locators are zero), possibly followed by zero
    /// padding (`unlogged.rs`).
    PackedPuts = 5,
    /// Space that holds no data, declared so that recovery can tell it
    /// from acknowledged records that were zeroed: the end of a segment a
    /// record did not fit (and, in logs recovered by builds before
    /// point-in-time recovery, a hole left by a write in flight). Its body
    /// is not checksummed and is never read.
    Pad = 6,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Batch),
            2 => Some(Kind::Relocation),
            3 => Some(Kind::Seal),
            4 => Some(Kind::Packed),
            5 => Some(Kind::PackedPuts),
            6 => Some(Kind::Pad),
            _ => None,
        }
    }
}

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Record kind.
    pub kind: Kind,
    /// Batch: number of operations; relocation: key length; packed: number
    /// of values.
    pub count_or_key_len: u32,
    /// Body length in bytes (padding excluded).
    pub body_len: u32,
    /// crc32c of the body.
    pub body_crc: u32,
    /// The record's own position, `segment << 32 | offset`.
    pub lsn: u64,
    /// Logical version of the data (equals `lsn` except for relocations).
    pub seq: u64,
    /// Relocation: the old locator's segment (high 32) and offset (low 32);
    /// packed: the length of the values part of the body.
    pub extra: u64,
}

/// Rounds `n` up to [`ALIGN`].
pub fn align_up(n: usize) -> usize {
    (n + ALIGN - 1) & !(ALIGN - 1)
}

/// Total on-disk size of a record with a `body_len`-byte body.
pub fn record_len(body_len: usize) -> usize {
    align_up(HEADER_LEN + body_len)
}

/// Bytes at the end of every segment reserved for its [`Kind::Seal`]
/// record (a header with no body).
pub const SEAL_LEN: usize = HEADER_LEN;

/// Offset of the seal slot in a segment of `size` bytes; records may use
/// `[0, seal_offset(size))`.
pub fn seal_offset(size: usize) -> usize {
    size.saturating_sub(SEAL_LEN) & !(ALIGN - 1)
}

/// The header of a [`Kind::Pad`] covering `[off, off + len)` of segment
/// `segment`; `len` is at least [`HEADER_LEN`] and a multiple of [`ALIGN`].
pub fn pad_header(segment: u32, off: usize, len: usize) -> Header {
    let at = lsn(segment, off as u32);
    Header {
        kind: Kind::Pad,
        count_or_key_len: 0,
        body_len: (len - HEADER_LEN) as u32,
        body_crc: 0,
        lsn: at,
        seq: at,
        extra: 0,
    }
}

/// Packs an LSN from a segment id and offset.
pub fn lsn(segment: u32, offset: u32) -> u64 {
    (u64::from(segment) << 32) | u64::from(offset)
}

/// Splits an LSN into segment id and offset.
pub fn split_lsn(lsn: u64) -> (u32, u32) {
    ((lsn >> 32) as u32, lsn as u32)
}

impl Header {
    /// The first 8 bytes, which are stored last with one atomic write: a
    /// record is committed once this word is non-zero.
    pub fn commit_word(&self) -> u64 {
        u64::from(MAGIC) | (u64::from(self.kind as u8) << 32) | (u64::from(VERSION) << 40)
    }

    /// Encodes the full header, header checksum included.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&self.commit_word().to_le_bytes());
        h[12..16].copy_from_slice(&self.count_or_key_len.to_le_bytes());
        h[16..20].copy_from_slice(&self.body_len.to_le_bytes());
        h[20..24].copy_from_slice(&self.body_crc.to_le_bytes());
        h[24..32].copy_from_slice(&self.lsn.to_le_bytes());
        h[32..40].copy_from_slice(&self.seq.to_le_bytes());
        h[40..48].copy_from_slice(&self.extra.to_le_bytes());
        let crc = crate::crc::crc32c(&h);
        h[8..12].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decodes and checks a header: magic, version, kind and header crc.
    /// `None` means "not a valid header" (the caller decides whether that
    /// is a hole, a torn tail or corruption).
    pub fn decode(b: &[u8]) -> Option<Header> {
        let b: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if u32_at(0) != MAGIC || b[5] != VERSION || b[6] != 0 || b[7] != 0 {
            return None;
        }
        let kind = Kind::from_u8(b[4])?;
        let mut copy = *b;
        copy[8..12].fill(0);
        if crate::crc::crc32c(&copy) != u32_at(8) {
            return None;
        }
        Some(Header {
            kind,
            count_or_key_len: u32_at(12),
            body_len: u32_at(16),
            body_crc: u32_at(20),
            lsn: u64_at(24),
            seq: u64_at(32),
            extra: u64_at(40),
        })
    }

    /// Reads the commit word of the header at the start of `b`.
    pub fn commit_word_of(b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        if let Some(s) = b.get(..8) {
            a.copy_from_slice(s);
        }
        u64::from_le_bytes(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            kind: Kind::Relocation,
            count_or_key_len: 3,
            body_len: 10,
            body_crc: 0xdead_beef,
            lsn: lsn(7, 4096),
            seq: 42,
            extra: 99,
        }
    }

    #[test]
    fn header_roundtrip_and_checksum() {
        let h = sample();
        let mut bytes = h.encode();
        assert_eq!(Header::decode(&bytes), Some(h));
        assert_eq!(Header::commit_word_of(&bytes), h.commit_word());
        bytes[30] ^= 1;
        assert_eq!(Header::decode(&bytes), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(record_len(0), 48);
        assert_eq!(record_len(1), 64);
        assert_eq!(split_lsn(lsn(3, 17)), (3, 17));
    }
}
