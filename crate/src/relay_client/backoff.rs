//! Pauses between connection attempts: exponential, jittered, reset by a link that lasted.

use std::time::Duration;

use crate::time::Instant;

/// First pause before reconnecting; doubles per failed attempt up to [`BACKOFF_MAX`].
pub const BACKOFF_FIRST: Duration = Duration::from_millis(250);
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A link that lived this long counts as having worked: the next loss starts the backoff over.
pub const STABLE_LINK: Duration = Duration::from_secs(10);

/// The reconnect schedule.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: BACKOFF_FIRST }
    }
}

impl Backoff {
    pub fn new() -> Self {
        Self::default()
    }

    /// A link that was up from `up_since` until `now` went down.
    pub fn link_ended(&mut self, up_since: Instant, now: Instant) {
        if now.saturating_duration_since(up_since) > STABLE_LINK {
            self.next = BACKOFF_FIRST;
        }
    }

    /// The pause before the next attempt. `random` in `0.0..1.0` spreads it over the upper half
    /// (full jitter there), so many tabs of one relay do not come back in lockstep.
    pub fn next_pause(&mut self, random: f64) -> Duration {
        let pause = self.next.mul_f64(0.5 + 0.5 * random.clamp(0.0, 1.0));
        self.next = (self.next * 2).min(BACKOFF_MAX);
        pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap_and_a_stable_link_resets_them() {
        let mut b = Backoff::new();
        assert_eq!(b.next_pause(1.0), BACKOFF_FIRST);
        assert_eq!(b.next_pause(0.0), BACKOFF_FIRST);
        for _ in 0..10 {
            b.next_pause(1.0);
        }
        assert_eq!(b.next_pause(1.0), BACKOFF_MAX);
        let t = Instant::from_millis(1000);
        b.link_ended(t, t + Duration::from_secs(1));
        assert_eq!(b.next_pause(1.0), BACKOFF_MAX, "a short link does not reset");
        b.link_ended(t, t + STABLE_LINK + Duration::from_secs(1));
        assert_eq!(b.next_pause(1.0), BACKOFF_FIRST);
    }
}
