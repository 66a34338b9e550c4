//! PyO3 binding of the Loom rule engine (`loom_ddlog._native`), and of the `OpenFlow` table
//! encoder (`ofenc`, [`ofp`]): Loom's one native module, so one build.
//!
//! Thin on purpose: it converts values ([`convert`]), maps errors ([`error`]) and releases
//! the GIL (`py.detach`) around compiling, transactions, scripts and naive evaluation.
//! Compiling lives in `rulec`, evaluation in `engine`; the Pythonic transaction API is
//! `loom_ddlog.program` on top of this module.

mod convert;
mod error;
mod ofp;

/// The engine allocates and frees a row (a `Vec` of values, often with strings) for every
/// change at every operator, and keeps millions of them in its arrangements. jemalloc, not
/// mimalloc (which this module used before) nor the C library's malloc: the rows a cold
/// start keeps are interleaved with the rows it made and dropped on the way, and jemalloc
/// leaves the fewest pages held for the few rows still on them. A replay of the logical
/// rules' full-scale cold start peaked lowest with jemalloc, and ran faster too
/// (`docs/benchmarks-log.md`, 2026-12-01).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (its prefixed `malloc_conf`).
///
/// `narenas:1`: one arena for every thread (jemalloc's default is four a CPU). A row is
/// made on one thread and kept or freed on another (the engine's workers, the thread that
/// converts Python's rows, a physical controller's sixteen pushing threads), and each
/// arena keeps pages of its own: with one, the rows kept share their pages (the full-scale
/// replays peaked lower, in the same time).
#[allow(non_upper_case_globals, reason = "the C library's name for it")]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: Option<&'static std::ffi::c_char> =
    // SAFETY: a C string literal is a valid, NUL-terminated, 'static array of c_char.
    Some(unsafe { &*c"narenas:1".as_ptr() });

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use rulec::ir::{Program, RelId, Role};
use rulec::script::Update;
use rulec::value::Row;

use crate::convert::{from_py, row_from_py, row_to_py, type_name, Site};
use crate::error::{CompileError, EngineError, Result};

