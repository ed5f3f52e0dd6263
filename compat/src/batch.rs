//! `WriteBatch`: a sequence of updates applied atomically by `Db::write`.

use crate::family::Cf;

/// One update inside a [`WriteBatch`], borrowed from the batch's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// The column family.
        cf: Cf,
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Remove `key`.
    Delete {
        /// The column family.
        cf: Cf,
        /// The key.
        key: &'a [u8],
    },
    /// Remove every key in `[begin, end)`.
    DeleteRange {
        /// The column family.
        cf: Cf,
        /// First key removed.
        begin: &'a [u8],
        /// First key kept.
        end: &'a [u8],
    },
}

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;
const TAG_DELETE_RANGE: u8 = 3;
/// The same three, followed by a varint family number; the default
/// family's ops keep the short tags, so a batch without families encodes
/// as it always did.
const TAG_CF: u8 = 3;
/// RocksDB counts a 12-byte header (sequence + count) in `data_size`; we do
/// the same so db_bench's byte figures line up.
const HEADER_SIZE: usize = 12;

/// A batch of updates, encoded into one contiguous buffer so that building a
/// batch allocates only when the buffer grows.
///
/// Within a batch the last update to a key wins. `Db::write` applies the
/// whole batch or, after a crash, none of it.
///
/// ```
/// use vmemkv_compat::{BatchOp, WriteBatch};
/// let mut b = WriteBatch::new();
/// b.put(b"a", b"1");
/// b.delete(b"b");
/// b.delete_range(b"c", b"d");
/// assert_eq!(b.len(), 3);
/// let ops: Vec<_> = b.iter().collect();
/// assert_eq!(ops[0], BatchOp::Put { cf: vmemkv_compat::Cf::DEFAULT, key: b"a", value: b"1" });
/// b.clear();
/// assert!(b.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: usize,
    /// Updates addressed to a family other than `default`.
    cf_count: usize,
}

fn put_varint(buf: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn get_varint(buf: &[u8], pos: &mut usize) -> Option<usize> {
    let mut v: usize = 0;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

fn get_slice<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let len = get_varint(buf, pos)?;
    let end = pos.checked_add(len)?;
    let s = buf.get(*pos..end)?;
    *pos = end;
    Some(s)
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch whose buffer holds `bytes` without growing.
    pub fn with_capacity(bytes: usize) -> Self {
        WriteBatch {
            rep: Vec::with_capacity(bytes),
            count: 0,
            cf_count: 0,
        }
    }

    fn push_slice(&mut self, s: &[u8]) {
        put_varint(&mut self.rep, s.len());
        self.rep.extend_from_slice(s);
    }

    /// Queues `key = value` in the default family.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.put_cf(Cf::DEFAULT, key, value)
    }

    /// Queues the removal of `key`.
    pub fn delete(&mut self, key: &[u8]) {
        self.delete_cf(Cf::DEFAULT, key)
    }

    /// Queues the removal of every key in `[begin, end)`.
    pub fn delete_range(&mut self, begin: &[u8], end: &[u8]) {
        self.delete_range_cf(Cf::DEFAULT, begin, end)
    }

    fn push_tag(&mut self, tag: u8, cf: Cf) {
        if cf.is_default() {
            self.rep.push(tag);
        } else {
            self.rep.push(tag + TAG_CF);
            put_varint(&mut self.rep, cf.id() as usize);
            self.cf_count += 1;
        }
        self.count += 1;
    }

    /// Queues `key = value` in family `cf`.
    pub fn put_cf(&mut self, cf: Cf, key: &[u8], value: &[u8]) {
        self.push_tag(TAG_PUT, cf);
        self.push_slice(key);
        self.push_slice(value);
    }

    /// Queues the removal of `key` from family `cf`.
    pub fn delete_cf(&mut self, cf: Cf, key: &[u8]) {
        self.push_tag(TAG_DELETE, cf);
        self.push_slice(key);
    }

    /// Queues the removal of every key in `[begin, end)` of family `cf`.
    pub fn delete_range_cf(&mut self, cf: Cf, begin: &[u8], end: &[u8]) {
        self.push_tag(TAG_DELETE_RANGE, cf);
        self.push_slice(begin);
        self.push_slice(end);
    }

    /// Whether any queued update addresses a family other than `default`.
    pub fn uses_families(&self) -> bool {
        self.cf_count > 0
    }

    /// Removes every queued update, keeping the buffer.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.count = 0;
        self.cf_count = 0;
    }

    /// Number of queued updates.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no update is queued.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size of the encoded batch in bytes, RocksDB-style (header included).
    pub fn data_size(&self) -> usize {
        HEADER_SIZE + self.rep.len()
    }

    /// The queued updates, in order.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            rep: &self.rep,
            pos: 0,
        }
    }
}

