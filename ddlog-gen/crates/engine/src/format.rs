//! DDlog's text format for values and records: `R{.a = 1, .b = "x"}`.
//!
//! Strings are quoted with DDlog's escapes, vectors and sets print as `[a, b]`, maps as
//! `[(k, v), ...]`, tuples as `(a, b)`, structs and union constructors as `C{.f = v}`
//! (`C{}` without fields), `None` as `None{}` and `Some` as `Some{.x = v}`, booleans as
//! `true`/`false`, numbers in decimal.

use std::fmt::Write as _;

use rulec::ir::{Program, RelId};
use rulec::types::Type;
use rulec::value::{Row, Value};

/// Format `v`, whose type is `ty`.
pub fn format_value(program: &Program, ty: &Type, v: &Value) -> String {
    let mut out = String::new();
    write_value(program, ty, v, &mut out);
    out
}

/// Format a row of `rel` as a record: `R{.a = 1, .b = "x"}`.
pub fn format_record(program: &Program, rel: RelId, row: &Row) -> String {
    let r = &program.relations[rel];
    let mut out = String::new();
    out.push_str(&r.name);
    out.push('{');
    for (i, v) in row.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match r.columns.get(i) {
            Some((name, ty)) => {
                let _ = write!(out, ".{name} = ");
                write_value(program, ty, v, &mut out);
            }
            None => write_untyped(v, &mut out),
        }
    }
    out.push('}');
    out
}

/// Format a row as positional arguments `(1, "x")`, as `insert R(...)` takes them.
pub fn format_args(program: &Program, rel: RelId, row: &Row) -> String {
    let r = &program.relations[rel];
    let mut out = String::from("(");
    for (i, v) in row.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match r.columns.get(i) {
            Some((_, ty)) => write_value(program, ty, v, &mut out),
            None => write_untyped(v, &mut out),
        }
    }
    out.push(')');
    out
}

/// Quote a string with DDlog's escapes.
pub fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_list<'a>(
    program: &Program,
    ty: &Type,
    items: impl Iterator<Item = &'a Value>,
    out: &mut String,
) {
    out.push('[');
    for (i, x) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_value(program, ty, x, out);
    }
    out.push(']');
}

fn write_value(program: &Program, ty: &Type, v: &Value, out: &mut String) {
    match (ty, v) {
        (_, Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
        (_, Value::Bit(x)) => {
            let _ = write!(out, "{}", x.get());
        }
        (_, Value::Signed(x)) => {
            let _ = write!(out, "{}", x.get());
        }
        (_, Value::BigInt(x)) => {
            let _ = write!(out, "{x}");
        }
        (_, Value::Str(s)) => quote(s, out),
        (Type::Tuple(tys), Value::Tuple(items)) => {
            out.push('(');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match tys.get(i) {
                    Some(t) => write_value(program, t, x, out),
                    None => write_untyped(x, out),
                }
            }
            out.push(')');
        }
        (Type::Option(inner), Value::Struct(c, fields)) => {
            if *c == 0 || fields.is_empty() {
                out.push_str("None{}");
            } else {
                out.push_str("Some{.x = ");
                write_value(program, inner, &fields[0], out);
                out.push('}');
            }
        }
        (Type::Named(tid), Value::Struct(c, fields)) => {
            match program
                .types
                .get(*tid)
                .and_then(|t| t.ctors.get(*c as usize))
            {
                Some(ctor) => {
                    out.push_str(&ctor.name);
                    out.push('{');
                    for (i, x) in fields.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        match ctor.fields.get(i) {
                            Some((name, t)) => {
                                let _ = write!(out, ".{name} = ");
                                write_value(program, t, x, out);
                            }
                            None => write_untyped(x, out),
                        }
                    }
                    out.push('}');
                }
                None => write_untyped(v, out),
            }
        }
        (Type::Vec(t) | Type::Set(t), Value::Vec(items) | Value::Set(items)) => {
            write_list(program, t, items.iter(), out);
        }
        (Type::Map(kt, vt), Value::Map(pairs)) => {
            out.push('[');
            for (i, (k, x)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('(');
                write_value(program, kt, k, out);
                out.push_str(", ");
                write_value(program, vt, x, out);
                out.push(')');
            }
            out.push(']');
        }
        (Type::Group(kt, vt), Value::Group(g)) => {
            out.push('(');
            write_value(program, kt, &g.key, out);
            out.push_str(", ");
            write_list(program, vt, g.values.iter(), out);
            out.push(')');
        }
        _ => write_untyped(v, out),
    }
}

