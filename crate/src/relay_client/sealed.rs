//! What a tab keeps in browser storage, sealed under a key derived from the token.
//!
//! `localStorage` (the browser's last session, kept across restarts) is readable by every page
//! served on the relay's origin, and so is this tab's `sessionStorage` by any page of the origin
//! loaded into it. What the page keeps there holds the mosh key and the screen. Sealed with
//! AES-128-OCB (the core's datagram cipher) under `proof::storage_key(token)`, it is noise to a
//! page without the token, and a forged or swapped value fails authentication and is ignored.

use base64::Engine as _;

use crate::relay_proto::proof::storage_key;
use crate::wire::{Cipher, Direction, Key, MAX_SEQ, Nonce};

/// The stored text's prefix: the format and its version.
const PREFIX: &str = "tern-sealed-1:";

/// Seals and opens stored text for one token.
#[derive(Clone, Debug)]
pub struct StorageSeal {
    cipher: Cipher,
}

impl StorageSeal {
    pub fn new(token: &str) -> StorageSeal {
        StorageSeal { cipher: Cipher::new(&Key(storage_key(token))) }
    }

    /// `text` sealed; `random`: 8 fresh random bytes (the page's `crypto.getRandomValues`), the
    /// nonce: a repeat needs some 2^31 writes under one token.
    pub fn seal(&self, text: &str, random: [u8; 8]) -> String {
        let nonce =
            Nonce { direction: Direction::ToServer, seq: u64::from_be_bytes(random) & MAX_SEQ };
        // Only a sequence number past MAX_SEQ fails, and the mask keeps it below.
        let sealed = self.cipher.seal(nonce, text.as_bytes()).unwrap_or_default();
        format!("{PREFIX}{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(sealed))
    }

    /// The text [`seal`](Self::seal) sealed under this token; `None` for anything else (another
    /// token's, an old unsealed value, a value changed by someone).
    pub fn open(&self, stored: &str) -> Option<String> {
        let b64 = stored.strip_prefix(PREFIX)?;
        let sealed = base64::engine::general_purpose::STANDARD_NO_PAD.decode(b64).ok()?;
        let (_, plain) = self.cipher.open(&sealed).ok()?;
        String::from_utf8(plain).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_text_opens_only_under_its_token_and_hides_its_contents() {
        let seal = StorageSeal::new("token-of-this-relay-0123");
        let text = "tern-resume-1\nsession-id\nKEYTEXTKEYTEXTKEYTEXT0\npoint";
        let stored = seal.seal(text, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(stored.starts_with(PREFIX));
        assert!(!stored.contains("KEYTEXT") && !stored.contains("session-id"));
        assert_eq!(seal.open(&stored).as_deref(), Some(text));
        // Another token, a flipped character, an unsealed value: nothing.
        assert_eq!(StorageSeal::new("another-token-0123456789").open(&stored), None);
        let mut flipped = stored.clone().into_bytes();
        let at = flipped.len() - 5;
        flipped[at] = if flipped[at] == b'A' { b'B' } else { b'A' };
        assert_eq!(seal.open(std::str::from_utf8(&flipped).unwrap()), None);
        assert_eq!(seal.open(text), None);
        // Two seals of one text differ (fresh nonces).
        assert_ne!(stored, seal.seal(text, [8, 7, 6, 5, 4, 3, 2, 1]));
    }
}
