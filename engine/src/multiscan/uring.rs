//! The io_uring read queue of one MultiScan.
//!
//! Rings come from a process-wide pool: a scan takes one for its lifetime
//! (the lock is held only to pop or push, so concurrent scans never
//! serialise on it) and returns it, drained, when it ends. A ring per scan
//! rather than per thread keeps the scan `Send`: its completions arrive on
//! its own ring whichever thread polls it.
//!
//! The MultiScan's `unsafe` lives here and in `t2/residency.rs` (`mincore`,
//! `madvise`, `posix_fadvise`). The invariant that makes the
//! reads sound: a buffer handed to the kernel is owned by a [`Reader`]
//! slot that is neither resized nor freed until its completion has been
//! reaped, and `Drop` reaps every outstanding completion before anything
//! is freed. The segment (and so its file descriptor) is kept alive by an
//! `Arc` in the same slot.

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;

use io_uring::{opcode, types, IoUring};
use parking_lot::Mutex;

use super::buffers::{AlignedBuf, BufPool};
use super::fallback;
use crate::t2::segment::Segment;

/// Submission-queue entries per ring; reads beyond it wait in `pending`.
const RING_ENTRIES: u32 = 256;
/// Rings kept for reuse.
const POOL_MAX: usize = 32;

/// Idle rings, each with the read buffers its last scans left behind.
static POOL: Mutex<Vec<(IoUring, BufPool)>> = Mutex::new(Vec::new());

fn take_ring() -> Option<(IoUring, BufPool)> {
    if !fallback::io_uring_allowed() {
        return None;
    }
    if let Some(r) = POOL.lock().pop() {
        return Some(r);
    }
    match IoUring::builder()
        .setup_cqsize(RING_ENTRIES * 2)
        .build(RING_ENTRIES)
    {
        Ok(r) => Some((r, BufPool::default())),
        Err(e) => {
            fallback::mark_unavailable(&e);
            None
        }
    }
}

/// Where a read stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Queued (or unknown id); nothing submitted.
    Pending,
    /// Submitted, completion not reaped yet.
    InFlight,
    /// Read completely; the buffer (if kept) holds the bytes.
    Done,
    /// Failed or short: the caller reads through the mapping instead.
    Failed,
}

/// How a reader fetches an extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `IORING_OP_FADVISE(WILLNEED)`: into the page cache.
    Advise,
    /// Buffered `IORING_OP_READ` into an owned buffer.
    Read,
    /// `O_DIRECT` `IORING_OP_READ` into an owned, page-aligned buffer.
    Direct,
}

struct Op {
    seg: Arc<Segment>,
    off: u64,
    len: u32,
    buf: Option<AlignedBuf>,
    /// `IORING_OP_FADVISE(WILLNEED)`, whatever the reader's mode.
    advise: bool,
    status: Status,
    /// The scan no longer needs it: free the buffer once reaped.
    released: bool,
}

/// Statistics of one reader.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IoStats {
    pub submitted: u64,
    pub bytes: u64,
    pub failed: u64,
    pub waits: u64,
}

/// One scan's io_uring reads, identified by caller-chosen dense ids.
pub(crate) struct Reader {
    /// Taken back out only in `Drop`, to return it to the pool.
    ring: ManuallyDrop<IoUring>,
    /// Buffers of reads already released, for the next reads.
    bufs: BufPool,
    ops: Vec<Option<Op>>,
    pending: VecDeque<usize>,
    inflight: usize,
    mode: Mode,
    pub stats: IoStats,
}

impl Reader {
    /// A reader on a pooled ring, or `None` when io_uring is unavailable.
    pub fn new(mode: Mode) -> Option<Reader> {
        let (ring, bufs) = take_ring()?;
        Some(Reader {
            ring: ManuallyDrop::new(ring),
            bufs,
            ops: Vec::new(),
            pending: VecDeque::new(),
            inflight: 0,
            mode,
            stats: IoStats::default(),
        })
    }

    /// Reads land in buffers the scan serves values from (not advice).
    pub fn keeps_buffers(&self) -> bool {
        self.mode != Mode::Advise
    }

    /// Queues the read of extent `x` of `seg` under `id` (a page-cache
    /// advice when the extent says so, even if the reader reads into
    /// buffers); `urgent` puts it ahead of everything queued. Call
    /// [`Reader::flush`] to submit.
    pub fn enqueue(
        &mut self,
        id: usize,
        seg: &Arc<Segment>,
        x: &super::plan::Extent,
        urgent: bool,
    ) {
        let (off, len, advise) = (x.start, x.len, x.advise);
        if self.ops.len() <= id {
            self.ops.resize_with(id + 1, || None);
        }
        if let Some(slot) = self.ops.get_mut(id) {
            *slot = Some(Op {
                seg: seg.clone(),
                off,
                len,
                buf: None,
                advise,
                status: Status::Pending,
                released: false,
            });
        }
        if urgent {
            self.pending.push_front(id);
        } else {
            self.pending.push_back(id);
        }
    }

