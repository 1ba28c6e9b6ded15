//! Allow-lists for every identifier that can reach a Redis key or field.
//!
//! Anything outside these sets is refused before Redis is touched: no braces (they would
//! change a key's cluster hash slot), no whitespace or control characters, no non-ASCII,
//! bounded length.

/// Longest `event_id`, `user_id` or `item_id`.
pub const MAX_ID_LEN: usize = 128;
/// Longest `target` (page paths are longer than plain ids).
pub const MAX_TARGET_LEN: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{field} is empty")]
    Empty { field: &'static str },
    #[error("{field} is longer than {max} characters")]
    TooLong { field: &'static str, max: usize },
    #[error("{field} may only contain {allowed}")]
    Forbidden { field: &'static str, allowed: &'static str },
}

const ID_CHARS: &str = "letters, digits and - _ . : @";
const TARGET_CHARS: &str = "letters, digits and - _ . : @ / ? = & % + ~ #";

fn check(field: &'static str, value: &str, max: usize, allowed: &'static str, ok: impl Fn(u8) -> bool) -> Result<(), IdError> {
    if value.is_empty() {
        return Err(IdError::Empty { field });
    }
    if value.len() > max {
        return Err(IdError::TooLong { field, max });
    }
    if !value.bytes().all(ok) {
        return Err(IdError::Forbidden { field, allowed });
    }
    Ok(())
}

fn id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@')
}

/// What of a client-supplied id may reach a log line or an error message: the id itself when
/// it passes the id allow-list, otherwise only its length (a body can be a megabyte of anything).
pub fn loggable(value: &str) -> std::borrow::Cow<'_, str> {
    if validate_id("id", value).is_ok() { value.into() } else { format!("<invalid id of {} bytes>", value.len()).into() }
}

/// `event_id`, `user_id`, `item_id`: they become parts of keys.
/// An id made up for a write that came without one (a correction without `correction_id`, heat
/// without `event_id`), so even that request is applied exactly once: a cluster client
/// re-sends a script call whose connection dropped, and the re-sent call finds the marker.
/// It passes `validate_id`.
pub fn made_up_id() -> String {
    format!("auto-{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

pub fn validate_id(field: &'static str, value: &str) -> Result<(), IdError> {
    check(field, value, MAX_ID_LEN, ID_CHARS, id_byte)
}

/// `target`: stored as a hash field, never as a key; paths are allowed.
pub fn validate_target(value: &str) -> Result<(), IdError> {
    check("target", value, MAX_TARGET_LEN, TARGET_CHARS, |b| {
        id_byte(b) || matches!(b, b'/' | b'?' | b'=' | b'&' | b'%' | b'+' | b'~' | b'#')
    })
}

pub fn validate_board_name(value: &str) -> Result<(), IdError> {
    check("board", value, 32, "a-z, 0-9 and -", |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

pub fn validate_action(value: &str) -> Result<(), IdError> {
    check("action", value, 32, "a-z, 0-9 and _", |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_allowed_ids_reach_logs() {
        assert_eq!(super::loggable("e-1:a@b"), "e-1:a@b");
        assert_eq!(super::loggable(&"x".repeat(10_000)), "<invalid id of 10000 bytes>");
        assert_eq!(super::loggable("a\nfake log line"), "<invalid id of 15 bytes>");
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn refuses_what_could_break_a_key() {
        for bad in ["", "a{b}", "a}", "a b", "a\nb", "a\tb", "a\u{7f}", "é", "用户", &"x".repeat(129)] {
            assert!(validate_id("user_id", bad).is_err(), "{bad:?} accepted");
        }
        for good in ["u1", "user:101", "a.b-c_d@e", &"x".repeat(128)] {
            assert_eq!(validate_id("user_id", good), Ok(()));
        }
        assert_eq!(validate_target("/article/detail/1?x=1"), Ok(()));
        assert!(validate_target("/a b").is_err());
        assert!(validate_target("{x}").is_err());
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(validate_id("event_id", ""), Err(IdError::Empty { field: "event_id" }));
        assert_eq!(validate_id("user_id", "a b").unwrap_err().to_string(), format!("user_id may only contain {ID_CHARS}"));
    }

    proptest! {
        #[test]
        fn accepted_ids_never_contain_key_breaking_bytes(s in "\\PC{0,140}") {
            if validate_id("id", &s).is_ok() {
                let breaks_keys = s.contains(['{', '}', ' ', '\n', '\r', '\t']);
                prop_assert!(!breaks_keys);
                prop_assert!(s.is_ascii() && !s.is_empty() && s.len() <= MAX_ID_LEN);
            }
        }
    }
}
