//! Cursor iterators over live entries, with bounds.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::index::{Cursor, Entry, Payload};
use crate::state::Inner;
use crate::t1::ReadReg;
use crate::t2::segment::Segment;

/// Iterator bounds: keys in `[lower, upper)`; `None` leaves a side open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounds {
    /// Inclusive lower bound.
    pub lower: Option<Vec<u8>>,
    /// Exclusive upper bound.
    pub upper: Option<Vec<u8>>,
}

impl Bounds {
    /// No bounds.
    pub fn all() -> Self {
        Bounds::default()
    }

    /// `[lower, upper)`.
    pub fn new(lower: Option<&[u8]>, upper: Option<&[u8]>) -> Self {
        Bounds {
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
        }
    }

    fn contains(&self, k: &[u8]) -> bool {
        self.lower.as_deref().is_none_or(|l| k >= l) && self.upper.as_deref().is_none_or(|u| k < u)
    }
}

enum Value {
    None,
    Inline {
        len: u8,
        bytes: [u8; 8],
    },
    /// In [`Iter::seg`].
    Stored {
        off: usize,
        len: usize,
    },
}

/// A cursor with RocksDB's semantics: unpositioned until a seek, `next`
/// and `prev` may change direction, bounds honoured in both directions.
/// Values of stored entries are borrowed straight from the mapping
/// (zero-copy); the iterator keeps the segment alive while on it.
///
/// It reads the database as of its creation (or of the snapshot it was
/// given), as a RocksDB iterator does: later writes are not seen, and a batch
/// is seen whole or not at all.
pub struct Iter<'a> {
    inner: &'a Inner,
    /// The read seq: registered by this iterator, or by the caller's
    /// snapshot.
    reg: ReadReg<'a>,
    cur: Cursor<'a>,
    bounds: Bounds,
    valid: bool,
    value: Value,
    /// The segment of the last stored value loaded, kept while the next
    /// values lie in it too: a scan then does no segment-table load and
    /// no reference-count update per entry (seekrandom with 100 nexts of
    /// 100-byte values spent 10% of its time there). A segment retired
    /// meanwhile stays mapped and unchanged while held, and T1 pointed
    /// the entry there when the cursor read it, so it still holds that
    /// version.
    seg: Option<Arc<Segment>>,
    err: Option<Error>,
    verify: bool,
    /// Forward steps since the last seek; from the second on the iterator
    /// is taken to be scanning and reads ahead.
    scan_steps: u32,
    /// Readahead has been issued for entries up to `ahead_key`.
    ahead_set: bool,
    /// The last key the latest readahead window covered; its buffer is
    /// reused from window to window and seek to seek.
    ahead_key: Vec<u8>,
    /// The latest window's stored values (segment index, offset, length),
    /// kept for its buffer.
    ahead_values: Vec<(u32, u32, u32)>,
    /// Entries the next readahead covers: 16, doubling to 256, as
    /// RocksDB's iterator readahead grows.
    ahead_window: usize,
    /// A readahead window of small values since the last seek found
    /// nothing to read (all values inline or resident): the scan is warm,
    /// and walking T1 a second time per window would only double its cost.
    /// Reset by a seek. Windows of values of a page or more keep being
    /// checked: the walk costs little next to their bytes, and a scan that
    /// starts in cached pages and runs into cold ones would otherwise fault
    /// each value page by page (64 KiB values in a 384 MiB cgroup, 4
    /// threads: 25% slower).
    ahead_off: bool,
}

/// How many entries ahead a scan hints stored values into the cache.
const VALUE_AHEAD: usize = 4;
const AHEAD_MIN: usize = 16;
const AHEAD_MAX: usize = 256;
/// Values closer than this are read ahead as one run (RocksDB's default
/// `io_coalesce_threshold`).
const AHEAD_COALESCE: u64 = 16 * 1024;
/// Windows whose values average at least this many bytes are checked
/// again even after one was found warm (see `ahead_off`).
const AHEAD_LARGE_VALUE: u64 = 4096;

impl<'a> Iter<'a> {
    pub(crate) fn new(inner: &'a Inner, bounds: Bounds, verify: bool, at: Option<u64>) -> Self {
        let reg = ReadReg::new(inner.t1.versions(), at);
        Iter {
            verify,
            inner,
            cur: inner.t1.cursor_at(reg.at),
            reg,
            bounds,
            valid: false,
            value: Value::None,
            seg: None,
            err: None,
            scan_steps: 0,
            ahead_set: false,
            ahead_key: Vec::new(),
            ahead_values: Vec::new(),
            ahead_window: AHEAD_MIN,
            ahead_off: false,
        }
    }

    fn reset_scan(&mut self) {
        self.scan_steps = 0;
        self.ahead_set = false;
        self.ahead_window = AHEAD_MIN;
        self.ahead_off = false;
    }

