//! `APPMETA`: a small blob the application keeps beside its data (the
//! compat layer's column family catalog), replaced atomically and durably.
//!
//! Layout: `b"VMKVAPP1"`, the blob's length (u32 LE), the blob, and the
//! crc32c of all that (u32 LE). The engine never interprets the blob; it
//! keeps it out of the keyspace, so that T1's regions, whose shared key
//! prefix is stored once, are not broken by keys that sort apart from the
//! data.

use std::path::Path;

use crate::crc::crc32c;
use crate::error::{Error, Result};
use crate::files::APP_META;
use crate::fsutil::write_atomic;

const MAGIC: &[u8; 8] = b"VMKVAPP1";

/// Replaces the blob: a temp file, fsync, rename, directory fsync.
pub(crate) fn write(dir: &Path, blob: &[u8]) -> Result<()> {
    let len = u32::try_from(blob.len()).map_err(|_| {
        Error::InvalidArgument(format!(
            "application metadata of {} bytes exceeds 4 GiB",
            blob.len()
        ))
    })?;
    let mut bytes = Vec::with_capacity(blob.len() + 16);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(blob);
    let crc = crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    write_atomic(dir, APP_META, &bytes)
}

/// The blob, `None` when none was ever written; `Corruption` naming the
/// file and what fails when it does not check.
pub(crate) fn read(dir: &Path) -> Result<Option<Vec<u8>>> {
    let path = dir.join(APP_META);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let bad = |what: String| Error::Corruption(format!("{}: {what}", path.display()));
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad(format!(
            "{} bytes without the header {MAGIC:?} at offset 0",
            bytes.len()
        )));
    }
    let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    if bytes.len() != len + 16 {
        return Err(bad(format!(
            "the header at offset 8 gives {len} bytes of metadata, the file holds {}",
            bytes.len().saturating_sub(16)
        )));
    }
    let (body, tail) = bytes.split_at(len + 12);
    let want = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    if crc32c(body) != want {
        return Err(bad(format!("checksum mismatch at offset {}", len + 12)));
    }
    Ok(Some(body[12..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_every_damage_is_corruption() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        assert_eq!(read(dir.path())?, None);
        write(dir.path(), b"catalog")?;
        assert_eq!(read(dir.path())?, Some(b"catalog".to_vec()));
        write(dir.path(), b"")?;
        assert_eq!(read(dir.path())?, Some(Vec::new()));
        write(dir.path(), b"catalog")?;
        let path = dir.path().join(APP_META);
        let good = std::fs::read(&path).map_err(|e| Error::io("read", e))?;
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            std::fs::write(&path, &bad).map_err(|e| Error::io("write", e))?;
            assert!(
                matches!(read(dir.path()), Err(Error::Corruption(m)) if m.contains("APPMETA")),
                "flip at {i}"
            );
        }
        std::fs::write(&path, &good[..good.len() - 1]).map_err(|e| Error::io("write", e))?;
        assert!(matches!(read(dir.path()), Err(Error::Corruption(_))));
        Ok(())
    }
}
