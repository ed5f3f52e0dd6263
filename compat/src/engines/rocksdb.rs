//! Placeholder; the rivals work item writes this adapter.
