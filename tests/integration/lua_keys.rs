//! A static check of every Lua script in `shared/src/redis/scripts`. Each must start with the Redis 7 `#!lua`
//! shebang, without the flags that lift Redis's cluster checks (`allow-cross-slot-keys`,
//! `no-cluster`), and every key it hands to `redis.call`/`redis.pcall` must come from `KEYS`
//! — never be built from strings or ARGV. Then every key a script touches is declared, so the
//! client routes the call to the node that holds them, and Redis Cluster's own check (a
//! script may only touch keys of its declared slot) covers the rest.
//!
//! "Comes from KEYS" is decided on a token stream, conservatively and without scopes: an
//! expression is a key if it is `KEYS[…]`, or a name every binding of which in the file is a
//! key (`local k = KEYS[1]`, a function parameter every call passes a key to, the loop
//! variable of `ipairs(t)` over a table whose every element is a key). A call the check
//! cannot follow is reported, never assumed safe.

use std::collections::{HashMap, HashSet};
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
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
struct Token {
    tok: Tok,
    line: usize,
}

const SYMBOLS: [&str; 10] = ["...", "..", "==", "~=", "<=", ">=", "//", "::", "<<", ">>"];

/// The level of a long bracket (`[[`, `[=[`, …) starting at `i`, if one does.
fn long_bracket(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i) != Some(&'[') {
        return None;
    }
    let level = chars[i + 1..].iter().take_while(|&&c| c == '=').count();
    (chars.get(i + 1 + level) == Some(&'[')).then_some(level)
}

/// Skips a long bracket of `level` opened at `i`; returns the index after it and its text.
fn skip_long(chars: &[char], i: usize, level: usize) -> (usize, String) {
    let close: Vec<char> = std::iter::once(']').chain(std::iter::repeat_n('=', level)).chain(std::iter::once(']')).collect();
    let start = i + level + 2;
    let end = (start..chars.len()).find(|&j| chars[j..].starts_with(&close)).expect("an unterminated long bracket");
    (end + close.len(), chars[start..end].iter().collect())
}

