//! Whether the link to the relay is still alive, and when to ask.
//!
//! A relay killed without a goodbye, or a path that went dead, must show up long before QUIC's
//! own idle timeout: after [`LINK_DEADLINE`] with nothing at all from the relay, the driver drops
//! the link and reconnects. Anything from the relay counts: a control line, and every datagram
//! (mosh-server's heartbeat comes through it every 3 s even when nothing happens). Only a link
//! that has been silent for [`PING_AFTER`] is pinged (`ClientMessage::Ping`; the relay answers
//! at once), so an idle tab wakes for this about once a heartbeat instead of on a clock of its
//! own: each wake costs a browser task, and the ping's write and its answer more
//! (docs/BENCHMARKS.md, "The cost of a frame in the browser").
//!
//! Sans-IO: the driver reports what it heard and does what [`Liveness::poll`] says.

use std::time::Duration;

use crate::time::Instant;

/// A link silent this long is pinged: a little over mosh's 3 s heartbeat, so a live idle link
/// is rarely pinged at all.
pub const PING_AFTER: Duration = Duration::from_millis(3500);
/// A link silent this long is dead (two pings unanswered).
pub const LINK_DEADLINE: Duration = Duration::from_secs(7);

/// What the driver does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkCheck {
    /// Nothing; ask again at this instant.
    WaitUntil(Instant),
    /// Send a ping, then ask again at this instant.
    Ping { next: Instant },
    /// Nothing came for [`LINK_DEADLINE`]: drop the link.
    Dead,
}

/// When the relay was last heard on one link (`Default`: at the clock's zero, before any link).
#[derive(Debug, Clone, Default)]
pub struct Liveness {
    last_heard: Instant,
}

impl Liveness {
    /// A link that just came up (its `ready` was heard).
    pub fn new(now: Instant) -> Self {
        Liveness { last_heard: now }
    }

    /// Something came from the relay.
    pub fn heard(&mut self, now: Instant) {
        self.last_heard = self.last_heard.max(now);
    }

    pub fn last_heard(&self) -> Instant {
        self.last_heard
    }

    /// What to do at `now`.
    pub fn poll(&self, now: Instant) -> LinkCheck {
        let silent = now.saturating_duration_since(self.last_heard);
        if silent >= LINK_DEADLINE {
            LinkCheck::Dead
        } else if silent >= PING_AFTER {
            // Again a ping's interval later, or at the deadline if that comes first.
            let next = (now + PING_AFTER).min(self.last_heard + LINK_DEADLINE);
            LinkCheck::Ping { next }
        } else {
            LinkCheck::WaitUntil(self.last_heard + PING_AFTER)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn a_link_heard_within_the_ping_interval_is_left_alone() {
        let mut l = Liveness::new(ms(0));
        assert_eq!(l.poll(ms(1000)), LinkCheck::WaitUntil(ms(3500)));
        // mosh's heartbeat every 3 s keeps it from ever being pinged.
        for beat in 1..10 {
            l.heard(ms(beat * 3000));
            assert_eq!(
                l.poll(ms(beat * 3000 + 3499)),
                LinkCheck::WaitUntil(ms(beat * 3000 + 3500))
            );
        }
    }

    #[test]
    fn a_silent_link_is_pinged_then_dropped_at_the_deadline_unless_it_answers() {
        let mut l = Liveness::new(ms(0));
        assert_eq!(l.poll(ms(3500)), LinkCheck::Ping { next: ms(7000) });
        assert_eq!(l.poll(ms(6999)), LinkCheck::Ping { next: ms(7000) });
        assert_eq!(l.poll(ms(7000)), LinkCheck::Dead);
        // An answer before the deadline keeps it.
        l.heard(ms(3600));
        assert_eq!(l.poll(ms(7000)), LinkCheck::WaitUntil(ms(7100)));
        assert_eq!(l.poll(ms(7100)), LinkCheck::Ping { next: ms(10_600) });
        // Time never runs back: an older report changes nothing.
        l.heard(ms(100));
        assert_eq!(l.last_heard(), ms(3600));
    }
}
