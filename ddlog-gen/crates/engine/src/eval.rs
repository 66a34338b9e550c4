//! Evaluation of IR expressions and patterns against an environment stack.
//!
//! The environment is a `Vec<Value>`: [`Expr::Var`] reads a slot, patterns push their binds
//! and scoped constructs ([`Expr::Let`], [`Expr::Match`]) pop them again when done, so every
//! call leaves the environment as long as it found it. Failures are [`EvalError`]s, never
//! panics; the rule pipeline drops the binding row that caused one and counts it.

#![allow(
    clippy::many_single_char_names,
    reason = "arithmetic reads best as x op y"
)]

use std::fmt;
use std::sync::Arc;

use num_bigint::BigInt;
use rulec::ir::{BinOp, Callee, Expr, Pattern, Program, UnOp};
use rulec::types::Type;
use rulec::value::Value;

use crate::builtins;

/// A runtime error: the reason a binding row was dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EvalError {}

/// Result of an evaluation.
pub type EvalResult<T> = Result<T, EvalError>;

/// Build an [`EvalError`] from anything printable.
pub(crate) fn err<T>(msg: impl Into<String>) -> EvalResult<T> {
    Err(EvalError(msg.into()))
}

/// A type mismatch between the IR and a value: a compiler or engine bug, reported as a
/// runtime error rather than a panic.
pub(crate) fn mismatch<T>(what: &str, v: &Value) -> EvalResult<T> {
    err(format!("type mismatch: expected {what}, got {v:?}"))
}

/// Evaluate `e` against `env`. `env` has the same length afterwards.
pub fn eval(prog: &Program, e: &Expr, env: &mut Vec<Value>) -> EvalResult<Value> {
    match e {
        Expr::Const(v) => Ok(v.clone()),
        Expr::Var(i) => match env.get(*i) {
            Some(v) => Ok(v.clone()),
            None => err(format!("variable slot {i} out of range ({})", env.len())),
        },
        Expr::Unary { op, ty, arg } => {
            let v = eval(prog, arg, env)?;
            unary(*op, ty, &v)
        }
        Expr::Binary { op, ty, lhs, rhs } => match op {
            BinOp::And => {
                if as_bool(&eval(prog, lhs, env)?)? {
                    Ok(Value::Bool(as_bool(&eval(prog, rhs, env)?)?))
                } else {
                    Ok(Value::Bool(false))
                }
            }
            BinOp::Or => {
                if as_bool(&eval(prog, lhs, env)?)? {
                    Ok(Value::Bool(true))
                } else {
                    Ok(Value::Bool(as_bool(&eval(prog, rhs, env)?)?))
                }
            }
            BinOp::Implies => {
                if as_bool(&eval(prog, lhs, env)?)? {
                    Ok(Value::Bool(as_bool(&eval(prog, rhs, env)?)?))
                } else {
                    Ok(Value::Bool(true))
                }
            }
            BinOp::Concat => concat(prog, e, env),
            _ => {
                let a = eval(prog, lhs, env)?;
                let b = eval(prog, rhs, env)?;
                binary(*op, ty, &a, &b)
            }
        },
        Expr::Cast { from, to, arg } => {
            let v = eval(prog, arg, env)?;
            cast(from, to, &v)
        }
        Expr::Call { func, args } => {
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(prog, a, env)?);
            }
            match func {
                Callee::User(f) => {
                    let Some(func) = prog.functions.get(*f) else {
                        return err(format!("unknown function {f}"));
                    };
                    eval(prog, &func.body, &mut vals)
                }
                Callee::Builtin(b) => builtins::call(prog, b, &vals),
            }
        }
        Expr::Tuple(items) => Ok(Value::Tuple(eval_all(prog, items, env)?.into())),
        Expr::Struct { ctor, fields } => {
            Ok(Value::Struct(*ctor, eval_all(prog, fields, env)?.into()))
        }
        Expr::Field { arg, indices } => match eval(prog, arg, env)? {
            Value::Struct(c, fields) => match indices.get(c as usize).copied().flatten() {
                Some(i) if i < fields.len() => Ok(fields[i].clone()),
                _ => err(format!("constructor {c} has no such field")),
            },
            v => mismatch("struct", &v),
        },
        Expr::TupleIndex { arg, index } => match eval(prog, arg, env)? {
            Value::Tuple(t) if *index < t.len() => Ok(t[*index].clone()),
            v => mismatch("tuple", &v),
        },
        Expr::VecLit(items) => Ok(Value::Vec(eval_all(prog, items, env)?.into())),
        Expr::If { cond, then, els } => {
            if as_bool(&eval(prog, cond, env)?)? {
                eval(prog, then, env)
            } else {
                eval(prog, els, env)
            }
        }
        Expr::Match { arg, arms } => {
            let v = eval(prog, arg, env)?;
            let base = env.len();
            for (pat, body) in arms {
                let mut binds = Vec::new();
                if match_pattern(prog, pat, &v, env, &mut binds)? {
                    env.extend(binds);
                    let r = eval(prog, body, env);
                    env.truncate(base);
                    return r;
                }
            }
            err("no match arm matched")
        }
        Expr::Let {
            pattern,
            value,
            body,
        } => {
            let v = eval(prog, value, env)?;
            let base = env.len();
            let mut binds = Vec::new();
            if !match_pattern(prog, pattern, &v, env, &mut binds)? {
                return err("value does not match the pattern of `var`");
            }
            env.extend(binds);
            let r = eval(prog, body, env);
            env.truncate(base);
            r
        }
    }
}

