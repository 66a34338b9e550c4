//! The built-in functions of [`rulec::ir::Builtin`], over [`Value`]s.

#![allow(
    clippy::many_single_char_names,
    reason = "short names for short-lived arguments"
)]

use std::hash::Hasher;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use rulec::ir::{BinOp, Builtin, Program};
use rulec::types::Type;
use rulec::value::Value;
use siphasher::sip::SipHasher24;
use siphasher::sip128::{Hasher128, SipHasher24 as SipHasher128};

use crate::eval::{binary, err, mismatch, EvalResult};
use crate::format::format_value;

/// Fixed keys of the stable hashes (never change them: hashes end up in flows).
const HASH_K0: u64 = 0x6c6f_6f6d_2d68_6173;
const HASH_K1: u64 = 0x682d_7631_2d6b_6579;

fn s(v: &Value) -> EvalResult<&str> {
    match v {
        Value::Str(x) => Ok(x),
        _ => mismatch("string", v),
    }
}

fn bits(v: &Value) -> EvalResult<u128> {
    match v {
        Value::Bit(x) => Ok(x.get()),
        Value::Signed(x) if x.get() >= 0 => Ok(x.get() as u128),
        _ => mismatch("bit<N>", v),
    }
}

fn seq(v: &Value) -> EvalResult<&Arc<[Value]>> {
    match v {
        Value::Vec(x) | Value::Set(x) => Ok(x),
        _ => mismatch("Vec or Set", v),
    }
}

fn map(v: &Value) -> EvalResult<&Arc<[(Value, Value)]>> {
    match v {
        Value::Map(x) => Ok(x),
        _ => mismatch("Map", v),
    }
}

fn group(v: &Value) -> EvalResult<(&Value, &Arc<[Value]>)> {
    match v {
        Value::Group(g) => Ok((&g.key, &g.values)),
        _ => mismatch("Group", v),
    }
}

fn option(x: Option<Value>) -> Value {
    x.map_or_else(Value::none, Value::some)
}

fn string(x: impl Into<Arc<str>>) -> Value {
    Value::Str(x.into())
}

fn usize_val(n: usize) -> Value {
    Value::bit(n as u128)
}

