//! Parser of DDlog command scripts (`.dat`), checked against a compiled program.
//!
//! The format (one command per `;`, several updates per command separated by `,`):
//! `start;` `commit;` `commit dump_changes;` `rollback;` `dump;` `dump R;` `clear R;`
//! `echo text;` `exit;` and updates `insert R(args)`, `insert R{.f = v, ...}`,
//! `insert_or_update R(...)`, `delete R(...)`, `delete_key R key`,
//! `modify R key <- R{.f = v, ...}`. Comments are `#` and `//` to end of line.
//! Argument values are literals of the column types (numbers, strings, `true`/`false`,
//! tuples, vectors `[..]`, sets/maps as vectors, struct/union constructors `C{..}`,
//! `None`/`Some{..}`), converted to [`Value`]s by the column's type.

use crate::ast::{resolve_file, span_str, Args, Expr, ExprKind, Span};
use crate::check::show;
use crate::error::CompileError;
use crate::expr::int_value;
use crate::ir::{Program, RelId, Role, UnOp};
use crate::lexer::{Lexer, Tok, Token};
use crate::parser::Parser;
use crate::types::Type;
use crate::value::{Row, Value};

/// One parsed script command.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// `start;`
    Start,
    /// `commit;` or `commit dump_changes;`
    Commit {
        /// Print the output changes.
        dump_changes: bool,
    },
    /// `rollback;`
    Rollback,
    /// One or more updates separated by commas, ended by `;`.
    Updates(Vec<Update>),
    /// `dump;` (all output relations) or `dump R;`.
    Dump(Option<RelId>),
    /// `echo text;` (text up to the `;`, trimmed).
    Echo(String),
    /// `exit;`
    Exit,
}

/// One update to an input relation.
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
    /// `insert R(...)`: fails if the relation has a primary key and the key exists with
    /// a different row.
    Insert(RelId, Row),
    /// `insert_or_update R(...)`: replaces the row with the same key.
    InsertOrUpdate(RelId, Row),
    /// `delete R(...)`.
    Delete(RelId, Row),
    /// `delete_key R k`.
    DeleteKey(RelId, Value),
    /// `modify R k <- R{.f = v}`: `(column index, new value)` pairs.
    Modify(RelId, Value, Vec<(usize, Value)>),
    /// `clear R;` (parsed as a one-update command): delete every row of R.
    Clear(RelId),
}

/// A command and the position where it starts (`file:line:col`), for runtime errors.
pub type Located = (Command, String);

/// Parse a whole script. The first syntax or type error is returned with its position.
pub fn parse_script(
    program: &Program,
    file: &str,
    text: &str,
) -> Result<Vec<Located>, CompileError> {
    let files = vec![file.to_string()];
    // Nested values recurse in the parser: use a large stack, as the compiler does.
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .stack_size(crate::COMPILER_STACK)
            .spawn_scoped(scope, || {
                parse_inner(program, &files, text).map_err(|e| resolve_file(e, &files))
            });
        if let Ok(handle) = worker {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        } else {
            parse_inner(program, &files, text).map_err(|e| resolve_file(e, &files))
        }
    })
}

type R<T> = Result<T, CompileError>;

