//! Recovery: torn tails, flipped bytes, in-flight holes, checkpoints.

mod common;

use common::*;
use vmemkv::{Db, Error, WriteOptions};

fn fill(db: &Db, from: u64, to: u64, len: usize) {
    for i in from..to {
        db.put_opt(&WriteOptions::default(), &key(i), &value(i, 0, len))
            .unwrap_or_else(|e| panic!("put: {e}"));
    }
}

fn check(db: &Db, from: u64, to: u64, len: usize) {
    for i in from..to {
        assert_eq!(
            db.get(&key(i)).unwrap_or_else(|e| panic!("get: {e}")),
            Some(value(i, 0, len)),
            "key {i}"
        );
    }
}

#[test]
fn recovery_without_checkpoint_replays_everything() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 3000, 700); // spans several 1 MiB segments
        db.delete(&key(5)).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(!dir.path().join("MANIFEST").exists());
    let db = open(dir.path());
    check(&db, 0, 5, 700);
    check(&db, 6, 3000, 700);
    assert_eq!(db.get(&key(5)).ok().flatten(), None);
    assert!(db.statistics().t2_segments >= 2);
    assert!(info_log(dir.path()).contains("replayed 3001 records"));
    // The replayed entries were merged into the sorted region before the
    // open returned, not left in the append region for scans to merge.
    assert!(db.statistics().t1_reorganizes >= 1);
}

/// Major page faults taken by this thread so far.
fn major_faults() -> i64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    u.ru_majflt
}

/// Drops the page cache of every segment file in `dir`.
fn evict_dir(dir: &std::path::Path) {
    use std::os::fd::AsRawFd;
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{e}")) {
        let p = e.unwrap_or_else(|e| panic!("{e}")).path();
        if p.extension().is_some_and(|x| x == "seg") {
            let f = std::fs::File::open(&p).unwrap_or_else(|e| panic!("{e}"));
            f.sync_all().unwrap_or_else(|e| panic!("{e}"));
            // SAFETY: advisory call on an open fd; touches no memory.
            let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            assert_eq!(rc, 0, "fadvise {}", p.display());
        }
    }
}

/// Segments are mapped `MADV_RANDOM`, so a replay that only touched the
/// mapping read a cold log one synchronous 4 KiB page fault at a time (a
/// 174 MB tail took 3.5-4.2 s cold, 0.2 s warm). Replay asks for the log
/// ahead of itself: a cold open takes a fraction of a fault per page.
#[test]
fn cold_replay_reads_the_log_ahead_instead_of_faulting_page_by_page() {
    let dir = tmp();
    let n = 2000;
    {
        let db = open(dir.path());
        fill(&db, 0, n, 4000); // ~8 MiB of log, no checkpoint
    }
    evict_dir(dir.path());
    let before = major_faults();
    let db = open(dir.path());
    let faults = major_faults() - before;
    assert!(
        info_log(dir.path()).contains(&format!("replayed {n} records")),
        "the log was not replayed: {}",
        info_log(dir.path())
    );
    let pages = n as i64 * 4000 / 4096;
    assert!(
        faults < pages / 4,
        "{faults} major faults replaying ~{pages} pages"
    );
    check(&db, 0, n, 4000);
}

#[test]
fn recovery_with_checkpoint_replays_only_the_tail() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 2000, 500);
        db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
        fill(&db, 2000, 2100, 500);
        db.delete(&key(1)).unwrap_or_else(|e| panic!("{e}"));
        db.put(&key(2), b"new").unwrap_or_else(|e| panic!("{e}"));
    }
    let db = open(dir.path());
    check(&db, 3, 2100, 500);
    assert_eq!(db.get(&key(1)).ok().flatten(), None);
    assert_eq!(db.get(&key(2)).ok().flatten(), Some(b"new".to_vec()));
    let log = info_log(dir.path());
    assert!(
        log.contains("loaded checkpoint CHECKPOINT-00000001.t1 (2000 entries"),
        "{log}"
    );
    assert!(log.contains("replayed 102 records"), "{log}");
    drop(db);
    // Checkpoint again right after open: the replay is now empty.
    let db = open(dir.path());
    db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
    drop(db);
    let db = open(dir.path());
    check(&db, 3, 2100, 500);
    assert!(info_log(dir.path()).contains("replayed 0 records"));
}

