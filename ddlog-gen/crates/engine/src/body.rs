//! Per-row semantics of rule body items, shared by the dataflow and the naive evaluator so
//! the two can only differ in how they combine rows, never in what one row means.

use std::collections::BTreeSet;

use rulec::ir::{Expr, Pattern, Program};
use rulec::value::{Row, Value};

use crate::eval::{as_bool, eval, match_pattern, mismatch, EvalResult};

/// How an atom `R(p0, p1, ...)` joins: key columns and their expressions (top-level
/// [`Pattern::Eq`]), and the patterns of the other columns.
#[derive(Clone, Debug)]
pub struct AtomPlan {
    /// Columns of the relation that form the join key, ascending.
    pub key_cols: Vec<usize>,
    /// Expression over the incoming row for each key column.
    pub key_exprs: Vec<Expr>,
    /// The remaining columns and their patterns (wildcards omitted).
    pub rest: Vec<(usize, Pattern)>,
}

impl AtomPlan {
    /// Split an atom's argument patterns into key and rest.
    pub fn new(args: &[Pattern]) -> AtomPlan {
        let mut plan = AtomPlan {
            key_cols: Vec::new(),
            key_exprs: Vec::new(),
            rest: Vec::new(),
        };
        for (i, p) in args.iter().enumerate() {
            match p {
                Pattern::Eq(e) => {
                    plan.key_cols.push(i);
                    plan.key_exprs.push((**e).clone());
                }
                Pattern::Wild => {}
                p => plan.rest.push((i, p.clone())),
            }
        }
        plan
    }

    /// The plan against rows that hold only the columns `cols` (ascending, a superset of
    /// the `rest` columns), in that order: an arrangement's values, which keep no more of
    /// a relation's rows than its joins read.
    pub fn narrowed(&self, cols: &[usize]) -> AtomPlan {
        let at = |col: usize| {
            cols.binary_search(&col)
                .expect("an arrangement keeps every column its joins read")
        };
        AtomPlan {
            key_cols: self.key_cols.clone(),
            key_exprs: self.key_exprs.clone(),
            rest: self.rest.iter().map(|(c, p)| (at(*c), p.clone())).collect(),
        }
    }

    /// The join key of an incoming binding row.
    pub fn key_of_binding(&self, prog: &Program, b: &Row) -> EvalResult<Row> {
        exact(self.key_exprs.iter().map(|e| eval_ro(prog, e, b)))
    }

    /// Extend binding row `b` with the binds of matching relation row `r` (whose key
    /// already matched), or `None` if a nested pattern does not match.
    pub fn extend(&self, prog: &Program, b: &Row, r: &Row) -> EvalResult<Option<Row>> {
        // Room for the binds up front (a column's pattern binds one variable, usually):
        // growing the row afterwards reallocated and copied it.
        let mut env = Vec::with_capacity(b.len() + self.rest.len());
        env.extend_from_slice(b);
        let mut binds = Vec::new();
        for (col, p) in &self.rest {
            let Some(v) = r.get(*col) else {
                return mismatch("row of the relation's arity", &Value::unit());
            };
            if !match_pattern(prog, p, v, &mut env, &mut binds)? {
                return Ok(None);
            }
        }
        env.reserve_exact(binds.len());
        env.extend(binds);
        Ok(Some(env))
    }

    /// First atom of a body: the incoming row is empty, so key expressions are constants
    /// checked directly against `r`.
    pub fn first(&self, prog: &Program, r: &Row) -> EvalResult<Option<Row>> {
        let empty = Vec::new();
        for (col, e) in self.key_cols.iter().zip(&self.key_exprs) {
            if r.get(*col) != Some(&eval_ro(prog, e, &empty)?) {
                return Ok(None);
            }
        }
        self.extend(prog, &empty, r)
    }
}

/// A row of the values `values` gives, or its first error, allocated at its length.
///
/// Rows are what the arrangements hold, and `collect()` through a `Result` cannot know the
/// length: it starts at room for four values and doubles. At the NVP workload's full scale
/// the logical engine held millions of rows at room for four, most of them with fewer
/// values.
pub fn exact(values: impl ExactSizeIterator<Item = EvalResult<Value>>) -> EvalResult<Row> {
    let mut row = Vec::with_capacity(values.len());
    for v in values {
        row.push(v?);
    }
    Ok(row)
}