/// Call built-in `b` on evaluated arguments.
pub fn call(prog: &Program, b: &Builtin, args: &[Value]) -> EvalResult<Value> {
    let arg = |i: usize| -> EvalResult<&Value> {
        match args.get(i) {
            Some(v) => Ok(v),
            None => err(format!("built-in {b:?} expects more arguments")),
        }
    };
    let v = match b {
        Builtin::ToString(ty) => match arg(0)? {
            Value::Str(x) => Value::Str(x.clone()),
            v => string(format_value(prog, ty, v)),
        },
        Builtin::StrLen => usize_val(s(arg(0)?)?.len()),
        Builtin::StrContains => Value::Bool(s(arg(0)?)?.contains(s(arg(1)?)?)),
        Builtin::StrStartsWith => Value::Bool(s(arg(0)?)?.starts_with(s(arg(1)?)?)),
        Builtin::StrEndsWith => Value::Bool(s(arg(0)?)?.ends_with(s(arg(1)?)?)),
        Builtin::StrSplit => {
            let parts: Vec<Value> = s(arg(0)?)?.split(s(arg(1)?)?).map(Value::str).collect();
            Value::Vec(parts.into())
        }
        Builtin::StrJoin => {
            let sep = s(arg(1)?)?;
            let mut out = String::new();
            for (i, x) in seq(arg(0)?)?.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                out.push_str(s(x)?);
            }
            string(out)
        }
        Builtin::StrSubstr => {
            let text = s(arg(0)?)?.as_bytes();
            let end = usize::try_from(bits(arg(2)?)?)
                .unwrap_or(usize::MAX)
                .min(text.len());
            let start = usize::try_from(bits(arg(1)?)?)
                .unwrap_or(usize::MAX)
                .min(end);
            string(String::from_utf8_lossy(&text[start..end]).into_owned())
        }
        Builtin::StrReplace => string(s(arg(0)?)?.replace(s(arg(1)?)?, s(arg(2)?)?)),
        Builtin::StrTrim => string(s(arg(0)?)?.trim()),
        Builtin::StrToLower => string(s(arg(0)?)?.to_lowercase()),
        Builtin::StrToUpper => string(s(arg(0)?)?.to_uppercase()),
        Builtin::ParseDecU64 => option(
            s(arg(0)?)?
                .parse::<u64>()
                .ok()
                .map(|x| Value::bit(x.into())),
        ),
        Builtin::ParseDecI64 => option(
            s(arg(0)?)?
                .parse::<i64>()
                .ok()
                .map(|x| Value::signed(x.into())),
        ),
        Builtin::Hex => string(format!("{:x}", bits(arg(0)?)?)),
        Builtin::Min2 => arg(0)?.clone().min(arg(1)?.clone()),
        Builtin::Max2 => arg(0)?.clone().max(arg(1)?.clone()),
        Builtin::IsSome => Value::Bool(matches!(arg(0)?, Value::Struct(1, _))),
        Builtin::IsNone => Value::Bool(matches!(arg(0)?, Value::Struct(0, _))),
        Builtin::UnwrapOr => match arg(0)? {
            Value::Struct(1, x) if x.len() == 1 => x[0].clone(),
            Value::Struct(0, _) => arg(1)?.clone(),
            v => return mismatch("Option", v),
        },
        Builtin::VecLen | Builtin::SetLen => usize_val(seq(arg(0)?)?.len()),
        Builtin::VecIsEmpty | Builtin::SetIsEmpty => Value::Bool(seq(arg(0)?)?.is_empty()),
        Builtin::VecContains => Value::Bool(seq(arg(0)?)?.contains(arg(1)?)),
        Builtin::SetContains => Value::Bool(seq(arg(0)?)?.binary_search(arg(1)?).is_ok()),
        Builtin::VecNth => {
            let v = seq(arg(0)?)?;
            let i = usize::try_from(bits(arg(1)?)?).unwrap_or(usize::MAX);
            option(v.get(i).cloned())
        }
        Builtin::VecPush => {
            let mut v = seq(arg(0)?)?.to_vec();
            v.push(arg(1)?.clone());
            Value::Vec(v.into())
        }
        Builtin::VecAppend => {
            let mut v = seq(arg(0)?)?.to_vec();
            v.extend(seq(arg(1)?)?.iter().cloned());
            Value::Vec(v.into())
        }
        Builtin::VecSort => {
            let mut v = seq(arg(0)?)?.to_vec();
            v.sort();
            Value::Vec(v.into())
        }
        Builtin::VecToSet => Value::set_from(seq(arg(0)?)?.to_vec()),
        Builtin::RangeVec => match (arg(0)?, arg(1)?) {
            (Value::Bit(a), Value::Bit(b)) => {
                let (a, b) = (a.get(), b.get());
                if b.saturating_sub(a) > 1 << 24 {
                    return err("range_vec too large");
                }
                Value::Vec((a..b).map(Value::bit).collect::<Vec<_>>().into())
            }
            (Value::Signed(a), Value::Signed(b)) => {
                let (a, b) = (a.get(), b.get());
                if b.saturating_sub(a) > 1 << 24 {
                    return err("range_vec too large");
                }
                Value::Vec((a..b).map(Value::signed).collect::<Vec<_>>().into())
            }
            (v, _) => return mismatch("integer range bounds", v),
        },
        Builtin::SetInsert => {
            let set = seq(arg(0)?)?;
            let x = arg(1)?;
            match set.binary_search(x) {
                Ok(_) => arg(0)?.clone(),
                Err(pos) => {
                    let mut v = set.to_vec();
                    v.insert(pos, x.clone());
                    Value::Set(v.into())
                }
            }
        }
        Builtin::SetUnion => {
            let mut v = seq(arg(0)?)?.to_vec();
            v.extend(seq(arg(1)?)?.iter().cloned());
            Value::set_from(v)
        }
        Builtin::SetIntersection => {
            let t = seq(arg(1)?)?;
            let v: Vec<Value> = seq(arg(0)?)?
                .iter()
                .filter(|x| t.binary_search(x).is_ok())
                .cloned()
                .collect();
            Value::Set(v.into())
        }
        Builtin::SetDifference => {
            let t = seq(arg(1)?)?;
            let v: Vec<Value> = seq(arg(0)?)?
                .iter()
                .filter(|x| t.binary_search(x).is_err())
                .cloned()
                .collect();
            Value::Set(v.into())
        }
        Builtin::SetToVec => Value::Vec(seq(arg(0)?)?.clone()),
        Builtin::MapLen => usize_val(map(arg(0)?)?.len()),
        Builtin::MapIsEmpty => Value::Bool(map(arg(0)?)?.is_empty()),
        Builtin::MapGet => {
            let m = map(arg(0)?)?;
            let k = arg(1)?;
            option(
                m.binary_search_by(|(x, _)| x.cmp(k))
                    .ok()
                    .map(|i| m[i].1.clone()),
            )
        }
        Builtin::MapContainsKey => {
            let k = arg(1)?;
            Value::Bool(map(arg(0)?)?.binary_search_by(|(x, _)| x.cmp(k)).is_ok())
        }
        Builtin::MapInsert => {
            let mut m = map(arg(0)?)?.to_vec();
            let (k, v) = (arg(1)?.clone(), arg(2)?.clone());
            match m.binary_search_by(|(x, _)| x.cmp(&k)) {
                Ok(i) => m[i].1 = v,
                Err(i) => m.insert(i, (k, v)),
            }
            Value::Map(m.into())
        }
        Builtin::MapRemove => {
            let mut m = map(arg(0)?)?.to_vec();
            let k = arg(1)?;
            if let Ok(i) = m.binary_search_by(|(x, _)| x.cmp(k)) {
                m.remove(i);
            }
            Value::Map(m.into())
        }
        Builtin::MapKeys => Value::Vec(
            map(arg(0)?)?
                .iter()
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>()
                .into(),
        ),
        Builtin::MapValues => Value::Vec(
            map(arg(0)?)?
                .iter()
                .map(|(_, v)| v.clone())
                .collect::<Vec<_>>()
                .into(),
        ),
        Builtin::GroupKey => group(arg(0)?)?.0.clone(),
        Builtin::GroupCount => usize_val(group(arg(0)?)?.1.len()),
        Builtin::GroupFirst | Builtin::GroupMin => match group(arg(0)?)?.1.first() {
            Some(v) => v.clone(),
            None => return err("empty group"),
        },
        Builtin::GroupMax => match group(arg(0)?)?.1.last() {
            Some(v) => v.clone(),
            None => return err("empty group"),
        },
        Builtin::GroupToVec => Value::Vec(group(arg(0)?)?.1.clone()),
        Builtin::GroupToSet => Value::Set(group(arg(0)?)?.1.clone()),
        Builtin::GroupToMap => {
            let mut pairs = Vec::new();
            for v in group(arg(0)?)?.1.iter() {
                match v {
                    Value::Tuple(t) if t.len() == 2 => pairs.push((t[0].clone(), t[1].clone())),
                    _ => return mismatch("pair", v),
                }
            }
            // Values are sorted, so the largest value of each key comes last and wins.
            Value::map_from(pairs)
        }
        Builtin::GroupSum(ty) => {
            let vals = group(arg(0)?)?.1;
            let mut acc = zero_of(ty);
            for v in vals.iter() {
                acc = binary(BinOp::Add, ty, &acc, v)?;
            }
            acc
        }
        Builtin::Ipv4Parse => option(
            s(arg(0)?)?
                .parse::<Ipv4Addr>()
                .ok()
                .map(|a| Value::bit(u32::from(a).into())),
        ),
        Builtin::Ipv4Format => string(Ipv4Addr::from(bits(arg(0)?)? as u32).to_string()),
        Builtin::Ipv6Parse => option(
            s(arg(0)?)?
                .parse::<Ipv6Addr>()
                .ok()
                .map(|a| Value::bit(u128::from(a))),
        ),
        Builtin::Ipv6Format => string(Ipv6Addr::from(bits(arg(0)?)?).to_string()),
        Builtin::Ipv4Mask => {
            let len = bits(arg(0)?)?;
            if len > 32 {
                return err(format!("IPv4 prefix length {len} > 32"));
            }
            Value::bit(if len == 0 {
                0
            } else {
                u128::from(u32::MAX << (32 - len))
            })
        }
        Builtin::Ipv6Mask => {
            let len = bits(arg(0)?)?;
            if len > 128 {
                return err(format!("IPv6 prefix length {len} > 128"));
            }
            Value::bit(if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            })
        }
        Builtin::MacParse => option(parse_mac(s(arg(0)?)?).map(|m| Value::bit(m.into()))),
        Builtin::MacFormat => string(format_mac(bits(arg(0)?)? as u64)),
        Builtin::Hash64 => {
            let mut h = SipHasher24::new_with_keys(HASH_K0, HASH_K1);
            encode(arg(0)?, &mut h);
            Value::bit(h.finish().into())
        }
        Builtin::Hash128 => {
            let mut h = SipHasher128::new_with_keys(HASH_K0, HASH_K1);
            encode(arg(0)?, &mut h);
            Value::bit(h.finish128().as_u128())
        }
    };
    Ok(v)
}

