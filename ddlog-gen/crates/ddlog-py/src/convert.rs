//! Python objects ↔ engine [`Value`]s, driven by the column's static [`Type`].
//!
//! | type                 | Python in                                   | Python out                   |
//! | -------------------- | ------------------------------------------- | ---------------------------- |
//! | `bool`               | `bool`                                      | `bool`                       |
//! | `bit<N>`/`signed<N>` | `int` (not `bool`), range-checked           | `int`                        |
//! | `bigint`             | `int`                                       | `int`                        |
//! | `string`             | `str`                                       | `str`                        |
//! | tuple                | any sequence of the right length            | `tuple`                      |
//! | `Vec<T>`             | any sequence except `str`/`bytes`           | `tuple`                      |
//! | `Set<T>`             | any iterable except `str`/`bytes`           | `frozenset`                  |
//! | `Map<K,V>`           | a mapping, or an iterable of `(k, v)` pairs | `tuple` of `(k, v)`, by key  |
//! | `Option<T>`          | `None`, or a `T`                            | `None`, or the `T`           |
//! | struct / union       | `loom_ddlog.Struct`, or a `dict` of fields  | `loom_ddlog.Struct`          |
//!
//! Maps come out as tuples of pairs (sorted by key, as the engine orders them) so that
//! output rows stay hashable; the same tuple is accepted back as input.

use std::fmt::Write as _;

use num_bigint::BigInt;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFrozenSet, PyInt, PyMapping, PySequence, PyString, PyTuple, PyType,
};
use rulec::ir::Program;
use rulec::types::{Ctor, Type};
use rulec::value::{Row, Value};

/// Where a converted value is going, for error messages.
#[derive(Clone, Copy)]
pub struct Site<'a> {
    /// Relation name.
    pub relation: &'a str,
    /// Column name (or `"key"` for a primary key argument).
    pub column: &'a str,
}

impl Site<'_> {
    fn value_error(&self, msg: impl std::fmt::Display) -> PyErr {
        PyValueError::new_err(format!(
            "relation {}, column {}: {msg}",
            self.relation, self.column
        ))
    }

    fn type_error(&self, msg: impl std::fmt::Display) -> PyErr {
        PyTypeError::new_err(format!(
            "relation {}, column {}: {msg}",
            self.relation, self.column
        ))
    }
}

static STRUCT: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The `loom_ddlog.values.Struct` class.
fn struct_class(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    STRUCT.import(py, "loom_ddlog.values", "Struct")
}

/// The DDlog spelling of a type, for messages and relation metadata.
pub fn type_name(prog: &Program, ty: &Type) -> String {
    let mut out = String::new();
    write_type(prog, ty, &mut out);
    out
}

fn write_type(prog: &Program, ty: &Type, out: &mut String) {
    let list = |tys: &[&Type], out: &mut String| {
        for (i, t) in tys.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_type(prog, t, out);
        }
    };
    match ty {
        Type::Bool => out.push_str("bool"),
        Type::Bit(n) => {
            let _ = write!(out, "bit<{n}>");
        }
        Type::Signed(n) => {
            let _ = write!(out, "signed<{n}>");
        }
        Type::BigInt => out.push_str("bigint"),
        Type::String => out.push_str("string"),
        Type::Tuple(ts) => {
            out.push('(');
            list(&ts.iter().collect::<Vec<_>>(), out);
            out.push(')');
        }
        Type::Named(id) => match prog.types.get(*id) {
            Some(t) => out.push_str(&t.name),
            None => {
                let _ = write!(out, "<type {id}>");
            }
        },
        Type::Option(t) => wrap(prog, "Option", &[t], out),
        Type::Vec(t) => wrap(prog, "Vec", &[t], out),
        Type::Set(t) => wrap(prog, "Set", &[t], out),
        Type::Map(k, v) => wrap(prog, "Map", &[k, v], out),
        Type::Group(k, v) => wrap(prog, "Group", &[k, v], out),
    }
}

fn wrap(prog: &Program, name: &str, args: &[&Type], out: &mut String) {
    out.push_str(name);
    out.push('<');
    for (i, t) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_type(prog, t, out);
    }
    out.push('>');
}

// ---------------------------------------------------------------- Python → Value

