//! A script's tokens read for where each key a command takes comes from (see the module).

use std::collections::{HashMap, HashSet};

use super::grammar::*;
use super::tokens::{Tok, Token, tokenize};

pub(super) struct Script {
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
    pub(super) fn new(file: &str, source: &str, others: &[String]) -> Self {
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

    pub(super) fn external_params(&self, others: &[String]) -> HashMap<(String, usize), bool> {
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
    pub(super) fn solve_key_names(&self) -> HashSet<String> {
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

    pub(super) fn source_is_key(&self, source: &Source, names: &HashSet<String>) -> bool {
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

    pub(super) fn bind(&mut self, name: &str, source: Source) {
        self.bindings.entry(name.to_owned()).or_default().push(source);
    }

    pub(super) fn collect_bindings(&mut self) {
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
    pub(super) fn bind_value(&mut self, name: &str, value: Option<(usize, usize)>) {
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
    pub(super) fn collect_assignment(&mut self, eq: usize) {
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
    pub(super) fn is_key(&self, from: usize, to: usize) -> bool {
        self.is_key_given(from, to, &self.key_names)
    }

    pub(super) fn is_key_given(&self, mut from: usize, mut to: usize, names: &HashSet<String>) -> bool {
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
    pub(super) fn all_keys(&self, table: &str, names: &HashSet<String>) -> bool {
        let elements = self.elements.get(table).map(Vec::as_slice).unwrap_or_default();
        !elements.is_empty() && elements.iter().all(|&(a, b)| self.is_key_given(a, b, names))
    }

    /// `unpack(t, …)` or `table.unpack(t, …)` spanning `[from, to)`: the table's name.
    pub(super) fn unpack_of(&self, from: usize, to: usize) -> Option<&str> {
        let t = &self.tokens;
        let at = if name_of(t.get(from)) == Some("table") && is_sym(t.get(from + 1), ".") { from + 2 } else { from };
        let open = at + 1;
        let spans = name_of(t.get(at)) == Some("unpack") && is_sym(t.get(open), "(") && closing(t, open) == to - 1;
        if spans { name_of(t.get(open + 1)) } else { None }
    }

    /// `function` is called, and every call passes a key as argument `index`.
    pub(super) fn passes_keys(&self, function: &str, index: usize, names: &HashSet<String>) -> bool {
        let calls = self.calls_of(function);
        !calls.is_empty() && calls.iter().all(|args| args.get(index).is_some_and(|&(a, b)| self.is_key_given(a, b, names)))
    }

    /// Argument ranges of every call `function(…)` (not its definition).
    pub(super) fn calls_of(&self, function: &str) -> Vec<Vec<(usize, usize)>> {
        let t = &self.tokens;
        (0..t.len())
            .filter(|&i| name_of(t.get(i)) == Some(function) && is_sym(t.get(i + 1), "("))
            .filter(|&i| !is_keyword(t.get(i.wrapping_sub(1)), "function") && !is_sym(t.get(i.wrapping_sub(1)), "."))
            .map(|i| split_args(t, i + 2, closing(t, i + 1)))
            .collect()
    }

    /// Every `redis.call`/`redis.pcall` whose keys do not provably come from KEYS.
    pub(super) fn violations(&self) -> Vec<String> {
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

    pub(super) fn key_arguments(&self, spec: KeySpec, items: &[(usize, usize)]) -> Vec<(usize, usize)> {
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
