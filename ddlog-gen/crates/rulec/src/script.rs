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

use crate::error::CompileError;
use crate::ir::{Program, RelId};
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
pub fn parse_script(program: &Program, file: &str, text: &str) -> Result<Vec<Located>, CompileError> {
    let _ = (program, file, text);
    unimplemented!("script parser pending")
}
