//! Random `get` on values that are not in the page cache: reading through
//! the mapping (page faults, default readahead), the mapping with
//! `MADV_RANDOM`, and `pread`. The DB's segment files are evicted with
//! `posix_fadvise(DONTNEED)` before each variant, so nothing else on the
//! machine is disturbed.
//!
//! `cargo bench -p vmemkv --bench engine_cold -- [seconds]`

use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vmemkv::{Db, Options};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("k{i:015x}").as_bytes());
    k
}

fn evict(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().ends_with(".seg") {
            if let Ok(f) = std::fs::File::open(e.path()) {
                // SAFETY: plain syscall on an fd we own.
                unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            }
        }
    }
}

fn measure(dir: &Path, keys: u64, vlen: usize, label: &str, opts: Options, secs: f64) -> f64 {
    evict(dir);
    let db = Arc::new(Db::open(dir, opts).unwrap_or_else(|e| panic!("open: {e}")));
    evict(dir);
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..2u64)
        .map(|t| {
            let (db, stop, ops) = (db.clone(), stop.clone(), ops.clone());
            std::thread::spawn(move || {
                let mut x = 0x9E37_79B9u64 + t * 7919;
                let mut buf = Vec::with_capacity(vlen);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if !db.get_into(&key(x % keys), &mut buf).unwrap_or(false) || buf.len() != vlen
                    {
                        panic!("missing key");
                    }
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        let _ = h.join();
    }
    let rate = ops.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64();
    println!(
        "{vlen:>6} B  {label:<22} {rate:>9.0} gets/s  {:>7.1} MB/s",
        rate * vlen as f64 / 1e6
    );
    rate
}

fn main() {
    let secs: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(4.0);
    for (keys, vlen) in [(500_000u64, 1000usize), (8_000, 64 << 10)] {
        let dir = std::env::temp_dir().join(format!("vmemkv-cold-{}-{vlen}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let db = Db::open(&dir, Options::default().background(false))
                .unwrap_or_else(|e| panic!("open: {e}"));
            let v = vec![3u8; vlen];
            for i in 0..keys {
                db.put(&key(i), &v).unwrap_or_else(|e| panic!("put: {e}"));
            }
            db.checkpoint()
                .unwrap_or_else(|e| panic!("checkpoint: {e}"));
        }
        // The mapping variants never `pread` (the default switches to it
        // at `pread_min_bytes`), and the first turns off the default
        // `MADV_RANDOM`.
        let base = || Options::default().background(false);
        let mapped = || base().pread_min_bytes(usize::MAX);
        for _round in 0..2 {
            measure(
                &dir,
                keys,
                vlen,
                "mmap",
                mapped().random_access(false),
                secs,
            );
            measure(&dir, keys, vlen, "mmap+MADV_RANDOM", mapped(), secs);
            measure(&dir, keys, vlen, "pread", base().pread_min_bytes(0), secs);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
