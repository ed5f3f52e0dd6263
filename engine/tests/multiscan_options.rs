//! `Options::use_direct_reads` picks where an async MultiScan reads cold
//! values, through `Db::multi_scan`; a scan's own `buffer_mode` wins.

mod common;

use common::*;
use vmemkv::Db;
use vmemkv::{BufferMode, MultiScanOptions, MultiScanStats, ScanRange};

const N: u64 = 400;
const LEN: usize = 3000;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn scan(db: &Db, mode: BufferMode) -> (Entries, MultiScanStats) {
    db.evict_page_cache().unwrap_or_else(|e| panic!("{e}"));
    let args = MultiScanOptions {
        buffer_mode: mode,
        ..MultiScanOptions::with_async_io(
            vec![
                ScanRange::new(&key(10), &key(60)),
                ScanRange::unbounded(&key(300)),
            ],
            true,
        )
    };
    let mut ms = db.multi_scan(&args).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    while ms.next_range().unwrap_or_else(|e| panic!("{e}")) {
        while ms.next_entry().unwrap_or_else(|e| panic!("{e}")) {
            out.push((ms.key().to_vec(), ms.value().to_vec()));
        }
    }
    (out, ms.stats())
}

fn load(direct: Option<bool>) -> (tempfile::TempDir, Db) {
    let dir = tmp();
    let db = Db::open(dir.path(), opts().use_direct_reads(direct))
        .unwrap_or_else(|e| panic!("open: {e}"));
    for i in 0..N {
        db.put(&key(i), &value(i, 0, LEN))
            .unwrap_or_else(|e| panic!("put: {e}"));
    }
    (dir, db)
}

#[test]
fn use_direct_reads_sets_the_default_buffer_mode() {
    let expect: Vec<_> = (10..60)
        .chain(300..N)
        .map(|i| (key(i), value(i, 0, LEN)))
        .collect();
    for (direct, buffered) in [(Some(true), true), (Some(false), false), (None, true)] {
        let (_dir, db) = load(direct);
        let (got, stats) = scan(&db, BufferMode::Auto);
        assert_eq!(got, expect, "use_direct_reads={direct:?}");
        assert!(stats.reads > 0, "{stats:?}");
        // Without the option, Auto reads cold data directly the first time
        // (module `admission` sends it to the page cache when read again).
        assert_eq!(
            stats.buffered_values > 0,
            buffered,
            "use_direct_reads={direct:?}: {stats:?}"
        );
        // A scan's own mode wins over the option.
        let (got, stats) = scan(&db, BufferMode::PageCache);
        assert_eq!(got, expect);
        assert_eq!(stats.buffered_values, 0, "{stats:?}");
        let (got, stats) = scan(&db, BufferMode::Direct);
        assert_eq!(got, expect);
        assert_eq!(stats.buffered_values, expect.len() as u64, "{stats:?}");
    }
}
