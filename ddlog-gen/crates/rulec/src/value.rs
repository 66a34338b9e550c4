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
    Bit(U128),
    /// `signed<N>`.
    Signed(I128),
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
    /// A `group_by` group: its key and its distinct values, sorted (one pointer, so that
    /// no variant is wider than two words).
    Group(Arc<GroupValue>),
}

/// The contents of a [`Value::Group`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupValue {
    /// The group's key.
    pub key: Value,
    /// Its distinct values, sorted.
    pub values: Arc<[Value]>,
}

/// A 128-bit integer type kept as two words, its high word of type `$hi` (signed for
/// `i128`), so that the derived order (high word, then the unsigned low word) is the
/// number's: `$wide` is 16-byte aligned, which made every `Value` 32 bytes; with this it is
/// 24 — a quarter less of every row the engine's arrangements hold.
macro_rules! two_words {
    ($(#[$doc:meta])* $name:ident, $wide:ty, $hi:ty) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name {
            hi: $hi,
            lo: u64,
        }

        impl $name {
            /// The number.
            pub const fn get(self) -> $wide {
                ((self.hi as $wide) << 64) | self.lo as $wide
            }
        }

        impl From<$wide> for $name {
            fn from(v: $wide) -> Self {
                $name {
                    hi: (v >> 64) as $hi,
                    lo: v as u64,
                }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.get().fmt(f)
            }
        }
    };
}

two_words!(
    /// A `u128` kept as two words (see `two_words!`).
    U128, u128, u64
);
two_words!(
    /// An `i128` kept as two words (see `two_words!`).
    I128, i128, i64
);

impl Value {
    /// A `bit<N>` value.
    pub fn bit(v: u128) -> Value {
        Value::Bit(v.into())
    }

    /// A `signed<N>` value.
    pub fn signed(v: i128) -> Value {
        Value::Signed(v.into())
    }

    /// A group of `values` (distinct and sorted) under `key`.
    pub fn group(key: Value, values: Arc<[Value]>) -> Value {
        Value::Group(Arc::new(GroupValue { key, values }))
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_three_words() {
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }

    #[test]
    fn wide_integers_keep_their_value_and_order() {
        let us = [
            0,
            1,
            u128::from(u64::MAX),
            u128::from(u64::MAX) + 1,
            u128::MAX - 1,
            u128::MAX,
        ];
        for (i, a) in us.iter().enumerate() {
            assert_eq!(U128::from(*a).get(), *a);
            for b in &us[i..] {
                assert_eq!(Value::bit(*a).cmp(&Value::bit(*b)), a.cmp(b));
            }
        }
        let is = [
            i128::MIN,
            i128::from(i64::MIN) - 1,
            -1,
            0,
            1,
            i128::from(u64::MAX) + 1,
            i128::MAX,
        ];
        for (i, a) in is.iter().enumerate() {
            assert_eq!(I128::from(*a).get(), *a);
            for b in &is[i..] {
                assert_eq!(Value::signed(*a).cmp(&Value::signed(*b)), a.cmp(b));
            }
        }
        assert_eq!(format!("{:?}", Value::signed(-3)), "Signed(-3)");
    }
}
