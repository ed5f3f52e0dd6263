//! Counters and the `statistics()` snapshot.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Internal counters, updated with relaxed atomics.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub checkpoints: AtomicU64,
    pub checkpoint_last_ns: AtomicU64,
    pub checkpoint_last_bytes: AtomicU64,
    pub checkpoint_max_pause_ns: AtomicU64,
    pub reorganizes: AtomicU64,
    pub reorganize_last_ns: AtomicU64,
    pub reorganize_total_ns: AtomicU64,
    pub defrag_cycles: AtomicU64,
    pub defrag_moved_bytes: AtomicU64,
    pub defrag_reclaimed_bytes: AtomicU64,
    pub defrag_retired_segments: AtomicU64,
    /// Added to by every write: per-thread slots.
    pub writes: crate::sharded::Sharded,
    /// Deletes of keys T1 held no live version of: not logged.
    pub deletes_elided: crate::sharded::Sharded,
    pub ordered_values: AtomicU64,
    /// Sorted runs the maintenance thread keeps (module `maintenance::runs`).
    pub sorted_runs: AtomicU64,
    /// Writer bytes (`runs::written`) when the current tail began.
    pub tail_written: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, v: u64) {
        c.fetch_add(v, Ordering::Relaxed);
    }
    pub fn set(c: &AtomicU64, v: u64) {
        c.store(v, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// Log bytes a stored entry costs besides its key and value: the 48-byte
/// record header, the 9-byte batch op header, the 4-byte value checksum and
/// half of the 16-byte alignment on average. Live bytes count it, so that
/// the format's own overhead is not taken for garbage: with 100-byte
/// values it is 40% of a record, and counted as garbage it made a pure
/// insert load look 1.6x amplified and set defragment churning.
pub const ENTRY_OVERHEAD: usize = 48 + 9 + 4 + 8;

/// What one stored entry adds to its segment's live bytes.
pub(crate) fn live_cost(key_len: usize, value_len: usize) -> i64 {
    (key_len + value_len + ENTRY_OVERHEAD) as i64
}

/// A point-in-time copy of the engine's statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Statistics {
    /// T1 shards.
    pub shards: u64,
    /// T1 shard splits since open.
    pub splits: u64,
    /// Writer pause of the last split, in microseconds.
    pub split_last_pause_us: u64,
    /// Longest writer pause of any split, in microseconds.
    pub split_max_pause_us: u64,
    /// Checkpoints since open.
    pub checkpoints: u64,
    /// Duration of the last checkpoint, in microseconds.
    pub checkpoint_last_us: u64,
    /// Size of the last snapshot file, in bytes.
    pub checkpoint_last_bytes: u64,
    /// Longest writer gate held by a checkpoint, in microseconds.
    pub checkpoint_max_pause_us: u64,
    /// Shard reorganizations T1 ran (background and forced).
    pub t1_reorganizes: u64,
    /// Longest T1 reorganization, in microseconds.
    pub t1_reorganize_max_us: u64,
    /// Longest time a T1 writer waited on maintenance, in microseconds.
    pub t1_max_writer_wait_us: u64,
    /// T1 writes that waited on maintenance (a frozen region's seal, or an
    /// in-flight write of the same key).
    pub t1_writer_waits: u64,
    /// Duration of T1's last shard reorganization, in microseconds.
    pub t1_reorganize_last_us: u64,
    /// Time T1 spent reorganizing shards in total, in microseconds.
    pub t1_reorganize_total_us: u64,
    /// Longest wait of T1 maintenance for in-flight writers to drain from a
    /// frozen region, in microseconds (writers do not wait for it).
    pub t1_max_drain_us: u64,
    /// Point lookups that passed a Bloom filter and missed.
    pub bloom_false_positives: u64,
    /// Forced reorganizations (`reorganize()` calls) since open.
    pub reorganizes: u64,
    /// Duration of the last reorganization, in microseconds.
    pub reorganize_last_us: u64,
    /// Total time spent in reorganization, in microseconds.
    pub reorganize_total_us: u64,
    /// Defragment cycles since open.
    pub defrag_cycles: u64,
    /// Live bytes relocated by defragment.
    pub defrag_moved_bytes: u64,
    /// Bytes of segment files removed by defragment.
    pub defrag_reclaimed_bytes: u64,
    /// Segment files removed.
    pub defrag_retired_segments: u64,
    /// Values moved into key order (`compact_range` and the background
    /// key-order pass).
    pub ordered_values: u64,
    /// Wall time T2 rewrites (defragment, key order, sorted runs) ran, in
    /// microseconds.
    pub rewrite_us: u64,
    /// CPU time they used, in microseconds.
    pub rewrite_cpu_us: u64,
    /// Bytes of keys and values T1 still points at in T2, plus
    /// [`ENTRY_OVERHEAD`] per stored entry.
    pub t2_live_bytes: u64,
    /// Bytes of all segment files.
    pub t2_total_bytes: u64,
    /// Segment files.
    pub t2_segments: u64,
    /// Memory used by T1, in bytes (as T1 reports it).
    pub t1_memory_bytes: u64,
    /// Entries in T1.
    pub t1_entries: u64,
    /// Log bytes written since the last checkpoint (what recovery replays).
    pub log_bytes_since_checkpoint: u64,
    /// Group commit rounds (`msync` calls on behalf of sync writers).
    pub sync_rounds: u64,
    /// Writers that asked for a sync.
    pub sync_waiters: u64,
    /// Longest segment rollover, in microseconds.
    pub rollover_max_us: u64,
    /// Sorted runs that writes since open were sorted into (forgotten once
    /// the quiet-time key-order pass has put everything in one order).
    pub sorted_runs: u64,
    /// Log bytes written since the last sorted run began: values that no
    /// run holds yet, which a scan reads one by one (0 with runs off).
    pub unsorted_bytes: u64,
    /// Regions of `disable_wal` puts sealed since open (`unlogged.rs`).
    pub unlogged_regions: u64,
    /// Value bytes in the open region: acknowledged `disable_wal` puts a
    /// crash would lose until the next seal (`Db::flush` seals).
    pub unlogged_open_bytes: u64,
    /// Bytes per second writers are held to while defragment catches up
    /// (0: not throttled).
    pub write_rate_limit: u64,
    /// Deletes that found no live version of their key and so wrote no
    /// record (`sync` deletes are always logged).
    pub deletes_elided: u64,
    /// Writes that slept because of that limit.
    pub delayed_writes: u64,
    /// Total time those writes slept, in microseconds.
    pub write_delay_us: u64,
    /// Background work that failed since open (defragment, checkpoint,
    /// sorted runs, key ordering, spare segments, a panicking thread).
    pub background_errors: u64,
    /// The last such failure.
    pub last_background_error: Option<String>,
    /// Snapshots held (explicit ones and open iterators).
    pub snapshots: u64,
    /// Age of the oldest one, in milliseconds.
    pub oldest_snapshot_age_ms: u64,
    /// Old versions kept for them.
    pub snapshot_versions: u64,
    /// Bytes they pin: values of kept versions, plus emptied segments not
    /// retired because snapshots were held.
    pub snapshot_pinned_bytes: u64,
}

impl fmt::Display for Statistics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "t1: shards={} entries={} memory_bytes={} splits={} split_last_pause_us={} split_max_pause_us={}",
            self.shards, self.t1_entries, self.t1_memory_bytes, self.splits,
            self.split_last_pause_us, self.split_max_pause_us
        )?;
        writeln!(
            f,
            "t2: segments={} total_bytes={} live_bytes={} log_bytes_since_checkpoint={} rollover_max_us={}",
            self.t2_segments, self.t2_total_bytes, self.t2_live_bytes,
            self.log_bytes_since_checkpoint, self.rollover_max_us
        )?;
        writeln!(
            f,
            "sync: rounds={} waiters={}",
            self.sync_rounds, self.sync_waiters
        )?;
        writeln!(
            f,
            "checkpoint: count={} last_us={} last_bytes={} max_pause_us={}",
            self.checkpoints,
            self.checkpoint_last_us,
            self.checkpoint_last_bytes,
            self.checkpoint_max_pause_us
        )?;
        writeln!(
            f,
            "reorganize: forced={} last_us={} total_us={} t1_reorganizes={} t1_last_us={} t1_max_us={} t1_total_us={} t1_max_drain_us={} t1_writer_waits={} t1_max_writer_wait_us={} bloom_false_positives={}",
            self.reorganizes, self.reorganize_last_us, self.reorganize_total_us,
            self.t1_reorganizes, self.t1_reorganize_last_us, self.t1_reorganize_max_us,
            self.t1_reorganize_total_us, self.t1_max_drain_us, self.t1_writer_waits,
            self.t1_max_writer_wait_us, self.bloom_false_positives
        )?;
        writeln!(
            f,
            "defragment: cycles={} moved_bytes={} reclaimed_bytes={} retired_segments={} ordered_values={} busy_us={} cpu_us={}",
            self.defrag_cycles,
            self.defrag_moved_bytes,
            self.defrag_reclaimed_bytes,
            self.defrag_retired_segments,
            self.ordered_values,
            self.rewrite_us,
            self.rewrite_cpu_us
        )?;
        writeln!(
            f,
            "sorted runs: count={} unsorted_bytes={}",
            self.sorted_runs, self.unsorted_bytes
        )?;
        writeln!(
            f,
            "unlogged puts: regions_sealed={} open_bytes={}",
            self.unlogged_regions, self.unlogged_open_bytes
        )?;
        writeln!(
            f,
            "write throttle: rate_limit={} delayed_writes={} delay_us={}",
            self.write_rate_limit, self.delayed_writes, self.write_delay_us
        )?;
        writeln!(f, "deletes elided: {}", self.deletes_elided)?;
        writeln!(
            f,
            "snapshots: count={} oldest_age_ms={} versions={} pinned_bytes={}",
            self.snapshots,
            self.oldest_snapshot_age_ms,
            self.snapshot_versions,
            self.snapshot_pinned_bytes
        )?;
        writeln!(
            f,
            "background errors: count={} last={}",
            self.background_errors,
            self.last_background_error.as_deref().unwrap_or("none")
        )
    }
}
