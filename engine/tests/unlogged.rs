//! `disable_wal` puts: packed into regions, visible at once, kept by a
//! close, ordered against logged writes to the same keys. The crash side
//! (what a SIGKILL keeps) is in `crash.rs`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use vmemkv::{Db, Options, WriteBatch, WriteOptions};
use vmemkv::{MultiScanOptions, ScanRange};

fn unlogged() -> WriteOptions {
    WriteOptions {
        sync: false,
        disable_wal: true,
    }
}

/// How many of the values of keys `0..n` (each `value(i, 0, len)`, written
/// in key order) do not directly follow the previous one's value and its
/// 4-byte checksum in the log.
fn breaks(log: &[u8], n: u64, len: usize) -> usize {
    let find = |v: &[u8], from: usize| {
        log[from..]
            .windows(v.len())
            .position(|w| w == v)
            .map(|p| p + from)
    };
    let mut pos = find(&value(0, 0, len), 0).unwrap_or_else(|| panic!("key 0 not in the log"));
    let mut breaks = 0;
    for i in 1..n {
        let v = value(i, 0, len);
        let next = pos + len + 4;
        if log.get(next..next + len) == Some(&v[..]) {
            pos = next;
        } else {
            breaks += 1;
            pos = find(&v, pos + len).unwrap_or_else(|| panic!("key {i} not after key {}", i - 1));
        }
    }
    breaks
}

#[test]
fn unlogged_puts_are_read_at_once_packed_and_kept_by_a_close() {
    let dir = tmp();
    let (n, len) = (20_000u64, 500usize);
    {
        let db = open(dir.path());
        for i in 0..n {
            db.put_opt(&unlogged(), &key(i), &value(i, 0, len))
                .unwrap_or_else(|e| panic!("put {i}: {e}"));
            // Read back at once, region still open.
            if i % 97 == 0 {
                assert_eq!(db.get(&key(i)).ok().flatten(), Some(value(i, 0, len)));
            }
        }
        let model: BTreeMap<Vec<u8>, Vec<u8>> =
            (0..n).map(|i| (key(i), value(i, 0, len))).collect();
        assert_eq!(dump(&db), model);
        // What a crash would lose now, and that flush seals it.
        let st = db.statistics();
        assert!(st.unlogged_regions >= 9, "{st}");
        assert!(st.unlogged_open_bytes > 0, "{st}");
        db.flush().unwrap_or_else(|e| panic!("{e}"));
        let after = db.statistics();
        assert_eq!(after.unlogged_open_bytes, 0, "{after}");
        assert_eq!(after.unlogged_regions, st.unlogged_regions + 1, "{after}");
        for async_io in [true, false] {
            let args = MultiScanOptions::with_async_io(
                vec![
                    ScanRange::new(&key(10), &key(110)),
                    ScanRange::new(&key(n - 50), &key(n + 5)),
                ],
                async_io,
            );
            let mut got = Vec::new();
            let mut ms = db
                .multi_scan(&args)
                .unwrap_or_else(|e| panic!("multi_scan: {e}"));
            while ms.next_range().unwrap_or_else(|e| panic!("{e}")) {
                while ms.next_entry().unwrap_or_else(|e| panic!("{e}")) {
                    got.push((ms.key().to_vec(), ms.value().to_vec()));
                }
            }
            let want: Vec<(Vec<u8>, Vec<u8>)> = (10..110)
                .chain(n - 50..n)
                .map(|i| (key(i), value(i, 0, len)))
                .collect();
            assert_eq!(got, want, "async {async_io}");
        }
    }
    let log = log_bytes(dir.path());
    // The first 16 puts are logged (a region opens after a streak of
    // them); the rest, 20,000 x 544 bytes with their directory entries,
    // fill about eleven 1 MiB segments, one region each: values break only
    // where a region ends. Logged one by one, every value would follow a
    // header and its key.
    let b = breaks(&log, n, len);
    assert!(b <= 16 + 16, "{b} breaks between consecutive values");
    let db = open(dir.path());
    assert_eq!(dump(&db).len(), n as usize);
    for i in (0..n).step_by(13) {
        assert_eq!(db.get(&key(i)).ok().flatten(), Some(value(i, 0, len)));
    }
}

#[test]
fn logged_puts_are_written_one_record_each() {
    // The counterpart of the test above: its assertion tells the layouts
    // apart.
    let dir = tmp();
    let (n, len) = (2_000u64, 500usize);
    {
        let db = open(dir.path());
        put_range(&db, n, 0, len);
    }
    assert_eq!(breaks(&log_bytes(dir.path()), n, len), n as usize - 1);
}

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn logged_and_unlogged_writes_keep_their_order_against_a_model() {
    let dir = tmp();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let db = open(dir.path());
    for step in 0..30_000u64 {
        let k = key(rng.next() % 300);
        let len = [0usize, 5, 8, 9, 100, 700][(rng.next() % 6) as usize];
        let v = value(step, 1, len);
        match rng.next() % 100 {
            // Long unlogged stretches open regions; short ones stay logged.
            0..=59 => {
                db.put_opt(&unlogged(), &k, &v)
                    .unwrap_or_else(|e| panic!("{e}"));
                model.insert(k, v);
            }
            60..=74 => {
                db.put(&k, &v).unwrap_or_else(|e| panic!("{e}"));
                model.insert(k, v);
            }
            75..=84 => {
                db.delete_opt(&unlogged(), &k)
                    .unwrap_or_else(|e| panic!("{e}"));
                model.remove(&k);
            }
            85..=94 => {
                let mut b = WriteBatch::new();
                for j in 0..4 {
                    let kj = key(rng.next() % 300);
                    let vj = value(step, j, 40 + j as usize);
                    b.put(&kj, &vj);
                    model.insert(kj, vj);
                }
                db.write(&unlogged(), &b).unwrap_or_else(|e| panic!("{e}"));
            }
            95..=97 => db.flush().unwrap_or_else(|e| panic!("{e}")),
            _ => db.checkpoint().unwrap_or_else(|e| panic!("{e}")),
        }
        if step % 50 == 0 {
            let probe = key(rng.next() % 300);
            assert_eq!(
                db.get(&probe).unwrap_or_else(|e| panic!("{e}")),
                model.get(&probe).cloned(),
                "step {step}"
            );
        }
    }
    assert_eq!(dump(&db), model);
    drop(db);
    let db = open(dir.path());
    assert_eq!(dump(&db), model, "after reopen");
}

