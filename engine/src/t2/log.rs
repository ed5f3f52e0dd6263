//! The value log: an ordered set of segments, lock-free space reservation,
//! segment rollover and group commit.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::fsutil::sync_dir;
use crate::t2::durable::{DurableEnd, End, InFlight};

/// Spare segments kept ready. Under heavy writeback a create's fsync takes
/// 50-170 ms (one 588 ms), as long as 1 KB writers take to fill a 64 MiB
/// segment: with one spare, writers waited for the next (34 waits of
/// 77 ms in a 3 s 1 KB `insert`).
const SPARES: usize = 2;
use crate::t2::record::{
    lsn, pad_header, record_len, seal_offset, split_lsn, Header, Kind, HEADER_LEN, SEAL_LEN,
};
use crate::t2::segment::{MapOpts, Segment};

/// Where an appended record landed.
pub struct Appended {
    /// The segment holding it (kept alive by this handle). A guard, not a
    /// clone: a clone is an increment and a decrement of the count that
    /// every writer shares (a fifth of `append_with_crc`'s own samples).
    pub seg: arc_swap::Guard<Arc<Segment>>,
    /// The record's LSN (also its seq for ordinary writes).
    pub lsn: u64,
    /// Offset of the body inside the segment.
    pub body_off: usize,
    /// LSN just past the record.
    pub end_lsn: u64,
}

#[derive(Default)]
struct SyncState {
    synced: u64,
    requested: u64,
    leader: bool,
}

/// Group commit counters.
#[derive(Debug, Default)]
pub struct SyncCounters {
    /// `msync` rounds performed.
    pub rounds: AtomicU64,
    /// Writers that asked for a sync.
    pub waiters: AtomicU64,
}

/// The value log.
pub struct Log {
    dir: PathBuf,
    seg_size: usize,
    map_opts: MapOpts,
    /// The segment table, copy-on-write: readers load it without any
    /// shared-cache-line write, and a loaded table keeps its segments alive
    /// (so `with_segment` needs no refcount traffic). Rollover and retire,
    /// which are rare, replace it under `table_write`.
    segments: ArcSwap<BTreeMap<u32, Arc<Segment>>>,
    table_write: Mutex<()>,
    active: ArcSwap<Segment>,
    roll: Mutex<()>,
    /// Held while a segment is created (by the maintenance thread ahead of
    /// need, or by a rollover that found no spare), without `roll`: a
    /// create's fsyncs take 100 ms and more under heavy writeback, and
    /// writers that only need to see the new active segment must not wait
    /// for them.
    create: Mutex<()>,
    /// The next [`SPARES`] segments (ids from the active one's + 1, in
    /// order), created ahead of need by the maintenance thread so that a
    /// rollover is a pointer swap rather than a create + fsync.
    spare: Mutex<VecDeque<Arc<Segment>>>,
    spare_cv: Condvar,
    sync: Mutex<SyncState>,
    sync_cv: Condvar,
    /// Bytes appended since open.
    pub appended: crate::sharded::Sharded,
    /// Group commit counters.
    pub sync_counters: SyncCounters,
    /// Nanoseconds spent creating segments at rollover, worst case.
    pub max_rollover_ns: AtomicU64,
    /// How much of the log MultiScans have read (their page-cache
    /// admission, `multiscan::admission`).
    pub(crate) scanned: super::marks::Scanned,
    /// The log fits in half the memory budget, so values read through the
    /// mapping are checked once per residency (`value_crc::Verified`).
    verify_once: AtomicBool,
    /// `LOGEND`: how far the acknowledged log reaches (`durable.rs`).
    durable: DurableEnd,
    /// Appenders between their reservation and their finished record.
    in_flight: InFlight,
    /// LSN of the reservation an unlogged region holds open
    /// ([`Log::reserve`] to [`Log::reservation_done`]); `u64::MAX` when
    /// none. `LOGEND` never passes it: the region is written piece by piece.
    open_reserved: AtomicU64,
    /// Set by the first failed write or sync ([`Error::Poisoned`]).
    poison: std::sync::OnceLock<String>,
}

