//! MultiScan (issue 6): async (io_uring) == sync == a model of the data, on
//! random data and random range sets; no torn values under concurrent
//! writes; the forced fallback path gives the same results.
//!
//! The scan is driven over a real T1 and a real value log built here
//! (records appended with `Log::append`, locators upserted into T1, as the
//! engine's write path does), with small segments so that values and
//! ranges cross segment boundaries.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use vmemkv::internals::Kind;
use vmemkv::internals::Log;
use vmemkv::internals::MapOpts;
use vmemkv::internals::{self as multiscan, residency};
use vmemkv::internals::{Entry, Locator, Payload, T1Config, T1};
use vmemkv::{BufferMode, MultiScanArgs, MultiScanOptions, MultiScanStats, ScanRange};

const SEG: usize = 64 << 10;

struct Store {
    _dir: tempfile::TempDir,
    t1: T1,
    log: Log,
}

fn store() -> Store {
    store_with(SEG)
}

fn store_with(seg_size: usize) -> Store {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mo = MapOpts {
        prefault: false,
        random: true,
    };
    let log = Log::create(dir.path(), seg_size, mo).unwrap_or_else(|e| panic!("{e}"));
    let t1 = T1::new(T1Config {
        background: false,
        split_threshold: 64,
        ..T1Config::default()
    });
    Store { _dir: dir, t1, log }
}

impl Store {
    /// Pages of the whole log in the page cache.
    fn resident_pages(&self) -> usize {
        self.log
            .segments()
            .iter()
            .map(|s| residency::resident_pages_in(s, 0, s.size()))
            .sum()
    }