fn parse_inner(program: &Program, files: &[String], text: &str) -> R<Vec<Located>> {
    let mut lex = Lexer::new(text, 0);
    lex.hash_comments = true;
    lex.interpolation = false;
    let mut out = Vec::new();
    loop {
        lex.skip_trivia()?;
        let first = lex.next_token()?;
        let span = first.span;
        let kw = match &first.tok {
            Tok::Eof => return Ok(out),
            Tok::Ident(k) => k.clone(),
            _ => {
                return Err(span.error(format!(
                    "expected a command but found {}",
                    crate::lexer::describe(&first.tok)
                )))
            }
        };
        if kw == "echo" {
            out.push((
                Command::Echo(lex.raw_until_semicolon()),
                span_str(span, files),
            ));
            continue;
        }
        // Collect the command's tokens up to `;` at nesting depth 0.
        let mut toks = vec![first];
        let mut depth = 0i32;
        loop {
            let t = lex.next_token()?;
            match &t.tok {
                Tok::Punct("(" | "[" | "{") => depth += 1,
                Tok::Punct(")" | "]" | "}") => depth -= 1,
                Tok::Punct(";") if depth <= 0 => break,
                Tok::Eof => {
                    toks.push(t);
                    break;
                }
                _ => {}
            }
            toks.push(t);
        }
        if toks.last().is_none_or(|t| t.tok != Tok::Eof) {
            let s = toks.last().map_or(span, |t| t.span);
            toks.push(Token {
                tok: Tok::Eof,
                span: s,
            });
        }
        let mut p = Parser::new(toks);
        let cmd = command(program, &mut p, &kw)?;
        if !p.at_eof() {
            return Err(p.unexpected("`;`"));
        }
        out.push((cmd, span_str(span, files)));
    }
}

fn word(p: &mut Parser) -> R<String> {
    Ok(p.ident("a command")?.0)
}

fn command(program: &Program, p: &mut Parser, kw: &str) -> R<Command> {
    let span = p.peek().span;
    Ok(match kw {
        "start" | "rollback" | "exit" => {
            word(p)?;
            match kw {
                "start" => Command::Start,
                "rollback" => Command::Rollback,
                _ => Command::Exit,
            }
        }
        "commit" => {
            word(p)?;
            let dump_changes = if p.at_eof() {
                false
            } else {
                let (w, s) = p.ident("`dump_changes` or `;`")?;
                if w != "dump_changes" {
                    return Err(s.error(format!("expected `dump_changes` or `;` but found `{w}`")));
                }
                true
            };
            Command::Commit { dump_changes }
        }
        "dump" => {
            word(p)?;
            if p.at_eof() {
                Command::Dump(None)
            } else {
                Command::Dump(Some(relation(program, p, false)?.0))
            }
        }
        "clear" => {
            word(p)?;
            Command::Updates(vec![Update::Clear(relation(program, p, true)?.0)])
        }
        "insert" | "insert_or_update" | "delete" | "delete_key" | "modify" => {
            let mut ups = Vec::new();
            loop {
                ups.push(update(program, p)?);
                if !p.eat(",") {
                    break;
                }
            }
            Command::Updates(ups)
        }
        _ => return Err(span.error(format!("unknown command `{kw}`"))),
    })
}

fn relation(program: &Program, p: &mut Parser, input: bool) -> R<(RelId, Span)> {
    let (name, span) = p.scoped("a relation name")?;
    let id = program.relation_id(&name).or_else(|| {
        let mut m = program
            .relations
            .iter()
            .enumerate()
            .filter(|(_, r)| r.name.rsplit("::").next() == Some(&name));
        let first = m.next().map(|(i, _)| i);
        if m.next().is_some() {
            None
        } else {
            first
        }
    });
    let Some(id) = id else {
        return Err(span.error(format!("unknown relation `{name}`")));
    };
    if input && program.relations[id].role != Role::Input {
        return Err(span.error(format!("relation `{name}` is not an input relation")));
    }
    Ok((id, span))
}

