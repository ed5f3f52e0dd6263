//! RocksDB's own `DB::NewMultiScan`, reached through the C++ shim in
//! `compat/cpp/multiscan_shim.cc` (compiled by `compat/build.rs`).
//!
//! This is the only module of the RocksDB adapter with `unsafe` code.

use std::ffi::{c_char, c_int, c_uchar, CStr};
use std::ptr::NonNull;
use std::sync::Arc;

use librocksdb_sys::{rocksdb_column_family_handle_t, rocksdb_t};
use rocksdb::{AsColumnFamilyRef, AsRawPtr, DBRawIteratorWithThreadMode, DB};

use super::families::CfRef;
use super::snapshot::RocksSnapshot;
use crate::multiscan::{MultiScan, MultiScanArgs};
use crate::{Error, ReadOptions, Result};

/// Opaque state owned by the shim.
#[repr(C)]
struct VmkMultiscan {
    _private: [u8; 0],
}

/// Mirrors `vmk_status` in the shim.
#[repr(C)]
struct VmkStatus {
    code: c_int,
    msg: [c_char; 480],
}

impl VmkStatus {
    fn new() -> Self {
        VmkStatus {
            code: 0,
            msg: [0; 480],
        }
    }

    fn to_error(&self) -> Error {
        // The shim always NUL-terminates `msg` (strncpy + explicit NUL).
        let msg = CStr::from_bytes_until_nul(
            // SAFETY: c_char and u8 have the same size and alignment; the
            // slice covers exactly the array.
            unsafe { std::slice::from_raw_parts(self.msg.as_ptr().cast::<u8>(), self.msg.len()) },
        )
        .map_or_else(
            |_| "(unterminated message)".to_owned(),
            |c| c.to_string_lossy().into_owned(),
        );
        let msg = format!("RocksDB MultiScan: {msg}");
        match self.code {
            1 => Error::InvalidArgument(msg),
            2 => Error::NotSupported(msg),
            3 => Error::Corruption(msg),
            4 => Error::IoError(msg.into()),
            5 => Error::Busy(msg),
            6 => Error::Incomplete(msg),
            7 => Error::PrefetchLimitReached(msg),
            8 => Error::ShutdownInProgress(msg),
            _ => Error::IoError(msg.into()),
        }
    }
}

extern "C" {
    fn vmk_io_uring_enabled() -> c_uchar;
    #[allow(clippy::too_many_arguments)]
    fn vmk_multiscan_new(
        db: *mut rocksdb_t,
        snapshot: *const librocksdb_sys::rocksdb_snapshot_t,
        cf: *const rocksdb_column_family_handle_t,
        fill_cache: c_uchar,
        verify_checksums: c_uchar,
        async_io: c_uchar,
        readahead_size: usize,
        n: usize,
        starts: *const *const c_char,
        start_lens: *const usize,
        limits: *const *const c_char,
        limit_lens: *const usize,
        use_async_io: c_uchar,
        io_coalesce_threshold: u64,
        max_prefetch_size: u64,
        st: *mut VmkStatus,
    ) -> *mut VmkMultiscan;
    fn vmk_multiscan_next_range(m: *mut VmkMultiscan, st: *mut VmkStatus) -> c_int;
    fn vmk_multiscan_next_entry(m: *mut VmkMultiscan, st: *mut VmkStatus) -> c_int;
    fn vmk_multiscan_key(m: *const VmkMultiscan, data: *mut *const c_char, len: *mut usize);
    fn vmk_multiscan_value(m: *const VmkMultiscan, data: *mut *const c_char, len: *mut usize);
    fn vmk_multiscan_destroy(m: *mut VmkMultiscan);
}

/// Whether RocksDB's io_uring support is switched on: the value of
/// `RocksDbIOUringEnable()`, which librocksdb-sys defines to return `true`
/// (RocksDB consults it before using io_uring for MultiRead and ReadAsync).
pub fn io_uring_enabled() -> bool {
    // SAFETY: calls a C function without arguments or side effects.
    unsafe { vmk_io_uring_enabled() != 0 }
}

/// Clips `[start, limit)` to the read options' bounds; `None` if empty.
fn clip(
    start: &[u8],
    limit: Option<&[u8]>,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let s = match lower {
        Some(l) if l > start => l,
        _ => start,
    };
    let lim = match (limit, upper) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if lim.is_some_and(|l| s >= l) {
        return None;
    }
    Some((s.to_vec(), lim.map(<[u8]>::to_vec)))
}

/// One range as handed to RocksDB: `[start, limit)`, `None` = unbounded.
type NativeRange = (Vec<u8>, Option<Vec<u8>>);

