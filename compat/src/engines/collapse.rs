//! Collapsing a [`WriteBatch`] into one final update per key, for engines
//! whose own batches have no `delete_range` (fjall, Sparkey).
//!
//! The ops are applied in order to a map, so the last write to a key wins
//! and a `delete_range` removes the keys written earlier in the same batch;
//! keys already in the database within a range come from `keys_in`, which
//! the adapter answers from a view taken before the batch (under a lock
//! that keeps other writers out until the batch commits).

use std::collections::BTreeMap;

use crate::{BatchOp, Result, WriteBatch};

/// The final state of every key the batch touches: `Some(value)` for a put,
/// `None` for a delete.
pub(crate) type Collapsed = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Collapses `batch`. `keys_in(begin, end)` lists the keys stored in
/// `[begin, end)` before the batch; it is called only for non-empty ranges.
pub(crate) fn collapse(
    batch: &WriteBatch,
    mut keys_in: impl FnMut(&[u8], &[u8]) -> Result<Vec<Vec<u8>>>,
) -> Result<Collapsed> {
    let mut out = Collapsed::new();
    for op in batch {
        match op {
            BatchOp::Put { key, value, .. } => {
                out.insert(key.to_vec(), Some(value.to_vec()));
            }
            BatchOp::Delete { key, .. } => {
                out.insert(key.to_vec(), None);
            }
            BatchOp::DeleteRange { begin, end, .. } => {
                if begin >= end {
                    continue;
                }
                for (_, v) in out.range_mut::<[u8], _>((
                    std::ops::Bound::Included(begin),
                    std::ops::Bound::Excluded(end),
                )) {
                    *v = None;
                }
                for k in keys_in(begin, end)? {
                    out.insert(k, None);
                }
            }
        }
    }
    Ok(out)
}

/// Whether the batch holds a `delete_range`.
pub(crate) fn has_delete_range(batch: &WriteBatch) -> bool {
    batch
        .iter()
        .any(|op| matches!(op, BatchOp::DeleteRange { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_write_wins_and_ranges_cover_earlier_ops_and_stored_keys() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.put(b"c", b"2");
        b.put(b"a", b"3");
        b.delete_range(b"b", b"d");
        b.delete_range(b"z", b"a");
        b.put(b"bb", b"4");
        b.delete(b"e");
        let mut asked = Vec::new();
        let got = collapse(&b, |lo, hi| {
            asked.push((lo.to_vec(), hi.to_vec()));
            Ok(vec![b"b".to_vec(), b"bb".to_vec()])
        })
        .expect("collapse");
        assert_eq!(asked, vec![(b"b".to_vec(), b"d".to_vec())]);
        let want: Collapsed = [
            (b"a".to_vec(), Some(b"3".to_vec())),
            (b"b".to_vec(), None),
            (b"bb".to_vec(), Some(b"4".to_vec())),
            (b"c".to_vec(), None),
            (b"e".to_vec(), None),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, want);
        assert!(has_delete_range(&b));
    }
}
