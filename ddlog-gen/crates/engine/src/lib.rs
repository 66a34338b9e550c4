//! `engine`: runs a compiled rule program ([`rulec::ir::Program`]) incrementally on
//! differential-dataflow.
//!
//! The dataflow is built once, at [`Engine::new`], by interpreting the IR over one dynamic
//! row type (`Vec<Value>`): no Rust is generated or compiled per program. Timely workers
//! run on their own threads and are driven over channels; [`Engine`] is `Send + Sync`
//! and serializes transactions internally.
//!
//! Modules: `dataflow` (IR → operators), `worker` (timely threads driven over channels),
//! [`eval`] (expressions and patterns) with `builtins` (the built-in functions), `body`
//! (per-row meaning of body items, shared by the dataflow and the naive evaluator), `txn`
//! (input sets, primary keys, atomic apply), [`format`](mod@format) (DDlog's text format for records),
//! [`script`] (runs `.dat` scripts), [`recorder`] (writes applied transactions as `.dat`),
//! [`naive`] (a from-scratch reference evaluator for tests and baselines).
//!
//! A transaction validates and nets its updates against the input sets, sends the net row
//! changes to the workers as one epoch, and folds the derived relations' changes into
//! materialized copies (so [`Engine::dump`] works for every relation) while returning
//! the output relations' delta.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod body;
mod builtins;
mod dataflow;
pub mod error;
pub mod eval;
pub mod format;
mod group;
pub mod naive;
mod profile;
pub mod recorder;
pub mod script;
mod txn;
mod worker;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub use error::Error;
use rulec::ir::{Program, RelId, Role};
pub use rulec::script::Update;
use rulec::value::Row;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

/// The changes of one commit: for each relation that changed, its rows with `+1`
/// (inserted) or `-1` (deleted), sorted by row. A row appears at most once. A relation the
/// engine counts rather than keeps ([`Options::counted`]) gives each row's net change in
/// its number of derivations instead, any non-zero integer.
pub type Delta = BTreeMap<RelId, Vec<(Row, isize)>>;

/// Engine options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Number of timely worker threads (1 is best on small machines).
    pub workers: usize,
    /// Keep the contents of internal relations, so that [`Engine::dump`] can show them
    /// (DDlog's `dump R`). A service that only reads outputs turns it off: the engine then
    /// captures and stores only output relations (the logical controller's largest
    /// internal relations are as big as its flows).
    pub internal: bool,
    /// Output relations whose reader keeps them, with counts: the engine does not keep a
    /// copy of their rows (nor can [`Engine::dump`] show them), and their changes in a
    /// [`Delta`] are the net changes of each row's count of derivations, not set changes.
    /// A copy costs a hash map entry and a row per row, which Loom's physical controllers,
    /// whose flow tables count their flows anyway, would pay for every flow of every node.
    pub counted: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 1,
            internal: true,
            counted: Vec::new(),
        }
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
    errors: Arc<AtomicU64>,
    /// Per relation: is it an output relation (its changes go into the delta)?
    output: Vec<bool>,
    /// Per relation: are its changes captured and its contents kept (in `State::derived`)?
    materialized: Vec<bool>,
    /// Per relation: is it an output whose changes go out as counts, its contents not kept
    /// ([`Options::counted`])?
    counted: Vec<bool>,
    state: Mutex<State>,
}

/// Everything a transaction touches; behind the engine's mutex.
struct State {
    workers: worker::Workers,
    inputs: txn::Inputs,
    /// Current contents of every derived relation with each row's multiplicity: 1 for
    /// relations that end in `distinct`, the number of derivations for multisets (empty for
    /// inputs). A row is in the relation while its count is positive.
    derived: Vec<FxHashMap<Row, isize>>,
    recorder: Option<Box<dyn Write + Send>>,
    commits: u64,
}

impl Engine {
    /// Build the dataflow for `program` and start its workers.
    pub fn new(program: Arc<Program>, options: &Options) -> Result<Engine, Error> {
        let errors = Arc::new(AtomicU64::new(0));
        let mut counted = vec![false; program.relations.len()];
        for name in &options.counted {
            let rel = program
                .relation_id(name)
                .ok_or_else(|| Error::UnknownRelation(name.clone()))?;
            if program.relations[rel].role != Role::Output {
                return Err(Error::CountedNotOutput(name.clone()));
            }
            counted[rel] = true;
        }
        let materialized: Vec<bool> = program
            .relations
            .iter()
            .map(|r| match r.role {
                Role::Input => false,
                Role::Output => true,
                Role::Internal => options.internal,
            })
            .collect();
        let workers = worker::Workers::start(&program, options.workers, &errors, &materialized)?;
        let state = State {
            workers,
            inputs: txn::Inputs::new(&program),
            derived: vec![FxHashMap::default(); program.relations.len()],
            recorder: None,
            commits: 0,
        };
        let output = program
            .relations
            .iter()
            .map(|r| r.role == Role::Output)
            .collect();
        Ok(Engine {
            program,
            errors,
            output,
            materialized,
            counted,
            state: Mutex::new(state),
        })
    }

