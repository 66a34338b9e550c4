//! Expression type checking and lowering: [`crate::ast::Expr`] → typed [`crate::ir::Expr`].
//!
//! Checking is bidirectional: an optional expected type flows down (it is how integer
//! literals, `None` and `[]` get their types) and the found type flows up. A scope is the
//! environment of [`crate::ir`]: `Var(i)` is `scope[i]`; lookups take the innermost name.

use num_bigint::BigInt;

use crate::ast::{Args, Expr, ExprKind, InterpPart, Span};
use crate::builtins;
use crate::check::Ctx;
use crate::error::CompileError;
use crate::ir::{self, BinOp, Builtin, Callee, Pattern, UnOp};
use crate::types::Type;
use crate::value::Value;

type R<T> = Result<T, CompileError>;
/// A lowering scope: names and types of the environment slots.
pub type Scope = Vec<(String, Type)>;

/// How variables in a pattern are treated.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PatMode {
    /// `match` arms and block `var`: every variable is fresh (may shadow).
    Fresh,
    /// Rule `var`: every variable is fresh and must not be bound already.
    FreshUnique,
    /// Rule atom: bound variables (below `base`) become `Eq`, others bind.
    Atom {
        /// Length of the incoming row.
        base: usize,
    },
}

/// A resolved constructor: its type (unknown for `None`/`Some` without context), index
/// and fields.
pub type CtorInfo = (Option<Type>, u32, Vec<(String, Type)>);

/// Extra filters an atom needs: slot `a` must equal slot `b`.
pub type EqFilters = Vec<(usize, usize, Type)>;

/// True if the type of `e` can only come from context (bare integer literal, `None`, `[]`).
pub fn needs_ctx(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_, None) => true,
        ExprKind::VecLit(v) => v.is_empty() || v.iter().all(needs_ctx),
        ExprKind::Ctor(n, Args::Pos(a)) if n == "None" && a.is_empty() => true,
        ExprKind::Ctor(n, Args::Pos(a)) if n == "Some" && a.len() == 1 => needs_ctx(&a[0]),
        ExprKind::Unary(_, a) => needs_ctx(a),
        ExprKind::Binary(op, a, b)
            if !is_cmp(*op) && !matches!(op, BinOp::And | BinOp::Or | BinOp::Implies) =>
        {
            needs_ctx(a) && needs_ctx(b)
        }
        ExprKind::If(_, a, b) => needs_ctx(a) && needs_ctx(b),
        ExprKind::Call(f, a) => {
            a.is_empty() && matches!(f.as_str(), "vec_empty" | "set_empty" | "map_empty")
        }
        ExprKind::Method(r, f, _) => returns_first(f) && needs_ctx(r),
        ExprKind::Tuple(es) => !es.is_empty() && es.iter().any(needs_ctx),
        _ => false,
    }
}

fn is_cmp(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq | BinOp::Neq | BinOp::Lt | BinOp::Lte | BinOp::Gt | BinOp::Gte
    )
}

fn is_num(t: &Type) -> bool {
    matches!(t, Type::Bit(_) | Type::Signed(_) | Type::BigInt)
}

fn op_str(op: BinOp) -> &'static str {
    match op {
        BinOp::Eq => "==",
        BinOp::Neq => "!=",
        BinOp::Lt => "<",
        BinOp::Lte => "<=",
        BinOp::Gt => ">",
        BinOp::Gte => ">=",
        BinOp::And => "and",
        BinOp::Or => "or",
        BinOp::Implies => "=>",
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Mod => "%",
        BinOp::BitAnd => "&",
        BinOp::BitOr => "|",
        BinOp::BitXor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Concat => "++",
    }
}

/// Convert an integer to a value of numeric type `t`, if it fits.
pub fn int_value(n: &BigInt, t: &Type) -> Option<Value> {
    match t {
        Type::Bit(w) => {
            let v = u128::try_from(n).ok()?;
            (*w == 128 || v >> w == 0).then_some(Value::bit(v))
        }
        Type::Signed(w) => {
            let v = i128::try_from(n).ok()?;
            let ok = *w == 128 || (v >= -(1i128 << (w - 1)) && v < (1i128 << (w - 1)));
            ok.then_some(Value::signed(v))
        }
        Type::BigInt => Some(Value::BigInt(std::sync::Arc::new(n.clone()))),
        _ => None,
    }
}

