//! Keyboard bytes of one input event, split into what the predictor cares about.
//!
//! Deliberately not a terminal parser (PREDICTION.md §11): a sequence is recognised only when all
//! of it is in this one event, so Esc, `O`, `C` typed as three vim commands stay three keys.

use crate::terminal::width::wcwidth;

/// One key as the predictor sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    /// A printable character one column wide.
    Print(char),
    /// DEL (0x7F): Backspace as xterm.js sends it.
    Delete,
    /// CR: Enter.
    Return,
    /// `ESC [ C` or `ESC O C`, without parameters.
    Right,
    /// `ESC [ D` or `ESC O D`, without parameters.
    Left,
    /// Anything else: a control key, another escape sequence, a wide or combining character.
    /// Predicts nothing and starts a new epoch.
    Other,
    /// A bracketed-paste start marker: the batch is a paste.
    PasteStart,
}

/// The keys of one input event, in order.
pub fn events(bytes: &[u8]) -> Vec<Key> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let (key, len) = next(&bytes[i..]);
        keys.push(key);
        i += len.max(1);
    }
    keys
}

/// The first key of `b` and how many bytes it takes.
fn next(b: &[u8]) -> (Key, usize) {
    match b[0] {
        0x0d => (Key::Return, 1),
        0x7f => (Key::Delete, 1),
        0x1b => escape(b),
        0x00..=0x1f => (Key::Other, 1),
        _ => utf8(b),
    }
}

fn escape(b: &[u8]) -> (Key, usize) {
    match b.get(1) {
        None => (Key::Other, 1),
        Some(b'O') => match b.get(2) {
            Some(b'C') => (Key::Right, 3),
            Some(b'D') => (Key::Left, 3),
            Some(_) => (Key::Other, 3),
            None => (Key::Other, 2),
        },
        Some(b'[') => {
            // CSI: parameter and intermediate bytes, then one final byte (0x40..=0x7E).
            let end = b[2..].iter().position(|&c| (0x40..=0x7e).contains(&c));
            match end {
                Some(0) if b[2] == b'C' => (Key::Right, 3),
                Some(0) if b[2] == b'D' => (Key::Left, 3),
                Some(n) if &b[2..2 + n + 1] == b"200~" => (Key::PasteStart, 2 + n + 1),
                Some(n) => (Key::Other, 2 + n + 1),
                None => (Key::Other, b.len()),
            }
        }
        // Alt/Meta + a key.
        Some(_) => {
            let (_, len) = utf8(&b[1..]);
            (Key::Other, 1 + len)
        }
    }
}

/// One UTF-8 character; invalid bytes are one `Other` each.
fn utf8(b: &[u8]) -> (Key, usize) {
    let len = match b[0] {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return (Key::Other, 1),
    };
    let Some(ch) =
        b.get(..len).and_then(|s| std::str::from_utf8(s).ok()).and_then(|s| s.chars().next())
    else {
        return (Key::Other, 1);
    };
    if wcwidth(ch) == 1 { (Key::Print(ch), len) } else { (Key::Other, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_split_as_the_predictor_needs() {
        assert_eq!(events(b"ab"), vec![Key::Print('a'), Key::Print('b')]);
        assert_eq!(events(b"\x7f\r"), vec![Key::Delete, Key::Return]);
        assert_eq!(events(b"\x1b[C\x1bOD"), vec![Key::Right, Key::Left]);
        assert_eq!(events(b"\x1b[1;5C"), vec![Key::Other], "Ctrl-right is not a one-column move");
        assert_eq!(events(b"\x1b[A"), vec![Key::Other]);
        assert_eq!(events(b"\x1bO"), vec![Key::Other], "ESC O alone is not an arrow");
        assert_eq!(events(b"\x1b"), vec![Key::Other]);
        assert_eq!(events(b"\x1bb"), vec![Key::Other], "Alt-b");
        assert_eq!(events("é€".as_bytes()), vec![Key::Print('é'), Key::Print('€')]);
        assert_eq!(events("漢".as_bytes()), vec![Key::Other], "wide characters are not predicted");
        assert_eq!(events(b"\x1b[200~x\x1b[201~")[0], Key::PasteStart);
        assert_eq!(events(b"\xff\xfe"), vec![Key::Other, Key::Other]);
        assert_eq!(events(b"\t\x03"), vec![Key::Other, Key::Other]);
    }
}