/// Best-effort formatting when the type does not describe the value (never expected).
fn write_untyped(v: &Value, out: &mut String) {
    match v {
        Value::Bool(_) | Value::Bit(_) | Value::Signed(_) | Value::BigInt(_) | Value::Str(_) => {
            write_value(&EMPTY, &Type::Bool, v, out);
        }
        Value::Tuple(items) => {
            out.push('(');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_untyped(x, out);
            }
            out.push(')');
        }
        Value::Struct(c, fields) => {
            let _ = write!(out, "C{c}{{");
            for (i, x) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_untyped(x, out);
            }
            out.push('}');
        }
        Value::Vec(items) | Value::Set(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_untyped(x, out);
            }
            out.push(']');
        }
        Value::Map(pairs) => {
            out.push('[');
            for (i, (k, x)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('(');
                write_untyped(k, out);
                out.push_str(", ");
                write_untyped(x, out);
                out.push(')');
            }
            out.push(']');
        }
        Value::Group(g) => {
            out.push('(');
            write_untyped(&g.key, out);
            out.push_str(", [");
            for (i, x) in g.values.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_untyped(x, out);
            }
            out.push_str("])");
        }
    }
}

static EMPTY: Program = Program {
    types: Vec::new(),
    relations: Vec::new(),
    functions: Vec::new(),
    rules: Vec::new(),
    strata: Vec::new(),
};

#[cfg(test)]
mod tests {
    use super::*;
    use rulec::ir::{Relation, Role};
    use rulec::types::{Ctor, TypeDef};

    #[test]
    fn records() {
        let prog = Program {
            types: vec![TypeDef {
                name: "Addr".into(),
                ctors: vec![
                    Ctor {
                        name: "V4".into(),
                        fields: vec![("a".into(), Type::Bit(32))],
                    },
                    Ctor {
                        name: "NoAddr".into(),
                        fields: vec![],
                    },
                ],
            }],
            relations: vec![Relation {
                name: "R".into(),
                role: Role::Input,
                columns: vec![
                    ("a".into(), Type::Bit(8)),
                    ("b".into(), Type::String),
                    ("c".into(), Type::Option(Box::new(Type::Signed(8)))),
                    ("d".into(), Type::Vec(Box::new(Type::Named(0)))),
                    (
                        "e".into(),
                        Type::Tuple(vec![
                            Type::Bool,
                            Type::Map(Box::new(Type::Bit(8)), Box::new(Type::String)),
                        ]),
                    ),
                ],
                primary_key: None,
                source: String::new(),
            }],
            functions: vec![],
            rules: vec![],
            strata: vec![],
        };
        let row = vec![
            Value::bit(1),
            Value::str("x\"y\\\n"),
            Value::some(Value::signed(-3)),
            Value::Vec(
                vec![
                    Value::Struct(0, vec![Value::bit(5)].into()),
                    Value::Struct(1, vec![].into()),
                ]
                .into(),
            ),
            Value::Tuple(
                vec![
                    Value::Bool(true),
                    Value::map_from(vec![(Value::bit(1), Value::str("a"))]),
                ]
                .into(),
            ),
        ];
        assert_eq!(
            format_record(&prog, 0, &row),
            r#"R{.a = 1, .b = "x\"y\\\n", .c = Some{.x = -3}, .d = [V4{.a = 5}, NoAddr{}], .e = (true, [(1, "a")])}"#
        );
        assert_eq!(
            format_value(&prog, &Type::Option(Box::new(Type::Bool)), &Value::none()),
            "None{}"
        );
        assert_eq!(
            format_args(&prog, 0, &row),
            r#"(1, "x\"y\\\n", Some{.x = -3}, [V4{.a = 5}, NoAddr{}], (true, [(1, "a")]))"#
        );
    }
}
