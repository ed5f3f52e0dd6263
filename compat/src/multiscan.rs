//! MultiScan: many ranges in one call, mirroring RocksDB's `NewMultiScan`.
//!
//! The engine learns every range up front, so it may prefetch all the data
//! the scan will touch before returning the first key.

use crate::error::{Error, Result};
use crate::iter::DbIterator;
use crate::options::ReadOptions;

/// RocksDB's default `io_coalesce_threshold`.
pub const DEFAULT_IO_COALESCE_THRESHOLD: u64 = 16 * 1024;

/// One range of a MultiScan: `[start, limit)`, open-ended when `limit` is
/// `None`; a range without `start` is rejected with `InvalidArgument`, as
/// in RocksDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRange {
    /// First key. `None` is rejected with `InvalidArgument`, as in RocksDB.
    pub start: Option<Vec<u8>>,
    /// First key past the range; `None` scans to the end.
    pub limit: Option<Vec<u8>>,
}

impl ScanRange {
    /// `[start, limit)`.
    pub fn new(start: &[u8], limit: &[u8]) -> Self {
        ScanRange {
            start: Some(start.to_vec()),
            limit: Some(limit.to_vec()),
        }
    }

    /// `[start, ∞)`.
    pub fn unbounded(start: &[u8]) -> Self {
        ScanRange {
            start: Some(start.to_vec()),
            limit: None,
        }
    }
}

/// Arguments of a MultiScan (RocksDB's `MultiScanArgs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiScanArgs {
    /// The ranges, in increasing start order.
    pub ranges: Vec<ScanRange>,
    /// Issue the reads for every range asynchronously in the prepare phase.
    pub use_async_io: bool,
    /// Reads closer than this many bytes are merged into one.
    pub io_coalesce_threshold: u64,
    /// Upper bound on prefetched bytes; 0 means unlimited.
    pub max_prefetch_size: u64,
}

impl Default for MultiScanArgs {
    fn default() -> Self {
        MultiScanArgs {
            ranges: Vec::new(),
            use_async_io: false,
            io_coalesce_threshold: DEFAULT_IO_COALESCE_THRESHOLD,
            max_prefetch_size: 0,
        }
    }
}

impl MultiScanArgs {
    /// Arguments scanning `ranges` with default settings.
    pub fn new(ranges: Vec<ScanRange>) -> Self {
        MultiScanArgs {
            ranges,
            ..Self::default()
        }
    }

    /// Applies RocksDB's validation: a non-empty list, every range with a
    /// start, `start < limit`, and starts in increasing order.
    pub fn validate(&self) -> Result<()> {
        if self.ranges.is_empty() {
            return Err(Error::InvalidArgument(
                "MultiScan: no scan ranges given".into(),
            ));
        }
        let mut prev: Option<&[u8]> = None;
        for (i, r) in self.ranges.iter().enumerate() {
            let Some(start) = r.start.as_deref() else {
                return Err(Error::InvalidArgument(format!(
                    "MultiScan: range {i} has no start key"
                )));
            };
            if let Some(limit) = r.limit.as_deref() {
                if start >= limit {
                    return Err(Error::InvalidArgument(format!(
                        "MultiScan: range {i} has start >= limit"
                    )));
                }
            }
            if let Some(p) = prev {
                if start < p {
                    return Err(Error::InvalidArgument(format!(
                        "MultiScan: range {i} starts before range {}; ranges must be in increasing order",
                        i - 1
                    )));
                }
            }
            prev = Some(start);
        }
        Ok(())
    }
}

/// The result of a MultiScan, consumed range by range, key by key.
///
/// ```
/// # use vmemkv_compat::*;
/// # fn demo(db: &dyn Db) -> Result<()> {
/// let args = MultiScanArgs::new(vec![ScanRange::new(b"a", b"c"), ScanRange::unbounded(b"x")]);
/// let mut ms = db.multi_scan(&ReadOptions::default(), &args)?;
/// while ms.next_range()? {
///     while ms.next_entry()? {
///         println!("range {}: {:?}", ms.range_index(), ms.key());
///     }
/// }
/// # Ok(()) }
/// ```
pub trait MultiScan: Send {
    /// Moves to the next range; `Ok(false)` once every range is done.
    /// Entries left unread in the current range are skipped.
    fn next_range(&mut self) -> Result<bool>;
    /// Moves to the next entry of the current range; `Ok(false)` at its end.
    fn next_entry(&mut self) -> Result<bool>;
    /// Index of the current range in `MultiScanArgs::ranges`.
    fn range_index(&self) -> usize;
    /// Key of the current entry.
    fn key(&self) -> &[u8];
    /// Value of the current entry.
    fn value(&self) -> &[u8];
}

