//! The client's own synchronized state: every user event since the last state the server acked.

use super::{ApplyError, SyncState};
use crate::wire::{self, UserEvent};

/// The ordered events the user produced (keys and resizes), as mosh's `UserStream`.
///
/// Events are only appended; once the server acknowledges a state, the transport calls
/// [`SyncState::subtract`] and the acknowledged prefix is dropped. A diff therefore carries every
/// event the server may not have yet: keys typed before an ack accumulate, none is overwritten.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserStream {
    events: Vec<UserEvent>,
}

impl UserStream {
    /// Appends typed bytes. Consecutive key events are merged only on the wire (as mosh does), so
    /// every earlier state stays an exact prefix of later ones.
    pub fn push_keys(&mut self, keys: &[u8]) {
        if !keys.is_empty() {
            self.events.push(UserEvent::Keys(keys.to_vec()));
        }
    }

    pub fn push_resize(&mut self, cols: u16, rows: u16) {
        self.events.push(UserEvent::Resize { cols, rows });
    }

    pub fn events(&self) -> &[UserEvent] {
        &self.events
    }

    /// Bytes of key events held (on the sender: what the server has not acknowledged yet).
    pub fn key_bytes(&self) -> usize {
        self.events
            .iter()
            .map(|event| match event {
                UserEvent::Keys(bytes) => bytes.len(),
                UserEvent::Resize { .. } => 0,
            })
            .sum()
    }

    /// The events after `base`, when `base` is a prefix of `self` (always so between states of
    /// one stream, since events are only appended).
    pub fn events_after(&self, base: &UserStream) -> Option<&[UserEvent]> {
        self.events.strip_prefix(base.events.as_slice())
    }
}

impl SyncState for UserStream {
    fn diff_from(&self, base: &Self) -> Vec<u8> {
        // Not a prefix cannot happen between states of one stream; sending everything is then the
        // only answer that loses nothing.
        let rest = self.events_after(base).unwrap_or(&self.events);
        if rest.is_empty() {
            return Vec::new();
        }
        wire::encode_user_message(rest)
    }

    fn apply(&mut self, diff: &[u8]) -> Result<(), ApplyError> {
        if diff.is_empty() {
            return Ok(());
        }
        let events = wire::decode_user_message(diff).map_err(|e| ApplyError(e.to_string()))?;
        self.events.extend(events);
        Ok(())
    }

    fn subtract(&mut self, acked: &Self) {
        if self.events.starts_with(&acked.events) {
            self.events.drain(..acked.events.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(s: &str) -> UserEvent {
        UserEvent::Keys(s.as_bytes().to_vec())
    }

    #[test]
    fn events_after_a_prefix() {
        let mut base = UserStream::default();
        base.push_resize(80, 24);
        base.push_keys(b"ech");
        let mut now = base.clone();
        now.push_keys(b"o hi\r");
        now.push_keys(b"");
        assert_eq!(now.events_after(&base), Some(&[keys("o hi\r")][..]));
        assert_eq!(now.key_bytes(), 8);
        assert_eq!(now.events_after(&now), Some(&[][..]));
        assert_eq!(base.events_after(&now), None);
    }

    #[test]
    fn subtract_drops_the_acked_prefix_only() {
        let mut acked = UserStream::default();
        acked.push_resize(80, 24);
        acked.push_keys(b"ls");
        let mut now = acked.clone();
        now.push_keys(b" -l\r");
        now.push_resize(100, 30);
        now.subtract(&acked);
        assert_eq!(
            now.events(),
            &[
                keys(" -l\r"),
                UserEvent::Resize {
                    cols: 100,
                    rows: 30
                }
            ]
        );

        let mut unrelated = UserStream::default();
        unrelated.push_keys(b"zz");
        let before = unrelated.clone();
        unrelated.subtract(&acked);
        assert_eq!(unrelated, before);
    }
}
