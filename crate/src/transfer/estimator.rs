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
}

/// The smallest value pushed within the last `window` of sender time.
#[derive(Clone, Debug, Default)]
pub(crate) struct WindowedMin(WindowedMax);

impl WindowedMin {
    pub(crate) fn push(&mut self, now: Instant, value: u64, window: Duration) {
        self.0.push(now, u64::MAX - value, window);
    }

    pub(crate) fn get(&self) -> Option<u64> {
        self.0.get().map(|v| u64::MAX - v)
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
    /// Once set to `n`, no sample counts for more than the estimate plus `1/n` of it.
    max_step: Option<u64>,
    /// A rate remembered from an earlier transfer on the link and the sender time it lapses at
    /// (see [`DeliveryRate::seed`]).
    seed: Option<(Instant, u64)>,
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
        let rate =
            u64::try_from(u128::from(bytes) * 1_000_000 / u128::from(micros)).unwrap_or(u64::MAX);
        let rate = rate.min(self.max_step.map_or(u64::MAX, |step| {
            self.estimate().map_or(u64::MAX, |e| e.saturating_add(e / step))
        }));
        self.filter.push(now, rate, window);
        if self.seed.is_some_and(|(until, seed)| now > until || rate >= seed) {
            self.seed = None;
        }
        Some(rate)
    }

    /// Starts the estimate at `rate` (remembered from an earlier transfer on the link) until
    /// `until`, or until a sample reaches it: the seed ages out like a sample of the max filter,
    /// on its own (shorter) clock, so a link that got slower is believed within a few round trips.
    pub(crate) fn seed(&mut self, rate: u64, until: Instant) {
        self.seed = (rate > 0).then_some((until, rate));
    }

    /// The estimate is still the seed: no sample of this transfer has reached it.
    pub(crate) fn is_seed(&self) -> bool {
        self.seed.is_some_and(|(_, seed)| self.filter.get().is_none_or(|r| r < seed))
    }

    /// Samples count in full again (a seeded transfer found a faster link and probes it).
    pub(crate) fn unlimit_steps(&mut self) {
        self.max_step = None;
    }

    /// From now on a sample counts for at most the estimate plus `1/n` of it.
    ///
    /// After a stall the relay reads its backlog in several reads, each stamped with the time of
    /// the read, so an ack can under-count what had arrived, and a sample based on it over-reads
    /// (20 % above the link here and there in the browser); the max filter would keep that for
    /// eight round trips and the pacer queue a keystroke-delaying burst. Once the rate is known,
    /// a faster link still lifts the estimate by `1/n` per sample (many per round trip).
    pub(crate) fn limit_steps(&mut self, n: u64) {
        self.max_step = Some(n.max(1));
    }

    /// The estimate in bytes per second (the filtered maximum), once there was a sample.
    pub(crate) fn estimate(&self) -> Option<u64> {
        let seed = self.seed.map(|(_, r)| r);
        self.filter.get().max(seed).filter(|&r| r > 0)
    }
}

/// One ack's forward trip (send of its last byte's chunk to the relay's stamp) above the least one.
///
/// It is queueing plus serialization: the ack's last byte lies `offset` bytes into its chunk, so
/// it reached the relay `offset / rate` after the chunk's first byte even through an empty queue,
/// and the minimum was set by an ack `min_offset` bytes into its chunk. The queue the chunk met is
/// `excess - offset / rate + min_offset / rate` (the caller knows the rate).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ForwardExcess {
    pub excess: Duration,
    pub offset: u64,
    pub min_offset: u64,
}

/// Round-trip time and ack delay, split at the relay's timestamp.
///
/// `relay_time - sent_at` is the forward trip (queue included) and `arrival - relay_time` the way
/// back, each plus the same unknown clock offset, which cancels in their sum. Why split:
/// - When acks come back in clumps, the sender's sends follow the clumps, so every raw RTT sample
///   (send to ack arrival) carries most of a clump interval and their minimum never sees the path.
///   The minimum forward trip plus the minimum way back is the path's round trip without clumping.
/// - The excess of an ack's way back over the minimum is how long the bytes it reports had been at
///   the relay without the sender knowing. They still count as in flight, so the window must cover
///   them or the link idles between clumps; they are in no queue, so covering them costs a
///   keystroke nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct PathDelay {
    min_forward: Option<i128>,
    /// Bytes of its chunk the ack that set `min_forward` covered (their serialization is part of
    /// that minimum).
    min_forward_offset: u64,
    min_back: Option<i128>,
    last_relay_us: u64,
    excess: WindowedMax,
}

