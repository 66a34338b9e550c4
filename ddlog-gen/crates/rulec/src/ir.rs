//! The rule IR: what the compiler produces and the engine interprets.
//!
//! This is the contract between `rulec` and `engine`. Everything is resolved: relations,
//! functions, types and constructors are indices; variables are environment slots; every
//! operator carries the type of its operands, so evaluation needs no type inference.
//!
//! # Environments
//! Expressions are evaluated against an environment, a `Vec<Value>` used as a stack:
//! [`Expr::Var`]`(i)` reads slot `i`. In a rule, the environment starts as the rule's
//! current *binding row* (see [`BodyItem`]); in a function body it starts as the
//! arguments; in a primary-key expression it is the row's columns. [`Pattern::Bind`]
//! pushes the matched value; [`Expr::Let`] and [`Expr::Match`] pop what their pattern
//! pushed when their body has been evaluated.
//!
//! # Rule evaluation
//! A rule's body is a pipeline over a collection of binding rows. It starts with one empty
//! row. Each [`BodyItem`] maps every binding row to zero or more new rows, as its docs say.
//! At the end, each row yields the head tuple `head[i]` evaluated against it. Relations
//! have set semantics: a derived relation holds each row at most once.
//!
//! # Runtime errors
//! If evaluating an expression fails (division by zero, `unwrap` of `None`, ...), the
//! binding row that caused it is dropped, as if a condition were false; the engine counts
//! such errors so they are visible, but never crashes.

use serde::{Deserialize, Serialize};

use crate::types::{Type, TypeDef};
use crate::value::Value;

/// Index into [`Program::relations`].
pub type RelId = usize;
/// Index into [`Program::functions`].
pub type FuncId = usize;

/// A compiled program (`Default`: the empty one, no types, relations or rules).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Named structs and unions, referenced by [`Type::Named`].
    pub types: Vec<TypeDef>,
    /// Every relation: inputs, outputs and internal ones.
    pub relations: Vec<Relation>,
    /// User functions, referenced by [`Callee::User`].
    pub functions: Vec<Function>,
    /// Every rule.
    pub rules: Vec<Rule>,
    /// Evaluation order. A rule's body relations are all in earlier strata, or in its own
    /// stratum if that stratum is recursive; negated and grouped relations are always in
    /// earlier strata. Input relations belong to no stratum.
    pub strata: Vec<Stratum>,
}

impl Program {
    /// Find a relation by its declared name.
    pub fn relation_id(&self, name: &str) -> Option<RelId> {
        self.relations.iter().position(|r| r.name == name)
    }
}

/// Whether a relation is fed by transactions, read by clients, or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// `input relation`: changed only by transactions; no rule may derive it.
    Input,
    /// `output relation`: derived; its changes are reported by `commit`.
    Output,
    /// `relation`: derived, internal (still dumpable).
    Internal,
}

/// A relation declaration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    /// Declared name.
    pub name: String,
    /// Input, output or internal.
    pub role: Role,
    /// Columns `(name, type)` in declaration order.
    pub columns: Vec<(String, Type)>,
    /// Primary key of an input relation, if declared.
    pub primary_key: Option<PrimaryKey>,
    /// `file:line:col` of the declaration.
    pub source: String,
}

/// `primary key (x) expr`: the key of a row is `expr` evaluated with the row's columns as
/// the environment (`Var(i)` = column `i`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrimaryKey {
    /// Key expression over the columns.
    pub expr: Expr,
    /// Type of the key, used to parse `delete_key` and `modify` arguments.
    pub ty: Type,
}

/// A pure function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Function {
    /// Declared name.
    pub name: String,
    /// Parameter names and types; the body's environment starts with their values.
    pub params: Vec<(String, Type)>,
    /// Return type.
    pub ret: Type,
    /// Body expression.
    pub body: Expr,
}

/// A group of relations evaluated together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stratum {
    /// Relations derived in this stratum.
    pub relations: Vec<RelId>,
    /// Indices into [`Program::rules`] of the rules whose head is in `relations`.
    pub rules: Vec<usize>,
    /// True if some relation here depends on itself (directly or through others here):
    /// evaluate to a fixed point.
    pub recursive: bool,
}

