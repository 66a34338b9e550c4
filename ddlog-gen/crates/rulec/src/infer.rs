//! Small inference helpers: typing `var x = <literal>` from later uses, as DDlog's
//! whole-rule inference would.

use crate::ast::{Expr, ExprKind, InterpPart};
use crate::check::Ctx;
use crate::expr::{needs_ctx, Scope};
use crate::ir::BinOp;
use crate::types::Type;

fn is_num(t: &Type) -> bool {
    matches!(t, Type::Bit(_) | Type::Signed(_) | Type::BigInt)
}

impl Ctx {
    /// For `var name = <literal>`: the type a later use gives `name`, found by typing the
    /// other operand of a binary operator or the parameter of a user function it is
    /// passed to (only operands typeable in `scope` count). Approximates DDlog's
    /// inference of literal types from later uses.
    pub fn literal_hint(&self, name: &str, later: &[&Expr], scope: &Scope) -> Option<Type> {
        let is_var = |e: &Expr| matches!(&e.kind, ExprKind::Var(v) if v == name);
        let mut found = None;
        for e in later {
            walk(e, &mut |x| {
                if found.is_some() {
                    return;
                }
                match &x.kind {
                    ExprKind::Binary(op, a, b)
                        if !matches!(
                            op,
                            BinOp::And | BinOp::Or | BinOp::Implies | BinOp::Shl | BinOp::Shr
                        ) =>
                    {
                        let other = if is_var(a) {
                            Some(b)
                        } else if is_var(b) {
                            Some(a)
                        } else {
                            None
                        };
                        if let Some(o) = other {
                            if !needs_ctx(o) {
                                found = self.expr(o, &mut scope.clone(), None).ok().map(|r| r.1);
                            }
                        }
                    }
                    ExprKind::Call(f, args) => {
                        if let (Some(i), Some(fid)) =
                            (args.iter().position(is_var), self.function(f))
                        {
                            found = self.funcs[fid].params.get(i).map(|p| p.1.clone());
                        }
                    }
                    _ => {}
                }
            });
        }
        found.filter(is_num)
    }
}

/// Visit `e` and its subexpressions (pre-order).
#[allow(
    clippy::many_single_char_names,
    reason = "short names mirror the grammar"
)]
fn walk(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Int(..)
        | ExprKind::Bool(_)
        | ExprKind::Str(_)
        | ExprKind::Var(_)
        | ExprKind::Wild => {}
        ExprKind::Interp(ps) => {
            for p in ps {
                if let InterpPart::Expr(x) = p {
                    walk(x, f);
                }
            }
        }
        ExprKind::Tuple(es) | ExprKind::VecLit(es) | ExprKind::Call(_, es) => {
            for x in es {
                walk(x, f);
            }
        }
        ExprKind::Ctor(_, a) => {
            for x in a.exprs() {
                walk(x, f);
            }
        }
        ExprKind::Method(r, _, es) => {
            walk(r, f);
            for x in es {
                walk(x, f);
            }
        }
        ExprKind::Field(x, _)
        | ExprKind::TupleIndex(x, _)
        | ExprKind::Unary(_, x)
        | ExprKind::Cast(x, _)
        | ExprKind::Slice(x, _, _)
        | ExprKind::Ascribe(x, _) => walk(x, f),
        ExprKind::Binary(_, a, b) => {
            walk(a, f);
            walk(b, f);
        }
        ExprKind::If(a, b, c) => {
            walk(a, f);
            walk(b, f);
            walk(c, f);
        }
        ExprKind::Match(x, arms) => {
            walk(x, f);
            for (_, v) in arms {
                walk(v, f);
            }
        }
        ExprKind::Block(stmts, x) => {
            for (_, v) in stmts {
                walk(v, f);
            }
            walk(x, f);
        }
    }
}