fn zero_of(ty: &Type) -> Value {
    match ty {
        Type::Signed(_) => Value::signed(0),
        Type::BigInt => Value::BigInt(Arc::new(0.into())),
        _ => Value::bit(0),
    }
}

/// Parse `aa:bb:cc:dd:ee:ff` (exactly six two-digit hex groups).
pub fn parse_mac(text: &str) -> Option<u64> {
    let mut out = 0u64;
    let mut n = 0;
    for part in text.split(':') {
        if part.len() != 2 || n == 6 {
            return None;
        }
        out = (out << 8) | u64::from(u8::from_str_radix(part, 16).ok()?);
        n += 1;
    }
    (n == 6).then_some(out)
}

/// Format a MAC as lowercase, colon-separated hex.
pub fn format_mac(m: u64) -> String {
    let b = m.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// Feed the canonical byte encoding of `v` to `h`: a tag byte per variant, fixed-width
/// little-endian numbers, lengths before variable-size parts. Independent of the platform
/// and of Rust's `Hash` implementations, so hashes are stable across runs and machines.
fn encode(v: &Value, h: &mut impl Hasher) {
    fn len(n: usize, h: &mut impl Hasher) {
        h.write(&(n as u64).to_le_bytes());
    }
    match v {
        Value::Bool(b) => h.write(&[0, u8::from(*b)]),
        Value::Bit(x) => {
            h.write(&[1]);
            h.write(&x.get().to_le_bytes());
        }
        Value::Signed(x) => {
            h.write(&[2]);
            h.write(&x.get().to_le_bytes());
        }
        Value::BigInt(b) => {
            h.write(&[3]);
            let bytes = b.to_signed_bytes_le();
            len(bytes.len(), h);
            h.write(&bytes);
        }
        Value::Str(x) => {
            h.write(&[4]);
            len(x.len(), h);
            h.write(x.as_bytes());
        }
        Value::Tuple(items) | Value::Vec(items) | Value::Set(items) => {
            h.write(&[match v {
                Value::Tuple(_) => 5,
                Value::Vec(_) => 6,
                _ => 7,
            }]);
            len(items.len(), h);
            for x in items.iter() {
                encode(x, h);
            }
        }
        Value::Struct(c, fields) => {
            h.write(&[8]);
            h.write(&c.to_le_bytes());
            len(fields.len(), h);
            for x in fields.iter() {
                encode(x, h);
            }
        }
        Value::Map(pairs) => {
            h.write(&[9]);
            len(pairs.len(), h);
            for (k, x) in pairs.iter() {
                encode(k, h);
                encode(x, h);
            }
        }
        Value::Group(g) => {
            h.write(&[10]);
            encode(&g.key, h);
            len(g.values.len(), h);
            for x in g.values.iter() {
                encode(x, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog() -> Program {
        Program::default()
    }

    #[allow(clippy::needless_pass_by_value, reason = "terser call sites")]
    fn c(b: Builtin, args: Vec<Value>) -> Value {
        call(&prog(), &b, &args).unwrap()
    }

    fn vs(items: &[&str]) -> Value {
        Value::Vec(
            items
                .iter()
                .map(|x| Value::str(x))
                .collect::<Vec<_>>()
                .into(),
        )
    }

    #[test]
    fn strings() {
        assert_eq!(
            c(
                Builtin::StrSplit,
                vec![Value::str("a;b;;c"), Value::str(";")]
            ),
            vs(&["a", "b", "", "c"])
        );
        assert_eq!(
            c(Builtin::StrJoin, vec![vs(&["a", "b"]), Value::str(", ")]),
            Value::str("a, b")
        );
        assert_eq!(
            c(
                Builtin::StrSubstr,
                vec![Value::str("hello"), Value::bit(1), Value::bit(99)]
            ),
            Value::str("ello")
        );
        assert_eq!(c(Builtin::StrLen, vec![Value::str("héllo")]), Value::bit(6));
        assert_eq!(
            c(Builtin::ParseDecU64, vec![Value::str("42")]),
            Value::some(Value::bit(42))
        );
        assert_eq!(
            c(Builtin::ParseDecI64, vec![Value::str("x")]),
            Value::none()
        );
        assert_eq!(c(Builtin::Hex, vec![Value::bit(255)]), Value::str("ff"));
        assert_eq!(
            c(Builtin::ToString(Type::Bit(8)), vec![Value::bit(7)]),
            Value::str("7")
        );
        assert_eq!(
            c(Builtin::ToString(Type::String), vec![Value::str("q\"")]),
            Value::str("q\"")
        );
        assert_eq!(
            c(Builtin::StrToUpper, vec![Value::str("ab")]),
            Value::str("AB")
        );
        assert_eq!(
            c(Builtin::StrTrim, vec![Value::str(" ab ")]),
            Value::str("ab")
        );
    }

    #[test]
    fn options_and_collections() {
        assert_eq!(
            c(Builtin::UnwrapOr, vec![Value::none(), Value::bit(3)]),
            Value::bit(3)
        );
        assert_eq!(
            c(Builtin::IsSome, vec![Value::some(Value::bit(1))]),
            Value::Bool(true)
        );
        let set = Value::set_from(vec![Value::bit(3), Value::bit(1)]);
        assert_eq!(
            c(Builtin::SetInsert, vec![set.clone(), Value::bit(2)]),
            Value::set_from(vec![Value::bit(1), Value::bit(2), Value::bit(3)])
        );
        assert_eq!(
            c(Builtin::SetContains, vec![set.clone(), Value::bit(3)]),
            Value::Bool(true)
        );
        let other = Value::set_from(vec![Value::bit(3), Value::bit(4)]);
        assert_eq!(
            c(Builtin::SetIntersection, vec![set.clone(), other.clone()]),
            Value::set_from(vec![Value::bit(3)])
        );
        assert_eq!(
            c(Builtin::SetDifference, vec![set.clone(), other.clone()]),
            Value::set_from(vec![Value::bit(1)])
        );
        assert_eq!(
            c(Builtin::SetUnion, vec![set, other]).clone(),
            Value::set_from(vec![Value::bit(1), Value::bit(3), Value::bit(4)])
        );
        assert_eq!(
            c(Builtin::VecNth, vec![vs(&["a"]), Value::bit(1)]),
            Value::none()
        );
        assert_eq!(
            c(Builtin::RangeVec, vec![Value::bit(1), Value::bit(3)]),
            Value::Vec(vec![Value::bit(1), Value::bit(2)].into())
        );
        let m = Value::map_from(vec![(Value::bit(1), Value::str("a"))]);
        let m2 = c(
            Builtin::MapInsert,
            vec![m.clone(), Value::bit(0), Value::str("z")],
        );
        assert_eq!(
            c(Builtin::MapKeys, vec![m2.clone()]),
            Value::Vec(vec![Value::bit(0), Value::bit(1)].into())
        );
        assert_eq!(
            c(Builtin::MapGet, vec![m2.clone(), Value::bit(1)]),
            Value::some(Value::str("a"))
        );
        assert_eq!(c(Builtin::MapRemove, vec![m2, Value::bit(0)]), m);
    }

    #[test]
    fn groups() {
        let pair = |a: u128, b: u128| Value::Tuple(vec![Value::bit(a), Value::bit(b)].into());
        let g = Value::group(
            Value::bit(9),
            vec![pair(1, 5), pair(1, 7), pair(2, 1)].into(),
        );
        assert_eq!(c(Builtin::GroupKey, vec![g.clone()]), Value::bit(9));
        assert_eq!(c(Builtin::GroupCount, vec![g.clone()]), Value::bit(3));
        assert_eq!(c(Builtin::GroupMax, vec![g.clone()]), pair(2, 1));
        assert_eq!(
            c(Builtin::GroupToMap, vec![g]),
            Value::map_from(vec![
                (Value::bit(1), Value::bit(7)),
                (Value::bit(2), Value::bit(1))
            ])
        );
        let g = Value::group(Value::unit(), vec![Value::bit(200), Value::bit(100)].into());
        assert_eq!(c(Builtin::GroupSum(Type::Bit(8)), vec![g]), Value::bit(44));
    }

    #[test]
    fn addresses() {
        assert_eq!(
            c(Builtin::Ipv4Parse, vec![Value::str("10.0.0.1")]),
            Value::some(Value::bit(0x0a00_0001))
        );
        assert_eq!(
            c(Builtin::Ipv4Parse, vec![Value::str("10.0.0")]),
            Value::none()
        );
        assert_eq!(
            c(Builtin::Ipv4Format, vec![Value::bit(0xc0a8_0101)]),
            Value::str("192.168.1.1")
        );
        assert_eq!(
            c(Builtin::Ipv4Mask, vec![Value::bit(24)]),
            Value::bit(0xffff_ff00)
        );
        assert!(call(&prog(), &Builtin::Ipv4Mask, &[Value::bit(33)]).is_err());
        let v6 = c(Builtin::Ipv6Parse, vec![Value::str("2001:DB8:0:0:0:0:0:1")]);
        assert_eq!(v6, Value::some(Value::bit(0x2001_0db8_u128 << 96 | 1)));
        assert_eq!(
            c(
                Builtin::Ipv6Format,
                vec![Value::bit(0x2001_0db8_u128 << 96 | 1)]
            ),
            Value::str("2001:db8::1")
        );
        assert_eq!(
            c(Builtin::Ipv6Mask, vec![Value::bit(8)]),
            Value::bit(0xff_u128 << 120)
        );
        assert_eq!(
            c(Builtin::MacParse, vec![Value::str("AA:bb:cc:dd:ee:0f")]),
            Value::some(Value::bit(0xaabb_ccdd_ee0f))
        );
        assert_eq!(
            c(Builtin::MacParse, vec![Value::str("aa:bb:cc:dd:ee")]),
            Value::none()
        );
        assert_eq!(
            c(Builtin::MacFormat, vec![Value::bit(0x0200_0000_0001)]),
            Value::str("02:00:00:00:00:01")
        );
    }

    #[test]
    fn hashes_are_stable() {
        let v = Value::Tuple(vec![Value::str("ls0"), Value::bit(7)].into());
        let h1 = c(Builtin::Hash64, vec![v.clone()]);
        assert_eq!(h1, c(Builtin::Hash64, vec![v.clone()]));
        assert_ne!(h1, c(Builtin::Hash64, vec![Value::str("ls0")]));
        // Pinned values: a change here changes every deployed hash.
        assert_eq!(
            c(Builtin::Hash64, vec![Value::str("42")]),
            Value::bit(4_433_682_737_802_393_271)
        );
        assert_eq!(
            c(Builtin::Hash64, vec![Value::str("")]),
            Value::bit(11_449_366_065_182_478_886)
        );
        let Value::Bit(x) = c(Builtin::Hash128, vec![v]) else {
            panic!()
        };
        assert!(x.get() > u128::from(u64::MAX));
    }
}
