//! What the engine reads from T1: statistics and maintenance events.

use std::sync::Arc;

use crate::index::T1;
use crate::infolog::InfoLog;
use crate::t1::{T1Event, T1Stats};

/// T1's counters.
pub fn stats(t1: &T1) -> T1Stats {
    t1.stats()
}

/// Routes T1's split and reorganize events to the info log.
pub fn log_events(t1: &T1, info: Arc<InfoLog>) {
    t1.set_listener(Box::new(move |ev: &T1Event| match ev {
        T1Event::Split {
            shard_lo,
            at,
            left_entries,
            right_entries,
            pause,
            duration,
        } => {
            info.log(format_args!(
            "t1 split: shard starting at {:?} split at {:?} into {left_entries} + {right_entries} entries; writer pause {:.3} ms, total {:.3} ms",
            String::from_utf8_lossy(shard_lo),
            String::from_utf8_lossy(at),
            pause.as_secs_f64() * 1e3,
            duration.as_secs_f64() * 1e3
        ));
            crate::failpoint::hit("split.published");
        }
        T1Event::Reorganized {
            shard_lo,
            entries,
            duration,
            pause,
        } => info.log(format_args!(
            "t1 reorganize: shard starting at {:?}, {entries} sorted entries; writer pause {:.3} ms, total {:.3} ms",
            String::from_utf8_lossy(shard_lo),
            pause.as_secs_f64() * 1e3,
            duration.as_secs_f64() * 1e3
        )),
    }));
}
