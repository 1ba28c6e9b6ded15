//! What the key check knows of Lua and of Redis commands: keywords, where a name's value
//! comes from, which arguments of a command are keys, and token-range helpers.

use super::tokens::{Tok, Token};

pub(super) const KEYWORDS: [&str; 22] = [
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in", "local", "nil", "not", "or", "repeat",
    "return", "then", "true", "until", "while",
];

/// Where a name's value comes from.
#[derive(Debug, Clone)]
pub(super) enum Source {
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
pub(super) enum KeySpec {
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

pub(super) fn key_spec(command: &str) -> Option<KeySpec> {
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
pub(super) fn split_args(tokens: &[Token], start: usize, end: usize) -> Vec<(usize, usize)> {
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
pub(super) fn closing(tokens: &[Token], open: usize) -> usize {
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

pub(super) fn is_sym(token: Option<&Token>, symbol: &str) -> bool {
    matches!(token, Some(Token { tok: Tok::Sym(s), .. }) if s == symbol)
}

pub(super) fn name_of(token: Option<&Token>) -> Option<&str> {
    match token {
        Some(Token { tok: Tok::Name(n), .. }) if !KEYWORDS.contains(&n.as_str()) => Some(n),
        _ => None,
    }
}

pub(super) fn is_keyword(token: Option<&Token>, keyword: &str) -> bool {
    matches!(token, Some(Token { tok: Tok::Name(n), .. }) if n == keyword)
}

/// The names of `a, b, c` starting at `start`, and the index after them.
pub(super) fn name_list(tokens: &[Token], start: usize) -> (Vec<String>, usize) {
    let (mut names, mut i) = (Vec::new(), start);
    while let Some(name) = name_of(tokens.get(i)) {
        names.push(name.to_owned());
        i += if is_sym(tokens.get(i + 1), ",") { 2 } else { 1 };
    }
    (names, i)
}

/// Where the expression list starting at `start` ends (the statement's end).
pub(super) fn exprlist_end(tokens: &[Token], start: usize) -> usize {
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