fn tokenize(source: &str) -> Vec<Token> {
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

const KEYWORDS: [&str; 22] = [
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in", "local", "nil", "not", "or", "repeat",
    "return", "then", "true", "until", "while",
];

/// Where a name's value comes from.
#[derive(Debug, Clone)]
enum Source {
    /// An expression (token range).
    Expr(usize, usize),
    /// Parameter `index` of function `name`: whatever its calls pass.
    Param(String, usize),
    /// The value of `for _, v in ipairs(t)`/`pairs(t)`: an element of table `t`.
    ElementOf(String),
    /// Anything else (loop counters, `local x` without a value, other iterators).
    Unknown,
}

/// Which arguments of a command (after its name) are keys.
#[derive(Debug, Clone, Copy)]
enum KeySpec {
    None,
    First,
    /// The argument after a subcommand (`XINFO STREAM key`).
    AfterSubcommand,
    FirstTwo,
    All,
    /// MSET-style key, value pairs.
    Pairs,
    /// `destination numkeys key…` (ZUNIONSTORE), keys up to the first keyword.
    StoreNumkeys,
    /// `numkeys key…` (ZUNION), keys up to the first keyword.
    Numkeys,
}

fn key_spec(command: &str) -> Option<KeySpec> {
    use KeySpec::*;
    let command = command.to_ascii_uppercase();
    Some(match command.as_str() {
        "TIME" | "PING" | "ECHO" => None,
        "DEL" | "UNLINK" | "EXISTS" | "TOUCH" | "MGET" | "PFCOUNT" | "SINTER" | "SUNION" | "SDIFF" | "SINTERSTORE" | "SUNIONSTORE"
        | "SDIFFSTORE" | "PFMERGE" => All,
        "RENAME" | "RENAMENX" | "SMOVE" | "LMOVE" | "RPOPLPUSH" | "COPY" | "ZRANGESTORE" => FirstTwo,
        "MSET" | "MSETNX" => Pairs,
        "ZUNIONSTORE" | "ZINTERSTORE" | "ZDIFFSTORE" => StoreNumkeys,
        "ZUNION" | "ZINTER" | "ZDIFF" | "ZINTERCARD" | "SINTERCARD" | "LMPOP" | "ZMPOP" => Numkeys,
        "GET" | "SET" | "SETNX" | "SETEX" | "PSETEX" | "GETSET" | "GETDEL" | "GETEX" | "INCR" | "INCRBY" | "INCRBYFLOAT" | "DECR"
        | "DECRBY" | "APPEND" | "STRLEN" | "SETRANGE" | "GETRANGE" | "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" | "PERSIST"
        | "TTL" | "PTTL" | "EXPIRETIME" | "PEXPIRETIME" | "TYPE" | "HGET" | "HSET" | "HSETNX" | "HMSET" | "HMGET" | "HDEL" | "HEXISTS"
        | "HINCRBY" | "HINCRBYFLOAT" | "HGETALL" | "HKEYS" | "HVALS" | "HLEN" | "HSTRLEN" | "HRANDFIELD" | "HSCAN" | "ZADD" | "ZINCRBY"
        | "ZREM" | "ZSCORE" | "ZMSCORE" | "ZRANK" | "ZREVRANK" | "ZCARD" | "ZCOUNT" | "ZLEXCOUNT" | "ZRANGE" | "ZREVRANGE"
        | "ZRANGEBYSCORE" | "ZREVRANGEBYSCORE" | "ZRANGEBYLEX" | "ZREVRANGEBYLEX" | "ZREMRANGEBYRANK" | "ZREMRANGEBYSCORE"
        | "ZREMRANGEBYLEX" | "ZPOPMIN" | "ZPOPMAX" | "ZRANDMEMBER" | "ZSCAN" | "SADD" | "SREM" | "SISMEMBER" | "SMISMEMBER"
        | "SMEMBERS" | "SCARD" | "SPOP" | "SRANDMEMBER" | "SSCAN" | "LPUSH" | "RPUSH" | "LPUSHX" | "RPUSHX" | "LPOP" | "RPOP"
        | "LRANGE" | "LLEN" | "LINDEX" | "LSET" | "LREM" | "LTRIM" | "LINSERT" | "LPOS" | "SETBIT" | "GETBIT" | "BITCOUNT" | "BITPOS"
        | "BITFIELD" | "BITFIELD_RO" | "PFADD" | "XADD" | "XLEN" | "XRANGE" | "XREVRANGE" | "XTRIM" | "XDEL" => First,
        // XINFO STREAM <key>.
        "XINFO" => AfterSubcommand,
        _ => return Option::None,
    })
}

/// Splits tokens `[start, end)` at top-level commas.
fn split_args(tokens: &[Token], start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut args = Vec::new();
    let (mut depth, mut from) = (0i32, start);
    for (i, token) in tokens.iter().enumerate().take(end).skip(start) {
        match &token.tok {
            Tok::Sym(s) if matches!(s.as_str(), "(" | "[" | "{") => depth += 1,
            Tok::Sym(s) if matches!(s.as_str(), ")" | "]" | "}") => depth -= 1,
            Tok::Sym(s) if (s == "," || s == ";") && depth == 0 => {
                args.push((from, i));
                from = i + 1;
            }
            _ => {}
        }
    }
    if from < end {
        args.push((from, end));
    }
    args
}

/// The index of the bracket closing the one opened at `open`.
fn closing(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match &token.tok {
            Tok::Sym(s) if matches!(s.as_str(), "(" | "[" | "{") => depth += 1,
            Tok::Sym(s) if matches!(s.as_str(), ")" | "]" | "}") => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced brackets from line {}", tokens[open].line);
}

fn is_sym(token: Option<&Token>, symbol: &str) -> bool {
    matches!(token, Some(Token { tok: Tok::Sym(s), .. }) if s == symbol)
}

fn name_of(token: Option<&Token>) -> Option<&str> {
    match token {
        Some(Token { tok: Tok::Name(n), .. }) if !KEYWORDS.contains(&n.as_str()) => Some(n),
        _ => None,
    }
}

fn is_keyword(token: Option<&Token>, keyword: &str) -> bool {
    matches!(token, Some(Token { tok: Tok::Name(n), .. }) if n == keyword)
}

/// The names of `a, b, c` starting at `start`, and the index after them.
fn name_list(tokens: &[Token], start: usize) -> (Vec<String>, usize) {
    let (mut names, mut i) = (Vec::new(), start);
    while let Some(name) = name_of(tokens.get(i)) {
        names.push(name.to_owned());
        i += if is_sym(tokens.get(i + 1), ",") { 2 } else { 1 };
    }
    (names, i)
}

/// Where the expression list starting at `start` ends (the statement's end).
fn exprlist_end(tokens: &[Token], start: usize) -> usize {
    let mut i = start;
    let mut blocks = 0; // `function … end` (and the blocks inside it) within the expression
    while i < tokens.len() {
        let token = &tokens[i];
        match &token.tok {
            Tok::Sym(s) if matches!(s.as_str(), "(" | "[" | "{") => {
                i = closing(tokens, i) + 1;
                continue;
            }
            Tok::Sym(s) if matches!(s.as_str(), ")" | "]" | "}") && blocks == 0 => return i,
            Tok::Name(n) if n == "function" || (blocks > 0 && matches!(n.as_str(), "if" | "do" | "repeat")) => blocks += 1,
            Tok::Name(n) if blocks > 0 && (n == "end" || n == "until") => blocks -= 1,
            Tok::Name(n) if blocks == 0 && i > start => {
                let operator = matches!(n.as_str(), "and" | "or" | "not");
                let previous_ends_operand = match &tokens[i - 1].tok {
                    Tok::Name(p) => !KEYWORDS.contains(&p.as_str()) || matches!(p.as_str(), "end" | "true" | "false" | "nil"),
                    Tok::Str(_) | Tok::Num(_) => true,
                    Tok::Sym(p) => matches!(p.as_str(), ")" | "]" | "}" | "..."),
                };
                if !operator && (KEYWORDS.contains(&n.as_str()) || previous_ends_operand) {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

struct Script {
    file: String,
    tokens: Vec<Token>,
    bindings: HashMap<String, Vec<Source>>,
    /// Element expressions of each table, in source order (constructor items, then writes).
    elements: HashMap<String, Vec<(usize, usize)>>,
    functions: HashMap<String, Vec<String>>,
    /// Parameters of helpers defined here but only called by the other scripts of the folder
    /// (a prelude prepended to them): whether every such call passes a key.
    external_params: HashMap<(String, usize), bool>,
    /// The names all of whose bindings are keys.
    key_names: HashSet<String>,
}

impl Script {
    /// `others`: the other scripts of the folder, where helpers defined here may be called.
    fn new(file: &str, source: &str, others: &[String]) -> Self {
        let mut script = Script {
            file: file.to_owned(),
            tokens: tokenize(source),
            bindings: HashMap::new(),
            elements: HashMap::new(),
            functions: HashMap::new(),
            external_params: HashMap::new(),
            key_names: HashSet::new(),
        };
        script.collect_bindings();
        script.external_params = script.external_params(others);
        script.key_names = script.solve_key_names();
        script
    }

    fn external_params(&self, others: &[String]) -> HashMap<(String, usize), bool> {
        let mut verdicts = HashMap::new();
        for (function, params) in &self.functions {
            if !self.calls_of(function).is_empty() {
                continue;
            }
            let callers: Vec<Script> = others
                .iter()
                .filter(|source| source.contains(&format!("{function}(")))
                .map(|source| Script::new("", source, &[]))
                .collect();
            for index in 0..params.len() {
                let keys = !callers.is_empty() && callers.iter().all(|caller| caller.passes_keys(function, index, &caller.key_names));
                verdicts.insert((function.clone(), index), keys);
            }
        }
        verdicts
    }

    /// The greatest set of names whose every binding is a key, assuming the names in the set
    /// are keys: a cycle of bindings with no other source (`k` → table `order` → `k`) only
    /// ever carries keys, so it stays in.
    fn solve_key_names(&self) -> HashSet<String> {
        let mut names: HashSet<String> = self.bindings.keys().cloned().collect();
        loop {
            let next: HashSet<String> = names
                .iter()
                .filter(|name| {
                    let sources = &self.bindings[*name];
                    sources.iter().all(|source| self.source_is_key(source, &names))
                })
                .cloned()
                .collect();
            if next.len() == names.len() {
                return names;
            }
            names = next;
        }
    }

    fn source_is_key(&self, source: &Source, names: &HashSet<String>) -> bool {
        match source {
            Source::Expr(a, b) => self.is_key_given(*a, *b, names),
            Source::Param(function, index) => match self.external_params.get(&(function.clone(), *index)) {
                Some(&keys) => keys,
                None => self.passes_keys(function, *index, names),
            },
            Source::ElementOf(table) => self.all_keys(table, names),
            Source::Unknown => false,
        }
    }

    fn bind(&mut self, name: &str, source: Source) {
        self.bindings.entry(name.to_owned()).or_default().push(source);
    }

    fn collect_bindings(&mut self) {
        let t = self.tokens.clone();
        let mut i = 0;
        while i < t.len() {
            if is_keyword(t.get(i), "function") {
                // `[local] function name(params)` or an anonymous `function(params)`.
                let name = name_of(t.get(i + 1)).map(str::to_owned);
                let open = (i..t.len()).find(|&j| is_sym(t.get(j), "(")).unwrap();
                let params: Vec<String> = (open + 1..closing(&t, open)).filter_map(|j| name_of(t.get(j)).map(str::to_owned)).collect();
                for (index, param) in params.iter().enumerate() {
                    let source = name.clone().map_or(Source::Unknown, |f| Source::Param(f, index));
                    self.bind(param, source);
                }
                if let Some(name) = name {
                    self.functions.insert(name, params);
                }
                i = open + 1;
            } else if is_keyword(t.get(i), "for") {
                let (names, after) = name_list(&t, i + 1);
                let over_table = is_keyword(t.get(after), "in")
                    && matches!(name_of(t.get(after + 1)), Some("ipairs" | "pairs"))
                    && is_sym(t.get(after + 2), "(")
                    && is_sym(t.get(after + 4), ")");
                for (index, name) in names.iter().enumerate() {
                    let source = match name_of(t.get(after + 3)) {
                        Some(table) if over_table && index == 1 => Source::ElementOf(table.to_owned()),
                        _ => Source::Unknown,
                    };
                    self.bind(name, source);
                }
                i = after + 1;
            } else if is_keyword(t.get(i), "local") && name_of(t.get(i + 1)).is_some() {
                let (names, j) = name_list(&t, i + 1);
                let values = if is_sym(t.get(j), "=") { split_args(&t, j + 1, exprlist_end(&t, j + 1)) } else { Vec::new() };
                for (index, name) in names.iter().enumerate() {
                    self.bind_value(name, values.get(index).copied());
                }
                i = j + 1;
            } else if is_sym(t.get(i), "=") {
                self.collect_assignment(i);
                i += 1;
            } else if name_of(t.get(i)) == Some("table") && is_sym(t.get(i + 1), ".") && name_of(t.get(i + 2)) == Some("insert") {
                let args = split_args(&t, i + 4, closing(&t, i + 3));
                if let (Some(&(from, to)), Some(&value)) = (args.first(), args.last())
                    && to == from + 1
                {
                    let table = name_of(t.get(from)).unwrap_or_default().to_owned();
                    self.elements.entry(table).or_default().push(value);
                }
                i += 1;
            } else {
                i += 1;
            }
        }
    }

    /// `name = value`: a table constructor also records its positional items as elements.
    fn bind_value(&mut self, name: &str, value: Option<(usize, usize)>) {
        let Some((from, to)) = value else { return self.bind(name, Source::Unknown) };
        if is_sym(self.tokens.get(from), "{") && closing(&self.tokens, from) == to - 1 {
            let items = split_args(&self.tokens, from + 1, to - 1);
            let positional = items.into_iter().filter(|&(a, b)| !(a..b).any(|k| is_sym(self.tokens.get(k), "=")));
            let positional: Vec<_> = positional.collect();
            self.elements.entry(name.to_owned()).or_default().extend(positional);
        }
        self.bind(name, Source::Expr(from, to));
    }

    /// An assignment statement whose `=` is at `eq`: `a, t[k], u.f = e1, e2, e3`.
    fn collect_assignment(&mut self, eq: usize) {
        let t = &self.tokens;
        // Walk back over the targets: names, `.field`, `[index]`, separated by commas.
        let mut start = eq;
        loop {
            let mut j = start;
            loop {
                if is_sym(t.get(j.wrapping_sub(1)), "]") {
                    let mut depth = 0;
                    j -= 1;
                    loop {
                        if is_sym(t.get(j), "]") {
                            depth += 1;
                        } else if is_sym(t.get(j), "[") {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        j -= 1;
                    }
                } else if j > 0 && name_of(t.get(j - 1)).is_some() {
                    j -= 1;
                    if !is_sym(t.get(j.wrapping_sub(1)), ".") {
                        break;
                    }
                    j -= 1;
                } else {
                    return; // `=` inside a table constructor's `[k] = v` or `k = v`, or not a statement
                }
            }
            start = j;
            if !is_sym(t.get(start.wrapping_sub(1)), ",") {
                break;
            }
            start -= 1;
        }
        if is_sym(t.get(start.wrapping_sub(1)), "{") || is_sym(t.get(start.wrapping_sub(1)), ",") {
            return;
        }
        let targets: Vec<(String, bool)> = split_args(t, start, eq)
            .into_iter()
            .map(|(from, to)| (name_of(t.get(from)).unwrap_or_default().to_owned(), to == from + 1))
            .collect();
        let values = split_args(t, eq + 1, exprlist_end(t, eq + 1));
        for (index, (name, plain)) in targets.into_iter().enumerate() {
            if plain {
                self.bind_value(&name, values.get(index).copied());
            } else if let Some(&value) = values.get(index) {
                self.elements.entry(name).or_default().push(value);
            }
        }
    }

    /// Does the expression `[from, to)` always yield a key (or, for `unpack`, only keys)?
    fn is_key(&self, from: usize, to: usize) -> bool {
        self.is_key_given(from, to, &self.key_names)
    }

    fn is_key_given(&self, mut from: usize, mut to: usize, names: &HashSet<String>) -> bool {
        let t = &self.tokens;
        while from < to && is_sym(t.get(from), "(") && closing(t, from) == to - 1 {
            (from, to) = (from + 1, to - 1);
        }
        if name_of(t.get(from)) == Some("KEYS") && is_sym(t.get(from + 1), "[") && closing(t, from + 1) == to - 1 {
            return true;
        }
        if let Some(table) = self.unpack_of(from, to) {
            return table == "KEYS" || self.all_keys(table, names);
        }
        match name_of(t.get(from)) {
            Some(name) => to == from + 1 && name != "KEYS" && names.contains(name),
            None => false,
        }
    }

    /// Table `table` has elements, and every one is a key.
    fn all_keys(&self, table: &str, names: &HashSet<String>) -> bool {
        let elements = self.elements.get(table).map(Vec::as_slice).unwrap_or_default();
        !elements.is_empty() && elements.iter().all(|&(a, b)| self.is_key_given(a, b, names))
    }

    /// `unpack(t, …)` or `table.unpack(t, …)` spanning `[from, to)`: the table's name.
    fn unpack_of(&self, from: usize, to: usize) -> Option<&str> {
        let t = &self.tokens;
        let at = if name_of(t.get(from)) == Some("table") && is_sym(t.get(from + 1), ".") { from + 2 } else { from };
        let open = at + 1;
        let spans = name_of(t.get(at)) == Some("unpack") && is_sym(t.get(open), "(") && closing(t, open) == to - 1;
        if spans { name_of(t.get(open + 1)) } else { None }
    }

    /// `function` is called, and every call passes a key as argument `index`.
    fn passes_keys(&self, function: &str, index: usize, names: &HashSet<String>) -> bool {
        let calls = self.calls_of(function);
        !calls.is_empty() && calls.iter().all(|args| args.get(index).is_some_and(|&(a, b)| self.is_key_given(a, b, names)))
    }

    /// Argument ranges of every call `function(…)` (not its definition).
    fn calls_of(&self, function: &str) -> Vec<Vec<(usize, usize)>> {
        let t = &self.tokens;
        (0..t.len())
            .filter(|&i| name_of(t.get(i)) == Some(function) && is_sym(t.get(i + 1), "("))
            .filter(|&i| !is_keyword(t.get(i.wrapping_sub(1)), "function") && !is_sym(t.get(i.wrapping_sub(1)), "."))
            .map(|i| split_args(t, i + 2, closing(t, i + 1)))
            .collect()
    }

    /// Every `redis.call`/`redis.pcall` whose keys do not provably come from KEYS.
    fn violations(&self) -> Vec<String> {
        let t = &self.tokens;
        let mut found = Vec::new();
        for i in 0..t.len() {
            let is_call = matches!(name_of(t.get(i)), Some("redis" | "raw_redis"))
                && is_sym(t.get(i + 1), ".")
                && matches!(name_of(t.get(i + 2)), Some("call" | "pcall"))
                && is_sym(t.get(i + 3), "(");
            if !is_call {
                continue;
            }
            let line = t[i].line;
            let args = split_args(t, i + 4, closing(t, i + 3));
            // prelude.lua's `redis.call` forwards what a script passed it: checked where it is
            // called. A restore applies a recorded write command (checked against EFFECT) to a
            // key that must still come from KEYS.
            match args.first().map(|&(a, _)| name_of(t.get(a))) {
                Some(Some("forwarded_command")) => continue,
                Some(Some("effect_command")) => {
                    if let Some(&(a, b)) = args.get(1)
                        && !self.is_key(a, b)
                    {
                        found.push(format!("{}:{line}: a recorded command's key does not come from KEYS", self.file));
                    }
                    continue;
                }
                _ => {}
            }
            // The command and its arguments: literal, or a table built for `unpack`.
            let (command, items): (Option<String>, Vec<(usize, usize)>) = match args.first() {
                Some(&(a, b)) if b == a + 1 => match &t[a].tok {
                    Tok::Str(command) => (Some(command.clone()), args[1..].to_vec()),
                    _ => (None, Vec::new()),
                },
                Some(&(a, b)) => match self.unpack_of(a, b).and_then(|table| self.elements.get(table)) {
                    Some(elements) if args.len() == 1 => match elements.first().map(|&(x, _)| &t[x].tok) {
                        Some(Tok::Str(command)) => (Some(command.clone()), elements[1..].to_vec()),
                        _ => (None, Vec::new()),
                    },
                    _ => (None, Vec::new()),
                },
                None => (None, Vec::new()),
            };
            let Some(command) = command else {
                found.push(format!("{}:{line}: the command is not a string literal (or a table of one)", self.file));
                continue;
            };
            let Some(spec) = key_spec(&command) else {
                found.push(format!("{}:{line}: {command}: unknown command; add its key positions to key_spec", self.file));
                continue;
            };
            for (a, b) in self.key_arguments(spec, &items) {
                if !self.is_key(a, b) {
                    let text: Vec<String> = t[a..b].iter().map(|k| k.tok.to_string()).collect();
                    found.push(format!("{}:{line}: {command}: key argument {} does not come from KEYS", self.file, text.join(" ")));
                }
            }
        }
        found
    }

    fn key_arguments(&self, spec: KeySpec, items: &[(usize, usize)]) -> Vec<(usize, usize)> {
        let is_literal = |&(a, b): &(usize, usize)| b == a + 1 && matches!(self.tokens[a].tok, Tok::Str(_));
        let until_keyword = |from: usize| items.iter().skip(from).take_while(|item| !is_literal(item)).copied().collect::<Vec<_>>();
        match spec {
            KeySpec::None => Vec::new(),
            KeySpec::First => items.iter().take(1).copied().collect(),
            KeySpec::AfterSubcommand => items.iter().skip(1).take(1).copied().collect(),
            KeySpec::FirstTwo => items.iter().take(2).copied().collect(),
            KeySpec::All => items.to_vec(),
            KeySpec::Pairs => items.iter().step_by(2).copied().collect(),
            KeySpec::StoreNumkeys => items.iter().take(1).copied().chain(until_keyword(2)).collect(),
            KeySpec::Numkeys => until_keyword(1),
        }
    }
}

/// What is wrong with a script's first line, if anything.
fn shebang_line_problem(first: &str) -> Option<String> {
    if !(first == "#!lua" || first.starts_with("#!lua ")) {
        return Some("does not start with the `#!lua` shebang".to_owned());
    }
    ["allow-cross-slot-keys", "no-cluster"]
        .iter()
        .find(|flag| first.contains(*flag))
        .map(|flag| format!("declares {flag}, which lifts Redis Cluster's slot checks"))
}

/// `prelude.lua` and `prelude_league.lua` are composed after every script's own shebang
/// (`redis::scripts::compose`), so they must have none; every other script must start with one.
fn shebang_problem(name: &str, source: &str) -> Option<String> {
    let first = source.lines().next().unwrap_or_default();
    if name.starts_with("prelude") {
        return first.starts_with("#!").then(|| "is composed after each script's shebang and must not have one".to_owned());
    }
    shebang_line_problem(first)
}

/// Every problem found in the scripts of `folder`.
fn check_folder(folder: &Path) -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "lua"))
        .collect();
    files.sort();
    let sources: Vec<String> = files.iter().map(|path| std::fs::read_to_string(path).unwrap()).collect();
    let mut problems = Vec::new();
    for (path, source) in files.iter().zip(&sources) {
        let name = path.file_name().unwrap().to_string_lossy();
        if let Some(problem) = shebang_problem(&name, source) {
            problems.push(format!("{name}: {problem}"));
        }
        let others: Vec<String> = sources.iter().filter(|s| *s != source).cloned().collect();
        problems.extend(Script::new(&name, source, &others).violations());
    }
    problems
}

fn check(source: &str) -> Vec<String> {
    Script::new("test.lua", source, &[]).violations()
}

#[test]
fn every_script_declares_every_key_it_touches() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/src/redis/scripts");
    let problems = check_folder(&folder);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let checked =
        std::fs::read_dir(&folder).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "lua")).count();
    assert!(checked >= 1);
}

#[test]
fn keys_from_keys_pass() {
    let source = r#"
        local marker = KEYS[1]
        local board, meta = KEYS[2], KEYS[3]
        local function expire_once(key, at)
          if redis.call('TTL', key) == -1 then redis.call('EXPIREAT', key, at) end
        end
        local order = {}
        for i = 4, #KEYS do
          local key = KEYS[i]
          order[#order + 1] = key
        end
        for _, key in ipairs(order) do expire_once(key, ARGV[1]) end
        expire_once(KEYS[2], ARGV[2])
        redis.call('ZUNIONSTORE', board, 1, board, 'WEIGHTS', ARGV[2])
        local union = {'ZUNIONSTORE', meta, #KEYS - 3}
        for i = 4, #KEYS do union[#union + 1] = KEYS[i] end
        union[#union + 1] = 'WEIGHTS'
        for i = 4, #KEYS do union[#union + 1] = ARGV[i] end
        redis.call(unpack(union))
        redis.call('DEL', unpack(KEYS, 2))
        redis.call('HMGET', KEYS[1], unpack({'a', 'b'}))
        redis.call('SET', (marker), ARGV[1] .. '\n' .. 'x', 'EX', 60) -- a comment with redis.call('GET', 'x')
        --[[ a block comment: redis.call('GET', ARGV[1]) ]]
        return redis.call('ZCARD', KEYS[4])
    "#;
    assert_eq!(check(source), Vec::<String>::new());
}

#[test]
fn keys_built_or_passed_otherwise_are_reported() {
    let cases = [
        ("redis.call('GET', ARGV[1])", "GET"),
        ("redis.call('GET', KEYS[1] .. ':suffix')", "GET"),
        ("local k = 'st:v1:{a}:x' redis.call('DEL', k)", "DEL"),
        ("local k = KEYS[1] k = ARGV[1] redis.call('HGET', k, 'f')", "HGET"),
        ("local function f(k) return redis.call('GET', k) end f(KEYS[1]) f(ARGV[1])", "GET"),
        ("local function f(k) return redis.call('GET', k) end", "GET"),
        ("local t = {KEYS[1], ARGV[1]} for _, k in ipairs(t) do redis.call('ZREM', k, 'm') end", "ZREM"),
        ("redis.call('RENAME', KEYS[1], string.format('%s:x', KEYS[1]))", "RENAME"),
        ("redis.call('ZUNIONSTORE', KEYS[1], 2, KEYS[2], ARGV[1])", "ZUNIONSTORE"),
        ("local c = 'GET' redis.call(c, KEYS[1])", "not a string literal"),
        ("redis.call('OBJECT', 'ENCODING', KEYS[1])", "unknown command"),
    ];
    for (source, expected) in cases {
        let problems = check(source);
        assert_eq!(problems.len(), 1, "{source}: {problems:?}");
        assert!(problems[0].contains(expected), "{source}: {problems:?}");
    }
}

#[test]
fn shebangs_are_required_without_cluster_escapes() {
    let problem = |source: &str| shebang_problem("x.lua", source);
    assert_eq!(problem("#!lua\nreturn 1"), None);
    assert_eq!(problem("#!lua flags=no-writes\nreturn 1"), None);
    assert!(problem("return 1").is_some());
    assert!(problem("#!lua flags=allow-cross-slot-keys\n").unwrap().contains("allow-cross-slot-keys"));
    assert!(problem("#!lua flags=no-writes,no-cluster\n").unwrap().contains("no-cluster"));
    assert_eq!(shebang_problem("prelude.lua", "--[[ helpers ]]\n"), None);
    assert!(shebang_problem("prelude.lua", "#!lua\n").is_some(), "a second shebang would be a syntax error");
}
