//! DDlog's text format for values and records: `R{.a = 1, .b = "x"}`.
//!
//! Strings are quoted with DDlog's escapes, vectors and sets print as `[a, b]`, maps as
//! `[(k, v), ...]`, tuples as `(a, b)`, structs and union constructors as `C{.f = v}`
//! (`C{}` without fields), `None` as `None{}` and `Some` as `Some{.x = v}`, booleans as
//! `true`/`false`, numbers in decimal.

use rulec::ir::{Program, RelId};
use rulec::types::Type;
use rulec::value::{Row, Value};

/// Format `v`, whose type is `ty`.
pub fn format_value(program: &Program, ty: &Type, v: &Value) -> String {
    let _ = (program, ty, v);
    unimplemented!("format pending")
}

/// Format a row of `rel` as a record: `R{.a = 1, .b = "x"}`.
pub fn format_record(program: &Program, rel: RelId, row: &Row) -> String {
    let _ = (program, rel, row);
    unimplemented!("format pending")
}