pub(crate) fn lookup_var(scope: &Scope, name: &str) -> Option<usize> {
    scope.iter().rposition(|(n, _)| n == name)
}

impl Ctx {
    pub(crate) fn mismatch(&self, span: Span, want: &Type, found: &Type) -> CompileError {
        span.error(format!(
            "expected {}, found {}",
            self.show(want),
            self.show(found)
        ))
    }

    fn expect_ty(&self, span: Span, found: Type, want: Option<&Type>) -> R<Type> {
        match want {
            Some(w) if *w != found => Err(self.mismatch(span, w, &found)),
            _ => Ok(found),
        }
    }

    /// Check `e` in `scope` against the expected type `want`; return IR and type.
    #[allow(
        clippy::many_single_char_names,
        reason = "short names mirror the grammar"
    )]
    pub fn expr(&self, e: &Expr, scope: &mut Scope, want: Option<&Type>) -> R<(ir::Expr, Type)> {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(n, width) => {
                let ty = match (width, want) {
                    (Some((true, w)), _) => Type::Signed(*w),
                    (Some((false, w)), _) => Type::Bit(*w),
                    (None, Some(t)) if is_num(t) => t.clone(),
                    (None, Some(t)) => {
                        return Err(span.error(format!(
                            "expected {}, found an integer literal",
                            self.show(t)
                        )))
                    }
                    (None, None) => Type::BigInt,
                };
                let ty = self.expect_ty(span, ty, want)?;
                let Some(v) = int_value(n, &ty) else {
                    return Err(span.error(format!(
                        "integer literal {n} does not fit in {}",
                        self.show(&ty)
                    )));
                };
                Ok((ir::Expr::Const(v), ty))
            }
            ExprKind::Bool(b) => Ok((
                ir::Expr::Const(Value::Bool(*b)),
                self.expect_ty(span, Type::Bool, want)?,
            )),
            ExprKind::Str(s) => Ok((
                ir::Expr::Const(Value::str(s)),
                self.expect_ty(span, Type::String, want)?,
            )),
            ExprKind::Interp(parts) => {
                self.expect_ty(span, Type::String, want)?;
                let mut acc: Option<ir::Expr> = None;
                for p in parts {
                    let piece = match p {
                        InterpPart::Lit(s) => ir::Expr::Const(Value::str(s)),
                        InterpPart::Expr(x) => {
                            let (ie, t) = self.expr(x, scope, None)?;
                            if t == Type::String {
                                ie
                            } else {
                                ir::Expr::Call {
                                    func: Callee::Builtin(Builtin::ToString(t)),
                                    args: vec![ie],
                                }
                            }
                        }
                    };
                    acc = Some(match acc {
                        None => piece,
                        Some(a) => ir::Expr::Binary {
                            op: BinOp::Concat,
                            ty: Type::String,
                            lhs: Box::new(a),
                            rhs: Box::new(piece),
                        },
                    });
                }
                Ok((acc.unwrap_or(ir::Expr::Const(Value::str(""))), Type::String))
            }
            ExprKind::Var(name) => {
                if let Some((row, _)) = &*self.pk_row.borrow() {
                    if row == name {
                        return Err(span.error(format!(
                            "use fields of `{name}` in a primary key, e.g. `{name}.field`"
                        )));
                    }
                }
                let Some(i) = lookup_var(scope, name) else {
                    let note = *self.unbound_note.borrow();
                    return Err(span.error(format!("unbound variable `{name}`{note}")));
                };
                let t = scope[i].1.clone();
                Ok((ir::Expr::Var(i), self.expect_ty(span, t, want)?))
            }
            ExprKind::Wild => Err(span.error("`_` is only allowed in patterns")),
            ExprKind::Tuple(es) => {
                let wants: Vec<Option<&Type>> = match want {
                    Some(Type::Tuple(ts)) if ts.len() == es.len() => ts.iter().map(Some).collect(),
                    Some(t) => {
                        return Err(span.error(format!(
                            "expected {}, found a tuple of {} elements",
                            self.show(t),
                            es.len()
                        )))
                    }
                    None => vec![None; es.len()],
                };
                let mut out = Vec::new();
                let mut tys = Vec::new();
                for (x, w) in es.iter().zip(wants) {
                    let (ie, t) = self.expr(x, scope, w)?;
                    out.push(ie);
                    tys.push(t);
                }
                Ok((ir::Expr::Tuple(out), Type::Tuple(tys)))
            }
            ExprKind::VecLit(es) => {
                let mut elem = match want {
                    Some(Type::Vec(t)) => Some((**t).clone()),
                    Some(t) => {
                        return Err(span.error(format!("expected {}, found a vector", self.show(t))))
                    }
                    None => None,
                };
                if elem.is_none() {
                    if let Some(x) = es.iter().find(|x| !needs_ctx(x)).or(es.first()) {
                        elem = Some(self.expr(x, &mut scope.clone(), None)?.1);
                    }
                }
                let Some(elem) = elem else {
                    return Err(span.error("cannot infer the type of an empty vector; add a type annotation `[]: Vec<T>`"));
                };
                let out = es
                    .iter()
                    .map(|x| self.expr(x, scope, Some(&elem)).map(|r| r.0))
                    .collect::<R<_>>()?;
                Ok((ir::Expr::VecLit(out), Type::Vec(Box::new(elem))))
            }
            ExprKind::Ctor(name, args) => self.ctor_expr(span, name, args, scope, want),
            ExprKind::Call(name, args) => {
                if name == "FlatMap" {
                    return Err(span.error(
                        "`FlatMap` is only allowed as `var x = FlatMap(e)` in a rule body",
                    ));
                }
                let args: Vec<&Expr> = args.iter().collect();
                self.call(span, name, &args, scope, want)
            }
            ExprKind::Method(recv, name, args) => {
                if name == "group_by" {
                    return Err(span.error(
                        "`group_by` is only allowed as `var g = e.group_by(...)` in a rule body",
                    ));
                }
                let mut all: Vec<&Expr> = vec![recv];
                all.extend(args.iter());
                self.call(span, name, &all, scope, want)
            }
            ExprKind::Field(arg, f) => {
                if let ExprKind::Var(v) = &arg.kind {
                    if let Some((row, cols)) = &*self.pk_row.borrow() {
                        if row == v {
                            let Some(i) = cols.iter().position(|(c, _)| c == f) else {
                                return Err(span.error(format!("row `{v}` has no column `{f}`")));
                            };
                            return Ok((
                                ir::Expr::Var(i),
                                self.expect_ty(span, cols[i].1.clone(), want)?,
                            ));
                        }
                    }
                }
                let (ie, t) = self.expr(arg, scope, None)?;
                let Type::Named(id) = &t else {
                    return Err(span.error(format!("type {} has no field `{f}`", self.show(&t))));
                };
                let def = &self.types[*id];
                let indices: Vec<Option<usize>> = def
                    .ctors
                    .iter()
                    .map(|c| c.fields.iter().position(|(n, _)| n == f))
                    .collect();
                let Some((ci, Some(fi))) = indices.iter().enumerate().find(|(_, i)| i.is_some())
                else {
                    return Err(span.error(format!("type {} has no field `{f}`", def.name)));
                };
                let ft = def.ctors[ci].fields[*fi].1.clone();
                Ok((
                    ir::Expr::Field {
                        arg: Box::new(ie),
                        indices,
                    },
                    self.expect_ty(span, ft, want)?,
                ))
            }
            ExprKind::TupleIndex(arg, i) => {
                let (ie, t) = self.expr(arg, scope, None)?;
                match &t {
                    Type::Tuple(ts) if *i < ts.len() => {
                        let et = ts[*i].clone();
                        Ok((
                            ir::Expr::TupleIndex {
                                arg: Box::new(ie),
                                index: *i,
                            },
                            self.expect_ty(span, et, want)?,
                        ))
                    }
                    _ => Err(span.error(format!("type {} has no element {i}", self.show(&t)))),
                }
            }
            ExprKind::Unary(op, arg) => self.unary(span, *op, arg, scope, want),
            ExprKind::Binary(op, a, b) => self.binary(span, *op, a, b, scope, want),
            ExprKind::Cast(arg, te) => {
                let to = self.resolve(te)?;
                let (ie, from) = self.expr(arg, scope, None)?;
                if !is_num(&from) || !is_num(&to) {
                    return Err(span.error(format!(
                        "cannot cast {} to {}",
                        self.show(&from),
                        self.show(&to)
                    )));
                }
                let ty = self.expect_ty(span, to.clone(), want)?;
                if from == to {
                    return Ok((ie, ty));
                }
                Ok((
                    ir::Expr::Cast {
                        from,
                        to,
                        arg: Box::new(ie),
                    },
                    ty,
                ))
            }
            ExprKind::Slice(arg, hi, lo) => {
                let (ie, t) = self.expr(arg, scope, None)?;
                let Type::Bit(w) = t else {
                    return Err(span.error(format!("cannot take a bit slice of {}", self.show(&t))));
                };
                if hi < lo || *hi >= w {
                    return Err(span.error(format!(
                        "bit slice [{hi}:{lo}] is out of range for {}",
                        self.show(&t)
                    )));
                }
                let mut out = ie;
                if *lo > 0 {
                    let rhs = Box::new(ir::Expr::Const(Value::bit(u128::from(*lo))));
                    out = ir::Expr::Binary {
                        op: BinOp::Shr,
                        ty: t.clone(),
                        lhs: Box::new(out),
                        rhs,
                    };
                }
                let to = Type::Bit(hi - lo + 1);
                if to != t {
                    out = ir::Expr::Cast {
                        from: t,
                        to: to.clone(),
                        arg: Box::new(out),
                    };
                }
                Ok((out, self.expect_ty(span, to, want)?))
            }
            ExprKind::Ascribe(arg, te) => {
                let t = self.resolve(te)?;
                let (ie, t) = self.expr(arg, scope, Some(&t))?;
                Ok((ie, self.expect_ty(span, t, want)?))
            }
            ExprKind::If(c, a, b) => {
                let (ic, _) = self.expr(c, scope, Some(&Type::Bool))?;
                let (ia, ib, t) = if want.is_none() && needs_ctx(a) && !needs_ctx(b) {
                    let (ib, t) = self.expr(b, scope, None)?;
                    let (ia, _) = self.expr(a, scope, Some(&t))?;
                    (ia, ib, t)
                } else {
                    let (ia, t) = self.expr(a, scope, want)?;
                    let (ib, _) = self.expr(b, scope, Some(&t))?;
                    (ia, ib, t)
                };
                Ok((
                    ir::Expr::If {
                        cond: Box::new(ic),
                        then: Box::new(ia),
                        els: Box::new(ib),
                    },
                    t,
                ))
            }
            ExprKind::Match(scrut, arms) => {
                let (is, st) = self.expr(scrut, scope, None)?;
                let mut want = want.cloned();
                let mut out = Vec::new();
                for (p, v) in arms {
                    let len = scope.len();
                    let mut filters = Vec::new();
                    let pat = self.pattern(p, &st, scope, PatMode::Fresh, &mut filters);
                    let r = pat.and_then(|pat| Ok((pat, self.expr(v, scope, want.as_ref())?)));
                    scope.truncate(len);
                    let (pat, (iv, t)) = r?;
                    want = Some(t);
                    out.push((pat, iv));
                }
                let Some(t) = want else {
                    return Err(span.error("a `match` needs at least one arm"));
                };
                let pats: Vec<Pattern> = out.iter().map(|(p, _)| p.clone()).collect();
                if !crate::pattern::exhaustive(&self.types, &pats, &st) {
                    return Err(span.error(format!(
                        "this `match` on {} does not cover every value; add a `_ -> ...` arm",
                        self.show(&st)
                    )));
                }
                Ok((
                    ir::Expr::Match {
                        arg: Box::new(is),
                        arms: out,
                    },
                    t,
                ))
            }
            ExprKind::Block(stmts, result) => self.block(stmts, result, scope, want),
        }
    }

    fn block(
        &self,
        stmts: &[(Expr, Expr)],
        result: &Expr,
        scope: &mut Scope,
        want: Option<&Type>,
    ) -> R<(ir::Expr, Type)> {
        let Some(((p, v), rest)) = stmts.split_first() else {
            return self.expr(result, scope, want);
        };
        let hint = match &p.kind {
            ExprKind::Var(name) if needs_ctx(v) => {
                let mut later: Vec<&Expr> = rest.iter().flat_map(|(a, b)| [a, b]).collect();
                later.push(result);
                self.literal_hint(name, &later, scope)
            }
            _ => None,
        };
        let (iv, vt) = self.expr(v, scope, hint.as_ref())?;
        let len = scope.len();
        let r = self
            .pattern(p, &vt, scope, PatMode::Fresh, &mut Vec::new())
            .and_then(|pat| Ok((pat, self.block(rest, result, scope, want)?)));
        scope.truncate(len);
        let (pattern, (body, t)) = r?;
        Ok((
            ir::Expr::Let {
                pattern,
                value: Box::new(iv),
                body: Box::new(body),
            },
            t,
        ))
    }

    fn unary(
        &self,
        span: Span,
        op: UnOp,
        arg: &Expr,
        scope: &mut Scope,
        want: Option<&Type>,
    ) -> R<(ir::Expr, Type)> {
        if op == UnOp::Neg {
            if let ExprKind::Int(n, w) = &arg.kind {
                let neg = Expr {
                    kind: ExprKind::Int(-n, *w),
                    span,
                };
                if !matches!(want, Some(Type::Bit(_))) && !matches!(w, Some((false, _))) {
                    return self.expr(&neg, scope, want);
                }
            }
        }
        let (ia, t) = match op {
            UnOp::Not => self.expr(arg, scope, Some(&Type::Bool))?,
            _ => self.expr(arg, scope, want)?,
        };
        let ok = match op {
            UnOp::Not => true,
            UnOp::Neg => is_num(&t),
            UnOp::BitNot => matches!(t, Type::Bit(_) | Type::Signed(_)),
        };
        if !ok {
            let s = if op == UnOp::Neg { "-" } else { "~" };
            return Err(span.error(format!(
                "operator `{s}` cannot be applied to {}",
                self.show(&t)
            )));
        }
        let t = self.expect_ty(span, t, want)?;
        Ok((
            ir::Expr::Unary {
                op,
                ty: t.clone(),
                arg: Box::new(ia),
            },
            t,
        ))
    }

    #[allow(
        clippy::many_single_char_names,
        reason = "short names mirror the grammar"
    )]
    fn binary(
        &self,
        span: Span,
        op: BinOp,
        a: &Expr,
        b: &Expr,
        scope: &mut Scope,
        want: Option<&Type>,
    ) -> R<(ir::Expr, Type)> {
        let mk = |ty: Type, l: ir::Expr, r: ir::Expr| ir::Expr::Binary {
            op,
            ty,
            lhs: Box::new(l),
            rhs: Box::new(r),
        };
        match op {
            BinOp::And | BinOp::Or | BinOp::Implies => {
                let (l, _) = self.expr(a, scope, Some(&Type::Bool))?;
                let (r, _) = self.expr(b, scope, Some(&Type::Bool))?;
                Ok((
                    mk(Type::Bool, l, r),
                    self.expect_ty(span, Type::Bool, want)?,
                ))
            }
            BinOp::Concat => {
                let (l, _) = self.expr(a, scope, Some(&Type::String))?;
                let (r, _) = self.expr(b, scope, Some(&Type::String))?;
                Ok((
                    mk(Type::String, l, r),
                    self.expect_ty(span, Type::String, want)?,
                ))
            }
            BinOp::Shl | BinOp::Shr => {
                let (l, t) = self.expr(a, scope, want)?;
                if !matches!(t, Type::Bit(_) | Type::Signed(_) | Type::BigInt) {
                    return Err(span.error(format!(
                        "operator `{}` cannot be applied to {}",
                        op_str(op),
                        self.show(&t)
                    )));
                }
                let hint = needs_ctx(b).then_some(Type::Bit(32));
                let (r, rt) = self.expr(b, scope, hint.as_ref())?;
                if !matches!(rt, Type::Bit(_)) {
                    return Err(b.span.error(format!(
                        "expected a shift amount of type bit<N>, found {}",
                        self.show(&rt)
                    )));
                }
                Ok((mk(t.clone(), l, r), t))
            }
            _ => {
                let cmp = is_cmp(op);
                let hint = if cmp { None } else { want };
                let (l, r, t) = if hint.is_none() && needs_ctx(a) && !needs_ctx(b) {
                    let (r, t) = self.expr(b, scope, None)?;
                    let (l, _) = self.expr(a, scope, Some(&t))?;
                    (l, r, t)
                } else {
                    let (l, t) = self.expr(a, scope, hint)?;
                    let (r, _) = self.expr(b, scope, Some(&t))?;
                    (l, r, t)
                };
                let ok = match op {
                    _ if cmp => true,
                    BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor => {
                        matches!(t, Type::Bit(_) | Type::Signed(_))
                    }
                    _ => is_num(&t),
                };
                if !ok {
                    return Err(span.error(format!(
                        "operator `{}` cannot be applied to {}",
                        op_str(op),
                        self.show(&t)
                    )));
                }
                let rt = if cmp { Type::Bool } else { t.clone() };
                Ok((mk(t, l, r), self.expect_ty(span, rt, want)?))
            }
        }
    }

    fn call(
        &self,
        span: Span,
        name: &str,
        args: &[&Expr],
        scope: &mut Scope,
        want: Option<&Type>,
    ) -> R<(ir::Expr, Type)> {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if let Some(fid) = self.function(name) {
            let sig = &self.funcs[fid];
            if sig.params.len() != args.len() {
                let n = sig.params.len();
                return Err(span.error(format!(
                    "function `{name}` expects {n} argument{}, found {}",
                    plural(n),
                    args.len()
                )));
            }
            let mut out = Vec::new();
            for (x, (_, t)) in args.iter().zip(&sig.params) {
                out.push(self.expr(x, scope, Some(t))?.0);
            }
            let ret = self.expect_ty(span, sig.ret.clone(), want)?;
            return Ok((
                ir::Expr::Call {
                    func: Callee::User(fid),
                    args: out,
                },
                ret,
            ));
        }
        if let Some(r) = empty_collection(span, name, args, want) {
            return r;
        }
        let Some(first) = builtins::first_param(name) else {
            return Err(span.error(format!("unknown function `{name}`")));
        };
        let Some(a0) = args.first() else {
            return Err(span.error(format!("function `{name}` needs arguments")));
        };
        // min/max with a literal first argument: type it from the second.
        let (i0, t0) = if first.is_none()
            && args.len() == 2
            && needs_ctx(a0)
            && (name == "min" || name == "max")
        {
            let t = self.expr(args[1], &mut scope.clone(), None)?.1;
            self.expr(a0, scope, Some(&t))?
        } else if first.is_none() && needs_ctx(a0) && want.is_some() && returns_first(name) {
            // `map_empty().insert(k, v)`: the result type is the first argument's.
            self.expr(a0, scope, want)?
        } else {
            self.expr(a0, scope, first.as_ref())?
        };
        let Some((bi, params, ret)) = builtins::resolve(name, &t0, args.len()) else {
            return Err(a0.span.error(format!(
                "function `{name}` cannot be applied to {}",
                self.show(&t0)
            )));
        };
        if params.len() != args.len() {
            let n = params.len();
            return Err(span.error(format!(
                "function `{name}` expects {n} argument{}, found {}",
                plural(n),
                args.len()
            )));
        }
        let mut out = vec![i0];
        for (x, t) in args.iter().zip(&params).skip(1) {
            out.push(self.expr(x, scope, Some(t))?.0);
        }
        let ret = self.expect_ty(span, ret, want)?;
        Ok((
            ir::Expr::Call {
                func: Callee::Builtin(bi),
                args: out,
            },
            ret,
        ))
    }
}