/// Splits `ranges` (sorted by start) into runs RocksDB's MultiScan accepts
/// (`DBIter::ValidateScanOptions`): ranges must not overlap, and a range
/// without a limit must be the only one. Returns `[first, end)` index pairs.
fn group(ranges: &[NativeRange]) -> Vec<(usize, usize)> {
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for (i, (start, limit)) in ranges.iter().enumerate() {
        let joins = i > 0 && limit.is_some() && {
            let (_, prev_limit) = &ranges[i - 1];
            prev_limit.as_deref().is_some_and(|p| start.as_slice() >= p)
        };
        match groups.last_mut() {
            Some(g) if joins => g.1 = i + 1,
            _ => groups.push((i, i + 1)),
        }
    }
    groups
}

/// What serves one caller range.
#[derive(Clone)]
enum Slot {
    /// Clipped to nothing by the read options' bounds.
    Empty,
    /// Index into the bounded ranges handed to RocksDB's MultiScan.
    Native(usize),
    /// An unbounded range `[start, ∞)`, served by a RocksDB iterator.
    Unbounded(Vec<u8>),
}

/// A MultiScan served by RocksDB's `DB::NewMultiScan`.
///
/// * RocksDB ignores `ReadOptions::iterate_upper_bound` in MultiScan; to
///   give the trait's semantics (the caller's bounds intersect each range)
///   the adapter clips every range to the bounds, and ranges clipped to
///   nothing are served as empty without RocksDB.
/// * RocksDB rejects overlapping ranges (`DBIter::ValidateScanOptions`:
///   "Overlapping ranges at index i"); the trait allows them, so an
///   overlapping range starts a new native MultiScan.
/// * Unbounded ranges (no limit after clipping) are served by a plain
///   RocksDB iterator (`Seek(start)` + `Next`), which is what RocksDB's
///   MultiScan does for them anyway (it prefetches nothing without limits).
///   They never reach `NewMultiScan` because RocksDB 11.8.1 crashes on
///   them: with no bounded range, `DBIter::PrepareInternalChildren` calls
///   `Prepare(nullptr)`, and `BlockBasedTableIterator::Prepare` (L0 files)
///   dereferences that null pointer (SIGSEGV in `CollectBlockHandles`).
/// * So a list of sorted, disjoint, bounded ranges (db_bench's multiscan)
///   is exactly one `NewMultiScan` call, as in RocksDB's own db_bench.
pub(super) struct NativeMultiScan<'a> {
    db: &'a DB,
    ro: ReadOptions,
    /// The one view every range reads.
    snapshot: Option<Arc<RocksSnapshot>>,
    use_async_io: bool,
    io_coalesce_threshold: u64,
    max_prefetch_size: u64,
    /// The clipped, bounded ranges RocksDB's MultiScan scans.
    kept: Vec<NativeRange>,
    /// What serves each caller range.
    slots: Vec<Slot>,
    /// The iterator of the current unbounded range, and whether it has
    /// been positioned.
    iter: Option<DBRawIteratorWithThreadMode<'a, DB>>,
    iter_started: bool,
    /// Runs of `kept` served by one native MultiScan each.
    groups: Vec<(usize, usize)>,
    /// The native MultiScan of group `raw_group`.
    raw: Option<NonNull<VmkMultiscan>>,
    raw_group: usize,
    idx: usize,
    started: bool,
    on_entry: bool,
    /// The family scanned (`None`: default); last, so that the scans and
    /// the iterator reading it are gone before its handle is released.
    family: Option<CfRef>,
}

// SAFETY: the shim's state is a RocksDB MultiScan (an iterator plus owned
// keys). RocksDB iterators may be used from any thread as long as calls are
// not concurrent; `MultiScan` takes `&mut self` for every move, and the
// `&self` accessors only read the current entry. `&DB` is Send (DB is Sync).
unsafe impl Send for NativeMultiScan<'_> {}

impl<'a> NativeMultiScan<'a> {
    pub(super) fn new(
        db: &'a DB,
        family: Option<CfRef>,
        ro: &ReadOptions,
        snapshot: Option<Arc<RocksSnapshot>>,
        args: &MultiScanArgs,
    ) -> Result<Self> {
        args.validate()?;
        let lower = ro.iterate_lower_bound.as_deref();
        let upper = ro.iterate_upper_bound.as_deref();
        let mut slots = Vec::with_capacity(args.ranges.len());
        let mut kept: Vec<NativeRange> = Vec::with_capacity(args.ranges.len());
        for r in &args.ranges {
            // validate() guarantees every range has a start.
            let start = r.start.as_deref().unwrap_or_default();
            match clip(start, r.limit.as_deref(), lower, upper) {
                Some((s, Some(l))) => {
                    slots.push(Slot::Native(kept.len()));
                    kept.push((s, Some(l)));
                }
                Some((s, None)) => slots.push(Slot::Unbounded(s)),
                None => slots.push(Slot::Empty),
            }
        }
        let groups = group(&kept);
        let mut ms = NativeMultiScan {
            db,
            ro: ro.clone(),
            snapshot,
            use_async_io: args.use_async_io,
            io_coalesce_threshold: args.io_coalesce_threshold,
            max_prefetch_size: args.max_prefetch_size,
            kept,
            slots,
            iter: None,
            iter_started: false,
            groups,
            raw: None,
            raw_group: 0,
            idx: 0,
            started: false,
            on_entry: false,
            family,
        };
        // Create the first native scan now, as RocksDB does in NewMultiScan
        // (Prepare, i.e. the prefetch, happens here).
        if !ms.groups.is_empty() {
            ms.open_group(0)?;
        }
        Ok(ms)
    }

