//! The one dynamic value type that flows through the engine.
//!
//! Every column of every row is a `Value`. The representation is chosen by the value's
//! static [`crate::types::Type`], which the engine always knows, so values carry no type
//! tags beyond what ordering needs:
//!
//! | type                   | value                                                     |
//! | ---------------------- | --------------------------------------------------------- |
//! | `bool`                 | `Bool`                                                    |
//! | `bit<N>`, `usize`      | `Bit`, always `< 2^N`                                     |
//! | `signed<N>`            | `Signed`, always within N-bit two's complement            |
//! | `bigint`               | `BigInt`                                                  |
//! | `string`               | `Str`                                                     |
//! | tuple                  | `Tuple`                                                   |
//! | struct / union / Option| `Struct(ctor index, fields)`; `None` = `Struct(0, [])`, `Some{x}` = `Struct(1, [x])` |
//! | `Vec<T>`               | `Vec`                                                     |
//! | `Set<T>`               | `Set`, sorted ascending, no duplicates                    |
//! | `Map<K,V>`             | `Map`, sorted by key, keys unique                          |
//! | `Group<K,V>`           | `Group(key, values)`, values sorted ascending, distinct   |
//!
//! The derived `Ord` is the order DDlog prints and sorts by for all types but `signed`
//! mixed with others (never happens: a column has one type).

use std::sync::Arc;

use num_bigint::BigInt;
use serde::{Deserialize, Serialize};

/// A dynamically typed value; see the module docs for the mapping from types.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `bit<N>` (and `usize`).
    Bit(u128),
    /// `signed<N>`.
    Signed(i128),
    /// `bigint`.
    BigInt(Arc<BigInt>),
    /// `string`.
    Str(Arc<str>),
    /// Tuples.
    Tuple(Arc<[Value]>),
    /// Struct, union or `Option` value: constructor index and its fields in order.
    Struct(u32, Arc<[Value]>),
    /// `Vec<T>`.
    Vec(Arc<[Value]>),
    /// `Set<T>`: sorted, distinct.
    Set(Arc<[Value]>),
    /// `Map<K,V>`: sorted by key, keys distinct.
    Map(Arc<[(Value, Value)]>),
    /// A `group_by` group: its key and its distinct values, sorted.
    Group(Arc<Value>, Arc<[Value]>),
}

impl Value {
    /// `()`.
    pub fn unit() -> Value {
        Value::Tuple(Arc::from(Vec::new()))
    }

    /// A string value.
    pub fn str(s: &str) -> Value {
        Value::Str(Arc::from(s))
    }

    /// `None`.
    pub fn none() -> Value {
        Value::Struct(0, Arc::from(Vec::new()))
    }

    /// `Some{x}`.
    pub fn some(x: Value) -> Value {
        Value::Struct(1, Arc::from(vec![x]))
    }

    /// Build a `Set` value from any values (sorts and removes duplicates).
    pub fn set_from(mut items: Vec<Value>) -> Value {
        items.sort();
        items.dedup();
        Value::Set(Arc::from(items))
    }

    /// Build a `Map` value from pairs; a later pair wins over an earlier one with the same key.
    pub fn map_from(items: Vec<(Value, Value)>) -> Value {
        let mut m = std::collections::BTreeMap::new();
        for (k, v) in items {
            m.insert(k, v);
        }
        Value::Map(Arc::from(m.into_iter().collect::<Vec<_>>()))
    }
}

/// One row of a relation: its columns in declaration order.
pub type Row = Vec<Value>;