/// Convert `obj` to a value of type `ty`.
pub fn from_py(
    prog: &Program,
    ty: &Type,
    obj: &Bound<'_, PyAny>,
    site: Site<'_>,
) -> PyResult<Value> {
    match ty {
        Type::Bool => match obj.cast::<PyBool>() {
            Ok(b) => Ok(Value::Bool(b.is_true())),
            Err(_) => Err(site.type_error(format!("expected bool, got {}", type_of(obj)))),
        },
        Type::Bit(n) => {
            let x = int_of(obj, site, ty, prog)?;
            let max = if *n >= 128 {
                u128::MAX
            } else {
                (1u128 << n) - 1
            };
            match x {
                Int::Small(v) if v >= 0 && (v as u128) <= max => Ok(Value::bit(v as u128)),
                Int::Small(v) => Err(out_of_range(site, &v, prog, ty)),
                Int::Big(b) => match u128::try_from(&b) {
                    Ok(v) if v <= max => Ok(Value::bit(v)),
                    _ => Err(out_of_range(site, &b, prog, ty)),
                },
            }
        }
        Type::Signed(n) => {
            let x = int_of(obj, site, ty, prog)?;
            let n = (*n).clamp(1, 128);
            let (lo, hi) = if n == 128 {
                (i128::MIN, i128::MAX)
            } else {
                (-(1i128 << (n - 1)), (1i128 << (n - 1)) - 1)
            };
            match x {
                Int::Small(v) if v >= lo && v <= hi => Ok(Value::signed(v)),
                Int::Small(v) => Err(out_of_range(site, &v, prog, ty)),
                Int::Big(b) => match i128::try_from(&b) {
                    Ok(v) if v >= lo && v <= hi => Ok(Value::signed(v)),
                    _ => Err(out_of_range(site, &b, prog, ty)),
                },
            }
        }
        Type::BigInt => match int_of(obj, site, ty, prog)? {
            Int::Small(v) => Ok(Value::BigInt(BigInt::from(v).into())),
            Int::Big(b) => Ok(Value::BigInt(b.into())),
        },
        Type::String => match obj.cast::<PyString>() {
            Ok(s) => Ok(Value::Str(s.to_str()?.into())),
            Err(_) => Err(site.type_error(format!("expected str, got {}", type_of(obj)))),
        },
        Type::Tuple(tys) => {
            let items = sequence_items(obj, site, prog, ty)?;
            if items.len() != tys.len() {
                return Err(site.value_error(format!(
                    "expected a tuple of {} elements for {}, got {}",
                    tys.len(),
                    type_name(prog, ty),
                    items.len()
                )));
            }
            let vals = tys
                .iter()
                .zip(&items)
                .map(|(t, x)| from_py(prog, t, x, site))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(Value::Tuple(vals.into()))
        }
        Type::Vec(t) => {
            let items = sequence_items(obj, site, prog, ty)?;
            let vals = items
                .iter()
                .map(|x| from_py(prog, t, x, site))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(Value::Vec(vals.into()))
        }
        Type::Set(t) => {
            let items = iterable_items(obj, site, prog, ty)?;
            let vals = items
                .iter()
                .map(|x| from_py(prog, t, x, site))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(Value::set_from(vals))
        }
        Type::Map(kt, vt) => map_from_py(prog, kt, vt, obj, site, ty),
        Type::Option(t) => {
            if obj.is_none() {
                Ok(Value::none())
            } else {
                Ok(Value::some(from_py(prog, t, obj, site)?))
            }
        }
        Type::Named(id) => named_from_py(prog, *id, obj, site),
        Type::Group(..) => Err(site.type_error("group values cannot be given as input")),
    }
}

/// Convert a row given as a sequence (or a mapping by column name) for relation `rel`.
pub fn row_from_py(prog: &Program, rel: usize, obj: &Bound<'_, PyAny>) -> PyResult<Row> {
    let r = &prog.relations[rel];
    let site = |column: &'static str| Site {
        relation: &r.name,
        column,
    };
    if let Ok(map) = obj.cast::<PyDict>() {
        if map.len() != r.columns.len() {
            return Err(PyValueError::new_err(format!(
                "relation {} has {} columns, got {} fields",
                r.name,
                r.columns.len(),
                map.len()
            )));
        }
        return r
            .columns
            .iter()
            .map(|(name, ty)| {
                let s = Site {
                    relation: &r.name,
                    column: name,
                };
                match map.get_item(name)? {
                    Some(x) => from_py(prog, ty, &x, s),
                    None => Err(s.value_error("missing from the row")),
                }
            })
            .collect();
    }
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(site("*").type_error(format!("a row must be a tuple, got {}", type_of(obj))));
    }
    let seq = obj.cast::<PySequence>().map_err(|_| {
        site("*").type_error(format!("a row must be a tuple, got {}", type_of(obj)))
    })?;
    let n = seq.len()?;
    if n != r.columns.len() {
        return Err(PyValueError::new_err(format!(
            "relation {} has {} columns, got {n}",
            r.name,
            r.columns.len()
        )));
    }
    let mut row = Vec::with_capacity(n);
    for (i, (name, ty)) in r.columns.iter().enumerate() {
        let item = seq.get_item(i)?;
        row.push(from_py(
            prog,
            ty,
            &item,
            Site {
                relation: &r.name,
                column: name,
            },
        )?);
    }
    Ok(row)
}

