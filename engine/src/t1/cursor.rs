//! A merging cursor over every shard's active, frozen and sorted regions.
//!
//! Within a shard the three sources each keep a head positioned on their next key in
//! the current direction (all heads `>=` the current key going forward, `<=` going
//! backward). A step advances the heads equal to the current key and picks the
//! smallest (largest) head; equal keys resolve active > frozen > sorted. A direction
//! change re-seeks every source around the current key, as RocksDB's merging iterator
//! does. Map heads keep a copy of their key, so the cursor holds no skip-list
//! reference between calls; stepping a map head is a `lower_bound` from that copy.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use arc_swap::Guard;

use super::append::AppendMap;
use super::entry::{Entry, Rec};
use super::shard::{resolve, Directory, ShardState};
use super::versions::Versions;
use super::T1;

#[derive(Default)]
struct MapHead {
    valid: bool,
    key: Vec<u8>,
    rec: Rec,
    prev: Option<Rec>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Src {
    None,
    Active,
    Frozen,
    Sorted,
}

/// Cursor over live entries (tombstones hidden) in bytewise key order.
/// Not valid until positioned by a seek.
pub struct Cursor<'a> {
    vs: &'a Versions,
    /// Read as of this seq (registered by the caller); `None`: the newest
    /// version of each key, whatever its visibility (maintenance's view).
    at: Option<u64>,
    /// The version at the cursor when reading at `at`.
    resolved: Rec,
    // Guards, not `Arc` clones: a scan per iterator would otherwise write
    // the directory's and the shard state's reference counts, lines every
    // reader thread shares (arc_swap falls back to a clone by itself when
    // a thread holds more guards than it has debt slots).
    dir: Guard<Arc<Directory>>,
    shard: usize,
    st: Option<Guard<Arc<ShardState>>>,
    act: MapHead,
    frz: MapHead,
    srt: Option<usize>,
    /// Sorted indexes below this need no compare with the map heads: they
    /// sort before every valid head (see `step_sorted_only`). 0 when not
    /// yet worked out for the current heads.
    run_end: usize,
    cur: Src,
    forward: bool,
    scratch: Vec<u8>,
}

fn set_head(h: &mut MapHead, e: Option<super::skiplist::Entry<'_>>, lo: &[u8], hi: Option<&[u8]>) {
    match e {
        Some(e) if e.key() >= lo && hi.is_none_or(|h| e.key() < h) => {
            h.key.clear();
            h.key.extend_from_slice(e.key());
            (h.rec, h.prev) = e.value().read2();
            h.valid = true;
        }
        _ => h.valid = false,
    }
}

