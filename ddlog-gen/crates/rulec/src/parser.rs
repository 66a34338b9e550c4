//! Recursive-descent parser: tokens → [`crate::ast`]. Binary operators use precedence
//! climbing with DDlog's levels (tightest first): postfix `.f`, `.0`, `.m()`, `[h:l]`,
//! `as T`, `: T`; prefix `-`, `~`, `not`; `*` `/` `%`; `+` `-`; `<<` `>>`; `++`;
//! comparisons (`==`/`!=` associate left, orderings do not chain); `&`; `^`; `|`; `and`;
//! `or`; `=>`.

use crate::ast::{
    Args, Atom, BodyItem, CtorDecl, Decl, Expr, ExprKind, RelKind, RuleDecl, Span, TypeDefBody,
    TypeExpr,
};
use crate::error::CompileError;
use crate::ir::UnOp;
use crate::lexer::{describe, Lexer, Tok, Token};

type R<T> = Result<T, CompileError>;

/// Column name of a relation declared `relation R[T]` (its only column).
pub const RECORD_COLUMN: &str = "value";

/// A parser over a token vector.
pub struct Parser {
    pub(crate) toks: Vec<Token>,
    pub(crate) pos: usize,
    pub(crate) depth: usize,
}

/// Deepest nesting of expressions accepted (guards the stack against hostile input).
pub(crate) const MAX_DEPTH: usize = 1000;

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

pub(crate) fn is_upper(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

pub(crate) const KEYWORDS: &[&str] = &[
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

    pub(crate) fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }

    /// True at end of input.
    pub fn at_eof(&self) -> bool {
        self.peek().tok == Tok::Eof
    }

    pub(crate) fn bump(&mut self) -> Token {
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

    pub(crate) fn is_kw(&self, k: &str) -> bool {
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

    pub(crate) fn eat_kw(&mut self, k: &str) -> bool {
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

    pub(crate) fn expect_kw(&mut self, k: &str) -> R<Span> {
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
        let columns = if self.is("[") {
            // `relation R[T]`: one column, holding the whole record.
            let s = self.bump().span;
            let t = self.ty()?;
            self.expect("]")?;
            vec![(RECORD_COLUMN.to_string(), t, s)]
        } else {
            self.params()?
        };
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

    pub(crate) fn ty_inner(&mut self) -> R<TypeExpr> {
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
        if self.eat("[") {
            // `R[e]`: the whole record of a relation declared `relation R[T]`.
            let e = self.expr()?;
            self.expect("]")?;
            return Ok(Atom {
                rel,
                args: Args::Pos(vec![e]),
                span,
            });
        }
        if !self.is("(") {
            return Err(self.unexpected("`(` or `[`"));
        }
        self.bump();
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
                if matches!(self.peek_at(k), Tok::Punct("(" | "[")) {
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
}
