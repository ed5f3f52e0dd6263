//! T1: the in-memory index (under construction by the T1 work item).
