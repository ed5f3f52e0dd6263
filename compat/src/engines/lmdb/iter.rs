//! The LMDB cursor iterator: one read transaction per iterator, with heed's
//! range cursors re-created on seeks and direction changes.
//!
//! heed's cursor types borrow the transaction, and the iterator must own
//! both; this module holds the one self-referential `unsafe` of the adapter.
//!
//! The default family's database (LMDB's unnamed one) also holds the
//! records of the families' named databases, in the key range the adapter
//! reserves for them ([`super::FAMILY_PREFIX`]); an iterator over it steps
//! over that range. An iterator over another family holds the family and
//! checks, under its lock, that it was not dropped before each cursor move
//! (a dropped family's LMDB handle is closed and may be reused).
//!
//! A [`LmdbSnapshot`] is a read transaction shared by every read that names
//! it. LMDB lets a read-only transaction of an `MDB_NOTLS` environment span
//! threads "if the user synchronizes its use", so every use (a point read,
//! and each cursor move of an iterator on it) holds the snapshot's mutex.

use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use heed::types::Bytes;
use heed::{Database, Env, RoRange, RoRevRange, RoTxn, WithoutTls};

use super::{map_err_in, Family, FAMILY_PREFIX, FAMILY_PREFIX_END, MAX_KEY_SIZE};
use crate::{DbIterator, Error, ReadOptions, Result};

type Entry = (&'static [u8], &'static [u8]);

