//! `rulec`: the compiler of Loom's rule language, a subset of DDlog.
//!
//! Pipeline: [`lexer`] and [`parser`]/[`parse_expr`] (text → [`ast`] with positions) →
//! [`check`] (declarations: types, constructors, relations, function signatures) →
//! [`expr`]/[`pattern`]/[`builtins`] (type checking and overload resolution, producing
//! typed IR expressions) → [`lower`] (rules → IR bodies, dependency edges) → [`strata`]
//! (SCCs, stratification checks). The IR in [`ir`] is the only thing the engine sees.
//! [`script`] parses DDlog's `.dat` command scripts against a compiled program, so rows
//! in scripts are checked against relation types exactly like rules.
//!
//! Entry points: [`compile_files`], [`compile_source`], [`script::parse_script`]. Every
//! program also contains the [`PRELUDE`] (IPv4/IPv6 prefix and MAC helpers written in
//! the language); a program's own function of the same name replaces a prelude one.
//!
//! Errors are [`CompileError`]s that name `file:line:col` and say what is wrong; the
//! first error wins.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod ast;
pub mod builtins;
pub mod check;
pub mod error;
pub mod expr;
pub mod infer;
pub mod ir;
pub mod lexer;
pub mod lower;
pub mod parse_expr;
pub mod parser;
pub mod pattern;
pub mod script;
pub mod strata;
pub mod types;
pub mod value;

pub use error::CompileError;

use std::path::{Path, PathBuf};

use ast::{resolve_file, Decl};

/// The standard library, written in the language itself; compiled into every program.
pub const PRELUDE: &str = include_str!("prelude.dl");

/// Stack size of the compiler thread.
pub(crate) const COMPILER_STACK: usize = 256 << 20;

/// Name under which prelude positions are reported.
pub const PRELUDE_NAME: &str = "<prelude>";

/// Compile a program from files on disk. `import foo::bar` in a file resolves to
/// `foo/bar.dl` relative to the importing file's directory, then to each of the given
/// files' directories; each file is compiled once however often it is imported.
pub fn compile_files<P: AsRef<Path>>(paths: &[P]) -> Result<ir::Program, CompileError> {
    let mut sources = Vec::new();
    for p in paths {
        let p = p.as_ref();
        let text = std::fs::read_to_string(p).map_err(|e| CompileError {
            file: p.display().to_string(),
            line: 1,
            col: 1,
            message: format!("cannot read file: {e}"),
        })?;
        sources.push((
            p.display().to_string(),
            text,
            p.parent().map(Path::to_path_buf).unwrap_or_default(),
        ));
    }
    compile(&sources)
}

/// Compile a program given as text. `name` is used in error positions; imports resolve
/// relative to the current directory.
pub fn compile_source(name: &str, text: &str) -> Result<ir::Program, CompileError> {
    compile(&[(name.to_string(), text.to_string(), PathBuf::new())])
}

fn dir_of(p: &Path) -> PathBuf {
    p.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Compile main sources `(name, text, directory)`, following imports.
fn compile(mains: &[(String, String, PathBuf)]) -> Result<ir::Program, CompileError> {
    // Deeply nested (but legal) expressions recurse deeply in the parser and checker: run
    // on a thread with a large stack so they never overflow the caller's.
    let run = |mains: &[(String, String, PathBuf)]| {
        let mut files = vec![PRELUDE_NAME.to_string()];
        let r = compile_inner(mains.to_vec(), &mut files);
        r.map_err(|e| resolve_file(e, &files))
    };
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .stack_size(COMPILER_STACK)
            .spawn_scoped(scope, || run(mains));
        if let Ok(handle) = worker {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        } else {
            // No thread available (e.g. a tight address-space limit): compile on this one.
            run(mains)
        }
    })
}

fn compile_inner(
    mains: Vec<(String, String, PathBuf)>,
    files: &mut Vec<String>,
) -> Result<ir::Program, CompileError> {
    let mut decls: Vec<Decl> = parser::parse_program(PRELUDE, 0)?;
    let roots: Vec<PathBuf> = mains.iter().map(|m| m.2.clone()).collect();
    let mut seen: Vec<PathBuf> = Vec::new();
    // Queue of (file index, text, directory).
    let mut queue = Vec::new();
    for (name, text, dir) in mains {
        let canon = std::fs::canonicalize(&name).unwrap_or_else(|_| PathBuf::from(&name));
        seen.push(canon);
        files.push(name);
        queue.push((files.len() - 1, text, dir));
    }
    let mut qi = 0;
    while qi < queue.len() {
        let (idx, text, dir) = queue[qi].clone();
        qi += 1;
        let file_decls = parser::parse_program(&text, idx as u32)?;
        for d in &file_decls {
            let Decl::Import { path, span } = d else {
                continue;
            };
            let rel: PathBuf = path.iter().collect::<PathBuf>().with_extension("dl");
            let found = std::iter::once(&dir)
                .chain(roots.iter())
                .map(|d| d.join(&rel))
                .find(|p| p.is_file());
            let Some(found) = found else {
                return Err(span.error(format!(
                    "unknown import `{}`: no file `{}` found",
                    path.join("::"),
                    rel.display()
                )));
            };
            let canon = std::fs::canonicalize(&found).unwrap_or_else(|_| found.clone());
            if seen.contains(&canon) {
                continue;
            }
            seen.push(canon);
            let text = std::fs::read_to_string(&found)
                .map_err(|e| span.error(format!("cannot read `{}`: {e}", found.display())))?;
            files.push(found.display().to_string());
            queue.push((files.len() - 1, text, dir_of(&found)));
        }
        decls.extend(file_decls);
    }
    // A program's own function replaces a prelude function of the same name.
    let user_fns: std::collections::HashSet<String> = decls
        .iter()
        .filter_map(|d| match d {
            Decl::Function { name, span, .. } if span.file != 0 => Some(name.clone()),
            _ => None,
        })
        .collect();
    decls.retain(|d| !matches!(d, Decl::Function { name, span, .. } if span.file == 0 && user_fns.contains(name)));
    let mut cx = check::Ctx::new(files.clone(), &decls)?;
    // Bodies, keys and rules in source order, so the first error in the text wins.
    let mut functions = Vec::new();
    let mut rules = Vec::new();
    let mut deps = Vec::new();
    for d in &decls {
        match d {
            Decl::Function { name, body, .. } => functions.push(cx.function_body(name, body)?),
            Decl::Relation {
                name,
                key: Some((var, e)),
                span,
                kind,
                ..
            } => {
                cx.primary_key(name, var, e, *span, *kind == ast::RelKind::Input)?;
            }
            Decl::Rule(r) => {
                let (rs, ds) = cx.lower_rule(r)?;
                rules.extend(rs);
                deps.extend(ds);
            }
            _ => {}
        }
    }
    let heads: Vec<usize> = rules.iter().map(|r: &ir::Rule| r.head).collect();
    let strata = strata::stratify(&cx.rels, &heads, &deps)?;
    Ok(ir::Program {
        types: cx.types,
        relations: cx.rels,
        functions,
        rules,
        strata,
    })
}
