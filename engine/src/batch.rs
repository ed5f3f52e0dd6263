//! The native `WriteBatch`. Its buffer is already in the on-disk body
//! encoding of a batch record (see `docs/design.md`), so committing a batch
//! is one `memcpy` into the log.

/// Tag of a put sub-operation.
pub(crate) const OP_PUT: u8 = 1;
use crate::t2::value_crc::VALUE_CRC_LEN;
/// Tag of a delete sub-operation.
pub(crate) const OP_DELETE: u8 = 2;
/// Tag of a range-delete sub-operation.
pub(crate) const OP_DELETE_RANGE: u8 = 3;

/// One update inside a batch. `value_offset` is the offset of the value
/// bytes inside the encoded body, which is how the engine builds locators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// Offset of `value` inside the encoded body.
        value_offset: usize,
    },
    /// Remove `key`.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// Remove every key in `[begin, end)`.
    DeleteRange {
        /// First key removed.
        begin: &'a [u8],
        /// First key kept.
        end: &'a [u8],
    },
}

/// A batch of updates applied atomically by `Db::write`: after a crash
/// either all of it or none of it is present. Within a batch the last update
/// to a key wins.
///
/// ```
/// let mut b = vmemkv::WriteBatch::new();
/// b.put(b"a", b"1");
/// b.delete(b"b");
/// assert_eq!(b.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) rep: Vec<u8>,
    pub(crate) count: u32,
    pub(crate) has_range: bool,
    pub(crate) max_key: usize,
    pub(crate) max_value: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    fn push_len(&mut self, n: usize) {
        // Lengths above u32 are refused by `Db::write` (max_key/max_value are
        // tracked); saturating keeps the encoding well-formed meanwhile.
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.rep.extend_from_slice(&n.to_le_bytes());
    }

    /// Queues `key = value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        // One allocation for the operation, not a doubling per extend (a
        // batch of one 512-byte put grew through seven sizes).
        self.rep.reserve(1 + 8 + key.len() + 4 + value.len());
        self.rep.push(OP_PUT);
        self.push_len(key.len());
        self.push_len(value.len());
        self.rep.extend_from_slice(key);
        self.rep
            .extend_from_slice(&crate::crc::crc32c(value).to_le_bytes());
        self.rep.extend_from_slice(value);
        self.count += 1;
        self.max_key = self.max_key.max(key.len());
        self.max_value = self.max_value.max(value.len());
    }

    /// Queues the removal of `key`.
    pub fn delete(&mut self, key: &[u8]) {
        self.rep.push(OP_DELETE);
        self.push_len(key.len());
        self.rep.extend_from_slice(key);
        self.count += 1;
        self.max_key = self.max_key.max(key.len());
    }

    /// Queues the removal of every key in `[begin, end)`.
    pub fn delete_range(&mut self, begin: &[u8], end: &[u8]) {
        self.rep.push(OP_DELETE_RANGE);
        self.push_len(begin.len());
        self.push_len(end.len());
        self.rep.extend_from_slice(begin);
        self.rep.extend_from_slice(end);
        self.count += 1;
        self.has_range = true;
        self.max_key = self.max_key.max(begin.len()).max(end.len());
    }

    /// Removes every queued update, keeping the buffer.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.count = 0;
        self.has_range = false;
        self.max_key = 0;
        self.max_value = 0;
    }

    /// Number of queued updates.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no update is queued.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size in bytes.
    pub fn data_size(&self) -> usize {
        self.rep.len()
    }

    /// The queued updates, in order.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            body: &self.rep,
            pos: 0,
        }
    }
}

/// Why a batch body does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchFault {
    /// The tag byte is none of put, delete and range delete.
    UnknownTag(u8),
    /// A length field, or the bytes it counts, runs past the end of the body.
    Truncated,
}

impl std::fmt::Display for BatchFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchFault::UnknownTag(t) => write!(f, "unknown operation tag {t}"),
            BatchFault::Truncated => f.write_str("a length or its bytes run past the body's end"),
        }
    }
}

/// A batch body that does not decode: where and why. The decoder sees only
/// the body, so the caller names the file and record (recovery and
/// defragment make it an [`Error::Corruption`](crate::Error::Corruption)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed batch operation at body offset {offset}: {fault}")]
pub struct MalformedBatch {
    /// Offset, within the body, of the operation that does not decode.
    pub offset: usize,
    /// What is wrong with it.
    pub fault: BatchFault,
}

