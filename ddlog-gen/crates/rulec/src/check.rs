//! Declarations: name resolution of types, constructors, relations and functions, and the
//! checking context shared by expression checking ([`crate::expr`]) and rule lowering
//! ([`crate::lower`]).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use crate::ast::{span_str, Decl, Span, TypeDefBody, TypeExpr};
use crate::error::CompileError;
use crate::ir::{Function, PrimaryKey, Relation, Role};
use crate::types::{Ctor, Type, TypeDef, TypeId};

type R<T> = Result<T, CompileError>;

/// Signature of a user function.
#[derive(Clone, Debug)]
pub struct FuncSig {
    /// Name.
    pub name: String,
    /// Parameters.
    pub params: Vec<(String, Type)>,
    /// Return type.
    pub ret: Type,
}

enum TypeEntry {
    Alias(TypeExpr, Option<Type>),
    Named(TypeId),
}

/// While checking a primary key: the row variable's name and the relation's columns.
pub type PkRow = Option<(String, Vec<(String, Type)>)>;

/// Everything known about the program's declarations.
pub struct Ctx {
    /// File names, indexed by [`Span::file`].
    pub files: Vec<String>,
    /// Named types.
    pub types: Vec<TypeDef>,
    type_names: HashMap<String, RefCell<TypeEntry>>,
    resolving: RefCell<HashSet<String>>,
    /// Constructor name → (type, constructor index).
    pub ctors: HashMap<String, (TypeId, u32)>,
    /// Relations.
    pub rels: Vec<Relation>,
    /// Relation declaration positions.
    pub rel_spans: Vec<Span>,
    rel_index: HashMap<String, usize>,
    /// User function signatures.
    pub funcs: Vec<FuncSig>,
    func_index: HashMap<String, usize>,
    /// Row variable name and columns while checking a primary-key expression.
    pub pk_row: RefCell<PkRow>,
    /// Phrase appended to "unbound variable" errors (e.g. " in the rule head").
    pub unbound_note: RefCell<&'static str>,
}

/// Find `name` in a map: exact match, else by last `::` segment when unique.
fn lookup<'m, V>(map: &'m HashMap<String, V>, name: &str) -> Option<&'m V> {
    if let Some(v) = map.get(name) {
        return Some(v);
    }
    let last = name.rsplit("::").next().unwrap_or(name);
    let mut found = map
        .iter()
        .filter(|(k, _)| k.rsplit("::").next() == Some(last));
    let first = found.next()?;
    if found.next().is_some() {
        return None;
    }
    Some(first.1)
}