fn update(program: &Program, p: &mut Parser) -> R<Update> {
    let (kw, kspan) = p.ident("`insert`, `delete`, `delete_key` or `modify`")?;
    let (rel, rspan) = relation(program, p, true)?;
    let r = &program.relations[rel];
    match kw.as_str() {
        "insert" | "insert_or_update" | "delete" => {
            if p.eat("[") {
                // `R[v]` for a relation declared `relation R[T]`.
                let e = p.expr()?;
                p.expect("]")?;
                let row = row(program, rel, rspan, &Args::Pos(vec![e]))?;
                return Ok(match kw.as_str() {
                    "insert" => Update::Insert(rel, row),
                    "delete" => Update::Delete(rel, row),
                    _ => Update::InsertOrUpdate(rel, row),
                });
            }
            let close = if p.eat("(") {
                ")"
            } else {
                p.expect("{")?;
                "}"
            };
            let args = p.args(close)?;
            let row = row(program, rel, rspan, &args)?;
            Ok(match kw.as_str() {
                "insert" => Update::Insert(rel, row),
                "delete" => Update::Delete(rel, row),
                _ => Update::InsertOrUpdate(rel, row),
            })
        }
        "delete_key" | "modify" => {
            let Some(pk) = &r.primary_key else {
                return Err(rspan.error(format!("relation `{}` has no primary key", r.name)));
            };
            let k = p.expr()?;
            let key = value(program, &k, &pk.ty)?;
            if kw == "delete_key" {
                return Ok(Update::DeleteKey(rel, key));
            }
            p.expect("<-")?;
            let (rel2, s2) = relation(program, p, true)?;
            if rel2 != rel {
                return Err(s2.error(format!("expected relation `{}`", r.name)));
            }
            p.expect("{")?;
            let Args::Named(fields) = p.args("}")? else {
                return Err(s2.error("`modify` needs named fields: `R{.field = value}`"));
            };
            let mut changes = Vec::new();
            for (f, s, e) in &fields {
                let Some(i) = r.columns.iter().position(|(c, _)| c == f) else {
                    return Err(s.error(format!("relation `{}` has no column `{f}`", r.name)));
                };
                changes.push((i, value(program, e, &r.columns[i].1)?));
            }
            Ok(Update::Modify(rel, key, changes))
        }
        _ => Err(kspan.error(format!(
            "expected `insert`, `delete`, `delete_key` or `modify` but found `{kw}`"
        ))),
    }
}

fn row(program: &Program, rel: RelId, span: Span, args: &Args) -> R<Row> {
    let r = &program.relations[rel];
    let n = r.columns.len();
    match args {
        Args::Pos(es) => {
            if es.len() != n {
                return Err(span.error(format!(
                    "relation `{}` has {n} columns, but {} values are given",
                    r.name,
                    es.len()
                )));
            }
            es.iter()
                .zip(&r.columns)
                .map(|(e, (_, t))| value(program, e, t))
                .collect()
        }
        Args::Named(named) => {
            let mut out: Vec<Option<Value>> = vec![None; n];
            for (f, s, e) in named {
                let Some(i) = r.columns.iter().position(|(c, _)| c == f) else {
                    return Err(s.error(format!("relation `{}` has no column `{f}`", r.name)));
                };
                out[i] = Some(value(program, e, &r.columns[i].1)?);
            }
            out.into_iter()
                .enumerate()
                .map(|(i, v)| {
                    v.ok_or_else(|| {
                        span.error(format!(
                            "missing column `{}` of relation `{}`",
                            r.columns[i].0, r.name
                        ))
                    })
                })
                .collect()
        }
    }
}

