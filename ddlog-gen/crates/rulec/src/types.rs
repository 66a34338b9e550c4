//! Resolved types of the rule language, as the IR and the engine see them.
//!
//! Aliases are expanded by the checker; every `Type` here is concrete. Named structs and
//! tagged unions live in [`crate::ir::Program::types`] and are referred to by index. A
//! struct is a union with one constructor, as in DDlog.

use serde::{Deserialize, Serialize};

/// Index into [`crate::ir::Program::types`].
pub type TypeId = usize;

/// A fully resolved type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Type {
    /// `bool`.
    Bool,
    /// `bit<N>`, 1 ≤ N ≤ 128; `usize` is `bit<64>`. Arithmetic wraps modulo 2^N.
    Bit(u32),
    /// `signed<N>`, 1 ≤ N ≤ 128. Arithmetic wraps in two's complement.
    Signed(u32),
    /// `bigint`: arbitrary precision.
    BigInt,
    /// `string`.
    String,
    /// `(A, B, ...)`; the empty tuple is `()`.
    Tuple(Vec<Type>),
    /// A user struct or tagged union.
    Named(TypeId),
    /// `Option<T>`: constructors `None` (index 0, no fields) and `Some{x: T}` (index 1).
    Option(Box<Type>),
    /// `Vec<T>`.
    Vec(Box<Type>),
    /// `Set<T>` (ordered, as DDlog's).
    Set(Box<Type>),
    /// `Map<K, V>` (ordered by key, as DDlog's).
    Map(Box<Type>, Box<Type>),
    /// `Group<K, V>`, the value produced by `group_by`; only group functions accept it.
    Group(Box<Type>, Box<Type>),
}

impl Type {
    /// `usize`, which the language treats as `bit<64>`.
    pub const USIZE: Type = Type::Bit(64);
}

/// A named struct or tagged union.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeDef {
    /// Name as declared (`typedef Foo = ...`).
    pub name: String,
    /// Constructors, in declaration order; a struct has exactly one.
    pub ctors: Vec<Ctor>,
}

/// One constructor of a [`TypeDef`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ctor {
    /// Constructor name; for a struct typedef it equals the type name.
    pub name: String,
    /// Named fields in declaration order.
    pub fields: Vec<(String, Type)>,
}
