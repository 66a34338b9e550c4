//! A from-scratch reference evaluator of the IR: the oracle for randomized tests and the
//! baseline for benchmarks. Simple on purpose (semi-naive fixpoints over `BTreeSet`s,
//! nested-loop joins); never used on the hot path.

use std::collections::{BTreeMap, BTreeSet};

use rulec::ir::{Program, RelId};
use rulec::value::Row;

/// Evaluate every relation of `program` from the given input relation contents.
/// Returns the contents of every relation (inputs included).
pub fn evaluate(
    program: &Program,
    inputs: &BTreeMap<RelId, BTreeSet<Row>>,
) -> BTreeMap<RelId, BTreeSet<Row>> {
    let _ = (program, inputs);
    unimplemented!("naive evaluator pending")
}