/// `head :- body.`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Relation the rule derives.
    pub head: RelId,
    /// One expression per head column, evaluated against the final binding row.
    pub head_exprs: Vec<Expr>,
    /// Body items, applied in order to the binding rows.
    pub body: Vec<BodyItem>,
    /// `file:line:col` of the rule, for diagnostics and graph dumps.
    pub source: String,
}

/// One step of a rule body. "Row" below is the binding row; "appends" means new slots are
/// pushed at the end in pattern order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BodyItem {
    /// `R(p0, p1, ...)`: join with relation `rel`. `args[i]` is the pattern for column `i`.
    /// Columns whose pattern is [`Pattern::Eq`] (at top level) form the join key: the
    /// expression, evaluated on the incoming row, must equal the column. The other columns'
    /// patterns are then matched against the relation row, appending their binds. A
    /// pattern's `Eq` expressions see only the incoming row, never binds of the same atom.
    Atom {
        /// Relation joined.
        rel: RelId,
        /// One pattern per column.
        args: Vec<Pattern>,
    },
    /// `not R(...)`: keep the row only if no row of `rel` matches. `args[i]` is
    /// [`Pattern::Wild`] or [`Pattern::Eq`] (expressions over the incoming row).
    Not {
        /// Relation negated; always in an earlier stratum.
        rel: RelId,
        /// One pattern per column.
        args: Vec<Pattern>,
    },
    /// A condition: keep the row if `expr` is `true`.
    Filter(Expr),
    /// `var x = expr` (or a destructuring pattern): match the value, appending binds; a
    /// row whose value does not match is dropped.
    Let {
        /// Value computed from the row.
        expr: Expr,
        /// Pattern it must match.
        pattern: Pattern,
    },
    /// `var x = FlatMap(expr)`: `expr` is a `Vec`, `Set` or `Map` (a map yields `(k, v)`
    /// tuples); one output row per element that matches `pattern`.
    FlatMap {
        /// Collection computed from the row.
        expr: Expr,
        /// Pattern each element must match.
        pattern: Pattern,
    },
    /// `var g = (value).group_by(by...)`: the rows are grouped by the values of slots `by`;
    /// each group becomes one row `[by values..., Value::Group(key, values)]` where `key` is
    /// the tuple of `by` values (or the single value if `by` has one slot, `()` if none)
    /// and `values` is the sorted set of distinct `value` results of the group's rows.
    GroupBy {
        /// Slots grouped by.
        by: Vec<usize>,
        /// Value collected for each row.
        value: Expr,
    },
    /// Keep only these slots, in this order (the compiler inserts it to shrink rows).
    Project(Vec<usize>),
}

/// A pattern, matched against a value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Pattern {
    /// `_`: matches anything.
    Wild,
    /// A fresh variable: matches anything and appends the value to the environment.
    Bind,
    /// Matches a value equal to the expression (a literal, or an expression over the
    /// environment as it was before this pattern started).
    Eq(Box<Expr>),
    /// `(p0, p1, ...)`.
    Tuple(Vec<Pattern>),
    /// `C{p0, p1, ...}` or `C{.f = p}`: the constructor index must match; `fields` has one
    /// pattern per field of the constructor, in declaration order (`Wild` if omitted).
    Struct {
        /// Constructor index within its type.
        ctor: u32,
        /// One pattern per field.
        fields: Vec<Pattern>,
    },
}

