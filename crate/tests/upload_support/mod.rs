//! A deterministic link for upload tests: a bottleneck of rate R with a FIFO queue, one-way delay D,
//! a relay that acks each chunk stamped with its own receive time, and acks that come back in
//! clumps. Simulated clock in nanoseconds; the upload sees microseconds.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tern::time::Instant;
use tern::upload::{AckInfo, MAX_CHUNK, Upload, UploadConfig, UploadState};

/// The relay acks data it has held this long without an ack.
const RELAY_ACK_TIMER_NS: u64 = 20_000_000;

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
    /// The receiver reads in bursts, about one per `every` at irregular moments, and stamps and
    /// acks each read when it happens (a browser page reading a download stream: Chromium hands
    /// the page stream data in bursts).
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
    /// The relay acks every `ack_every`-th chunk at once (and the last), others on a 20 ms timer.
    pub ack_every: u32,
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
            ack_every: 1,
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
    let mut relay_chunks: u32 = 0;
    let mut last_arrival_ns: u64 = 0;
    let mut last_read_ns: u64 = 0;
    // (arrival at the sender, ack)
    let mut acks: VecDeque<(u64, AckInfo)> = VecDeque::new();
    let total = upload.progress(Instant::ZERO).total;
    let warm_ns = ns(warmup);
    let mut idle_bumps = 0u32;

    loop {
        let now = to_instant(now_ns);
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

            // The relay: last byte in at link_free + D; acks every ack_every-th chunk.
            let received_ns = link_free_ns + ns(link.one_way);
            relay_chunks += 1;
            // Acks for every `ack_every`-th chunk leave at once; the relay's ack timer sends one
            // for anything else it holds 20 ms later (without it a window of fewer than
            // `ack_every` chunks would wait forever).
            let relay_hold_ns = if relay_chunks % link.ack_every.max(1) == 0 || range.end == total {
                0
            } else {
                RELAY_ACK_TIMER_NS
            };
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
            let relay_ns = relay_origin_ns + read_ns;
            let relay_time = match link.relay_clock {
                RelayClock::Exact | RelayClock::Bursty { .. } => {
                    Duration::from_micros(relay_ns / 1000)
                }
                RelayClock::Millis => Duration::from_millis(relay_ns / 1_000_000),
            };
            let base = read_ns + relay_hold_ns + ns(link.one_way);
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
            acks.push_back((arrival, AckInfo { acked_bytes: range.end, relay_time }));
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
        let next = match (next_ack, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).expect("an upload in progress always waits for an ack or a timer"),
        };
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
