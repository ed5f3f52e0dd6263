//! Pages ahead of their use: once an iterator scans forward, the value
//! pages of the entries ahead are handed to the kernel before they are
//! touched; and a new segment is cached before the writer reaches it.

mod common;

use common::*;
use vmemkv::internals::residency;
use vmemkv::Bounds;

fn resident_pages(db: &vmemkv::Db) -> usize {
    db.segments()
        .iter()
        .map(|s| residency::resident_pages_in(s, 0, s.size()))
        .sum()
}

fn evict_all(db: &vmemkv::Db) {
    for s in db.segments() {
        residency::evict(&s).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Waits (up to 5 s) for at least `pages` resident pages, which readahead
/// brings in asynchronously; returns the count reached.
fn wait_for_resident(db: &vmemkv::Db, pages: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while resident_pages(db) < pages && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    resident_pages(db)
}

#[test]
fn a_forward_scan_reads_ahead_of_the_entries_it_touched() {
    let dir = tmp();
    let db = open(dir.path());
    put_range(&db, 1000, 0, 3000);
    let mut it = db.iter(Bounds::all());
    // A point seek alone is not a scan: nothing beyond it is read.
    evict_all(&db);
    it.seek(&key(100));
    assert!(it.valid());
    std::thread::sleep(std::time::Duration::from_millis(200));
    let after_seek = resident_pages(&db);
    assert!(after_seek <= 4, "a seek read {after_seek} pages");
    // Two steps make it a scan: the next 16 entries' pages (3000-byte
    // values, ~1 page each) are advised without being touched.
    it.next();
    it.next();
    let ahead = wait_for_resident(&db, after_seek + 12);
    assert!(
        ahead >= after_seek + 12,
        "no readahead: {ahead} pages resident after a 3-entry scan"
    );
    // The scan still returns every entry in order, across windows.
    let mut n = 102;
    while it.valid() {
        assert_eq!(it.key(), key(n).as_slice());
        assert_eq!(it.value(), value(n, 0, 3000).as_slice());
        n += 1;
        it.next();
    }
    assert_eq!(n, 1000);
    it.status().unwrap_or_else(|e| panic!("{e}"));
}

/// A scan that starts in cached pages and runs into cold ones keeps
/// reading ahead when its values are a page or more: the first window
/// finding everything resident must not turn readahead off for the rest
/// of the scan (each cold value would then be faulted page by page).
#[test]
fn a_warm_start_does_not_stop_readahead_for_large_values() {
    let dir = tmp();
    let db = open(dir.path());
    put_range(&db, 400, 0, 8000);
    evict_all(&db);
    // Keys 100..=140 cached, the rest cold.
    for i in 100..=140u64 {
        assert_eq!(db.get(&key(i)).ok().flatten(), Some(value(i, 0, 8000)));
    }
    // Counted before the scan: the readahead it starts may land before
    // any later count (a fast disk, or this thread preempted).
    let before = resident_pages(&db);
    let mut it = db.iter(Bounds::all());
    it.seek(&key(100));
    // The first window (keys 102..=117) finds only cached pages; stepping
    // past it reads the next one (32 keys from 117: 141..=148 are cold,
    // two pages each).
    for _ in 0..20 {
        it.next();
    }
    assert_eq!(it.key(), key(120).as_slice());
    let after = wait_for_resident(&db, before + 12);
    assert!(
        after >= before + 12,
        "no readahead into the cold keys after a warm window: {before} -> {after} pages"
    );
    let mut n = 120;
    while it.valid() {
        assert_eq!(it.value(), value(n, 0, 8000).as_slice());
        n += 1;
        it.next();
    }
    assert_eq!(n, 400);
}

#[test]
fn a_new_segment_is_in_the_page_cache_before_writes_reach_it() {
    let dir = tmp();
    let o = vmemkv::Options::default()
        .segment_size(1 << 20)
        .maintenance_interval_ms(5);
    let db = vmemkv::Db::open(dir.path(), o).unwrap_or_else(|e| panic!("{e}"));
    // The spare is created (and cached) by a background thread; a
    // rollover that comes first creates its own segment, uncached.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !seg_path(dir.path(), 1).exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    // ~1.2 MB: the log rolls over into the spare segment, whose second
    // half no write has reached.
    put_range(&db, 400, 0, 3000);
    let segs = db.segments();
    let active = segs.last().unwrap_or_else(|| panic!("no segment"));
    assert!(active.id >= 1, "no rollover");
    let (start, len) = (active.size() / 2, active.size() / 2 - 4096);
    let pages = len / 4096;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut resident = 0;
    while std::time::Instant::now() < deadline {
        resident = residency::resident_pages_in(active, start, len);
        if resident * 10 >= pages * 9 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        resident * 10 >= pages * 9,
        "{resident} of {pages} pages ahead of the writer are cached"
    );
}
