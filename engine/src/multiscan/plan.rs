//! The prepare step: resolve a window of a range against T1, then turn the
//! values it needs from T2 into coalesced, page-aligned read extents that
//! skip resident pages.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::index::{Cursor, Payload, T1};
use crate::t2::log::Log;
use crate::t2::residency::{self, PAGE};
use crate::t2::segment::Segment;
use crate::t2::value_crc::VALUE_CRC_LEN;

/// Sentinel for "no extent": the value is inline, resident or beyond the
/// prefetch budget, and is read through the mapping.
pub(crate) const NO_EXT: u32 = u32::MAX;
/// Coalescing never builds a read larger than this, so that the first
/// key of a range does not wait for a huge transfer.
pub(crate) const MAX_EXTENT: usize = 512 << 10;
/// Residency probes merge page spans up to this far apart into one
/// `mincore` call (probing the pages in between costs less than a syscall).
const PROBE_GAP: usize = 64 * PAGE;
/// Residency probes after which a window with nothing missing is taken
/// to be warm (see [`Planner::plan`]).
const WARM_PROBES: usize = 24;
/// The same after the previous scan on this thread found the cache warm:
/// a warm scan then costs two `mincore` calls per window, not one per
/// region (measured: 15 calls were ~20% of a warm 1,500-key scan's CPU).
const WARM_PROBES_HINTED: usize = 2;

thread_local! {
    /// The last scan planned on this thread read nothing: all resident.
    static WARM_HINT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Scans planned on this thread (picks the sampled window).
    static SCANS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// With a warm hint, only the first window and one sampled window (it
/// rotates over the first `SAMPLE_SPREAD` windows from scan to scan) are
/// probed; a probe that finds missing pages clears the hint, so the rest
/// of this scan and the next scan plan everything again. Measured with
/// callgrind: planning every window of a warm 15 x 100-key scan cost ~20%
/// more instructions than the synchronous path.
const SAMPLE_SPREAD: usize = 16;

/// Segments a scan refers to, each held alive for the scan's lifetime so
/// that a segment retired meanwhile stays readable (records never change).
#[derive(Default)]
pub(crate) struct SegTable {
    pub segs: Vec<Arc<Segment>>,
    by_id: HashMap<u32, u32>,
    /// The last lookup: neighbouring keys mostly share a segment, and this
    /// skips hashing for them.
    last: Option<(u32, u32)>,
}

impl SegTable {
    fn index(&mut self, log: &Log, id: u32) -> Option<u32> {
        if let Some((lid, i)) = self.last {
            if lid == id {
                return Some(i);
            }
        }
        if let Some(&i) = self.by_id.get(&id) {
            self.last = Some((id, i));
            return Some(i);
        }
        let s = log.segment(id)?;
        let i = self.segs.len() as u32;
        self.segs.push(s);
        self.by_id.insert(id, i);
        self.last = Some((id, i));
        Some(i)
    }
}

/// Where one entry's value is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Val {
    Inline {
        len: u8,
        bytes: [u8; 8],
    },
    Stored {
        /// Index into [`SegTable::segs`].
        seg: u32,
        off: u32,
        len: u32,
        /// First and last extent covering it (`NO_EXT` when none).
        ext: u32,
        ext_last: u32,
        /// Entirely inside extent `ext`, so servable from its buffer.
        in_one: bool,
    },
}

/// One resolved entry; its key is `keys[key_off..key_off+key_len]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub key_off: u32,
    pub key_len: u32,
    pub val: Val,
}

/// A run of resolved entries of one range.
#[derive(Default)]
pub(crate) struct Window {
    pub keys: Vec<u8>,
    pub items: Vec<Item>,
    /// Last key resolved when the window filled up before the range
    /// ended: the next window starts after it.
    pub resume: Option<Vec<u8>>,
    /// Extent ids `[ext_lo, ext_hi)` belong to this window.
    pub ext_lo: usize,
    pub ext_hi: usize,
}

impl Window {
    pub fn key(&self, i: &Item) -> &[u8] {
        self.keys
            .get(i.key_off as usize..(i.key_off + i.key_len) as usize)
            .unwrap_or_default()
    }
}