    /// Advises the value pages of the next `ahead_window` entries within
    /// bounds (see `crate::t2::readahead`). A second cursor walks T1, which
    /// is in RAM; only the values' pages may be cold.
    #[inline(never)]
    fn read_ahead(&mut self) {
        let mut c = self.inner.t1.cursor_at(self.reg.at);
        c.seek(self.cur.key());
        let mut segs: Vec<Arc<Segment>> = Vec::new();
        let mut values = std::mem::take(&mut self.ahead_values);
        values.clear();
        let mut last = std::mem::take(&mut self.ahead_key);
        last.clear();
        last.extend_from_slice(self.cur.key());
        let mut bytes = 0u64;
        for _ in 0..self.ahead_window {
            if !c.valid() || !self.bounds.contains(c.key()) {
                break;
            }
            if let Payload::Stored(l) = c.entry().payload {
                let idx = match segs.iter().position(|s| s.id == l.segment) {
                    Some(i) => Some(i),
                    None => self.inner.log.segment(l.segment).map(|s| {
                        segs.push(s);
                        segs.len() - 1
                    }),
                };
                if let Some(i) = idx {
                    values.push((i as u32, l.offset, l.len));
                    bytes += u64::from(l.len);
                }
            }
            last.clear();
            last.extend_from_slice(c.key());
            c.next();
        }
        // A window of inline values only has nothing to read at all.
        let small = bytes < AHEAD_LARGE_VALUE * values.len().max(1) as u64;
        let runs = crate::t2::readahead::runs(values.iter().copied(), AHEAD_COALESCE);
        self.ahead_values = values;
        let advised = crate::t2::readahead::advise(&runs, |i| segs.get(i as usize).map(|s| &**s));
        self.ahead_off = !advised && small;
        // Past the end of the bounds there is nothing more to read ahead.
        self.ahead_key = last;
        self.ahead_set = true;
        self.ahead_window = (self.ahead_window * 2).min(AHEAD_MAX);
    }

    /// Whether the cursor is on an entry.
    #[inline]
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Moves to the first key within bounds.
    pub fn seek_to_first(&mut self) {
        self.reset_scan();
        match self.bounds.lower.as_deref() {
            Some(l) => self.cur.seek(l),
            None => self.cur.seek_to_first(),
        }
        self.settle();
    }

    /// Moves to the last key within bounds.
    pub fn seek_to_last(&mut self) {
        self.reset_scan();
        match self.bounds.upper.as_deref() {
            Some(u) => last_below(&mut self.cur, u),
            None => self.cur.seek_to_last(),
        }
        self.settle_back();
    }

    /// Moves to the first key `>= key` (and within bounds).
    pub fn seek(&mut self, key: &[u8]) {
        self.reset_scan();
        match self.bounds.lower.as_deref() {
            Some(l) if key < l => self.cur.seek(l),
            _ => self.cur.seek(key),
        }
        self.settle();
    }

