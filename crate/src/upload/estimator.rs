//! The upload's path estimates: delivery rate on the relay's clock, ack delay, windowed maxima.

use std::collections::VecDeque;
use std::time::Duration;

use crate::time::Instant;

/// The largest value pushed within the last `window` of sender time (a monotone deque).
///
/// The newest value is never expired, so once anything was pushed there is always an answer.
#[derive(Clone, Debug, Default)]
pub(crate) struct WindowedMax {
    /// Strictly decreasing values, oldest first: an entry is dropped once a newer one at least as
    /// large arrives, because it can never be the maximum again.
    entries: VecDeque<(Instant, u64)>,
}

impl WindowedMax {
    pub(crate) fn push(&mut self, now: Instant, value: u64, window: Duration) {
        while self.entries.back().is_some_and(|&(_, v)| v <= value) {
            self.entries.pop_back();
        }
        self.entries.push_back((now, value));
        self.expire(now, window);
    }

    fn expire(&mut self, now: Instant, window: Duration) {
        while self.entries.len() > 1 && self.entries.front().is_some_and(|&(t, _)| now - t > window)
        {
            self.entries.pop_front();
        }
    }

    pub(crate) fn get(&self) -> Option<u64> {
        self.entries.front().map(|&(_, v)| v)
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

/// One acknowledgement as the relay saw it: how many bytes it held at which relay time.
#[derive(Copy, Clone, Debug)]
struct Delivered {
    relay_us: u64,
    acked: u64,
}

/// Delivery rate measured between acks on the relay's clock, max-filtered over sender time.
///
/// A sample is `(acked_new - acked_old) / (relay_new - relay_old)` where `old` is the newest
/// earlier ack at least `span` of relay time before `new`. Why this shape:
/// - The relay's receive times are spaced by the bottleneck, whatever happens to the acks on the
///   way back; the sender's ack arrival times are not (acks come back in clumps).
/// - Over a span of at least one minimum RTT a sample cannot exceed the bottleneck rate (the link
///   serialises every byte counted in the span inside the span), and a burst the relay reads at
///   once after a stall is averaged with the stall, because no ack advances during it.
/// - While the sender is window-limited (start-up) a sample reads the throughput of the last round
///   trip, so the window, which is two round trips of the estimate, doubles per round trip: the
///   slow start falls out of the estimator instead of being a second mechanism.
/// - Samples under-read whenever the sender did not keep the link busy (start-up, a pause in the
///   driver, the tail). The maximum over a few round trips ignores those; an over-read (relay
///   scheduling jitter) is bounded by jitter / span and expires with the window.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeliveryRate {
    /// Acks in relay-time order; the front is the base of the next sample.
    history: VecDeque<Delivered>,
    filter: WindowedMax,
}

impl DeliveryRate {
    /// Records an ack that advanced the byte count; returns the sample it produced, if any.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        relay_us: u64,
        acked: u64,
        span: Duration,
        window: Duration,
    ) -> Option<u64> {
        match self.history.back_mut() {
            // The relay's clock stepped back (restart, clock step): nothing before this ack can
            // be compared with it. The filtered estimate stays, fresh samples start here.
            Some(last) if relay_us < last.relay_us => self.history.clear(),
            // Same relay time (a coarse clock, or two acks from one read): the later count wins.
            Some(last) if relay_us == last.relay_us => {
                last.acked = last.acked.max(acked);
                return self.sample(now, window, span);
            }
            _ => {}
        }
        self.history.push_back(Delivered { relay_us, acked });
        self.sample(now, window, span)
    }

    fn sample(&mut self, now: Instant, window: Duration, span: Duration) -> Option<u64> {
        let newest = *self.history.back()?;
        let span_us = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
        let cutoff = newest.relay_us.checked_sub(span_us)?;
        // Keep exactly one ack at or before the cutoff: the newest such, the base of this sample.
        while self.history.get(1).is_some_and(|d| d.relay_us <= cutoff) {
            self.history.pop_front();
        }
        let base = *self.history.front()?;
        if base.relay_us > cutoff {
            return None;
        }
        let bytes = newest.acked.saturating_sub(base.acked);
        let micros = newest.relay_us - base.relay_us;
        if micros == 0 {
            return None;
        }
        let rate = u64::try_from(u128::from(bytes) * 1_000_000 / u128::from(micros))
            .unwrap_or(u64::MAX);
        self.filter.push(now, rate, window);
        Some(rate)
    }