/// Resolves up to `max_items` live entries of `[lo, hi)` (starting after
/// `after` when given), holding every segment they point at. The window
/// also ends once its stored values reach `max_bytes` (it always holds at
/// least one entry).
#[allow(clippy::too_many_arguments)]
pub(crate) fn resolve(
    cur: &mut Cursor<'_>,
    t1: &T1,
    log: &Log,
    segs: &mut SegTable,
    lo: &[u8],
    after: Option<&[u8]>,
    hi: Option<&[u8]>,
    max_items: usize,
    max_bytes: u64,
) -> Result<Window> {
    let mut w = Window::default();
    let mut bytes = 0u64;
    match after {
        Some(k) => {
            cur.seek(k);
            if cur.valid() && cur.key() == k {
                cur.next();
            }
        }
        None => cur.seek(lo),
    }
    while cur.valid() && hi.is_none_or(|h| cur.key() < h) {
        if w.items.len() >= max_items || bytes >= max_bytes {
            w.resume = w.items.last().map(|i| w.key(i).to_vec());
            break;
        }
        let key = cur.key();
        if let Some(val) = locate(t1, log, segs, key, cur.entry().payload, cur.read_at())? {
            if let Val::Stored { len, .. } = val {
                bytes += u64::from(len);
            }
            if w.items.is_empty() {
                // Typical scans are ~100 keys: size for that once instead of
                // growing through six reallocations.
                let n = max_items.min(128);
                w.items.reserve(n);
                w.keys.reserve(n * key.len());
            }
            w.items.push(Item {
                key_off: w.keys.len() as u32,
                key_len: key.len() as u32,
                val,
            });
            w.keys.extend_from_slice(key);
        }
        cur.next();
    }
    Ok(w)
}

/// The value location of `key`, or `None` when it is deleted. A segment
/// retired by defragment between the cursor read and now means the value
/// moved: look the key up again (as `Iter` does).
fn locate(
    t1: &T1,
    log: &Log,
    segs: &mut SegTable,
    key: &[u8],
    mut payload: Payload,
    at: Option<u64>,
) -> Result<Option<Val>> {
    for _ in 0..3 {
        match payload {
            Payload::Inline { len, bytes } => return Ok(Some(Val::Inline { len, bytes })),
            Payload::Tombstone => return Ok(None),
            Payload::Stored(l) => {
                if let Some(si) = segs.index(log, l.segment) {
                    let seg = segs.segs.get(si as usize);
                    if seg.is_some_and(|s| s.bytes(l.offset as usize, l.len as usize).is_none()) {
                        let p = seg.map(|s| s.path.display().to_string());
                        return Err(Error::Corruption(format!(
                            "{} offset {} (+{}): value lies outside the file",
                            p.unwrap_or_default(),
                            l.offset,
                            l.len
                        )));
                    }
                    return Ok(Some(Val::Stored {
                        seg: si,
                        off: l.offset,
                        len: l.len,
                        ext: NO_EXT,
                        ext_last: NO_EXT,
                        in_one: false,
                    }));
                }
                let again = match at {
                    Some(at) => t1.get_at(key, at),
                    None => t1.get(key),
                };
                match again {
                    Some(e) => payload = e.payload,
                    None => return Ok(None),
                }
            }
        }
    }
    Err(Error::Corruption(
        "the index points at a removed segment".into(),
    ))
}

/// A planned read: bytes `[start, start+len)` of segment `seg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Extent {
    pub seg: u32,
    pub start: u64,
    pub len: u32,
    /// Advised into the page cache rather than read into a buffer.
    pub advise: bool,
}

/// Planning knobs and the running prefetch budget.
pub(crate) struct Planner {
    pub coalesce: usize,
    /// Bytes that may still be prefetched (`u64::MAX`: unlimited).
    pub budget: u64,
    pub limited: bool,
    pub resident_pages: u64,
    /// Windows whose probing stopped early because the cache was warm.
    pub warm_skips: u64,
    /// Extents planned so far.
    pub planned: u64,
    warm_probes: usize,
    hinted: bool,
    /// Reads go to owned buffers: extents hold whole values.
    whole_values: bool,
    /// Those reads are `O_DIRECT`: extents follow its alignment.
    direct: bool,
    /// `BufferMode::Auto`'s admission: a window is advised into the page
    /// cache instead when its bytes were read recently, or always once
    /// scans are `rereading` the log (module `admission`).
    admit: bool,
    rereading: bool,
    /// Bytes of the windows planned under admission.
    pub scanned: u64,
    /// Windows planned through the page cache by that rule.
    pub readmitted: u64,
    windows: usize,
    sample: usize,
    probe: Vec<u8>,
}

