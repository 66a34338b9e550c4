//! A from-scratch reference evaluator of the IR: the oracle for randomized tests and the
//! baseline for benchmarks. Simple on purpose (naive fixpoints over `BTreeSet`s,
//! nested-loop joins); never used on the hot path.

use std::collections::{BTreeMap, BTreeSet};

use rulec::ir::{BodyItem, Program, RelId, Role, Rule};
use rulec::value::Row;

use crate::body::{self, AtomPlan};
use crate::eval::EvalResult;

/// Evaluate every relation of `program` from the given input relation contents.
/// Returns the contents of every relation (inputs included).
pub fn evaluate(
    program: &Program,
    inputs: &BTreeMap<RelId, BTreeSet<Row>>,
) -> BTreeMap<RelId, BTreeSet<Row>> {
    evaluate_counting(program, inputs).0
}

/// As [`evaluate`], also returning the number of runtime errors (dropped binding rows).
pub fn evaluate_counting(
    program: &Program,
    inputs: &BTreeMap<RelId, BTreeSet<Row>>,
) -> (BTreeMap<RelId, BTreeSet<Row>>, u64) {
    let mut db: BTreeMap<RelId, BTreeSet<Row>> = BTreeMap::new();
    for (id, rel) in program.relations.iter().enumerate() {
        let rows = if rel.role == Role::Input {
            inputs.get(&id).cloned().unwrap_or_default()
        } else {
            BTreeSet::new()
        };
        db.insert(id, rows);
    }
    let mut errors = 0;
    for stratum in &program.strata {
        loop {
            let mut changed = false;
            for r in &stratum.rules {
                let rule = &program.rules[*r];
                let out = eval_rule(program, rule, &db, &mut errors);
                let set = db.entry(rule.head).or_default();
                for row in out {
                    changed |= set.insert(row);
                }
            }
            if !changed {
                break;
            }
        }
    }
    (db, errors)
}

fn count<X>(errors: &mut u64, r: EvalResult<X>) -> Option<X> {
    r.map_err(|_| *errors += 1).ok()
}

/// The head rows one rule derives from the current contents of `db`.
fn eval_rule(
    prog: &Program,
    rule: &Rule,
    db: &BTreeMap<RelId, BTreeSet<Row>>,
    errors: &mut u64,
) -> BTreeSet<Row> {
    let empty = BTreeSet::new();
    let mut rows: BTreeSet<Row> = std::iter::once(Vec::new()).collect();
    for item in &rule.body {
        let mut next = BTreeSet::new();
        match item {
            BodyItem::Atom { rel, args } => {
                let plan = AtomPlan::new(args);
                let rel_rows = db.get(rel).unwrap_or(&empty);
                for b in &rows {
                    let Some(key) = count(errors, plan.key_of_binding(prog, b)) else {
                        continue;
                    };
                    for r in rel_rows {
                        if plan
                            .key_cols
                            .iter()
                            .zip(&key)
                            .all(|(c, k)| r.get(*c) == Some(k))
                        {
                            if let Some(row) = count(errors, plan.extend(prog, b, r)).flatten() {
                                next.insert(row);
                            }
                        }
                    }
                }
            }
            BodyItem::Not { rel, args } => {
                let plan = AtomPlan::new(args);
                let keys: BTreeSet<Row> = db
                    .get(rel)
                    .unwrap_or(&empty)
                    .iter()
                    .map(|r| body::project(r, &plan.key_cols))
                    .collect();
                for b in &rows {
                    if let Some(key) = count(errors, plan.key_of_binding(prog, b)) {
                        if !keys.contains(&key) {
                            next.insert(b.clone());
                        }
                    }
                }
            }
            BodyItem::Filter(cond) => {
                for b in rows {
                    next.extend(count(errors, body::filter(prog, cond, b)).flatten());
                }
            }
            BodyItem::Let { expr, pattern } => {
                for b in rows {
                    next.extend(count(errors, body::let_bind(prog, expr, pattern, b)).flatten());
                }
            }
            BodyItem::FlatMap { expr, pattern } => {
                for b in rows {
                    next.extend(
                        count(errors, body::flat_map(prog, expr, pattern, b)).unwrap_or_default(),
                    );
                }
            }
            BodyItem::GroupBy { by, value } => {
                next = body::group_all(prog, by, value, &rows, errors);
            }
            BodyItem::Project(slots) => {
                next = rows.iter().map(|b| body::project(b, slots)).collect();
            }
        }
        rows = next;
    }
    rows.into_iter()
        .filter_map(|b| count(errors, body::head(prog, &rule.head_exprs, b)))
        .collect()
}