    /// The estimate in bytes per second (the filtered maximum), once there was a sample.
    pub(crate) fn estimate(&self) -> Option<u64> {
        self.filter.get().filter(|&r| r > 0)
    }
}

/// How late acks come back compared with the least-delayed one, from the relay's timestamps.
///
/// `arrival - relay_time` is the return trip plus an unknown clock offset; its minimum is the
/// undisturbed return trip, and the excess of each ack is the time the bytes it reports had been
/// at the relay without the sender knowing (clumping on the way back, the relay coalescing acks).
/// Those bytes still count as in flight, so the window must cover them or the link idles between
/// clumps; they are not in the bottleneck queue, so covering them costs keystrokes nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct AckDelay {
    min_offset: Option<i128>,
    last_relay_us: u64,
    filter: WindowedMax,
}

impl AckDelay {
    pub(crate) fn on_ack(&mut self, now: Instant, relay_us: u64, window: Duration) {
        if relay_us < self.last_relay_us {
            // A relay clock step invalidates the offset; start over rather than read it as delay.
            self.min_offset = None;
            self.filter.clear();
        }
        self.last_relay_us = relay_us;
        let offset = i128::from(now.as_micros()) - i128::from(relay_us);
        let min = self.min_offset.map_or(offset, |m| m.min(offset));
        self.min_offset = Some(min);
        let excess = u64::try_from(offset - min).unwrap_or(u64::MAX);
        self.filter.push(now, excess, window);
    }

    /// The largest recent excess delay.
    pub(crate) fn max_recent(&self) -> Duration {
        Duration::from_micros(self.filter.get().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_secs(1);

    #[test]
    fn windowed_max_expires_old_peaks_but_keeps_the_newest() {
        let mut m = WindowedMax::default();
        m.push(Instant::from_millis(0), 10, W);
        m.push(Instant::from_millis(100), 5, W);
        assert_eq!(m.get(), Some(10));
        m.push(Instant::from_millis(1200), 3, W);
        assert_eq!(m.get(), Some(3), "10 and 5 are older than the window");
        m.push(Instant::from_millis(5000), 1, W);
        assert_eq!(m.get(), Some(1));
    }

    #[test]
    fn delivery_rate_uses_relay_time_and_needs_a_span() {
        let mut d = DeliveryRate::default();
        let span = Duration::from_millis(100);
        let now = Instant::from_millis(1);
        // 1000 bytes per 10 ms of relay time = 100 kB/s, acks all arriving at one sender instant.
        for i in 0..=10u64 {
            let s = d.on_ack(now, 1_000_000 + i * 10_000, 1000 * i, span, W);
            assert_eq!(s.is_some(), i == 10, "a sample needs 100 ms of relay time ({i})");
        }
        assert_eq!(d.estimate(), Some(100_000));
        // A repeated relay time merges; a backwards one restarts the history.
        assert_eq!(d.on_ack(now, 1_100_000, 11_000, span, W), Some(110_000));
        assert_eq!(d.on_ack(now, 5, 12_000, span, W), None);
        assert_eq!(d.estimate(), Some(110_000), "the filtered estimate survives a clock step");
    }

    #[test]
    fn ack_delay_is_the_excess_over_the_least_delayed_ack() {
        let mut a = AckDelay::default();
        a.on_ack(Instant::from_millis(1000), 500_000, W);
        a.on_ack(Instant::from_millis(1100), 510_000, W); // 90 ms later than the first
        assert_eq!(a.max_recent(), Duration::from_millis(90));
        a.on_ack(Instant::from_millis(1101), 400_000, W); // relay clock stepped back
        assert_eq!(a.max_recent(), Duration::ZERO);
    }
}
