//! Rule lowering: a checked [`crate::ast::RuleDecl`] → [`crate::ir::Rule`]s (one per head),
//! plus the dependency edges stratification needs.
//!
//! The binding row is tracked as a [`Scope`]: slot `i` of the row is `scope[i]`. Atoms
//! turn bound variables and literals into `Pattern::Eq` join keys and fresh variables
//! into `Pattern::Bind`; a variable repeated inside one atom binds a temporary that a
//! `Filter` right after the atom compares. Slots no later item or head reads are dropped
//! with `Project` after each binding step.

use std::collections::HashSet;

use crate::ast::{Args, Atom, BodyItem, Expr, ExprKind, RuleDecl, Span};
use crate::check::Ctx;
use crate::error::CompileError;
use crate::expr::{PatMode, Scope};
use crate::ir::{self, BinOp, Pattern, RelId, Role};
use crate::types::Type;

type R<T> = Result<T, CompileError>;

/// How a rule's head depends on a body relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepKind {
    /// Plain join.
    Pos,
    /// Through `not`.
    Neg,
    /// Through a `group_by`.
    Agg,
}

/// One dependency edge: `head` is derived from `body`.
#[derive(Clone, Debug)]
pub struct Dep {
    /// Derived relation.
    pub head: RelId,
    /// Relation read.
    pub body: RelId,
    /// Kind of dependency.
    pub kind: DepKind,
    /// Position of the body atom.
    pub span: Span,
}

fn atom_vars(a: &Atom, out: &mut HashSet<String>) {
    for e in a.args.exprs() {
        e.vars(&mut |v, _| {
            out.insert(v.to_string());
        });
    }
}

fn item_vars(b: &BodyItem, out: &mut HashSet<String>) {
    let mut add = |e: &Expr| {
        e.vars(&mut |v, _| {
            out.insert(v.to_string());
        });
    };
    match b {
        BodyItem::Atom { atom, .. } => {
            for e in atom.args.exprs() {
                add(e);
            }
        }
        BodyItem::Cond(e) => add(e),
        BodyItem::Let { value, .. } => add(value),
    }
}

impl Ctx {
    /// Lower one rule: its IR rules (one per head) and its dependency edges.
    pub fn lower_rule(&self, r: &RuleDecl) -> R<(Vec<ir::Rule>, Vec<Dep>)> {
        // Heads: relations first, so that an unknown relation is reported before the body.
        let mut heads = Vec::new();
        for h in &r.heads {
            let rel = self.atom_rel(h)?;
            if self.rels[rel].role == Role::Input {
                return Err(h.span.error(format!(
                    "relation `{}` is an input relation and cannot be derived by a rule",
                    self.rels[rel].name
                )));
            }
            heads.push(rel);
        }
        // Liveness: variables read at or after body item i (heads included).
        let mut live_from = vec![HashSet::new(); r.body.len() + 1];
        for h in &r.heads {
            atom_vars(h, &mut live_from[r.body.len()]);
        }
        for i in (0..r.body.len()).rev() {
            let mut s = live_from[i + 1].clone();
            item_vars(&r.body[i], &mut s);
            live_from[i] = s;
        }
        let mut scope: Scope = Vec::new();
        let mut items = Vec::new();
        let mut deps: Vec<(RelId, DepKind, Span)> = Vec::new();
        for (i, item) in r.body.iter().enumerate() {
            *self.unbound_note.borrow_mut() = "";
            let binds = match item {
                BodyItem::Atom { neg: false, atom } => {
                    let rel = self.atom_rel(atom)?;
                    deps.push((rel, DepKind::Pos, atom.span));
                    self.lower_atom(atom, rel, &mut scope, &mut items)?;
                    true
                }
                BodyItem::Atom { neg: true, atom } => {
                    let rel = self.atom_rel(atom)?;
                    deps.push((rel, DepKind::Neg, atom.span));
                    let args = self.lower_negated(atom, rel, &mut scope)?;
                    items.push(ir::BodyItem::Not { rel, args });
                    false
                }
                BodyItem::Cond(e) => {
                    let (ie, _) = self.expr(e, &mut scope, Some(&Type::Bool))?;
                    items.push(ir::BodyItem::Filter(ie));
                    false
                }
                BodyItem::Let { pat, value, .. } => {
                    if let ExprKind::Method(recv, m, args) = &value.kind {
                        if m == "group_by" {
                            self.lower_group_by(pat, recv, args, &mut scope, &mut items)?;
                            for d in &mut deps {
                                if d.1 == DepKind::Pos {
                                    d.1 = DepKind::Agg;
                                }
                            }
                            continue;
                        }
                    }
                    let hint = match &pat.kind {
                        ExprKind::Var(v) if crate::expr::needs_ctx(value) => {
                            self.usage_type(v, &r.body[i + 1..], &r.heads).or_else(|| {
                                let later: Vec<&Expr> = r.body[i + 1..]
                                    .iter()
                                    .filter_map(|b| match b {
                                        BodyItem::Cond(e) => Some(e),
                                        BodyItem::Let { value, .. } => Some(value),
                                        BodyItem::Atom { .. } => None,
                                    })
                                    .collect();
                                self.literal_hint(v, &later, &scope)
                            })
                        }
                        _ => None,
                    };
                    self.lower_let(pat, value, hint, &mut scope, &mut items)?;
                    true
                }
            };
            if binds {
                let live = &live_from[i + 1];
                let keep: Vec<usize> = (0..scope.len())
                    .filter(|&s| live.contains(&scope[s].0))
                    .collect();
                if keep.len() < scope.len() {
                    items.push(ir::BodyItem::Project(keep.clone()));
                    scope = keep.into_iter().map(|s| scope[s].clone()).collect();
                }
            }
        }
        *self.unbound_note.borrow_mut() = " in the rule head";
        let mut out = Vec::new();
        for (h, &rel) in r.heads.iter().zip(&heads) {
            let cols = &self.rels[rel].columns;
            let es = self.atom_args(h, rel, false)?;
            let mut head_exprs = Vec::new();
            for (e, (_, t)) in es.iter().zip(cols) {
                let e = e.expect("complete head");
                if let ExprKind::Wild = e.kind {
                    return Err(e.span.error("`_` is not allowed in a rule head"));
                }
                head_exprs.push(self.expr(e, &mut scope, Some(t))?.0);
            }
            out.push(ir::Rule {
                head: rel,
                head_exprs,
                body: items.clone(),
                source: self.pos(h.span),
            });
        }
        *self.unbound_note.borrow_mut() = "";
        let deps = heads
            .iter()
            .flat_map(|&h| {
                deps.iter().map(move |&(b, kind, span)| Dep {
                    head: h,
                    body: b,
                    kind,
                    span,
                })
            })
            .collect();
        Ok((out, deps))
    }

