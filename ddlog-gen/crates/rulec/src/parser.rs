//! Recursive-descent parser: tokens → [`crate::ast`]. Binary operators use precedence
//! climbing with DDlog's levels (tightest first): postfix `.f`, `.0`, `.m()`, `[h:l]`,
//! `as T`, `: T`; prefix `-`, `~`, `not`; `*` `/` `%`; `+` `-`; `<<` `>>`; `++`;
//! comparisons (`==`/`!=` associate left, orderings do not chain); `&`; `^`; `|`; `and`;
//! `or`; `=>`.

use crate::ast::{
    Args, Atom, BodyItem, CtorDecl, Decl, Expr, ExprKind, InterpPart, RelKind, RuleDecl, Span,
    TypeDefBody, TypeExpr,
};
use crate::error::CompileError;
use crate::ir::{BinOp, UnOp};
use crate::lexer::{describe, Lexer, Part, Tok, Token};

type R<T> = Result<T, CompileError>;

/// A parser over a token vector.
pub struct Parser {
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
}

/// Deepest nesting of expressions accepted (guards the stack against hostile input).
const MAX_DEPTH: usize = 1000;

/// Parse a whole program file.
pub fn parse_program(text: &str, file: u32) -> R<Vec<Decl>> {
    let toks = Lexer::new(text, file).tokenize()?;
    let mut p = Parser::new(toks);
    let mut decls = Vec::new();
    while !p.at_eof() {
        decls.push(p.decl()?);
    }
    Ok(decls)
}

