//! IR → differential-dataflow operators.
//!
//! Strata are built in order. Non-recursive strata live in the root scope; each recursive
//! stratum is one `iterative` scope with a `Variable` per relation. Atoms are `join_core`s
//! against arrangements cached per (relation, key columns) and scope; `not` is the
//! binding collection minus its semijoin with the negated relation's key set; `group_by`
//! is a hash map of groups outside recursion and a `reduce` inside (see [`crate::group`]).
//! A derived relation ends in `distinct` (set semantics) only where multiplicities would
//! change a result: in recursion and under `not`. Elsewhere it carries
//! counts of derivations (see [`multisets`]) that [`crate::Engine`] turns into set changes
//! when it materializes the relation; a `distinct` would arrange every row twice, and the
//! biggest relations (the flows) need none.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use differential_dataflow::collection::concatenate;
use differential_dataflow::input::{Input, InputSession};
use differential_dataflow::lattice::Lattice;
use differential_dataflow::operators::arrange::{Arranged, TraceAgent};
use differential_dataflow::operators::iterate::Variable;
use differential_dataflow::trace::implementations::{KeySpine, ValSpine};
use differential_dataflow::VecCollection;
use rulec::ir::{BodyItem, Expr, Program, RelId, Role, Rule};
use rulec::value::{Row, Value};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::probe::{Handle as ProbeHandle, Probe};
use timely::dataflow::Scope;
use timely::order::Product;
use timely::progress::Timestamp;

use crate::body::{self, AtomPlan, Step};
use crate::group::{Grouping, Keyed};
use crate::profile::Labels;

/// A collection of rows in a scope with timestamp `T`.
type Coll<'s, T> = VecCollection<'s, T, Row>;
/// Relation rows arranged by key columns, each keeping as its value the columns the
/// relation's joins on that key read (see [`value_columns`]).
type ValArr<'s, T> = Arranged<'s, TraceAgent<ValSpine<Row, Row, T, isize>>>;
/// Distinct key tuples of a relation, for `not`.
type KeyArr<'s, T> = Arranged<'s, TraceAgent<KeySpine<Row, T, isize>>>;

/// Changes captured from the derived relations during one commit (not consolidated).
pub type Captured = Rc<RefCell<Vec<(RelId, Row, isize)>>>;

/// What the worker keeps after building the dataflow.
pub struct Built {
    /// One input session per input relation.
    pub inputs: HashMap<RelId, InputSession<u64, Row, isize>>,
    /// The one-row collection (`[]`) that starts every rule body.
    pub unit: InputSession<u64, Row, isize>,
    /// Which relation each operator computes (for [`crate::profile`]).
    pub labels: Labels,
    /// Which rule's join, antijoin or `group_by`, or which relation's arrangement, each
    /// operator belongs to (for [`crate::profile`]'s account of the memory).
    pub details: Labels,
}

/// The relations, arrangements and counters of one scope while rules are compiled into it.
struct Ctx<'s, T: Timestamp + Lattice> {
    prog: Arc<Program>,
    errors: Arc<AtomicU64>,
    scope: Scope<'s, T>,
    unit: Coll<'s, T>,
    rels: HashMap<RelId, Coll<'s, T>>,
    arrs: HashMap<(RelId, Vec<usize>), ValArr<'s, T>>,
    keys: HashMap<(RelId, Vec<usize>), KeyArr<'s, T>>,
    values: Arc<ValueColumns>,
    details: Rc<RefCell<Labels>>,
}

/// For each (relation, key columns) some join arranges a relation by: the other columns
/// any of those joins reads, ascending.
type ValueColumns = HashMap<(RelId, Vec<usize>), Vec<usize>>;

/// What each arrangement of a relation must keep of its rows besides the key: the columns
/// that the joins using it bind or match, not the key (which it keeps apart) nor the
/// wildcards. Keeping the whole row as the value stored every key column twice and every
/// column no join reads: the arrangements are most of the engine's memory, so what they
/// keep of a row is what the engine holds.
fn value_columns(prog: &Program) -> ValueColumns {
    let mut cols: HashMap<(RelId, Vec<usize>), BTreeSet<usize>> = HashMap::new();
    for rule in &prog.rules {
        // A body's first atom is matched row by row (`Step::First`), not joined.
        for item in rule.body.iter().skip(1) {
            if let BodyItem::Atom { rel, args } = item {
                let plan = AtomPlan::new(args);
                cols.entry((*rel, plan.key_cols))
                    .or_default()
                    .extend(plan.rest.iter().map(|(c, _)| *c));
            }
        }
    }
    cols.into_iter()
        .map(|(k, v)| (k, v.into_iter().collect()))
        .collect()
}

