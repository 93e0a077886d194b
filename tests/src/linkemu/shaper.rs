//! The per-direction link model as a pure function of arrival time: loss, duplication, bottleneck
//! queue with serialization at a fixed rate, then one-way delay and jitter. No sockets, no clock.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::DirectionConfig;

/// Bytes a datagram occupies on the emulated wire beyond its UDP payload: an IPv4 header (20) and
/// a UDP header (8). The rate limit and the byte-limited queue count these, as a real link would.
pub const PACKET_OVERHEAD_BYTES: usize = 28;

/// What became of one arriving datagram.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// Dropped by the random loss draw before it reached the queue.
    pub lost: bool,
    /// A second copy was made (it may still have been dropped by the queue).
    pub duplicated: bool,
    /// Copies dropped at the tail of the bottleneck queue (0, 1 or 2).
    pub queue_drops: u32,
    /// Release times of the copies that survive, in the order they were queued.
    pub releases: Vec<Instant>,
}

/// One direction's link state. Feed it arrivals in non-decreasing `now` order.
#[derive(Debug)]
pub struct Shaper {
    config: DirectionConfig,
    rng: SmallRng,
    /// Packets accepted into the bottleneck whose serialization has not finished at the latest
    /// `now` seen: (serialization done at, wire bytes). Includes the one on the wire.
    backlog: VecDeque<(Instant, usize)>,
    backlog_bytes: usize,
    /// When the emulated wire finishes the last accepted packet.
    link_free_at: Option<Instant>,
    /// Latest release time handed out; with reordering off no later packet is released earlier.
    last_release: Option<Instant>,
}