impl BatchOp<'_> {
    /// The family the update addresses.
    pub fn cf(&self) -> Cf {
        match *self {
            BatchOp::Put { cf, .. }
            | BatchOp::Delete { cf, .. }
            | BatchOp::DeleteRange { cf, .. } => cf,
        }
    }
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = BatchOp<'a>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

/// Iterator over a [`WriteBatch`]'s updates.
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    rep: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = BatchOp<'a>;

    fn next(&mut self) -> Option<BatchOp<'a>> {
        // The buffer is only ever written by WriteBatch itself, so a decode
        // failure cannot happen; ending the iteration is the safe answer.
        let mut tag = *self.rep.get(self.pos)?;
        self.pos += 1;
        let mut cf = Cf::DEFAULT;
        if tag > TAG_CF {
            tag -= TAG_CF;
            cf = Cf::from_id(u32::try_from(get_varint(self.rep, &mut self.pos)?).ok()?);
        }
        let op = match tag {
            TAG_PUT => {
                let key = get_slice(self.rep, &mut self.pos)?;
                let value = get_slice(self.rep, &mut self.pos)?;
                BatchOp::Put { cf, key, value }
            }
            TAG_DELETE => BatchOp::Delete {
                cf,
                key: get_slice(self.rep, &mut self.pos)?,
            },
            TAG_DELETE_RANGE => {
                let begin = get_slice(self.rep, &mut self.pos)?;
                let end = get_slice(self.rep, &mut self.pos)?;
                BatchOp::DeleteRange { cf, begin, end }
            }
            _ => return None,
        };
        Some(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_large_and_empty_slices() {
        let big = vec![7u8; 300_000];
        let mut b = WriteBatch::new();
        b.put(b"", b"");
        b.put(b"k", &big);
        b.delete(b"\x00\xff");
        let ops: Vec<_> = b.iter().collect();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[0],
            BatchOp::Put {
                cf: Cf::DEFAULT,
                key: b"",
                value: b""
            }
        );
        assert_eq!(
            ops[1],
            BatchOp::Put {
                cf: Cf::DEFAULT,
                key: b"k",
                value: &big[..]
            }
        );
        assert_eq!(
            ops[2],
            BatchOp::Delete {
                cf: Cf::DEFAULT,
                key: b"\x00\xff"
            }
        );
        assert!(b.data_size() > big.len());
        assert!(!b.uses_families());
    }

    #[test]
    fn family_ops_carry_their_family() {
        let mut b = WriteBatch::new();
        let cf = Cf::from_id(300);
        b.put(b"a", b"1");
        b.put_cf(cf, b"b", b"2");
        b.delete_cf(cf, b"c");
        b.delete_range_cf(cf, b"d", b"e");
        assert!(b.uses_families());
        let fams: Vec<Cf> = b.iter().map(|op| op.cf()).collect();
        assert_eq!(fams, vec![Cf::DEFAULT, cf, cf, cf]);
        assert_eq!(
            b.iter().nth(3),
            Some(BatchOp::DeleteRange {
                cf,
                begin: b"d",
                end: b"e"
            })
        );
        b.clear();
        assert!(!b.uses_families());
    }
}