enum Cursor {
    Fwd(RoRange<'static, Bytes, Bytes>),
    Rev(RoRevRange<'static, Bytes, Bytes>),
}

/// A read transaction held as a snapshot ([`crate::Db::snapshot`]).
pub(super) struct LmdbSnapshot {
    txn: RoTxn<'static, WithoutTls>,
    lock: Mutex<()>,
    /// The adapter's family epoch when the transaction began: a family
    /// created later (epoch above this) is empty in this snapshot.
    pub(super) epoch: u64,
}

// SAFETY: the transaction belongs to an MDB_NOTLS environment, so it may be
// used from any thread; every use goes through `read`, which holds `lock`,
// so no two threads use it at once (LMDB's one requirement).
unsafe impl Sync for LmdbSnapshot {}

impl LmdbSnapshot {
    /// Begins the snapshot; `epoch` must be read before the transaction
    /// begins (see [`super::Family::created`]).
    pub(super) fn begin(env: &Env<WithoutTls>, epoch: u64) -> heed::Result<LmdbSnapshot> {
        Ok(LmdbSnapshot {
            txn: env.clone().static_read_txn()?,
            lock: Mutex::new(()),
            epoch,
        })
    }

    /// Runs `f` on the transaction, alone.
    pub(super) fn read<T>(&self, f: impl FnOnce(&RoTxn<'static, WithoutTls>) -> T) -> T {
        let _g = lock(&self.lock);
        f(&self.txn)
    }
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    // The mutex guards no data, so a panic while holding it left nothing
    // half-done.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The transaction an iterator reads: its own, or a shared snapshot.
enum Txn {
    Own(Box<RoTxn<'static, WithoutTls>>),
    Shared(Arc<LmdbSnapshot>),
}

/// A RocksDB-semantics cursor over one LMDB read snapshot.
pub(super) struct LmdbIter<'a> {
    // Field order matters: `cursor` and `cur` borrow from `*txn` and are
    // declared (hence dropped) before it.
    cursor: Option<Cursor>,
    cur: Option<Entry>,
    txn: Txn,
    db: Database<'static, Bytes, Bytes>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    err: Option<Error>,
    /// Names the data file in errors.
    env: &'a Env<WithoutTls>,
    /// Whether this is the default family's database, whose reserved range
    /// of family records is stepped over.
    hole: bool,
    /// The family read, for another family than the default.
    family: Option<Arc<Family>>,
}

// SAFETY: the environment is opened with MDB_NOTLS (heed's `WithoutTls`),
// so a read transaction and its cursors are not tied to the creating
// thread and may move between threads; LMDB only forbids concurrent use,
// which `&mut self` on every move rules out. The borrowed entry slices point
// into the transaction's snapshot, which lives as long as the iterator.
unsafe impl Send for LmdbIter<'_> {}

impl<'a> LmdbIter<'a> {
    /// A cursor over `family`, or over the default family if `None`.
    pub(super) fn new(
        env: &'a Env<WithoutTls>,
        db: Database<'static, Bytes, Bytes>,
        family: Option<Arc<Family>>,
        ro: &ReadOptions,
        snapshot: Option<Arc<LmdbSnapshot>>,
    ) -> Result<Self> {
        let txn = match snapshot {
            Some(s) => Txn::Shared(s),
            None => {
                Txn::Own(Box::new(env.clone().static_read_txn().map_err(|e| {
                    map_err_in(env.path(), "iterator read transaction", e)
                })?))
            }
        };
        Ok(LmdbIter {
            cursor: None,
            cur: None,
            txn,
            db,
            lower: ro.iterate_lower_bound.clone(),
            upper: ro.iterate_upper_bound.clone(),
            err: None,
            env,
            hole: family.is_none(),
            family,
        })
    }

    fn txn(&self) -> &'static RoTxn<'static, WithoutTls> {
        let txn: &RoTxn<'static, WithoutTls> = match &self.txn {
            Txn::Own(b) => b,
            Txn::Shared(s) => &s.txn,
        };
        // SAFETY: the transaction is boxed or behind an `Arc` this iterator
        // holds, so its address is stable for the life of `self`, and it is
        // never replaced. Every borrow handed out with the 'static lifetime
        // is stored in `cursor`/`cur`, which are dropped or overwritten
        // before `txn` (field order, and `Drop` below), and never escapes
        // `self` except through `key()`/`value()`, whose results borrow
        // `&self`.
        unsafe { &*(txn as *const RoTxn<'static, WithoutTls>) }
    }

    /// The shared snapshot's mutex, held for one cursor move.
    fn exclusive(&self) -> Option<Arc<LmdbSnapshot>> {
        match &self.txn {
            Txn::Own(_) => None,
            Txn::Shared(s) => Some(Arc::clone(s)),
        }
    }

    fn lower_bound(&self) -> Bound<&[u8]> {
        self.lower
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Included)
    }

    fn upper_bound(&self) -> Bound<&[u8]> {
        self.upper
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded)
    }

    fn fail(&mut self, e: heed::Error) {
        self.cursor = None;
        self.cur = None;
        self.err = Some(map_err_in(self.env.path(), "iterator", e));
    }

    /// Runs `f` holding the shared snapshot's mutex and, for a family, its
    /// lock, having checked that it was not dropped (then the cursor ends
    /// with an error naming it).
    fn exclusively(&mut self, f: impl FnOnce(&mut Self)) {
        // The family's lock before the snapshot's, in the order point
        // reads take them.
        let family = self.family.clone();
        let live = family.as_ref().map(|f| f.live());
        let shared = self.exclusive();
        let _g = shared.as_ref().map(|s| lock(&s.lock));
        if live.as_ref().is_some_and(|l| !**l) {
            self.cursor = None;
            self.cur = None;
            if let Some(f) = &family {
                self.err = Some(f.dropped());
            }
            return;
        }
        f(self)
    }

    fn forward(&mut self, start: Bound<Vec<u8>>) {
        self.exclusively(|it| it.open_forward(start));
    }

    fn open_forward(&mut self, start: Bound<Vec<u8>>) {
        self.cursor = None;
        self.cur = None;
        self.err = None;
        let start = lmdb_lower(bref(&start));
        let Some(end) = lmdb_upper(self.upper_bound()) else {
            return;
        };
        if empty(bref(&start), bref(&end)) {
            return;
        }
        let txn = self.txn();
        match self.db.range(txn, &(bref(&start), bref(&end))) {
            Ok(r) => {
                self.cursor = Some(Cursor::Fwd(r));
                self.advance();
            }
            Err(e) => self.fail(e),
        }
    }

    fn backward(&mut self, end: Bound<Vec<u8>>) {
        self.exclusively(|it| it.open_backward(end));
    }

    fn open_backward(&mut self, end: Bound<Vec<u8>>) {
        self.cursor = None;
        self.cur = None;
        self.err = None;
        let start = lmdb_lower(self.lower_bound());
        let Some(end) = lmdb_upper(bref(&end)) else {
            return;
        };
        if empty(bref(&start), bref(&end)) {
            return;
        }
        let txn = self.txn();
        match self.db.rev_range(txn, &(bref(&start), bref(&end))) {
            Ok(r) => {
                self.cursor = Some(Cursor::Rev(r));
                self.advance();
            }
            Err(e) => self.fail(e),
        }
    }

    /// Advances the current cursor in its direction.
    fn step(&mut self) {
        self.exclusively(|it| it.advance());
    }

    fn advance(&mut self) {
        let next = match self.cursor.as_mut() {
            Some(Cursor::Fwd(r)) => r.next(),
            Some(Cursor::Rev(r)) => r.next(),
            None => None,
        };
        match next {
            // The family records: jump past them, the way the cursor runs.
            Some(Ok((k, _))) if self.hole && k.starts_with(FAMILY_PREFIX.as_bytes()) => {
                match self.cursor {
                    Some(Cursor::Fwd(_)) => {
                        self.open_forward(Bound::Included(FAMILY_PREFIX_END.to_vec()))
                    }
                    _ => self.open_backward(Bound::Excluded(FAMILY_PREFIX.as_bytes().to_vec())),
                }
            }
            Some(Ok(kv)) => self.cur = Some(kv),
            Some(Err(e)) => self.fail(e),
            None => {
                self.cur = None;
                self.cursor = None;
            }
        }
    }
}

pub(super) fn bref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(s) => Bound::Included(s.as_slice()),
        Bound::Excluded(s) => Bound::Excluded(s.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether the bounds `(start, end)` can hold no key, so that heed is never
/// asked for an inverted range.
pub(super) fn empty(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    }
}

// LMDB rejects empty keys and keys over MAX_KEY_SIZE even as cursor targets
// (MDB_BAD_VALSIZE), so bounds are rewritten into equivalent ones it
// accepts. With p = k[..511] for a longer k, every stored key (at most 511
// bytes) is >= k iff it is > p, and < k iff it is <= p.

/// An equivalent lower bound LMDB accepts.
pub(super) fn lmdb_lower(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included([]) | Bound::Excluded([]) | Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) | Bound::Excluded(k) if k.len() > MAX_KEY_SIZE => {
            Bound::Excluded(k[..MAX_KEY_SIZE].to_vec())
        }
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
    }
}

/// An equivalent upper bound LMDB accepts; `None` if no key satisfies it.
pub(super) fn lmdb_upper(b: Bound<&[u8]>) -> Option<Bound<Vec<u8>>> {
    Some(match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included([]) | Bound::Excluded([]) => return None,
        Bound::Included(k) | Bound::Excluded(k) if k.len() > MAX_KEY_SIZE => {
            Bound::Included(k[..MAX_KEY_SIZE].to_vec())
        }
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
    })
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(s) => Bound::Included(s.to_vec()),
        Bound::Excluded(s) => Bound::Excluded(s.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Drop for LmdbIter<'_> {
    fn drop(&mut self) {
        // Closing a cursor is a use of the transaction.
        let shared = self.exclusive();
        let _g = shared.as_ref().map(|s| lock(&s.lock));
        self.cur = None;
        self.cursor = None;
    }
}

impl DbIterator for LmdbIter<'_> {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) {
        let start = owned(self.lower_bound());
        self.forward(start);
    }

    fn seek_to_last(&mut self) {
        let end = owned(self.upper_bound());
        self.backward(end);
    }

    fn seek(&mut self, key: &[u8]) {
        // As RocksDB: a target below the lower bound seeks to the bound.
        let start = match self.lower.as_deref() {
            Some(l) if l > key => l.to_vec(),
            _ => key.to_vec(),
        };
        self.forward(Bound::Included(start));
    }

    fn seek_for_prev(&mut self, key: &[u8]) {
        // As RocksDB: a target at or above the upper bound lands before it.
        let end = match self.upper.as_deref() {
            Some(u) if key >= u => Bound::Excluded(u.to_vec()),
            _ => Bound::Included(key.to_vec()),
        };
        self.backward(end);
    }

    fn next(&mut self) {
        let Some((k, _)) = self.cur else {
            return;
        };
        match self.cursor {
            Some(Cursor::Fwd(_)) => self.step(),
            _ => self.forward(Bound::Excluded(k.to_vec())),
        }
    }

    fn prev(&mut self) {
        let Some((k, _)) = self.cur else {
            return;
        };
        match self.cursor {
            Some(Cursor::Rev(_)) => self.step(),
            _ => self.backward(Bound::Excluded(k.to_vec())),
        }
    }

    fn key(&self) -> &[u8] {
        self.cur.map_or(&[], |(k, _)| k)
    }

    fn value(&self) -> &[u8] {
        self.cur.map_or(&[], |(_, v)| v)
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