impl Log {
    /// Builds the log over recovered segments (non-empty; the highest id is
    /// the active one) whose tails were set by recovery.
    pub(crate) fn new(
        dir: &Path,
        seg_size: usize,
        map_opts: MapOpts,
        segments: BTreeMap<u32, Arc<Segment>>,
        synced: u64,
        durable: DurableEnd,
    ) -> Result<Log> {
        let active = segments
            .values()
            .next_back()
            .cloned()
            .ok_or_else(|| Error::InvalidArgument("log opened without segments".into()))?;
        Ok(Log {
            dir: dir.to_path_buf(),
            seg_size,
            map_opts,
            segments: ArcSwap::from_pointee(segments),
            table_write: Mutex::new(()),
            active: ArcSwap::new(active),
            roll: Mutex::new(()),
            create: Mutex::new(()),
            spare: Mutex::new(VecDeque::new()),
            spare_cv: Condvar::new(),
            sync: Mutex::new(SyncState {
                synced,
                requested: synced,
                leader: false,
            }),
            sync_cv: Condvar::new(),
            appended: crate::sharded::Sharded::default(),
            sync_counters: SyncCounters::default(),
            max_rollover_ns: AtomicU64::new(0),
            scanned: Default::default(),
            verify_once: AtomicBool::new(false),
            durable,
            in_flight: InFlight::default(),
            open_reserved: AtomicU64::new(u64::MAX),
            poison: std::sync::OnceLock::new(),
        }
        .with_verify_once())
    }

    fn with_verify_once(self) -> Log {
        self.update_verify_once();
        self
    }

    /// Whether a value read through the mapping may skip its check after
    /// the first (`value_crc::verify_mapped`).
    #[inline]
    pub(crate) fn verify_once(&self) -> bool {
        self.verify_once.load(Ordering::Relaxed)
    }

    /// Recomputes [`Self::verify_once`] as the log grows or shrinks: with
    /// a log larger than half the memory budget, pages leave memory unseen
    /// and every read checks its value.
    fn update_verify_once(&self) {
        let bytes = (self.segments.load().len() as u64 + 1).saturating_mul(self.seg_size as u64);
        let fits = crate::membudget::budget().is_none_or(|b| bytes <= b / 2);
        if !fits && self.verify_once.swap(false, Ordering::Relaxed) {
            // Marks set while it fitted no longer say anything.
            for s in self.segments.load().values() {
                s.forget_verified();
            }
        } else if fits {
            self.verify_once.store(true, Ordering::Relaxed);
        }
    }

    /// `Err(Poisoned)` once a write or sync of the log has failed.
    pub fn check_poison(&self) -> Result<()> {
        match self.poison.get() {
            Some(m) => Err(Error::Poisoned(m.clone())),
            None => Ok(()),
        }
    }

