//! Built-in functions: source names and overloads → [`crate::ir::Builtin`].

use crate::ir::Builtin;
use crate::types::Type;

/// Resolution of a built-in call: the builtin, all parameter types (the first equals the
/// first argument's type) and the result type.
pub type Sig = (Builtin, Vec<Type>, Type);

#[allow(clippy::unnecessary_box_returns, reason = "types nest in boxes")]
fn b(t: &Type) -> Box<Type> {
    Box::new(t.clone())
}

/// True if `name` is a built-in function.
pub fn is_builtin(name: &str) -> bool {
    first_param(name).is_some()
}

/// For a built-in name: `Some(Some(t))` if its first parameter has fixed type `t`,
/// `Some(None)` if the first parameter is polymorphic, `None` if not a built-in.
pub fn first_param(name: &str) -> Option<Option<Type>> {
    let s = Some(Some(Type::String));
    Some(match name {
        "starts_with" | "ends_with" | "split" | "substr" | "replace" | "trim" | "to_lowercase"
        | "to_uppercase" | "parse_dec_u64" | "parse_dec_i64" | "ipv4_parse" | "ipv6_parse"
        | "mac_parse" => return s,
        "join" => Some(Type::Vec(Box::new(Type::String))),
        "ipv4_format" => Some(Type::Bit(32)),
        "ipv6_format" => Some(Type::Bit(128)),
        "mac_format" => Some(Type::Bit(48)),
        "ipv4_mask" | "ipv6_mask" => Some(Type::Bit(8)),
        "to_string" | "len" | "is_empty" | "contains" | "hex" | "min" | "max" | "is_some"
        | "is_none" | "unwrap_or" | "nth" | "push" | "append" | "sort" | "to_set" | "range_vec"
        | "insert" | "union" | "intersection" | "difference" | "to_vec" | "get"
        | "contains_key" | "remove" | "keys" | "values" | "key" | "count" | "count_distinct"
        | "first" | "to_map" | "sum" | "hash64" | "hash128" => None,
        _ => return None,
    })
}

fn is_num(t: &Type) -> bool {
    matches!(t, Type::Bit(_) | Type::Signed(_) | Type::BigInt)
}