/// A scan's full results: one `Vec` of `(key, value)` per range.
pub type ScanResults = Vec<Vec<(Vec<u8>, Vec<u8>)>>;

/// Drains a [`MultiScan`] into memory (tests and examples).
pub fn collect_multi_scan(ms: &mut dyn MultiScan) -> Result<ScanResults> {
    let mut out = Vec::new();
    while ms.next_range()? {
        let mut range = Vec::new();
        while ms.next_entry()? {
            range.push((ms.key().to_vec(), ms.value().to_vec()));
        }
        out.push(range);
    }
    Ok(out)
}

/// A MultiScan built from one bounded iterator per range: the reference
/// semantics, and the implementation for engines without a native one.
pub struct IterMultiScan<'a, F>
where
    F: FnMut(&ReadOptions) -> Result<Box<dyn DbIterator + 'a>> + Send,
{
    make_iter: F,
    base: ReadOptions,
    ranges: Vec<ScanRange>,
    cur: Option<Box<dyn DbIterator + 'a>>,
    idx: usize,
    started: bool,
    first_entry: bool,
}

impl<'a, F> IterMultiScan<'a, F>
where
    F: FnMut(&ReadOptions) -> Result<Box<dyn DbIterator + 'a>> + Send,
{
    /// Validates `args` and prepares a scan that opens an iterator per range
    /// with `make_iter`. The caller's read-option bounds are intersected
    /// with each range.
    pub fn new(base: &ReadOptions, args: &MultiScanArgs, make_iter: F) -> Result<Self> {
        args.validate()?;
        Ok(IterMultiScan {
            make_iter,
            base: base.clone(),
            ranges: args.ranges.clone(),
            cur: None,
            idx: 0,
            started: false,
            first_entry: true,
        })
    }
}

fn max_lower(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y).to_vec()),
        (x, y) => x.or(y).map(<[u8]>::to_vec),
    }
}

fn min_upper(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y).to_vec()),
        (x, y) => x.or(y).map(<[u8]>::to_vec),
    }
}

impl<'a, F> MultiScan for IterMultiScan<'a, F>
where
    F: FnMut(&ReadOptions) -> Result<Box<dyn DbIterator + 'a>> + Send,
{
    fn next_range(&mut self) -> Result<bool> {
        if self.started {
            self.idx += 1;
        }
        self.started = true;
        self.cur = None;
        let Some(r) = self.ranges.get(self.idx) else {
            return Ok(false);
        };
        let mut ro = self.base.clone();
        ro.iterate_lower_bound =
            max_lower(self.base.iterate_lower_bound.as_deref(), r.start.as_deref());
        ro.iterate_upper_bound =
            min_upper(self.base.iterate_upper_bound.as_deref(), r.limit.as_deref());
        let it = (self.make_iter)(&ro)?;
        self.cur = Some(it);
        self.first_entry = true;
        Ok(true)
    }

    fn next_entry(&mut self) -> Result<bool> {
        let Some(it) = self.cur.as_mut() else {
            return Ok(false);
        };
        if self.first_entry {
            self.first_entry = false;
            it.seek_to_first();
        } else if it.valid() {
            it.next();
        }
        if it.valid() {
            Ok(true)
        } else {
            it.status()?;
            Ok(false)
        }
    }

    fn range_index(&self) -> usize {
        self.idx
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |it| it.key())
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |it| it.value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_matches_rocksdb() {
        assert!(MultiScanArgs::new(vec![]).validate().is_err());
        let no_start = ScanRange {
            start: None,
            limit: None,
        };
        assert!(MultiScanArgs::new(vec![no_start]).validate().is_err());
        assert!(MultiScanArgs::new(vec![ScanRange::new(b"b", b"a")])
            .validate()
            .is_err());
        assert!(MultiScanArgs::new(vec![ScanRange::new(b"b", b"b")])
            .validate()
            .is_err());
        let out_of_order = vec![ScanRange::new(b"c", b"d"), ScanRange::new(b"a", b"b")];
        assert!(MultiScanArgs::new(out_of_order).validate().is_err());
        let ok = vec![ScanRange::new(b"a", b"b"), ScanRange::unbounded(b"c")];
        assert!(MultiScanArgs::new(ok).validate().is_ok());
    }
}
