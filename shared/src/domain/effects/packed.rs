//! The packed form of a journaled write's effects (prelude_effects.lua): MessagePack, as the
//! scripts record them in the stream once the board's drain reads it.

use super::{Command, EFFECT_COMMANDS, Effects, check_args, relative_key};

/// The first byte of the packed form (prelude_effects.lua): MessagePack's array of three.
pub const PACKED: u8 = 0x93;

impl Effects {
    /// Reads the packed form prelude_effects.lua records (`cmsgpack`, binary-safe, so no word is
    /// scanned or hex-encoded in the write's call): `[keys, commands, expiries]`, each key named
    /// once as `compact` names it (`:<rest>`, or `!` and the whole name for one outside the
    /// board's), each command `[name, place of its key (1-based), args…]`, each key's expiry in
    /// its place. A number is read as Lua's `%.17g` writes it (the other forms' text). Refuses
    /// what `parse` refuses.
    pub fn parse_packed(recorded: &[u8]) -> Result<Self, String> {
        use rmpv::Value as Packed;
        fn list(value: &Packed) -> Result<&[Packed], String> {
            match value {
                Packed::Array(items) => Ok(items.as_slice()),
                Packed::Map(map) if map.is_empty() => Ok(&[]),
                _ => Err("effects: packed: not a list".into()),
            }
        }
        fn word(value: &Packed) -> Result<Vec<u8>, String> {
            match value {
                Packed::String(text) => Ok(text.as_bytes().to_vec()),
                Packed::Binary(bytes) => Ok(bytes.clone()),
                Packed::Integer(n) => lua_number(n.as_f64().ok_or("effects: packed: a number out of range")?).map(String::into_bytes),
                Packed::F32(n) => lua_number(f64::from(*n)).map(String::into_bytes),
                Packed::F64(n) => lua_number(*n).map(String::into_bytes),
                _ => Err("effects: packed: a word that is neither text nor a number".into()),
            }
        }
        let mut read = recorded;
        let value = rmpv::decode::read_value(&mut read).map_err(|error| format!("effects: packed: {error}"))?;
        if !read.is_empty() {
            return Err("effects: packed: bytes after the effects".into());
        }
        let [names, recorded, at] = list(&value)? else { return Err("effects: packed: not [keys, commands, expiries]".into()) };
        let keys: Vec<String> = list(names)?
            .iter()
            .map(|name| {
                String::from_utf8(word(name)?).map_err(|_| "effects: a key that is not text".to_string()).and_then(|k| relative_key(&k))
            })
            .collect::<Result<_, _>>()?;
        let mut commands = Vec::new();
        for command in list(recorded)? {
            let [name, place, args @ ..] = list(command)? else { return Err("effects: a command without a key".into()) };
            let name = String::from_utf8(word(name)?).map_err(|_| "effects: a command that is not text")?;
            if !EFFECT_COMMANDS.contains(&name.as_str()) {
                return Err(format!("effects: {name:?} is not a recorded write"));
            }
            let key = place
                .as_u64()
                .and_then(|place| keys.get(usize::try_from(place).ok()?.wrapping_sub(1)))
                .cloned()
                .ok_or("effects: a key named by a place no key has")?;
            let args: Vec<Vec<u8>> = args.iter().map(word).collect::<Result<_, _>>()?;
            check_args(&name, &args)?;
            commands.push(Command { name, key, args });
        }
        let at = list(at)?;
        if at.len() != keys.len() {
            return Err("effects: not one expiry a key".into());
        }
        let expiries = keys
            .into_iter()
            .zip(at)
            .map(|(key, at)| at.as_i64().map(|at| (key, at)).ok_or_else(|| "effects: an expiry that is not whole ms".to_string()))
            .collect::<Result<_, _>>()?;
        Ok(Self { commands, expiries })
    }
}

