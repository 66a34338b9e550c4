//! Engine errors.

use thiserror::Error;

/// Anything that makes a transaction or a script command fail. A failed transaction
/// leaves the engine's state unchanged.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// `insert` of a row whose primary key is already present with a different row.
    #[error("duplicate key {key} in relation {relation}: {existing} exists")]
    DuplicateKey {
        /// Relation name.
        relation: String,
        /// Key, in DDlog's text format.
        key: String,
        /// The existing row, in DDlog's text format.
        existing: String,
    },
    /// `delete_key` or `modify` of a key that is not present.
    #[error("no row with key {key} in relation {relation}")]
    UnknownKey {
        /// Relation name.
        relation: String,
        /// Key, in DDlog's text format.
        key: String,
    },
    /// A key-based update on a relation without a primary key.
    #[error("relation {relation} has no primary key")]
    NoPrimaryKey {
        /// Relation name.
        relation: String,
    },
    /// An update to a relation that is not an input relation.
    #[error("relation {relation} is not an input relation")]
    NotInput {
        /// Relation name.
        relation: String,
    },
    /// No relation with this id or name.
    #[error("unknown relation {0}")]
    UnknownRelation(String),
    /// `dump` of an internal relation whose contents the engine does not keep
    /// ([`crate::Options::internal`] is off).
    #[error("relation {0} is internal, and this engine keeps only output relations (Options::internal is off)")]
    NotMaterialized(String),
    /// `dump` of an output relation the engine counts but does not keep
    /// ([`crate::Options::counted`]).
    #[error("relation {0} is counted: this engine gives its changes but does not keep its rows (Options::counted)")]
    Counted(String),
    /// [`crate::Options::counted`] names a relation that is not an output.
    #[error("relation {0} is not an output relation: only outputs can be counted")]
    CountedNotOutput(String),
    /// A row of the wrong arity for its relation.
    #[error("relation {relation} has {expected} columns, got {got}")]
    Arity {
        /// Relation name.
        relation: String,
        /// Declared columns.
        expected: usize,
        /// Columns given.
        got: usize,
    },
    /// A script command out of place (`commit` without `start`, nested `start`, ...).
    #[error("{0}")]
    Script(String),
    /// A compile or script-parse error.
    #[error(transparent)]
    Compile(#[from] rulec::CompileError),
    /// Writing output failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The worker threads are gone (a bug; reported, never a panic in the caller).
    #[error("engine worker stopped: {0}")]
    WorkerGone(String),
}