/// Evaluate `e` against a borrowed row (cloning the row only when the expression needs a
/// mutable environment).
pub fn eval_ro(prog: &Program, e: &Expr, b: &Row) -> EvalResult<Value> {
    match e {
        Expr::Const(v) => Ok(v.clone()),
        Expr::Var(i) if *i < b.len() => Ok(b[*i].clone()),
        _ => eval(prog, e, &mut b.clone()),
    }
}

/// The given columns of `r`.
pub fn project(r: &Row, cols: &[usize]) -> Row {
    cols.iter().map(|c| r[*c].clone()).collect()
}

/// `Filter`: keep `b` if the condition holds.
pub fn filter(prog: &Program, cond: &Expr, mut b: Row) -> EvalResult<Option<Row>> {
    Ok(as_bool(&eval(prog, cond, &mut b)?)?.then_some(b))
}

/// `Let`: `b` extended with the pattern's binds, or `None` if the value does not match.
pub fn let_bind(
    prog: &Program,
    expr: &Expr,
    pattern: &Pattern,
    mut b: Row,
) -> EvalResult<Option<Row>> {
    let v = eval(prog, expr, &mut b)?;
    let mut binds = Vec::new();
    if !match_pattern(prog, pattern, &v, &mut b, &mut binds)? {
        return Ok(None);
    }
    b.reserve_exact(binds.len());
    b.extend(binds);
    Ok(Some(b))
}

/// `FlatMap`: one row per element of the collection that matches the pattern.
pub fn flat_map(
    prog: &Program,
    expr: &Expr,
    pattern: &Pattern,
    mut b: Row,
) -> EvalResult<Vec<Row>> {
    let coll = eval(prog, expr, &mut b)?;
    let mut out = Vec::new();
    let mut one = |v: &Value, b: &mut Row| -> EvalResult<()> {
        let mut binds = Vec::new();
        if match_pattern(prog, pattern, v, b, &mut binds)? {
            let mut row = Vec::with_capacity(b.len() + binds.len());
            row.extend_from_slice(b);
            row.extend(binds);
            out.push(row);
        }
        Ok(())
    };
    match &coll {
        Value::Vec(items) | Value::Set(items) => {
            for v in items.iter() {
                one(v, &mut b)?;
            }
        }
        Value::Group(g) => {
            for v in g.values.iter() {
                one(v, &mut b)?;
            }
        }
        Value::Map(pairs) => {
            for (k, v) in pairs.iter() {
                one(&Value::Tuple(vec![k.clone(), v.clone()].into()), &mut b)?;
            }
        }
        v => return mismatch("Vec, Set or Map", v),
    }
    Ok(out)
}

/// The group key of `by` values: the single value, a tuple, or `()`.
pub fn group_key(by_vals: &[Value]) -> Value {
    match by_vals {
        [v] => v.clone(),
        vs => Value::Tuple(vs.to_vec().into()),
    }
}

/// The output row of a group: the `by` values then the group value.
pub fn group_row(by_vals: &Row, values: Vec<Value>) -> Row {
    let mut row = Vec::with_capacity(by_vals.len() + 1);
    row.extend_from_slice(by_vals);
    row.push(Value::group(group_key(by_vals), values.into()));
    row
}

/// Naive `GroupBy` over a whole set of binding rows (the dataflow uses `reduce`).
pub fn group_all(
    prog: &Program,
    by: &[usize],
    value: &Expr,
    rows: &BTreeSet<Row>,
    errors: &mut u64,
) -> BTreeSet<Row> {
    let mut groups: std::collections::BTreeMap<Row, BTreeSet<Value>> =
        std::collections::BTreeMap::default();
    for b in rows {
        match eval_ro(prog, value, b) {
            Ok(v) => {
                groups.entry(project(b, by)).or_default().insert(v);
            }
            Err(_) => *errors += 1,
        }
    }
    groups
        .into_iter()
        .map(|(k, vs)| group_row(&k, vs.into_iter().collect()))
        .collect()
}

/// The head tuple of a rule for binding row `b`.
pub fn head(prog: &Program, exprs: &[Expr], mut b: Row) -> EvalResult<Row> {
    exact(exprs.iter().map(|e| eval(prog, e, &mut b)))
}