/// A rule body's rows between two of its joins, antijoins or `group_by`s, shaped for the
/// item that consumes them: keyed for a join (`(key, binding)`), keyed for a `group_by`
/// (`(by values, value)`), or as they are (an antijoin, which needs them whole twice, and
/// the heads). The operator making the rows does the keying: a separate keying `flat_map`
/// before every join was one more operator for timely to track on every commit, where an
/// empty commit's cost is mostly that tracking, a cost per operator.
enum Stage<'s, T: Timestamp + Lattice> {
    Rows(Coll<'s, T>),
    Join(VecCollection<'s, T, (Row, Row)>),
    Group(Keyed<'s, T>),
}

/// The stage made by `$make` (an expression using `$f`, a closure from one row to the
/// stage's output: `$steps`, then the keying `$next` wants), shaped for `$next`. `$make` is
/// expanded once per shape, as the closure's output type differs.
macro_rules! stage {
    ($ctx:expr, $next:expr, $steps:expr, |$f:ident| $make:expr) => {
        match $next {
            Some(BodyItem::Atom { args, .. }) => {
                let plan = AtomPlan::new(args);
                let $f = $ctx.keyed_stepper($steps, move |prog, b| {
                    plan.key_of_binding(prog, &b).map(|k| Some((k, b)))
                });
                Stage::Join($make)
            }
            Some(BodyItem::GroupBy { by, value }) => {
                let (by, value) = (by.clone(), value.clone());
                let $f = $ctx.keyed_stepper($steps, move |prog, b| {
                    body::eval_ro(prog, &value, &b).map(|v| Some((body::project(&b, &by), v)))
                });
                Stage::Group($make)
            }
            _ => {
                let $f = $ctx.stepper($steps);
                Stage::Rows($make)
            }
        }
    };
}

/// Count a runtime error and turn the result into an option.
fn ok<X>(errors: &AtomicU64, r: crate::eval::EvalResult<X>) -> Option<X> {
    r.map_err(|_| errors.fetch_add(1, Ordering::Relaxed)).ok()
}

impl<'s, T: Grouping> Ctx<'s, T> {
    /// Operators created from now on belong to `detail` (see [`Built::details`]).
    fn mark(&self, detail: &str) {
        let next = self.scope.worker().peek_identifier();
        self.details.borrow_mut().mark(next, detail);
    }

    fn rel(&self, rel: RelId) -> Coll<'s, T> {
        match self.rels.get(&rel) {
            Some(c) => c.clone(),
            // A relation nothing derives: empty.
            None => self.unit.clone().filter(|_| false),
        }
    }

    /// `rel`'s rows arranged by the key columns of `atom` (a join with `rel`), and the
    /// join's plan against the arrangement's values.
    fn arrangement(&mut self, rel: RelId, atom: &AtomPlan) -> (ValArr<'s, T>, AtomPlan) {
        let key = (rel, atom.key_cols.clone());
        let values = self.values[&key].clone();
        let plan = atom.narrowed(&values);
        if let Some(a) = self.arrs.get(&key) {
            return (a.clone(), plan);
        }
        let name = &self.prog.relations[rel].name;
        self.mark(&format!("{name} by {:?} keeping {values:?}", atom.key_cols));
        let cols = atom.key_cols.clone();
        let a = self
            .rel(rel)
            .map(move |r| (body::project(&r, &cols), body::project(&r, &values)))
            .arrange_by_key();
        self.arrs.insert(key, a.clone());
        (a, plan)
    }

    fn key_set(&mut self, rel: RelId, cols: &[usize]) -> KeyArr<'s, T> {
        if let Some(a) = self.keys.get(&(rel, cols.to_vec())) {
            return a.clone();
        }
        let arity = self.prog.relations[rel].columns.len();
        let name = &self.prog.relations[rel].name;
        self.mark(&format!("{name} keys {cols:?}"));
        let owned = cols.to_vec();
        let mut keys = self.rel(rel).map(move |r| body::project(&r, &owned));
        if cols.len() < arity {
            keys = keys.distinct();
        }
        let a = keys.arrange_by_self();
        self.keys.insert((rel, cols.to_vec()), a.clone());
        a
    }

    /// A closure running `steps` on a row (fused row-local body items).
    fn stepper(&self, steps: Vec<Step>) -> impl Fn(Row) -> Vec<Row> + 'static {
        self.keyed_stepper(steps, |_, row| Ok(Some(row)))
    }

    /// A closure running `steps` on a row, then `shape` on each row they give (the keying
    /// the next body item wants; `None` drops the row).
    fn keyed_stepper<O: 'static>(
        &self,
        steps: Vec<Step>,
        shape: impl Fn(&Program, Row) -> crate::eval::EvalResult<Option<O>> + 'static,
    ) -> impl Fn(Row) -> Vec<O> + 'static {
        let (prog, errors) = (self.prog.clone(), self.errors.clone());
        move |row| {
            let mut rows = Vec::new();
            let mut n = 0;
            body::run_steps(&prog, &steps, row, &mut rows, &mut n);
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                match shape(&prog, row) {
                    Ok(Some(o)) => out.push(o),
                    Ok(None) => {}
                    Err(_) => n += 1,
                }
            }
            if n > 0 {
                errors.fetch_add(n, Ordering::Relaxed);
            }
            out
        }
    }

    /// The head rows of rules that share one body (`heads`: each one's head expressions).
    /// Row-local items (conditions, `var`, `FlatMap`, projections, the heads, and the first
    /// atom's matching) are fused into the operator before or after them, and so is the
    /// keying of rows for a join or a `group_by` (see [`Stage`]): a body costs one operator,
    /// plus per join its input's arrangement and the `join_core`, per antijoin four, per
    /// `group_by` one.
    fn rule(&mut self, source: &str, items: &[BodyItem], heads: &[Vec<Expr>]) -> Coll<'s, T> {
        self.mark(source);
        // Steps after each item up to the next join/not/group (or the head at the end).
        let steps_after = |start: usize| -> (Vec<Step>, usize) {
            let mut steps = Vec::new();
            let mut i = start;
            while let Some(s) = items.get(i).and_then(Step::local) {
                steps.push(s);
                i += 1;
            }
            if i == items.len() {
                steps.push(Step::Heads(heads.to_vec()));
            }
            (steps, i)
        };
        let (mut cur, mut i) = if let Some(BodyItem::Atom { rel, args }) = items.first() {
            let (mut steps, next) = steps_after(1);
            steps.insert(0, Step::First(AtomPlan::new(args)));
            let rows = self.rel(*rel);
            (
                stage!(self, items.get(next), steps, |f| rows.flat_map(f)),
                next,
            )
        } else {
            let (steps, next) = steps_after(0);
            let unit = self.unit.clone();
            (
                stage!(self, items.get(next), steps, |f| unit.flat_map(f)),
                next,
            )
        };
        while let Some(item) = items.get(i) {
            let (post, next) = steps_after(i + 1);
            let following = items.get(next);
            let prog = self.prog.clone();
            let errors = self.errors.clone();
            cur = match (item, cur) {
                (BodyItem::Atom { rel, args }, Stage::Join(keyed)) => {
                    let atom = AtomPlan::new(args);
                    let (arr, plan) = self.arrangement(*rel, &atom);
                    self.mark(&format!("{source}: join {}", prog.relations[*rel].name));
                    stage!(self, following, post, |f| keyed.join_core(
                        arr,
                        move |_k, b: &Row, r: &Row| {
                            ok(&errors, plan.extend(&prog, b, r))
                                .flatten()
                                .map(&f)
                                .unwrap_or_default()
                        }
                    ))
                }
                (BodyItem::Not { rel, args }, Stage::Rows(rows)) => {
                    let plan = AtomPlan::new(args);
                    let keys = self.key_set(*rel, &plan.key_cols);
                    self.mark(&format!("{source}: not {}", prog.relations[*rel].name));
                    let matched = rows
                        .clone()
                        .flat_map(move |b| {
                            ok(&errors, plan.key_of_binding(&prog, &b)).map(|k| (k, b))
                        })
                        .join_core(keys, |_k, b: &Row, &()| Some(b.clone()));
                    let both = rows.concat(matched.negate());
                    if post.is_empty() && matches!(following, Some(BodyItem::Not { .. })) {
                        Stage::Rows(both)
                    } else {
                        stage!(self, following, post, |f| both.flat_map(f))
                    }
                }
                (BodyItem::GroupBy { .. }, Stage::Group(keyed)) => {
                    self.mark(&format!("{source}: group_by"));
                    stage!(self, following, post, |f| T::group(keyed).flat_map(
                        move |(mut k, g): (Row, Value)| {
                            k.reserve_exact(1);
                            k.push(g);
                            f(k)
                        }
                    ))
                }
                // Each stage is shaped for the item after it (`stage!`), and row-local items
                // were consumed by `steps_after`.
                _ => unreachable!("a body stage shaped for another item"),
            };
            i = next.max(i + 1);
        }
        match cur {
            Stage::Rows(rows) => rows,
            _ => unreachable!("a body's last stage gives its head rows"),
        }
    }

    /// The union of the given rules' heads: distinct, or with multiplicities (see
    /// [`multisets`]).
    ///
    /// Rules with one body are evaluated once: a rule with several heads is lowered to one
    /// IR rule per head, all with the same body (its liveness covers every head), and
    /// evaluating that body once per head repeated its joins.
    fn derive(&mut self, rules: &[usize], multiset: bool) -> Coll<'s, T> {
        let prog = self.prog.clone();
        // Each distinct body with the first rule that has it and the heads of all.
        let mut bodies: Vec<(&Rule, Vec<Vec<Expr>>)> = Vec::new();
        for r in rules.iter().map(|r| &prog.rules[*r]) {
            match bodies.iter_mut().find(|(first, _)| first.body == r.body) {
                Some((_, heads)) => heads.push(r.head_exprs.clone()),
                None => bodies.push((r, vec![r.head_exprs.clone()])),
            }
        }
        let parts: Vec<Coll<'s, T>> = bodies
            .iter()
            .map(|(r, heads)| self.rule(&r.source, &r.body, heads))
            .collect();
        if let Some(r) = rules.first() {
            let name = &prog.relations[prog.rules[*r].head].name;
            self.mark(&format!("{name}: union"));
        }
        let all = match parts.len() {
            0 => return self.unit.clone().filter(|_| false),
            // One body: no `Concatenate` operator (one fewer for timely to track).
            1 => parts.into_iter().next().expect("one part"),
            _ => concatenate(self.scope, parts),
        };
        if multiset {
            all
        } else {
            all.distinct()
        }
    }
}