/// Relation metadata as Python sees it: `(name, role, [(column, type)], key type or None)`.
type RelationInfo = (String, &'static str, Vec<(String, String)>, Option<String>);

/// A compiled rule program (immutable; shareable between engines).
#[pyclass(frozen, module = "loom_ddlog._native")]
pub struct CompiledProgram {
    program: Arc<Program>,
}

#[pymethods]
impl CompiledProgram {
    /// Relation metadata: `(name, role, [(column, type)], key type or None)`, in
    /// declaration order; role is `"input"`, `"output"` or `"internal"`.
    fn relations(&self) -> Vec<RelationInfo> {
        relation_infos(&self.program)
    }
}

fn relation_infos(prog: &Program) -> Vec<RelationInfo> {
    prog.relations
        .iter()
        .map(|r| {
            let role = match r.role {
                Role::Input => "input",
                Role::Output => "output",
                Role::Internal => "internal",
            };
            let cols = r
                .columns
                .iter()
                .map(|(n, t)| (n.clone(), type_name(prog, t)))
                .collect();
            let key = r.primary_key.as_ref().map(|k| type_name(prog, &k.ty));
            (r.name.clone(), role, cols, key)
        })
        .collect()
}

/// The native allocator's (jemalloc's) memory, in bytes: `(resident, allocated)` -- the
/// pages it holds, and of them what the engines' rows and arrangements occupy (the rest:
/// room left by rows freed), apart from Python's objects (`loom_common.procstat.memory_text`
/// writes both). `(0, 0)` if the allocator cannot say.
#[pyfunction]
fn allocator_memory() -> (usize, usize) {
    use tikv_jemalloc_ctl::{epoch, stats};
    // The statistics are a snapshot taken when the epoch advances.
    if epoch::advance().is_err() {
        return (0, 0);
    }
    (
        stats::resident::read().unwrap_or(0),
        stats::allocated::read().unwrap_or(0),
    )
}

/// Compile rule files (imports resolve relative to each file).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // PyO3 extracts arguments by value
fn compile_files(py: Python<'_>, paths: Vec<PathBuf>) -> Result<CompiledProgram> {
    let program = py.detach(|| rulec::compile_files(&paths))?;
    Ok(CompiledProgram {
        program: Arc::new(program),
    })
}

/// Compile a program given as text; `name` is used in error positions.
#[pyfunction]
#[pyo3(signature = (source, name = "<string>"))]
fn compile_source(py: Python<'_>, source: &str, name: &str) -> Result<CompiledProgram> {
    let program = py.detach(|| rulec::compile_source(name, source))?;
    Ok(CompiledProgram {
        program: Arc::new(program),
    })
}

/// A running program: the incremental engine and its worker threads.
#[pyclass(frozen, module = "loom_ddlog._native")]
pub struct Engine {
    engine: Arc<engine::Engine>,
    ids: HashMap<String, RelId>,
}

impl Engine {
    fn program(&self) -> &Program {
        self.engine.program()
    }

    /// Convert `updates` (with the GIL) and commit them (without it); the engine's delta.
    /// A list of updates is emptied once converted, before the commit: the engine has
    /// its rows, and the Python objects are freed before the computation grows the engine
    /// (a cold start's rows, held through it, would add to the process's peak).
    fn commit(&self, py: Python<'_>, updates: &Bound<'_, PyAny>) -> Result<engine::Delta> {
        let mut ups = Vec::new();
        for obj in updates.try_iter()? {
            ups.push(self.update(&obj?)?);
        }
        if let Ok(list) = updates.cast::<PyList>() {
            list.call_method0("clear")?;
        }
        let eng = self.engine.clone();
        Ok(py.detach(move || eng.apply(ups))?)
    }

    fn rel(&self, name: &str) -> Result<RelId> {
        self.ids
            .get(name)
            .copied()
            .ok_or_else(|| engine::Error::UnknownRelation(name.to_string()).into())
    }

    /// Convert one Python update tuple `(op, relation, args...)`.
    fn update(&self, obj: &Bound<'_, PyAny>) -> Result<Update> {
        let t = obj
            .cast::<PyTuple>()
            .map_err(|_| PyTypeError::new_err("an update must be a tuple (op, relation, ...)"))?;
        let arity_error = || PyValueError::new_err(format!("malformed update {t}"));
        if t.len() < 2 {
            return Err(arity_error().into());
        }
        let op = t.get_item(0)?;
        let op = op.cast::<PyString>().map_err(|_| arity_error())?.to_str()?;
        let rel_name = t.get_item(1)?;
        let rel = self.rel(
            rel_name
                .cast::<PyString>()
                .map_err(|_| arity_error())?
                .to_str()?,
        )?;
        let prog = self.program();
        let arg = |i: usize| t.get_item(i).map_err(|_| arity_error());
        Ok(match (op, t.len()) {
            ("insert", 3) => Update::Insert(rel, row_from_py(prog, rel, &arg(2)?)?),
            ("insert_or_update", 3) => {
                Update::InsertOrUpdate(rel, row_from_py(prog, rel, &arg(2)?)?)
            }
            ("delete", 3) => Update::Delete(rel, row_from_py(prog, rel, &arg(2)?)?),
            ("delete_key", 3) => Update::DeleteKey(rel, self.key(rel, &arg(2)?)?),
            ("modify", 4) => {
                let key = self.key(rel, &arg(2)?)?;
                let r = &prog.relations[rel];
                let changes = arg(3)?;
                let changes = changes
                    .cast::<PyDict>()
                    .map_err(|_| PyTypeError::new_err("modify takes a dict {column: value}"))?;
                let mut cols = Vec::with_capacity(changes.len());
                for (k, v) in changes.iter() {
                    let k = k
                        .cast::<PyString>()
                        .map_err(|_| arity_error())?
                        .to_str()?
                        .to_owned();
                    let Some(ix) = r.columns.iter().position(|(n, _)| *n == k) else {
                        return Err(PyValueError::new_err(format!(
                            "relation {} has no column {k}",
                            r.name
                        ))
                        .into());
                    };
                    let site = Site {
                        relation: &r.name,
                        column: &k,
                    };
                    cols.push((ix, from_py(prog, &r.columns[ix].1, &v, site)?));
                }
                Update::Modify(rel, key, cols)
            }
            ("clear", 2) => Update::Clear(rel),
            _ => return Err(arity_error().into()),
        })
    }

    fn key(&self, rel: RelId, obj: &Bound<'_, PyAny>) -> Result<rulec::value::Value> {
        let r = &self.program().relations[rel];
        let Some(pk) = &r.primary_key else {
            return Err(engine::Error::NoPrimaryKey {
                relation: r.name.clone(),
            }
            .into());
        };
        let site = Site {
            relation: &r.name,
            column: "key",
        };
        Ok(from_py(self.program(), &pk.ty, obj, site)?)
    }

    fn rows_to_py<'py>(
        &self,
        py: Python<'py>,
        rel: RelId,
        rows: &[Row],
    ) -> PyResult<Bound<'py, PyList>> {
        let prog = self.program();
        let objs = rows
            .iter()
            .map(|r| row_to_py(py, prog, rel, r))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, objs)
    }
}

/// Rows converted to Python between two releases of the GIL while a delta is converted.
const YIELD_EVERY: usize = 16_384;

