//! What an engine can do, asked before calling it ([`crate::Db::capabilities`]).
//!
//! Most engines behind the trait support everything; a write-once hash
//! store such as Sparkey cannot iterate in key order. Its adapter still
//! answers every call (the unsupported ones with `NotSupported`), and
//! [`Capabilities`] lets a caller — the conformance suite, db_bench — say
//! up front which operation groups do not apply and why, instead of
//! discovering it from an error half-way through a run.

use std::fmt;

/// One optional group of operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Ordered cursors ([`crate::Db::iter`]): seek, next, prev, bounds.
    OrderedIteration,
    /// MultiScan ([`crate::Db::multi_scan`]); needs ordered iteration.
    MultiScan,
    /// Point-in-time views ([`crate::Db::snapshot`]).
    Snapshots,
    /// `WriteBatch::delete_range`.
    DeleteRange,
    /// Column families beyond `default` ([`crate::Db::create_cf`] and the
    /// `_cf` calls).
    ColumnFamilies,
}

impl Capability {
    /// Every capability.
    pub const ALL: [Capability; 5] = [
        Capability::OrderedIteration,
        Capability::MultiScan,
        Capability::Snapshots,
        Capability::DeleteRange,
        Capability::ColumnFamilies,
    ];

    /// A short name, e.g. `"ordered iteration"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::OrderedIteration => "ordered iteration",
            Capability::MultiScan => "multi_scan",
            Capability::Snapshots => "snapshots",
            Capability::DeleteRange => "delete_range",
            Capability::ColumnFamilies => "column families",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The optional operation groups an engine lacks, each with the reason,
/// and whether it keeps what it is given at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    missing: Vec<(Capability, &'static str)>,
    /// Set for an engine that answers every call but stores nothing (the
    /// null engine): a caller that checks what it wrote must skip it.
    discards: Option<&'static str>,
}

impl Capabilities {
    /// Everything supported (the trait's default).
    pub fn all() -> Self {
        Capabilities::default()
    }

    /// Marks `cap` unsupported, with the engine's reason (a sentence that
    /// names the engine's limit, e.g. `"sparkey: no ordered iteration (hash
    /// index)"`).
    pub fn without(mut self, cap: Capability, why: &'static str) -> Self {
        self.missing.retain(|(c, _)| *c != cap);
        self.missing.push((cap, why));
        self
    }

    /// Whether `cap` is supported.
    pub fn supports(&self, cap: Capability) -> bool {
        self.why_not(cap).is_none()
    }

    /// Why `cap` is unsupported, or `None` if it is supported.
    pub fn why_not(&self, cap: Capability) -> Option<&'static str> {
        self.missing
            .iter()
            .find(|(c, _)| *c == cap)
            .map(|(_, why)| *why)
    }

    /// The unsupported capabilities with their reasons.
    pub fn missing(&self) -> &[(Capability, &'static str)] {
        &self.missing
    }

    /// Marks the engine as one that drops every write, with a sentence
    /// saying so (e.g. `"null: stores nothing"`).
    pub fn discarding_writes(mut self, why: &'static str) -> Self {
        self.discards = Some(why);
        self
    }

    /// Why the engine keeps nothing it is given, or `None` for an engine
    /// that stores data (every real one).
    pub fn discards_writes(&self) -> Option<&'static str> {
        self.discards
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_supports_everything_and_without_records_reasons() {
        let all = Capabilities::all();
        assert!(Capability::ALL.iter().all(|c| all.supports(*c)));
        let c = all
            .without(Capability::OrderedIteration, "no order")
            .without(Capability::OrderedIteration, "no order, really");
        assert!(!c.supports(Capability::OrderedIteration));
        assert_eq!(
            c.why_not(Capability::OrderedIteration),
            Some("no order, really")
        );
        assert!(c.supports(Capability::Snapshots));
        assert_eq!(c.missing().len(), 1);
        assert_eq!(c.discards_writes(), None);
        let null = Capabilities::all().discarding_writes("stores nothing");
        assert_eq!(null.discards_writes(), Some("stores nothing"));
        assert!(Capability::ALL.iter().all(|c| null.supports(*c)));
    }
}
