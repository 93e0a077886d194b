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

/// A SHA-256 computed as the bytes come: the page hashes a `tern send` download while it
/// arrives, so the check at the end is a comparison, not a pass over the whole file (13.4 MB
/// took 60-350 ms after the last byte in the download benchmark, 0.5-3 % of the transfer).
#[derive(Clone, Default)]
pub struct RunningSha256(sha2::Sha256);

impl RunningSha256 {
    /// Adds the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        sha2::Digest::update(&mut self.0, bytes);
    }

    /// The digest of everything added.
    pub fn finish(self) -> Sha256 {
        Sha256(sha2::Digest::finalize(self.0).into())
    }
}

impl fmt::Debug for RunningSha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunningSha256")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_digest_in_pieces_is_the_digest_of_the_whole() {
        assert_eq!(
            RunningSha256::default().finish().to_string(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let mut h = RunningSha256::default();
        for piece in [&b"a"[..], b"", b"bc"] {
            h.update(piece);
        }
        // FIPS 180-2, appendix B.1: SHA-256("abc").
        assert_eq!(
            h.finish().to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

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