/// Render a type in DDlog syntax.
pub fn show(types: &[TypeDef], t: &Type) -> String {
    let list = |ts: &[&Type]| {
        ts.iter()
            .map(|t| show(types, t))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match t {
        Type::Bool => "bool".into(),
        Type::Bit(n) => format!("bit<{n}>"),
        Type::Signed(n) => format!("signed<{n}>"),
        Type::BigInt => "bigint".into(),
        Type::String => "string".into(),
        Type::Tuple(ts) => format!("({})", list(&ts.iter().collect::<Vec<_>>())),
        Type::Named(id) => types
            .get(*id)
            .map_or_else(|| format!("#{id}"), |d| d.name.clone()),
        Type::Option(a) => format!("Option<{}>", show(types, a)),
        Type::Vec(a) => format!("Vec<{}>", show(types, a)),
        Type::Set(a) => format!("Set<{}>", show(types, a)),
        Type::Map(k, v) => format!("Map<{}>", list(&[k, v])),
        Type::Group(k, v) => format!("Group<{}>", list(&[k, v])),
    }
}

impl Ctx {
    /// Render a type.
    pub fn show(&self, t: &Type) -> String {
        show(&self.types, t)
    }

    /// `file:line:col` of a span.
    pub fn pos(&self, s: Span) -> String {
        span_str(s, &self.files)
    }

    /// Find a relation.
    pub fn relation(&self, name: &str) -> Option<usize> {
        lookup(&self.rel_index, name).copied()
    }

    /// Find a user function.
    pub fn function(&self, name: &str) -> Option<usize> {
        lookup(&self.func_index, name).copied()
    }

    /// Find a user constructor.
    pub fn ctor(&self, name: &str) -> Option<(TypeId, u32)> {
        lookup(&self.ctors, name).copied()
    }

    /// Build the context from all declarations: types, relations, function signatures.
    pub fn new(files: Vec<String>, decls: &[Decl]) -> R<Ctx> {
        let mut cx = Ctx {
            files,
            types: Vec::new(),
            type_names: HashMap::new(),
            resolving: RefCell::new(HashSet::new()),
            ctors: HashMap::new(),
            rels: Vec::new(),
            rel_spans: Vec::new(),
            rel_index: HashMap::new(),
            funcs: Vec::new(),
            func_index: HashMap::new(),
            pk_row: RefCell::new(None),
            unbound_note: RefCell::new(""),
        };
        // 1. type names
        for d in decls {
            if let Decl::TypeDef { name, body, span } = d {
                if cx.type_names.contains_key(name) || builtin_type_name(name) {
                    return Err(span.error(format!("duplicate declaration of type `{name}`")));
                }
                let entry = match body {
                    TypeDefBody::Alias(t) => TypeEntry::Alias(t.clone(), None),
                    TypeDefBody::Union(ctors) => {
                        let id = cx.types.len();
                        cx.types.push(TypeDef {
                            name: name.clone(),
                            ctors: Vec::new(),
                        });
                        for (i, c) in ctors.iter().enumerate() {
                            if cx.ctors.contains_key(&c.name)
                                || c.name == "Some"
                                || c.name == "None"
                            {
                                return Err(c.span.error(format!(
                                    "duplicate declaration of constructor `{}`",
                                    c.name
                                )));
                            }
                            cx.ctors.insert(c.name.clone(), (id, i as u32));
                        }
                        TypeEntry::Named(id)
                    }
                };
                cx.type_names.insert(name.clone(), RefCell::new(entry));
            }
        }
        // 2. constructor fields
        for d in decls {
            if let Decl::TypeDef {
                name,
                body: TypeDefBody::Union(ctors),
                ..
            } = d
            {
                let id = cx.type_id(name);
                let mut out = Vec::new();
                for c in ctors {
                    let mut fields: Vec<(String, Type)> = Vec::new();
                    for (f, t, s) in &c.fields {
                        if fields.iter().any(|(g, _)| g == f) {
                            return Err(s.error(format!(
                                "duplicate field `{f}` in constructor `{}`",
                                c.name
                            )));
                        }
                        fields.push((f.clone(), cx.resolve(t)?));
                    }
                    out.push(Ctor {
                        name: c.name.clone(),
                        fields,
                    });
                }
                cx.types[id].ctors = out;
            }
        }
        // aliases (to report errors in unused ones too)
        for d in decls {
            if let Decl::TypeDef {
                body: TypeDefBody::Alias(t),
                ..
            } = d
            {
                cx.resolve(t)?;
            }
        }
        // 3. relations
        for d in decls {
            if let Decl::Relation {
                kind,
                name,
                columns,
                span,
                ..
            } = d
            {
                if cx.rel_index.contains_key(name) {
                    return Err(span.error(format!("duplicate declaration of relation `{name}`")));
                }
                let mut cols: Vec<(String, Type)> = Vec::new();
                for (c, t, s) in columns {
                    if cols.iter().any(|(d, _)| d == c) {
                        return Err(s.error(format!("duplicate column `{c}` in relation `{name}`")));
                    }
                    cols.push((c.clone(), cx.resolve(t)?));
                }
                let role = match kind {
                    crate::ast::RelKind::Input => Role::Input,
                    crate::ast::RelKind::Output => Role::Output,
                    crate::ast::RelKind::Internal => Role::Internal,
                };
                cx.rel_index.insert(name.clone(), cx.rels.len());
                cx.rels.push(Relation {
                    name: name.clone(),
                    role,
                    columns: cols,
                    primary_key: None,
                    source: cx.pos(*span),
                });
                cx.rel_spans.push(*span);
            }
        }
        // 4. function signatures
        for d in decls {
            if let Decl::Function {
                name,
                params,
                ret,
                span,
                ..
            } = d
            {
                if cx.func_index.contains_key(name) {
                    return Err(span.error(format!("duplicate declaration of function `{name}`")));
                }
                let mut ps: Vec<(String, Type)> = Vec::new();
                for (p, t, s) in params {
                    if ps.iter().any(|(q, _)| q == p) {
                        return Err(s.error(format!("duplicate parameter `{p}`")));
                    }
                    ps.push((p.clone(), cx.resolve(t)?));
                }
                let ret = match ret {
                    Some(t) => cx.resolve(t)?,
                    None => Type::Tuple(vec![]),
                };
                cx.func_index.insert(name.clone(), cx.funcs.len());
                cx.funcs.push(FuncSig {
                    name: name.clone(),
                    params: ps,
                    ret,
                });
            }
        }
        Ok(cx)
    }

    fn type_id(&self, name: &str) -> TypeId {
        match &*self.type_names[name].borrow() {
            TypeEntry::Named(id) => *id,
            TypeEntry::Alias(..) => unreachable!("union"),
        }
    }

    /// Resolve a written type.
    pub fn resolve(&self, t: &TypeExpr) -> R<Type> {
        match t {
            TypeExpr::Width(signed, w, _) => Ok(if *signed {
                Type::Signed(*w)
            } else {
                Type::Bit(*w)
            }),
            TypeExpr::Tuple(ts, _) => Ok(Type::Tuple(
                ts.iter().map(|t| self.resolve(t)).collect::<R<_>>()?,
            )),
            TypeExpr::Named(name, args, span) => {
                let want = |n: usize| -> R<()> {
                    if args.len() == n {
                        Ok(())
                    } else {
                        let s = if n == 1 { "" } else { "s" };
                        Err(span.error(format!(
                            "type `{name}` expects {n} type argument{s}, found {}",
                            args.len()
                        )))
                    }
                };
                let arg = |i: usize| self.resolve(&args[i]).map(Box::new);
                match name.as_str() {
                    "bool" => want(0).map(|()| Type::Bool),
                    "string" => want(0).map(|()| Type::String),
                    "bigint" => want(0).map(|()| Type::BigInt),
                    "usize" => want(0).map(|()| Type::USIZE),
                    "bit" | "signed" => {
                        Err(span.error(format!("type `{name}` needs a width, e.g. `{name}<32>`")))
                    }
                    "Vec" => want(1).and_then(|()| Ok(Type::Vec(arg(0)?))),
                    "Set" => want(1).and_then(|()| Ok(Type::Set(arg(0)?))),
                    "Option" => want(1).and_then(|()| Ok(Type::Option(arg(0)?))),
                    "Map" => want(2).and_then(|()| Ok(Type::Map(arg(0)?, arg(1)?))),
                    "Group" => want(2).and_then(|()| Ok(Type::Group(arg(0)?, arg(1)?))),
                    _ => {
                        let Some(entry) = lookup(&self.type_names, name) else {
                            return Err(span.error(format!("unknown type `{name}`")));
                        };
                        want(0)?;
                        let alias = match &*entry.borrow() {
                            TypeEntry::Named(id) => return Ok(Type::Named(*id)),
                            TypeEntry::Alias(_, Some(t)) => return Ok(t.clone()),
                            TypeEntry::Alias(te, None) => te.clone(),
                        };
                        if !self.resolving.borrow_mut().insert(name.clone()) {
                            return Err(span.error(format!("type alias `{name}` refers to itself")));
                        }
                        let r = self.resolve(&alias);
                        self.resolving.borrow_mut().remove(name);
                        let r = r?;
                        *entry.borrow_mut() = TypeEntry::Alias(alias, Some(r.clone()));
                        Ok(r)
                    }
                }
            }
        }
    }

    /// Check a function body; returns the IR function.
    pub fn function_body(&self, name: &str, body: &crate::ast::Expr) -> R<Function> {
        let sig = self.funcs[self.func_index[name]].clone();
        let mut scope = sig.params.clone();
        *self.unbound_note.borrow_mut() = "";
        let (e, _) = self.expr(body, &mut scope, Some(&sig.ret))?;
        Ok(Function {
            name: sig.name,
            params: sig.params,
            ret: sig.ret,
            body: e,
        })
    }

    /// Check the primary key of relation `name` and record it.
    pub fn primary_key(
        &mut self,
        name: &str,
        var: &str,
        e: &crate::ast::Expr,
        span: Span,
        input: bool,
    ) -> R<()> {
        if !input {
            return Err(span.error(format!(
                "relation `{name}` is not an input relation; only input relations have primary keys"
            )));
        }
        let id = self.rel_index[name];
        *self.pk_row.borrow_mut() = Some((var.to_string(), self.rels[id].columns.clone()));
        let mut scope = self.rels[id]
            .columns
            .iter()
            .map(|(_, t)| ("#col".to_string(), t.clone()))
            .collect();
        let r = self.expr(e, &mut scope, None);
        *self.pk_row.borrow_mut() = None;
        let (expr, ty) = r?;
        self.rels[id].primary_key = Some(PrimaryKey { expr, ty });
        Ok(())
    }
}

fn builtin_type_name(n: &str) -> bool {
    matches!(
        n,
        "bool"
            | "string"
            | "bigint"
            | "usize"
            | "bit"
            | "signed"
            | "Vec"
            | "Set"
            | "Map"
            | "Option"
            | "Group"
    )
}
