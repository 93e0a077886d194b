//! The session key: 16 bytes, written as mosh-server prints it (22 characters of base64).

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Length of the key text: base64 of 16 bytes with the trailing `==` removed (MOSH-PROTOCOL.md
/// 1.3).
pub const KEY_TEXT_LEN: usize = 22;

/// A 16-byte session key, printed by mosh-server as 22 characters of base64.
///
/// `Debug` never shows the key. There is deliberately no `Display`: a key must not end up in a log
/// by accident, so turning it back into text takes an explicit [`Key::to_base64`].
#[derive(Clone, PartialEq, Eq)]
pub struct Key(pub [u8; 16]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Why a key text was refused. The messages never repeat the key text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    #[error("a mosh key is exactly 22 base64 characters, got {len}")]
    WrongLength { len: usize },
    #[error("a mosh key uses only A-Z a-z 0-9 + /; character {position} is not one of them")]
    BadCharacter { position: usize },
    /// mosh re-encodes the decoded key and refuses text that differs, so the 22nd character must
    /// carry zero low bits (one of `A`, `Q`, `g`, `w`).
    #[error("the last character of a mosh key must be A, Q, g or w (it carries only 2 bits)")]
    NonCanonical,
}

impl Key {
    /// The key as mosh-server prints it (22 characters). Treat the result as a secret.
    pub fn to_base64(&self) -> String {
        let mut text = STANDARD.encode(self.0);
        // 16 bytes always encode to 22 characters plus "==".
        text.truncate(KEY_TEXT_LEN);
        text
    }
}

fn is_alphabet(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

impl FromStr for Key {
    type Err = KeyError;

    /// Parses the 22-character text of `MOSH CONNECT <port> <key>` or `MOSH_KEY` (no whitespace).
    fn from_str(text: &str) -> Result<Key, KeyError> {
        let bytes = text.as_bytes();
        if bytes.len() != KEY_TEXT_LEN {
            return Err(KeyError::WrongLength { len: text.chars().count() });
        }
        if let Some(position) = bytes.iter().position(|&b| !is_alphabet(b)) {
            return Err(KeyError::BadCharacter { position });
        }
        let mut padded = [b'='; KEY_TEXT_LEN + 2];
        padded[..KEY_TEXT_LEN].copy_from_slice(bytes);
        let mut key = [0u8; 16];
        // The alphabet and length are checked, so the only remaining failure is a last character
        // with non-zero low bits, which the STANDARD engine rejects as a non-canonical encoding.
        match STANDARD.decode_slice(padded, &mut key) {
            Ok(16) => Ok(Key(key)),
            _ => Err(KeyError::NonCanonical),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_sheet_vector_and_round_trips() {
        let key: Key = "AAECAwQFBgcICQoLDA0ODw".parse().unwrap();
        let expected: Vec<u8> = (0u8..16).collect();
        assert_eq!(key.0.as_slice(), expected.as_slice());
        assert_eq!(key.to_base64(), "AAECAwQFBgcICQoLDA0ODw");
    }

    #[test]
    fn rejects_wrong_length_alphabet_and_low_bits() {
        assert_eq!("AAECAwQFBgcICQoLDA0OD".parse::<Key>(), Err(KeyError::WrongLength { len: 21 }));
        assert_eq!(
            "AAECAwQFBgcICQoLDA0ODw==".parse::<Key>(),
            Err(KeyError::WrongLength { len: 24 })
        );
        assert_eq!(
            "AAECAwQFBgcICQoLDA0ODw\n".parse::<Key>(),
            Err(KeyError::WrongLength { len: 23 })
        );
        assert_eq!(
            "AAECAwQFBgcI-QoLDA0ODw".parse::<Key>(),
            Err(KeyError::BadCharacter { position: 12 })
        );
        assert_eq!("AAECAwQFBgcICQoLDA0ODx".parse::<Key>(), Err(KeyError::NonCanonical));
        for last in ['A', 'Q', 'g', 'w'] {
            let text = format!("WLThFE98+opDlEMyexqWs{last}");
            assert!(text.parse::<Key>().is_ok(), "{last}");
        }
        for last in ['B', 'R', 'h', 'x', 'z', '/', '+', '9'] {
            let text = format!("WLThFE98+opDlEMyexqWs{last}");
            assert_eq!(text.parse::<Key>(), Err(KeyError::NonCanonical), "{last}");
        }
    }

    #[test]
    fn debug_hides_the_key() {
        let key: Key = "WLThFE98+opDlEMyexqWsA".parse().unwrap();
        let shown = format!("{key:?} {:?}", Some(&key));
        assert!(!shown.contains("WLTh"));
        assert_eq!(format!("{key:?}"), "Key(..)");
    }
}
