//! Lexer: source text → tokens with positions (DDlog's lexical syntax).

use num_bigint::BigInt;

use crate::ast::Span;
use crate::error::CompileError;

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// Identifier or keyword (keywords are recognised by the parser).
    Ident(String),
    /// Integer literal, with the width and signedness of `32'd5` / `8'sd1` forms.
    Int(BigInt, Option<(bool, u32)>),
    /// String literal without interpolation.
    Str(String),
    /// Interpolated string `"a${x}b"`.
    Interp(Vec<Part>),
    /// Punctuation or operator, e.g. `:-`, `(`, `++`.
    Punct(&'static str),
    /// End of input.
    Eof,
}

/// One piece of an interpolated string.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    /// Literal text.
    Lit(String),
    /// Tokens of an embedded `${...}` expression (ending with `Eof`).
    Expr(Vec<Token>),
}

/// A token and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// Kind and payload.
    pub tok: Tok,
    /// Position of its first character.
    pub span: Span,
}

const PUNCTS: &[&str] = &[
    ":-", "::", "<-", "->", "=>", "==", "!=", "<=", ">=", "<<", ">>", "++", "(", ")", "{", "}",
    "[", "]", ",", ";", ":", ".", "=", "<", ">", "+", "-", "*", "/", "%", "&", "|", "^", "~", "@",
    "#", "'", "?", "!",
];

/// An on-demand lexer over one text.
pub struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    col: u32,
    file: u32,
    /// Treat `#` as a comment to end of line (command scripts).
    pub hash_comments: bool,
    /// Read `${...}` in strings as interpolation (off in command scripts, whose strings
    /// are plain literals).
    pub interpolation: bool,
    last_end: Span,
}

