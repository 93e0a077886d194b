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
    /// Appends typed bytes, merged into a key event just before them.
    ///
    /// Merging keeps the stream in one normal form on both ends: the wire merges consecutive key
    /// events into one Keystroke (as mosh does), so the receiver's rebuilt states are merged too,
    /// and prefix comparisons must treat a key event as a byte string that may grow.
    pub fn push_keys(&mut self, keys: &[u8]) {
        if keys.is_empty() {
            return;
        }
        match self.events.last_mut() {
            Some(UserEvent::Keys(bytes)) => bytes.extend_from_slice(keys),
            _ => self.events.push(UserEvent::Keys(keys.to_vec())),
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
    /// one stream, since events are only appended). `base`'s last key event may be a prefix of
    /// ours: keys typed later were merged into it.
    pub fn events_after(&self, base: &UserStream) -> Option<Vec<UserEvent>> {
        let Some((base_last, base_rest)) = base.events.split_last() else {
            return Some(self.events.clone());
        };
        let shared = base_rest.len();
        if self.events.get(..shared)? != base_rest {
            return None;
        }
        let mut after = Vec::new();
        match (base_last, self.events.get(shared)?) {
            (theirs, mine) if theirs == mine => {}
            (UserEvent::Keys(theirs), UserEvent::Keys(mine)) if mine.starts_with(theirs) => {
                after.push(UserEvent::Keys(mine[theirs.len()..].to_vec()));
            }
            _ => return None,
        }
        after.extend_from_slice(&self.events[shared + 1..]);
        Some(after)
    }

    fn append(&mut self, events: Vec<UserEvent>) {
        for event in events {
            match event {
                UserEvent::Keys(keys) => self.push_keys(&keys),
                UserEvent::Resize { cols, rows } => self.push_resize(cols, rows),
            }
        }
    }
}

impl SyncState for UserStream {
    fn diff_from(&self, base: &Self) -> Vec<u8> {
        // Not a prefix cannot happen between states of one stream; sending everything is then the
        // only answer that loses nothing.
        let rest = self.events_after(base).unwrap_or_else(|| self.events.clone());
        if rest.is_empty() {
            return Vec::new();
        }
        wire::encode_user_message(&rest)
    }

    fn apply(&mut self, diff: &[u8]) -> Result<(), ApplyError> {
        if diff.is_empty() {
            return Ok(());
        }
        let events = wire::decode_user_message(diff).map_err(|e| ApplyError(e.to_string()))?;
        self.append(events);
        Ok(())
    }

    fn subtract(&mut self, acked: &Self) {
        if let Some(rest) = self.events_after(acked) {
            self.events = Vec::new();
            self.append(rest);
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
    fn keys_merge_and_resizes_stay_apart() {
        let mut s = UserStream::default();
        s.push_keys(b"ab");
        s.push_keys(b"c");
        s.push_keys(b"");
        s.push_resize(80, 24);
        s.push_keys(b"d");
        assert_eq!(s.events(), &[keys("abc"), UserEvent::Resize { cols: 80, rows: 24 }, keys("d")]);
        assert_eq!(s.key_bytes(), 4);
    }

    #[test]
    fn events_after_a_base_that_ends_inside_a_merged_key_event() {
        let mut base = UserStream::default();
        base.push_resize(80, 24);
        base.push_keys(b"ech");
        let mut now = base.clone();
        now.push_keys(b"o hi\r");
        now.push_resize(90, 20);
        let resize = UserEvent::Resize { cols: 90, rows: 20 };
        assert_eq!(now.events_after(&base), Some(vec![keys("o hi\r"), resize.clone()]));
        assert_eq!(now.events_after(&now), Some(vec![]));
        assert_eq!(base.events_after(&now), None);
        let mut other = UserStream::default();
        other.push_keys(b"x");
        assert_eq!(now.events_after(&other), None);
    }

    #[test]
    fn a_diff_applied_to_the_base_rebuilds_the_state() {
        let mut base = UserStream::default();
        base.push_resize(80, 24);
        base.push_keys(b"a");
        let mut now = base.clone();
        now.push_keys(b"bc");
        now.push_resize(100, 30);
        let mut rebuilt = base.clone();
        rebuilt.apply(&now.diff_from(&base)).expect("valid diff");
        assert_eq!(rebuilt, now);
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
        assert_eq!(now.events(), &[keys(" -l\r"), UserEvent::Resize { cols: 100, rows: 30 }]);

        let mut unrelated = UserStream::default();
        unrelated.push_keys(b"zz");
        let before = unrelated.clone();
        unrelated.subtract(&acked);
        assert_eq!(unrelated, before);
    }
}