#[derive(Clone, Copy)]
enum Pos<'k> {
    First,
    Last,
    Ge(&'k [u8]),
    Gt(&'k [u8]),
    Le(&'k [u8]),
    Lt(&'k [u8]),
}

fn map_seek(m: &AppendMap, h: &mut MapHead, pos: Pos<'_>, lo: &[u8], hi: Option<&[u8]>) {
    if m.is_empty() {
        h.valid = false;
        return;
    }
    let e = match pos {
        Pos::First => m.map.lower_bound(Bound::Included(lo)),
        Pos::Last => match hi {
            Some(hk) => m.map.upper_bound(Bound::Excluded(hk)),
            None => m.map.back(),
        },
        Pos::Ge(k) => m.map.lower_bound(Bound::Included(k)),
        Pos::Gt(k) => m.map.lower_bound(Bound::Excluded(k)),
        Pos::Le(k) => m.map.upper_bound(Bound::Included(k)),
        Pos::Lt(k) => m.map.upper_bound(Bound::Excluded(k)),
    };
    set_head(h, e, lo, hi);
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(t1: &'a T1, dir: Guard<Arc<Directory>>, at: Option<u64>) -> Cursor<'a> {
        Cursor {
            vs: t1.versions(),
            at,
            resolved: Rec::default(),
            dir,
            shard: 0,
            st: None,
            act: MapHead::default(),
            frz: MapHead::default(),
            srt: None,
            run_end: 0,
            cur: Src::None,
            forward: true,
            scratch: Vec::new(),
        }
    }

    /// The seq it reads at, if any (see [`T1::cursor_at`]).
    pub fn read_at(&self) -> Option<u64> {
        self.at
    }

    /// True if positioned on an entry.
    pub fn valid(&self) -> bool {
        self.cur != Src::None
    }

    /// Key at the cursor; empty when not valid.
    #[inline]
    pub fn key(&self) -> &[u8] {
        // A scan's entries come from the sorted region nearly always: that
        // case inline, without the dispatch over sources.
        if self.cur == Src::Sorted {
            if let (Some(st), Some(i)) = (self.st.as_deref(), self.srt) {
                return st.sorted.key(i);
            }
        }
        self.head_key(self.cur).unwrap_or(&[])
    }

    /// Entry at the cursor; [`Entry::INVALID`] (a tombstone) when not valid.
    #[inline]
    pub fn entry(&self) -> Entry {
        if !self.valid() {
            return Entry::INVALID;
        }
        if self.at.is_some() {
            return self.resolved.decode();
        }
        self.head_rec(self.cur)
            .map_or(Entry::INVALID, |r| r.decode())
    }

    /// The version of the current key visible at `at`, from every head on
    /// it (active, frozen, sorted: newest region first) and the store.
    fn resolve_at(&self, at: u64) -> Option<Rec> {
        let key = self.head_key(self.cur)?;
        let on = |s: Src| self.head_key(s) == Some(key);
        let mut v: [Option<Rec>; 5] = [None; 5];
        if on(Src::Active) {
            v[0] = Some(self.act.rec);
            v[1] = self.act.prev;
        }
        if on(Src::Frozen) {
            v[2] = Some(self.frz.rec);
            v[3] = self.frz.prev;
        }
        if on(Src::Sorted) {
            v[4] = self.head_rec(Src::Sorted);
        }
        resolve(key, at, v.into_iter().flatten(), self.vs).rec
    }

    fn head_key(&self, s: Src) -> Option<&[u8]> {
        match s {
            Src::Active => self.act.valid.then_some(self.act.key.as_slice()),
            Src::Frozen => self.frz.valid.then_some(self.frz.key.as_slice()),
            Src::Sorted => {
                let st = self.st.as_ref()?;
                self.srt.map(|i| st.sorted.key(i))
            }
            Src::None => None,
        }
    }

    fn head_rec(&self, s: Src) -> Option<Rec> {
        match s {
            Src::Active => self.act.valid.then_some(self.act.rec),
            Src::Frozen => self.frz.valid.then_some(self.frz.rec),
            Src::Sorted => {
                let st = self.st.as_ref()?;
                self.srt.map(|i| st.sorted.rec(i))
            }
            Src::None => None,
        }
    }

    /// Loads shard `i`'s current state; false if there is no such shard.
    fn enter(&mut self, i: usize) -> bool {
        match self.dir.shards.get(i) {
            Some(sh) => {
                self.shard = i;
                self.run_end = 0;
                self.st = Some(sh.state.load());
                true
            }
            None => false,
        }
    }

    /// Positions every source of the current shard.
    fn position(&mut self, pos: Pos<'_>) {
        self.run_end = 0;
        let (Some(st), Some(sh)) = (self.st.as_deref(), self.dir.shards.get(self.shard)) else {
            self.act.valid = false;
            self.frz.valid = false;
            self.srt = None;
            return;
        };
        let (lo, hi) = (&*sh.lo, sh.hi());
        map_seek(&st.active, &mut self.act, pos, lo, hi);
        match &st.frozen {
            Some(f) => map_seek(f, &mut self.frz, pos, lo, hi),
            None => self.frz.valid = false,
        }
        let s = &st.sorted;
        let (slo, shi) = (st.sorted_lo, st.sorted_hi);
        let i = match pos {
            Pos::First => Some(slo),
            Pos::Last => shi.checked_sub(1),
            Pos::Ge(k) => Some(s.lower_bound(k).max(slo)),
            Pos::Gt(k) => {
                let i = s.lower_bound(k);
                Some(
                    if i < s.len() && s.key(i) == k {
                        i + 1
                    } else {
                        i
                    }
                    .max(slo),
                )
            }
            Pos::Le(k) => {
                let i = s.lower_bound(k);
                if i < s.len() && s.key(i) == k {
                    Some(i.min(shi.saturating_sub(1)))
                } else {
                    i.min(shi).checked_sub(1)
                }
            }
            Pos::Lt(k) => s.lower_bound(k).min(shi).checked_sub(1),
        };
        self.srt = i.filter(|&i| i >= slo && i < shi);
    }

    /// Picks the smallest (forward) or largest head; skips tombstones and crosses shard
    /// boundaries until a live entry or the end.
    fn settle(&mut self) {
        loop {
            let mut best = Src::None;
            for s in [Src::Active, Src::Frozen, Src::Sorted] {
                let Some(k) = self.head_key(s) else { continue };
                let better = match self.head_key(best) {
                    None => true,
                    Some(b) => {
                        let o = k.cmp(b);
                        if self.forward {
                            o == Ordering::Less
                        } else {
                            o == Ordering::Greater
                        }
                    }
                };
                if better {
                    best = s;
                }
            }
            if best == Src::None {
                let next = if self.forward {
                    self.shard.checked_add(1)
                } else {
                    self.shard.checked_sub(1)
                };
                match next {
                    Some(i) if self.enter(i) => {
                        self.position(if self.forward { Pos::First } else { Pos::Last });
                        continue;
                    }
                    _ => {
                        self.cur = Src::None;
                        return;
                    }
                }
            }
            self.cur = best;
            if let Some(at) = self.at {
                if let Some(r) = self.resolve_at(at).filter(|r| !r.is_tombstone()) {
                    self.resolved = r;
                    return;
                }
            } else if self.head_rec(best).is_some_and(|r| !r.is_tombstone()) {
                return;
            }
            self.step();
        }
    }

    /// Moves every head that sits on the current key one step in the current direction.
    fn step(&mut self) {
        let (a_eq, f_eq, s_eq) = {
            let Some(k) = self.head_key(self.cur) else {
                return;
            };
            let eq = |h: Option<&[u8]>| h == Some(k);
            (
                eq(self.head_key(Src::Active)),
                eq(self.head_key(Src::Frozen)),
                eq(self.head_key(Src::Sorted)),
            )
        };
        // Borrow fields separately so no Arc is cloned per step.
        let (Some(st), Some(sh)) = (self.st.as_deref(), self.dir.shards.get(self.shard)) else {
            return;
        };
        let (lo, hi) = (&*sh.lo, sh.hi());
        let fwd = self.forward;
        if a_eq || f_eq {
            self.run_end = 0;
        }
        if a_eq {
            self.scratch.clear();
            self.scratch.extend_from_slice(&self.act.key);
            let p = if fwd {
                Pos::Gt(&self.scratch)
            } else {
                Pos::Lt(&self.scratch)
            };
            map_seek(&st.active, &mut self.act, p, lo, hi);
        }
        if f_eq {
            if let Some(f) = &st.frozen {
                self.scratch.clear();
                self.scratch.extend_from_slice(&self.frz.key);
                let p = if fwd {
                    Pos::Gt(&self.scratch)
                } else {
                    Pos::Lt(&self.scratch)
                };
                map_seek(f, &mut self.frz, p, lo, hi);
            }
        }
        if s_eq {
            self.srt = self.srt.and_then(|i| {
                if fwd {
                    Some(i + 1).filter(|&j| j < st.sorted_hi)
                } else {
                    i.checked_sub(1).filter(|&j| j >= st.sorted_lo)
                }
            });
        }
    }

    /// Forward step when the next key is the sorted region's and no other region
    /// holds it: one index increment. Returns false when the general path must run.
    ///
    /// The map heads are the smallest keys of their regions after the current
    /// one, so every sorted key below the smallest head is the sorted region's
    /// alone. Where that run ends is found once, by one search of the sorted
    /// region, and kept until a head moves (`run_end`); a scan past inserts or
    /// replayed entries far ahead of it then compares no keys per step.
    #[inline(always)]
    fn step_sorted_only(&mut self) -> bool {
        if self.cur != Src::Sorted {
            return false;
        }
        let (Some(st), Some(i)) = (self.st.as_deref(), self.srt) else {
            return false;
        };
        let j = i + 1;
        if j >= self.run_end {
            self.run_end = self.sorted_run_end(st);
            if j >= self.run_end {
                return false;
            }
        }
        let r = st.sorted.rec(j);
        // The only version of its key here; below `at` it is the answer.
        if !r.is_tombstone() && self.at.is_none_or(|at| r.seq < at) {
            self.srt = Some(j);
            self.resolved = r;
            return true;
        }
        false
    }

    /// Positions at the first live entry.
    pub fn seek_to_first(&mut self) {
        self.forward = true;
        if self.enter(0) {
            self.position(Pos::First);
        }
        self.settle();
    }

    /// Positions at the last live entry.
    pub fn seek_to_last(&mut self) {
        self.forward = false;
        if self.enter(self.dir.shards.len().saturating_sub(1)) {
            self.position(Pos::Last);
        }
        self.settle();
    }

    /// Positions at the first live entry with key `>= key`.
    pub fn seek(&mut self, key: &[u8]) {
        self.forward = true;
        if self.enter(self.dir.find(key)) {
            self.position(Pos::Ge(key));
        }
        self.settle();
    }

    /// Positions at the last live entry with key `<= key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        self.forward = false;
        if self.enter(self.dir.find(key)) {
            self.position(Pos::Le(key));
        }
        self.settle();
    }

    /// The end of the sorted run that no map head interrupts (see
    /// `step_sorted_only`): out of line, as it runs once per head move.
    #[cold]
    #[inline(never)]
    fn sorted_run_end(&self, st: &ShardState) -> usize {
        let head = match (self.act.valid, self.frz.valid) {
            (false, false) => return st.sorted_hi,
            (true, true) => self.act.key.as_slice().min(self.frz.key.as_slice()),
            (true, false) => self.act.key.as_slice(),
            (false, true) => self.frz.key.as_slice(),
        };
        st.sorted.lower_bound(head).min(st.sorted_hi)
    }

    /// The entry `d` places past the cursor in its shard's sorted region,
    /// if the region reaches that far: a hint for prefetching only (a map
    /// head may come first, and the entry may not be visible).
    #[inline]
    pub fn sorted_ahead(&self, d: usize) -> Option<Entry> {
        if self.cur != Src::Sorted {
            return None;
        }
        let (Some(st), Some(i)) = (self.st.as_deref(), self.srt) else {
            return None;
        };
        let j = i + d;
        (j < st.sorted_hi).then(|| st.sorted.rec(j).decode())
    }

    /// [`Cursor::next`] when it is one index increment in the sorted region
    /// (see `step_sorted_only`), with the entry it lands on; `None`, having
    /// not moved, otherwise.
    #[inline]
    pub fn next_in_sorted_run(&mut self) -> Option<Entry> {
        if self.forward && self.step_sorted_only() {
            Some(self.resolved.decode())
        } else {
            None
        }
    }

    /// Moves to the next live entry; no-op when not valid.
    pub fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if self.forward {
            if self.step_sorted_only() {
                return;
            }
            self.step();
        } else {
            self.forward = true;
            self.reseek(true);
        }
        self.settle();
    }

    /// Moves to the previous live entry; no-op when not valid.
    pub fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if !self.forward {
            self.step();
        } else {
            self.forward = false;
            self.reseek(false);
        }
        self.settle();
    }

    /// Direction change: re-seek every source strictly past the current key.
    fn reseek(&mut self, forward: bool) {
        let mut k = std::mem::take(&mut self.scratch);
        k.clear();
        k.extend_from_slice(self.key());
        self.position(if forward { Pos::Gt(&k) } else { Pos::Lt(&k) });
        self.scratch = k;
    }
}
