//! The Lua tokenizer of the static key check: names, strings, numbers and symbols, with
//! their lines, comments and long brackets skipped.

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Name(String),
    Str(String),
    Num(String),
    Sym(String),
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Name(text) | Tok::Num(text) | Tok::Sym(text) => f.write_str(text),
            Tok::Str(text) => write!(f, "'{text}'"),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) line: usize,
}

pub(super) const SYMBOLS: [&str; 10] = ["...", "..", "==", "~=", "<=", ">=", "//", "::", "<<", ">>"];

/// The level of a long bracket (`[[`, `[=[`, …) starting at `i`, if one does.
pub(super) fn long_bracket(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i) != Some(&'[') {
        return None;
    }
    let level = chars[i + 1..].iter().take_while(|&&c| c == '=').count();
    (chars.get(i + 1 + level) == Some(&'[')).then_some(level)
}

/// Skips a long bracket of `level` opened at `i`; returns the index after it and its text.
pub(super) fn skip_long(chars: &[char], i: usize, level: usize) -> (usize, String) {
    let close: Vec<char> = std::iter::once(']').chain(std::iter::repeat_n('=', level)).chain(std::iter::once(']')).collect();
    let start = i + level + 2;
    let end = (start..chars.len()).find(|&j| chars[j..].starts_with(&close)).expect("an unterminated long bracket");
    (end + close.len(), chars[start..end].iter().collect())
}

pub(super) fn tokenize(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    if source.starts_with("#!") {
        i = chars.iter().position(|&c| c == '\n').unwrap_or(chars.len());
    }
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
        } else if chars[i..].starts_with(&['-', '-']) {
            match long_bracket(&chars, i + 2) {
                Some(level) => i = skip_long(&chars, i + 2, level).0,
                None => i = (i..chars.len()).find(|&j| chars[j] == '\n').unwrap_or(chars.len()),
            }
        } else if let Some(level) = long_bracket(&chars, i) {
            let (end, text) = skip_long(&chars, i, level);
            tokens.push(Token { tok: Tok::Str(text), line });
            i = end;
        } else if c == '\'' || c == '"' {
            let mut text = String::new();
            i += 1;
            while chars[i] != c {
                if chars[i] == '\\' {
                    i += 1;
                }
                text.push(chars[i]);
                i += 1;
            }
            i += 1;
            tokens.push(Token { tok: Tok::Str(text), line });
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || (chars[i] == '.' && chars.get(i + 1) != Some(&'.'))) {
                let exponent = matches!(chars[i], 'e' | 'E' | 'p' | 'P') && matches!(chars.get(i + 1), Some('+' | '-'));
                i += if exponent { 2 } else { 1 };
            }
            tokens.push(Token { tok: Tok::Num(chars[start..i].iter().collect()), line });
        } else if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token { tok: Tok::Name(chars[start..i].iter().collect()), line });
        } else {
            let symbol =
                SYMBOLS.iter().find(|s| chars[i..].starts_with(&s.chars().collect::<Vec<_>>())).map_or(c.to_string(), |s| s.to_string());
            i += symbol.chars().count();
            tokens.push(Token { tok: Tok::Sym(symbol), line });
        }
        line += chars[start..i].iter().filter(|&&c| c == '\n').count();
    }
    tokens
}
