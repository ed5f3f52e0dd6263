//! [`Statistics`] assembled from the counters of every part.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::state::Inner;
use crate::stats::{Counters, Statistics};

/// Current statistics of the database behind `inner`.
pub(crate) fn statistics(inner: &Inner) -> Statistics {
    let c = &inner.counters;
    let us = |a: &AtomicU64| Counters::get(a) / 1000;
    let segs = inner.log.segments();
    let t = crate::t1_stats::stats(&inner.t1);
    Statistics {
        shards: t.shards as u64,
        splits: t.splits,
        split_last_pause_us: t.last_split_pause.as_micros() as u64,
        split_max_pause_us: t.max_split_pause.as_micros() as u64,
        t1_reorganizes: t.reorganizes,
        t1_reorganize_max_us: t.max_reorganize.as_micros() as u64,
        t1_max_writer_wait_us: t.max_writer_wait.as_micros() as u64,
        t1_writer_waits: t.writer_waits,
        t1_reorganize_last_us: t.last_reorganize.as_micros() as u64,
        t1_reorganize_total_us: t.total_reorganize.as_micros() as u64,
        t1_max_drain_us: t.max_drain.as_micros() as u64,
        bloom_false_positives: t.bloom_false_positives,
        checkpoints: Counters::get(&c.checkpoints),
        checkpoint_last_us: us(&c.checkpoint_last_ns),
        checkpoint_last_bytes: Counters::get(&c.checkpoint_last_bytes),
        checkpoint_max_pause_us: us(&c.checkpoint_max_pause_ns),
        reorganizes: Counters::get(&c.reorganizes),
        reorganize_last_us: us(&c.reorganize_last_ns),
        reorganize_total_us: us(&c.reorganize_total_ns),
        defrag_cycles: Counters::get(&c.defrag_cycles),
        defrag_moved_bytes: Counters::get(&c.defrag_moved_bytes),
        defrag_reclaimed_bytes: Counters::get(&c.defrag_reclaimed_bytes),
        defrag_retired_segments: Counters::get(&c.defrag_retired_segments),
        ordered_values: Counters::get(&c.ordered_values),
        rewrite_us: inner.defrag.busy_ns().0 / 1000,
        rewrite_cpu_us: inner.defrag.busy_ns().1 / 1000,
        t2_live_bytes: segs
            .iter()
            .map(|s| s.live.load(Ordering::Relaxed).max(0) as u64)
            .sum(),
        t2_total_bytes: segs.iter().map(|s| s.size() as u64).sum(),
        t2_segments: segs.len() as u64,
        t1_memory_bytes: t.memory_bytes as u64,
        t1_entries: inner.t1.len() as u64,
        log_bytes_since_checkpoint: inner.log_bytes_since_checkpoint(),
        sync_rounds: inner.log.sync_counters.rounds.load(Ordering::Relaxed),
        sync_waiters: inner.log.sync_counters.waiters.load(Ordering::Relaxed),
        rollover_max_us: inner.log.max_rollover_ns.load(Ordering::Relaxed) / 1000,
        sorted_runs: Counters::get(&c.sorted_runs),
        unsorted_bytes: crate::maintenance::runs::unsorted_bytes(inner),
        unlogged_regions: inner.unlogged.sealed(),
        unlogged_open_bytes: inner.unlogged.open_bytes(),
        write_rate_limit: inner.throttle.rate(),
        deletes_elided: c.deletes_elided.get(),
        delayed_writes: inner.throttle.delayed_writes.load(Ordering::Relaxed),
        write_delay_us: inner.throttle.delay_ns.load(Ordering::Relaxed) / 1000,
        background_errors: inner.bg_errors.count(),
        last_background_error: inner.bg_errors.last(),
        snapshots: {
            let (n, _) = inner.t1.versions().snapshots();
            n as u64
        },
        oldest_snapshot_age_ms: inner
            .t1
            .versions()
            .snapshots()
            .1
            .map_or(0, |d| d.as_millis() as u64),
        snapshot_versions: inner.t1.versions().store_size().0 as u64,
        snapshot_pinned_bytes: inner.t1.versions().store_size().1
            + inner.snapshot_pinned_bytes.load(Ordering::Relaxed),
    }
}
