//! CPU priority for maintenance. On a machine with as many busy writers as
//! cores, maintenance at the writers' priority takes a third of their CPU;
//! at a higher nice value the scheduler gives writers precedence while
//! maintenance still progresses (nice is a weight, not a starvation rule).

/// Sets the calling thread's nice value (Linux: per thread). Threads
/// inherit it, and lowering it again needs privilege, so long-lived threads
/// stay at their priority and run niced work on short helper threads.
fn set_thread_nice(nice: i32) {
    if nice == 0 {
        return;
    }
    // SAFETY: gettid has no preconditions; setpriority(PRIO_PROCESS, tid)
    // changes only this thread's nice value. Failure only means the thread
    // keeps its priority, which is harmless.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}

/// Runs `f` on a helper thread with nice value `nice` and waits for it, so
/// the caller's own priority is untouched. `nice == 0` runs `f` inline.
pub(crate) fn niced<R: Send>(nice: i32, f: impl FnOnce() -> R + Send) -> R {
    if nice == 0 {
        return f();
    }
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            set_thread_nice(nice);
            f()
        });
        match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}