/// `(d, row)` for Python; every `YIELD_EVERY` conversions (counted in `converted`) the GIL
/// is released for a moment: a delta of millions of rows takes seconds to convert, and other
/// Python threads (keep-alives answering servers' probes) must run meanwhile.
fn change_to_py<'py>(
    py: Python<'py>,
    prog: &Program,
    rel: RelId,
    row: &Row,
    d: isize,
    converted: &mut usize,
) -> PyResult<Bound<'py, PyTuple>> {
    *converted += 1;
    if *converted % YIELD_EVERY == 0 {
        py.detach(|| ());
    }
    PyTuple::new(
        py,
        [
            d.into_pyobject(py)?.into_any(),
            row_to_py(py, prog, rel, row)?.into_any(),
        ],
    )
}

/// A committed transaction's delta, still in Rust: iterating converts it a chunk at a time
/// (`{output relation: [(+1 | -1, row), ...]}` of at most `chunk` changes), every
/// deletion before any insertion, so folding the chunks in order gives what folding
/// `apply`'s whole delta gives.
#[pyclass(module = "loom_ddlog._native")]
pub struct PendingDelta {
    /// The engine whose program names the relations (kept alive by the delta).
    engine: Arc<engine::Engine>,
    changes: Vec<(RelId, Row, isize)>,
    chunk: usize,
    converted: usize,
}

#[pymethods]
impl PendingDelta {
    /// Changes not handed out yet.
    fn __len__(&self) -> usize {
        self.changes.len() - self.converted
    }

    /// The names of the relations the delta changes (all of it, handed out or not).
    fn relations(&self) -> BTreeSet<String> {
        self.changes
            .iter()
            .map(|(rel, _, _)| self.engine.program().relations[*rel].name.clone())
            .collect()
    }

    /// True if the delta deletes any row.
    fn has_deletions(&self) -> bool {
        self.changes.first().is_some_and(|(_, _, d)| *d < 0)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let start = self.converted;
        if start >= self.changes.len() {
            return Ok(None);
        }
        let end = (start + self.chunk).min(self.changes.len());
        let prog = self.engine.program();
        let out = PyDict::new(py);
        let mut converted = 0usize;
        let mut by_rel: BTreeMap<RelId, Vec<Bound<'py, PyTuple>>> = BTreeMap::new();
        for (rel, row, d) in &self.changes[start..end] {
            let change = change_to_py(py, prog, *rel, row, *d, &mut converted)?;
            by_rel.entry(*rel).or_default().push(change);
        }
        for (rel, objs) in by_rel {
            out.set_item(&prog.relations[rel].name, PyList::new(py, objs)?)?;
        }
        self.converted = end;
        Ok(Some(out))
    }
}