/// An expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// A literal.
    Const(Value),
    /// Environment slot.
    Var(usize),
    /// Unary operator; `ty` is the operand's type.
    Unary {
        /// Operator.
        op: UnOp,
        /// Operand type.
        ty: Type,
        /// Operand.
        arg: Box<Expr>,
    },
    /// Binary operator; `ty` is the left operand's type (the right has the same type,
    /// except for shifts, whose right operand is any `bit<N>`).
    Binary {
        /// Operator.
        op: BinOp,
        /// Left operand type.
        ty: Type,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
    },
    /// `e as T` between numeric types (truncating / sign-extending as DDlog does).
    Cast {
        /// Source type.
        from: Type,
        /// Target type.
        to: Type,
        /// Operand.
        arg: Box<Expr>,
    },
    /// Function call.
    Call {
        /// Which function.
        func: Callee,
        /// Arguments.
        args: Vec<Expr>,
    },
    /// Tuple construction.
    Tuple(Vec<Expr>),
    /// Struct/union/Option construction: constructor index and all fields in order.
    Struct {
        /// Constructor index within its type.
        ctor: u32,
        /// Field values in declaration order.
        fields: Vec<Expr>,
    },
    /// `e.f`: `indices[c]` is the position of `f` in constructor `c` (`None` if `c` lacks
    /// it, which is a runtime error).
    Field {
        /// Struct value.
        arg: Box<Expr>,
        /// Position of the field per constructor.
        indices: Vec<Option<usize>>,
    },
    /// `e.N` on a tuple.
    TupleIndex {
        /// Tuple value.
        arg: Box<Expr>,
        /// Element index.
        index: usize,
    },
    /// `[a, b, ...]` vector literal.
    VecLit(Vec<Expr>),
    /// `if (c) a else b`.
    If {
        /// Condition.
        cond: Box<Expr>,
        /// Value when true.
        then: Box<Expr>,
        /// Value when false.
        els: Box<Expr>,
    },
    /// `match (e) { p -> v, ... }`: the first arm whose pattern matches; its binds are
    /// pushed while its value is evaluated. No arm matching is a runtime error.
    Match {
        /// Scrutinee.
        arg: Box<Expr>,
        /// Arms in order.
        arms: Vec<(Pattern, Expr)>,
    },
    /// `var p = value; body` inside a block: binds are pushed while `body` is evaluated. A
    /// value that does not match is a runtime error.
    Let {
        /// Pattern.
        pattern: Pattern,
        /// Bound value.
        value: Box<Expr>,
        /// Rest of the block.
        body: Box<Expr>,
    },
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnOp {
    /// `not b`.
    Not,
    /// `-x` (wrapping for fixed widths).
    Neg,
    /// `~x` bitwise complement within the width.
    BitNot,
}