/// Convert a literal expression to a value of type `ty`.
pub fn value(program: &Program, e: &Expr, ty: &Type) -> R<Value> {
    let show = |t: &Type| show(&program.types, t);
    let mismatch = |what: &str| e.span.error(format!("expected {}, found {what}", show(ty)));
    let int_lit = match &e.kind {
        ExprKind::Int(n, _) => Some(n.clone()),
        ExprKind::Unary(UnOp::Neg, a) => match &a.kind {
            ExprKind::Int(n, _) => Some(-n),
            _ => None,
        },
        _ => None,
    };
    if let Some(n) = int_lit {
        if !matches!(ty, Type::Bit(_) | Type::Signed(_) | Type::BigInt) {
            return Err(mismatch("an integer"));
        }
        return int_value(&n, ty).ok_or_else(|| {
            e.span
                .error(format!("integer literal {n} does not fit in {}", show(ty)))
        });
    }
    match (&e.kind, ty) {
        (ExprKind::Str(s), Type::String) => Ok(Value::str(s)),
        (ExprKind::Bool(b), Type::Bool) => Ok(Value::Bool(*b)),
        (ExprKind::Tuple(es), Type::Tuple(ts)) if es.len() == ts.len() => Ok(Value::Tuple(
            es.iter()
                .zip(ts)
                .map(|(e, t)| value(program, e, t))
                .collect::<R<Vec<_>>>()?
                .into(),
        )),
        (ExprKind::VecLit(es), Type::Vec(t)) => Ok(Value::Vec(
            es.iter()
                .map(|e| value(program, e, t))
                .collect::<R<Vec<_>>>()?
                .into(),
        )),
        (ExprKind::VecLit(es), Type::Set(t)) => Ok(Value::set_from(
            es.iter().map(|e| value(program, e, t)).collect::<R<_>>()?,
        )),
        (ExprKind::VecLit(es), Type::Map(k, v)) => {
            let kv = Type::Tuple(vec![(**k).clone(), (**v).clone()]);
            let mut pairs = Vec::new();
            for e in es {
                let Value::Tuple(t) = value(program, e, &kv)? else {
                    unreachable!("tuple type")
                };
                pairs.push((t[0].clone(), t[1].clone()));
            }
            Ok(Value::map_from(pairs))
        }
        (ExprKind::Ctor(name, args), Type::Option(t)) => {
            let last = name.rsplit("::").next().unwrap_or(name);
            match (last, args) {
                ("None", Args::Pos(a)) if a.is_empty() => Ok(Value::none()),
                ("Some", Args::Pos(a)) if a.len() == 1 => {
                    Ok(Value::some(value(program, &a[0], t)?))
                }
                ("Some", Args::Named(a)) if a.len() == 1 && a[0].0 == "x" => {
                    Ok(Value::some(value(program, &a[0].2, t)?))
                }
                _ => Err(mismatch(&format!("`{name}`"))),
            }
        }
        (ExprKind::Ctor(name, args), Type::Named(id)) => {
            let def = &program.types[*id];
            let last = name.rsplit("::").next().unwrap_or(name);
            let Some(ci) = def.ctors.iter().position(|c| c.name == last) else {
                return Err(mismatch(&format!("constructor `{name}`")));
            };
            let fields = &def.ctors[ci].fields;
            let vals = match args {
                Args::Pos(es) => {
                    if es.len() != fields.len() {
                        return Err(e.span.error(format!(
                            "constructor `{name}` expects {} fields, found {}",
                            fields.len(),
                            es.len()
                        )));
                    }
                    es.iter()
                        .zip(fields)
                        .map(|(e, (_, t))| value(program, e, t))
                        .collect::<R<Vec<_>>>()?
                }
                Args::Named(named) => {
                    let mut out: Vec<Option<Value>> = vec![None; fields.len()];
                    for (f, s, x) in named {
                        let Some(i) = fields.iter().position(|(g, _)| g == f) else {
                            return Err(s.error(format!("constructor `{name}` has no field `{f}`")));
                        };
                        out[i] = Some(value(program, x, &fields[i].1)?);
                    }
                    out.into_iter()
                        .enumerate()
                        .map(|(i, v)| {
                            v.ok_or_else(|| {
                                e.span.error(format!(
                                    "missing field `{}` in constructor `{name}`",
                                    fields[i].0
                                ))
                            })
                        })
                        .collect::<R<Vec<_>>>()?
                }
            };
            Ok(Value::Struct(ci as u32, vals.into()))
        }
        (ExprKind::Ascribe(x, _), _) => value(program, x, ty),
        (ExprKind::Int(..), _) => Err(mismatch("an integer")),
        (ExprKind::Str(_), _) => Err(mismatch("a string")),
        (ExprKind::Bool(_), _) => Err(mismatch("a boolean")),
        (ExprKind::Tuple(_), _) => Err(mismatch("a tuple")),
        (ExprKind::VecLit(_), _) => Err(mismatch("a vector")),
        (ExprKind::Ctor(n, _), _) => Err(mismatch(&format!("constructor `{n}`"))),
        _ => Err(e.span.error("expected a literal value")),
    }
}
