//! Session ids: made by the relay (random hex), and checked wherever one comes from outside (a
//! page, a file in the state directory, the recorder's command line) before it names a file.

use std::time::{SystemTime, UNIX_EPOCH};

/// A new session id: 32 hex digits.
pub fn new_session_id() -> String {
    let mut b = [0u8; 16];
    // A session id only names a session; the token guards it. Fall back to time if the OS
    // refuses randomness rather than failing the session.
    if getrandom::fill(&mut b).is_err() {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        b = t.to_be_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Session ids are relay-made hex; anything else (a hand-edited file) is not trusted as a path.
pub fn valid_id(id: &str) -> bool {
    (8..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_valid_and_names_that_could_leave_a_directory_are_not() {
        let id = new_session_id();
        assert_eq!(id.len(), 32);
        assert!(valid_id(&id));
        for bad in ["", "short", "../../etc/passwd", "0123456789abcdeg", &"a".repeat(65)] {
            assert!(!valid_id(bad), "{bad}");
        }
    }
}