enum Int {
    Small(i128),
    Big(BigInt),
}

fn int_of(obj: &Bound<'_, PyAny>, site: Site<'_>, ty: &Type, prog: &Program) -> PyResult<Int> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(site.type_error(format!(
            "expected int for {}, got {}",
            type_name(prog, ty),
            type_of(obj)
        )));
    }
    if let Ok(v) = obj.extract::<i64>() {
        return Ok(Int::Small(i128::from(v)));
    }
    Ok(Int::Big(obj.extract::<BigInt>()?))
}

fn out_of_range(site: Site<'_>, v: &dyn std::fmt::Display, prog: &Program, ty: &Type) -> PyErr {
    site.value_error(format!("{v} is out of range for {}", type_name(prog, ty)))
}

fn type_of(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

fn sequence_items<'py>(
    obj: &Bound<'py, PyAny>,
    site: Site<'_>,
    prog: &Program,
    ty: &Type,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(site.type_error(format!(
            "expected a sequence for {}, got {}",
            type_name(prog, ty),
            type_of(obj)
        )));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return Ok(t.iter().collect());
    }
    match obj.cast::<PySequence>() {
        Ok(seq) => seq.try_iter()?.collect(),
        Err(_) => Err(site.type_error(format!(
            "expected a sequence for {}, got {}",
            type_name(prog, ty),
            type_of(obj)
        ))),
    }
}

fn iterable_items<'py>(
    obj: &Bound<'py, PyAny>,
    site: Site<'_>,
    prog: &Program,
    ty: &Type,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let not_iterable = || {
        site.type_error(format!(
            "expected an iterable for {}, got {}",
            type_name(prog, ty),
            type_of(obj)
        ))
    };
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(not_iterable());
    }
    match obj.try_iter() {
        Ok(it) => it.collect(),
        Err(_) => Err(not_iterable()),
    }
}

fn map_from_py(
    prog: &Program,
    kt: &Type,
    vt: &Type,
    obj: &Bound<'_, PyAny>,
    site: Site<'_>,
    ty: &Type,
) -> PyResult<Value> {
    let mut pairs = Vec::new();
    if let Ok(m) = obj.cast::<PyMapping>() {
        if !obj.is_instance_of::<PyTuple>() {
            for item in m.items()?.iter() {
                let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
                pairs.push((from_py(prog, kt, &k, site)?, from_py(prog, vt, &v, site)?));
            }
            return Ok(Value::map_from(pairs));
        }
    }
    for item in iterable_items(obj, site, prog, ty)? {
        let pair = sequence_items(&item, site, prog, ty)?;
        let [k, v] = pair.as_slice() else {
            return Err(site.value_error(format!(
                "expected (key, value) pairs for {}",
                type_name(prog, ty)
            )));
        };
        pairs.push((from_py(prog, kt, k, site)?, from_py(prog, vt, v, site)?));
    }
    Ok(Value::map_from(pairs))
}