    /// Moves queued reads into the ring while it has room and submits them
    /// with one syscall.
    pub fn flush(&mut self) {
        let mut pushed = 0;
        while self.inflight < RING_ENTRIES as usize {
            let Some(id) = self.pending.pop_front() else {
                break;
            };
            let mode = self.mode;
            let Some(op) = self.ops.get_mut(id).and_then(Option::as_mut) else {
                continue;
            };
            if op.released || op.status != Status::Pending {
                continue;
            }
            let len = op.len as usize;
            let file = match mode {
                Mode::Direct if !op.advise => op.seg.direct_file().unwrap_or(op.seg.file()),
                _ => op.seg.file(),
            };
            let fd = types::Fd(file.as_raw_fd());
            let sqe = if op.advise {
                opcode::Fadvise::new(fd, len as libc::off_t, libc::POSIX_FADV_WILLNEED)
                    .offset(op.off)
                    .build()
            } else {
                if op.buf.is_none() {
                    op.buf = self.bufs.take(len);
                }
                let Some(buf) = op.buf.as_mut() else {
                    op.status = Status::Failed;
                    continue;
                };
                opcode::Read::new(fd, buf.as_mut_ptr(), op.len)
                    .offset(op.off)
                    .build()
            }
            .user_data(id as u64);
            // SAFETY: a read's buffer is `len` writable bytes owned by the
            // op, which is neither freed, moved nor resized until the
            // completion for `id` is reaped (`reap` and `Drop`); an advice
            // touches no user memory. The fd stays open because the op
            // holds an `Arc` of its segment.
            let ok = unsafe { self.ring.submission().push(&sqe).is_ok() };
            if !ok {
                self.pending.push_front(id);
                break;
            }
            op.status = Status::InFlight;
            self.inflight += 1;
            pushed += 1;
            self.stats.submitted += 1;
            self.stats.bytes += u64::from(op.len);
        }
        if pushed > 0 && self.ring.submit().is_err() {
            // Entries stay in the SQ; the next submit_and_wait retries.
        }
    }

    fn reap(&mut self) {
        for c in self.ring.completion() {
            let (ud, res) = (c.user_data(), c.result());
            let Some(op) = self.ops.get_mut(ud as usize).and_then(Option::as_mut) else {
                continue;
            };
            self.inflight = self.inflight.saturating_sub(1);
            // A read returns its length; an advice returns 0.
            let complete = if op.advise {
                res == 0
            } else {
                res >= 0 && res as u32 == op.len
            };
            op.status = if complete {
                Status::Done
            } else {
                self.stats.failed += 1;
                Status::Failed
            };
            if op.released {
                if let Some(b) = op.buf.take() {
                    self.bufs.give(b);
                }
            }
        }
    }

    /// Status of read `id`.
    pub fn status(&self, id: usize) -> Status {
        self.ops
            .get(id)
            .and_then(Option::as_ref)
            .map_or(Status::Pending, |o| o.status)
    }

    /// Blocks until read `id` completes (submitting it first if it is still
    /// queued) and returns its final status.
    pub fn wait(&mut self, id: usize) -> Status {
        let mut waited = false;
        let mut errors = 0;
        loop {
            self.reap();
            match self.status(id) {
                Status::Done => return Status::Done,
                Status::Failed => return Status::Failed,
                Status::Pending => {
                    if self.ops.get(id).and_then(Option::as_ref).is_none() {
                        return Status::Failed;
                    }
                    // Jump the queue: this is the read the scan needs now.
                    if let Some(p) = self.pending.iter().position(|&x| x == id) {
                        self.pending.remove(p);
                    }
                    self.pending.push_front(id);
                    self.flush();
                    if self.status(id) == Status::Pending {
                        // The ring is full of earlier reads; let one finish.
                        if self.ring.submit_and_wait(1).is_err() {
                            return Status::Failed;
                        }
                    }
                }
                Status::InFlight => {
                    if !waited {
                        self.stats.waits += 1;
                        waited = true;
                    }
                    if self.ring.submit_and_wait(1).is_err() {
                        // EINTR and the like: poll again, but give up on a
                        // ring that keeps failing. The read stays in flight
                        // (its buffer is kept until `Drop` reaps it); the
                        // caller reads the value through the mapping.
                        errors += 1;
                        if errors > 100 {
                            return Status::Failed;
                        }
                        std::thread::yield_now();
                    }
                }
            }
            self.flush();
        }
    }

    /// The bytes of a completed read whose buffer was kept.
    pub fn buffer(&self, id: usize) -> Option<&[u8]> {
        let op = self.ops.get(id)?.as_ref()?;
        if op.status != Status::Done || op.released {
            return None;
        }
        op.buf.as_ref().and_then(|b| b.get(op.len as usize))
    }

    /// The scan no longer needs read `id`: its buffer is freed now, or on
    /// completion if it is still in flight; a queued read is dropped.
    pub fn release(&mut self, id: usize) {
        if let Some(slot) = self.ops.get_mut(id) {
            match slot {
                Some(op) if op.status == Status::InFlight => op.released = true,
                _ => {
                    if let Some(b) = slot.take().and_then(|op| op.buf) {
                        self.bufs.give(b);
                    }
                }
            }
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // Buffers may be freed only after the kernel is done with them.
        self.pending.clear();
        let mut failures = 0;
        while self.inflight > 0 {
            self.reap();
            if self.inflight == 0 {
                break;
            }
            if self.ring.submit_and_wait(1).is_err() {
                failures += 1;
                if failures > 1000 {
                    // The ring is unusable; leak the buffers rather than
                    // free memory the kernel may still write.
                    std::mem::forget(std::mem::take(&mut self.ops));
                    // SAFETY: `ring` is not used after this point.
                    unsafe { ManuallyDrop::drop(&mut self.ring) };
                    return;
                }
            }
        }
        for op in std::mem::take(&mut self.ops).into_iter().flatten() {
            if let Some(b) = op.buf {
                self.bufs.give(b);
            }
        }
        // SAFETY: `ring` is taken exactly once, here, and never used again
        // (the struct is being dropped).
        let ring = unsafe { ManuallyDrop::take(&mut self.ring) };
        let bufs = std::mem::take(&mut self.bufs);
        let mut pool = POOL.lock();
        if pool.len() < POOL_MAX {
            pool.push((ring, bufs));
        }
    }
}
