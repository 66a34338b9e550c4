//! Abstract syntax tree of the rule language, with a position on every node.

use num_bigint::BigInt;

use crate::error::CompileError;

/// A source position: file number (index into the compiler's file table), line, column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    /// Index of the file in the compilation's file table.
    pub file: u32,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

/// Prefix marking a file number stored in [`CompileError::file`] until it is resolved.
pub const FILE_TAG: char = '\u{1}';

impl Span {
    /// An error at this position. The file is a placeholder resolved by
    /// [`resolve_file`] with the compilation's file table.
    pub fn error(self, msg: impl Into<String>) -> CompileError {
        CompileError {
            file: format!("{FILE_TAG}{}", self.file),
            line: self.line,
            col: self.col,
            message: msg.into(),
        }
    }
}

/// Replace the file placeholder of `e` by the file's name.
pub fn resolve_file(mut e: CompileError, files: &[String]) -> CompileError {
    if let Some(rest) = e.file.strip_prefix(FILE_TAG) {
        let idx: usize = rest.parse().unwrap_or(0);
        e.file = files.get(idx).cloned().unwrap_or_default();
    }
    e
}

/// Format a span as `file:line:col`.
pub fn span_str(s: Span, files: &[String]) -> String {
    format!(
        "{}:{}:{}",
        files.get(s.file as usize).map_or("", String::as_str),
        s.line,
        s.col
    )
}

/// A type as written.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeExpr {
    /// A name with optional type arguments (`bit<32>` uses [`TypeExpr::Width`]).
    Named(String, Vec<TypeExpr>, Span),
    /// `bit<N>` or `signed<N>`.
    Width(bool, u32, Span),
    /// `(A, B)`.
    Tuple(Vec<TypeExpr>, Span),
}

/// A constructor in a typedef.
#[derive(Clone, Debug, PartialEq)]
pub struct CtorDecl {
    /// Name.
    pub name: String,
    /// Fields.
    pub fields: Vec<(String, TypeExpr, Span)>,
    /// Position.
    pub span: Span,
}

/// Right-hand side of a typedef.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeDefBody {
    /// Alias of another type.
    Alias(TypeExpr),
    /// Struct or tagged union.
    Union(Vec<CtorDecl>),
}

/// Role of a declared relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelKind {
    /// `input relation`.
    Input,
    /// `output relation`.
    Output,
    /// `relation`.
    Internal,
}

/// A top-level declaration.
#[derive(Clone, Debug, PartialEq)]
pub enum Decl {
    /// `import a::b`.
    Import {
        /// Path segments.
        path: Vec<String>,
        /// Position.
        span: Span,
    },
    /// `typedef name = ...`.
    TypeDef {
        /// Name.
        name: String,
        /// Definition.
        body: TypeDefBody,
        /// Position.
        span: Span,
    },
    /// A relation declaration.
    Relation {
        /// Role.
        kind: RelKind,
        /// Name.
        name: String,
        /// Columns.
        columns: Vec<(String, TypeExpr, Span)>,
        /// `primary key (x) expr`.
        key: Option<(String, Expr)>,
        /// Position.
        span: Span,
    },
    /// A function.
    Function {
        /// Name.
        name: String,
        /// Parameters.
        params: Vec<(String, TypeExpr, Span)>,
        /// Return type (`()` if omitted).
        ret: Option<TypeExpr>,
        /// Body.
        body: Expr,
        /// Position.
        span: Span,
    },
    /// A rule or a fact.
    Rule(RuleDecl),
}

/// `heads :- body.`
#[derive(Clone, Debug, PartialEq)]
pub struct RuleDecl {
    /// Head atoms.
    pub heads: Vec<Atom>,
    /// Body items.
    pub body: Vec<BodyItem>,
    /// Position of the first head.
    pub span: Span,
}

/// `R(args)` or `R(.f = e, ...)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Atom {
    /// Relation name.
    pub rel: String,
    /// Arguments.
    pub args: Args,
    /// Position of the relation name.
    pub span: Span,
}

/// Arguments of an atom or constructor.
#[derive(Clone, Debug, PartialEq)]
pub enum Args {
    /// Positional.
    Pos(Vec<Expr>),
    /// `.field = value`.
    Named(Vec<(String, Span, Expr)>),
}

impl Args {
    /// All argument expressions.
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            Args::Pos(v) => v.iter().collect(),
            Args::Named(v) => v.iter().map(|(_, _, e)| e).collect(),
        }
    }
}

