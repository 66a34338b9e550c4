//! Records applied transactions as a `.dat` script that replays to the same state:
//! `start;`, one `insert R(...)`/`delete R(...)` line per net row change (deletions first,
//! then insertions, each sorted), then `commit;`. Failed transactions are not recorded.

use std::io::{self, Write};

use rulec::ir::{Program, RelId};
use rulec::value::Row;

use crate::format::format_args;

/// Write one transaction's net changes to `out` and flush it.
pub fn write_transaction(
    prog: &Program,
    changes: &[(RelId, Row, isize)],
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut sorted: Vec<&(RelId, Row, isize)> = changes.iter().collect();
    sorted.sort_by(|a, b| (a.2, a.0, &a.1).cmp(&(b.2, b.0, &b.1)));
    let mut text = String::from("start;\n");
    for (i, (rel, row, d)) in sorted.iter().enumerate() {
        text.push_str(if *d > 0 { "insert " } else { "delete " });
        text.push_str(&prog.relations[*rel].name);
        text.push_str(&format_args(prog, *rel, row));
        text.push_str(if i + 1 == sorted.len() { ";\n" } else { ",\n" });
    }
    text.push_str("commit;\n");
    out.write_all(text.as_bytes())?;
    out.flush()
}