#[test]
fn torn_tail_is_truncated_and_logged() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 100, 300);
    }
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    assert_eq!(offs.len(), 100);
    let last = offs[99];
    // A partial write: the end of the last record's body never made it.
    zero_range(&seg, last + 100, 200);
    // After a clean close every record was acknowledged durable.
    assert_lost(dir.path(), "00000000.seg");
    forget_log_end(dir.path(), 1 << 20);
    {
        let db = open(dir.path());
        check(&db, 0, 99, 300);
        assert_eq!(db.get(&key(99)).ok().flatten(), None);
        assert!(
            info_log(dir.path()).contains(&format!("torn tail in 00000000.seg at offset {last}"))
        );
        // New writes land where the torn record was and survive a reopen.
        fill(&db, 1000, 1010, 300);
    }
    let db = open(dir.path());
    check(&db, 0, 99, 300);
    check(&db, 1000, 1010, 300);
}

#[test]
fn flipped_byte_in_the_last_record_header_is_a_torn_tail() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 50, 20);
    }
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    flip_byte(&seg, offs[49] + 30); // inside the LSN field
    assert_lost(dir.path(), "00000000.seg");
    forget_log_end(dir.path(), 1 << 20);
    let db = open(dir.path());
    check(&db, 0, 49, 20);
    assert_eq!(db.get(&key(49)).ok().flatten(), None);
}

#[test]
fn flipped_byte_mid_segment_is_corruption_naming_file_and_offset() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 50, 200);
    }
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    flip_byte(&seg, offs[10] + 60); // body of record 10
    match Db::open(dir.path(), opts()) {
        Err(Error::Corruption(m)) => {
            assert!(m.contains("00000000.seg"), "{m}");
            assert!(m.contains(&format!("offset {}", offs[10])), "{m}");
        }
        other => panic!("expected corruption, got {:?}", other.err()),
    }
    assert!(info_log(dir.path()).contains("recovery failed"));
}

/// Rewrites the body byte at `at` of the record at `off` and recomputes
/// both checksums, so that only the body's decoding can find the damage.
fn forge_body_byte(path: &std::path::Path, off: usize, at: usize, byte: u8) {
    let mut b = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let body_len = u32_at(&b, off + 16) as usize;
    let body = off + 48;
    b[body + at] = byte;
    let body_crc = crc32c::crc32c(&b[body..body + body_len]);
    b[off + 20..off + 24].copy_from_slice(&body_crc.to_le_bytes());
    b[off + 8..off + 12].fill(0);
    let header_crc = crc32c::crc32c(&b[off..off + 48]);
    b[off + 8..off + 12].copy_from_slice(&header_crc.to_le_bytes());
    std::fs::write(path, b).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[test]
fn a_checksummed_but_malformed_batch_is_corruption_naming_record_and_body_offset() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 50, 200);
    }
    let seg = seg_path(dir.path(), 0);
    let off = record_offsets(&seg)[10];
    // The first operation's tag byte.
    forge_body_byte(&seg, off, 0, 9);
    match Db::open(dir.path(), opts()) {
        Err(Error::Corruption(m)) => {
            let want = format!(
                "00000000.seg offset {off}: malformed batch operation at body offset 0: unknown operation tag 9"
            );
            assert!(m.ends_with(&want), "{m}");
        }
        other => panic!("expected corruption, got {:?}", other.err()),
    }
}

#[test]
fn corruption_before_a_later_segment_is_reported() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 3000, 700);
    }
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    let last = *offs.last().unwrap_or(&0);
    flip_byte(&seg, last + 50);
    assert!(
        matches!(Db::open(dir.path(), opts()), Err(Error::Corruption(m)) if m.contains("00000000.seg"))
    );
}

