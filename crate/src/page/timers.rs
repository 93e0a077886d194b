//! One table of the page client's deadlines, as quinn-proto's `TimerTable`: each concern keeps
//! one entry, [`TimerTable::next`] is the page's single `poll_timeout`, and the driver arms one
//! browser timer for it.

use crate::time::Instant;

/// What a deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The session's own deadline (`ClientSession::poll_timeout`: acks, retransmissions,
    /// the heartbeat, prediction's judge).
    Session,
    /// The overlay clock: the notification bar's seconds, a paste's progress, a flood's end.
    Overlay,
    /// A save of the tab's session left waiting (`SAVE_INTERVAL`).
    Save,
    /// The draw pacer's wait during a flood (`Pace::wait`).
    Pacer,
    /// The paste queue: pacing, stalls, retries, give-ups, the result line's expiry.
    Paste,
    /// Downloads: acks due, retries, the result line's expiry.
    Download,
    /// The link's liveness: a ping after silence, the link dropped after too long.
    Liveness,
    /// The pause before the next attempt to reach the relay (`Backoff`).
    Reconnect,
}

impl Timer {
    /// Every timer, in the order expired ones run: the session first (its datagrams are the
    /// most urgent), the reconnect last (it only starts an attempt).
    pub const ALL: [Timer; 8] = [
        Timer::Session,
        Timer::Liveness,
        Timer::Pacer,
        Timer::Paste,
        Timer::Download,
        Timer::Overlay,
        Timer::Save,
        Timer::Reconnect,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// A deadline for each [`Timer`], or none.
#[derive(Debug, Default, Clone)]
pub struct TimerTable {
    at: [Option<Instant>; 8],
}

impl TimerTable {
    pub fn set(&mut self, timer: Timer, at: Instant) {
        self.at[timer.index()] = Some(at);
    }

    /// Sets `timer` to `at` unless it already runs out sooner (a wake that comes early is
    /// harmless; one that comes late is not).
    pub fn set_unless_sooner(&mut self, timer: Timer, at: Instant) {
        if self.get(timer).is_none_or(|armed| armed > at) {
            self.set(timer, at);
        }
    }

    pub fn put(&mut self, timer: Timer, at: Option<Instant>) {
        self.at[timer.index()] = at;
    }

    pub fn stop(&mut self, timer: Timer) {
        self.at[timer.index()] = None;
    }

    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.at[timer.index()]
    }

    /// The soonest deadline of all.
    pub fn next(&self) -> Option<Instant> {
        self.at.iter().flatten().min().copied()
    }

    /// Takes the timer out if it has run out at `now`.
    pub fn expire(&mut self, timer: Timer, now: Instant) -> bool {
        let due = self.get(timer).is_some_and(|at| at <= now);
        if due {
            self.stop(timer);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soonest_deadline_is_next_and_only_expired_ones_are_taken() {
        let mut table = TimerTable::default();
        assert_eq!(table.next(), None);
        table.set(Timer::Save, Instant::from_millis(50));
        table.set(Timer::Session, Instant::from_millis(20));
        assert_eq!(table.next(), Some(Instant::from_millis(20)));
        assert!(!table.expire(Timer::Save, Instant::from_millis(20)));
        assert!(table.expire(Timer::Session, Instant::from_millis(20)));
        assert_eq!(table.next(), Some(Instant::from_millis(50)));
    }

    #[test]
    fn a_later_deadline_does_not_replace_a_sooner_one() {
        let mut table = TimerTable::default();
        table.set_unless_sooner(Timer::Overlay, Instant::from_millis(10));
        table.set_unless_sooner(Timer::Overlay, Instant::from_millis(30));
        assert_eq!(table.get(Timer::Overlay), Some(Instant::from_millis(10)));
        table.set_unless_sooner(Timer::Overlay, Instant::from_millis(5));
        assert_eq!(table.get(Timer::Overlay), Some(Instant::from_millis(5)));
    }
}
