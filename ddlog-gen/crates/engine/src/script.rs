//! Runs parsed `.dat` scripts against an [`crate::Engine`], printing as DDlog does.

use std::io::Write;

use rulec::ir::Role;
use rulec::script::{parse_script, Command, Update};

use crate::format::format_record;
use crate::{Engine, Error};

/// What happened while running a script.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Commands that failed at run time (each printed as `error: ...` and its
    /// transaction rolled back); the script continues after them.
    pub errors: usize,
}

/// Parse `text` (named `file` in messages) and run it, writing DDlog-format output to
/// `out`. A parse error is returned before anything runs.
pub fn run_script(
    engine: &Engine,
    file: &str,
    text: &str,
    out: &mut dyn Write,
) -> Result<Outcome, Error> {
    let commands = parse_script(engine.program(), file, text)?;
    run_commands(engine, commands.into_iter().map(|(c, _)| c), out)
}

/// Run already parsed commands (see [`run_script`]).
pub fn run_commands(
    engine: &Engine,
    commands: impl IntoIterator<Item = Command>,
    out: &mut dyn Write,
) -> Result<Outcome, Error> {
    let prog = engine.program();
    let mut outcome = Outcome::default();
    let mut txn: Option<Vec<Update>> = None;
    let mut fail = |out: &mut dyn Write, msg: &str| -> Result<(), Error> {
        outcome.errors += 1;
        writeln!(out, "error: {msg}")?;
        Ok(())
    };
    for cmd in commands {
        match cmd {
            Command::Start => {
                if txn.is_some() {
                    fail(out, "transaction already in progress")?;
                } else {
                    txn = Some(Vec::new());
                }
            }
            Command::Updates(ups) => match txn.as_mut() {
                Some(buf) => buf.extend(ups),
                None => fail(out, "no transaction in progress")?,
            },
            Command::Commit { dump_changes } => match txn.take() {
                None => fail(out, "no transaction in progress")?,
                Some(ups) => match engine.apply(ups) {
                    Ok(delta) => {
                        if dump_changes {
                            for (rel, rows) in &delta {
                                writeln!(out, "{}:", prog.relations[*rel].name)?;
                                for (row, d) in rows {
                                    let sign = if *d > 0 { "+1" } else { "-1" };
                                    writeln!(out, "{}: {sign}", format_record(prog, *rel, row))?;
                                }
                            }
                        }
                    }
                    Err(e) => fail(out, &e.to_string())?,
                },
            },
            Command::Rollback => {
                if txn.take().is_none() {
                    fail(out, "no transaction in progress")?;
                }
            }
            Command::Dump(None) => {
                for (id, rel) in prog.relations.iter().enumerate() {
                    if rel.role == Role::Output {
                        writeln!(out, "{}:", rel.name)?;
                        for row in engine.dump(id)? {
                            writeln!(out, "{}", format_record(prog, id, &row))?;
                        }
                    }
                }
            }
            Command::Dump(Some(id)) => {
                for row in engine.dump(id)? {
                    writeln!(out, "{}", format_record(prog, id, &row))?;
                }
            }
            Command::Echo(text) => writeln!(out, "{text}")?,
            Command::Exit => break,
        }
    }
    if txn.is_some() {
        fail(out, "transaction not committed at end of script")?;
    }
    Ok(outcome)
}