/// Per relation: may it carry multiplicities (counts of derivations) instead of ending in
/// `distinct`? Yes when it is derived in a non-recursive stratum, no rule negates it, and no
/// rule of a recursive stratum reads it: joins then only multiply counts that a later
/// `distinct` or the engine's counting absorbs, and `group_by` sees each distinct value
/// once whatever its count. A `distinct` arranges every row of its relation twice (its
/// input and its output), and the biggest relations — the flows — are exactly these.
fn multisets(prog: &Program) -> Vec<bool> {
    let mut out = vec![false; prog.relations.len()];
    for stratum in prog.strata.iter().filter(|s| !s.recursive) {
        for rel in &stratum.relations {
            out[*rel] = true;
        }
    }
    for stratum in &prog.strata {
        for r in &stratum.rules {
            for item in &prog.rules[*r].body {
                match item {
                    BodyItem::Not { rel, .. } => out[*rel] = false,
                    BodyItem::Atom { rel, .. } if stratum.recursive => out[*rel] = false,
                    _ => {}
                }
            }
        }
    }
    out
}

/// Relations read by a set of rules.
fn body_relations(prog: &Program, rules: &[usize]) -> BTreeSet<RelId> {
    let mut out = BTreeSet::new();
    for r in rules {
        for item in &prog.rules[*r].body {
            if let BodyItem::Atom { rel, .. } | BodyItem::Not { rel, .. } = item {
                out.insert(*rel);
            }
        }
    }
    out
}

