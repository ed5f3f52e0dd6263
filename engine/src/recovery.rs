//! Opening a database: the directory checked and locked, the segments
//! mapped, T1 loaded from the last checkpoint, the log replayed from its
//! LSN up to `LOGEND`, torn tails cut (`docs/design.md` §5, §11).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::apply;
use crate::checkpoint::{self, Manifest};
use crate::dir::{self, DirLock};
use crate::error::{Error, Result};
use crate::index::{Payload, T1Config, T1};
use crate::infolog::InfoLog;
use crate::options::Options;
use crate::state::{CkptState, Inner};
use crate::stats::Counters;
use crate::t2::durable::{DurableEnd, End};
use crate::t2::log::Log;
use crate::t2::record::split_lsn;
use crate::t2::scan;
use crate::t2::segment::{MapOpts, Segment};

fn t1_config(o: &Options) -> T1Config {
    let mut c = T1Config::default();
    if o.split_threshold > 0 {
        c.split_threshold = o.split_threshold;
    }
    if !o.bloom {
        c.bloom_bits_per_key = 0;
    }
    c.background = o.background;
    c
}

fn adjust_in(segs: &BTreeMap<u32, Arc<Segment>>) -> impl Fn(u32, i64) + '_ {
    move |id, d| {
        if let Some(s) = segs.get(&id) {
            s.live.fetch_add(d, Ordering::Relaxed);
        }
    }
}

