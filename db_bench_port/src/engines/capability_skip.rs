//! Which benchmarks an engine cannot run, from its
//! [`vmemkv_compat::Db::capabilities`]: db_bench prints
//! `Skipped benchmark NAME: why` for them and never a result line.

use vmemkv_compat::{Capability, Db};

/// The capabilities benchmark `name` needs beyond point operations.
pub fn needs(name: &str) -> &'static [Capability] {
    match name {
        "readseq"
        | "readtocache"
        | "readreverse"
        | "seekrandom"
        | "seekrandomwhilewriting"
        | "newiterator"
        | "newiteratorwhilewriting"
        | "readwhilescanning"
        | "scan_zipf"
        | "scan_uniform"
        | "ycsb_e"
        | "mixgraph" => &[Capability::OrderedIteration],
        "multiscan" | "multiscanrandom" => &[Capability::OrderedIteration, Capability::MultiScan],
        _ => &[],
    }
}

/// Benchmarks that interleave reads with writes in one run.
fn interleaves_reads_and_writes(name: &str) -> bool {
    matches!(
        name,
        "readwhilewriting" | "readrandomwriterandom" | "updaterandom" | "multireadwhilewriting"
    )
}

/// Why `db` cannot run benchmark `name`, if it cannot.
pub fn unsupported(db: &dyn Db, name: &str) -> Option<String> {
    let caps = db.capabilities();
    if let Some(why) = needs(name).iter().find_map(|c| caps.why_not(*c)) {
        return Some(why.to_string());
    }
    // Sparkey answers these correctly, but each read after a write
    // rebuilds its whole hash index: the run would measure index builds
    // and take hours at db_bench's default sizes.
    if db.name() == "sparkey" && interleaves_reads_and_writes(name) {
        return Some(
            "sparkey: write-once store; every read after a write rebuilds the hash index".into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_need_order_and_point_reads_need_nothing() {
        assert_eq!(needs("readseq"), &[Capability::OrderedIteration]);
        assert!(needs("multiscan").contains(&Capability::MultiScan));
        assert!(needs("readrandom").is_empty());
        assert!(needs("deleterandom").is_empty());
        let dir = tempfile::tempdir().expect("tempdir");
        let db = vmemkv_compat::open(
            vmemkv_compat::EngineKind::Vmemkv,
            &dir.path().join("db"),
            &vmemkv_compat::EngineOptions::default(),
        )
        .expect("open");
        assert_eq!(unsupported(db.as_ref(), "readseq"), None);
        assert_eq!(unsupported(db.as_ref(), "readwhilewriting"), None);
    }
}
