//! A failure of background work is counted in `statistics()` and handed to
//! the next foreground write, which is not applied (issue 26: "surface
//! background failures through statistics() and through the next foreground
//! call"). Its own test binary: the injected I/O error is process-wide.

use std::time::{Duration, Instant};

use vmemkv::failpoint::set_io_error;
use vmemkv::{Db, Error, Options};

#[test]
fn a_failed_background_checkpoint_reaches_statistics_and_the_next_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        checkpoint_interval_bytes: 64 << 10,
        maintenance_interval_ms: 5,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    set_io_error("snapshot.sync", true);
    let t0 = Instant::now();
    let mut i = 0u64;
    let refused = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no background checkpoint ran"
        );
        let key = format!("key{i:08}");
        match db.put(key.as_bytes(), &[7u8; 200]) {
            Ok(()) => i += 1,
            Err(e) => break (key, e),
        }
    };
    set_io_error("snapshot.sync", false);
    let (key, e) = refused;
    match &e {
        Error::IoError(m) => assert!(m.starts_with("background checkpoint: "), "{e}"),
        other => panic!("expected the background checkpoint's IoError, got {other:?}"),
    }
    assert_eq!(
        db.get(key.as_bytes()).expect("get"),
        None,
        "the refused write was not applied"
    );
    let st = db.statistics();
    assert!(st.background_errors >= 1, "{st:?}");
    let last = st.last_background_error.clone().unwrap_or_default();
    assert!(last.contains("background checkpoint"), "{last}");
    assert!(st.to_string().contains("background errors: count="), "{st}");
    // Failures recorded before the disk recovered are handed out one at a
    // time; after that, writes go through again.
    let mut retries = 0;
    while db.put(key.as_bytes(), b"after").is_err() {
        retries += 1;
        assert!(retries < 100, "writes never recovered");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        db.get(key.as_bytes()).expect("get"),
        Some(b"after".to_vec())
    );
    for j in 0..i {
        let k = format!("key{j:08}");
        assert!(db.get(k.as_bytes()).expect("get").is_some(), "{k} lost");
    }
    drop(db);
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_eq!(
        db.get(key.as_bytes()).expect("get"),
        Some(b"after".to_vec())
    );
    assert_eq!(db.statistics().background_errors, 0, "counted since open");
}