/// Past `LOGEND`, a hole ends the log: after a kill it is a write in
/// flight (no acknowledged write lies beyond one), after a power cut pages
/// that never reached the disk, and the records after it must go with it
/// or the state would be no prefix of the log.
#[test]
fn a_hole_past_logend_ends_the_log_there() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 30, 100);
    }
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    // Record 10's commit word never reached the disk.
    zero_range(&seg, offs[10], 8);
    assert_lost(dir.path(), "00000000.seg");
    forget_log_end(dir.path(), 1 << 20);
    {
        let db = open(dir.path());
        check(&db, 0, 10, 100);
        for i in 10..30 {
            assert_eq!(db.get(&key(i)).ok().flatten(), None, "key {i}");
        }
        let log = info_log(dir.path());
        assert!(
            log.contains(&format!("hole (a write in flight, or pages a power cut lost) in 00000000.seg at offset {}, past LOGEND: the log ends there", offs[10])),
            "{log}"
        );
        fill(&db, 100, 110, 100);
    }
    // The cleared records stay gone, and later writes stay.
    let db = open(dir.path());
    check(&db, 0, 10, 100);
    check(&db, 100, 110, 100);
    assert_eq!(db.get(&key(20)).ok().flatten(), None);
}

/// A record whose commit word reached the disk but not all of its body,
/// followed by records that did (a power cut after out-of-order
/// writeback), ends the log past `LOGEND`: the open succeeds with the
/// prefix. It used to fail with `Corruption`, so a power cut under
/// `sync = false` writes could leave a database that never opened again.
#[test]
fn a_torn_record_past_logend_ends_the_log_even_with_records_after_it() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 50, 200);
    }
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    flip_byte(&seg, offs[20] + 60); // body of record 20
    forget_log_end(dir.path(), 1 << 20);
    let db = open(dir.path());
    check(&db, 0, 20, 200);
    for i in 20..50 {
        assert_eq!(db.get(&key(i)).ok().flatten(), None, "key {i}");
    }
    let log = info_log(dir.path());
    assert!(
        log.contains(&format!(
            "torn tail in 00000000.seg at offset {}, past LOGEND",
            offs[20]
        )),
        "{log}"
    );
}

#[test]
fn corrupt_checkpoint_falls_back_to_full_replay() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 500, 64);
        db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
        fill(&db, 500, 600, 64);
    }
    let snap = dir.path().join("CHECKPOINT-00000001.t1");
    flip_byte(&snap, 100);
    let db = open(dir.path());
    check(&db, 0, 600, 64);
    let log = info_log(dir.path());
    assert!(log.contains("falling back to a full log replay"), "{log}");
    assert!(log.contains("CHECKPOINT-00000001.t1 offset"), "{log}");
}

#[test]
fn corrupt_checkpoint_without_full_log_is_corruption() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 3000, 700);
        for i in 0..3000 {
            db.delete(&key(i)).unwrap_or_else(|e| panic!("{e}"));
        }
        fill(&db, 5000, 5010, 700);
        let rep = db.defragment().unwrap_or_else(|e| panic!("{e}"));
        assert!(rep.retired_segments.contains(&0), "{rep:?}");
    }
    let m = std::fs::read_to_string(dir.path().join("MANIFEST")).unwrap_or_default();
    let snap = m
        .lines()
        .find_map(|l| l.strip_prefix("snapshot="))
        .unwrap_or_default()
        .to_string();
    flip_byte(&dir.path().join(&snap), 20);
    match Db::open(dir.path(), opts()) {
        Err(Error::Corruption(msg)) => assert!(msg.contains(&snap), "{msg}"),
        other => panic!("expected corruption, got {:?}", other.err()),
    }
    // A corrupt MANIFEST is reported the same way.
    let mpath = dir.path().join("MANIFEST");
    flip_byte(&mpath, 5);
    assert!(
        matches!(Db::open(dir.path(), opts()), Err(Error::Corruption(msg)) if msg.contains("MANIFEST"))
    );
}

#[test]
fn missing_segment_after_checkpoint_is_corruption() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 100, 700);
        db.checkpoint().unwrap_or_else(|e| panic!("{e}"));
        fill(&db, 100, 3000, 700);
    }
    std::fs::remove_file(seg_path(dir.path(), 1)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(Db::open(dir.path(), opts()), Err(Error::Corruption(m)) if m.contains("00000001.seg") || m.contains("00000000.seg"))
    );
}