/// Build the whole program into the root scope: inputs, strata, and the capture of the
/// changes of every derived relation that `capture` marks into `captured` (all attached to
/// `probe`).
pub fn build(
    scope: Scope<'_, u64>,
    prog: &Arc<Program>,
    errors: &Arc<AtomicU64>,
    probe: &ProbeHandle<u64>,
    captured: &Captured,
    capture: &[bool],
) -> Built {
    let mut labels = Labels::default();
    labels.mark(scope.worker().peek_identifier(), "(inputs)");
    let details = Rc::new(RefCell::new(labels.clone()));
    let (unit_in, unit) = scope.new_collection::<Row, isize>();
    let mut ctx = Ctx {
        prog: prog.clone(),
        errors: errors.clone(),
        scope,
        unit,
        rels: HashMap::new(),
        arrs: HashMap::new(),
        keys: HashMap::new(),
        values: Arc::new(value_columns(prog)),
        details: details.clone(),
    };
    let mut inputs = HashMap::new();
    for (id, rel) in prog.relations.iter().enumerate() {
        if rel.role == Role::Input {
            let (session, coll) = scope.new_collection::<Row, isize>();
            inputs.insert(id, session);
            ctx.rels.insert(id, coll);
        }
    }
    let multisets = multisets(prog);
    let mut derived: Vec<(RelId, Coll<'_, u64>)> = Vec::new();
    for stratum in &prog.strata {
        if stratum.recursive {
            let names: Vec<&str> = stratum
                .relations
                .iter()
                .map(|r| prog.relations[*r].name.as_str())
                .collect();
            labels.mark(scope.worker().peek_identifier(), &names.join(" + "));
            let inside: BTreeSet<RelId> = stratum.relations.iter().copied().collect();
            let outside: Vec<(RelId, Coll<'_, u64>)> = body_relations(prog, &stratum.rules)
                .into_iter()
                .filter(|r| !inside.contains(r))
                .map(|r| (r, ctx.rel(r)))
                .collect();
            let unit = ctx.unit.clone();
            let results = scope.iterative::<u64, _, _>(|inner| {
                let mut ictx = Ctx {
                    prog: prog.clone(),
                    errors: errors.clone(),
                    scope: inner,
                    unit: unit.enter(inner),
                    rels: HashMap::new(),
                    arrs: HashMap::new(),
                    keys: HashMap::new(),
                    values: ctx.values.clone(),
                    details: details.clone(),
                };
                for (r, c) in outside {
                    ictx.rels.insert(r, c.enter(inner));
                }
                let mut vars = Vec::new();
                for rel in &stratum.relations {
                    let (var, coll) = Variable::new(inner, Product::new(Default::default(), 1));
                    ictx.rels.insert(*rel, coll);
                    vars.push((*rel, var));
                }
                let mut out = Vec::new();
                for (rel, var) in vars {
                    let rules: Vec<usize> = stratum
                        .rules
                        .iter()
                        .copied()
                        .filter(|r| prog.rules[*r].head == rel)
                        .collect();
                    let next = ictx.derive(&rules, false);
                    var.set(next.clone());
                    out.push((rel, next.leave(scope)));
                }
                out
            });
            for (rel, c) in results {
                ctx.rels.insert(rel, c.clone());
                derived.push((rel, c));
            }
        } else {
            // Relations of a non-recursive stratum in dependency order.
            let mut pending: Vec<RelId> = stratum.relations.clone();
            while !pending.is_empty() {
                let rules_of = |rel: RelId| -> Vec<usize> {
                    stratum
                        .rules
                        .iter()
                        .copied()
                        .filter(|r| prog.rules[*r].head == rel)
                        .collect()
                };
                let ready = pending
                    .iter()
                    .position(|rel| {
                        body_relations(prog, &rules_of(*rel))
                            .iter()
                            .all(|d| d == rel || !pending.contains(d))
                    })
                    .unwrap_or(0);
                let rel = pending.remove(ready);
                labels.mark(scope.worker().peek_identifier(), &prog.relations[rel].name);
                let c = ctx.derive(&rules_of(rel), multisets[rel]);
                ctx.rels.insert(rel, c.clone());
                derived.push((rel, c));
            }
        }
    }
    labels.mark(scope.worker().peek_identifier(), "(capture)");
    details
        .borrow_mut()
        .mark(scope.worker().peek_identifier(), "(capture)");
    for (rel, c) in derived.into_iter().filter(|(rel, _)| capture[*rel]) {
        // A sink-like operator that moves the rows out (no clone) and outputs nothing; the
        // probe after it passes an epoch only once it has consumed that epoch's rows.
        let buf = captured.clone();
        c.inner
            .unary::<CapacityContainerBuilder<Vec<(Row, u64, isize)>>, _, _, _>(
                Pipeline,
                "Capture",
                move |_capability, _info| {
                    move |input, _output| {
                        input.for_each(|_time, data| {
                            let mut buf = buf.borrow_mut();
                            buf.extend(data.drain(..).map(|(row, _, d)| (rel, row, d)));
                        });
                    }
                },
            )
            .probe_with(probe);
    }
    let details = details.borrow().clone();
    Built {
        inputs,
        unit: unit_in,
        labels,
        details,
    }
}
