//! A deterministic link for upload tests: a bottleneck of rate R with a FIFO queue, one-way delay
//! D, a relay that acks as the real one does ([`AckPolicy`], the core's: the first read at once,
//! then at most one ack per [`AckPolicy::COALESCE`] and never later than that after data arrived,
//! the last at once), each ack stamped with the time of the read that brought its newest byte,
//! and acks that come back in clumps. Simulated clock in nanoseconds; the upload and the relay's
//! ack clock see microseconds.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tern::relay_proto::upload::AckPolicy;
use tern::time::Instant;
use tern::transfer::{AckInfo, MAX_CHUNK, Upload, UploadConfig, UploadState};

/// How acks travel back to the sender.
#[derive(Copy, Clone, Debug)]
pub enum Clump {
    /// Each ack arrives one-way delay after the relay sent it.
    None,
    /// Acks are held and released together at multiples of `every` (Wi-Fi aggregation, a busy
    /// event loop); the phase is offset so release times do not line up with anything.
    Batched { every: Duration },
    /// Each ack is delayed by a random 0..=`max` extra, but acks stay in order (one stream), so a
    /// late ack holds back the ones behind it.
    Irregular { max: Duration },
}

impl Clump {
    /// The longest extra delay this pattern adds to an ack.
    pub fn max_extra(self) -> Duration {
        match self {
            Clump::None => Duration::ZERO,
            Clump::Batched { every } => every,
            Clump::Irregular { max } => max,
        }
    }
}

/// How the relay stamps and sends its acks.
#[derive(Copy, Clone, Debug)]
pub enum RelayClock {
    /// Microsecond receive times.
    Exact,
    /// Receive times cut to whole milliseconds (acks share stamps).
    Millis,
    /// The receiver reads in bursts, about one per `every` at irregular moments, one read per
    /// chunk, each stamped when it happens and acked by the policy (a browser page reading a
    /// download stream: Chromium hands the page stream data in bursts).
    Bursty { every: Duration },
}

#[derive(Copy, Clone, Debug)]
pub struct Link {
    /// Bottleneck rate in bytes per second.
    pub rate: u64,
    /// One-way propagation delay (the round trip is twice this).
    pub one_way: Duration,
    /// Queue capacity at the bottleneck, as time at the link's rate.
    pub queue: Duration,
    pub clump: Clump,
    pub relay_clock: RelayClock,
    pub seed: u64,
}

impl Link {
    pub fn mbit(mbit: f64, rtt_ms: u64, clump: Clump) -> Self {
        Link {
            rate: (mbit * 1e6 / 8.0) as u64,
            one_way: Duration::from_micros(rtt_ms * 500),
            queue: Duration::from_secs(1),
            clump,
            relay_clock: RelayClock::Exact,
            seed: 1,
        }
    }

    pub fn rtt(&self) -> Duration {
        2 * self.one_way
    }

    /// Time on the link for `bytes`.
    pub fn serialization(&self, bytes: u64) -> Duration {
        Duration::from_nanos((u128::from(bytes) * 1_000_000_000 / u128::from(self.rate)) as u64)
    }
}

/// Everything a run observed.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// Time from start to the last ack (Done), if it finished.
    pub finished: Option<Duration>,
    pub final_state: Option<UploadState>,
    /// Bytes the upload handed to the link.
    pub bytes_sent: u64,
    pub chunks: u64,
    /// Largest wait a keystroke entering the bottleneck queue would have seen (whole run).
    pub max_queue: Duration,
    /// The same, after warm-up.
    pub max_queue_warm: Duration,
    /// Largest |estimate - rate| / rate over acks after warm-up (while not finished).
    pub max_rate_error_warm: f64,
    /// Estimates after warm-up, for the mean.
    pub rate_samples_warm: Vec<u64>,
    /// Sends after which in-flight exceeded the window (must be zero).
    pub window_violations: u64,
    /// Largest in-flight / window seen right after a send.
    pub max_fill: f64,
    /// Largest in-flight at any send.
    pub max_in_flight: u64,
    /// Sends where the window broke its own stated bounds (0.5 s of rate / 2 chunks floor).
    pub bound_violations: Vec<String>,
    /// Bytes that did not fit the bottleneck queue (must be zero).
    pub queue_overflow: u64,
    /// Acks delivered to the upload.
    pub acks: u64,
    /// (send time, wait a keystroke behind that chunk would see), for every chunk.
    pub queue_series: Vec<(Duration, Duration)>,
}

/// The receiving end (the relay of an upload; the page of a download acks the same way): holds
/// what its reads brought and acks it by [`AckPolicy`] on its own clock.
struct Receiver {
    policy: AckPolicy,
    total: u64,
    /// Bytes held, and when the read that brought the newest of them happened (ns).
    held: u64,
    last_read_ns: u64,
    /// Reads to come, in time order: (when, bytes held after it).
    reads: VecDeque<(u64, u64)>,
}

