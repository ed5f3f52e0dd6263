//! Snapshots: a read seq registered for as long as a reader needs it
//! (design.md §8). Reads naming one see the database as it was when it
//! was taken; no snapshot survives a reopen.

use crate::error::{Error, Result};
use crate::t1::{VersionsPin, T1};

/// A point-in-time view of one open [`crate::Db`] ([`crate::Db::snapshot`]).
/// Released on drop; while held, the old versions it reads stay in memory
/// and the segments holding their values are not retired.
pub struct Snapshot {
    pin: VersionsPin,
    at: u64,
}

impl Snapshot {
    pub(crate) fn take(t1: &T1) -> Snapshot {
        let pin = t1.pin();
        let at = pin.versions().register();
        Snapshot { pin, at }
    }

    /// The seq it reads at: every write with a lower seq, none after.
    pub fn seq(&self) -> u64 {
        self.at
    }

    /// The read seq, if this snapshot belongs to `t1`.
    pub(crate) fn at_for(&self, t1: &T1) -> Result<u64> {
        if self.pin.of(t1) {
            Ok(self.at)
        } else {
            Err(Error::InvalidArgument(
                "snapshot taken from another database".into(),
            ))
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.pin.versions().unregister(self.at);
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seq", &self.at).finish()
    }
}