    fn close(&mut self) {
        if let Some(raw) = self.raw.take() {
            // SAFETY: `raw` came from vmk_multiscan_new and is destroyed once.
            unsafe { vmk_multiscan_destroy(raw.as_ptr()) }
        }
    }

    /// Replaces the native scan with one over group `g`.
    fn open_group(&mut self, g: usize) -> Result<()> {
        self.close();
        let Some(&(first, end)) = self.groups.get(g) else {
            return Ok(());
        };
        let ranges = &self.kept[first..end];
        let starts: Vec<*const c_char> = ranges.iter().map(|(s, _)| s.as_ptr().cast()).collect();
        let start_lens: Vec<usize> = ranges.iter().map(|(s, _)| s.len()).collect();
        let limits: Vec<*const c_char> = ranges
            .iter()
            .map(|(_, l)| {
                // A non-null pointer marks a bounded range; an empty limit
                // (impossible after validation) still gets one.
                l.as_ref().map_or(std::ptr::null(), |l| {
                    if l.is_empty() {
                        c"".as_ptr()
                    } else {
                        l.as_ptr().cast()
                    }
                })
            })
            .collect();
        let limit_lens: Vec<usize> = ranges
            .iter()
            .map(|(_, l)| l.as_ref().map_or(0, Vec::len))
            .collect();
        let mut st = VmkStatus::new();
        // SAFETY: `self.db.as_raw_ptr()` is the live `rocksdb_t*` of the DB,
        // which outlives the scan (lifetime 'a); the family handle, if any,
        // is held by `self.family` until the scan is destroyed. The four arrays have
        // `ranges.len()` elements and stay valid for the call; the shim
        // copies every key before returning. `st` is a valid out-pointer.
        let raw = unsafe {
            vmk_multiscan_new(
                self.db.as_raw_ptr(),
                self.snapshot.as_ref().map_or(std::ptr::null(), |s| s.raw()),
                self.family
                    .as_ref()
                    .map_or(std::ptr::null(), |h| h.inner().cast_const()),
                c_uchar::from(self.ro.fill_cache),
                c_uchar::from(self.ro.verify_checksums),
                c_uchar::from(self.ro.async_io),
                self.ro.readahead_size,
                ranges.len(),
                starts.as_ptr(),
                start_lens.as_ptr(),
                limits.as_ptr(),
                limit_lens.as_ptr(),
                c_uchar::from(self.use_async_io),
                self.io_coalesce_threshold,
                self.max_prefetch_size,
                &mut st,
            )
        };
        match NonNull::new(raw) {
            Some(p) => {
                self.raw = Some(p);
                self.raw_group = g;
                Ok(())
            }
            None => Err(st.to_error()),
        }
    }

    /// The group of kept range `k`.
    fn group_of(&self, k: usize) -> usize {
        self.groups.partition_point(|&(_, end)| end <= k)
    }

    fn slice(&self, value: bool) -> &[u8] {
        if !self.on_entry {
            return &[];
        }
        if let Some(it) = &self.iter {
            let v = if value { it.value() } else { it.key() };
            return v.unwrap_or_default();
        }
        let Some(raw) = self.raw else {
            return &[];
        };
        let mut data: *const c_char = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: `raw` is live until closed; the out-pointers are valid.
        unsafe {
            if value {
                vmk_multiscan_value(raw.as_ptr(), &mut data, &mut len);
            } else {
                vmk_multiscan_key(raw.as_ptr(), &mut data, &mut len);
            }
        }
        if data.is_null() || len == 0 {
            return &[];
        }
        // SAFETY: the shim returns RocksDB's pinned key/value slice for the
        // current entry, valid until the scan moves, which needs `&mut self`
        // and so cannot happen while this borrow of `self` lives.
        unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
    }
}