#[test]
fn missing_newest_segment_is_corruption_naming_it() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 3000, 700); // spans several 1 MiB segments
    }
    let mut segs: Vec<u32> = (0..64)
        .filter(|&i| seg_path(dir.path(), i).exists())
        .collect();
    assert!(segs.len() >= 2, "the test needs a rollover");
    // A clean reopen reads the seals as segment ends, not as lost writes.
    drop(open(dir.path()));
    assert!(!info_log(dir.path()).contains("a write in flight"));
    let newest = segs.pop().unwrap_or_default();
    std::fs::remove_file(seg_path(dir.path(), newest)).unwrap_or_else(|e| panic!("{e}"));
    match Db::open(dir.path(), opts()) {
        Err(Error::Corruption(m)) => {
            let name = format!("{newest:08x}.seg");
            assert!(m.contains(&name) && m.contains("missing"), "{m}");
        }
        other => panic!("expected corruption, got {:?}", other.err()),
    }
}

#[test]
fn torn_record_before_a_seal_is_truncated_not_corruption() {
    let dir = tmp();
    {
        let db = open(dir.path());
        fill(&db, 0, 3000, 700);
    }
    // Drop every segment after the first; the first now ends with a seal
    // naming a missing segment, so tear its last data record too: the
    // seal alone is then no evidence that a later write committed, and the
    // torn tail (seal included) is truncated.
    for i in 1..64 {
        let _ = std::fs::remove_file(seg_path(dir.path(), i));
    }
    let seg = seg_path(dir.path(), 0);
    let offs = record_offsets(&seg);
    let last = *offs.last().unwrap_or(&0);
    flip_byte(&seg, last + 60);
    assert_lost(dir.path(), "00000000.seg");
    forget_log_end(dir.path(), 1 << 20);
    let n = offs.len() as u64;
    {
        let db = open(dir.path());
        check(&db, 0, n - 1, 700);
        assert_eq!(db.get(&key(n - 1)).ok().flatten(), None);
        assert!(
            info_log(dir.path()).contains(&format!("torn tail in 00000000.seg at offset {last}"))
        );
    }
    let db = open(dir.path());
    check(&db, 0, n - 1, 700);
}

/// The number in the last "replayed N records" line of `LOG`.
fn last_replay(dir: &std::path::Path) -> u64 {
    let log = info_log(dir);
    log.lines()
        .rev()
        .filter_map(|l| l.split("replayed ").nth(1))
        .find_map(|r| r.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no replay in LOG:\n{log}"))
}

#[test]
fn close_checkpoints_a_large_log_so_the_next_open_replays_nothing() {
    // Background off: only the close can checkpoint. With a 4 MiB
    // interval, the close checkpoints once 1 MiB of log is pending.
    let opts = |interval: u64| {
        vmemkv::Options::default()
            .segment_size(1 << 20)
            .background(false)
            .checkpoint_interval_bytes(interval)
    };
    let open_with = |dir: &std::path::Path, interval: u64| {
        Db::open(dir, opts(interval)).unwrap_or_else(|e| panic!("open: {e}"))
    };
    let dir = tmp();
    {
        let db = open_with(dir.path(), 4 << 20);
        fill(&db, 0, 3000, 700); // ~2.3 MB of log
    }
    assert!(info_log(dir.path()).contains("checkpoint 1:"));
    let db = open_with(dir.path(), 4 << 20);
    assert_eq!(last_replay(dir.path()), 0);
    check(&db, 0, 3000, 700);
    // A small tail is left to the replay.
    fill(&db, 3000, 3010, 700);
    drop(db);
    let db = open_with(dir.path(), 4 << 20);
    assert_eq!(last_replay(dir.path()), 10);
    check(&db, 0, 3010, 700);
    drop(db);

    // An interval of 0 turns the automatic checkpoints off, this one too.
    let dir = tmp();
    drop({
        let db = open_with(dir.path(), 0);
        fill(&db, 0, 3000, 700);
        db
    });
    assert!(!dir.path().join("MANIFEST").exists());
    let db = open_with(dir.path(), 0);
    assert_eq!(last_replay(dir.path()), 3000);
    check(&db, 0, 3000, 700);
}