    /// The program this engine runs.
    pub fn program(&self) -> &Program {
        &self.program
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave half a transaction behind that the
        // next one would observe incorrectly except through the workers, which report it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Apply `updates` as one atomic transaction, in order, and return the changes of
    /// every **output** relation. Set semantics: inserting a present row or deleting an
    /// absent one is a no-op. On error (primary-key violation, update of a non-input
    /// relation, wrong arity) nothing is applied.
    pub fn apply(&self, updates: Vec<Update>) -> Result<Delta, Error> {
        let mut st = self.lock();
        let overlay = st.inputs.prepare(&self.program, &updates, &self.errors)?;
        drop(updates);
        let diffs = overlay.changes();
        if let Some(rec) = st.recorder.as_mut() {
            // The recording is best effort: a failing sink must not fail the transaction.
            let _ = recorder::write_transaction(&self.program, &diffs, rec.as_mut());
        }
        st.workers.send(diffs)?;
        // Update the input sets while the workers compute.
        st.inputs.commit(overlay);
        let changes = st.workers.receive()?;
        st.commits += 1;
        Ok(self.absorb(&mut st, changes))
    }

    /// Fold one commit's derived changes into the materialized relations and return the
    /// output delta.
    ///
    /// A counted relation's changes are only summed per row. Every other change adds its
    /// weight to its row's count, in arrival order and in one pass: a
    /// row is in its relation while its count is positive. The changes of one commit are
    /// not consolidated — a multiset's are multiplicities, a recursive stratum's come from
    /// several iterations, and any stream may carry a row's `+1` after its `-1` — so a
    /// count may cross zero several times, even dip below it, within a commit. Each
    /// crossing is recorded (`+1` upwards, `-1` downwards); crossings of one row
    /// alternate, so their sum is the row's net change, which sorting the delta brings
    /// together.
    fn absorb(&self, st: &mut State, changes: worker::Changes) -> Delta {
        let n = self.program.relations.len();
        // Size every map once: growing a map of rows re-hashes every row in it.
        let mut added = vec![0usize; n];
        for (rel, _, d) in &changes {
            if *d > 0 && !self.counted[*rel] {
                added[*rel] += 1;
            }
        }
        for (counts, extra) in st.derived.iter_mut().zip(&added) {
            counts.reserve(*extra);
        }
        let mut out: Vec<Vec<(Row, isize)>> = vec![Vec::new(); n];
        for (rel, row, d) in changes {
            if self.counted[rel] {
                out[rel].push((row, d));
                continue;
            }
            let output = self.output[rel];
            match st.derived[rel].entry(row) {
                Entry::Vacant(e) => {
                    if d > 0 && output {
                        out[rel].push((e.key().clone(), 1));
                    }
                    if d != 0 {
                        e.insert(d);
                    }
                }
                Entry::Occupied(mut e) => {
                    let before = *e.get();
                    let after = before + d;
                    if after == 0 {
                        let (row, _) = e.remove_entry();
                        if before > 0 && output {
                            out[rel].push((row, -1));
                        }
                    } else {
                        *e.get_mut() = after;
                        if output && (before > 0) != (after > 0) {
                            out[rel].push((e.key().clone(), if after > 0 { 1 } else { -1 }));
                        }
                    }
                }
            }
        }
        let mut delta = Delta::new();
        for (rel, mut rows) in out.into_iter().enumerate() {
            // Bring each row's crossings (or counted changes) together and sum them. Most
            // rows cross once, and an unstable sort is the cheaper one; the sums don't
            // depend on the order.
            rows.sort_unstable();
            let mut net: Vec<(Row, isize)> = Vec::with_capacity(rows.len());
            for (row, d) in rows {
                match net.last_mut() {
                    Some((last, sum)) if *last == row => *sum += d,
                    _ => net.push((row, d)),
                }
            }
            net.retain(|(_, d)| *d != 0);
            debug_assert!(
                self.counted[rel] || net.iter().all(|(_, d)| d.abs() == 1),
                "crossings alternate"
            );
            if !net.is_empty() {
                delta.insert(rel, net);
            }
        }
        delta
    }

    /// Current contents of any relation (input, internal or output), sorted.
    pub fn dump(&self, rel: RelId) -> Result<Vec<Row>, Error> {
        let Some(r) = self.program.relations.get(rel) else {
            return Err(Error::UnknownRelation(rel.to_string()));
        };
        if r.role == Role::Internal && !self.materialized[rel] {
            return Err(Error::NotMaterialized(r.name.clone()));
        }
        if self.counted[rel] {
            return Err(Error::Counted(r.name.clone()));
        }
        let st = self.lock();
        let mut rows: Vec<Row> = if r.role == Role::Input {
            st.inputs
                .rows(rel)
                .map(|rows| rows.cloned().collect())
                .unwrap_or_default()
        } else {
            st.derived[rel].keys().cloned().collect()
        };
        rows.sort();
        Ok(rows)
    }

    /// Find a relation by name ([`Error::UnknownRelation`] if there is none).
    pub fn relation_id(&self, name: &str) -> Result<RelId, Error> {
        self.program
            .relation_id(name)
            .ok_or_else(|| Error::UnknownRelation(name.to_string()))
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        let commits = self.lock().commits;
        Stats {
            commits,
            runtime_errors: self.errors.load(Ordering::Relaxed),
        }
    }

    /// Start (or, with `None`, stop) recording every applied transaction as a `.dat`
    /// script that replays to the same state.
    pub fn set_recorder(&self, sink: Option<Box<dyn std::io::Write + Send>>) {
        self.lock().recorder = sink;
    }
}

/// Merge committed deltas into accumulated relation contents (a helper for clients and
/// tests that track outputs from deltas alone).
pub fn accumulate(acc: &mut BTreeMap<RelId, std::collections::BTreeSet<Row>>, delta: &Delta) {
    for (rel, rows) in delta {
        let set = acc.entry(*rel).or_default();
        for (row, d) in rows {
            if *d > 0 {
                set.insert(row.clone());
            } else {
                set.remove(row);
            }
        }
    }
}
