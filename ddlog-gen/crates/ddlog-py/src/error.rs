//! The one mapping of engine and compiler errors to Python exceptions.
//!
//! Rust's orphan rule forbids `impl From<engine::Error> for PyErr` outside both crates, so
//! binding functions return [`Failure`], which wraps either an engine error or an already
//! raised Python error; its single `From<Failure> for PyErr` is the mapping:
//!
//! - [`engine::Error::Compile`] → `loom_ddlog.CompileError` with `file`, `line`, `col`
//!   and `message` attributes (its text is `file:line:col: error: message`);
//! - [`engine::Error::Io`] → the matching `OSError` subclass;
//! - every other engine error → `loom_ddlog.EngineError` with the engine's message.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    loom_ddlog._native,
    EngineError,
    PyException,
    "A transaction or script failed in the engine; the engine's state is unchanged."
);
create_exception!(
    loom_ddlog._native,
    CompileError,
    EngineError,
    "A rule program or script did not compile; has `file`, `line`, `col` and `message`."
);

/// An error on its way to Python.
pub enum Failure {
    /// From the engine or the compiler.
    Engine(engine::Error),
    /// Already a Python exception (conversion errors and the like).
    Py(PyErr),
}

impl From<engine::Error> for Failure {
    fn from(e: engine::Error) -> Self {
        Failure::Engine(e)
    }
}

impl From<rulec::CompileError> for Failure {
    fn from(e: rulec::CompileError) -> Self {
        Failure::Engine(engine::Error::Compile(e))
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Py(e)
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Py(e) => e,
            Failure::Engine(engine::Error::Compile(ce)) => Python::attach(|py| {
                let err = CompileError::new_err(ce.to_string());
                let value = err.value(py);
                let set = || -> PyResult<()> {
                    value.setattr("file", &ce.file)?;
                    value.setattr("line", ce.line)?;
                    value.setattr("col", ce.col)?;
                    value.setattr("message", &ce.message)
                };
                if let Err(e) = set() {
                    return e;
                }
                err
            }),
            Failure::Engine(engine::Error::Io(e)) => e.into(),
            Failure::Engine(e) => EngineError::new_err(e.to_string()),
        }
    }
}

/// Result of a binding function.
pub type Result<T> = std::result::Result<T, Failure>;