/// Opens (or creates) the database in directory `path`, recovering it
/// from its last checkpoint and log; background work is not started.
pub(crate) fn open(path: &Path, opts: Options) -> Result<Arc<Inner>> {
    opts.validate()?;
    let dir = path.to_path_buf();
    let listing = dir::prepare(&dir, opts.create_if_missing, opts.error_if_exists)?;
    let lock = DirLock::acquire(&dir)?;
    for t in &listing.temps {
        let p = dir.join(t);
        std::fs::remove_file(&p)
            .map_err(|e| Error::io(format!("removing leftover {}", p.display()), e))?;
    }
    let info = Arc::new(InfoLog::open(&dir)?);
    info.log(format_args!(
        "open {} segment_size={} checkpoint_interval_bytes={} bloom={} inline={} prefault={} random_access={} pread_min_bytes={} background={} maintenance_nice={}",
        dir.display(), opts.segment_size, opts.checkpoint_interval_bytes, opts.bloom,
        opts.inline_values, opts.prefault, opts.random_access, opts.pread_min_bytes,
        opts.background, opts.maintenance_nice
    ));
    let t0 = Instant::now();
    let map_opts = MapOpts {
        prefault: opts.prefault,
        random: opts.random_access,
    };
    // Prefaulting existing segments reads them all in: worth it when
    // they fit in memory, a thrash when they are larger than it (the
    // case vmemkv is built for). New segments never are (`Segment::create`).
    let existing = (listing.segments.len() as u64).saturating_mul(opts.segment_size as u64);
    let open_opts = match crate::membudget::budget() {
        Some(b) if opts.prefault && existing > b / 2 => {
            info.log(format_args!(
                "open: not prefaulting {} existing segments ({existing} bytes): more than half of the {b}-byte memory budget",
                listing.segments.len()
            ));
            MapOpts {
                prefault: false,
                ..map_opts
            }
        }
        _ => map_opts,
    };
    let mut segs: BTreeMap<u32, Arc<Segment>> = BTreeMap::new();
    for &id in &listing.segments {
        let p = dir.join(crate::files::segment(id));
        segs.insert(id, Arc::new(Segment::open(&p, id, open_opts)?));
    }
    let contiguous_from_zero = segs.keys().copied().eq(0..segs.len() as u32);

    // 1. The checkpoint, or a full replay when there is none usable.
    let mut t1 = T1::new(t1_config(&opts));
    let mut start = 0u64;
    let mut ckpt_id = 0u64;
    let mut snapshot_bytes = 0u64;
    if listing.has_manifest {
        let t_load = Instant::now();
        let loaded = Manifest::load(&dir).and_then(|m| {
            let n = load_checkpoint(&dir, &m, &t1, &segs)?;
            Ok((m, n))
        });
        match loaded {
            Ok((m, n)) => {
                info.log(format_args!(
                    "recovery: loaded checkpoint {} ({} entries, {} bytes) covering LSN {:016x} in {:.3} ms",
                    m.snapshot,
                    n,
                    m.snapshot_bytes,
                    m.lsn,
                    t_load.elapsed().as_secs_f64() * 1e3
                ));
                start = m.lsn;
                ckpt_id = m.id;
                snapshot_bytes = m.snapshot_bytes;
            }
            Err(e) if contiguous_from_zero => {
                info.log(format_args!(
                    "recovery: checkpoint unusable ({e}); falling back to a full log replay"
                ));
                t1 = T1::new(t1_config(&opts));
                for s in segs.values() {
                    s.live.store(0, Ordering::Relaxed);
                }
            }
            Err(e) => {
                info.log(format_args!("recovery failed: {e}"));
                return Err(e);
            }
        }
    } else if !contiguous_from_zero {
        return Err(Error::Corruption(format!(
            "{}: no MANIFEST and the segment files are not 00000000.seg onwards; \
             the log cannot be replayed from its start",
            dir.display()
        )));
    }

    // 2. How far the acknowledged log reaches. A new database gets its
    // LOGEND before its first segment, so a log without one was damaged.
    let (durable, end) = if listing.has_log_end {
        DurableEnd::open(&dir)?
    } else if segs.is_empty() && !listing.has_manifest {
        let end = End {
            lsn: 0,
            seg_size: opts.segment_size as u64,
        };
        let d = DurableEnd::create(&dir, end)?;
        crate::fsutil::sync_dir(&dir)?;
        (d, end)
    } else {
        let e = Error::Corruption(format!(
            "{}: {} is missing, so how far the acknowledged log reaches is unknown",
            dir.display(),
            dir.join(crate::files::LOGEND).display()
        ));
        info.log(format_args!("recovery failed: {e}"));
        return Err(e);
    };
    check_sizes(&segs, end, opts.segment_size).inspect_err(|e| {
        info.log(format_args!("recovery failed: {e}"));
    })?;

    // 3. Replay the log from the checkpoint's LSN.
    let (start_seg, start_off) = split_lsn(start);
    if segs.is_empty() && start == 0 {
        segs.insert(
            0,
            Arc::new(Segment::create(&dir, 0, opts.segment_size, map_opts)?),
        );
        crate::fsutil::sync_dir(&dir)?;
    }
    let tail: Vec<Arc<Segment>> = segs.range(start_seg..).map(|(_, s)| s.clone()).collect();
    if tail.first().map(|s| s.id) != Some(start_seg)
        || !tail
            .iter()
            .map(|s| s.id)
            .eq(start_seg..start_seg + tail.len() as u32)
    {
        let e = Error::Corruption(format!(
            "{}: segment files from {} onwards must all exist to replay the log from LSN {start:016x}",
            dir.display(),
            crate::files::segment(start_seg)
        ));
        info.log(format_args!("recovery failed: {e}"));
        return Err(e);
    }
    for s in segs.range(..start_seg).map(|(_, s)| s) {
        s.tail.store(s.size() as u64, Ordering::Release);
    }
    let t_replay = Instant::now();
    let rep = {
        let adjust = adjust_in(&segs);
        let inline = opts.inline_values;
        let t1r = &t1;
        scan::recover(&tail, start_off as usize, end.lsn, |seg, f, body| {
            apply::replay_record(t1r, inline, seg, f.off, &f.header, body, &adjust)
        })
    };
    let rep = match rep {
        Ok(r) => r,
        Err(e) => {
            info.log(format_args!("recovery failed: {e}"));
            return Err(e);
        }
    };
    if let Some((s, off, len, why)) = rep.truncated {
        info.log(format_args!(
            "recovery: {} in {} at offset {off}, past LOGEND: the log ends there, {len} bytes cleared (point-in-time recovery)",
            why.describe(),
            crate::files::segment(s)
        ));
    }
    // The torn tail's zeroing and the removed segments' seals must be
    // gone from disk before any file is: a crash part-way through must
    // leave a contiguous prefix whose last segment is not sealed, or the
    // next open would report the removed segment as lost.
    if let Some((id, _, _, _)) = rep.truncated {
        if let Some(s) = segs.get(&id) {
            crate::fsutil::sync_file(s.file(), &s.path)?;
        }
    }
    for id in &rep.removed_segments {
        if let Some(s) = segs.get(id) {
            let at = crate::t2::record::seal_offset(s.size());
            s.zero_range(at, s.size() - at)?;
            crate::fsutil::sync_file(s.file(), &s.path)?;
        }
    }
    for id in rep.removed_segments.iter().rev() {
        if let Some(s) = segs.remove(id) {
            std::fs::remove_file(&s.path)
                .map_err(|e| Error::io(format!("removing {}", s.path.display()), e))?;
            info.log(format_args!(
                "recovery: removed {} (after the end of the recovered log)",
                s.path.display()
            ));
        }
    }
    let replay_ms = t_replay.elapsed().as_secs_f64() * 1e3;
    // Replayed entries sit in the shards' append regions, which every scan
    // would merge entry by entry until a merge ran, and a workload that
    // keeps writing a little (YCSB-E's inserts) never lets the quiet merge
    // run: ycsb_e after a reopen ran at 0.4x. They are merged before any
    // reader exists.
    let t_merge = Instant::now();
    let merged = if rep.records > 0 {
        t1.merge_append_regions(&|| true)
    } else {
        0
    };
    info.log(format_args!(
        "recovery: replayed {} records ({} bytes) from LSN {start:016x} to {:016x} in {replay_ms:.3} ms, merged {merged} shards in {:.3} ms; open took {:.3} ms",
        rep.records,
        rep.bytes,
        rep.end,
        t_merge.elapsed().as_secs_f64() * 1e3,
        t0.elapsed().as_secs_f64() * 1e3
    ));
    let log = Log::new(&dir, opts.segment_size, map_opts, segs, start, durable)?;
    // Whatever a killed process left in the page cache becomes durable
    // now, so later sync writes never sit on a non-durable prefix.
    log.sync_to(rep.end)?;
    crate::t1_stats::log_events(&t1, info.clone());
    let max_value = opts.max_value_size();
    let inner = Arc::new(Inner {
        dir,
        t1,
        log,
        gate: Default::default(),
        info,
        counters: Counters::default(),
        bg_errors: Default::default(),
        snapshot_pinned_bytes: AtomicU64::new(0),
        throttle: Default::default(),
        ckpt: Mutex::new(CkptState {
            id: ckpt_id,
            lsn: start,
        }),
        snapshot_bytes: AtomicU64::new(snapshot_bytes),
        since_ckpt_base: AtomicU64::new(rep.bytes),
        appended_at_ckpt: AtomicU64::new(0),
        defrag: Default::default(),
        stripes: crate::stripes::Stripes::new(),
        packed: Default::default(),
        unlogged: Default::default(),
        max_value,
        opts,
        _lock: lock,
    });
    // Recovery applied everything it found: all of it is visible.
    inner.t1.versions().publish_all(inner.log.tail_lsn());
    Ok(inner)
}