/// Evaluate each expression in order.
pub fn eval_all(prog: &Program, es: &[Expr], env: &mut Vec<Value>) -> EvalResult<Vec<Value>> {
    let mut out = Vec::with_capacity(es.len());
    for e in es {
        out.push(eval(prog, e, env)?);
    }
    Ok(out)
}

/// Match `v` against `p`. [`Pattern::Eq`] expressions are evaluated against `env` (the
/// environment before the pattern); binds are appended to `binds`, not to `env`. On a
/// mismatch `binds` may hold partial binds; the caller discards them.
pub fn match_pattern(
    prog: &Program,
    p: &Pattern,
    v: &Value,
    env: &mut Vec<Value>,
    binds: &mut Vec<Value>,
) -> EvalResult<bool> {
    match p {
        Pattern::Wild => Ok(true),
        Pattern::Bind => {
            binds.push(v.clone());
            Ok(true)
        }
        Pattern::Eq(e) => Ok(eval(prog, e, env)? == *v),
        Pattern::Tuple(ps) => match v {
            Value::Tuple(items) if items.len() == ps.len() => {
                for (p, x) in ps.iter().zip(items.iter()) {
                    if !match_pattern(prog, p, x, env, binds)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            _ => mismatch("tuple", v),
        },
        Pattern::Struct { ctor, fields } => match v {
            Value::Struct(c, items) => {
                if c != ctor {
                    return Ok(false);
                }
                if items.len() != fields.len() {
                    return mismatch("struct of matching arity", v);
                }
                for (p, x) in fields.iter().zip(items.iter()) {
                    if !match_pattern(prog, p, x, env, binds)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            _ => mismatch("struct", v),
        },
    }
}

/// The boolean inside `v`.
pub(crate) fn as_bool(v: &Value) -> EvalResult<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        _ => mismatch("bool", v),
    }
}

/// Mask of the low `n` bits.
pub(crate) fn mask(n: u32) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

/// Wrap `v` to `n`-bit two's complement (sign-extend from bit `n - 1`).
pub(crate) fn wrap_signed(v: i128, n: u32) -> i128 {
    if n >= 128 || n == 0 {
        v
    } else {
        let shift = 128 - n;
        v.wrapping_shl(shift).wrapping_shr(shift)
    }
}

fn unary(op: UnOp, ty: &Type, v: &Value) -> EvalResult<Value> {
    match (op, ty, v) {
        (UnOp::Not, _, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (UnOp::Neg, Type::Bit(n), Value::Bit(a)) => {
            Ok(Value::bit(a.get().wrapping_neg() & mask(*n)))
        }
        (UnOp::Neg, Type::Signed(n), Value::Signed(a)) => {
            Ok(Value::signed(wrap_signed(a.get().wrapping_neg(), *n)))
        }
        (UnOp::Neg, _, Value::BigInt(a)) => Ok(Value::BigInt(Arc::new(-(**a).clone()))),
        (UnOp::BitNot, Type::Bit(n), Value::Bit(a)) => Ok(Value::bit(!a.get() & mask(*n))),
        (UnOp::BitNot, Type::Signed(n), Value::Signed(a)) => {
            Ok(Value::signed(wrap_signed(!a.get(), *n)))
        }
        (UnOp::BitNot, _, Value::BigInt(a)) => Ok(Value::BigInt(Arc::new(!(**a).clone()))),
        _ => mismatch("operand of unary operator", v),
    }
}

fn shift_amount(v: &Value) -> EvalResult<u128> {
    match v {
        Value::Bit(s) => Ok(s.get()),
        Value::Signed(s) if s.get() >= 0 => Ok(s.get() as u128),
        Value::BigInt(b) => u128::try_from(&**b).or_else(|_| err("negative or huge shift")),
        _ => mismatch("shift amount", v),
    }
}

/// A chain of `++` (an interpolated string is one): every operand evaluated, then one
/// string built, instead of a new string (and its copy into an `Arc`) per `++` — a flow's
/// text, built from a dozen pieces, was copied a dozen times.
fn concat(prog: &Program, e: &Expr, env: &mut Vec<Value>) -> EvalResult<Value> {
    fn operands<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
        match e {
            Expr::Binary {
                op: BinOp::Concat,
                lhs,
                rhs,
                ..
            } => {
                operands(lhs, out);
                operands(rhs, out);
            }
            e => out.push(e),
        }
    }
    let mut exprs = Vec::new();
    operands(e, &mut exprs);
    let mut parts = Vec::with_capacity(exprs.len());
    for x in exprs {
        match eval(prog, x, env)? {
            Value::Str(s) => parts.push(s),
            v => return mismatch("strings", &v),
        }
    }
    let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in &parts {
        text.push_str(p);
    }
    Ok(Value::Str(text.into()))
}

/// Apply a (non short-circuit) binary operator; `ty` is the left operand's type.
pub fn binary(op: BinOp, ty: &Type, a: &Value, b: &Value) -> EvalResult<Value> {
    match op {
        BinOp::Eq => return Ok(Value::Bool(a == b)),
        BinOp::Neq => return Ok(Value::Bool(a != b)),
        BinOp::Lt => return Ok(Value::Bool(a < b)),
        BinOp::Lte => return Ok(Value::Bool(a <= b)),
        BinOp::Gt => return Ok(Value::Bool(a > b)),
        BinOp::Gte => return Ok(Value::Bool(a >= b)),
        BinOp::And => return Ok(Value::Bool(as_bool(a)? && as_bool(b)?)),
        BinOp::Or => return Ok(Value::Bool(as_bool(a)? || as_bool(b)?)),
        BinOp::Implies => return Ok(Value::Bool(!as_bool(a)? || as_bool(b)?)),
        BinOp::Concat => {
            return match (a, b) {
                (Value::Str(x), Value::Str(y)) => {
                    let mut s = String::with_capacity(x.len() + y.len());
                    s.push_str(x);
                    s.push_str(y);
                    Ok(Value::Str(s.into()))
                }
                _ => mismatch("strings", a),
            }
        }
        _ => {}
    }
    match (a, b) {
        (Value::Bit(x), _) => {
            let n = match ty {
                Type::Bit(n) => *n,
                _ => 128,
            };
            bit_op(op, n, x.get(), b)
        }
        (Value::Signed(x), _) => {
            let n = match ty {
                Type::Signed(n) => *n,
                _ => 128,
            };
            signed_op(op, n, x.get(), b)
        }
        (Value::BigInt(x), _) => bigint_op(op, x, b),
        (Value::Bool(x), Value::Bool(y)) => match op {
            BinOp::BitAnd => Ok(Value::Bool(*x && *y)),
            BinOp::BitOr => Ok(Value::Bool(*x || *y)),
            BinOp::BitXor => Ok(Value::Bool(*x ^ *y)),
            _ => mismatch("numbers", a),
        },
        _ => mismatch("numbers", a),
    }
}

fn bit_op(op: BinOp, n: u32, x: u128, b: &Value) -> EvalResult<Value> {
    let m = mask(n);
    if matches!(op, BinOp::Shl | BinOp::Shr) {
        let s = shift_amount(b)?;
        let r = if s >= u128::from(n) {
            0
        } else if op == BinOp::Shl {
            (x << s) & m
        } else {
            x >> s
        };
        return Ok(Value::bit(r));
    }
    let Value::Bit(y) = b else {
        return mismatch("bit<N>", b);
    };
    let y = y.get();
    let r = match op {
        BinOp::Add => x.wrapping_add(y) & m,
        BinOp::Sub => x.wrapping_sub(y) & m,
        BinOp::Mul => x.wrapping_mul(y) & m,
        BinOp::Div | BinOp::Mod if y == 0 => return err("division by zero"),
        BinOp::Div => x / y,
        BinOp::Mod => x % y,
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        _ => return err(format!("operator {op:?} not defined on bit<{n}>")),
    };
    Ok(Value::bit(r))
}

fn signed_op(op: BinOp, n: u32, x: i128, b: &Value) -> EvalResult<Value> {
    if matches!(op, BinOp::Shl | BinOp::Shr) {
        let s = shift_amount(b)?;
        let r = if op == BinOp::Shl {
            if s >= u128::from(n) {
                0
            } else {
                wrap_signed(x.wrapping_shl(s as u32), n)
            }
        } else {
            x >> s.min(127)
        };
        return Ok(Value::signed(r));
    }
    let Value::Signed(y) = b else {
        return mismatch("signed<N>", b);
    };
    let y = y.get();
    let r = match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div | BinOp::Mod if y == 0 => return err("division by zero"),
        BinOp::Div => x.wrapping_div(y),
        BinOp::Mod => x.wrapping_rem(y),
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        _ => return err(format!("operator {op:?} not defined on signed<{n}>")),
    };
    Ok(Value::signed(wrap_signed(r, n)))
}

fn bigint_op(op: BinOp, x: &BigInt, b: &Value) -> EvalResult<Value> {
    if matches!(op, BinOp::Shl | BinOp::Shr) {
        let s = shift_amount(b)?;
        let s = usize::try_from(s).or_else(|_| err("shift too large"))?;
        let r = if op == BinOp::Shl { x << s } else { x >> s };
        return Ok(Value::BigInt(Arc::new(r)));
    }
    let Value::BigInt(y) = b else {
        return mismatch("bigint", b);
    };
    let y: &BigInt = y;
    let zero = BigInt::from(0);
    let r = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div | BinOp::Mod if *y == zero => return err("division by zero"),
        BinOp::Div => x / y,
        BinOp::Mod => x % y,
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        _ => return err(format!("operator {op:?} not defined on bigint")),
    };
    Ok(Value::BigInt(Arc::new(r)))
}

