//! The cursor iterator, with RocksDB's semantics.

use crate::error::Result;

/// A cursor over a consistent-enough view of the database (see each engine's
/// docs for what it sees of concurrent writes).
///
/// Semantics follow RocksDB's `Iterator`:
/// * a new iterator is not valid until positioned;
/// * `seek(k)` lands on the first key `>= k`, `seek_for_prev(k)` on the last
///   key `<= k`;
/// * `next`/`prev` may change direction at any point;
/// * `ReadOptions::iterate_lower_bound` / `iterate_upper_bound` are honoured
///   by every move, in both directions;
/// * `key()`/`value()` on an invalid iterator return an empty slice (RocksDB
///   asserts; we refuse to panic);
/// * an engine error makes the iterator invalid and is reported by `status`.
pub trait DbIterator: Send {
    /// Whether the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Moves to the first key (within bounds).
    fn seek_to_first(&mut self);
    /// Moves to the last key (within bounds).
    fn seek_to_last(&mut self);
    /// Moves to the first key `>= key`.
    fn seek(&mut self, key: &[u8]);
    /// Moves to the last key `<= key`.
    fn seek_for_prev(&mut self, key: &[u8]);
    /// Moves to the next key. No effect when invalid.
    fn next(&mut self);
    /// Moves to the previous key. No effect when invalid.
    fn prev(&mut self);
    /// The current key, or `&[]` when invalid.
    fn key(&self) -> &[u8];
    /// The current value, or `&[]` when invalid.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;
}

/// Adapts a [`DbIterator`] into a forward `std::iter::Iterator` starting at
/// the cursor's current position (or the first key if unpositioned when built
/// with [`Entries::from_first`]).
///
/// ```
/// # use vmemkv_compat::*;
/// # fn demo(db: &dyn Db) -> Result<()> {
/// let it = db.iter(&ReadOptions::default())?;
/// for kv in Entries::from_first(it) {
///     let (key, value) = kv?;
///     println!("{key:?} = {value:?}");
/// }
/// # Ok(()) }
/// ```
pub struct Entries<'a> {
    it: Box<dyn DbIterator + 'a>,
    done: bool,
}

impl<'a> Entries<'a> {
    /// Yields every entry from the first key (within the iterator's bounds).
    pub fn from_first(mut it: Box<dyn DbIterator + 'a>) -> Self {
        it.seek_to_first();
        Entries { it, done: false }
    }

    /// Yields entries from the cursor's current position.
    pub fn from_current(it: Box<dyn DbIterator + 'a>) -> Self {
        Entries { it, done: false }
    }
}

impl Iterator for Entries<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if !self.it.valid() {
            self.done = true;
            return match self.it.status() {
                Ok(()) => None,
                Err(e) => Some(Err(e)),
            };
        }
        let kv = (self.it.key().to_vec(), self.it.value().to_vec());
        self.it.next();
        Some(Ok(kv))
    }
}

/// Checks that `key` lies within the read options' bounds.
pub fn within_bounds(lower: Option<&[u8]>, upper: Option<&[u8]>, key: &[u8]) -> bool {
    lower.is_none_or(|l| key >= l) && upper.is_none_or(|u| key < u)
}

/// An iterator that is never valid and whose `status` is the outcome it
/// holds: `Ok` for an empty one (the null engine's), an error for engines
/// that fail to build an iterator after the call has returned a box.
pub struct NeverValid(pub Result<()>);

impl DbIterator for NeverValid {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _: &[u8]) {}
    fn seek_for_prev(&mut self, _: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        self.0.clone()
    }
}