/// Binary operators. Arithmetic on `bit<N>`/`signed<N>` wraps to N bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    /// `==` (any type).
    Eq,
    /// `!=` (any type).
    Neq,
    /// `<` (any type, by value order; signed compare for `signed<N>`).
    Lt,
    /// `<=`.
    Lte,
    /// `>`.
    Gt,
    /// `>=`.
    Gte,
    /// `and` (short-circuit).
    And,
    /// `or` (short-circuit).
    Or,
    /// `=>` implication (short-circuit).
    Implies,
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/` (division by zero is a runtime error).
    Div,
    /// `%`.
    Mod,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
    /// `<<`.
    Shl,
    /// `>>` (arithmetic for `signed<N>`).
    Shr,
    /// `++` string concatenation.
    Concat,
}

/// What a call calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Callee {
    /// A user function.
    User(FuncId),
    /// A built-in.
    Builtin(Builtin),
}

/// Built-in functions the engine implements natively. The checker resolves source names
/// (including method syntax `x.f(y)` = `f(x, y)` and overloads by argument type) to these.
/// Numbers: "bitN" means any `bit<N>`; results keep the argument's width unless stated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Builtin {
    // ---- strings ----
    /// `to_string(x: T) -> string`, formatted as DDlog does (strings unquoted at top level).
    ToString(Type),
    /// `len(s: string) -> usize` (bytes).
    StrLen,
    /// `contains(s, sub) -> bool`.
    StrContains,
    /// `starts_with(s, prefix) -> bool`.
    StrStartsWith,
    /// `ends_with(s, suffix) -> bool`.
    StrEndsWith,
    /// `split(s, sep) -> Vec<string>`.
    StrSplit,
    /// `join(v: Vec<string>, sep) -> string`.
    StrJoin,
    /// `substr(s, start: usize, end: usize) -> string` (byte offsets, clamped).
    StrSubstr,
    /// `replace(s, from, to) -> string`.
    StrReplace,
    /// `trim(s) -> string`.
    StrTrim,
    /// `to_lowercase(s) -> string`.
    StrToLower,
    /// `to_uppercase(s) -> string`.
    StrToUpper,
    /// `parse_dec_u64(s) -> Option<bit<64>>`.
    ParseDecU64,
    /// `parse_dec_i64(s) -> Option<signed<64>>`.
    ParseDecI64,
    /// `hex(x: bitN) -> string`, lowercase, no prefix.
    Hex,
    // ---- integers ----
    /// `min(a: T, b: T) -> T` (any ordered type).
    Min2,
    /// `max(a: T, b: T) -> T`.
    Max2,
    // ---- Option ----
    /// `is_some(o) -> bool`.
    IsSome,
    /// `is_none(o) -> bool`.
    IsNone,
    /// `unwrap_or(o: Option<T>, default: T) -> T`.
    UnwrapOr,
    // ---- Vec ----
    /// `len(v: Vec<T>) -> usize`.
    VecLen,
    /// `is_empty(v) -> bool`.
    VecIsEmpty,
    /// `contains(v, x) -> bool`.
    VecContains,
    /// `nth(v, i: usize) -> Option<T>`.
    VecNth,
    /// `push(v, x) -> Vec<T>` (functional: returns a new vector).
    VecPush,
    /// `append(v, w) -> Vec<T>`.
    VecAppend,
    /// `sort(v) -> Vec<T>`.
    VecSort,
    /// `to_set(v) -> Set<T>`.
    VecToSet,
    /// `range_vec(from: bitN, to: bitN) -> Vec<bitN>`: `from` up to `to` exclusive.
    RangeVec,
    // ---- Set ----
    /// `len(s: Set<T>) -> usize`.
    SetLen,
    /// `is_empty(s) -> bool`.
    SetIsEmpty,
    /// `contains(s, x) -> bool`.
    SetContains,
    /// `insert(s, x) -> Set<T>` (functional).
    SetInsert,
    /// `union(s, t) -> Set<T>`.
    SetUnion,
    /// `intersection(s, t) -> Set<T>`.
    SetIntersection,
    /// `difference(s, t) -> Set<T>`.
    SetDifference,
    /// `to_vec(s) -> Vec<T>`.
    SetToVec,
    // ---- Map ----
    /// `len(m: Map<K,V>) -> usize`.
    MapLen,
    /// `is_empty(m) -> bool`.
    MapIsEmpty,
    /// `get(m, k) -> Option<V>`.
    MapGet,
    /// `contains_key(m, k) -> bool`.
    MapContainsKey,
    /// `insert(m, k, v) -> Map<K,V>` (functional).
    MapInsert,
    /// `remove(m, k) -> Map<K,V>` (functional).
    MapRemove,
    /// `keys(m) -> Vec<K>`.
    MapKeys,
    /// `values(m) -> Vec<V>`.
    MapValues,
    // ---- groups (the argument is a `Group<K,V>`) ----
    /// `key(g) -> K`.
    GroupKey,
    /// `count(g) -> usize`: number of distinct values.
    GroupCount,
    /// `first(g) -> V`: smallest value.
    GroupFirst,
    /// `to_vec(g) -> Vec<V>` (sorted).
    GroupToVec,
    /// `to_set(g) -> Set<V>`.
    GroupToSet,
    /// `to_map(g) -> Map<K2,V2>` for `V = (K2, V2)`; the largest V2 wins per key.
    GroupToMap,
    /// `min(g) -> V`.
    GroupMin,
    /// `max(g) -> V`.
    GroupMax,
    /// `sum(g) -> V` for numeric V (wrapping).
    GroupSum(Type),
    // ---- network addresses: IPv4 = bit<32>, IPv6 = bit<128>, MAC = bit<48> ----
    /// `ipv4_parse(s) -> Option<bit<32>>` ("10.0.0.1").
    Ipv4Parse,
    /// `ipv4_format(a: bit<32>) -> string`.
    Ipv4Format,
    /// `ipv6_parse(s) -> Option<bit<128>>` (any RFC 4291 text form).
    Ipv6Parse,
    /// `ipv6_format(a: bit<128>) -> string` (RFC 5952 canonical form).
    Ipv6Format,
    /// `ipv4_mask(len: bit<8>) -> bit<32>` (len > 32 is a runtime error).
    Ipv4Mask,
    /// `ipv6_mask(len: bit<8>) -> bit<128>`.
    Ipv6Mask,
    /// `mac_parse(s) -> Option<bit<48>>` ("aa:bb:cc:dd:ee:ff").
    MacParse,
    /// `mac_format(m: bit<48>) -> string` (lowercase, colon separated).
    MacFormat,
    // ---- hashing ----
    /// `hash64(x: T) -> bit<64>`: stable across runs and machines.
    Hash64,
    /// `hash128(x: T) -> bit<128>`.
    Hash128,
}