    fn put(&self, k: &[u8], v: &[u8]) {
        let a = self
            .log
            .append(
                Kind::Batch,
                1,
                None,
                0,
                &[k, &crc32c::crc32c(v).to_le_bytes(), v],
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let payload = Payload::inline(v).unwrap_or(Payload::Stored(Locator {
            segment: a.seg.id,
            offset: (a.body_off + k.len() + 4) as u32,
            len: v.len() as u32,
        }));
        self.t1.upsert(
            k,
            Entry {
                seq: a.lsn,
                payload,
            },
        );
    }

    fn delete(&self, k: &[u8]) {
        let a = self
            .log
            .append(Kind::Batch, 1, None, 0, &[k])
            .unwrap_or_else(|e| panic!("{e}"));
        self.t1.upsert(
            k,
            Entry {
                seq: a.lsn,
                payload: Payload::Tombstone,
            },
        );
    }

    fn evict(&self) {
        for s in self.log.segments() {
            residency::evict(&s).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

type Results = Vec<Vec<(Vec<u8>, Vec<u8>)>>;

fn run(st: &Store, args: &MultiScanOptions) -> (Results, MultiScanStats) {
    let ms =
        multiscan::multi_scan(&st.t1, &st.log, args).unwrap_or_else(|e| panic!("multi_scan: {e}"));
    drain(ms)
}

/// Every range's entries, and the scan's stats once it is consumed.
fn drain(mut ms: vmemkv::MultiScanIter<'_>) -> (Results, MultiScanStats) {
    let mut out = Vec::new();
    let mut i = 0;
    while ms.next_range().unwrap_or_else(|e| panic!("{e}")) {
        assert_eq!(ms.range_index(), i);
        let mut r = Vec::new();
        while ms.next_entry().unwrap_or_else(|e| panic!("{e}")) {
            r.push((ms.key().to_vec(), ms.value().to_vec()));
        }
        out.push(r);
        i += 1;
    }
    (out, ms.stats())
}

fn model_scan(m: &BTreeMap<Vec<u8>, Vec<u8>>, ranges: &[ScanRange]) -> Results {
    ranges
        .iter()
        .map(|r| {
            let lo = r.start.clone().unwrap_or_default();
            m.range(lo..)
                .take_while(|(k, _)| r.limit.as_ref().is_none_or(|l| *k < l))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect()
}

fn key(n: u32) -> Vec<u8> {
    format!("key{n:06}").into_bytes()
}

/// A value that names its key and version, so a torn or misplaced value
/// is detectable: `key|version|` then filler derived from both.
fn value(k: &[u8], ver: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(k);
    v.push(b'|');
    v.extend_from_slice(&ver.to_le_bytes());
    v.push(b'|');
    let mut x = u64::from(ver) ^ 0x9E37_79B9_7F4A_7C15 ^ (k.len() as u64);
    for &b in k {
        x = x.rotate_left(5) ^ u64::from(b);
    }
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v.truncate(len.max(k.len() + 6));
    v
}

fn check_value(k: &[u8], v: &[u8]) -> bool {
    if v.len() < k.len() + 6 || &v[..k.len()] != k {
        return false;
    }
    let ver = u32::from_le_bytes([
        v[k.len() + 1],
        v[k.len() + 2],
        v[k.len() + 3],
        v[k.len() + 4],
    ]);
    value(k, ver, v.len()) == v
}

fn args(ranges: Vec<ScanRange>, async_io: bool) -> MultiScanOptions {
    MultiScanOptions::with_async_io(ranges, async_io)
}

/// Async, with RocksDB's coalescing threshold and prefetch limit set.
fn coalescing(ranges: Vec<ScanRange>, threshold: u64, max_prefetch_size: u64) -> MultiScanOptions {
    MultiScanOptions::from(MultiScanArgs {
        use_async_io: true,
        io_coalesce_threshold: threshold,
        max_prefetch_size,
        ..MultiScanArgs::new(ranges)
    })
}

/// Async, with reads going where `mode` sends them.
fn async_in(mode: BufferMode, ranges: Vec<ScanRange>) -> MultiScanOptions {
    MultiScanOptions {
        buffer_mode: mode,
        ..args(ranges, true)
    }
}

fn load_sequential(st: &Store, n: u32, len: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for i in 0..n {
        let (k, v) = (key(i), value(&key(i), 0, len));
        st.put(&k, &v);
        m.insert(k, v);
    }
    m
}

#[test]
fn cold_async_reads_through_io_uring_and_matches_sync() {
    let st = store();
    let m = load_sequential(&st, 3000, 300);
    let ranges = vec![
        ScanRange::new(&key(10), &key(110)),
        ScanRange::new(&key(1000), &key(1100)),
        ScanRange::unbounded(&key(2500)),
    ];
    st.evict();
    let (a, stats) = run(&st, &args(ranges.clone(), true));
    assert!(stats.io_uring, "io_uring should be available on this host");
    assert!(stats.reads > 0, "a cold scan must read: {stats:?}");
    // 3 ranges of contiguous values: coalescing makes few reads.
    assert!(stats.reads < 40, "reads were not coalesced: {stats:?}");
    assert_eq!(stats.failed_reads, 0);
    let (s, sstats) = run(&st, &args(ranges.clone(), false));
    assert!(!sstats.io_uring);
    assert_eq!(a, s);
    assert_eq!(a, model_scan(&m, &ranges));
    // Warm now: nothing left to read.
    let (w, wstats) = run(&st, &args(ranges.clone(), true));
    assert_eq!(w, a);
    assert_eq!(
        wstats.reads, 0,
        "resident pages must not be read: {wstats:?}"
    );
    assert!(wstats.resident_pages > 0);
}

#[test]
fn page_cache_mode_and_coalesce_threshold_give_identical_results() {
    let st = store();
    let m = load_sequential(&st, 2000, 700);
    let ranges = vec![
        ScanRange::new(&key(0), &key(300)),
        ScanRange::new(&key(900), &key(950)),
        ScanRange::unbounded(&key(1500)),
    ];
    let expect = model_scan(&m, &ranges);
    for mode in [BufferMode::Owned, BufferMode::PageCache, BufferMode::Direct] {
        for thr in [0, 4096, 1 << 20] {
            st.evict();
            let a = MultiScanOptions {
                buffer_mode: mode,
                ..coalescing(ranges.clone(), thr, 0)
            };
            let (r, stats) = run(&st, &a);
            assert!(stats.reads > 0);
            assert_eq!(r, expect, "mode {mode:?} threshold {thr}");
        }
    }
}

/// A direct read spans its first value's checksum to its last value's end,
/// aligned to the file's `O_DIRECT` alignment (512 B on a device with
/// 512-byte logical blocks), not to pages: a 64 KB read of 100 values then
/// carries ~0.5 KB of neighbours instead of ~4 KB.
#[test]
fn direct_reads_cover_their_values_to_the_sector_not_the_page() {
    let st = store_with(4 << 20);
    let m = load_sequential(&st, 400, 600);
    let span = |from: u32, to: u32| -> (u64, u64) {
        let at = |i: u32| match st.t1.get(&key(i)) {
            Some(Entry {
                payload: Payload::Stored(l),
                ..
            }) => (u64::from(l.offset), u64::from(l.len)),
            other => panic!("key {i}: {other:?}"),
        };
        let ((first, _), (last, len)) = (at(from), at(to - 1));
        (first - 4, last + len)
    };
    let ranges = vec![
        ScanRange::new(&key(10), &key(110)),
        ScanRange::new(&key(201), &key(290)),
    ];
    let align = st
        .log
        .segments()
        .first()
        .map_or(4096, |s| s.direct_align() as u64);
    st.evict();
    let a = async_in(BufferMode::Direct, ranges.clone());
    let (r, stats) = run(&st, &a);
    assert_eq!(r, model_scan(&m, &ranges));
    assert_eq!(stats.reads, 2, "{stats:?}");
    let want: u64 = [span(10, 110), span(201, 290)]
        .iter()
        .map(|&(s, e)| e.div_ceil(align) * align - s / align * align)
        .sum();
    assert_eq!(stats.bytes, want, "{stats:?} (alignment {align})");
}

/// Reads into owned buffers must hold whole values: a value cut between
/// two reads (or one read and a resident page) was served through the
/// mapping, faulting in page by page (64 KiB values ran at 2 ops/s).
#[test]
fn owned_buffer_reads_serve_every_cold_value_from_a_buffer() {
    for mode in [BufferMode::Direct, BufferMode::Owned] {
        // One segment holds them all, so reads are cut by size only.
        let st = store_with(4 << 20);
        // Odd sizes: values start anywhere in a page and span several,
        // and consecutive values share pages.
        let mut m = BTreeMap::new();
        for i in 0..120u32 {
            let k = key(i);
            let v = value(&k, 1, 3000 + (i as usize * 797) % 13_000);
            st.put(&k, &v);
            m.insert(k, v);
        }
        let ranges = vec![
            ScanRange::new(&key(0), &key(70)),
            ScanRange::unbounded(&key(90)),
        ];
        // Without resident pages the first range (~650 KiB) is cut into
        // reads of at most 512 KiB between values sharing a page.
        for (thr, touch) in [(0, false), (16 << 10, false), (0, true), (16 << 10, true)] {
            st.evict();
            // Make every other value's first page resident: a partly
            // resident value is still read whole.
            let segs = st.log.segments();
            for i in (0..120).step_by(2).filter(|_| touch) {
                if let Some(Entry {
                    payload: Payload::Stored(l),
                    ..
                }) = st.t1.get(&key(i))
                {
                    let seg = segs.iter().find(|s| s.id == l.segment);
                    let b = seg.and_then(|s| s.bytes(l.offset as usize, 1));
                    assert!(b.is_some_and(|b| std::hint::black_box(b[0]) == b[0]));
                }
            }
            let a = MultiScanOptions {
                buffer_mode: mode,
                ..coalescing(ranges.clone(), thr, 0)
            };
            // Values with every page resident need no read at all.
            let resident = |k: &[u8]| match st.t1.get(k) {
                Some(Entry {
                    payload: Payload::Stored(l),
                    ..
                }) => segs.iter().find(|s| s.id == l.segment).is_some_and(|s| {
                    let lo = (l.offset as usize - 4) / 4096 * 4096;
                    let hi = (l.offset + l.len) as usize;
                    residency::resident_pages_in(s, lo, hi - lo) == (hi - lo).div_ceil(4096)
                }),
                _ => false,
            };
            let expect = model_scan(&m, &ranges);
            let cold = expect
                .iter()
                .flatten()
                .filter(|(k, _)| !resident(k))
                .count() as u64;
            assert!(cold > 60, "the test needs cold values: {cold}");
            let (r, stats) = run(&st, &a);
            assert_eq!(r, expect, "{mode:?}");
            assert!(
                stats.buffered_values >= cold,
                "{mode:?} threshold {thr}: every value not resident comes from a read buffer: {stats:?}"
            );
        }
    }
}

/// Owned-buffer reads go through the page cache but bring in only the
/// pages they name. Kernel readahead past them (~512 KiB after an 80 KiB
/// read) read what a strided scan never uses, and made a later range's
/// pages look resident to the planner while it was still planning.
#[test]
fn owned_buffer_reads_bring_in_only_their_own_pages() {
    let st = store_with(4 << 20);
    let m = load_sequential(&st, 400, 8000);
    st.evict();
    let ranges = vec![ScanRange::new(&key(0), &key(10))];
    let a = MultiScanOptions {
        buffer_mode: BufferMode::Owned,
        ..args(ranges.clone(), true)
    };
    let (r, stats) = run(&st, &a);
    assert_eq!(r, model_scan(&m, &ranges));
    assert_eq!(stats.buffered_values, 10, "{stats:?}");
    let resident = st.resident_pages();
    // The read's pages, plus one at each end where it is not page-aligned.
    let read = stats.bytes.div_ceil(4096) as usize + 2;
    assert!(
        resident <= read,
        "{resident} pages resident after reading {read}: {stats:?}"
    );
}

/// Auto on a log smaller than memory: the first scan of cold data reads
/// it directly (nothing enters the page cache), a second scan of the same
/// bytes advises them into the page cache, and a third reads nothing.
#[test]
fn auto_mode_reads_cold_data_directly_and_caches_what_is_scanned_again() {
    let st = store();
    let m = load_sequential(&st, 300, 700);
    let ranges = vec![ScanRange::new(&key(0), &key(200))];
    st.evict();
    let a = async_in(BufferMode::Auto, ranges.clone());
    let (r, first) = run(&st, &a);
    assert_eq!(r, model_scan(&m, &ranges));
    assert!(first.reads > 0, "{first:?}");
    assert_eq!(first.buffered_values, 200, "{first:?}");
    assert_eq!(first.readmitted_windows, 0, "{first:?}");
    let (r2, again) = run(&st, &a);
    assert_eq!(r2, r);
    assert!(
        again.reads > 0,
        "direct reads left nothing cached: {again:?}"
    );
    assert_eq!(again.buffered_values, 0, "{again:?}");
    assert!(again.readmitted_windows > 0, "{again:?}");
    let (r3, warm) = run(&st, &a);
    assert_eq!(r3, r);
    assert_eq!(warm.reads, 0, "{warm:?}");
}

/// Auto with another async scan of the same database running: concurrent
/// scans share the disk, so a scan that starts meanwhile reads through the
/// page cache (pages it caches serve later overlapping ranges); the scan
/// that started alone, and one started once it is done, read directly.
#[test]
fn auto_mode_reads_through_the_page_cache_while_another_scan_runs() {
    let st = store();
    // Large enough that these scans stay far from a quarter of the log,
    // past which every Auto window goes through the page cache anyway.
    let m = load_sequential(&st, 6000, 700);
    let first = vec![ScanRange::new(&key(0), &key(200))];
    let during = vec![ScanRange::new(&key(3000), &key(3200))];
    let after = vec![ScanRange::new(&key(5000), &key(5100))];
    st.evict();
    let running =
        multiscan::multi_scan(&st.t1, &st.log, &async_in(BufferMode::Auto, first.clone()))
            .unwrap_or_else(|e| panic!("{e}"));
    let (r, meanwhile) = run(&st, &async_in(BufferMode::Auto, during.clone()));
    assert_eq!(r, model_scan(&m, &during));
    assert!(meanwhile.reads > 0, "{meanwhile:?}");
    assert_eq!(meanwhile.buffered_values, 0, "{meanwhile:?}");
    let cached = st.resident_pages();
    assert!(
        cached * residency::PAGE >= 200 * 700,
        "{cached} pages cached"
    );
    let (r, alone) = drain(running);
    assert_eq!(r, model_scan(&m, &first));
    assert_eq!(alone.buffered_values, 200, "{alone:?}");
    st.evict();
    let (r, later) = run(&st, &async_in(BufferMode::Auto, after.clone()));
    assert_eq!(r, model_scan(&m, &after));
    assert_eq!(later.buffered_values, 100, "{later:?}");
}

/// One Auto scan mixes both kinds of read: windows scanned before are
/// advised into the page cache, new ones are read directly, and every
/// value is right either way (checksums verified).
#[test]
fn auto_mode_mixes_cached_and_direct_windows_in_one_scan() {
    let st = store_with(4 << 20);
    let m = load_sequential(&st, 3000, 700);
    let seen: Vec<ScanRange> = (0..4)
        .map(|i| ScanRange::new(&key(i * 700), &key(i * 700 + 100)))
        .collect();
    let all: Vec<ScanRange> = (0..4)
        .flat_map(|i| {
            [
                ScanRange::new(&key(i * 700), &key(i * 700 + 100)),
                ScanRange::new(&key(i * 700 + 400), &key(i * 700 + 500)),
            ]
        })
        .collect();
    let auto = |rs: &[ScanRange]| async_in(BufferMode::Auto, rs.to_vec());
    st.evict();
    let (r, first) = run(&st, &auto(&seen));
    assert_eq!(r, model_scan(&m, &seen));
    assert_eq!(first.readmitted_windows, 0, "{first:?}");
    let (r, mixed) = run(&st, &auto(&all));
    assert_eq!(r, model_scan(&m, &all));
    assert_eq!(mixed.readmitted_windows, 4, "{mixed:?}");
    assert_eq!(mixed.buffered_values, 400, "{mixed:?}");
}

/// A window that only overlaps an earlier scan's (70% of its pages read
/// before) is new data: Auto still reads it directly. Only a window read
/// nearly whole before goes through the page cache.
#[test]
fn auto_mode_reads_a_partly_overlapping_window_directly() {
    let st = store_with(4 << 20);
    let m = load_sequential(&st, 1000, 700);
    let auto = |a: u32, b: u32| async_in(BufferMode::Auto, vec![ScanRange::new(&key(a), &key(b))]);
    st.evict();
    let (r, _) = run(&st, &auto(0, 100));
    assert_eq!(r, model_scan(&m, &[ScanRange::new(&key(0), &key(100))]));
    let (r, overlap) = run(&st, &auto(30, 130));
    assert_eq!(r, model_scan(&m, &[ScanRange::new(&key(30), &key(130))]));
    assert_eq!(overlap.readmitted_windows, 0, "{overlap:?}");
    assert_eq!(overlap.buffered_values, 100, "{overlap:?}");
    let (_, again) = run(&st, &auto(30, 130));
    assert_eq!(again.readmitted_windows, 1, "{again:?}");
}

/// Once Auto scans have read a quarter of a log that fits in memory they
/// are re-reading it, so later scans advise every window into the page
/// cache, data never read before included, and a long run warms up as
/// the synchronous path's does. Until then new data is read directly.
#[test]
fn auto_mode_caches_new_data_once_scans_have_read_a_quarter_of_the_log() {
    let st = store_with(1 << 20);
    let m = load_sequential(&st, 1000, 700);
    assert_eq!(st.log.approx_total_bytes(), 1 << 20, "one segment");
    let auto = |a: u32| {
        async_in(
            BufferMode::Auto,
            vec![ScanRange::new(&key(a), &key(a + 100))],
        )
    };
    let check = |a: u32| {
        let (r, s) = run(&st, &auto(a));
        assert_eq!(r, model_scan(&m, &[ScanRange::new(&key(a), &key(a + 100))]));
        s
    };
    st.evict();
    // Each scan reads ~80 KiB, 8% of the log, none of it read before.
    for a in [0, 100] {
        let s = check(a);
        assert_eq!(s.readmitted_windows, 0, "scan at {a}: {s:?}");
        assert_eq!(s.buffered_values, 100, "scan at {a}: {s:?}");
    }
    check(200);
    check(300);
    // A third of the log read: new data goes through the page cache...
    let s = check(500);
    assert!(s.reads > 0, "{s:?}");
    assert_eq!(s.readmitted_windows, 1, "{s:?}");
    assert_eq!(s.buffered_values, 0, "{s:?}");
    // ...and stays there.
    let warm = check(500);
    assert_eq!(warm.reads, 0, "{warm:?}");
    // Data read directly before is advised too, though it was read once
    // only (the 90% rule alone would wait for a second read).
    let s = check(0);
    assert_eq!(s.readmitted_windows, 1, "{s:?}");
    assert_eq!(s.buffered_values, 0, "{s:?}");
}

#[test]
fn prefetch_limit_continues_synchronously() {
    let st = store();
    let m = load_sequential(&st, 2000, 1000);
    let ranges = vec![
        ScanRange::new(&key(0), &key(500)),
        ScanRange::new(&key(1000), &key(1500)),
    ];
    st.evict();
    let a = coalescing(
        ranges.clone(),
        vmemkv::DEFAULT_IO_COALESCE_THRESHOLD,
        64 << 10,
    );
    let (r, stats) = run(&st, &a);
    assert!(stats.prefetch_limited, "{stats:?}");
    assert!(stats.bytes <= 64 << 10, "{stats:?}");
    assert_eq!(r, model_scan(&m, &ranges));
}

#[test]
fn forced_fallback_gives_identical_results() {
    let st = store();
    let m = load_sequential(&st, 1500, 100);
    let ranges = vec![
        ScanRange::new(&key(5), &key(50)),
        ScanRange::unbounded(&key(1000)),
    ];
    st.evict();
    let a = MultiScanOptions {
        disable_io_uring: true,
        ..args(ranges.clone(), true)
    };
    let (r, stats) = run(&st, &a);
    assert!(!stats.io_uring);
    assert_eq!(stats.reads, 0);
    assert_eq!(r, model_scan(&m, &ranges));
    let (r2, _) = run(&st, &args(ranges.clone(), true));
    assert_eq!(r, r2);
}

#[test]
fn validation_matches_rocksdb() {
    let st = store();
    let bad = [
        vec![],
        vec![ScanRange {
            start: None,
            limit: None,
        }],
        vec![ScanRange::new(b"b", b"a")],
        vec![ScanRange::new(b"b", b"b")],
        vec![ScanRange::new(b"c", b"d"), ScanRange::new(b"a", b"b")],
    ];
    for r in bad {
        for a in [true, false] {
            let res = multiscan::multi_scan(&st.t1, &st.log, &args(r.clone(), a));
            assert!(
                matches!(res, Err(vmemkv::Error::InvalidArgument(_))),
                "{r:?} accepted"
            );
        }
    }
}

#[test]
fn read_bounds_intersect_ranges_and_ranges_can_be_abandoned() {
    let st = store();
    let m = load_sequential(&st, 500, 50);
    let ranges = vec![
        ScanRange::new(&key(0), &key(100)),
        ScanRange::new(&key(200), &key(300)),
        ScanRange::unbounded(&key(400)),
    ];
    let a = MultiScanOptions {
        lower_bound: Some(key(50)),
        upper_bound: Some(key(450)),
        ..args(ranges, true)
    };
    st.evict();
    let (r, _) = run(&st, &a);
    let expect = model_scan(
        &m,
        &[
            ScanRange::new(&key(50), &key(100)),
            ScanRange::new(&key(200), &key(300)),
            ScanRange::new(&key(400), &key(450)),
        ],
    );
    assert_eq!(r, expect);
    // Skipping ranges half-read and dropping the scan mid-flight is fine.
    st.evict();
    let mut ms = multiscan::multi_scan(&st.t1, &st.log, &a).unwrap_or_else(|e| panic!("{e}"));
    assert!(ms.next_range().unwrap_or_else(|e| panic!("{e}")));
    assert!(ms.next_entry().unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(ms.key(), key(50).as_slice());
    assert!(ms.next_range().unwrap_or_else(|e| panic!("{e}")));
    assert!(ms.next_entry().unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(ms.value(), m[&key(200)].as_slice());
    drop(ms);
}

#[test]
fn concurrent_writes_never_yield_torn_values() {
    let st = Arc::new(store());
    let n = 1500u32;
    for i in 0..n {
        st.put(&key(i), &value(&key(i), 0, 64 + (i as usize % 7) * 300));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (st, stop) = (st.clone(), stop.clone());
        std::thread::spawn(move || {
            // ~20k versions while the readers run here; the cap keeps a
            // slow machine's log (64 KiB segments, never retired) bounded.
            let mut ver = 1u32;
            while !stop.load(Ordering::Relaxed) && ver < 200_000 {
                let i = ver.wrapping_mul(2_654_435_761) % n;
                let len = 20 + (ver as usize % 11) * 173;
                if ver.is_multiple_of(13) {
                    st.delete(&key(i));
                } else {
                    st.put(&key(i), &value(&key(i), ver, len));
                }
                ver += 1;
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let st = st.clone();
            std::thread::spawn(move || {
                let mut checked = 0usize;
                for round in 0..30u32 {
                    if round.is_multiple_of(3) {
                        st.evict();
                    }
                    let base = (round * 37 + t * 100) % 1000;
                    let ranges = vec![
                        ScanRange::new(&key(base), &key(base + 150)),
                        ScanRange::new(&key(base + 300), &key(base + 400)),
                        ScanRange::unbounded(&key(base + 450)),
                    ];
                    // Every buffer mode, async and sync: direct reads of
                    // pages a writer is dirtying must still see whole values.
                    // Auto switches between direct and page-cache reads as
                    // the other reader's scans come and go.
                    let modes = [
                        BufferMode::PageCache,
                        BufferMode::Direct,
                        BufferMode::Owned,
                        BufferMode::Auto,
                    ];
                    let a = MultiScanOptions {
                        buffer_mode: modes[round as usize % modes.len()],
                        ..args(ranges, round % 2 == 0)
                    };
                    let (r, _) = run(&st, &a);
                    for (k, v) in r.iter().flatten() {
                        assert!(
                            check_value(k, v),
                            "torn value for {:?}",
                            String::from_utf8_lossy(k)
                        );
                        checked += 1;
                    }
                }
                checked
            })
        })
        .collect();
    let mut total = 0;
    for r in readers {
        total += r.join().unwrap_or_else(|_| panic!("reader panicked"));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap_or_else(|_| panic!("writer panicked"));
    assert!(total > 1000, "only {total} values checked");
}

#[derive(Debug, Clone)]
enum Op {
    Put(u32, usize),
    Del(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..400, prop_oneof![0usize..9, 9usize..600, 3000usize..14000]).prop_map(|(k, l)| Op::Put(k, l)),
        1 => (0u32..400).prop_map(Op::Del),
    ]
}

fn ranges() -> impl Strategy<Value = Vec<ScanRange>> {
    // Starts up to past the last key; limits: none, close, far, or past the end.
    prop::collection::vec((0u32..460, prop::option::of(1u32..120)), 1..8).prop_map(|mut v| {
        v.sort_by_key(|x| x.0);
        v.into_iter()
            .map(|(s, l)| match l {
                Some(l) => ScanRange::new(&key(s), &key(s + l)),
                None => ScanRange::unbounded(&key(s)),
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn async_equals_sync_equals_model(
        ops in prop::collection::vec(op(), 1..400),
        rs in ranges(),
        cold in any::<bool>(),
        thr in prop_oneof![Just(0u64), Just(16u64 << 10), Just(256u64 << 10)],
        limit in prop_oneof![Just(0u64), Just(8u64 << 10)],
        mode in prop_oneof![Just(BufferMode::PageCache), Just(BufferMode::Owned), Just(BufferMode::Direct), Just(BufferMode::Auto)],
    ) {
        let st = store();
        let mut m = BTreeMap::new();
        for (ver, o) in ops.iter().enumerate() {
            match *o {
                Op::Put(k, len) => {
                    let v = value(&key(k), ver as u32, len);
                    let v = if len < 9 { v[..len.min(v.len())].to_vec() } else { v };
                    st.put(&key(k), &v);
                    m.insert(key(k), v);
                }
                Op::Del(k) => {
                    st.delete(&key(k));
                    m.remove(&key(k));
                }
            }
        }
        if cold {
            st.evict();
        }
        let expect = model_scan(&m, &rs);
        let a = MultiScanOptions {
            buffer_mode: mode,
            ..coalescing(rs.clone(), thr, limit)
        };
        let (got_async, _) = run(&st, &a);
        prop_assert_eq!(&got_async, &expect);
        let (got_sync, _) = run(&st, &args(rs.clone(), false));
        prop_assert_eq!(&got_sync, &expect);
        let (got_fb, _) = run(&st, &MultiScanOptions { disable_io_uring: true, ..a });
        prop_assert_eq!(&got_fb, &expect);
    }
}

#[test]
fn unbounded_ranges_refill_across_windows() {
    let st = store();
    let n = (multiscan::UNBOUNDED_WINDOW * 5) as u32;
    let m = load_sequential(&st, n, 200);
    let ranges = vec![
        ScanRange::new(&key(0), &key(3)),
        ScanRange::unbounded(&key(7)),
    ];
    st.evict();
    let (r, stats) = run(&st, &args(ranges.clone(), true));
    assert_eq!(r, model_scan(&m, &ranges));
    // Later windows were prefetched too (read, or already resident thanks
    // to the kernel's sequential readahead), not read synchronously.
    assert!(stats.reads >= 2, "{stats:?}");
    let covered = stats.bytes as usize + stats.resident_pages as usize * 4096;
    assert!(covered >= (n as usize - 7) * 200, "{stats:?}");
}

#[test]
fn scans_are_send_so_adapters_can_box_them() {
    fn assert_send<T: Send>() {}
    assert_send::<vmemkv::MultiScanIter<'static>>();
}

/// Runs in a child process with `VMEMKV_DISABLE_IO_URING=1` (the variable
/// is read once per process): the async request takes the sync path.
#[test]
fn env_var_forces_the_fallback() {
    if std::env::var_os(multiscan::fallback::DISABLE_ENV).is_some() {
        let st = store();
        let m = load_sequential(&st, 800, 300);
        let ranges = vec![
            ScanRange::new(&key(3), &key(90)),
            ScanRange::unbounded(&key(700)),
        ];
        st.evict();
        let (r, stats) = run(&st, &args(ranges.clone(), true));
        assert!(!stats.io_uring, "{stats:?}");
        assert_eq!(r, model_scan(&m, &ranges));
        return;
    }
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(exe)
        .args(["--exact", "env_var_forces_the_fallback", "--nocapture"])
        .env(multiscan::fallback::DISABLE_ENV, "1")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {text}");
    assert!(text.contains("1 passed"), "child ran nothing: {text}");
}

/// After a warm scan the next one on the thread probes only its first
/// window and a sample; a cold probe clears the hint, so the rest of that
/// scan (and the scan after) plans every window again instead of faulting
/// cold pages in synchronously. Results are the same throughout.
#[test]
fn warm_hint_recovers_when_the_cache_goes_cold() {
    let st = store();
    let m = load_sequential(&st, 3000, 300);
    let ranges: Vec<ScanRange> = (0..15)
        .map(|i| ScanRange::new(&key(i * 190), &key(i * 190 + 40)))
        .collect();
    let expect = model_scan(&m, &ranges);
    let a = async_in(BufferMode::PageCache, ranges.clone());
    st.evict();
    let (r, full) = run(&st, &a);
    assert_eq!(r, expect);
    assert!(full.reads >= 8, "{full:?}");
    let (r, warm) = run(&st, &a);
    assert_eq!(r, expect);
    assert_eq!(warm.reads, 0, "{warm:?}");
    st.evict();
    let (r, hinted) = run(&st, &a);
    assert_eq!(r, expect);
    assert_eq!(hinted.reads, full.reads, "{hinted:?} vs {full:?}");
    st.evict();
    let (r, again) = run(&st, &a);
    assert_eq!(r, expect);
    assert_eq!(again.reads, full.reads, "{again:?} vs {full:?}");
}

/// The synchronous path hands a range's value pages to the kernel when it
/// enters the range (readahead), instead of faulting them in one by one:
/// right after `next_range`, before any value is touched, pages of that
/// range become resident, and pages of a range not yet entered do not.
#[test]
fn cold_sync_scan_reads_ahead_within_the_current_range_only() {
    let st = store();
    load_sequential(&st, 3000, 700);
    st.evict();
    let first = ScanRange::new(&key(100), &key(300));
    let later = ScanRange::new(&key(2500), &key(2700));
    let mut ms = multiscan::multi_scan(&st.t1, &st.log, &args(vec![first, later], false))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ms.next_range().unwrap_or_else(|e| panic!("{e}")));
    let resident_pages = |from: u32, to: u32| -> usize {
        let (lo, hi) = (key(from), key(to));
        let mut segs = std::collections::BTreeSet::new();
        let mut c = st.t1.cursor();
        c.seek(&lo);
        while c.valid() && c.key() < hi.as_slice() {
            if let Payload::Stored(l) = c.entry().payload {
                segs.insert((l.segment, l.offset as usize / 4096));
            }
            c.next();
        }
        segs.iter()
            .filter(|&&(s, page)| {
                st.log
                    .segment(s)
                    .is_some_and(|seg| residency::resident_pages_in(&seg, page * 4096, 4096) == 1)
            })
            .count()
    };
    // WILLNEED reads asynchronously: wait a little for it to land.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while resident_pages(100, 300) < 10 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        resident_pages(100, 300) >= 10,
        "the entered range was not read ahead"
    );
    assert_eq!(
        resident_pages(2500, 2700),
        0,
        "a range not yet entered was read"
    );
}

#[test]
fn prefetch_ahead_is_bounded_and_refilled_as_ranges_are_consumed() {
    let st = store();
    let m = load_sequential(&st, 3000, 700);
    let ranges: Vec<ScanRange> = (0..10)
        .map(|r| ScanRange::new(&key(r * 300), &key(r * 300 + 200)))
        .collect();
    let total = 10 * 200 * 700;
    st.evict();
    let a = MultiScanOptions {
        max_prefetch_ahead: 64 << 10,
        ..args(ranges.clone(), true)
    };
    let ms = multiscan::multi_scan(&st.t1, &st.log, &a).unwrap_or_else(|e| panic!("{e}"));
    let upfront = ms.stats().bytes;
    drop(ms);
    assert!(
        upfront > 0 && upfront <= 128 << 10,
        "{upfront} bytes planned before the first key, limit 64 KiB + one 16 KiB window"
    );
    st.evict();
    let (got, stats) = run(&st, &a);
    assert_eq!(got, model_scan(&m, &ranges));
    assert!(
        stats.bytes >= total,
        "later ranges were not prefetched once room was made: {} of {total} bytes",
        stats.bytes
    );
    assert!(!stats.prefetch_limited);
}