impl Lexer {
    /// A lexer over `text`, reporting positions in file number `file`.
    pub fn new(text: &str, file: u32) -> Self {
        Lexer {
            chars: text
                .strip_prefix('\u{feff}')
                .unwrap_or(text)
                .chars()
                .collect(),
            pos: 0,
            line: 1,
            col: 1,
            file,
            hash_comments: false,
            interpolation: true,
            last_end: Span {
                file,
                line: 1,
                col: 1,
            },
        }
    }

    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.pos + k).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.pos).copied()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    /// Current position.
    pub fn span(&self) -> Span {
        Span {
            file: self.file,
            line: self.line,
            col: self.col,
        }
    }

    /// Skip whitespace and comments.
    pub fn skip_trivia(&mut self) -> Result<(), CompileError> {
        loop {
            match self.peek(0) {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('/') if self.peek(1) == Some('/') => self.skip_line(),
                Some('#') if self.hash_comments => self.skip_line(),
                Some('/') if self.peek(1) == Some('*') => {
                    // C-style, not nested (as in DDlog).
                    let start = self.span();
                    self.bump();
                    self.bump();
                    loop {
                        match self.peek(0) {
                            None => return Err(start.error("unterminated comment")),
                            Some('*') if self.peek(1) == Some('/') => {
                                self.bump();
                                self.bump();
                                break;
                            }
                            _ => {
                                self.bump();
                            }
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn skip_line(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                break;
            }
            self.bump();
        }
    }

    /// Raw text from the current position up to (not including) the next `;` or the end,
    /// which is consumed too. Used by `echo` in scripts.
    pub fn raw_until_semicolon(&mut self) -> String {
        let mut s = String::new();
        while let Some(c) = self.bump() {
            if c == ';' {
                break;
            }
            s.push(c);
        }
        s.trim().to_string()
    }

    /// The next token.
    pub fn next_token(&mut self) -> Result<Token, CompileError> {
        self.skip_trivia()?;
        let span = self.span();
        let Some(c) = self.peek(0) else {
            return Ok(Token {
                tok: Tok::Eof,
                span: self.last_end,
            });
        };
        let tok = if c.is_ascii_alphabetic() || c == '_' {
            let mut s = String::new();
            while let Some(c) = self.peek(0) {
                if c.is_ascii_alphanumeric() || c == '_' {
                    s.push(c);
                    self.bump();
                } else {
                    break;
                }
            }
            Tok::Ident(s)
        } else if c.is_ascii_digit() {
            self.number(span)?
        } else if c == '"' {
            self.bump();
            self.string(span)?
        } else {
            let mut found = None;
            for p in PUNCTS {
                if p.chars()
                    .enumerate()
                    .all(|(i, pc)| self.peek(i) == Some(pc))
                {
                    found = Some(*p);
                    break;
                }
            }
            let Some(p) = found else {
                return Err(Span::error(span, format!("unexpected character `{c}`")));
            };
            for _ in 0..p.chars().count() {
                self.bump();
            }
            Tok::Punct(p)
        };
        self.last_end = self.span();
        Ok(Token { tok, span })
    }

    fn digits(&mut self, radix: u32) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek(0) {
            if c.is_digit(radix) {
                s.push(c);
                self.bump();
            } else if c == '_' {
                self.bump();
            } else {
                break;
            }
        }
        s
    }

    fn number(&mut self, span: Span) -> Result<Tok, CompileError> {
        let mut radix = 10;
        if self.peek(0) == Some('0')
            && matches!(self.peek(1), Some('x' | 'X' | 'b' | 'B' | 'o' | 'O'))
        {
            radix = match self.peek(1) {
                Some('x' | 'X') => 16,
                Some('b' | 'B') => 2,
                _ => 8,
            };
            self.bump();
            self.bump();
        }
        let ds = self.digits(radix);
        if ds.is_empty() {
            return Err(Span::error(span, "malformed integer literal"));
        }
        let n = BigInt::parse_bytes(ds.as_bytes(), radix).expect("digits checked");
        // Width-prefixed literal: 32'd5, 8'hff, 4'b1010, 16'sd-1 is not supported.
        if radix == 10 && self.peek(0) == Some('\'') {
            let width = u32::try_from(&n).ok().filter(|w| (1..=128).contains(w));
            let Some(width) = width else {
                return Err(span.error("width of an integer literal must be between 1 and 128"));
            };
            self.bump();
            let signed = if self.peek(0) == Some('s') {
                self.bump();
                true
            } else {
                false
            };
            let r = match self.bump() {
                Some('d' | 'D') => 10,
                Some('h' | 'H') => 16,
                Some('b' | 'B') => 2,
                Some('o' | 'O') => 8,
                _ => {
                    return Err(Span::error(
                        span,
                        "malformed width-prefixed integer literal",
                    ))
                }
            };
            let ds = self.digits(r);
            if ds.is_empty() {
                return Err(Span::error(
                    span,
                    "malformed width-prefixed integer literal",
                ));
            }
            let v = BigInt::parse_bytes(ds.as_bytes(), r).expect("digits checked");
            return Ok(Tok::Int(v, Some((signed, width))));
        }
        if self.peek(0).is_some_and(|c| c.is_ascii_alphanumeric()) {
            return Err(Span::error(self.span(), "malformed integer literal"));
        }
        Ok(Tok::Int(n, None))
    }

    fn string(&mut self, start: Span) -> Result<Tok, CompileError> {
        let mut parts = Vec::new();
        let mut cur = String::new();
        loop {
            let here = self.span();
            let Some(c) = self.bump() else {
                return Err(Span::error(start, "unterminated string literal"));
            };
            match c {
                '"' => break,
                '\\' => {
                    let e = self.bump();
                    match e {
                        Some('n') => cur.push('\n'),
                        Some('t') => cur.push('\t'),
                        Some('r') => cur.push('\r'),
                        Some('0') => cur.push('\0'),
                        Some('\\') => cur.push('\\'),
                        Some('"') => cur.push('"'),
                        Some('$') => cur.push('$'),
                        Some('\'') => cur.push('\''),
                        Some('u') if self.peek(0) == Some('{') => {
                            self.bump();
                            let h = self.digits(16);
                            let ch = u32::from_str_radix(&h, 16).ok().and_then(char::from_u32);
                            if self.bump() != Some('}') || ch.is_none() {
                                return Err(Span::error(here, "malformed unicode escape"));
                            }
                            cur.push(ch.expect("checked"));
                        }
                        _ => {
                            return Err(Span::error(
                                here,
                                "unknown escape sequence in string literal",
                            ))
                        }
                    }
                }
                '$' if self.interpolation && self.peek(0) == Some('{') => {
                    self.bump();
                    if !cur.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut cur)));
                    }
                    let mut toks = Vec::new();
                    let mut depth = 0;
                    loop {
                        let t = self.next_token()?;
                        match &t.tok {
                            Tok::Eof => {
                                return Err(Span::error(
                                    here,
                                    "unterminated `${` in string literal",
                                ))
                            }
                            Tok::Punct("{") => depth += 1,
                            Tok::Punct("}") if depth == 0 => {
                                toks.push(Token {
                                    tok: Tok::Eof,
                                    span: t.span,
                                });
                                break;
                            }
                            Tok::Punct("}") => depth -= 1,
                            _ => {}
                        }
                        toks.push(t);
                    }
                    parts.push(Part::Expr(toks));
                }
                c => cur.push(c),
            }
        }
        if parts.is_empty() {
            return Ok(Tok::Str(cur));
        }
        if !cur.is_empty() {
            parts.push(Part::Lit(cur));
        }
        Ok(Tok::Interp(parts))
    }

    /// Lex the whole text.
    pub fn tokenize(mut self) -> Result<Vec<Token>, CompileError> {
        let mut out = Vec::new();
        loop {
            let t = self.next_token()?;
            let eof = t.tok == Tok::Eof;
            out.push(t);
            if eof {
                return Ok(out);
            }
        }
    }
}

/// Describe a token for "expected X but found Y" messages.
pub fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Int(n, _) => format!("`{n}`"),
        Tok::Str(_) | Tok::Interp(_) => "a string".to_string(),
        Tok::Punct(p) => format!("`{p}`"),
        Tok::Eof => "end of input".to_string(),
    }
}