    /// Passes `r` through, poisoning the log if it is an error: after a
    /// failed write the log has a stretch recovery may find zeroed below
    /// later records, and after a failed `msync` the kernel may have
    /// dropped dirty pages it will never write, so a later sync returning
    /// Ok would report lost data as durable.
    pub fn poison_on<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            let _ = self.poison.set(format!(
                "an earlier write or sync of the log failed ({e}); \
                 reopen the database to recover what is durable"
            ));
        }
        r
    }

    #[cfg(feature = "internals")]
    /// The LSN `LOGEND` last stored.
    pub fn durable_lsn(&self) -> u64 {
        self.durable.lsn()
    }

    /// Declares `[off, off + len)` of `seg` empty with a [`Kind::Pad`]
    /// (a stretch shorter than a header cannot hide a record and stays
    /// zero). The caller owns the stretch.
    fn pad(&self, seg: &Segment, off: usize, len: usize) -> Result<()> {
        if len < HEADER_LEN {
            return Ok(());
        }
        self.poison_on(seg.write_record(off, &pad_header(seg.id, off, len), &[]))
            .map(drop)
    }

    #[cfg(feature = "internals")]
    /// A new log in `dir` (an empty directory): its `LOGEND` and first
    /// segment.
    pub fn create(dir: &Path, seg_size: usize, map_opts: MapOpts) -> Result<Log> {
        let durable = DurableEnd::create(
            dir,
            End {
                lsn: 0,
                seg_size: seg_size as u64,
            },
        )?;
        let seg = Arc::new(Segment::create(dir, 0, seg_size, map_opts)?);
        sync_dir(dir)?;
        Log::new(
            dir,
            seg_size,
            map_opts,
            BTreeMap::from([(0, seg)]),
            0,
            durable,
        )
    }

    /// Size of new segments.
    pub fn segment_size(&self) -> usize {
        self.seg_size
    }

    /// The largest body a record may carry.
    pub fn max_body(&self) -> usize {
        self.seg_size - record_len(0) - SEAL_LEN
    }

    /// The segment with id `id`, if it still exists.
    pub fn segment(&self, id: u32) -> Option<Arc<Segment>> {
        self.segments.load().get(&id).cloned()
    }

    /// Runs `f` on segment `id` if it still exists, without touching its
    /// reference count (the read path's way in).
    pub fn with_segment<R>(&self, id: u32, f: impl FnOnce(&Segment) -> R) -> Option<R> {
        let table = self.segments.load();
        table.get(&id).map(|s| f(s))
    }

    fn update_table(&self, f: impl FnOnce(&mut BTreeMap<u32, Arc<Segment>>)) {
        let _g = self.table_write.lock();
        let mut t = BTreeMap::clone(&self.segments.load());
        f(&mut t);
        self.segments.store(Arc::new(t));
    }

    /// Every segment, in id order.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.segments.load().values().cloned().collect()
    }

    /// The id of the segment currently taking writes.
    pub fn active_id(&self) -> u32 {
        self.active.load().id
    }

    /// The largest body a record appended now would fit into the active
    /// segment with (0 when it is full).
    pub fn room_for_body(&self) -> usize {
        let a = self.active.load();
        seal_offset(a.size())
            .saturating_sub(a.used())
            .saturating_sub(record_len(0))
            / crate::t2::record::ALIGN
            * crate::t2::record::ALIGN
    }

    /// The LSN where the next record would go if nothing were in flight.
    pub fn tail_lsn(&self) -> u64 {
        let a = self.active.load();
        lsn(a.id, a.used() as u32)
    }

    /// Appends one record; returns once its commit word is stored.
    /// `seq = None` means "use the record's own LSN".
    pub fn append(
        &self,
        kind: Kind,
        count_or_key_len: u32,
        seq: Option<u64>,
        extra: u64,
        parts: &[&[u8]],
    ) -> Result<Appended> {
        let body_crc = parts
            .iter()
            .fold(0u32, |c, p| crate::crc::crc32c_append(c, p));
        self.append_with_crc(kind, count_or_key_len, seq, extra, parts, body_crc)
    }

    /// [`Log::append`] with the body's crc32c already known (the caller
    /// derived it without a second pass over the value).
    pub fn append_with_crc(
        &self,
        kind: Kind,
        count_or_key_len: u32,
        seq: Option<u64>,
        extra: u64,
        parts: &[&[u8]],
        body_crc: u32,
    ) -> Result<Appended> {
        debug_assert_eq!(
            body_crc,
            parts
                .iter()
                .fold(0u32, |c, p| crate::crc::crc32c_append(c, p))
        );
        let body_len: usize = parts.iter().map(|p| p.len()).sum();
        if body_len > self.max_body() {
            return Err(Error::InvalidArgument(format!(
                "a record body of {body_len} bytes exceeds the segment capacity of {} bytes",
                self.max_body()
            )));
        }
        let len = record_len(body_len);
        self.check_poison()?;
        let _ticket = self.in_flight.enter();
        loop {
            let seg = self.active.load();
            let off = seg.tail.fetch_add(len as u64, Ordering::AcqRel) as usize;
            let end = seal_offset(seg.size());
            if off + len <= end {
                let at = lsn(seg.id, off as u32);
                let header = Header {
                    kind,
                    count_or_key_len,
                    body_len: body_len as u32,
                    body_crc,
                    lsn: at,
                    seq: seq.unwrap_or(at),
                    extra,
                };
                if !self.poison_on(seg.write_record(off, &header, parts))? {
                    return Err(Error::InvalidArgument(format!(
                        "internal: record of {len} bytes at offset {off} does not fit {}",
                        seg.path.display()
                    )));
                }
                self.appended.add(len as u64);
                return Ok(Appended {
                    seg,
                    lsn: at,
                    body_off: off + crate::t2::record::HEADER_LEN,
                    end_lsn: at + len as u64,
                });
            }
            // The one writer whose record straddles the seal slot owns the
            // rest of the segment: declared empty, it is not mistaken for
            // zeroed records.
            if off < end {
                self.pad(&seg, off, end - off)?;
            }
            self.rollover(seg.id)?;
        }
    }

    /// Reserves a stretch of the active segment for a record written piece
    /// by piece (`unlogged.rs`): `want` bytes, or what is left of the
    /// segment when that is less but at least `min`; else the log rolls
    /// over. Both are record lengths (multiples of 16). Returns the
    /// segment, the stretch's offset and its length.
    pub fn reserve(&self, min: usize, want: usize) -> Result<(Arc<Segment>, usize, usize)> {
        if min > record_len(self.max_body()) || min == 0 {
            return Err(Error::InvalidArgument(format!(
                "a reservation of {min} bytes does not fit a segment of {} bytes",
                self.seg_size
            )));
        }
        let want = want.max(min);
        self.check_poison()?;
        let _ticket = self.in_flight.enter();
        loop {
            let seg = self.active.load_full();
            let end = seal_offset(seg.size());
            let used = seg.tail.load(Ordering::Acquire) as usize;
            let take = end.saturating_sub(used).min(want);
            if take < min && used < end {
                // Too little left: claim and pad it, then roll over.
                if seg
                    .tail
                    .compare_exchange(used as u64, end as u64, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.pad(&seg, used, end - used)?;
                }
                continue;
            }
            if take >= min {
                let take = take / crate::t2::record::ALIGN * crate::t2::record::ALIGN;
                if seg
                    .tail
                    .compare_exchange(
                        used as u64,
                        (used + take) as u64,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
                {
                    self.appended.add(take as u64);
                    self.open_reserved
                        .store(lsn(seg.id, used as u32), Ordering::SeqCst);
                    return Ok((seg, used, take));
                }
                continue;
            }
            self.rollover(seg.id)?;
        }
    }

    /// The reservation [`Log::reserve`] handed out is complete: its record's
    /// header is written.
    pub fn reservation_done(&self) {
        self.open_reserved.store(u64::MAX, Ordering::SeqCst);
    }

    /// Returns `[from, to)` of `seg`, the unused end of a reservation, if
    /// nothing was reserved after it; the bytes are zero, so the next
    /// record may go there.
    pub fn give_back(&self, seg: &Segment, from: usize, to: usize) -> bool {
        let ok = from <= to
            && seg
                .tail
                .compare_exchange(to as u64, from as u64, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        if ok {
            self.appended.sub((to - from) as u64);
        }
        ok
    }

    /// Seals segment `full` and starts the next one, unless another writer
    /// already did.
    fn rollover(&self, full: u32) -> Result<()> {
        // Another writer may have switched already: no lock to wait for.
        if self.active.load().id != full {
            return Ok(());
        }
        let _g = self.roll.lock();
        if self.active.load().id != full {
            return Ok(());
        }
        let t0 = Instant::now();
        let next = full.checked_add(1).ok_or_else(|| {
            Error::InvalidArgument("segment ids exhausted (2^32 segments)".into())
        })?;
        let take = || self.spare.lock().pop_front().filter(|s| s.id == next);
        let seg = match take() {
            Some(s) => s,
            None => {
                // The maintenance thread may be creating it right now.
                let _c = self.create.lock();
                match take() {
                    Some(s) => s,
                    None => self.create_segment(next)?,
                }
            }
        };
        // Seal the full segment before any record can land in the next one:
        // a sync of a later record flushes this slot too (it lies below that
        // record's LSN), so a durable write in `next` implies a durable seal.
        let old = self.active.load_full();
        let at = seal_offset(old.size());
        let seal = Header {
            kind: Kind::Seal,
            count_or_key_len: 0,
            body_len: 0,
            body_crc: 0,
            lsn: lsn(old.id, at as u32),
            seq: lsn(old.id, at as u32),
            extra: u64::from(next),
        };
        if !self.poison_on(old.write_record(at, &seal, &[]))? {
            return Err(Error::InvalidArgument(format!(
                "internal: no room for the seal at offset {at} of {}",
                old.path.display()
            )));
        }
        crate::failpoint::hit("rollover.sealed");
        self.update_table(|t| {
            t.insert(next, seg.clone());
        });
        self.active.store(seg);
        self.spare_cv.notify_all();
        self.update_verify_once();
        self.max_rollover_ns
            .fetch_max(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Creates segment `id`, durably named in the directory.
    fn create_segment(&self, id: u32) -> Result<Arc<Segment>> {
        let s = Arc::new(Segment::create(
            &self.dir,
            id,
            self.seg_size,
            self.map_opts,
        )?);
        sync_dir(&self.dir)?;
        Ok(s)
    }

    /// Creates the next spare segment if there are fewer than [`SPARES`];
    /// called by the maintenance thread. Returns the segment it created.
    pub fn prepare_spare(&self) -> Result<Option<Arc<Segment>>> {
        // Under `create` the spares stay contiguous from the active
        // segment's id + 1: a rollover takes the first, and one that finds
        // none waits for this lock, then takes the segment made here.
        let _c = self.create.lock();
        let next = {
            let sp = self.spare.lock();
            if sp.len() >= SPARES {
                return Ok(None);
            }
            match sp.back() {
                Some(s) => s.id.checked_add(1),
                None => self.active_id().checked_add(1),
            }
        };
        let Some(next) = next else {
            return Ok(None);
        };
        let seg = self.create_segment(next)?;
        self.spare.lock().push_back(seg.clone());
        Ok(Some(seg))
    }

    /// Waits up to `timeout` for a rollover to consume a spare, if all
    /// [`SPARES`] are made.
    pub fn wait_spare_needed(&self, timeout: std::time::Duration) {
        let mut sp = self.spare.lock();
        if sp.len() >= SPARES {
            self.spare_cv.wait_for(&mut sp, timeout);
        }
    }

    /// Removes the unused spare segments (on close), so that a reopen
    /// keeps appending to the current segment. The last goes first: a
    /// crash part-way leaves the ids contiguous.
    pub fn drop_spare(&self) -> Result<()> {
        let _g = self.roll.lock();
        let _c = self.create.lock();
        let mut sp = self.spare.lock();
        if sp.is_empty() {
            return Ok(());
        }
        while let Some(s) = sp.pop_back() {
            std::fs::remove_file(&s.path)
                .map_err(|e| Error::io(format!("removing spare {}", s.path.display()), e))?;
        }
        sync_dir(&self.dir)
    }

    /// Wakes a thread in [`Log::wait_spare_needed`].
    pub fn wake_spare_waiter(&self) {
        self.spare_cv.notify_all();
    }

    /// Makes every record that ends at or before `target` durable, sharing
    /// one `msync` round among all writers waiting at the same time.
    ///
    /// Callers have finished writing their own record before calling, so
    /// the range a leader flushes covers every waiter's complete record.
    pub fn sync_to(&self, target: u64) -> Result<()> {
        self.sync_counters.waiters.fetch_add(1, Ordering::Relaxed);
        let mut st = self.sync.lock();
        st.requested = st.requested.max(target);
        loop {
            self.check_poison()?;
            if st.synced >= target {
                return Ok(());
            }
            if st.leader {
                self.sync_cv.wait(&mut st);
                continue;
            }
            st.leader = true;
            let upto = st.requested;
            // From LOGEND's claim, not the watermark: a region completed
            // since the last round may lie below the watermark.
            let from = st.synced.min(self.durable.lsn());
            drop(st);
            // Every record below `upto` is complete once those in flight
            // finish; an open unlogged region bounds the claim.
            self.in_flight.drain();
            let claim = upto.min(self.open_reserved.load(Ordering::SeqCst));
            let res = self.poison_on(
                self.flush_between(from, upto)
                    .and_then(|()| self.store_end(claim)),
            );
            self.sync_counters.rounds.fetch_add(1, Ordering::Relaxed);
            st = self.sync.lock();
            st.leader = false;
            if res.is_ok() {
                st.synced = st.synced.max(upto);
            }
            self.sync_cv.notify_all();
            res?;
        }
    }

    /// `msync`s `[from, to)` without advancing the group-commit watermark
    /// (records in that range may still be in flight).
    pub fn sync_to_untracked(&self, from: u64, to: u64) -> Result<()> {
        self.check_poison()?;
        self.poison_on(self.flush_between(from, to))
    }

    /// Stores `claim` in `LOGEND` (everything below it is durable).
    fn store_end(&self, claim: u64) -> Result<()> {
        let (id, off) = split_lsn(claim);
        let Some(size) = self.with_segment(id, |s| s.size()) else {
            return Ok(());
        };
        // A full segment's tail runs past its seal slot, which holds
        // nothing until a rollover succeeds.
        let claim = lsn(id, off.min(seal_offset(size) as u32));
        let seg_size = size as u64;
        crate::failpoint::io_error("segment.msync.after")
            .map_err(|e| Error::io("msync of the log (injected after it ran)", e))?;
        self.durable.store(End {
            lsn: claim,
            seg_size,
        })
    }

    /// `msync`s the log between two LSNs.
    fn flush_between(&self, from: u64, to: u64) -> Result<()> {
        if to <= from {
            return Ok(());
        }
        let (fs, fo) = split_lsn(from);
        let (ts, to_off) = split_lsn(to);
        let segs: Vec<Arc<Segment>> = self
            .segments
            .load()
            .range(fs..=ts)
            .map(|(_, s)| s.clone())
            .collect();
        for s in segs {
            let start = if s.id == fs { fo as usize } else { 0 };
            let end = if s.id == ts {
                to_off as usize
            } else {
                s.size()
            };
            if end > start {
                s.flush_range(start, end - start)?;
            }
        }
        Ok(())
    }

    /// Removes segments from the table and unlinks their files, with one
    /// directory fsync. Readers that still hold an `Arc` keep a valid
    /// mapping until they drop it. The active segment is never retired.
    pub fn retire(&self, ids: &[u32]) -> Result<Vec<Arc<Segment>>> {
        let active = self.active_id();
        let mut gone = Vec::new();
        {
            self.update_table(|table| {
                for id in ids.iter().filter(|&&id| id != active) {
                    if let Some(s) = table.remove(id) {
                        gone.push(s);
                    }
                }
            });
        }
        for seg in &gone {
            std::fs::remove_file(&seg.path)
                .map_err(|e| Error::io(format!("removing {}", seg.path.display()), e))?;
            crate::failpoint::hit("retire.unlinked");
        }
        if !gone.is_empty() {
            sync_dir(&self.dir)?;
            self.update_verify_once();
        }
        Ok(gone)
    }

    /// Total bytes of all segment files.
    pub fn total_bytes(&self) -> u64 {
        self.segments.load().values().map(|s| s.size() as u64).sum()
    }

    /// [`Self::total_bytes`] in O(1), assuming every segment has the size
    /// of the oldest (true unless `segment_size` changed between opens).
    pub fn approx_total_bytes(&self) -> u64 {
        let segs = self.segments.load();
        let each = segs.values().next().map_or(0, |s| s.size() as u64);
        each * segs.len() as u64
    }

    /// Sum of live bytes over all segments.
    pub fn live_bytes(&self) -> u64 {
        self.segments
            .load()
            .values()
            .map(|s| s.live.load(Ordering::Relaxed).max(0) as u64)
            .sum()
    }
}