#[pymethods]
impl Engine {
    /// Build the dataflow for `program` and start `workers` worker threads; with
    /// `internal=False` only output relations are kept (dumping an internal one fails);
    /// the outputs named in `counted` are not kept either, and their changes are counts of
    /// derivations (`engine::Options::counted`).
    #[new]
    #[pyo3(signature = (program, workers = 1, internal = true, counted = Vec::new()))]
    fn new(
        py: Python<'_>,
        program: &CompiledProgram,
        workers: usize,
        internal: bool,
        counted: Vec<String>,
    ) -> Result<Self> {
        if workers == 0 {
            return Err(PyValueError::new_err("workers must be at least 1").into());
        }
        let prog = program.program.clone();
        let ids = prog
            .relations
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i))
            .collect();
        let options = engine::Options {
            workers,
            internal,
            counted,
        };
        let engine = py.detach(|| engine::Engine::new(prog, &options))?;
        Ok(Engine {
            engine: Arc::new(engine),
            ids,
        })
    }

    /// Apply updates atomically; return `{output relation: [(+1 | -1, row), ...]}`.
    ///
    /// Each update is `(op, relation, ...)`: `("insert" | "insert_or_update" | "delete",
    /// rel, row)`, `("delete_key", rel, key)`, `("modify", rel, key, {column: value})` or
    /// `("clear", rel)`.
    fn apply<'py>(
        &self,
        py: Python<'py>,
        updates: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyDict>> {
        let delta = self.commit(py, updates)?;
        let prog = self.program();
        let out = PyDict::new(py);
        let mut converted = 0usize;
        for (rel, rows) in &delta {
            let objs = rows
                .iter()
                .map(|(row, d)| change_to_py(py, prog, *rel, row, *d, &mut converted))
                .collect::<PyResult<Vec<_>>>()?;
            out.set_item(&prog.relations[*rel].name, PyList::new(py, objs)?)?;
        }
        Ok(out)
    }

    /// As `apply`, but the delta stays in Rust until asked for: a `PendingDelta` hands it
    /// out a chunk of at most `chunk` changes at a time, converted then, deletions first.
    /// A caller that writes each chunk while the next is converted overlaps the two.
    fn apply_lazy(
        &self,
        py: Python<'_>,
        updates: &Bound<'_, PyAny>,
        chunk: usize,
    ) -> Result<PendingDelta> {
        if chunk == 0 {
            return Err(PyValueError::new_err("chunk must be at least 1").into());
        }
        let delta = self.commit(py, updates)?;
        let mut changes: Vec<(RelId, Row, isize)> = delta
            .into_iter()
            .flat_map(|(rel, rows)| rows.into_iter().map(move |(row, d)| (rel, row, d)))
            .collect();
        // Stable: within each sign, the order `apply` would give.
        changes.sort_by_key(|(_, _, d)| *d > 0);
        Ok(PendingDelta {
            engine: self.engine.clone(),
            changes,
            chunk,
            converted: 0,
        })
    }

    /// Current rows of any relation, sorted.
    fn dump<'py>(&self, py: Python<'py>, relation: &str) -> Result<Bound<'py, PyList>> {
        let rel = self.rel(relation)?;
        let eng = self.engine.clone();
        let rows = py.detach(move || eng.dump(rel))?;
        Ok(self.rows_to_py(py, rel, &rows)?)
    }

    /// Relation metadata, as `CompiledProgram.relations`.
    fn relations(&self) -> Vec<RelationInfo> {
        relation_infos(self.program())
    }

    /// Run a `.dat` command script against this engine; return `(output, runtime errors)`.
    /// A script that does not parse raises `CompileError` before anything runs.
    #[pyo3(signature = (text, name = "<script>"))]
    fn run_script(&self, py: Python<'_>, text: &str, name: &str) -> Result<(String, usize)> {
        let eng = self.engine.clone();
        let (out, outcome) = py.detach(move || -> std::result::Result<_, engine::Error> {
            let mut out = Vec::new();
            let outcome = engine::script::run_script(&eng, name, text, &mut out)?;
            Ok((out, outcome))
        })?;
        Ok((String::from_utf8_lossy(&out).into_owned(), outcome.errors))
    }

    /// Record every committed transaction to `path` as a `.dat` script (truncating it);
    /// `None` stops recording.
    #[pyo3(signature = (path))]
    fn record(&self, path: Option<PathBuf>) -> Result<()> {
        let sink: Option<Box<dyn std::io::Write + Send>> = match path {
            Some(p) => {
                let file = std::fs::File::create(&p).map_err(engine::Error::Io)?;
                Some(Box::new(std::io::BufWriter::new(file)))
            }
            None => None,
        };
        self.engine.set_recorder(sink);
        Ok(())
    }

    /// Counters: `{"commits": n, "runtime_errors": n}`.
    fn stats(&self) -> HashMap<&'static str, u64> {
        let s = self.engine.stats();
        HashMap::from([("commits", s.commits), ("runtime_errors", s.runtime_errors)])
    }

    /// Evaluate every relation from scratch (naively) from the current input rows; return
    /// `{relation: sorted rows}`. Not atomic with respect to concurrent transactions.
    fn naive_evaluate<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyDict>> {
        let eng = self.engine.clone();
        let all = py.detach(move || -> std::result::Result<_, engine::Error> {
            let prog = eng.program();
            let mut inputs: BTreeMap<RelId, BTreeSet<Row>> = BTreeMap::new();
            for (id, r) in prog.relations.iter().enumerate() {
                if r.role == Role::Input {
                    inputs.insert(id, eng.dump(id)?.into_iter().collect());
                }
            }
            Ok(engine::naive::evaluate(prog, &inputs))
        })?;
        let prog = self.program();
        let out = PyDict::new(py);
        for (rel, rows) in all {
            let rows: Vec<Row> = rows.into_iter().collect();
            out.set_item(&prog.relations[rel].name, self.rows_to_py(py, rel, &rows)?)?;
        }
        Ok(out)
    }
}

/// The native module.
#[pymodule]
mod _native {
    #[pymodule_export]
    use super::{
        allocator_memory, compile_files, compile_source, CompileError, CompiledProgram, Engine,
        EngineError, PendingDelta,
    };
    #[pymodule_export]
    use crate::ofp::{
        bulk_adds, encode_actions, flow_mod, standin_apply_adds, standin_bundle_adds,
    };
}

#[cfg(test)]
mod tests {
    /// jemalloc read `malloc_conf`.
    #[test]
    fn the_allocator_runs_one_arena() {
        assert_eq!(tikv_jemalloc_ctl::opt::narenas::read(), Ok(1));
    }
}