impl Drop for Planner {
    fn drop(&mut self) {
        let warm = self.planned == 0 && self.resident_pages > 0;
        WARM_HINT.with(|h| h.set(warm));
    }
}

impl Planner {
    pub fn new(
        coalesce: u64,
        max_prefetch: u64,
        whole_values: bool,
        direct: bool,
        admit: bool,
        rereading: bool,
    ) -> Planner {
        let hinted = WARM_HINT.with(|h| h.get());
        Planner {
            coalesce: coalesce.min(MAX_EXTENT as u64) as usize,
            budget: if max_prefetch == 0 {
                u64::MAX
            } else {
                max_prefetch
            },
            limited: false,
            resident_pages: 0,
            warm_skips: 0,
            planned: 0,
            warm_probes: if hinted {
                WARM_PROBES_HINTED
            } else {
                WARM_PROBES
            },
            hinted,
            whole_values,
            direct,
            admit,
            rereading,
            scanned: 0,
            readmitted: 0,
            windows: 0,
            sample: SCANS.with(|c| {
                let n = c.get().wrapping_add(1);
                c.set(n);
                1 + n % SAMPLE_SPREAD
            }),
            probe: Vec::new(),
        }
    }

    /// Plans the reads window `w` needs, appending them to `out` in the
    /// order the scan will need them, and points each stored item at its
    /// extents (ids are `base + index in out`).
    pub fn plan(&mut self, w: &mut Window, segs: &SegTable, base: usize, out: &mut Vec<Extent>) {
        let idx = self.windows;
        self.windows += 1;
        if self.hinted && idx != 0 && idx != self.sample {
            // Warm: served through the mapping, as the sync path does.
            self.warm_skips += 1;
            return;
        }
        // In disk order.
        let mut spans: Vec<Span> = w
            .items
            .iter()
            .enumerate()
            .filter_map(|(i, it)| match it.val {
                Val::Stored { seg, off, len, .. } if len > 0 => {
                    // The value's checksum sits just before it: read it too,
                    // so that a buffered value is verified from its buffer.
                    let vs = (off as usize).saturating_sub(VALUE_CRC_LEN);
                    let ve = off as usize + len as usize;
                    Some(Span {
                        seg,
                        s: vs / PAGE * PAGE,
                        e: ve.div_ceil(PAGE) * PAGE,
                        item: i,
                        vs,
                        ve,
                    })
                }
                _ => None,
            })
            .collect();
        if spans.is_empty() {
            return;
        }
        spans.sort_unstable();
        let whole = self.whole_values && !(self.admit && self.read_recently(&spans, segs));
        // Extents in disk order, each with the first item needing it.
        let mut exts: Vec<(Extent, usize)> = Vec::new();
        let mut i = 0;
        let (mut probes, mut missing) = (0usize, 0usize);
        while i < spans.len() {
            // A warm cache: the first WARM_PROBES probes found every page
            // resident, so stop paying a mincore per region; the rest of the
            // window is read through the mapping, as the sync path does.
            if probes >= self.warm_probes && missing == 0 {
                self.warm_skips += 1;
                break;
            }
            probes += 1;
            // One probe region: spans of one segment close to each other.
            let (seg, rs, mut re) = (spans[i].seg, spans[i].s, spans[i].e);
            let mut j = i + 1;
            while j < spans.len() && spans[j].seg == seg && spans[j].s <= re + PROBE_GAP {
                re = re.max(spans[j].e);
                j += 1;
            }
            let Some(segment) = segs.segs.get(seg as usize) else {
                i = j;
                continue;
            };
            let re = re.min(segment.size().div_ceil(PAGE) * PAGE);
            residency::resident(segment, rs, re - rs, &mut self.probe);
            let region = Region {
                seg,
                start: rs,
                size: segment.size(),
                align: if self.direct {
                    segment.direct_align()
                } else {
                    PAGE
                },
            };
            missing += if whole {
                self.value_runs(&region, &spans[i..j], &mut exts)
            } else {
                self.page_runs(&region, re, &spans[i..j], &mut exts)
            };
            i = j;
        }
        if missing > 0 {
            // The warm hint was wrong for this scan: plan its remaining
            // windows instead of faulting them in one page at a time.
            self.hinted = false;
            self.warm_probes = WARM_PROBES;
        }
        // Point items at extents (both lists are in disk order).
        for &Span {
            seg, s, e, item, ..
        } in &spans
        {
            let lo = exts
                .partition_point(|(x, _)| (x.seg, x.start as usize + x.len as usize) <= (seg, s));
            let hi = exts.partition_point(|(x, _)| (x.seg, x.start as usize) < (seg, e));
            if lo >= hi {
                continue;
            }
            if let Some(Item {
                val:
                    Val::Stored {
                        off,
                        len,
                        ext,
                        ext_last,
                        in_one,
                        ..
                    },
                ..
            }) = w.items.get_mut(item)
            {
                // Ids are assigned after sorting by need, below. Reads of
                // whole values may share a page with the next read: the
                // first one holding the value (and its checksum) serves it.
                let (v_lo, v_hi) = (
                    u64::from(*off) - VALUE_CRC_LEN as u64,
                    u64::from(*off) + u64::from(*len),
                );
                let holder = (lo..hi).find(|&k| {
                    let x = exts[k].0;
                    x.start <= v_lo && v_hi <= x.start + u64::from(x.len)
                });
                *in_one = holder.is_some();
                *ext = holder.unwrap_or(lo) as u32;
                *ext_last = holder.unwrap_or(hi - 1) as u32;
            }
        }
        // Submission order = the order the scan needs them.
        let mut order: Vec<usize> = (0..exts.len()).collect();
        order.sort_by_key(|&k| exts[k].1);
        let mut id_of = vec![0u32; exts.len()];
        self.planned += exts.len() as u64;
        for (rank, &k) in order.iter().enumerate() {
            id_of[k] = (base + rank) as u32;
            out.push(exts[k].0);
        }
        for it in &mut w.items {
            if let Val::Stored { ext, ext_last, .. } = &mut it.val {
                if *ext != NO_EXT {
                    // Disk order and need order may differ: keep an id
                    // range covering every extent the value overlaps.
                    let ids = id_of
                        .get(*ext as usize..=*ext_last as usize)
                        .unwrap_or_default();
                    let (a, b) = (ids.iter().min(), ids.iter().max());
                    if let (Some(&a), Some(&b)) = (a, b) {
                        *ext = a;
                        *ext_last = b;
                    }
                }
            }
        }
    }
}