impl MultiScan for NativeMultiScan<'_> {
    fn next_range(&mut self) -> Result<bool> {
        if self.started {
            if self.idx >= self.slots.len() {
                return Ok(false);
            }
            self.idx += 1;
        }
        self.started = true;
        self.on_entry = false;
        self.iter = None;
        let Some(slot) = self.slots.get(self.idx).cloned() else {
            self.close();
            return Ok(false);
        };
        let k = match slot {
            Slot::Empty => return Ok(true),
            Slot::Unbounded(start) => {
                let mut ro = super::read_options(&self.ro, false);
                if let Some(s) = &self.snapshot {
                    s.apply(&mut ro);
                }
                ro.set_iterate_lower_bound(start);
                let db = self.db;
                self.iter = Some(match &self.family {
                    None => db.raw_iterator_opt(ro),
                    Some(h) => db.raw_iterator_cf_opt(h, ro),
                });
                self.iter_started = false;
                return Ok(true);
            }
            Slot::Native(k) => k,
        };
        let g = self.group_of(k);
        if self.raw.is_none() || self.raw_group != g {
            self.open_group(g)?;
        }
        let Some(raw) = self.raw else {
            self.slots[self.idx] = Slot::Empty;
            return Ok(true);
        };
        let mut st = VmkStatus::new();
        // SAFETY: `raw` is live until closed; `st` is a valid out-pointer.
        let r = unsafe { vmk_multiscan_next_range(raw.as_ptr(), &mut st) };
        match r {
            // The native scan holds exactly the group's ranges, visited in
            // lock-step, so it cannot run out early; if it did, the range
            // reads as empty.
            0 => {
                self.slots[self.idx] = Slot::Empty;
                Ok(true)
            }
            r if r > 0 => Ok(true),
            _ => Err(st.to_error()),
        }
    }

    fn next_entry(&mut self) -> Result<bool> {
        if !self.started {
            return Ok(false);
        }
        if let Some(it) = self.iter.as_mut() {
            if !self.iter_started {
                self.iter_started = true;
                it.seek_to_first();
            } else if it.valid() {
                it.next();
            }
            self.on_entry = it.valid();
            if !self.on_entry {
                it.status()
                    .map_err(|e| super::map_err("multiscan iterator", e))?;
            }
            return Ok(self.on_entry);
        }
        if !matches!(self.slots.get(self.idx), Some(Slot::Native(_))) {
            return Ok(false);
        }
        let Some(raw) = self.raw else {
            return Ok(false);
        };
        let mut st = VmkStatus::new();
        // SAFETY: `raw` is live until closed; `st` is a valid out-pointer.
        let r = unsafe { vmk_multiscan_next_entry(raw.as_ptr(), &mut st) };
        self.on_entry = r > 0;
        match r {
            0 => Ok(false),
            r if r > 0 => Ok(true),
            _ => Err(st.to_error()),
        }
    }

    fn range_index(&self) -> usize {
        self.idx
    }

    fn key(&self) -> &[u8] {
        self.slice(false)
    }

    fn value(&self) -> &[u8] {
        self.slice(true)
    }
}

impl Drop for NativeMultiScan<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::{clip, group};

    #[test]
    fn clipping_intersects_ranges_with_bounds() {
        assert_eq!(
            clip(b"b", Some(b"d"), None, None),
            Some((b"b".to_vec(), Some(b"d".to_vec())))
        );
        assert_eq!(
            clip(b"b", Some(b"d"), Some(b"c"), None),
            Some((b"c".to_vec(), Some(b"d".to_vec())))
        );
        assert_eq!(
            clip(b"b", None, None, Some(b"c")),
            Some((b"b".to_vec(), Some(b"c".to_vec())))
        );
        assert_eq!(clip(b"b", Some(b"d"), Some(b"d"), None), None);
        assert_eq!(clip(b"b", None, None, Some(b"a")), None);
    }

    fn r(s: &str, l: Option<&str>) -> (Vec<u8>, Option<Vec<u8>>) {
        (s.as_bytes().to_vec(), l.map(|l| l.as_bytes().to_vec()))
    }

    #[test]
    fn groups_are_disjoint_and_unbounded_ranges_stand_alone() {
        let disjoint = [r("a", Some("b")), r("b", Some("c")), r("d", Some("e"))];
        assert_eq!(group(&disjoint), vec![(0, 3)]);
        let overlap = [r("a", Some("c")), r("b", Some("d")), r("e", Some("f"))];
        assert_eq!(group(&overlap), vec![(0, 1), (1, 3)]);
        let same_start = [r("a", Some("b")), r("a", Some("b"))];
        assert_eq!(group(&same_start), vec![(0, 1), (1, 2)]);
        let unbounded = [
            r("a", Some("b")),
            r("c", None),
            r("d", None),
            r("e", Some("f")),
        ];
        assert_eq!(group(&unbounded), vec![(0, 1), (1, 2), (2, 3), (3, 4)]);
        assert!(group(&[]).is_empty());
    }
}