impl PathDelay {
    /// Records an ack that arrived at `now`, stamped `relay_us`, whose last byte lies `offset`
    /// bytes into a chunk sent at `sent_at`. Returns that byte's forward trip in excess of the
    /// minimum, with the offsets of this ack and of the minimum's (see [`ForwardExcess`]).
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        relay_us: u64,
        sent: Option<(Instant, u64)>,
        window: Duration,
    ) -> Option<ForwardExcess> {
        if relay_us < self.last_relay_us {
            // A relay clock step changes the offset; start over rather than read it as delay.
            *self = PathDelay::default();
        }
        self.last_relay_us = relay_us;
        let relay = i128::from(relay_us);
        let mut excess_forward = None;
        if let Some((sent_at, offset)) = sent {
            let forward = relay - i128::from(sent_at.as_micros());
            if self.min_forward.is_none_or(|m| forward < m) {
                self.min_forward = Some(forward);
                self.min_forward_offset = offset;
            }
            excess_forward = self.min_forward.map(|m| ForwardExcess {
                excess: Duration::from_micros(u64::try_from(forward - m).unwrap_or(0)),
                offset,
                min_offset: self.min_forward_offset,
            });
        }
        let back = i128::from(now.as_micros()) - relay;
        let min_back = self.min_back.map_or(back, |m| m.min(back));
        self.min_back = Some(min_back);
        let excess = u64::try_from(back - min_back).unwrap_or(u64::MAX);
        self.excess.push(now, excess, window);
        excess_forward
    }

    /// The least round trip of the path: minimum forward trip plus minimum way back.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        let micros = self.min_forward? + self.min_back?;
        Some(Duration::from_micros(u64::try_from(micros.max(0)).unwrap_or(u64::MAX)))
    }

    /// The largest recent excess delay of an ack on its way back.
    pub(crate) fn max_ack_delay(&self) -> Duration {
        Duration::from_micros(self.excess.get().unwrap_or(0))
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
    fn path_delay_splits_rtt_from_ack_clumping() {
        let mut p = PathDelay::default();
        // Relay clock = sender clock + 500 s. Path: 10 ms forward, 10 ms back.
        let relay = |ms: u64| 500_000_000 + ms * 1000;
        // Sent at 0, at the relay at 10, the ack held in a clump until 100.
        p.on_ack(Instant::from_millis(100), relay(10), Some((Instant::from_millis(0), 1000)), W);
        // Sent at 60, at the relay at 70, the ack released with the same clump at 100... its way
        // back (30 ms) is the least so far, so the first ack was 60 ms late.
        p.on_ack(Instant::from_millis(100), relay(70), Some((Instant::from_millis(60), 1000)), W);
        assert_eq!(p.min_rtt(), Some(Duration::from_millis(40)));
        assert_eq!(p.max_ack_delay(), Duration::ZERO, "measured against the minimum at the time");
        // An ack sent at 95 with no clump delay reveals the real way back: 10 ms.
        p.on_ack(Instant::from_millis(115), relay(105), Some((Instant::from_millis(95), 1000)), W);
        assert_eq!(p.min_rtt(), Some(Duration::from_millis(20)), "not the 100 ms raw sample");
        // A later ack held 90 ms is seen as 90 ms late.
        p.on_ack(Instant::from_millis(300), relay(200), None, W);
        assert_eq!(p.max_ack_delay(), Duration::from_millis(90));
        // The relay clock stepped back: start over.
        p.on_ack(Instant::from_millis(301), 5, None, W);
        assert_eq!(p.max_ack_delay(), Duration::ZERO);
        assert_eq!(p.min_rtt(), None);
    }
}