/// DDlog's `vec_empty()`, `set_empty()`, `map_empty()`: constants typed by context.
fn empty_collection(
    span: Span,
    name: &str,
    args: &[&Expr],
    want: Option<&Type>,
) -> Option<R<(ir::Expr, Type)>> {
    let (value, ok) = match (name, want) {
        ("vec_empty", Some(t @ Type::Vec(_))) => (Value::Vec(Vec::new().into()), Some(t)),
        ("set_empty", Some(t @ Type::Set(_))) => (Value::set_from(Vec::new()), Some(t)),
        ("map_empty", Some(t @ Type::Map(..))) => (Value::map_from(Vec::new()), Some(t)),
        ("vec_empty" | "set_empty" | "map_empty", _) => (Value::unit(), None),
        _ => return None,
    };
    if !args.is_empty() {
        return Some(Err(span.error(format!(
            "function `{name}` expects 0 arguments, found {}",
            args.len()
        ))));
    }
    Some(match ok {
        Some(t) => Ok((ir::Expr::Const(value), t.clone())),
        None => Err(span.error(format!(
            "cannot infer the type of `{name}()`; add a type annotation"
        ))),
    })
}

/// Built-ins whose result has the type of their first argument.
fn returns_first(name: &str) -> bool {
    matches!(
        name,
        "insert"
            | "push"
            | "append"
            | "union"
            | "intersection"
            | "difference"
            | "remove"
            | "sort"
            | "min"
            | "max"
    )
}