/// A number as Lua's `string.format('%.17g', n)` writes it (prelude_effects.lua `effect_arg`):
/// 17 significant digits, trailing zeros dropped, an exponent below 1e-4 and from 1e17 on.
fn lua_number(n: f64) -> Result<String, String> {
    if !n.is_finite() {
        return Err("effects: a number that is not finite".into());
    }
    if n == 0.0 {
        return Ok(if n.is_sign_negative() { "-0" } else { "0" }.to_owned());
    }
    let trimmed = |text: &str| match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_owned(),
        false => text.to_owned(),
    };
    let scientific = format!("{n:.16e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("an exponent");
    let exponent: i32 = exponent.parse().expect("a whole exponent");
    Ok(match exponent {
        -4..=16 => trimmed(&format!("{n:.*}", usize::try_from(16 - exponent).expect("at most 20 places"))),
        _ => format!("{}e{}{:02}", trimmed(mantissa), if exponent < 0 { '-' } else { '+' }, exponent.abs()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_read_as_lua_writes_them() {
        // Each as Redis 7's Lua writes it with `string.format('%.17g', n)`.
        let lua = [
            (3.0, "3"),
            (-2.0, "-2"),
            (0.0, "0"),
            (1234567890123456.0, "1234567890123456"),
            (0.1, "0.10000000000000001"),
            (1e17, "1e+17"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1.5, "1.5"),
            (0.0001, "0.0001"),
            (1e-5, "1.0000000000000001e-05"),
            (-7.25e20, "-7.25e+20"),
            (9007199254740992.0, "9007199254740992"),
            (1733353000123.0, "1733353000123"),
            (1.0 / 3.0, "0.33333333333333331"),
        ];
        for (n, text) in lua {
            assert_eq!(lua_number(n).unwrap(), text, "{n}");
        }
        assert!(lua_number(f64::NAN).is_err());
    }

    #[test]
    fn the_packed_form_reads_as_the_json_one() {
        use rmpv::Value as P;
        let pack = |value: P| {
            let mut bytes = Vec::new();
            rmpv::encode::write_value(&mut bytes, &value).unwrap();
            bytes
        };
        let s = |text: &str| P::from(text);
        let packed = pack(P::Array(vec![
            P::Array(vec![s(":evt:1:2"), s(":z:all:all")]),
            P::Array(vec![
                P::Array(vec![s("HSET"), P::from(1), P::Binary(vec![0, 0xff, 0x41]), s("a1")]),
                P::Array(vec![s("ZADD"), P::from(2), P::from(30000), s("ann")]),
                P::Array(vec![s("HSET"), P::from(1), s("#"), P::F32(2.5)]),
            ]),
            P::Array(vec![P::from(5), P::from(-1)]),
        ]));
        assert_eq!(packed[0], PACKED);
        let json = json!([
            [["HSET", ":evt:1:2", "\u{1}00ff41", "a1"], ["ZADD", ":z:all:all", "30000", "ann"], ["HSET", ":evt:1:2", "#", "2.5"]],
            [":evt:1:2", 5, ":z:all:all", -1]
        ]);
        assert_eq!(Effects::parse_packed(&packed).unwrap(), Effects::parse(&json).unwrap());
        let empty = pack(P::Array(vec![P::Array(vec![]), P::Map(vec![]), P::Array(vec![])]));
        assert_eq!(Effects::parse_packed(&empty).unwrap(), Effects::default());
        let bad = [
            P::Array(vec![P::Array(vec![s(":h")]), P::Array(vec![]), P::Array(vec![])]), // a key without its expiry
            P::Array(vec![
                P::Array(vec![s(":h")]),
                P::Array(vec![P::Array(vec![s("HSET"), P::from(2), s("f"), s("v")])]),
                P::Array(vec![P::from(-1)]),
            ]),
            P::Array(vec![
                P::Array(vec![s(":h")]),
                P::Array(vec![P::Array(vec![s("HSET"), P::from(0), s("f"), s("v")])]),
                P::Array(vec![P::from(-1)]),
            ]),
            P::Array(vec![P::Array(vec![s(":h")]), P::Array(vec![P::Array(vec![s("FLUSHALL"), P::from(1)])]), P::Array(vec![P::from(-1)])]),
            P::Array(vec![P::Array(vec![s("!other:{b}:z")]), P::Array(vec![]), P::Array(vec![P::from(-1)])]),
            P::Array(vec![
                P::Array(vec![s(":h")]),
                P::Array(vec![P::Array(vec![s("HSET"), P::from(1), s("f")])]),
                P::Array(vec![P::from(-1)]),
            ]),
            P::Array(vec![P::Array(vec![s(":h")]), P::Array(vec![]), P::Array(vec![s("soon")])]),
            P::Array(vec![P::Array(vec![]), P::Array(vec![])]),
        ];
        for bad in bad {
            assert!(Effects::parse_packed(&pack(bad.clone())).is_err(), "{bad}");
        }
        let mut trailing = empty.clone();
        trailing.push(0);
        assert!(Effects::parse_packed(&trailing).is_err());
        assert!(Effects::parse_packed(&[PACKED, 0xc1]).is_err());
    }
}