/// The low 128 bits of a bigint, two's complement.
fn bigint_low_bits(b: &BigInt) -> u128 {
    let bytes = b.to_signed_bytes_le();
    let fill = if b.sign() == num_bigint::Sign::Minus {
        0xff
    } else {
        0
    };
    let mut buf = [fill; 16];
    for (i, byte) in bytes.iter().take(16).enumerate() {
        buf[i] = *byte;
    }
    u128::from_le_bytes(buf)
}

/// `v as to`, where `v` has type `from`: truncating / sign-extending like DDlog.
pub fn cast(from: &Type, to: &Type, v: &Value) -> EvalResult<Value> {
    let _ = from;
    match (v, to) {
        (Value::Bit(x), Type::Bit(n)) => Ok(Value::bit(x.get() & mask(*n))),
        (Value::Bit(x), Type::Signed(n)) => Ok(Value::signed(wrap_signed(x.get() as i128, *n))),
        (Value::Bit(x), Type::BigInt) => Ok(Value::BigInt(Arc::new(BigInt::from(x.get())))),
        (Value::Signed(x), Type::Bit(n)) => Ok(Value::bit((x.get() as u128) & mask(*n))),
        (Value::Signed(x), Type::Signed(n)) => Ok(Value::signed(wrap_signed(x.get(), *n))),
        (Value::Signed(x), Type::BigInt) => Ok(Value::BigInt(Arc::new(BigInt::from(x.get())))),
        (Value::BigInt(b), Type::Bit(n)) => Ok(Value::bit(bigint_low_bits(b) & mask(*n))),
        (Value::BigInt(b), Type::Signed(n)) => {
            Ok(Value::signed(wrap_signed(bigint_low_bits(b) as i128, *n)))
        }
        (Value::BigInt(_), Type::BigInt) => Ok(v.clone()),
        (Value::Bool(b), Type::Bit(n)) => Ok(Value::bit(u128::from(*b) & mask(*n))),
        (Value::Bool(b), Type::Signed(n)) => Ok(Value::signed(wrap_signed(i128::from(*b), *n))),
        _ if from == to => Ok(v.clone()),
        _ => mismatch("number to cast", v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog() -> Program {
        Program::default()
    }

    fn bin(op: BinOp, ty: Type, a: Value, b: Value) -> EvalResult<Value> {
        let e = Expr::Binary {
            op,
            ty,
            lhs: Box::new(Expr::Const(a)),
            rhs: Box::new(Expr::Const(b)),
        };
        eval(&prog(), &e, &mut Vec::new())
    }

    #[test]
    fn wrapping_bit_arithmetic() {
        assert_eq!(
            bin(BinOp::Add, Type::Bit(8), Value::bit(250), Value::bit(10)),
            Ok(Value::bit(4))
        );
        assert_eq!(
            bin(BinOp::Sub, Type::Bit(8), Value::bit(1), Value::bit(2)),
            Ok(Value::bit(255))
        );
        assert_eq!(
            bin(
                BinOp::Mul,
                Type::Bit(128),
                Value::bit(u128::MAX),
                Value::bit(2)
            ),
            Ok(Value::bit(u128::MAX - 1))
        );
        assert_eq!(
            bin(BinOp::Shl, Type::Bit(8), Value::bit(0x81), Value::bit(1)),
            Ok(Value::bit(2))
        );
        assert_eq!(
            bin(BinOp::Shl, Type::Bit(8), Value::bit(1), Value::bit(8)),
            Ok(Value::bit(0))
        );
        assert!(bin(BinOp::Div, Type::Bit(8), Value::bit(1), Value::bit(0)).is_err());
        assert_eq!(
            unary(UnOp::BitNot, &Type::Bit(4), &Value::bit(1)),
            Ok(Value::bit(14))
        );
    }

    #[test]
    fn wrapping_signed_arithmetic() {
        assert_eq!(
            bin(
                BinOp::Add,
                Type::Signed(8),
                Value::signed(127),
                Value::signed(1)
            ),
            Ok(Value::signed(-128))
        );
        assert_eq!(
            bin(
                BinOp::Shr,
                Type::Signed(8),
                Value::signed(-4),
                Value::bit(1)
            ),
            Ok(Value::signed(-2))
        );
        assert_eq!(
            bin(
                BinOp::Div,
                Type::Signed(8),
                Value::signed(-128),
                Value::signed(-1)
            ),
            Ok(Value::signed(-128))
        );
        assert_eq!(
            unary(UnOp::Neg, &Type::Signed(8), &Value::signed(-128)),
            Ok(Value::signed(-128))
        );
    }

    #[test]
    fn bigint_and_casts() {
        let big = |x: i64| Value::BigInt(Arc::new(BigInt::from(x)));
        assert_eq!(bin(BinOp::Mul, Type::BigInt, big(-3), big(7)), Ok(big(-21)));
        assert_eq!(
            cast(&Type::BigInt, &Type::Bit(8), &big(-1)),
            Ok(Value::bit(255))
        );
        assert_eq!(
            cast(&Type::BigInt, &Type::Signed(8), &big(255)),
            Ok(Value::signed(-1))
        );
        assert_eq!(
            cast(&Type::Signed(8), &Type::Bit(16), &Value::signed(-1)),
            Ok(Value::bit(0xffff))
        );
        assert_eq!(
            cast(&Type::Bit(16), &Type::Signed(8), &Value::bit(0x80)),
            Ok(Value::signed(-128))
        );
        assert_eq!(
            cast(&Type::Bit(8), &Type::BigInt, &Value::bit(200)),
            Ok(big(200))
        );
    }

    #[test]
    fn short_circuit_and_let_match() {
        // `false and (1/0 == 1)` does not fail.
        let div0 = Expr::Binary {
            op: BinOp::Div,
            ty: Type::Bit(8),
            lhs: Box::new(Expr::Const(Value::bit(1))),
            rhs: Box::new(Expr::Const(Value::bit(0))),
        };
        let e = Expr::Binary {
            op: BinOp::And,
            ty: Type::Bool,
            lhs: Box::new(Expr::Const(Value::Bool(false))),
            rhs: Box::new(div0.clone()),
        };
        assert_eq!(eval(&prog(), &e, &mut vec![]), Ok(Value::Bool(false)));
        assert!(eval(&prog(), &div0, &mut vec![]).is_err());
        // match (Some{5}) { None -> 0, Some{x} -> x }
        let m = Expr::Match {
            arg: Box::new(Expr::Const(Value::some(Value::bit(5)))),
            arms: vec![
                (
                    Pattern::Struct {
                        ctor: 0,
                        fields: vec![],
                    },
                    Expr::Const(Value::bit(0)),
                ),
                (
                    Pattern::Struct {
                        ctor: 1,
                        fields: vec![Pattern::Bind],
                    },
                    Expr::Var(1),
                ),
            ],
        };
        let mut env = vec![Value::Bool(true)];
        assert_eq!(eval(&prog(), &m, &mut env), Ok(Value::bit(5)));
        assert_eq!(env.len(), 1);
    }
}
