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

use std::path::Path;

mod grammar;
mod script;
mod tokens;

use script::Script;

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

/// The prelude's fragments (`prelude*.lua`) are composed after every script's own shebang
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