fn named_from_py(
    prog: &Program,
    id: usize,
    obj: &Bound<'_, PyAny>,
    site: Site<'_>,
) -> PyResult<Value> {
    let py = obj.py();
    let Some(def) = prog.types.get(id) else {
        return Err(site.type_error(format!("unknown type {id}")));
    };
    let (ctor_ix, fields): (usize, Bound<'_, PyAny>) = if obj.is_instance(struct_class(py)?)? {
        let name: String = obj.getattr("ctor")?.extract()?;
        let Some(ix) = def.ctors.iter().position(|c| c.name == name) else {
            return Err(site.value_error(format!("type {} has no constructor {name}", def.name)));
        };
        (ix, obj.getattr("fields")?)
    } else if let Ok(d) = obj.cast::<PyDict>() {
        let keys: Vec<String> = d
            .keys()
            .iter()
            .map(|k| k.extract())
            .collect::<PyResult<_>>()?;
        let matches: Vec<usize> = if def.ctors.len() == 1 {
            vec![0]
        } else {
            def.ctors
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c.fields.len() == keys.len() && c.fields.iter().all(|(f, _)| keys.contains(f))
                })
                .map(|(i, _)| i)
                .collect()
        };
        let [ix] = matches.as_slice() else {
            return Err(site.value_error(format!(
                "a dict for union {} must name exactly the fields of one constructor; \
                 use loom_ddlog.Struct(ctor, ...) instead",
                def.name
            )));
        };
        (*ix, d.clone().into_any())
    } else {
        return Err(site.type_error(format!(
            "expected loom_ddlog.Struct or dict for {}, got {}",
            def.name,
            type_of(obj)
        )));
    };
    let ctor: &Ctor = &def.ctors[ctor_ix];
    let given = fields.len()?;
    if given != ctor.fields.len() {
        return Err(site.value_error(format!(
            "constructor {} has fields ({}), got {given}",
            ctor.name,
            ctor.fields
                .iter()
                .map(|(f, _)| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut vals = Vec::with_capacity(ctor.fields.len());
    for (fname, fty) in &ctor.fields {
        let Ok(item) = fields.get_item(fname) else {
            return Err(site.value_error(format!("constructor {} needs field {fname}", ctor.name)));
        };
        vals.push(from_py(prog, fty, &item, site)?);
    }
    Ok(Value::Struct(ctor_ix as u32, vals.into()))
}

// ---------------------------------------------------------------- Value → Python

/// Convert `v`, of type `ty`, to a Python object.
pub fn to_py<'py>(
    py: Python<'py>,
    prog: &Program,
    ty: &Type,
    v: &Value,
) -> PyResult<Bound<'py, PyAny>> {
    match (ty, v) {
        (Type::Option(inner), Value::Struct(c, fields)) => {
            if *c == 0 || fields.is_empty() {
                Ok(py.None().into_bound(py))
            } else {
                to_py(py, prog, inner, &fields[0])
            }
        }
        (Type::Named(id), Value::Struct(c, fields)) => {
            let Some(ctor) = prog.types.get(*id).and_then(|t| t.ctors.get(*c as usize)) else {
                return untyped(py, v);
            };
            let kwargs = PyDict::new(py);
            for ((name, fty), x) in ctor.fields.iter().zip(fields.iter()) {
                kwargs.set_item(name, to_py(py, prog, fty, x)?)?;
            }
            struct_class(py)?.call((ctor.name.as_str(), kwargs), None)
        }
        (Type::Tuple(tys), Value::Tuple(items)) => {
            let objs = tys
                .iter()
                .zip(items.iter())
                .map(|(t, x)| to_py(py, prog, t, x))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, objs)?.into_any())
        }
        (Type::Vec(t), Value::Vec(items)) => {
            let objs = items
                .iter()
                .map(|x| to_py(py, prog, t, x))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, objs)?.into_any())
        }
        (Type::Set(t), Value::Set(items)) => {
            let objs = items
                .iter()
                .map(|x| to_py(py, prog, t, x))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyFrozenSet::new(py, &objs)?.into_any())
        }
        (Type::Map(kt, vt), Value::Map(pairs)) => {
            let objs = pairs
                .iter()
                .map(|(k, x)| {
                    let k = to_py(py, prog, kt, k)?;
                    let x = to_py(py, prog, vt, x)?;
                    PyTuple::new(py, [k, x])
                })
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, objs)?.into_any())
        }
        (Type::Group(kt, vt), Value::Group(g)) => {
            let key = to_py(py, prog, kt, &g.key)?;
            let objs = g
                .values
                .iter()
                .map(|x| to_py(py, prog, vt, x))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, [key, PyTuple::new(py, objs)?.into_any()])?.into_any())
        }
        _ => untyped(py, v),
    }
}

/// Scalars (whose Python form does not depend on the type), and a best effort for a value
/// that does not match its type (never expected).
fn untyped<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Bit(x) => match u64::try_from(x.get()) {
            Ok(small) => small.into_pyobject(py)?.into_any(),
            Err(_) => x.get().into_pyobject(py)?.into_any(),
        },
        Value::Signed(x) => match i64::try_from(x.get()) {
            Ok(small) => small.into_pyobject(py)?.into_any(),
            Err(_) => x.get().into_pyobject(py)?.into_any(),
        },
        Value::BigInt(b) => b.as_ref().into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Tuple(items) | Value::Vec(items) | Value::Struct(_, items) => {
            let objs = items
                .iter()
                .map(|x| untyped(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, objs)?.into_any()
        }
        Value::Set(items) => {
            let objs = items
                .iter()
                .map(|x| untyped(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyFrozenSet::new(py, &objs)?.into_any()
        }
        Value::Map(pairs) => {
            let objs = pairs
                .iter()
                .map(|(k, x)| PyTuple::new(py, [untyped(py, k)?, untyped(py, x)?]))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, objs)?.into_any()
        }
        Value::Group(g) => {
            let objs = g
                .values
                .iter()
                .map(|x| untyped(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(
                py,
                [untyped(py, &g.key)?, PyTuple::new(py, objs)?.into_any()],
            )?
            .into_any()
        }
    })
}

/// Convert a row of relation `rel` to a tuple.
pub fn row_to_py<'py>(
    py: Python<'py>,
    prog: &Program,
    rel: usize,
    row: &Row,
) -> PyResult<Bound<'py, PyTuple>> {
    let cols = &prog.relations[rel].columns;
    let objs = row
        .iter()
        .enumerate()
        .map(|(i, v)| match cols.get(i) {
            Some((_, ty)) => to_py(py, prog, ty, v),
            None => untyped(py, v),
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, objs)
}
