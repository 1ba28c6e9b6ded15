//! Blocks packed for a script's `struct.unpack`: one argument per event instead of dozens. In
//! Redis every script argument costs about a thousand instructions (parsed, made an object,
//! then a Lua string) and every `tonumber` in the script about two thousand; a block carries
//! numbers as numbers. The format letters name the Lua side's codes (apply_event.lua's
//! header lists each block's layout).

/// A block under construction, big-endian throughout.
#[derive(Debug, Default)]
pub(super) struct Block(Vec<u8>);

impl Block {
    /// `H`: an index into KEYS (0: none). Calls hold at most a few thousand keys.
    pub(super) fn index(&mut self, index: usize) -> &mut Self {
        let index = u16::try_from(index).expect("a script call names fewer than 65,536 keys");
        self.0.extend_from_slice(&index.to_be_bytes());
        self
    }

    /// `B`: a flag or a small count.
    pub(super) fn byte(&mut self, value: u8) -> &mut Self {
        self.0.push(value);
        self
    }

    /// `d`: a number. Integers up to 2^53 come out exactly.
    pub(super) fn number(&mut self, value: i64) -> &mut Self {
        self.0.extend_from_slice(&(value as f64).to_be_bytes());
        self
    }

    /// `cN`: bytes of a length both sides know (`N` in the format).
    pub(super) fn fixed(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.extend_from_slice(bytes);
        self
    }

    /// `Hc0`: a string, its length first. Ids, targets and actions are validated far below
    /// 65,535 bytes.
    pub(super) fn text(&mut self, text: impl AsRef<[u8]>) -> &mut Self {
        let bytes = text.as_ref();
        let len = u16::try_from(bytes.len()).expect("validated ids are far shorter than 65,535 bytes");
        self.0.extend_from_slice(&len.to_be_bytes());
        self.0.extend_from_slice(bytes);
        self
    }

    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_big_endian_with_length_prefixed_text() {
        let mut block = Block::default();
        block.index(258).byte(1).number(3).fixed(b"ab").text("u1");
        let mut expected = vec![1, 2, 1];
        expected.extend_from_slice(&3f64.to_be_bytes());
        expected.extend_from_slice(b"ab\x00\x02u1");
        assert_eq!(block.into_bytes(), expected);
    }
}