/// A row-local step of a rule body, fused with its neighbours into one operator.
#[derive(Clone, Debug)]
pub enum Step {
    /// The first atom of a body: the incoming row is a relation row, matched against an
    /// empty binding row.
    First(AtomPlan),
    /// `Filter`.
    Filter(Expr),
    /// `Let`.
    Let(Expr, Pattern),
    /// `FlatMap`.
    FlatMap(Expr, Pattern),
    /// `Project`.
    Project(Vec<usize>),
    /// The head tuples (always last): one row per head, each head's expressions evaluated
    /// on the same binding row (the heads of rules with one body).
    Heads(Vec<Vec<Expr>>),
}

impl Step {
    /// The step for a row-local body item, if it is one.
    pub fn local(item: &rulec::ir::BodyItem) -> Option<Step> {
        use rulec::ir::BodyItem;
        match item {
            BodyItem::Filter(e) => Some(Step::Filter(e.clone())),
            BodyItem::Let { expr, pattern } => Some(Step::Let(expr.clone(), pattern.clone())),
            BodyItem::FlatMap { expr, pattern } => {
                Some(Step::FlatMap(expr.clone(), pattern.clone()))
            }
            BodyItem::Project(slots) => Some(Step::Project(slots.clone())),
            _ => None,
        }
    }
}

/// Run `steps` on `row`, pushing every resulting row to `out`; each runtime error drops
/// its row and adds one to `errors`.
pub fn run_steps(prog: &Program, steps: &[Step], row: Row, out: &mut Vec<Row>, errors: &mut u64) {
    let Some((step, rest)) = steps.split_first() else {
        out.push(row);
        return;
    };
    let next = match step {
        Step::First(plan) => plan.first(prog, &row),
        Step::Filter(cond) => filter(prog, cond, row),
        Step::Let(expr, pattern) => let_bind(prog, expr, pattern, row),
        Step::Project(slots) => Ok(Some(project(&row, slots))),
        Step::Heads(heads) => {
            let Some((last, others)) = heads.split_last() else {
                return;
            };
            for exprs in others {
                match head(prog, exprs, row.clone()) {
                    Ok(r) => run_steps(prog, rest, r, out, errors),
                    Err(_) => *errors += 1,
                }
            }
            head(prog, last, row).map(Some)
        }
        Step::FlatMap(expr, pattern) => {
            match flat_map(prog, expr, pattern, row) {
                Ok(rows) => {
                    for r in rows {
                        run_steps(prog, rest, r, out, errors);
                    }
                }
                Err(_) => *errors += 1,
            }
            return;
        }
    };
    match next {
        Ok(Some(r)) => run_steps(prog, rest, r, out, errors),
        Ok(None) => {}
        Err(_) => *errors += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog() -> Program {
        Program::default()
    }

    fn row(n: u128) -> Row {
        (0..n).map(Value::bit).collect()
    }

    /// The rows a body makes are what the arrangements keep: each is allocated at its
    /// length, however it was built.
    #[test]
    fn rows_are_allocated_at_their_length() {
        let prog = prog();
        let heads = head(&prog, &[Expr::Var(1), Expr::Var(0)], row(3)).unwrap();
        assert_eq!((heads.len(), heads.capacity()), (2, 2));
        let plan = AtomPlan::new(&[Pattern::Eq(Box::new(Expr::Var(2))), Pattern::Bind]);
        let key = plan.key_of_binding(&prog, &row(3)).unwrap();
        assert_eq!((key.len(), key.capacity()), (1, 1));
        let pair = Pattern::Tuple(vec![Pattern::Bind, Pattern::Bind]);
        let joined = AtomPlan::new(&[Pattern::Wild, pair.clone()])
            .extend(
                &prog,
                &row(2),
                &vec![Value::bit(0), Value::Tuple(row(2).into())],
            )
            .unwrap()
            .unwrap();
        assert_eq!((joined.len(), joined.capacity()), (4, 4));
        let bound = let_bind(
            &prog,
            &Expr::Const(Value::Tuple(row(2).into())),
            &pair,
            row(3),
        )
        .unwrap()
        .unwrap();
        assert_eq!((bound.len(), bound.capacity()), (5, 5));
        let set = Expr::Const(Value::set_from(row(3)));
        for one in flat_map(&prog, &set, &Pattern::Bind, row(1)).unwrap() {
            assert_eq!((one.len(), one.capacity()), (2, 2));
        }
        let group = group_row(&row(2), row(2));
        assert_eq!((group.len(), group.capacity()), (3, 3));
    }
}