#[test]
fn concurrent_writers_mixing_both_kinds_lose_no_last_write() {
    let dir = tmp();
    let db = Arc::new(
        Db::open(
            dir.path(),
            Options::default()
                .segment_size(1 << 20)
                .checkpoint_interval_bytes(2 << 20)
                .maintenance_interval_ms(5)
                .sorted_run_bytes(512 << 10),
        )
        .unwrap_or_else(|e| panic!("{e}")),
    );
    let threads = 4u64;
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(t * 7919 + 1);
                let mut last = BTreeMap::new();
                for i in 0..6_000u64 {
                    // Each thread owns keys t, t + threads, ...
                    let id = (rng.next() % 150) * threads + t;
                    let v = value(id, i, 64 + (i % 400) as usize);
                    let wo = if rng.next().is_multiple_of(8) {
                        WriteOptions::default()
                    } else {
                        unlogged()
                    };
                    db.put_opt(&wo, &key(id), &v)
                        .unwrap_or_else(|e| panic!("{e}"));
                    last.insert(key(id), v);
                }
                last
            })
        })
        .collect();
    let mut model = BTreeMap::new();
    for h in hs {
        model.extend(h.join().unwrap_or_else(|_| panic!("writer panicked")));
    }
    assert_eq!(dump(&db), model);
    drop(db);
    let db = open(dir.path());
    assert_eq!(dump(&db), model, "after reopen");
}

/// `(offset, kind, count, body_len, values_len)` of a record.
type Rec = (usize, u8, u32, usize, usize);

/// Each record of a segment file, walking headers from the start.
fn records(path: &std::path::Path) -> Vec<Rec> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{e}"));
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    record_offsets(path)
        .into_iter()
        .map(|off| {
            let extra = u64::from_le_bytes(b[off + 40..off + 48].try_into().unwrap_or_default());
            (
                off,
                b[off + 4],
                u32_at(off + 12),
                u32_at(off + 16) as usize,
                extra as usize,
            )
        })
        .collect()
}

#[test]
fn a_region_sealed_behind_a_later_record_is_padded_and_replays() {
    let dir = tmp();
    let a = |i: u64| format!("a{i:04}").into_bytes();
    let b = |i: u64| format!("b{i:04}").into_bytes();
    {
        let db = open(dir.path());
        // Logged, so not packed: compact_range moves them.
        for i in (0..100).rev() {
            db.put(&a(i), &value(i, 1, 300))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for i in 0..40 {
            db.put_opt(&unlogged(), &b(i), &value(i, 2, 200))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        // The mover appends after the open region; the checkpoint that
        // ends the compaction seals it and cannot give its end back.
        db.compact_range(Some(&a(0)), Some(&a(100)))
            .unwrap_or_else(|e| panic!("{e}"));
        for i in 40..80 {
            db.put_opt(&unlogged(), &b(i), &value(i, 2, 200))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    // (segment, record) in log order.
    let recs: Vec<(u32, Rec)> = (0..)
        .map(|id| (id, seg_path(dir.path(), id)))
        .take_while(|(_, p)| p.exists())
        .flat_map(|(id, p)| records(&p).into_iter().map(move |r| (id, r)))
        .collect();
    let puts: Vec<_> = recs.iter().filter(|r| r.1 .1 == 5).collect();
    let summary: Vec<_> = recs.iter().filter(|r| r.1 .1 != 1).collect();
    assert_eq!(puts.len(), 2, "{summary:?}");
    // Directory entries: 24 bytes + the 5-byte key each.
    let exact = |r: &Rec| r.4 + r.2 as usize * (24 + 5);
    assert!(puts[0].1 .3 > exact(&puts[0].1), "not padded: {summary:?}");
    assert_eq!(
        puts[1].1 .3,
        exact(&puts[1].1),
        "the close gives the end back"
    );
    assert!(
        recs.iter()
            .any(|r| r.1 .1 == 4 && (r.0, r.1 .0) > (puts[0].0, puts[0].1 .0)),
        "no moved record after the first region: {summary:?}"
    );
    // Replay everything from the log, padded record included.
    for e in std::fs::read_dir(dir.path()).unwrap_or_else(|e| panic!("{e}")) {
        let p = e.unwrap_or_else(|e| panic!("{e}")).path();
        let name = p.file_name().map(|n| n.to_string_lossy().to_string());
        if name.is_some_and(|n| n == "MANIFEST" || n.starts_with("CHECKPOINT-")) {
            std::fs::remove_file(&p).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let db = open(dir.path());
    let mut want: BTreeMap<Vec<u8>, Vec<u8>> = (0..100).map(|i| (a(i), value(i, 1, 300))).collect();
    want.extend((0..80).map(|i| (b(i), value(i, 2, 200))));
    assert_eq!(dump(&db), want);
    assert!(
        info_log(dir.path()).contains("replayed"),
        "{}",
        info_log(dir.path())
    );
}