/// A probed stretch of one segment: `start` is page-aligned and
/// `Planner::probe` holds the residency of its pages.
struct Region {
    seg: u32,
    start: usize,
    /// Size of the segment file.
    size: usize,
    /// Reads of whole values start and end on a multiple of this: the
    /// `O_DIRECT` alignment of the file ([`Segment::direct_align`]).
    align: usize,
}

/// The bytes one stored value needs: pages `[s, e)`, exactly `[vs, ve)`
/// (its checksum included). Ordered by disk position.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    seg: u32,
    s: usize,
    e: usize,
    item: usize,
    vs: usize,
    ve: usize,
}

impl Planner {
    /// Marks the pages `spans` need as read (module `admission`) and
    /// returns whether the window goes through the page cache, so that
    /// data scanned again warms up: when nearly all of its pages (90%) were
    /// read recently, or scans are re-reading the log anyway.
    fn read_recently(&mut self, spans: &[Span], segs: &SegTable) -> bool {
        let (mut seen, mut total) = (0usize, 0usize);
        // Neighbouring values share pages: count each page once.
        let mut done: Option<(u32, usize)> = None;
        for sp in spans {
            let Some(seg) = segs.segs.get(sp.seg as usize) else {
                continue;
            };
            let mut first = sp.vs / PAGE;
            if let Some((s, end)) = done {
                if s == sp.seg {
                    first = first.max(end);
                }
            }
            let end = sp.ve.div_ceil(PAGE);
            if first < end {
                let now = super::admission::generation();
                let (s, t) = seg.scan_marks(now).touch(now, first, end);
                seen += s;
                total += t;
                done = Some((sp.seg, end));
            }
        }
        // Nearly all of it: a window that merely overlaps an earlier one
        // (random ranges do, more and more as a run goes on) stays direct;
        // with "most" the rw data at 2 threads lost 12% to page-cache
        // reads of half-new windows.
        let bytes = (total * PAGE) as u64;
        self.scanned += bytes;
        let again = self.rereading || seen * 10 >= total * 9;
        self.readmitted += u64::from(again);
        if !again {
            super::admission::read_directly(bytes, super::ahead::page_cache() / 2);
        }
        again
    }

    /// Takes `len` bytes from the prefetch budget; false (and the scan
    /// marked limited) once it is spent.
    fn charge(&mut self, len: usize) -> bool {
        if self.budget < len as u64 {
            self.limited = true;
            self.budget = 0;
            return false;
        }
        self.budget -= len as u64;
        true
    }

