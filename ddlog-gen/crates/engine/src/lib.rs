//! `engine`: runs a compiled rule program ([`rulec::ir::Program`]) incrementally on
//! differential-dataflow.
//!
//! The dataflow is built once, at [`Engine::new`], by interpreting the IR over one dynamic
//! row type (`Vec<Value>`): no Rust is generated or compiled per program. Timely workers
//! run on their own threads and are driven over channels; [`Engine`] is `Send + Sync`
//! and serializes transactions internally.
//!
//! Modules: `dataflow` (IR → operators), `eval` (expressions, patterns and built-ins),
//! `txn` (input sets, primary keys, atomic apply), [`format`] (DDlog's text format for
//! records), [`script`] (runs `.dat` scripts), [`recorder`] (writes applied transactions
//! as `.dat`), [`naive`] (a from-scratch reference evaluator for tests and baselines).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod error;
pub mod format;
pub mod naive;
pub mod recorder;
pub mod script;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use error::Error;
pub use rulec::script::Update;
use rulec::ir::{Program, RelId};
use rulec::value::Row;

/// The changes of one commit: for each relation that changed, its rows with `+1`
/// (inserted) or `-1` (deleted), sorted by row. A row appears at most once.
pub type Delta = BTreeMap<RelId, Vec<(Row, isize)>>;

/// Engine options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Number of timely worker threads (1 is best on small machines).
    pub workers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { workers: 1 }
    }
}

/// Counters describing the engine's work so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Transactions committed.
    pub commits: u64,
    /// Binding rows dropped because an expression failed at run time.
    pub runtime_errors: u64,
}

/// A running program. Cheap to share across threads (`Arc<Engine>`).
pub struct Engine {
    program: Arc<Program>,
}

impl Engine {
    /// Build the dataflow for `program` and start its workers.
    pub fn new(program: Arc<Program>, options: &Options) -> Result<Engine, Error> {
        let _ = options;
        Ok(Engine { program })
    }

    /// The program this engine runs.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Apply `updates` as one atomic transaction, in order, and return the changes of
    /// every **output** relation. Set semantics: inserting a present row or deleting an
    /// absent one is a no-op. On error (primary-key violation, update of a non-input
    /// relation, wrong arity) nothing is applied.
    pub fn apply(&self, updates: Vec<Update>) -> Result<Delta, Error> {
        let _ = updates;
        unimplemented!("engine pending")
    }

    /// Current contents of any relation (input, internal or output), sorted.
    pub fn dump(&self, rel: RelId) -> Result<Vec<Row>, Error> {
        let _ = rel;
        unimplemented!("engine pending")
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        Stats::default()
    }

    /// Start (or, with `None`, stop) recording every applied transaction as a `.dat`
    /// script that replays to the same state.
    pub fn set_recorder(&self, sink: Option<Box<dyn std::io::Write + Send>>) {
        let _ = sink;
    }
}