/// Segments are created at full size and never shrink, so one shorter
/// than it was created was truncated: the segment `LOGEND` points into must
/// have the size it records, and later ones (created since) that size or
/// the configured one. Sealed segments are checked by their seal.
fn check_sizes(segs: &BTreeMap<u32, Arc<Segment>>, end: End, configured: usize) -> Result<()> {
    let (end_seg, _) = split_lsn(end.lsn);
    for s in segs.range(end_seg..).map(|(_, s)| s) {
        let size = s.size() as u64;
        let ok = size == end.seg_size || (s.id > end_seg && size == configured as u64);
        if !ok {
            return Err(Error::Corruption(format!(
                "{} has {size} bytes but was created with {} (truncated?)",
                s.path.display(),
                end.seg_size
            )));
        }
    }
    Ok(())
}

/// Loads a checkpoint, checking every stored locator against the segments.
fn load_checkpoint(
    dir: &Path,
    m: &Manifest,
    t1: &T1,
    segs: &BTreeMap<u32, Arc<Segment>>,
) -> Result<u64> {
    let snap = m.snapshot.clone();
    checkpoint::load_snapshot(dir, m, t1, |key, e| {
        if let Payload::Stored(l) = e.payload {
            let seg = segs.get(&l.segment).filter(|s| {
                (l.offset as usize)
                    .checked_add(l.len as usize)
                    .is_some_and(|end| end <= s.size())
            });
            match seg {
                Some(s) => {
                    s.live.fetch_add(
                        crate::stats::live_cost(key.len(), l.len as usize),
                        Ordering::Relaxed,
                    );
                }
                None => {
                    return Err(Error::Corruption(format!(
                        "{}: an entry points at {} offset {} (+{}), which does not exist",
                        dir.join(&snap).display(),
                        crate::files::segment(l.segment),
                        l.offset,
                        l.len
                    )))
                }
            }
        }
        Ok(())
    })
}
