//! Constructors and patterns: resolving `C{..}` against types, and lowering patterns of
//! `match` arms, `var` bindings and rule atoms to [`crate::ir::Pattern`]s.

use crate::ast::{Args, Expr, ExprKind, Span};
use crate::check::Ctx;
use crate::error::CompileError;
use crate::expr::{lookup_var, CtorInfo, EqFilters, PatMode, Scope};
use crate::ir::{self, Pattern, UnOp};
use crate::types::Type;

type R<T> = Result<T, CompileError>;

impl Ctx {
    /// Resolve constructor `name` given an expected type: (type, ctor index, field list).
    pub fn ctor_info(&self, span: Span, name: &str, want: Option<&Type>) -> R<CtorInfo> {
        let last = name.rsplit("::").next().unwrap_or(name);
        if last == "None" || last == "Some" {
            let inner = match want {
                Some(Type::Option(t)) => Some((**t).clone()),
                Some(t) => {
                    return Err(span.error(format!(
                        "expected {}, found constructor `{last}`",
                        self.show(t)
                    )))
                }
                None => None,
            };
            let fields = if last == "None" {
                vec![]
            } else {
                vec![("x".to_string(), inner.clone().unwrap_or(Type::Bool))]
            };
            return Ok((
                inner.map(|t| Type::Option(Box::new(t))),
                u32::from(last == "Some"),
                fields,
            ));
        }
        let Some((tid, ci)) = self.ctor(name) else {
            return Err(span.error(format!("unknown constructor `{name}`")));
        };
        let ty = Type::Named(tid);
        if let Some(w) = want {
            if *w != ty {
                return Err(span.error(format!(
                    "expected {}, found constructor `{name}` of type {}",
                    self.show(w),
                    self.types[tid].name
                )));
            }
        }
        Ok((
            Some(ty),
            ci,
            self.types[tid].ctors[ci as usize].fields.clone(),
        ))
    }