    fn resident_page(&self, p: usize) -> bool {
        self.probe.get(p).is_some_and(|b| b & 1 != 0)
    }

    /// Extents of the non-resident pages the `spans` need (page cache
    /// advice: the pages land in the cache, so a read may start or end
    /// inside a value). Returns the pages found missing.
    fn page_runs(
        &mut self,
        r: &Region,
        re: usize,
        spans: &[Span],
        exts: &mut Vec<(Extent, usize)>,
    ) -> usize {
        let rs = r.start;
        let npages = (re - rs) / PAGE;
        let mut missing = 0;
        // Pages some value needs that are not resident, and the first
        // item needing each.
        let mut want: Vec<usize> = vec![usize::MAX; npages];
        for &Span { s, e, item, .. } in spans {
            for p in (s - rs) / PAGE..((e - rs) / PAGE).min(npages) {
                if self.resident_page(p) {
                    self.resident_pages += 1;
                } else if let Some(slot) = want.get_mut(p) {
                    missing += 1;
                    *slot = (*slot).min(item);
                }
            }
        }
        // Runs of wanted pages, bridging gaps below the threshold.
        let mut p = 0;
        while p < npages {
            if want[p] == usize::MAX {
                p += 1;
                continue;
            }
            let first = p;
            let mut last = p;
            let mut need = want[p];
            let mut q = p + 1;
            while q < npages && (q - first + 1) * PAGE <= MAX_EXTENT {
                if want[q] != usize::MAX {
                    if (q - last - 1) * PAGE > self.coalesce {
                        break;
                    }
                    last = q;
                    need = need.min(want[q]);
                }
                q += 1;
            }
            let len = ((last - first + 1) * PAGE).min(r.size - (rs + first * PAGE));
            if self.charge(len) {
                let start = (rs + first * PAGE) as u64;
                exts.push((
                    Extent {
                        seg: r.seg,
                        start,
                        len: len as u32,
                        advise: true,
                    },
                    need,
                ));
            }
            p = last + 1;
        }
        missing
    }

    /// Extents for reads into owned buffers: a value the scan serves from
    /// a buffer must lie whole in one read, so every value with a missing
    /// page is read whole, and reads are cut only between values (one
    /// value larger than `MAX_EXTENT` is one read). Cutting inside a value
    /// left it to be faulted in page by page through the mapping: 64 KiB
    /// values ran at 2 ops/s. Returns the pages found missing.
    fn value_runs(&mut self, r: &Region, spans: &[Span], exts: &mut Vec<(Extent, usize)>) -> usize {
        let mut missing = 0;
        // The extent being built: [start, end), first item needing it.
        // Its ends are the first and last value's, aligned for O_DIRECT
        // (512 B here) rather than to pages: a 64 KB read of 100 values
        // then carries ~0.5 KB of neighbours instead of ~4 KB.
        let mut cur: Option<(usize, usize, usize)> = None;
        let align = r.align.max(1);
        for &Span {
            s, e, item, vs, ve, ..
        } in spans
        {
            let pages = (s - r.start) / PAGE..(e - r.start) / PAGE;
            let gone = pages.clone().filter(|&p| !self.resident_page(p)).count();
            self.resident_pages += (pages.len() - gone) as u64;
            if gone == 0 {
                continue;
            }
            missing += gone;
            let (vs, ve) = (vs / align * align, ve.div_ceil(align) * align);
            cur = match cur {
                Some((cs, ce, need))
                    if vs <= ce + self.coalesce && ve.max(ce) - cs <= MAX_EXTENT =>
                {
                    Some((cs, ve.max(ce), need.min(item)))
                }
                other => {
                    if let Some(x) = other {
                        self.push_run(r, x, exts);
                    }
                    Some((vs, ve, item))
                }
            };
        }
        if let Some(x) = cur {
            self.push_run(r, x, exts);
        }
        missing
    }

    fn push_run(
        &mut self,
        r: &Region,
        (s, e, need): (usize, usize, usize),
        exts: &mut Vec<(Extent, usize)>,
    ) {
        let len = e.min(r.size) - s;
        if self.charge(len) {
            exts.push((
                Extent {
                    seg: r.seg,
                    start: s as u64,
                    len: len as u32,
                    advise: false,
                },
                need,
            ));
        }
    }
}
