//! The T1 API the engine codes against, in one place.

pub use crate::t1::{Cursor, Entry, Locator, Payload, T1Config, Upsert, INLINE_MAX, T1};
