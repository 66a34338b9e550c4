//! Compile errors: a position and a message, printed as `file:line:col: error: message`.

use std::fmt;

/// An error found while compiling a program or parsing a command script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    /// File name as given (or `<string>`).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column (in characters).
    pub col: u32,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for CompileError {}
