//! What the tab keeps so a reload continues: the saved session on a schedule, and the nonce
//! bounds reserved ahead of use.

use std::time::Duration;

use super::{Effect, PageClient, Timer};
use crate::relay_client::SavedSession;
use crate::time::Instant;

/// The tab's saved session (what a reload continues) is refreshed at most this often, when the
/// session does something (a datagram, a key, a timer: an idle session still hears mosh's
/// heartbeat every 3 s), and when the page goes away; a crash loses what came after (the keys
/// typed since are sent again, nothing more). A timer only when a save is left waiting: an
/// idle tab does not wake for it.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(2);

/// How far past the numbers in use a reservation reaches: a reservation is written once per
/// this many datagrams, not once per datagram.
pub const NONCE_RESERVE: u64 = 1024;

/// The next sequence number and fragment id a session may use under its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonceBounds {
    pub seq: u64,
    pub fragment_id: u64,
}

impl NonceBounds {
    /// What a key never used before starts from.
    pub const FRESH: NonceBounds = NonceBounds { seq: 0, fragment_id: 1 };
}

/// The bounds reserved (in the tab's storage) for one session key. mosh's nonces are the
/// sequence numbers: a reload that reused one under the same key would repeat a nonce, so
/// every number leaves only after a bound above it was kept.
#[derive(Debug)]
pub struct NonceReservation {
    key_text: String,
    bound: NonceBounds,
}

impl NonceReservation {
    /// A reservation continuing from what was kept for `key_text` (`None`: nothing yet).
    pub fn new(key_text: &str, kept: Option<NonceBounds>) -> Self {
        NonceReservation {
            key_text: key_text.to_string(),
            bound: kept.unwrap_or(NonceBounds::FRESH),
        }
    }

    /// Where a session under this key starts numbering.
    pub fn start(&self) -> NonceBounds {
        self.bound
    }

    /// The reservation to keep before `next` leaves, when the kept one does not cover it.
    pub fn cover(&mut self, next: NonceBounds) -> Option<Effect> {
        if next.seq <= self.bound.seq && next.fragment_id <= self.bound.fragment_id {
            return None;
        }
        self.bound.seq = self.bound.seq.max(next.seq.saturating_add(NONCE_RESERVE));
        self.bound.fragment_id =
            self.bound.fragment_id.max(next.fragment_id.saturating_add(NONCE_RESERVE));
        Some(Effect::ReserveNonces {
            key_text: self.key_text.clone(),
            seq: self.bound.seq,
            fragment_id: self.bound.fragment_id,
        })
    }
}

impl PageClient {
    /// Saves the tab's session if [`SAVE_INTERVAL`] has passed since the last save; otherwise
    /// makes sure one save follows when it has (one timer, only while the session is busy), so
    /// what is saved is never more than that old.
    pub(super) fn save_if_due(&mut self, now: Instant) {
        let due = self.saved_at.map(|at| at + SAVE_INTERVAL);
        match due {
            Some(due) if due > now => {
                if self.timers.get(Timer::Save).is_none() {
                    self.timers.set(Timer::Save, due);
                }
            }
            _ => {
                self.saved_at = Some(now);
                self.timers.stop(Timer::Save);
                self.save();
            }
        }
    }

    /// Saves the tab's session now; nothing while there is none, it is over, or another page
    /// drives it. A page that stopped trying (`Failed`: a relay it could not verify, a rate
    /// limit) still saves: the shell runs on, and a reload continues it with the keys typed.
    pub fn save(&mut self) {
        let (Some(session), Some(id), Some(key_text)) =
            (self.session.as_ref(), self.session_id.as_ref(), self.key_text.as_ref())
        else {
            return;
        };
        if session.is_closed() || !self.keeps_session() {
            return;
        }
        let saved = SavedSession {
            session_id: id.clone(),
            key_text: key_text.clone(),
            point: session.resume_point(),
        };
        self.push(Effect::SaveSession(saved));
    }

    /// Reserves the nonce bound for the session's next numbers (before they leave).
    pub(super) fn reserve_nonces(&mut self) {
        let (Some(session), Some(nonces)) = (self.session.as_ref(), self.nonces.as_mut()) else {
            return;
        };
        let next = NonceBounds { seq: session.next_seq(), fragment_id: session.next_fragment_id() };
        if let Some(effect) = nonces.cover(next) {
            self.effects.push_back(effect);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_is_written_once_per_reserve_not_per_datagram() {
        let mut r = NonceReservation::new("k", None);
        assert_eq!(r.start(), NonceBounds::FRESH);
        let first = r.cover(NonceBounds { seq: 1, fragment_id: 1 });
        assert!(matches!(first, Some(Effect::ReserveNonces { seq: 1025, fragment_id: 1025, .. })));
        assert_eq!(r.cover(NonceBounds { seq: 1000, fragment_id: 5 }), None);
        assert!(r.cover(NonceBounds { seq: 1026, fragment_id: 5 }).is_some());
    }
}
