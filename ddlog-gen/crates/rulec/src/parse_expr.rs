//! Expression parsing: precedence climbing over DDlog's operator levels, postfix
//! operators, primary expressions, blocks and interpolated strings.

use crate::ast::{Args, Expr, ExprKind, InterpPart, Span};
use crate::error::CompileError;
use crate::ir::{BinOp, UnOp};
use crate::lexer::{Part, Tok, Token};
use crate::parser::{is_upper, Parser, KEYWORDS, MAX_DEPTH};

type R<T> = Result<T, CompileError>;

impl Parser {
    /// An expression.
    pub fn expr(&mut self) -> R<Expr> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.peek().span.error("expression nested too deeply"));
        }
        let lhs = self.prefix_operand();
        let r = lhs.and_then(|lhs| self.binary_rest(lhs, 0));
        self.depth -= 1;
        r
    }

    fn binop(&self) -> Option<(BinOp, u8)> {
        let op = match &self.peek().tok {
            Tok::Punct(p) => match *p {
                "=>" => (BinOp::Implies, 1),
                "|" => (BinOp::BitOr, 4),
                "^" => (BinOp::BitXor, 5),
                "&" => (BinOp::BitAnd, 6),
                "==" => (BinOp::Eq, 7),
                "!=" => (BinOp::Neq, 7),
                "<" => (BinOp::Lt, 7),
                "<=" => (BinOp::Lte, 7),
                ">" => (BinOp::Gt, 7),
                ">=" => (BinOp::Gte, 7),
                "++" => (BinOp::Concat, 8),
                "<<" => (BinOp::Shl, 9),
                ">>" => (BinOp::Shr, 9),
                "+" => (BinOp::Add, 10),
                "-" => (BinOp::Sub, 10),
                "*" => (BinOp::Mul, 11),
                "/" => (BinOp::Div, 11),
                "%" => (BinOp::Mod, 11),
                _ => return None,
            },
            Tok::Ident(s) if s == "and" => (BinOp::And, 3),
            Tok::Ident(s) if s == "or" => (BinOp::Or, 2),
            _ => return None,
        };
        Some(op)
    }

    pub(crate) fn binary_rest(&mut self, mut lhs: Expr, min: u8) -> R<Expr> {
        let mut chain = 0;
        while let Some((op, prec)) = self.binop() {
            chain += 1;
            if self.depth + chain > MAX_DEPTH {
                return Err(self.peek().span.error("expression nested too deeply"));
            }
            if prec < min {
                break;
            }
            let span = self.bump().span;
            let mut rhs = self.prefix_operand()?;
            while let Some((_, p2)) = self.binop() {
                if p2 > prec {
                    rhs = self.binary_rest(rhs, p2)?;
                } else {
                    break;
                }
            }
            let ordering = |o: BinOp| matches!(o, BinOp::Lt | BinOp::Lte | BinOp::Gt | BinOp::Gte);
            if let Some((next, 7)) = self.binop() {
                if prec == 7 && (ordering(op) || ordering(next)) {
                    return Err(self
                        .peek()
                        .span
                        .error("comparison operators cannot be chained; use parentheses"));
                }
            }
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    /// A prefix-operator expression (`-`, `~`, `not` bind looser than postfix operators).
    pub(crate) fn prefix_operand(&mut self) -> R<Expr> {
        let span = self.peek().span;
        let op = if self.eat("-") {
            Some(UnOp::Neg)
        } else if self.eat("~") {
            Some(UnOp::BitNot)
        } else if self.eat_kw("not") {
            Some(UnOp::Not)
        } else {
            None
        };
        if let Some(op) = op {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(span.error("expression nested too deeply"));
            }
            let arg = self.prefix_operand();
            self.depth -= 1;
            let arg = arg?;
            return Ok(Expr {
                kind: ExprKind::Unary(op, Box::new(arg)),
                span,
            });
        }
        self.postfix()
    }

    /// True at `[N:M]` (a bit slice).
    fn at_slice(&self) -> bool {
        self.is("[")
            && matches!(self.peek_at(1), Tok::Int(_, None))
            && matches!(self.peek_at(2), Tok::Punct(":"))
            && matches!(self.peek_at(3), Tok::Int(_, None))
            && matches!(self.peek_at(4), Tok::Punct("]"))
    }

    /// True if the current `.` is immediately followed by the next token (field access),
    /// not a rule terminator.
    fn dot_adjacent(&self) -> bool {
        let dot = self.peek().span;
        let next = &self.toks[(self.pos + 1).min(self.toks.len() - 1)];
        self.is(".")
            && next.span.line == dot.line
            && next.span.col == dot.col + 1
            && match &next.tok {
                Tok::Ident(s) => !is_upper(s),
                Tok::Int(_, None) => true,
                _ => false,
            }
    }

    fn postfix(&mut self) -> R<Expr> {
        let mut e = self.primary()?;
        loop {
            let s = self.peek().span;
            if self.eat_kw("as") {
                e = Expr {
                    kind: ExprKind::Cast(Box::new(e), self.ty()?),
                    span: s,
                };
                continue;
            }
            if self.eat(":") {
                e = Expr {
                    kind: ExprKind::Ascribe(Box::new(e), self.ty()?),
                    span: s,
                };
                continue;
            }
            if self.at_slice() {
                self.bump();
                let bound = |t: Token| match t.tok {
                    Tok::Int(n, _) => {
                        u32::try_from(&n).map_err(|_| t.span.error("bit index too large"))
                    }
                    _ => unreachable!("checked by at_slice"),
                };
                let hi = bound(self.bump())?;
                self.bump();
                let lo = bound(self.bump())?;
                self.bump();
                e = Expr {
                    kind: ExprKind::Slice(Box::new(e), hi, lo),
                    span: s,
                };
                continue;
            }
            if !self.dot_adjacent() {
                break;
            }
            self.bump();
            let t = self.bump();
            match t.tok {
                Tok::Int(n, _) => {
                    let idx =
                        usize::try_from(&n).map_err(|_| t.span.error("tuple index too large"))?;
                    e = Expr {
                        kind: ExprKind::TupleIndex(Box::new(e), idx),
                        span: t.span,
                    };
                }
                Tok::Ident(name) => {
                    if self.eat("(") {
                        let mut args = Vec::new();
                        while !self.is(")") {
                            args.push(self.expr()?);
                            if !self.eat(",") {
                                break;
                            }
                        }
                        self.expect(")")?;
                        e = Expr {
                            kind: ExprKind::Method(Box::new(e), name, args),
                            span: t.span,
                        };
                    } else {
                        e = Expr {
                            kind: ExprKind::Field(Box::new(e), name),
                            span: t.span,
                        };
                    }
                }
                _ => unreachable!("checked by dot_adjacent"),
            }
        }
        Ok(e)
    }

    #[allow(
        clippy::many_single_char_names,
        reason = "short names mirror the grammar"
    )]
    pub(crate) fn primary(&mut self) -> R<Expr> {
        let t = self.peek().clone();
        let span = t.span;
        let kind = match t.tok {
            Tok::Int(n, w) => {
                self.bump();
                ExprKind::Int(n, w)
            }
            Tok::Str(s) => {
                self.bump();
                ExprKind::Str(s)
            }
            Tok::Interp(parts) => {
                self.bump();
                let mut out = Vec::new();
                for p in parts {
                    match p {
                        Part::Lit(s) => out.push(InterpPart::Lit(s)),
                        Part::Expr(toks) => {
                            let mut sub = Parser::new(toks);
                            let e = sub.expr()?;
                            if !sub.at_eof() {
                                return Err(sub.unexpected("`}`"));
                            }
                            out.push(InterpPart::Expr(e));
                        }
                    }
                }
                ExprKind::Interp(out)
            }
            Tok::Punct("(") => {
                self.bump();
                let mut es = Vec::new();
                let mut trailing = false;
                while !self.is(")") {
                    es.push(self.expr()?);
                    trailing = false;
                    if !self.eat(",") {
                        break;
                    }
                    trailing = true;
                }
                self.expect(")")?;
                if es.len() == 1 && !trailing {
                    return Ok(es.pop().expect("one"));
                }
                ExprKind::Tuple(es)
            }
            Tok::Punct("[") => {
                self.bump();
                let mut es = Vec::new();
                while !self.is("]") {
                    es.push(self.expr()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                ExprKind::VecLit(es)
            }
            Tok::Punct("{") => {
                self.bump();
                return self.block(span);
            }
            Tok::Ident(ref s) if s == "true" || s == "false" => {
                self.bump();
                ExprKind::Bool(s == "true")
            }
            Tok::Ident(ref s) if s == "_" => {
                self.bump();
                ExprKind::Wild
            }
            Tok::Ident(ref s) if s == "var" => {
                self.bump();
                let (v, _) = self.ident("a variable name")?;
                ExprKind::Var(v)
            }
            Tok::Ident(ref s) if s == "if" => {
                self.bump();
                let c = self.expr()?;
                let a = self.expr()?;
                let b = if self.eat_kw("else") {
                    self.expr()?
                } else {
                    Expr {
                        kind: ExprKind::Tuple(vec![]),
                        span,
                    }
                };
                ExprKind::If(Box::new(c), Box::new(a), Box::new(b))
            }
            Tok::Ident(ref s) if s == "match" => {
                self.bump();
                self.expect("(")?;
                let scrut = self.expr()?;
                self.expect(")")?;
                self.expect("{")?;
                let mut arms = Vec::new();
                while !self.is("}") {
                    let p = self.expr()?;
                    self.expect("->")?;
                    let v = self.expr()?;
                    arms.push((p, v));
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}")?;
                ExprKind::Match(Box::new(scrut), arms)
            }
            Tok::Ident(ref s)
                if matches!(
                    s.as_str(),
                    "for" | "return" | "break" | "continue" | "loop" | "while"
                ) =>
            {
                return Err(span.error(format!(
                    "`{s}` is not supported: functions here are single expressions"
                )));
            }
            Tok::Ident(ref s) if !KEYWORDS.contains(&s.as_str()) => {
                let (name, _) = self.scoped("a name")?;
                let last = name.rsplit("::").next().unwrap_or(&name).to_string();
                if self.is("(") {
                    self.bump();
                    let mut args = Vec::new();
                    while !self.is(")") {
                        args.push(self.expr()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect(")")?;
                    ExprKind::Call(name, args)
                } else if is_upper(&last) {
                    let args = if self.eat("{") {
                        self.args("}")?
                    } else {
                        Args::Pos(vec![])
                    };
                    ExprKind::Ctor(name, args)
                } else {
                    ExprKind::Var(name)
                }
            }
            _ => return Err(self.unexpected("an expression")),
        };
        Ok(Expr { kind, span })
    }

    fn block(&mut self, span: Span) -> R<Expr> {
        let mut stmts = Vec::new();
        loop {
            if self.is("}") {
                self.bump();
                return Ok(Expr {
                    kind: ExprKind::Block(
                        stmts,
                        Box::new(Expr {
                            kind: ExprKind::Tuple(vec![]),
                            span,
                        }),
                    ),
                    span,
                });
            }
            if self.eat_kw("var") {
                let p = self.prefix_operand()?;
                self.expect("=")?;
                let v = self.expr()?;
                self.expect(";")?;
                stmts.push((p, v));
                continue;
            }
            let e = self.expr()?;
            if self.is("=") {
                return Err(self
                    .peek()
                    .span
                    .error("assignment is not supported; bind a new name with `var`"));
            }
            if self.eat(";") {
                let wild = Expr {
                    kind: ExprKind::Wild,
                    span: e.span,
                };
                stmts.push((wild, e));
                continue;
            }
            self.expect("}")?;
            if stmts.is_empty() {
                return Ok(e);
            }
            return Ok(Expr {
                kind: ExprKind::Block(stmts, Box::new(e)),
                span,
            });
        }
    }
}
