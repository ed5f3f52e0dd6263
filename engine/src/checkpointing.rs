//! The checkpoint protocol: when T1 is persisted, and how a snapshot file
//! and the MANIFEST make recovery replay only the log after it
//! (`docs/design.md` §5). The file formats are in `checkpoint`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::checkpoint::{self, Manifest};
use crate::error::Result;
use crate::state::{Inner, LOG_PER_SNAPSHOT};
use crate::stats::Counters;
use crate::t2::record::{lsn, split_lsn};

impl Inner {
    /// Whether the automatic checkpoint is due: `checkpoint_interval_bytes`
    /// of log since the last one, and [`LOG_PER_SNAPSHOT`] times the
    /// snapshot's size.
    pub(crate) fn checkpoint_due(&self) -> bool {
        let every = self.opts.checkpoint_interval_bytes;
        let snapshot = self.snapshot_bytes.load(Ordering::Relaxed);
        every > 0
            && self.log_bytes_since_checkpoint()
                >= every.max(snapshot.saturating_mul(LOG_PER_SNAPSHOT))
    }

    /// Whether close should checkpoint: the log since the last checkpoint
    /// is at least a quarter of `checkpoint_interval_bytes` and an eighth
    /// of the snapshot. Otherwise every later open replays it and T1
    /// then merges the replayed entries into its sorted regions: opening
    /// the 5M key-order database with 184 MB of log pending took 0.79-1.16
    /// s, against 0.61-0.63 s after a close that checkpointed. RocksDB
    /// flushes its memtables at close for the same reason.
    pub(crate) fn close_checkpoint_due(&self) -> bool {
        let every = self.opts.checkpoint_interval_bytes;
        let since = self.log_bytes_since_checkpoint();
        every > 0 && since >= every / 4 && since >= self.snapshot_bytes.load(Ordering::Relaxed) / 8
    }

    pub(crate) fn log_bytes_since_checkpoint(&self) -> u64 {
        let appended = self.log.appended.get();
        self.since_ckpt_base.load(Ordering::Relaxed)
            + appended.saturating_sub(self.appended_at_ckpt.load(Ordering::Relaxed))
    }

    /// The checkpoint protocol (see `docs/design.md`). Returns its LSN.
    pub(crate) fn checkpoint(&self) -> Result<u64> {
        let mut st = self.ckpt.lock();
        let t0 = Instant::now();
        let (p, appended) = {
            let _g = self.gate.write();
            // Unlogged puts below P must be in a sealed record, since replay
            // starts at P.
            self.unlogged.seal(self)?;
            (self.log.tail_lsn(), self.log.appended.get())
        };
        let pause = t0.elapsed().as_nanos() as u64;
        self.counters
            .checkpoint_max_pause_ns
            .fetch_max(pause, Ordering::Relaxed);
        // Every record below P is complete and published: make it durable.
        self.log.sync_to(p)?;
        let id = st.id + 1;
        let name = crate::files::snapshot(id);
        let snap = checkpoint::write_snapshot(&self.dir, &name, p, &self.t1)?;
        crate::failpoint::hit("checkpoint.snapshot_synced");
        // Entries newer than P that the snapshot caught must be durable
        // before the MANIFEST makes recovery skip to P; unlogged ones lie in
        // the region open now or in one sealed since P (regions follow one
        // another), and recovery drops an unsealed region, so seal it.
        self.unlogged.seal(self)?;
        let tail = self.log.tail_lsn();
        self.log.sync_to_untracked(p, tail)?;
        Manifest {
            id,
            lsn: p,
            snapshot: name.clone(),
            snapshot_bytes: snap.bytes,
            snapshot_crc: snap.crc,
        }
        .store(&self.dir)?;
        crate::failpoint::hit("checkpoint.manifest_stored");
        if st.id > 0 {
            let old = self.dir.join(crate::files::snapshot(st.id));
            if let Err(e) = std::fs::remove_file(&old) {
                self.info.log(format_args!(
                    "checkpoint: could not remove {}: {e}",
                    old.display()
                ));
            }
        }
        st.id = id;
        st.lsn = p;
        self.snapshot_bytes.store(snap.bytes, Ordering::Relaxed);
        self.since_ckpt_base.store(0, Ordering::Relaxed);
        self.appended_at_ckpt.store(appended, Ordering::Relaxed);
        let ns = t0.elapsed().as_nanos() as u64;
        Counters::add(&self.counters.checkpoints, 1);
        Counters::set(&self.counters.checkpoint_last_ns, ns);
        Counters::set(&self.counters.checkpoint_last_bytes, snap.bytes);
        let (s, o) = split_lsn(p);
        self.info.log(format_args!(
            "checkpoint {id}: {name} {} entries {} bytes, LSN {:016x} ({} offset {o}), writer gate {:.3} ms, total {:.3} ms",
            snap.entries,
            snap.bytes,
            lsn(s, o),
            crate::files::segment(s),
            pause as f64 / 1e6,
            ns as f64 / 1e6
        ));
        Ok(p)
    }
}
