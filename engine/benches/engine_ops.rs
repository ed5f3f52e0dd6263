//! Single-thread and two-thread point-operation throughput of the native
//! API (sanity figures; db_bench is the real benchmark).
//!
//! `cargo bench -p vmemkv --bench engine_ops -- [keys]`

use std::sync::Arc;
use std::time::Instant;

use vmemkv::{Bounds, Db, Options, WriteOptions};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("k{i:015x}").as_bytes());
    k
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn run(label: &str, keys: u64, vlen: usize, opts: Options) {
    let dir = std::env::temp_dir().join(format!("vmemkv-ops-{}-{label}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Arc::new(Db::open(&dir, opts).unwrap_or_else(|e| panic!("open: {e}")));
    let v = vec![7u8; vlen];
    let t = Instant::now();
    for i in 0..keys {
        db.put(&key(i), &v).unwrap_or_else(|e| panic!("put: {e}"));
    }
    let fill = keys as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    let hs: Vec<_> = (0..2u64)
        .map(|th| {
            let db = db.clone();
            let v = v.clone();
            std::thread::spawn(move || {
                let mut x = 99 + th;
                for _ in 0..keys / 2 {
                    let k = key(xorshift(&mut x) % keys);
                    db.put(&k, &v).unwrap_or_else(|e| panic!("put: {e}"));
                }
            })
        })
        .collect();
    for h in hs {
        let _ = h.join();
    }
    let over2 = keys as f64 / t.elapsed().as_secs_f64();
    let mut buf = Vec::with_capacity(vlen);
    let mut x = 7u64;
    let t = Instant::now();
    let mut hits = 0u64;
    for _ in 0..keys {
        if db
            .get_into(&key(xorshift(&mut x) % keys), &mut buf)
            .unwrap_or(false)
        {
            hits += 1;
        }
    }
    let get = keys as f64 / t.elapsed().as_secs_f64();
    assert_eq!(hits, keys);
    let t = Instant::now();
    let mut it = db.iter(Bounds::all());
    it.seek_to_first();
    let mut n = 0u64;
    while it.valid() {
        n += it.value().len() as u64 / vlen.max(1) as u64;
        it.next();
    }
    let scan = keys as f64 / t.elapsed().as_secs_f64();
    // An iterator holds a snapshot: release it before the writes below.
    drop(it);
    let sync_n = 2000u64;
    let t = Instant::now();
    for i in 0..sync_n {
        db.put_opt(&WriteOptions::sync(), &key(i), &v)
            .unwrap_or_else(|e| panic!("sync put: {e}"));
    }
    let sync = sync_n as f64 / t.elapsed().as_secs_f64();
    println!(
        "{label:<22} fillseq {fill:>9.0}/s  overwrite(2 thr) {over2:>9.0}/s  get {get:>9.0}/s  scan {scan:>9.0}/s  sync-put {sync:>7.0}/s  ({n})"
    );
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Open time with no checkpoint (full replay) against a checkpoint plus a
/// tail of `tail_pct` percent of the corpus.
fn recovery(keys: u64) {
    let dir = std::env::temp_dir().join(format!("vmemkv-ops-{}-recovery", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Background on: T1 merges its append regions while replay inserts.
    let opts = || Options::default().checkpoint_interval_bytes(0);
    let v = vec![5u8; 100];
    {
        let db = Db::open(&dir, opts()).unwrap_or_else(|e| panic!("open: {e}"));
        for i in 0..keys {
            db.put(&key(i), &v).unwrap_or_else(|e| panic!("put: {e}"));
        }
    }
    let t = Instant::now();
    let db = Db::open(&dir, opts()).unwrap_or_else(|e| panic!("reopen: {e}"));
    let full = t.elapsed();
    db.checkpoint()
        .unwrap_or_else(|e| panic!("checkpoint: {e}"));
    for i in 0..keys / 100 {
        db.put(&key(i), &v).unwrap_or_else(|e| panic!("put: {e}"));
    }
    drop(db);
    let t = Instant::now();
    let db = Db::open(&dir, opts()).unwrap_or_else(|e| panic!("reopen: {e}"));
    let ckpt = t.elapsed();
    drop(db);
    println!(
        "recovery of {keys} x 100 B: full log replay {:.0} ms; checkpoint + 1% tail {:.0} ms",
        full.as_secs_f64() * 1e3,
        ckpt.as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let keys: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(500_000);
    let base = Options::default().checkpoint_interval_bytes(0);
    println!("engine_ops: {keys} keys of 16 B, one thread unless noted");
    recovery(keys * 4);
    run("8B inline", keys, 8, base.clone());
    run("8B not inline", keys, 8, base.clone().inline_values(false));
    run("100B", keys, 100, base.clone());
    run("1KB", keys, 1000, base.clone());
    run("1KB no bloom", keys, 1000, base.bloom(false));
}