    /// Match constructor arguments to fields: one entry per field (`None` if omitted,
    /// allowed only when `partial`).
    pub fn ctor_args<'e>(
        &self,
        span: Span,
        name: &str,
        fields: &[(String, Type)],
        args: &'e Args,
        partial: bool,
    ) -> R<Vec<Option<&'e Expr>>> {
        match args {
            Args::Pos(es) => {
                if es.len() != fields.len() && !(es.is_empty() && partial) {
                    let n = fields.len();
                    return Err(span.error(format!(
                        "constructor `{name}` expects {n} field{}, found {}",
                        if n == 1 { "" } else { "s" },
                        es.len()
                    )));
                }
                Ok(fields.iter().enumerate().map(|(i, _)| es.get(i)).collect())
            }
            Args::Named(named) => {
                let mut out = vec![None; fields.len()];
                for (f, s, e) in named {
                    let Some(i) = fields.iter().position(|(g, _)| g == f) else {
                        return Err(s.error(format!("constructor `{name}` has no field `{f}`")));
                    };
                    if out[i].is_some() {
                        return Err(s.error(format!("field `{f}` given twice")));
                    }
                    out[i] = Some(e);
                }
                if !partial {
                    if let Some(i) = out.iter().position(Option::is_none) {
                        return Err(span.error(format!(
                            "missing field `{}` in constructor `{name}`",
                            fields[i].0
                        )));
                    }
                }
                Ok(out)
            }
        }
    }

    pub(crate) fn ctor_expr(
        &self,
        span: Span,
        name: &str,
        args: &Args,
        scope: &mut Scope,
        want: Option<&Type>,
    ) -> R<(ir::Expr, Type)> {
        let (ty, ctor, fields) = self.ctor_info(span, name, want)?;
        if ty.is_none() && name.ends_with("Some") {
            // Some{x} without context: type from x.
            let es = self.ctor_args(span, name, &fields, args, false)?;
            let (ix, t) = self.expr(es[0].expect("one field"), scope, None)?;
            return Ok((
                ir::Expr::Struct {
                    ctor: 1,
                    fields: vec![ix],
                },
                Type::Option(Box::new(t)),
            ));
        }
        let Some(ty) = ty else {
            return Err(span.error(
                "cannot infer the type of `None`; add a type annotation `None: Option<T>`",
            ));
        };
        let es = self.ctor_args(span, name, &fields, args, false)?;
        let mut out = Vec::new();
        for (x, (_, t)) in es.iter().zip(&fields) {
            out.push(self.expr(x.expect("complete"), scope, Some(t))?.0);
        }
        Ok((ir::Expr::Struct { ctor, fields: out }, ty))
    }

    /// Lower a pattern matched against type `ty`, pushing its binds onto `scope`.
    pub fn pattern(
        &self,
        p: &Expr,
        ty: &Type,
        scope: &mut Scope,
        mode: PatMode,
        filters: &mut EqFilters,
    ) -> R<Pattern> {
        let span = p.span;
        match &p.kind {
            ExprKind::Wild => Ok(Pattern::Wild),
            ExprKind::Var(name) => match mode {
                PatMode::Fresh => {
                    scope.push((name.clone(), ty.clone()));
                    Ok(Pattern::Bind)
                }
                PatMode::FreshUnique => {
                    if lookup_var(scope, name).is_some() {
                        return Err(span.error(format!("variable `{name}` is already defined")));
                    }
                    scope.push((name.clone(), ty.clone()));
                    Ok(Pattern::Bind)
                }
                PatMode::Atom { base } => match lookup_var(scope, name) {
                    Some(i) if scope[i].1 != *ty => Err(self.mismatch(span, ty, &scope[i].1)),
                    Some(i) if i < base => Ok(Pattern::Eq(Box::new(ir::Expr::Var(i)))),
                    Some(i) => {
                        filters.push((scope.len(), i, ty.clone()));
                        scope.push((format!("#dup{}", scope.len()), ty.clone()));
                        Ok(Pattern::Bind)
                    }
                    None => {
                        scope.push((name.clone(), ty.clone()));
                        Ok(Pattern::Bind)
                    }
                },
            },
            ExprKind::Tuple(ps) => {
                let Type::Tuple(ts) = ty else {
                    return Err(span.error(format!("expected {}, found a tuple", self.show(ty))));
                };
                if ts.len() != ps.len() {
                    return Err(span.error(format!(
                        "expected {}, found a tuple of {} elements",
                        self.show(ty),
                        ps.len()
                    )));
                }
                let out = ps
                    .iter()
                    .zip(ts)
                    .map(|(p, t)| self.pattern(p, t, scope, mode, filters))
                    .collect::<R<_>>()?;
                Ok(Pattern::Tuple(out))
            }
            ExprKind::Ctor(name, args) => {
                let (_, ctor, fields) = self.ctor_info(span, name, Some(ty))?;
                let es = self.ctor_args(span, name, &fields, args, true)?;
                let mut out = Vec::new();
                for (x, (_, t)) in es.iter().zip(&fields) {
                    out.push(match x {
                        Some(x) => self.pattern(x, t, scope, mode, filters)?,
                        None => Pattern::Wild,
                    });
                }
                Ok(Pattern::Struct { ctor, fields: out })
            }
            ExprKind::Int(..)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::Unary(UnOp::Neg, _) => {
                let (e, _) = self.expr(p, &mut Scope::new(), Some(ty))?;
                Ok(Pattern::Eq(Box::new(e)))
            }
            _ => match mode {
                PatMode::Atom { base } => {
                    let mut outer: Scope = scope[..base].to_vec();
                    let mut inner_bound = None;
                    p.vars(&mut |v, s| {
                        if lookup_var(&outer, v).is_none()
                            && lookup_var(scope, v).is_some()
                            && inner_bound.is_none()
                        {
                            inner_bound = Some((v.to_string(), s));
                        }
                    });
                    if let Some((v, s)) = inner_bound {
                        return Err(s.error(format!("variable `{v}` is bound in this same atom; compare it in a separate condition")));
                    }
                    let (e, _) = self.expr(p, &mut outer, Some(ty))?;
                    Ok(Pattern::Eq(Box::new(e)))
                }
                _ => {
                    Err(span
                        .error("expected a pattern (variable, `_`, literal, tuple or constructor)"))
                }
            },
        }
    }
}