impl Shaper {
    /// A shaper for `config`, its random draws seeded by `seed`.
    pub fn new(config: DirectionConfig, seed: u64) -> Self {
        Self {
            config,
            rng: SmallRng::seed_from_u64(seed),
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            link_free_at: None,
            last_release: None,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &DirectionConfig {
        &self.config
    }

    /// Replaces the configuration; the queue, the wire and the release order carry over.
    pub fn set_config(&mut self, config: DirectionConfig) {
        self.config = config;
    }

    /// Bytes waiting in (or being serialized by) the bottleneck at `now`.
    pub fn queued_bytes(&mut self, now: Instant) -> usize {
        self.drain_backlog(now);
        self.backlog_bytes
    }

    /// Decides the fate of a datagram with `len` bytes of UDP payload that arrives at `now`; the
    /// bottleneck counts [`PACKET_OVERHEAD_BYTES`] of headers on top.
    pub fn admit(&mut self, now: Instant, len: usize) -> Admission {
        self.admit_wire(now, len + PACKET_OVERHEAD_BYTES)
    }

    /// Like [`Shaper::admit`] for a packet whose length already counts every header it has on the
    /// wire (a whole IP packet, as the TUN reflector carries).
    pub fn admit_wire(&mut self, now: Instant, wire_bytes: usize) -> Admission {
        let mut admission = Admission::default();
        if self.config.loss > 0.0 && self.rng.random_bool(self.config.loss) {
            admission.lost = true;
            return admission;
        }
        let copies = if self.config.duplicate > 0.0 && self.rng.random_bool(self.config.duplicate) {
            admission.duplicated = true;
            2
        } else {
            1
        };
        for _ in 0..copies {
            match self.enqueue(now, wire_bytes) {
                Some(done) => {
                    let release = self.release_after(done);
                    admission.releases.push(release);
                }
                None => admission.queue_drops += 1,
            }
        }
        admission
    }

    fn drain_backlog(&mut self, now: Instant) {
        while let Some(&(done, bytes)) = self.backlog.front() {
            if done > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= bytes;
        }
    }

    /// Puts one copy through the bottleneck: `Some(time its last bit leaves)` or `None` for a
    /// drop-tail. Without a rate limit nothing ever waits, so the queue limits do not apply.
    fn enqueue(&mut self, now: Instant, wire_bytes: usize) -> Option<Instant> {
        let Some(rate) = self.config.rate_bps else {
            return Some(now);
        };
        self.drain_backlog(now);
        let start = self.link_free_at.filter(|t| *t > now).unwrap_or(now);
        // An empty queue always takes a packet, so a limit below one packet cannot black-hole.
        if !self.backlog.is_empty() {
            let over_bytes =
                self.config.queue_bytes.is_some_and(|max| self.backlog_bytes + wire_bytes > max);
            let over_delay = self.config.queue_delay.is_some_and(|max| start - now > max);
            if over_bytes || over_delay {
                return None;
            }
        }
        let done = start + serialization_time(wire_bytes, rate);
        self.link_free_at = Some(done);
        self.backlog.push_back((done, wire_bytes));
        self.backlog_bytes += wire_bytes;
        Some(done)
    }

    fn release_after(&mut self, done: Instant) -> Instant {
        let mut release = done + self.config.delay;
        if !self.config.jitter.is_zero() {
            let max_ns = u64::try_from(self.config.jitter.as_nanos()).unwrap_or(u64::MAX);
            release += Duration::from_nanos(self.rng.random_range(0..=max_ns));
        }
        if !self.config.reorder {
            if let Some(last) = self.last_release {
                release = release.max(last);
            }
        }
        self.last_release = Some(self.last_release.map_or(release, |last| last.max(release)));
        release
    }
}

/// Time to put `wire_bytes` on a wire of `rate_bps` bits per second.
pub fn serialization_time(wire_bytes: usize, rate_bps: u64) -> Duration {
    let bits = wire_bytes as u128 * 8;
    let nanos = bits * 1_000_000_000 / u128::from(rate_bps.max(1));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn plain_delay_is_exact() {
        let t0 = Instant::now();
        let mut s = Shaper::new(DirectionConfig { delay: ms(30), ..Default::default() }, 1);
        let a = s.admit(t0, 100);
        assert_eq!(a.releases, vec![t0 + ms(30)]);
        assert!(!a.lost && !a.duplicated && a.queue_drops == 0);
    }

    #[test]
    fn loss_rate_matches_probability_for_fixed_seed() {
        let t0 = Instant::now();
        let mut s = Shaper::new(DirectionConfig { loss: 0.1, ..Default::default() }, 7);
        let lost = (0..20_000).filter(|_| s.admit(t0, 10).lost).count();
        // 4 sigma of a binomial(20000, 0.1) is about 170.
        assert!((1_830..=2_170).contains(&lost), "lost {lost}");
    }

    #[test]
    fn same_seed_same_decisions() {
        let t0 = Instant::now();
        let cfg = DirectionConfig {
            loss: 0.3,
            duplicate: 0.2,
            jitter: ms(10),
            reorder: true,
            ..Default::default()
        };
        let mut a = Shaper::new(cfg.clone(), 42);
        let mut b = Shaper::new(cfg, 42);
        for i in 0..1000 {
            let now = t0 + Duration::from_micros(i * 100);
            assert_eq!(a.admit(now, 50), b.admit(now, 50));
        }
    }

    #[test]
    fn rate_limit_serializes_back_to_back() {
        let t0 = Instant::now();
        // 972 + 28 = 1000 wire bytes at 8 Mbit/s: 1 ms each.
        let mut s =
            Shaper::new(DirectionConfig { rate_bps: Some(8_000_000), ..Default::default() }, 1);
        let releases: Vec<_> = (0..5).map(|_| s.admit(t0, 972).releases[0]).collect();
        for (i, r) in releases.iter().enumerate() {
            assert_eq!(*r, t0 + ms(i as u64 + 1));
        }
        assert_eq!(s.queued_bytes(t0), 5_000);
        assert_eq!(s.queued_bytes(t0 + ms(3)), 2_000);
        // An idle wire does not bank credit: a packet after a pause waits only for itself.
        let later = t0 + ms(100);
        assert_eq!(s.admit(later, 972).releases, vec![later + ms(1)]);
    }

    #[test]
    fn queue_bytes_drop_tail() {
        let t0 = Instant::now();
        let cfg = DirectionConfig {
            rate_bps: Some(8_000_000),
            queue_bytes: Some(3_000),
            ..Default::default()
        };
        let mut s = Shaper::new(cfg, 1);
        let drops: u32 = (0..10).map(|_| s.admit(t0, 972).queue_drops).sum();
        assert_eq!(drops, 7);
        // One packet time later one slot is free again.
        assert_eq!(s.admit(t0 + ms(1), 972).queue_drops, 0);
        assert_eq!(s.admit(t0 + ms(1), 972).queue_drops, 1);
    }

    #[test]
    fn queue_delay_drop_tail() {
        let t0 = Instant::now();
        let cfg = DirectionConfig {
            rate_bps: Some(8_000_000),
            queue_delay: Some(ms(2)),
            ..Default::default()
        };
        let mut s = Shaper::new(cfg, 1);
        // Waits of 0, 1, 2 ms are accepted; 3 ms is over the limit.
        let drops: Vec<u32> = (0..5).map(|_| s.admit(t0, 972).queue_drops).collect();
        assert_eq!(drops, vec![0, 0, 0, 1, 1]);
    }

    #[test]
    fn jitter_without_reorder_keeps_fifo() {
        let t0 = Instant::now();
        let cfg = DirectionConfig { delay: ms(5), jitter: ms(20), ..Default::default() };
        let mut s = Shaper::new(cfg, 3);
        let mut last = t0;
        for i in 0..2_000 {
            let now = t0 + Duration::from_micros(i * 500);
            let r = s.admit(now, 10).releases[0];
            assert!(r >= last);
            assert!(r >= now + ms(5));
            last = r;
        }
    }

    #[test]
    fn jitter_with_reorder_reorders() {
        let t0 = Instant::now();
        let cfg = DirectionConfig { jitter: ms(20), reorder: true, ..Default::default() };
        let mut s = Shaper::new(cfg, 3);
        let releases: Vec<_> = (0..200).map(|i| s.admit(t0 + ms(i), 10).releases[0]).collect();
        assert!(releases.windows(2).any(|w| w[1] < w[0]));
        assert!(releases.iter().enumerate().all(|(i, r)| *r >= t0 + ms(i as u64)));
    }

    #[test]
    fn duplicates_take_their_own_slot_in_the_queue() {
        let t0 = Instant::now();
        let cfg =
            DirectionConfig { duplicate: 1.0, rate_bps: Some(8_000_000), ..Default::default() };
        let mut s = Shaper::new(cfg, 1);
        let a = s.admit(t0, 972);
        assert!(a.duplicated);
        assert_eq!(a.releases, vec![t0 + ms(1), t0 + ms(2)]);
    }
}