/// A body item of a rule.
#[derive(Clone, Debug, PartialEq)]
pub enum BodyItem {
    /// `R(...)` or `not R(...)`.
    Atom {
        /// Negated?
        neg: bool,
        /// The atom.
        atom: Atom,
    },
    /// A boolean condition.
    Cond(Expr),
    /// `var pat = expr` (including `FlatMap` and `group_by`).
    Let {
        /// Pattern.
        pat: Expr,
        /// Value.
        value: Expr,
        /// Position of `var`.
        span: Span,
    },
}

/// An expression (also used for patterns).
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// Kind.
    pub kind: ExprKind,
    /// Position of its first token (for binary operators: of the operator).
    pub span: Span,
}

/// Piece of an interpolated string.
#[derive(Clone, Debug, PartialEq)]
pub enum InterpPart {
    /// Literal text.
    Lit(String),
    /// `${e}`.
    Expr(Expr),
}

/// Expression kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// Integer literal (optionally width-prefixed: signed?, width).
    Int(BigInt, Option<(bool, u32)>),
    /// `true` / `false`.
    Bool(bool),
    /// String literal.
    Str(String),
    /// Interpolated string.
    Interp(Vec<InterpPart>),
    /// Variable.
    Var(String),
    /// `_`.
    Wild,
    /// `(a, b)`; `()` is the unit.
    Tuple(Vec<Expr>),
    /// `[a, b]`.
    VecLit(Vec<Expr>),
    /// `C`, `C{a, b}`, `C{.f = a}`.
    Ctor(String, Args),
    /// `f(a, b)` (also `FlatMap(e)`).
    Call(String, Vec<Expr>),
    /// `x.f(a)`.
    Method(Box<Expr>, String, Vec<Expr>),
    /// `x.f`.
    Field(Box<Expr>, String),
    /// `x.0`.
    TupleIndex(Box<Expr>, usize),
    /// Unary operator.
    Unary(crate::ir::UnOp, Box<Expr>),
    /// Binary operator.
    Binary(crate::ir::BinOp, Box<Expr>, Box<Expr>),
    /// `e as T`.
    Cast(Box<Expr>, TypeExpr),
    /// Bit slice `e[hi:lo]`.
    Slice(Box<Expr>, u32, u32),
    /// `e: T`.
    Ascribe(Box<Expr>, TypeExpr),
    /// `if (c) a else b`.
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `match (e) { p -> v, ... }`.
    Match(Box<Expr>, Vec<(Expr, Expr)>),
    /// `{ var p = e; ...; result }`.
    Block(Vec<(Expr, Expr)>, Box<Expr>),
}

impl Expr {
    /// Call `f` on every variable name occurring in the expression.
    pub fn vars(&self, f: &mut dyn FnMut(&str, Span)) {
        match &self.kind {
            ExprKind::Var(v) => f(v, self.span),
            ExprKind::Int(..) | ExprKind::Bool(_) | ExprKind::Str(_) | ExprKind::Wild => {}
            ExprKind::Interp(ps) => {
                for p in ps {
                    if let InterpPart::Expr(e) = p {
                        e.vars(f);
                    }
                }
            }
            ExprKind::Tuple(es) | ExprKind::VecLit(es) | ExprKind::Call(_, es) => {
                for e in es {
                    e.vars(f);
                }
            }
            ExprKind::Ctor(_, a) => {
                for e in a.exprs() {
                    e.vars(f);
                }
            }
            ExprKind::Method(r, _, es) => {
                r.vars(f);
                for e in es {
                    e.vars(f);
                }
            }
            ExprKind::Field(e, _)
            | ExprKind::TupleIndex(e, _)
            | ExprKind::Unary(_, e)
            | ExprKind::Cast(e, _)
            | ExprKind::Slice(e, _, _)
            | ExprKind::Ascribe(e, _) => e.vars(f),
            ExprKind::Binary(_, a, b) => {
                a.vars(f);
                b.vars(f);
            }
            ExprKind::If(a, b, c) => {
                a.vars(f);
                b.vars(f);
                c.vars(f);
            }
            ExprKind::Match(e, arms) => {
                e.vars(f);
                for (p, v) in arms {
                    p.vars(f);
                    v.vars(f);
                }
            }
            ExprKind::Block(stmts, e) => {
                for (p, v) in stmts {
                    p.vars(f);
                    v.vars(f);
                }
                e.vars(f);
            }
        }
    }

    /// True if the expression contains `_`.
    pub fn has_wild(&self) -> bool {
        match &self.kind {
            ExprKind::Wild => true,
            ExprKind::Tuple(es) | ExprKind::VecLit(es) => es.iter().any(Expr::has_wild),
            ExprKind::Ctor(_, a) => a.exprs().iter().any(|e| e.has_wild()),
            _ => false,
        }
    }
}