    /// Moves to the last key `<= key` (and within bounds).
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        self.reset_scan();
        match self.bounds.upper.as_deref() {
            Some(u) if key >= u => last_below(&mut self.cur, u),
            _ => self.cur.seek_for_prev(key),
        }
        self.settle_back();
    }

    /// Moves to the next key. No effect when invalid.
    #[inline]
    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        if let Some(e) = self.cur.next_in_sorted_run() {
            // A live entry of the sorted region alone: within bounds, its
            // value is the answer with no settling. An inline one needs no
            // readahead either (it has no page to read).
            if self.toward_bound_ok(true) {
                if let Payload::Inline { len, bytes } = e.payload {
                    self.value = Value::Inline { len, bytes };
                    self.scan_steps = self.scan_steps.saturating_add(1);
                    return;
                }
                match self.load_payload(e.payload) {
                    Some(true) => {
                        self.prefetch_value_ahead();
                        self.scan_steps = self.scan_steps.saturating_add(1);
                        self.maybe_read_ahead();
                        return;
                    }
                    // Gone meanwhile: the general path steps past it.
                    Some(false) => {}
                    None => {
                        self.valid = false;
                        self.value = Value::None;
                        return;
                    }
                }
            }
        } else {
            self.cur.next();
        }
        self.stepped();
    }

    /// The rest of [`Iter::next`] after the cursor moved: out of line, so
    /// that the step above stays a leaf.
    #[inline(never)]
    fn stepped(&mut self) {
        self.settle();
        self.scan_steps = self.scan_steps.saturating_add(1);
        self.maybe_read_ahead();
    }

    /// Hints the first and last lines of the stored value `VALUE_AHEAD`
    /// entries on into the cache, when it lies in the segment held: a scan
    /// that reads each value's ends (its checksum sits before it) then
    /// waits for misses already in flight, not one pair per entry. 1 KB
    /// values are too far apart for the hardware prefetcher, and a 4-thread
    /// scan of them spent half its time on those two lines.
    #[inline]
    fn prefetch_value_ahead(&self) {
        let Some(Entry {
            payload: Payload::Stored(l),
            ..
        }) = self.cur.sorted_ahead(VALUE_AHEAD)
        else {
            return;
        };
        let Some(seg) = self.seg.as_deref().filter(|s| s.id == l.segment) else {
            return;
        };
        if let Some(v) = seg.bytes(l.offset as usize, l.len as usize) {
            if let (Some(first), Some(last)) = (v.first(), v.last()) {
                crate::prefetch::line_of(first);
                crate::prefetch::line_of(last);
            }
        }
    }

    /// Reads ahead when a scan reaches the end of the last window. An
    /// inline value has no page to read ahead, and a scan of them would pay
    /// a second cursor per scan for nothing: readahead starts at the first
    /// stored value met.
    #[inline]
    fn maybe_read_ahead(&mut self) {
        if self.valid
            && !self.ahead_off
            && matches!(self.value, Value::Stored { .. })
            && self.scan_steps >= 2
            && (!self.ahead_set || self.cur.key() >= self.ahead_key.as_slice())
        {
            self.read_ahead();
        }
    }

    /// Moves to the previous key. No effect when invalid.
    pub fn prev(&mut self) {
        if self.valid {
            self.reset_scan();
            self.cur.prev();
            self.settle_back();
        }
    }

    /// The current key, or `&[]` when invalid.
    #[inline]
    pub fn key(&self) -> &[u8] {
        if self.valid {
            self.cur.key()
        } else {
            &[]
        }
    }

    /// The current value, or `&[]` when invalid.
    #[inline]
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match &self.value {
            Value::None => &[],
            Value::Inline { len, bytes } => bytes.get(..*len as usize).unwrap_or_default(),
            Value::Stored { off, len } => self
                .seg
                .as_deref()
                .and_then(|s| s.bytes(*off, *len))
                .unwrap_or_default(),
        }
    }

    /// The first error met, if any.
    pub fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn settle(&mut self) {
        self.settle_dir(true);
    }

    fn settle_back(&mut self) {
        self.settle_dir(false);
    }

    /// Whether the cursor is inside the bound it moves toward. Every seek
    /// lands at or past the lower bound and `next` only climbs, so moving
    /// forward only the upper bound can be crossed; backward, only the
    /// lower. A cursor with just a lower bound (a column family at the top
    /// of the keyspace) steps forward with no compare.
    #[inline]
    fn toward_bound_ok(&self, forward: bool) -> bool {
        if forward {
            self.bounds
                .upper
                .as_deref()
                .is_none_or(|u| self.cur.key() < u)
        } else {
            self.bounds
                .lower
                .as_deref()
                .is_none_or(|l| self.cur.key() >= l)
        }
    }

    /// Validates the cursor position and loads its value; an entry that
    /// vanished under a concurrent delete is skipped in direction `forward`.
    fn settle_dir(&mut self, forward: bool) {
        self.valid = false;
        self.value = Value::None;
        while self.err.is_none() && self.cur.valid() && self.toward_bound_ok(forward) {
            match self.load() {
                Some(true) => {
                    self.valid = true;
                    return;
                }
                Some(false) => {
                    if forward {
                        self.cur.next();
                    } else {
                        self.cur.prev();
                    }
                }
                None => return,
            }
        }
    }

    /// Loads the current entry's value: `Some(true)` loaded, `Some(false)`
    /// the entry is gone, `None` an error was recorded.
    fn load(&mut self) -> Option<bool> {
        self.load_payload(self.cur.entry().payload)
    }

    /// [`Iter::load`] of `payload`, the current entry's.
    #[inline]
    fn load_payload(&mut self, mut payload: Payload) -> Option<bool> {
        for _ in 0..3 {
            match payload {
                Payload::Inline { len, bytes } => {
                    self.value = Value::Inline { len, bytes };
                    return Some(true);
                }
                Payload::Tombstone => return Some(false),
                Payload::Stored(l) => {
                    if self.seg.as_ref().is_none_or(|s| s.id != l.segment) {
                        self.seg = self.inner.log.segment(l.segment);
                    }
                    if let Some(seg) = self.seg.as_deref() {
                        let (off, len) = (l.offset as usize, l.len as usize);
                        let checked = match seg.bytes(off, len) {
                            None => Err(Error::Corruption(format!(
                                "{} offset {off} (+{len}): value lies outside the file",
                                seg.path.display(),
                            ))),
                            Some(b) if self.verify => crate::t2::value_crc::verify_mapped(
                                seg,
                                off,
                                b,
                                self.inner.log.verify_once(),
                            ),
                            Some(_) => Ok(()),
                        };
                        if let Err(e) = checked {
                            self.err = Some(e);
                            return None;
                        }
                        self.value = Value::Stored { off, len };
                        return Some(true);
                    }
                    // Relocated and retired meanwhile: look the key up again.
                    match self.inner.t1.get_at(self.cur.key(), self.reg.at) {
                        Some(e) => payload = e.payload,
                        None => return Some(false),
                    }
                }
            }
        }
        self.err = Some(Error::Corruption(
            "the index points at a removed segment".into(),
        ));
        None
    }
}

/// Moves `cur` to the last key below `upper`.
fn last_below(cur: &mut Cursor<'_>, upper: &[u8]) {
    cur.seek_for_prev(upper);
    if cur.valid() && cur.key() >= upper {
        cur.prev();
    }
}
