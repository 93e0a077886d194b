//! What the last transfer on a link learned of it, for the next one: pictures and pastes come in
//! series, and a screenshot-sized transfer spent probing from the 64 KiB start queues about a
//! round trip at twice the link's rate (docs/UPLOAD.md, "The remembered start").

use std::time::Duration;

use crate::time::Instant;

/// How long a learned estimate is trusted. Transfers in a series (`tern show a b c`, a chart
/// redrawn, screenshots pasted one after another) come seconds apart; a link's rate changes over
/// tens of seconds (a phone walking from Wi-Fi to cellular, a shared uplink getting busy). A stale
/// estimate costs at most its seeded transfer's first filter window (under two seconds) of queue
/// on a slower link, or a few round trips of cruising below a faster one; so half a minute,
/// about what the OS's TCP keeps its cached metrics from counting against a new connection.
pub const LINK_MEMORY_TTL: Duration = Duration::from_secs(30);

/// A link's rate and round trip as a settled transfer estimated them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LinkEstimate {
    /// The delivery-rate estimate in bytes per second (the max filter's, as the pacer's own:
    /// what the queue controller learned on top of it is not carried over, see
    /// [`super::Upload::link_estimate`]).
    pub rate: u64,
    /// The path's least round trip.
    pub min_rtt: Duration,
}

/// The memory a link's owner keeps for the transfers in one direction on it (the relay: one per
/// page link, for downloads and pictures; the page: one for its pastes).
///
/// ```text
///  start:  memory.begin(now) -> Some(estimate) -> Upload::new(..).remembered(estimate)
///  end:    memory.end(now, upload.link_estimate())
/// ```
///
/// Only a transfer that starts alone on the link is seeded: two seeded at once would each send at
/// the whole link's rate. What a transfer learned is kept for [`LINK_MEMORY_TTL`].
#[derive(Clone, Debug, Default)]
pub struct LinkMemory {
    learned: Option<(Instant, LinkEstimate)>,
    running: u32,
}

impl LinkMemory {
    /// A transfer starts on the link at `now`: what to seed it with, if the link is otherwise idle
    /// and the memory fresh. Pair every call with one [`end`](Self::end).
    pub fn begin(&mut self, now: Instant) -> Option<LinkEstimate> {
        let alone = self.running == 0;
        self.running = self.running.saturating_add(1);
        self.recall(now).filter(|_| alone)
    }

    /// A transfer begun with [`begin`](Self::begin) ended (done, failed or cancelled) at `now`,
    /// having learned `learned` ([`super::Upload::link_estimate`]); `None` keeps the older memory.
    pub fn end(&mut self, now: Instant, learned: Option<LinkEstimate>) {
        self.running = self.running.saturating_sub(1);
        self.learn(now, learned);
    }

    /// Records what a transfer still running learned (its owner may call this now and then).
    pub fn learn(&mut self, now: Instant, learned: Option<LinkEstimate>) {
        if let Some(e) = learned.filter(|e| e.rate > 0 && !e.min_rtt.is_zero()) {
            self.learned = Some((now, e));
        }
    }

    /// The estimate, if learned within [`LINK_MEMORY_TTL`] before `now`.
    pub fn recall(&self, now: Instant) -> Option<LinkEstimate> {
        let (at, e) = self.learned?;
        (now.saturating_duration_since(at) <= LINK_MEMORY_TTL).then_some(e)
    }

    /// Transfers begun and not ended.
    pub fn running(&self) -> u32 {
        self.running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(rate: u64) -> Option<LinkEstimate> {
        Some(LinkEstimate { rate, min_rtt: Duration::from_millis(80) })
    }

    #[test]
    fn seeds_a_lone_transfer_with_a_fresh_estimate_only() {
        let mut m = LinkMemory::default();
        assert_eq!(m.begin(Instant::from_millis(0)), None, "nothing learned yet");
        m.end(Instant::from_millis(1000), est(1_000_000));
        assert_eq!(m.begin(Instant::from_millis(2000)), est(1_000_000));
        assert_eq!(m.begin(Instant::from_millis(2100)), None, "another transfer is running");
        m.end(Instant::from_millis(3000), None);
        assert_eq!(m.running(), 1);
        m.end(Instant::from_millis(3500), est(2_000_000));
        assert_eq!(m.running(), 0);
        assert_eq!(m.begin(Instant::from_millis(4000)), est(2_000_000), "the newest wins");
        m.end(Instant::from_millis(4000), est(0));
        let late = Instant::from_millis(3500) + LINK_MEMORY_TTL + Duration::from_millis(1);
        assert_eq!(m.recall(late), None, "forgotten after the TTL");
        assert_eq!(m.recall(late - Duration::from_millis(1)), est(2_000_000));
    }
}