/// Decodes a batch body (from a `WriteBatch` or a log record).
/// Yields one [`MalformedBatch`] and then ends if the body is malformed.
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    body: &'a [u8],
    pos: usize,
}

impl<'a> BatchIter<'a> {
    pub(crate) fn over(body: &'a [u8]) -> Self {
        BatchIter { body, pos: 0 }
    }

    fn len_at(&mut self) -> Result<usize, BatchFault> {
        let b = self
            .body
            .get(self.pos..self.pos + 4)
            .ok_or(BatchFault::Truncated)?;
        self.pos += 4;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn bytes(&mut self, n: usize) -> Result<(&'a [u8], usize), BatchFault> {
        let start = self.pos;
        let end = start.checked_add(n).ok_or(BatchFault::Truncated)?;
        let s = self.body.get(start..end).ok_or(BatchFault::Truncated)?;
        self.pos = end;
        Ok((s, start))
    }

    fn decode(&mut self) -> Result<BatchOp<'a>, BatchFault> {
        let tag = *self.body.get(self.pos).ok_or(BatchFault::Truncated)?;
        self.pos += 1;
        match tag {
            OP_PUT => {
                let kl = self.len_at()?;
                let vl = self.len_at()?;
                let (key, _) = self.bytes(kl)?;
                // The value's own crc32c sits just before it (see
                // `crate::t2::value_crc`), so a locator's `offset - 4` holds it.
                self.bytes(VALUE_CRC_LEN)?;
                let (value, value_offset) = self.bytes(vl)?;
                Ok(BatchOp::Put {
                    key,
                    value,
                    value_offset,
                })
            }
            OP_DELETE => {
                let kl = self.len_at()?;
                let (key, _) = self.bytes(kl)?;
                Ok(BatchOp::Delete { key })
            }
            OP_DELETE_RANGE => {
                let bl = self.len_at()?;
                let el = self.len_at()?;
                let (begin, _) = self.bytes(bl)?;
                let (end, _) = self.bytes(el)?;
                Ok(BatchOp::DeleteRange { begin, end })
            }
            other => Err(BatchFault::UnknownTag(other)),
        }
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchOp<'a>, MalformedBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.body.len() {
            return None;
        }
        let offset = self.pos;
        Some(self.decode().map_err(|fault| {
            // Past a malformed operation nothing can be framed.
            self.pos = self.body.len();
            MalformedBatch { offset, fault }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_decodes_with_value_offsets() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"value-one");
        b.delete(b"k2");
        b.delete_range(b"a", b"c");
        let ops: Vec<_> = b.iter().collect::<Result<_, _>>().unwrap_or_default();
        assert_eq!(ops.len(), 3);
        match ops[0] {
            BatchOp::Put {
                key,
                value,
                value_offset,
            } => {
                assert_eq!(key, b"k1");
                assert_eq!(value, b"value-one");
                assert_eq!(&b.rep[value_offset..value_offset + 9], b"value-one");
            }
            _ => panic!("expected a put"),
        }
        assert_eq!(ops[1], BatchOp::Delete { key: b"k2" });
        assert_eq!(
            ops[2],
            BatchOp::DeleteRange {
                begin: b"a",
                end: b"c"
            }
        );
        assert!(b.has_range);
    }

    #[test]
    fn malformed_body_reports_offset() {
        let body = [OP_PUT, 5, 0, 0, 0, 1, 0, 0, 0, b'x'];
        let got: Vec<_> = BatchIter::over(&body).collect();
        assert_eq!(
            got,
            vec![Err(MalformedBatch {
                offset: 0,
                fault: BatchFault::Truncated
            })]
        );
    }

    #[test]
    fn an_unknown_tag_after_good_operations_is_named_with_its_offset() {
        let mut b = WriteBatch::new();
        b.delete(b"k");
        let good = b.rep.len();
        b.rep.extend_from_slice(&[9, 0, 0, 0, 0]);
        let got: Vec<_> = BatchIter::over(&b.rep).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], Ok(BatchOp::Delete { key: b"k" }));
        let e = got[1].expect_err("malformed");
        assert_eq!(e.offset, good);
        assert_eq!(e.fault, BatchFault::UnknownTag(9));
        assert_eq!(
            e.to_string(),
            format!("malformed batch operation at body offset {good}: unknown operation tag 9")
        );
    }
}