/// True if `pats` (the arms of a `match` on a value of type `ty`) cover every value.
/// Integers and strings are covered only by an irrefutable arm; structs, unions, tuples,
/// `Option` and `bool` by their constructors (usefulness matrix, as in ML compilers).
pub fn exhaustive(types: &[crate::types::TypeDef], pats: &[Pattern], ty: &Type) -> bool {
    let rows: Vec<Vec<&Pattern>> = pats.iter().map(|p| vec![p]).collect();
    // The check is exponential on adversarial inputs: past a budget, give the benefit of
    // the doubt (an uncovered value is then a runtime error, not a crash).
    let mut budget = 100_000u32;
    covers(types, &rows, std::slice::from_ref(ty), &mut budget)
}

fn covers(
    defs: &[crate::types::TypeDef],
    rows: &[Vec<&Pattern>],
    tys: &[Type],
    budget: &mut u32,
) -> bool {
    if *budget == 0 {
        return true;
    }
    *budget -= 1;
    let Some((t0, rest_tys)) = tys.split_first() else {
        return !rows.is_empty();
    };
    // Constructors of t0: (match test, field types).
    let ctors: Option<Vec<(Ctor, Vec<Type>)>> = match t0 {
        Type::Bool => Some(vec![
            (Ctor::Bool(false), vec![]),
            (Ctor::Bool(true), vec![]),
        ]),
        Type::Option(a) => Some(vec![
            (Ctor::Index(0), vec![]),
            (Ctor::Index(1), vec![(**a).clone()]),
        ]),
        Type::Named(id) => defs.get(*id).map(|d| {
            d.ctors
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    (
                        Ctor::Index(i as u32),
                        c.fields.iter().map(|f| f.1.clone()).collect(),
                    )
                })
                .collect()
        }),
        Type::Tuple(ts) => Some(vec![(Ctor::Tuple, ts.clone())]),
        _ => None,
    };
    let irrefutable = |p: &Pattern| matches!(p, Pattern::Wild | Pattern::Bind);
    let Some(ctors) = ctors else {
        let default: Vec<Vec<&Pattern>> = rows
            .iter()
            .filter(|r| irrefutable(r[0]))
            .map(|r| r[1..].to_vec())
            .collect();
        return covers(defs, &default, rest_tys, budget);
    };
    ctors.iter().all(|(c, fields)| {
        let wild = Pattern::Wild;
        let mut spec: Vec<Vec<&Pattern>> = Vec::new();
        for r in rows {
            let head: Option<Vec<&Pattern>> = match (r[0], c) {
                (p, _) if irrefutable(p) => Some(vec![&wild; fields.len()]),
                (Pattern::Struct { ctor, fields: fs }, Ctor::Index(i)) if ctor == i => {
                    Some(fs.iter().collect())
                }
                (Pattern::Tuple(ps), Ctor::Tuple) => Some(ps.iter().collect()),
                (Pattern::Eq(e), Ctor::Bool(b))
                    if **e == ir::Expr::Const(crate::value::Value::Bool(*b)) =>
                {
                    Some(vec![])
                }
                _ => None,
            };
            if let Some(mut h) = head {
                h.extend_from_slice(&r[1..]);
                spec.push(h);
            }
        }
        let mut tys = fields.clone();
        tys.extend_from_slice(rest_tys);
        covers(defs, &spec, &tys, budget)
    })
}

/// A constructor in the exhaustiveness check.
enum Ctor {
    Bool(bool),
    Index(u32),
    Tuple,
}
