//! The human-readable info log `LOG` (RocksDB style): one timestamped line
//! per event: open, recovery, checkpoints, defragment cycles, splits.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::error::Result;

/// Name of the info log file.
use crate::files::LOG as LOG_NAME;

/// An append-only text log. Write failures are ignored: the info log must
/// never fail a user operation.
pub struct InfoLog {
    file: Mutex<File>,
}

/// Formats a UNIX time as `YYYY/MM/DD-HH:MM:SS.uuuuuu` (UTC).
pub fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil-from-days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}/{month:02}/{day:02}-{:02}:{:02}:{:02}.{:06}",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60,
        d.subsec_micros()
    )
}

impl InfoLog {
    /// Opens (appending to) `dir/LOG`.
    pub fn open(dir: &Path) -> Result<InfoLog> {
        let path = dir.join(LOG_NAME);
        let file = crate::fsutil::open_file(
            &path,
            OpenOptions::new().append(true).create(true),
            0,
            "info log",
        )?;
        Ok(InfoLog {
            file: Mutex::new(file),
        })
    }

    /// Appends one line.
    pub fn log(&self, msg: std::fmt::Arguments<'_>) {
        let line = format!("{} {msg}\n", timestamp(SystemTime::now()));
        let _ = self.file.lock().write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_utc() {
        let t = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        assert_eq!(timestamp(t), "2023/11/14-22:13:20.123456");
    }
}
