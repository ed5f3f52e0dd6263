//! MultiScan's arguments, RocksDB's `MultiScanArgs`, defined once.
//!
//! Both the engine (`vmemkv`) and the trait crate (`vmemkv-compat`) need
//! this type, and neither may own it: the trait crate must build with no
//! engine at all (TiKV's `engine_traits` rule), and the engine cannot
//! depend on the trait crate, which depends on it. So the type lives here,
//! with no dependencies, and both re-export it: a range or an argument
//! list crosses the vmemkv adapter as is, and one validation gives every
//! engine the same messages. The engine's own knobs (buffer mode, prefetch
//! window, iterate bounds) stay in the engine, around this type.

#![deny(missing_docs)]

use std::fmt;

/// RocksDB's default `io_coalesce_threshold`.
pub const DEFAULT_IO_COALESCE_THRESHOLD: u64 = 16 * 1024;

/// One range of a MultiScan: `[start, limit)`, open-ended when `limit` is
/// `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRange {
    /// First key. `None` is rejected by [`MultiScanArgs::validate`], as in
    /// RocksDB.
    pub start: Option<Vec<u8>>,
    /// First key past the range; `None` scans to the end.
    pub limit: Option<Vec<u8>>,
}

impl ScanRange {
    /// `[start, limit)`.
    pub fn new(start: &[u8], limit: &[u8]) -> Self {
        ScanRange {
            start: Some(start.to_vec()),
            limit: Some(limit.to_vec()),
        }
    }

    /// `[start, ∞)`.
    pub fn unbounded(start: &[u8]) -> Self {
        ScanRange {
            start: Some(start.to_vec()),
            limit: None,
        }
    }
}

/// Arguments of a MultiScan (RocksDB's `MultiScanArgs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiScanArgs {
    /// The ranges, in increasing start order.
    pub ranges: Vec<ScanRange>,
    /// Issue the reads for every range asynchronously in the prepare phase.
    pub use_async_io: bool,
    /// Reads closer than this many bytes are merged into one.
    pub io_coalesce_threshold: u64,
    /// Upper bound on prefetched bytes; 0 means unlimited.
    pub max_prefetch_size: u64,
}

impl Default for MultiScanArgs {
    fn default() -> Self {
        MultiScanArgs {
            ranges: Vec::new(),
            use_async_io: false,
            io_coalesce_threshold: DEFAULT_IO_COALESCE_THRESHOLD,
            max_prefetch_size: 0,
        }
    }
}

/// Why [`MultiScanArgs::validate`] refused the arguments; each crate maps
/// it onto its `InvalidArgument`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidScan(pub String);

impl fmt::Display for InvalidScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidScan {}

impl MultiScanArgs {
    /// Arguments scanning `ranges` with default settings.
    pub fn new(ranges: Vec<ScanRange>) -> Self {
        MultiScanArgs {
            ranges,
            ..Self::default()
        }
    }

    /// RocksDB's validation: a non-empty list, every range with a start,
    /// `start < limit`, and starts in increasing order.
    pub fn validate(&self) -> Result<(), InvalidScan> {
        if self.ranges.is_empty() {
            return Err(InvalidScan("MultiScan: no scan ranges given".into()));
        }
        let mut prev: Option<&[u8]> = None;
        for (i, r) in self.ranges.iter().enumerate() {
            let Some(start) = r.start.as_deref() else {
                return Err(InvalidScan(format!(
                    "MultiScan: range {i} has no start key"
                )));
            };
            if r.limit.as_deref().is_some_and(|l| start >= l) {
                return Err(InvalidScan(format!(
                    "MultiScan: range {i} has start >= limit"
                )));
            }
            if prev.is_some_and(|p| start < p) {
                return Err(InvalidScan(format!(
                    "MultiScan: range {i} starts before range {}; ranges must be in increasing order",
                    i - 1
                )));
            }
            prev = Some(start);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_matches_rocksdb() {
        let msg = |ranges: Vec<ScanRange>| MultiScanArgs::new(ranges).validate().map_err(|e| e.0);
        assert_eq!(msg(vec![]), Err("MultiScan: no scan ranges given".into()));
        let no_start = ScanRange {
            start: None,
            limit: None,
        };
        assert_eq!(
            msg(vec![no_start]),
            Err("MultiScan: range 0 has no start key".into())
        );
        assert_eq!(
            msg(vec![ScanRange::new(b"b", b"a")]),
            Err("MultiScan: range 0 has start >= limit".into())
        );
        assert!(
            msg(vec![ScanRange::unbounded(b"c"), ScanRange::new(b"a", b"b")])
                .is_err_and(|m| m.contains("range 1 starts before range 0"))
        );
        assert_eq!(
            msg(vec![ScanRange::new(b"a", b"b"), ScanRange::unbounded(b"b")]),
            Ok(())
        );
    }
}
