//! Every file name a database directory holds, in one place: which names
//! are the engine's decides what `open` accepts and what a destroy may
//! remove.

/// The lock file (`dir::DirLock`).
pub(crate) const LOCK: &str = "LOCK";
/// The manifest: which checkpoint is current (`checkpoint::Manifest`).
pub(crate) const MANIFEST: &str = "MANIFEST";
/// The info log (`infolog`).
pub(crate) const LOG: &str = "LOG";
/// The info log of the previous open, kept for a look after a crash.
pub(crate) const LOG_OLD: &str = "LOG.old";
/// How far the acknowledged log reaches (`t2::durable`).
pub(crate) const LOGEND: &str = "LOGEND";
/// The application's metadata blob (`appmeta.rs`).
pub(crate) const APP_META: &str = "APPMETA";
/// Suffix of a file being written to replace another atomically.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// The file name of segment `id`.
pub(crate) fn segment(id: u32) -> String {
    format!("{id:08x}.seg")
}

/// Parses a segment file name back into its id.
pub(crate) fn parse_segment(name: &str) -> Option<u32> {
    let hex = name.strip_suffix(".seg")?;
    if hex.len() != 8 {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// The file name of checkpoint snapshot `id`.
pub(crate) fn snapshot(id: u64) -> String {
    format!("CHECKPOINT-{id:08}.t1")
}

/// Parses a snapshot file name back into its id.
pub(crate) fn parse_snapshot(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("CHECKPOINT-")?.strip_suffix(".t1")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether `name` is a file this engine creates.
pub fn is_own_file(name: &str) -> bool {
    let base = name.strip_suffix(TMP_SUFFIX).unwrap_or(name);
    matches!(base, LOCK | LOG | LOG_OLD | MANIFEST | LOGEND | APP_META)
        || parse_segment(base).is_some()
        || parse_snapshot(base).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        assert_eq!(parse_segment(&segment(0xab)), Some(0xab));
        assert_eq!(parse_snapshot(&snapshot(42)), Some(42));
        assert_eq!(parse_segment("0000000g.seg"), None);
        assert_eq!(parse_snapshot("CHECKPOINT-.t1"), None);
        assert!(is_own_file("MANIFEST.tmp") && is_own_file(&segment(7)));
        assert!(!is_own_file("notes.txt") && !is_own_file("LOCK.bak"));
    }
}