    /// The type a later atom or head gives variable `v` by using it directly as a
    /// column argument, if any: lets `var x = 5` take its type from `H(x)`, as DDlog's
    /// rule-wide inference does.
    fn usage_type(&self, v: &str, later: &[BodyItem], heads: &[Atom]) -> Option<Type> {
        let atoms = later
            .iter()
            .filter_map(|b| match b {
                BodyItem::Atom { atom, .. } => Some(atom),
                _ => None,
            })
            .chain(heads);
        for a in atoms {
            let Some(rel) = self.relation(&a.rel) else {
                continue;
            };
            let Ok(args) = self.atom_args(a, rel, true) else {
                continue;
            };
            for (e, (_, t)) in args.iter().zip(&self.rels[rel].columns) {
                if matches!(e, Some(Expr { kind: ExprKind::Var(x), .. }) if x == v) {
                    return Some(t.clone());
                }
            }
        }
        None
    }

    fn atom_rel(&self, a: &Atom) -> R<RelId> {
        self.relation(&a.rel)
            .ok_or_else(|| a.span.error(format!("unknown relation `{}`", a.rel)))
    }

    /// One argument expression per column (`None` for omitted named columns).
    fn atom_args<'a>(&self, a: &'a Atom, rel: RelId, partial: bool) -> R<Vec<Option<&'a Expr>>> {
        let r = &self.rels[rel];
        match &a.args {
            Args::Pos(es) => {
                if es.len() != r.columns.len() {
                    let n = r.columns.len();
                    return Err(a.span.error(format!(
                        "relation `{}` has {n} column{}, but {} argument{} given",
                        r.name,
                        if n == 1 { "" } else { "s" },
                        es.len(),
                        if es.len() == 1 { " is" } else { "s are" }
                    )));
                }
                Ok(es.iter().map(Some).collect())
            }
            Args::Named(named) => {
                let mut out = vec![None; r.columns.len()];
                for (f, s, e) in named {
                    let Some(i) = r.columns.iter().position(|(c, _)| c == f) else {
                        return Err(s.error(format!("relation `{}` has no column `{f}`", r.name)));
                    };
                    if out[i].is_some() {
                        return Err(s.error(format!("column `{f}` given twice")));
                    }
                    out[i] = Some(e);
                }
                if !partial {
                    if let Some(i) = out.iter().position(Option::is_none) {
                        return Err(a.span.error(format!(
                            "missing column `{}` of relation `{}`",
                            r.columns[i].0, r.name
                        )));
                    }
                }
                Ok(out)
            }
        }
    }

    fn lower_atom(
        &self,
        a: &Atom,
        rel: RelId,
        scope: &mut Scope,
        items: &mut Vec<ir::BodyItem>,
    ) -> R<()> {
        let es = self.atom_args(a, rel, true)?;
        let base = scope.len();
        let mut filters = Vec::new();
        let mut args = Vec::new();
        for (e, (_, t)) in es.iter().zip(&self.rels[rel].columns) {
            args.push(match e {
                None => Pattern::Wild,
                Some(e) => self.pattern(e, t, scope, PatMode::Atom { base }, &mut filters)?,
            });
        }
        items.push(ir::BodyItem::Atom { rel, args });
        for (a, b, ty) in filters {
            items.push(ir::BodyItem::Filter(ir::Expr::Binary {
                op: BinOp::Eq,
                ty,
                lhs: Box::new(ir::Expr::Var(a)),
                rhs: Box::new(ir::Expr::Var(b)),
            }));
        }
        Ok(())
    }

    fn lower_negated(&self, a: &Atom, rel: RelId, scope: &mut Scope) -> R<Vec<Pattern>> {
        let es = self.atom_args(a, rel, true)?;
        *self.unbound_note.borrow_mut() = " in a negated atom";
        let mut args = Vec::new();
        for (e, (_, t)) in es.iter().zip(&self.rels[rel].columns) {
            args.push(match e {
                None => Pattern::Wild,
                Some(e) if e.kind == ExprKind::Wild => Pattern::Wild,
                Some(e) if e.has_wild() => {
                    return Err(e.span.error("`_` inside an argument of a negated atom is not supported; negate a helper relation"))
                }
                Some(e) => Pattern::Eq(Box::new(self.expr(e, scope, Some(t))?.0)),
            });
        }
        *self.unbound_note.borrow_mut() = "";
        Ok(args)
    }

    fn lower_let(
        &self,
        pat: &Expr,
        value: &Expr,
        hint: Option<Type>,
        scope: &mut Scope,
        items: &mut Vec<ir::BodyItem>,
    ) -> R<()> {
        let (pat, ann) = match &pat.kind {
            ExprKind::Ascribe(p, t) => (&**p, Some(self.resolve(t)?)),
            _ => (pat, hint),
        };
        if let ExprKind::Call(f, args) = &value.kind {
            if f == "FlatMap" {
                if args.len() != 1 {
                    return Err(value.span.error(format!(
                        "function `FlatMap` expects 1 argument, found {}",
                        args.len()
                    )));
                }
                let (ie, t) = self.expr(&args[0], scope, None)?;
                let elem = match &t {
                    Type::Vec(e) | Type::Set(e) => (**e).clone(),
                    Type::Map(k, v) => Type::Tuple(vec![(**k).clone(), (**v).clone()]),
                    _ => {
                        return Err(args[0].span.error(format!(
                            "`FlatMap` needs a Vec, Set or Map, found {}",
                            self.show(&t)
                        )))
                    }
                };
                if let Some(a) = &ann {
                    if *a != elem {
                        return Err(pat.span.error(format!(
                            "expected {}, found {}",
                            self.show(a),
                            self.show(&elem)
                        )));
                    }
                }
                let pattern =
                    self.pattern(pat, &elem, scope, PatMode::FreshUnique, &mut Vec::new())?;
                items.push(ir::BodyItem::FlatMap { expr: ie, pattern });
                return Ok(());
            }
        }
        let (ie, t) = self.expr(value, scope, ann.as_ref())?;
        let pattern = self.pattern(pat, &t, scope, PatMode::FreshUnique, &mut Vec::new())?;
        items.push(ir::BodyItem::Let { expr: ie, pattern });
        Ok(())
    }

    fn lower_group_by(
        &self,
        pat: &Expr,
        value: &Expr,
        by: &[Expr],
        scope: &mut Scope,
        items: &mut Vec<ir::BodyItem>,
    ) -> R<()> {
        let ExprKind::Var(g) = &pat.kind else {
            return Err(pat.span.error(
                "the result of `group_by` must be bound to a variable: `var g = e.group_by(k)`",
            ));
        };
        if scope.iter().any(|(n, _)| n == g) {
            return Err(pat.span.error(format!("variable `{g}` is already defined")));
        }
        let by: Vec<&Expr> = match by {
            [Expr {
                kind: ExprKind::Tuple(es),
                ..
            }] => es.iter().collect(),
            _ => by.iter().collect(),
        };
        let mut slots = Vec::new();
        let mut new_scope = Vec::new();
        for e in by {
            let ExprKind::Var(v) = &e.kind else {
                return Err(e.span.error("`group_by` groups by variables only"));
            };
            let Some(i) = scope.iter().rposition(|(n, _)| n == v) else {
                return Err(e.span.error(format!("unbound variable `{v}`")));
            };
            if slots.contains(&i) {
                return Err(e
                    .span
                    .error(format!("variable `{v}` appears twice in `group_by`")));
            }
            slots.push(i);
            new_scope.push(scope[i].clone());
        }
        let (ie, vt) = self.expr(value, scope, None)?;
        let kt = match new_scope.len() {
            1 => new_scope[0].1.clone(),
            _ => Type::Tuple(new_scope.iter().map(|(_, t)| t.clone()).collect()),
        };
        new_scope.push((g.clone(), Type::Group(Box::new(kt), Box::new(vt))));
        items.push(ir::BodyItem::GroupBy {
            by: slots,
            value: ie,
        });
        *scope = new_scope;
        Ok(())
    }
}
