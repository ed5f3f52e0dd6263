//! Collapsing a [`WriteBatch`] into one final update per key, for engines
//! whose own batches have no `delete_range` (fjall, Sparkey).
//!
//! The ops are applied in order to a map, so the last write to a key wins
//! and a `delete_range` removes the keys written earlier in the same batch
//! (in the same family); keys already in the database within a range come
//! from `keys_in`, which the adapter answers from a view taken before the
//! batch (under a lock that keeps other writers out until the batch
//! commits).

use std::collections::BTreeMap;

use crate::{BatchOp, Cf, Error, Result, WriteBatch};

/// The final state of every key the batch touches: `Some(value)` for a put,
/// `None` for a delete.
pub(crate) type Collapsed = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// [`Collapsed`] for a batch that spans families: keyed by family, then
/// key, so that each family's updates are adjacent and in key order.
pub(crate) type CollapsedFamilies = BTreeMap<(Cf, Vec<u8>), Option<Vec<u8>>>;

/// Collapses `batch`, which must address only the default family (the
/// engines calling this have no other). `keys_in(begin, end)` lists the
/// keys stored in `[begin, end)` before the batch; it is called only for
/// non-empty ranges.
pub(crate) fn collapse(
    batch: &WriteBatch,
    mut keys_in: impl FnMut(&[u8], &[u8]) -> Result<Vec<Vec<u8>>>,
) -> Result<Collapsed> {
    collapse_with(
        batch,
        |cf, k| {
            if cf.is_default() {
                Ok(k)
            } else {
                Err(Error::InvalidArgument(format!(
                    "column family handle {} in a batch for an engine with only the default family",
                    cf.id()
                )))
            }
        },
        |_, lo, hi| keys_in(lo, hi),
    )
}

/// Collapses `batch` family by family. `keys_in(cf, begin, end)` lists the
/// keys stored in `[begin, end)` of family `cf` before the batch; it is
/// called only for non-empty ranges.
pub(crate) fn collapse_families(
    batch: &WriteBatch,
    keys_in: impl FnMut(Cf, &[u8], &[u8]) -> Result<Vec<Vec<u8>>>,
) -> Result<CollapsedFamilies> {
    collapse_with(batch, |cf, k| Ok((cf, k)), keys_in)
}

/// The one collapsing loop; `key` makes the map key of a family's key.
fn collapse_with<K: Ord>(
    batch: &WriteBatch,
    mut key: impl FnMut(Cf, Vec<u8>) -> Result<K>,
    mut keys_in: impl FnMut(Cf, &[u8], &[u8]) -> Result<Vec<Vec<u8>>>,
) -> Result<BTreeMap<K, Option<Vec<u8>>>> {
    let mut out = BTreeMap::new();
    for op in batch {
        match op {
            BatchOp::Put { cf, key: k, value } => {
                out.insert(key(cf, k.to_vec())?, Some(value.to_vec()));
            }
            BatchOp::Delete { cf, key: k } => {
                out.insert(key(cf, k.to_vec())?, None);
            }
            BatchOp::DeleteRange { cf, begin, end } => {
                if begin >= end {
                    continue;
                }
                let (lo, hi) = (key(cf, begin.to_vec())?, key(cf, end.to_vec())?);
                for (_, v) in out.range_mut(lo..hi) {
                    *v = None;
                }
                for k in keys_in(cf, begin, end)? {
                    out.insert(key(cf, k)?, None);
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

    #[test]
    fn ranges_collapse_within_their_own_family() {
        let (a, b) = (Cf::DEFAULT, Cf::from_id(7));
        let mut batch = WriteBatch::new();
        batch.put_cf(a, b"k", b"1");
        batch.put_cf(b, b"k", b"2");
        batch.put_cf(b, b"m", b"3");
        batch.delete_range_cf(b, b"a", b"l");
        let mut asked = Vec::new();
        let got = collapse_families(&batch, |cf, lo, hi| {
            asked.push((cf, lo.to_vec(), hi.to_vec()));
            Ok(vec![b"b".to_vec()])
        })
        .expect("collapse");
        assert_eq!(asked, vec![(b, b"a".to_vec(), b"l".to_vec())]);
        let want: CollapsedFamilies = [
            ((a, b"k".to_vec()), Some(b"1".to_vec())),
            ((b, b"b".to_vec()), None),
            ((b, b"k".to_vec()), None),
            ((b, b"m".to_vec()), Some(b"3".to_vec())),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, want);
        // The default-only form refuses a batch that names another family.
        assert!(matches!(
            collapse(&batch, |_, _| Ok(Vec::new())),
            Err(Error::InvalidArgument(_))
        ));
    }
}