fn is_upper(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

const KEYWORDS: &[&str] = &[
    "and", "or", "not", "var", "if", "else", "match", "as", "true", "false", "function",
    "relation", "input", "output", "typedef", "import", "extern",
];

impl Parser {
    /// A parser over tokens ending with `Eof`.
    pub fn new(toks: Vec<Token>) -> Self {
        Parser {
            toks,
            pos: 0,
            depth: 0,
        }
    }

    /// The current token.
    pub fn peek(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }

    /// True at end of input.
    pub fn at_eof(&self) -> bool {
        self.peek().tok == Tok::Eof
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    /// True if the current token is punctuation `p`.
    pub fn is(&self, p: &str) -> bool {
        matches!(&self.peek().tok, Tok::Punct(q) if *q == p)
    }

    fn is_kw(&self, k: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(s) if s == k)
    }

    /// Consume punctuation `p` if present.
    pub fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, k: &str) -> bool {
        if self.is_kw(k) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// An "expected X but found Y" error at the current token.
    pub fn unexpected(&self, what: &str) -> CompileError {
        let t = self.peek();
        t.span
            .error(format!("expected {what} but found {}", describe(&t.tok)))
    }

    /// Consume punctuation `p` or fail.
    pub fn expect(&mut self, p: &str) -> R<Span> {
        if self.is(p) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(&format!("`{p}`")))
        }
    }

    fn expect_kw(&mut self, k: &str) -> R<Span> {
        if self.is_kw(k) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(&format!("`{k}`")))
        }
    }

    /// An identifier that is not a keyword.
    pub fn ident(&mut self, what: &str) -> R<(String, Span)> {
        match &self.peek().tok {
            Tok::Ident(s) if !KEYWORDS.contains(&s.as_str()) => {
                let s = s.clone();
                Ok((s, self.bump().span))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// A possibly scoped name `a::b::C`.
    pub fn scoped(&mut self, what: &str) -> R<(String, Span)> {
        let (mut name, span) = self.ident(what)?;
        while self.is("::") {
            self.bump();
            let (n, _) = self.ident("a name after `::`")?;
            name.push_str("::");
            name.push_str(&n);
        }
        Ok((name, span))
    }

    fn skip_attributes(&mut self) -> R<()> {
        while self.is("#") && matches!(self.peek_at(1), Tok::Punct("[")) {
            self.bump();
            self.bump();
            let mut depth = 1;
            while depth > 0 {
                let t = self.bump();
                match t.tok {
                    Tok::Punct("[") => depth += 1,
                    Tok::Punct("]") => depth -= 1,
                    Tok::Eof => return Err(t.span.error("unterminated attribute")),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn decl(&mut self) -> R<Decl> {
        self.skip_attributes()?;
        let span = self.peek().span;
        if self.eat_kw("import") {
            let (name, _) = self.scoped("a module name")?;
            if self.eat_kw("as") {
                self.ident("a module alias")?;
            }
            return Ok(Decl::Import {
                path: name.split("::").map(str::to_string).collect(),
                span,
            });
        }
        if self.eat_kw("typedef") {
            let (name, _) = self.ident("a type name")?;
            self.expect("=")?;
            let body = self.typedef_body()?;
            return Ok(Decl::TypeDef { name, body, span });
        }
        if self.is_kw("extern") {
            return Err(span.error("extern declarations are not supported"));
        }
        if self.is_kw("function") {
            return self.function();
        }
        let kind = if self.eat_kw("input") {
            Some(RelKind::Input)
        } else if self.eat_kw("output") {
            Some(RelKind::Output)
        } else if self.is_kw("relation") {
            Some(RelKind::Internal)
        } else {
            None
        };
        if let Some(kind) = kind {
            self.expect_kw("relation")?;
            return self.relation(kind, span);
        }
        if matches!(&self.peek().tok, Tok::Ident(s) if is_upper(s)) {
            return Ok(Decl::Rule(self.rule()?));
        }
        Err(self.unexpected("a declaration or a rule"))
    }

    fn typedef_body(&mut self) -> R<TypeDefBody> {
        let is_ctor = matches!(&self.peek().tok, Tok::Ident(s) if is_upper(s))
            && matches!(self.peek_at(1), Tok::Punct("{" | "|"));
        if !is_ctor {
            return Ok(TypeDefBody::Alias(self.ty()?));
        }
        let mut ctors = Vec::new();
        loop {
            let (name, span) = self.ident("a constructor name")?;
            let mut fields = Vec::new();
            if self.eat("{") {
                while !self.is("}") {
                    let (f, fs) = self.ident("a field name")?;
                    self.expect(":")?;
                    fields.push((f, self.ty()?, fs));
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}")?;
            }
            ctors.push(CtorDecl { name, fields, span });
            if !self.eat("|") {
                break;
            }
        }
        Ok(TypeDefBody::Union(ctors))
    }

    fn params(&mut self) -> R<Vec<(String, TypeExpr, Span)>> {
        self.expect("(")?;
        let mut out = Vec::new();
        while !self.is(")") {
            let (n, s) = self.ident("a name")?;
            self.expect(":")?;
            out.push((n, self.ty()?, s));
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        Ok(out)
    }

    fn function(&mut self) -> R<Decl> {
        let span = self.expect_kw("function")?;
        let (name, _) = self.ident("a function name")?;
        let params = self.params()?;
        let ret = if self.eat(":") {
            Some(self.ty()?)
        } else {
            None
        };
        let body = if self.eat("=") {
            self.expr()?
        } else if self.is("{") {
            self.primary()?
        } else {
            return Err(self.unexpected("`{` or `=`"));
        };
        Ok(Decl::Function {
            name,
            params,
            ret,
            body,
            span,
        })
    }

    fn relation(&mut self, kind: RelKind, span: Span) -> R<Decl> {
        let (name, _) = self.scoped("a relation name")?;
        let columns = self.params()?;
        let mut key = None;
        if self.eat_kw("primary") {
            self.expect_kw("key")?;
            self.expect("(")?;
            let (v, _) = self.ident("a variable name")?;
            self.expect(")")?;
            key = Some((v, self.expr()?));
        }
        Ok(Decl::Relation {
            kind,
            name,
            columns,
            key,
            span,
        })
    }

    /// A type.
    pub fn ty(&mut self) -> R<TypeExpr> {
        let span = self.peek().span;
        self.depth += 1;
        let r = if self.depth > MAX_DEPTH {
            Err(span.error("type nested too deeply"))
        } else {
            self.ty_inner()
        };
        self.depth -= 1;
        r
    }

    fn ty_inner(&mut self) -> R<TypeExpr> {
        let span = self.peek().span;
        if self.eat("(") {
            let mut ts = Vec::new();
            while !self.is(")") {
                ts.push(self.ty()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(")")?;
            if ts.len() == 1 {
                return Ok(ts.pop().expect("one"));
            }
            return Ok(TypeExpr::Tuple(ts, span));
        }
        let (name, _) = self.scoped("a type")?;
        if (name == "bit" || name == "signed") && self.is("<") {
            self.bump();
            let w = match self.bump().tok {
                Tok::Int(n, None) => u32::try_from(&n).ok().filter(|w| (1..=128).contains(w)),
                _ => None,
            };
            let Some(w) = w else {
                return Err(span.error(format!(
                    "width of `{name}` must be an integer between 1 and 128"
                )));
            };
            self.close_angle()?;
            return Ok(TypeExpr::Width(name == "signed", w, span));
        }
        let mut args = Vec::new();
        if self.eat("<") {
            loop {
                args.push(self.ty()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.close_angle()?;
        }
        Ok(TypeExpr::Named(name, args, span))
    }

    fn close_angle(&mut self) -> R<()> {
        if self.is(">>") {
            let t = &mut self.toks[self.pos];
            t.tok = Tok::Punct(">");
            t.span.col += 1;
            return Ok(());
        }
        self.expect(">").map(|_| ())
    }

    fn atom(&mut self) -> R<Atom> {
        let (rel, span) = self.scoped("a relation name")?;
        self.expect("(")?;
        let args = self.args(")")?;
        Ok(Atom { rel, args, span })
    }

    /// Arguments up to `close`: positional or all `.f = e`.
    pub fn args(&mut self, close: &str) -> R<Args> {
        if self.is(".") {
            let mut named = Vec::new();
            while self.eat(".") {
                let (f, s) = self.ident("a field name")?;
                self.expect("=")?;
                named.push((f, s, self.expr()?));
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(close)?;
            return Ok(Args::Named(named));
        }
        let mut pos = Vec::new();
        while !self.is(close) {
            pos.push(self.expr()?);
            if !self.eat(",") {
                break;
            }
        }
        self.expect(close)?;
        Ok(Args::Pos(pos))
    }

    fn rule(&mut self) -> R<RuleDecl> {
        let span = self.peek().span;
        let mut heads = vec![self.atom()?];
        while self.eat(",") {
            heads.push(self.atom()?);
        }
        let mut body = Vec::new();
        if self.eat(":-") {
            loop {
                body.push(self.body_item()?);
                if !self.eat(",") {
                    break;
                }
            }
        }
        if !self.eat(".") {
            return Err(self.unexpected(if body.is_empty() {
                "`.` or `:-`"
            } else {
                "`,` or `.`"
            }));
        }
        Ok(RuleDecl { heads, body, span })
    }

    fn body_item(&mut self) -> R<BodyItem> {
        let span = self.peek().span;
        if self.eat_kw("not") {
            if matches!(&self.peek().tok, Tok::Ident(s) if is_upper(s)) {
                return Ok(BodyItem::Atom {
                    neg: true,
                    atom: self.atom()?,
                });
            }
            let e = self.prefix_operand()?;
            let e = Expr {
                kind: ExprKind::Unary(UnOp::Not, Box::new(e)),
                span,
            };
            return Ok(BodyItem::Cond(self.binary_rest(e, 0)?));
        }
        if self.eat_kw("var") {
            let pat = self.prefix_operand()?;
            self.expect("=")?;
            let value = self.expr()?;
            return Ok(BodyItem::Let { pat, value, span });
        }
        if let Tok::Ident(s) = &self.peek().tok {
            if is_upper(s) && s != "FlatMap" {
                let mut k = 1;
                while matches!(self.peek_at(k), Tok::Punct("::")) {
                    k += 2;
                }
                if matches!(self.peek_at(k), Tok::Punct("(")) {
                    return Ok(BodyItem::Atom {
                        neg: false,
                        atom: self.atom()?,
                    });
                }
            }
        }
        let e = self.expr()?;
        if self.eat("=") {
            // DDlog's `pattern = expr` binding, e.g. `Some{var x} = f(y)`.
            let value = self.expr()?;
            return Ok(BodyItem::Let {
                pat: e,
                value,
                span,
            });
        }
        Ok(BodyItem::Cond(e))
    }

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

    fn binary_rest(&mut self, mut lhs: Expr, min: u8) -> R<Expr> {
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
    fn prefix_operand(&mut self) -> R<Expr> {
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
    fn primary(&mut self) -> R<Expr> {
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
