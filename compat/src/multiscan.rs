//! MultiScan: many ranges in one call, mirroring RocksDB's `NewMultiScan`.
//!
//! The engine learns every range up front, so it may prefetch all the data
//! the scan will touch before returning the first key.

use crate::error::{Error, Result};
use crate::iter::DbIterator;
use crate::options::ReadOptions;

// RocksDB's `MultiScanArgs` and its ranges are defined once, in
// `vmemkv-scan-args`: this crate must build without the engine, and the
// engine cannot depend on this crate, so the type sits below both, and a
// scan's arguments cross the vmemkv adapter as they are.
pub use vmemkv_scan_args::{InvalidScan, MultiScanArgs, ScanRange, DEFAULT_IO_COALESCE_THRESHOLD};

impl From<InvalidScan> for Error {
    fn from(e: InvalidScan) -> Self {
        Error::InvalidArgument(e.0)
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
    fn a_refused_scan_is_an_invalid_argument() {
        let r: Result<()> = MultiScanArgs::new(vec![]).validate().map_err(Error::from);
        assert_eq!(
            r,
            Err(Error::InvalidArgument(
                "MultiScan: no scan ranges given".into()
            ))
        );
    }
}
