//! The `rocksdb` crate's iterators: [`DBRawIterator`], the cursor, and
//! [`DBIterator`], a std iterator driven by an [`IteratorMode`].

use crate::iter::{DbIterator, NeverValid};

use super::Error;

/// Which way a [`DBIterator`] moves.
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub enum Direction {
    /// Ascending key order.
    Forward,
    /// Descending key order.
    Reverse,
}

/// Where a [`DBIterator`] starts and which way it goes.
#[derive(Debug, Copy, Clone)]
pub enum IteratorMode<'a> {
    /// From the first key, forward.
    Start,
    /// From the last key, backward.
    End,
    /// From the first key `>=` the key (`Forward`) or the last key `<=` it
    /// (`Reverse`).
    From(&'a [u8], Direction),
}

/// A key and a value, as [`DBIterator`] yields them.
pub type KVBytes = (Box<[u8]>, Box<[u8]>);

/// A cursor over a database or family (RocksDB's `Iterator`), as the
/// crate's `DBRawIterator`: not valid until positioned; `key`/`value` are
/// `None` when not valid; an engine error ends iteration and is reported by
/// [`DBRawIterator::status`].
pub struct DBRawIterator<'a> {
    it: Box<dyn DbIterator + 'a>,
}

impl<'a> DBRawIterator<'a> {
    pub(crate) fn new(it: crate::Result<Box<dyn DbIterator + 'a>>) -> Self {
        // The crate's constructors cannot fail; an engine that cannot build
        // the iterator gives one that is never valid and reports why.
        let it = it.unwrap_or_else(|e| Box::new(NeverValid(Err(e))));
        DBRawIterator { it }
    }

    /// Whether the cursor is on an entry.
    pub fn valid(&self) -> bool {
        self.it.valid()
    }

    /// The first error met, if any.
    pub fn status(&self) -> Result<(), Error> {
        self.it.status().map_err(Error::from)
    }

    /// Moves to the first key (within the read options' bounds).
    pub fn seek_to_first(&mut self) {
        self.it.seek_to_first()
    }

    /// Moves to the last key (within the read options' bounds).
    pub fn seek_to_last(&mut self) {
        self.it.seek_to_last()
    }

    /// Moves to the first key `>= key`.
    pub fn seek<K: AsRef<[u8]>>(&mut self, key: K) {
        self.it.seek(key.as_ref())
    }

    /// Moves to the last key `<= key`.
    pub fn seek_for_prev<K: AsRef<[u8]>>(&mut self, key: K) {
        self.it.seek_for_prev(key.as_ref())
    }

    /// Moves to the next key (no effect when not valid, where the crate
    /// asserts).
    pub fn next(&mut self) {
        self.it.next()
    }

    /// Moves to the previous key (no effect when not valid).
    pub fn prev(&mut self) {
        self.it.prev()
    }

    /// The current key, `None` when not valid.
    pub fn key(&self) -> Option<&[u8]> {
        self.valid().then(|| self.it.key())
    }

    /// The current value, `None` when not valid.
    pub fn value(&self) -> Option<&[u8]> {
        self.valid().then(|| self.it.value())
    }

    /// The current key and value, `None` when not valid.
    pub fn item(&self) -> Option<(&[u8], &[u8])> {
        self.valid().then(|| (self.it.key(), self.it.value()))
    }
}

/// A std iterator over a database or family, as the crate's `DBIterator`:
/// yields `Ok((key, value))` in the mode's direction, then the cursor's
/// error if it stopped on one.
pub struct DBIterator<'a> {
    raw: DBRawIterator<'a>,
    direction: Direction,
    done: bool,
}

impl<'a> DBIterator<'a> {
    pub(crate) fn new(raw: DBRawIterator<'a>, mode: IteratorMode) -> Self {
        let mut it = DBIterator {
            raw,
            direction: Direction::Forward,
            done: false,
        };
        it.set_mode(mode);
        it
    }

    /// Repositions the iterator as `mode` says.
    pub fn set_mode(&mut self, mode: IteratorMode) {
        self.done = false;
        self.direction = match mode {
            IteratorMode::Start => {
                self.raw.seek_to_first();
                Direction::Forward
            }
            IteratorMode::End => {
                self.raw.seek_to_last();
                Direction::Reverse
            }
            IteratorMode::From(key, Direction::Forward) => {
                self.raw.seek(key);
                Direction::Forward
            }
            IteratorMode::From(key, Direction::Reverse) => {
                self.raw.seek_for_prev(key);
                Direction::Reverse
            }
        };
    }
}

impl Iterator for DBIterator<'_> {
    type Item = Result<KVBytes, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some((k, v)) = self.raw.item() {
            let item = (Box::from(k), Box::from(v));
            match self.direction {
                Direction::Forward => self.raw.next(),
                Direction::Reverse => self.raw.prev(),
            }
            return Some(Ok(item));
        }
        self.done = true;
        self.raw.status().err().map(Err)
    }
}

impl std::iter::FusedIterator for DBIterator<'_> {}

impl<'a> From<DBIterator<'a>> for DBRawIterator<'a> {
    fn from(it: DBIterator<'a>) -> Self {
        it.raw
    }
}
