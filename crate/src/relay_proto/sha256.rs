//! SHA-256 digests as the protocol carries them: 64 lowercase hex digits. The one parser and
//! printer of that form (offers, upload headers, paste file names, `tern send`).

use std::fmt;
use std::str::FromStr;

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256(pub [u8; 32]);

/// Text that is not 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSha256;

impl fmt::Display for NotSha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a SHA-256 (64 lowercase hex digits)")
    }
}

impl std::error::Error for NotSha256 {}

impl Sha256 {
    /// Whether `text` is a digest in the protocol's form.
    pub fn is_valid(text: &str) -> bool {
        text.parse::<Sha256>().is_ok()
    }
}

impl From<[u8; 32]> for Sha256 {
    fn from(bytes: [u8; 32]) -> Self {
        Sha256(bytes)
    }
}

impl FromStr for Sha256 {
    type Err = NotSha256;

    fn from_str(text: &str) -> Result<Self, NotSha256> {
        fn nibble(c: u8) -> Result<u8, NotSha256> {
            match c {
                b'0'..=b'9' => Ok(c - b'0'),
                b'a'..=b'f' => Ok(c - b'a' + 10),
                _ => Err(NotSha256),
            }
        }
        let text = text.as_bytes();
        if text.len() != 64 {
            return Err(NotSha256);
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
            *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
        }
        Ok(Sha256(bytes))
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hex_form_round_trips_and_nothing_else_parses() {
        let text = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let digest: Sha256 = text.parse().unwrap();
        assert_eq!(digest.0[0], 0xe3);
        assert_eq!(digest.to_string(), text);
        assert!(!Sha256::is_valid(&text.to_uppercase()));
        assert!(!Sha256::is_valid(&text[..62]));
        assert!(!Sha256::is_valid(&format!("{}g", &text[..63])));
        assert!(!Sha256::is_valid(""));
    }
}