/// An ack as the receiver sends it: when (ns), the bytes it acks, and its read's time (ns).
struct SentAck {
    at_ns: u64,
    acked: u64,
    read_ns: u64,
}

/// The receiver's clock as [`AckPolicy`] sees it.
fn policy_instant(ns: u64) -> Instant {
    Instant::from_micros(ns / 1000)
}

impl Receiver {
    fn new(held: u64, total: u64) -> Self {
        Receiver {
            policy: AckPolicy::new(held),
            total,
            held,
            last_read_ns: 0,
            reads: VecDeque::new(),
        }
    }

    /// When a coalesced ack of what is held falls due (ns), if one is waiting.
    fn deadline(&self) -> Option<u64> {
        if !self.policy.pending(self.held) {
            return None;
        }
        self.policy.due(self.held).map(|at| at.as_micros() * 1000)
    }

    /// The next moment the receiver acts on its own: a read, or an ack falling due.
    fn next_event(&self) -> Option<u64> {
        let read = self.reads.front().map(|&(at, _)| at);
        match (read, self.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Does everything due up to `until`, in time order, as the real relay's loop does: after each
    /// read, an ack if [`AckPolicy::ack_now`] says so (the last byte's at once); otherwise one when
    /// the policy's deadline comes, of everything read by then.
    fn run_until(&mut self, until: u64) -> Vec<SentAck> {
        let mut sent = Vec::new();
        loop {
            let read = self.reads.front().copied().filter(|&(at, _)| at <= until);
            let deadline = self.deadline().filter(|&at| at <= until);
            // A read at the deadline comes first: its bytes go with that ack.
            let read_first = match (read, deadline) {
                (Some((at, _)), Some(due)) => at <= due,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return sent,
            };
            if read_first {
                let (at, held) = self.reads.pop_front().expect("a read is due");
                (self.held, self.last_read_ns) = (held, at);
                let now = policy_instant(at);
                if held == self.total || self.policy.ack_now(now, held) {
                    self.policy.sent(now, held);
                    sent.push(SentAck { at_ns: at, acked: held, read_ns: at });
                }
            } else {
                let at = deadline.expect("an ack is due");
                self.policy.sent(policy_instant(at), self.held);
                sent.push(SentAck { at_ns: at, acked: self.held, read_ns: self.last_read_ns });
            }
        }
    }
}

/// Drives `upload` over `link` until it is done (or `limit` of simulated time passes).
///
/// `warmup` is when "steady state" figures start. `on_step` sees the upload after each event, for
/// extra assertions.
pub fn run(
    link: Link,
    mut upload: Upload,
    warmup: Duration,
    limit: Duration,
    mut on_step: impl FnMut(Instant, &Upload),
) -> Run {
    let mut out = Run::default();
    let mut rng = SmallRng::seed_from_u64(link.seed);
    let ns = |d: Duration| d.as_nanos() as u64;
    let to_instant = |t_ns: u64| Instant::from_micros(t_ns / 1000);
    // The relay's clock has its own origin: only its differences may matter to the sender.
    let relay_origin_ns: u64 = 7_777_000_000_123;
    let batch_phase_ns = 3_141_593;

    let mut now_ns: u64 = 0;
    let mut link_free_ns: u64 = 0;
    let mut last_arrival_ns: u64 = 0;
    let mut last_read_ns: u64 = 0;
    // (arrival at the sender, ack)
    let mut acks: VecDeque<(u64, AckInfo)> = VecDeque::new();
    let start = upload.progress(Instant::ZERO);
    let mut relay = Receiver::new(start.acked, start.total);
    let warm_ns = ns(warmup);
    let mut idle_bumps = 0u32;

    loop {
        let now = to_instant(now_ns);
        // The relay's acks up to now, on their way back.
        for ack in relay.run_until(now_ns) {
            let relay_ns = relay_origin_ns + ack.read_ns;
            let relay_time = match link.relay_clock {
                RelayClock::Exact | RelayClock::Bursty { .. } => {
                    Duration::from_micros(relay_ns / 1000)
                }
                RelayClock::Millis => Duration::from_millis(relay_ns / 1_000_000),
            };
            let base = ack.at_ns + ns(link.one_way);
            let arrival = match link.clump {
                Clump::None => base,
                Clump::Batched { every } => {
                    let every = ns(every).max(1);
                    (base + batch_phase_ns).div_ceil(every) * every - batch_phase_ns
                }
                Clump::Irregular { max } => base + rng.random_range(0..=ns(max)),
            };
            // One ordered stream: an ack never overtakes the one before it.
            let arrival = arrival.max(last_arrival_ns);
            last_arrival_ns = arrival;
            acks.push_back((arrival, AckInfo { acked_bytes: ack.acked, relay_time }));
        }
        while acks.front().is_some_and(|&(at, _)| at <= now_ns) {
            let (_, ack) = acks.pop_front().expect("front exists");
            upload.handle_ack(now, ack).expect("the simulated relay only acks what it received");
            out.acks += 1;
            let p = upload.progress(now);
            if now_ns >= warm_ns && !p.state.is_terminal() {
                let est = p.rate.unwrap_or(0);
                out.rate_samples_warm.push(est);
                let err = (est as f64 - link.rate as f64).abs() / link.rate as f64;
                out.max_rate_error_warm = out.max_rate_error_warm.max(err);
            }
        }
        if upload.poll_timeout().is_some_and(|t| t <= now) {
            upload.handle_timeout(now);
        }
        while let Some(range) = upload.poll_chunk(now) {
            let len = range.end - range.start;
            out.bytes_sent += len;
            out.chunks += 1;
            let p = upload.progress(now);
            out.max_in_flight = out.max_in_flight.max(p.in_flight);
            if p.in_flight > p.window {
                out.window_violations += 1;
            }
            out.max_fill = out.max_fill.max(p.in_flight as f64 / p.window as f64);
            if let Some(rate) = p.rate {
                let half_second = rate / 2;
                if p.window > half_second.max(2 * upload.chunk_len()) + 1 {
                    out.bound_violations.push(format!(
                        "window {} > max(0.5 s of {rate} B/s, two chunks) at {now:?}",
                        p.window
                    ));
                }
            }
            if p.window < 2 * upload.chunk_len() {
                out.bound_violations.push(format!("window {} below two chunks", p.window));
            }

            // The bottleneck: FIFO at `rate`, starting when the link is free.
            let backlog_ns = link_free_ns.saturating_sub(now_ns);
            let backlog_bytes =
                (u128::from(backlog_ns) * u128::from(link.rate) / 1_000_000_000) as u64;
            let capacity =
                (u128::from(ns(link.queue)) * u128::from(link.rate) / 1_000_000_000) as u64;
            if backlog_bytes + len > capacity {
                out.queue_overflow += len;
            }
            link_free_ns = link_free_ns.max(now_ns) + ns(link.serialization(len));
            // A keystroke arriving right behind this chunk waits until the link is free.
            let wait = Duration::from_nanos(link_free_ns - now_ns);
            out.max_queue = out.max_queue.max(wait);
            out.queue_series.push((Duration::from_nanos(now_ns), wait));
            if now_ns >= warm_ns {
                out.max_queue_warm = out.max_queue_warm.max(wait);
            }

            // The relay: last byte in at link_free + D, read then (or in the next burst); it acks
            // when its policy says (`Receiver::run_until`).
            let received_ns = link_free_ns + ns(link.one_way);
            let read_ns = match link.relay_clock {
                RelayClock::Bursty { every } => {
                    let every = ns(every).max(2);
                    let burst = (received_ns + batch_phase_ns).div_ceil(every);
                    // Every chunk of one burst is read at the same, irregular moment in it.
                    let jitter = (burst.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % (every / 2);
                    (burst * every - batch_phase_ns + jitter).max(last_read_ns)
                }
                _ => received_ns,
            };
            last_read_ns = read_ns;
            relay.reads.push_back((read_ns, range.end));
        }
        on_step(now, &upload);

        let state = upload.state();
        if state.is_terminal() {
            out.final_state = Some(state.clone());
            if state == UploadState::Done {
                out.finished = Some(Duration::from_nanos(now_ns));
            }
            return out;
        }
        if now_ns > ns(limit) {
            out.final_state = Some(state);
            return out;
        }
        let next_ack = acks.front().map(|&(at, _)| at);
        let next_timer = upload.poll_timeout().map(|t| t.as_micros() * 1000);
        let next = [next_ack, next_timer, relay.next_event()]
            .into_iter()
            .flatten()
            .min()
            .expect("an upload in progress always waits for an ack, a timer or the relay");
        if next <= now_ns {
            // A timer at or before now that produced nothing (rounding to microseconds).
            idle_bumps += 1;
            assert!(idle_bumps < 1_000_000, "the upload keeps asking to be woken without acting");
            now_ns += 1000;
        } else {
            now_ns = next;
        }
    }
}

/// A fresh upload of `total` bytes with 32 KiB chunks.
pub fn upload(total: u64, resume_from: u64) -> Upload {
    Upload::new(UploadConfig { total, resume_from, chunk_size: MAX_CHUNK }, Instant::ZERO)
        .expect("valid config")
}

pub fn mean(xs: &[u64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().map(|&x| x as f64).sum::<f64>() / xs.len() as f64
}