/// Resolve built-in `name` applied to `nargs` arguments whose first has type `a0`.
/// `None` if no overload accepts `a0`.
#[allow(
    clippy::many_single_char_names,
    reason = "a compact signature table reads best"
)]
pub fn resolve(name: &str, a0: &Type, nargs: usize) -> Option<Sig> {
    use Builtin as B;
    use Type as T;
    let s = T::String;
    let u = T::USIZE;
    let a = a0.clone();
    let sig = |bi: Builtin, rest: Vec<Type>, ret: Type| {
        let mut ps = vec![a.clone()];
        ps.extend(rest);
        Some((bi, ps, ret))
    };
    match (name, a0) {
        ("to_string", _) => sig(B::ToString(a.clone()), vec![], s),
        ("len", T::String) => sig(B::StrLen, vec![], u),
        ("len", T::Vec(_)) => sig(B::VecLen, vec![], u),
        ("len", T::Set(_)) => sig(B::SetLen, vec![], u),
        ("len", T::Map(..)) => sig(B::MapLen, vec![], u),
        ("is_empty", T::Vec(_)) => sig(B::VecIsEmpty, vec![], T::Bool),
        ("is_empty", T::Set(_)) => sig(B::SetIsEmpty, vec![], T::Bool),
        ("is_empty", T::Map(..)) => sig(B::MapIsEmpty, vec![], T::Bool),
        ("contains", T::String) => sig(B::StrContains, vec![s], T::Bool),
        ("contains", T::Vec(e)) => sig(B::VecContains, vec![(**e).clone()], T::Bool),
        ("contains", T::Set(e)) => sig(B::SetContains, vec![(**e).clone()], T::Bool),
        ("starts_with", T::String) => sig(B::StrStartsWith, vec![s], T::Bool),
        ("ends_with", T::String) => sig(B::StrEndsWith, vec![s], T::Bool),
        ("split", T::String) => sig(B::StrSplit, vec![s], T::Vec(b(&T::String))),
        ("join", T::Vec(e)) if **e == T::String => sig(B::StrJoin, vec![s.clone()], s),
        ("substr", T::String) => sig(B::StrSubstr, vec![u.clone(), u], s),
        ("replace", T::String) => sig(B::StrReplace, vec![s.clone(), s.clone()], s),
        ("trim", T::String) => sig(B::StrTrim, vec![], s),
        ("to_lowercase", T::String) => sig(B::StrToLower, vec![], s),
        ("to_uppercase", T::String) => sig(B::StrToUpper, vec![], s),
        ("parse_dec_u64", T::String) => sig(B::ParseDecU64, vec![], T::Option(b(&T::Bit(64)))),
        ("parse_dec_i64", T::String) => sig(B::ParseDecI64, vec![], T::Option(b(&T::Signed(64)))),
        ("hex", T::Bit(_)) => sig(B::Hex, vec![], s),
        ("min", T::Group(_, v)) if nargs == 1 => sig(B::GroupMin, vec![], (**v).clone()),
        ("max", T::Group(_, v)) if nargs == 1 => sig(B::GroupMax, vec![], (**v).clone()),
        ("min", t) if !matches!(t, T::Group(..)) => sig(B::Min2, vec![a.clone()], a.clone()),
        ("max", t) if !matches!(t, T::Group(..)) => sig(B::Max2, vec![a.clone()], a.clone()),
        ("is_some", T::Option(_)) => sig(B::IsSome, vec![], T::Bool),
        ("is_none", T::Option(_)) => sig(B::IsNone, vec![], T::Bool),
        ("unwrap_or", T::Option(e)) => sig(B::UnwrapOr, vec![(**e).clone()], (**e).clone()),
        ("nth", T::Vec(e)) => sig(B::VecNth, vec![u], T::Option(e.clone())),
        ("push", T::Vec(e)) => sig(B::VecPush, vec![(**e).clone()], a.clone()),
        ("append", T::Vec(_)) => sig(B::VecAppend, vec![a.clone()], a.clone()),
        ("sort", T::Vec(_)) => sig(B::VecSort, vec![], a.clone()),
        ("to_set", T::Vec(e)) => sig(B::VecToSet, vec![], T::Set(e.clone())),
        ("to_set", T::Group(_, v)) => sig(B::GroupToSet, vec![], T::Set(v.clone())),
        ("range_vec", T::Bit(_)) => sig(B::RangeVec, vec![a.clone()], T::Vec(b(&a))),
        ("insert", T::Set(e)) => sig(B::SetInsert, vec![(**e).clone()], a.clone()),
        ("insert", T::Map(k, v)) => {
            sig(B::MapInsert, vec![(**k).clone(), (**v).clone()], a.clone())
        }
        ("union", T::Set(_)) => sig(B::SetUnion, vec![a.clone()], a.clone()),
        ("intersection", T::Set(_)) => sig(B::SetIntersection, vec![a.clone()], a.clone()),
        ("difference", T::Set(_)) => sig(B::SetDifference, vec![a.clone()], a.clone()),
        ("to_vec", T::Set(e)) => sig(B::SetToVec, vec![], T::Vec(e.clone())),
        ("to_vec", T::Group(_, v)) => sig(B::GroupToVec, vec![], T::Vec(v.clone())),
        ("get", T::Map(k, v)) => sig(B::MapGet, vec![(**k).clone()], T::Option(v.clone())),
        ("contains_key", T::Map(k, _)) => sig(B::MapContainsKey, vec![(**k).clone()], T::Bool),
        ("remove", T::Map(k, _)) => sig(B::MapRemove, vec![(**k).clone()], a.clone()),
        ("keys", T::Map(k, _)) => sig(B::MapKeys, vec![], T::Vec(k.clone())),
        ("values", T::Map(_, v)) => sig(B::MapValues, vec![], T::Vec(v.clone())),
        ("key", T::Group(k, _)) => sig(B::GroupKey, vec![], (**k).clone()),
        ("count" | "count_distinct", T::Group(..)) => sig(B::GroupCount, vec![], u),
        ("first", T::Group(_, v)) => sig(B::GroupFirst, vec![], (**v).clone()),
        ("to_map", T::Group(_, v)) => match &**v {
            T::Tuple(kv) if kv.len() == 2 => {
                sig(B::GroupToMap, vec![], T::Map(b(&kv[0]), b(&kv[1])))
            }
            _ => None,
        },
        ("sum", T::Group(_, v)) if is_num(v) => {
            sig(B::GroupSum((**v).clone()), vec![], (**v).clone())
        }
        ("ipv4_parse", T::String) => sig(B::Ipv4Parse, vec![], T::Option(b(&T::Bit(32)))),
        ("ipv6_parse", T::String) => sig(B::Ipv6Parse, vec![], T::Option(b(&T::Bit(128)))),
        ("mac_parse", T::String) => sig(B::MacParse, vec![], T::Option(b(&T::Bit(48)))),
        ("ipv4_format", T::Bit(32)) => sig(B::Ipv4Format, vec![], s),
        ("ipv6_format", T::Bit(128)) => sig(B::Ipv6Format, vec![], s),
        ("mac_format", T::Bit(48)) => sig(B::MacFormat, vec![], s),
        ("ipv4_mask", T::Bit(8)) => sig(B::Ipv4Mask, vec![], T::Bit(32)),
        ("ipv6_mask", T::Bit(8)) => sig(B::Ipv6Mask, vec![], T::Bit(128)),
        ("hash64", _) => sig(B::Hash64, vec![], T::Bit(64)),
        ("hash128", _) => sig(B::Hash128, vec![], T::Bit(128)),
        _ => None,
    }
}
