//! Pacing of one transfer over a stream, from its sender's side: what to send when, and how far
//! along it is. The page runs it for a pasted picture's upload to the relay, the relay for a
//! `tern send` download to the page; the type keeps the name of the first use, [`Upload`].
//!
//! ```text
//!  page: paste -> SHA-256 -> RecentUploads::begin -> ask the relay what it has
//!    -> Upload::new(resume_from)
//!    Upload::poll_chunk(now) -> Range -> write those bytes on the stream           (repeat)
//!    receiver's ack {acked, its time} -> Upload::handle_ack(now, ..)
//!    timer at Upload::poll_timeout() -> Upload::handle_timeout(now)
//!    Upload::progress(now) -> the progress line in the terminal
//! ```
//!
//! What this module does not do: read bytes, hash, open streams, read a clock, or keep any timer
//! of its own. See `docs/UPLOAD.md` for the design and the numbers behind it.

mod estimator;
mod memory;
mod recent;

use std::ops::Range;
use std::time::Duration;

use crate::time::Instant;
use estimator::{DeliveryRate, PathDelay, WindowedMin};

pub use memory::{LINK_MEMORY_TTL, LinkEstimate, LinkMemory};
pub use recent::{ContentHash, Recall, RecentUploads};

/// The largest chunk: one write on the stream, one unit of acknowledgement.
pub const MAX_CHUNK: u64 = 32 * 1024;
/// The smallest chunk the pacer shrinks to on slow links (see [`Upload::chunk_len`]).
pub const MIN_CHUNK: u64 = 4 * 1024;
/// Chunks are shrunk to about this much time on the link, so the chunk a keystroke lands behind
/// (and the two-chunk floor of the window) stays short on slow links: 32 KiB is 262 ms at 1 Mbit/s.
/// The default; [`Upload::chunk_time`] sets another.
pub const CHUNK_LINK_TIME: Duration = Duration::from_millis(10);
/// The chunk time for a sender whose QUIC stack packs consecutive writes into full datagrams
/// (quinn: the relay's `tern send` downloads). In the simulation, where a chunk enters the
/// bottleneck at once, 5 ms chunks cut the median keystroke wait from 14.9 to 9.9 ms at 9 Mbit/s
/// and 80 ms, and a bursty receiver's (a page reading a download) from 14.0/14.3/27.0 to
/// 13.2/8.9/5.4 ms at 20/40/80 ms bursts. Not for pastes: Chromium ends every write with a short
/// datagram, and 5 ms chunks cut its mean datagram from ~1,205 to ~1,155 B (0.5 % more of the
/// link spent on headers; the paste benchmark's `link:` line).
pub const SHORT_CHUNK_LINK_TIME: Duration = Duration::from_millis(5);
/// Never more than this much data in flight at the estimated rate (the old tool kept this much
/// queued, and every keystroke waited behind it).
pub const MAX_IN_FLIGHT_TIME: Duration = Duration::from_millis(500);
/// Without a rate estimate the window starts at this many `chunk_size` chunks' worth of bytes
/// (sent as [`START_CHUNK`]s) and grows by what is acked.
pub const INITIAL_WINDOW_CHUNKS: u64 = 2;
/// Without a rate estimate (a relay whose clock never moves) the window grows no further.
pub const MAX_UNESTIMATED_WINDOW_CHUNKS: u64 = 8;
/// Data in flight and no ack advancing for this long fails the upload as stalled.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Until the rate is known, chunks are this small, so that the first RTT samples (whose minimum
/// is kept for the whole upload) carry little serialization even on a slow link.
pub const START_CHUNK: u64 = MIN_CHUNK;
/// A delivery-rate sample spans about one minimum RTT of relay time, but at least this much (so a
/// few milliseconds of relay scheduling jitter cannot inflate it by more than a few percent)...
pub const MIN_RATE_SPAN: Duration = Duration::from_millis(20);
/// ...and at most this much, so that on long paths a sample fits inside one paced burst and reads
/// the bottleneck's rate even when the in-flight cap keeps the sender from filling the link.
pub const MAX_RATE_SPAN: Duration = Duration::from_millis(100);
/// The max filters (rate, ack delay) remember this many minimum RTTs...
const FILTER_RTTS: u32 = 8;
/// ...but at least this long, to cover a few ack clumps even on short paths...
const FILTER_MIN: Duration = Duration::from_millis(500);
/// ...and at most this long, so a link that got slower is believed within a couple of seconds.
const FILTER_MAX: Duration = Duration::from_secs(2);
/// Pacing gain while probing: twice the estimate, so the delivery rate can double per round trip.
const PROBE_GAIN: (u64, u64) = (2, 1);
/// Once settled, the pacing rate follows a cycle of phases of about a minimum RTT each: one
/// probing phase above the estimate (finds a faster link: the window has room for it), one as far
/// below it (drains what the probe queued), then six cruising at the estimate. `+1`, `-1`, `0`.
const SEND_CYCLE: [i8; 8] = [1, -1, 0, 0, 0, 0, 0, 0];
/// The probe adds at most a quarter of the estimate (BBR's 1.25)...
const PROBE_GAIN_MAX_EIGHTHS: u64 = 2;
/// ...and at most this much queue over its phase (1.0625 at 80 ms): every keystroke sent during a
/// probe waits behind what it queued.
pub const PROBE_QUEUE: Duration = Duration::from_millis(5);
/// While cruising, the pacer steers the standing queue at the bottleneck (the least queueing
/// delay over the last phase, from forward trips on the relay's clock) towards this: a little
/// queue keeps the link busy (and the estimate reading the bottleneck) through the jitter of the
/// page and the relay; more only delays keystrokes.
pub const QUEUE_TARGET: Duration = Duration::from_millis(5);
/// The standing queue is the least queueing delay over this many phases: a stall of the relay's
/// reads (or of the page) shorter than that lengthens some forward trips, not all of them, and
/// is no queue a keystroke waits behind.
const QUEUE_WINDOW_PHASES: u32 = 1;
/// The proportional part of the cruise correction is at most this fraction (1/16) of the rate.
const CRUISE_PROPORTIONAL_MAX_DIV: u64 = 16;
/// Until the queue first reaches the target after the start (the bias is not armed yet), a
/// standing queue more than [`QUEUE_TARGET`] above the target (what the drain phase leaves
/// behind: 20-45 ms in the browser) is drained by half of its excess per phase, at most 1/this
/// (1/4) of the rate: with the quarter step and the 1/16 cap it took 2-2.5 s of the paste
/// benchmark, a fifth of the upload, with keystrokes 15-40 ms late. A half step seen one phase
/// late still converges (the loop's poles are at 0.71, damped). Not afterwards: on a receiver
/// that stamps its reads in bursts the measured queue jumps by a burst, and the strong step
/// there kept the bias from learning the estimate's over-read (median wait 25 ms, was 12).
const CRUISE_DRAIN_MAX_DIV: u64 = 4;
/// The integral part of the cruise correction (see `Upload::update_bias`): its time constant in
/// phases, and its bounds in millionths of the estimate.
const BIAS_TIME_PHASES: u32 = 16;
/// Up to an eighth above the estimate (an estimate that under-reads idles the link)...
const BIAS_MAX_PPM: i128 = 125_000;
/// ...and as far below it: a receiver that stamps its reads in bursts (a browser page reading a
/// download) makes samples read up to burst/span high, and the max filter keeps the estimate
/// there (9 % over the link in the simulation, `RelayClock::Bursty`); only the queue it builds
/// tells. Below the link the pacer idles it, the samples read that, and the estimate follows.
const BIAS_MIN_PPM: i128 = 125_000;
/// The bias starts once the queue the start left behind has drained to the target, or after
/// this many phases of cruising without that (an estimate too high never lets it drain).
const BIAS_ARM_PHASES: u32 = 8;
/// Pacing gain after probing until the queue probing built is gone (in quarters).
const DRAIN_GAIN_QUARTERS: u64 = 2;
/// Bounds on the length of one gain phase.
const PHASE_MIN: Duration = Duration::from_millis(20);
const PHASE_MAX: Duration = Duration::from_millis(250);
/// Once settled, a rate sample counts for at most the estimate plus 1/this of it (see
/// `DeliveryRate::limit_steps`).
const SETTLED_SAMPLE_STEP: u64 = 32;
/// Probing ends after this many round trips without the estimate growing by a quarter.
const FLAT_ROUNDS: u32 = 3;
/// A transfer seeded with a remembered rate ([`Upload::remembered`]) starts with the cruise
/// bias at this (-1/16, in millionths): a little under the remembered rate (the link may have
/// changed; a receiver stamping its reads in bursts reads ~9 % high), from where the integral
/// learns from the queue as always. Simulation, seeded 1 MB transfers at 9 Mbit/s, 80 ms, median
/// keystroke wait: 5-10 ms with immediate or batched acks, 18-25 ms with 20 ms read bursts. Tried:
/// -1/32 (33 ms with 20 ms bursts), and pacing 15/16 only until a sample reached the seed
/// (8-12 ms, 28-34 ms). Not in the estimate: a seed of 15/16 in the max filter compounded over
/// a series where the link stays idle (80 ms bursts: 1.40, 1.58 × the link's time for the 2nd
/// and 3rd megabyte).
const SEED_BIAS_PPM: i64 = -62_500;
/// The seed counts as the estimate for at most this many minimum round trips (unless a sample
/// reaches it first): real samples start a round trip or two in; on a link that got slower they
/// read its rate, and the pacer must believe them before its window of queue builds up.
const SEED_RTTS: u32 = 4;
/// A seeded transfer whose estimate grows this far (an eighth) above the remembered rate at a
/// round's end is on a faster link: it probes again as a fresh one does (cruising lifts the
/// estimate only a few percent per round trip). On the same link the estimate stays within the
/// remembered one's over-read (a burst-stamping receiver's 9 %).
const SEED_REPROBE_EIGHTHS: u64 = 9;

/// What to upload: `total` bytes, of which the relay already holds `resume_from`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct UploadConfig {
    /// Size of the content in bytes.
    pub total: u64,
    /// Bytes the relay already has (its answer to "what do you have of this hash"); sending starts
    /// here. Equal to `total` for a repeat paste: nothing is sent.
    pub resume_from: u64,
    /// Largest chunk in bytes, [`MIN_CHUNK`]..=[`MAX_CHUNK`]. The pacer may send smaller ones on
    /// slow links. Tiny chunks are refused: the window's floor is counted in chunks, and a floor of
    /// a few bytes starves an upload whose acks come back in clumps.
    pub chunk_size: u64,
}

impl UploadConfig {
    /// The usual configuration: 32 KiB chunks.
    pub fn new(total: u64, resume_from: u64) -> Self {
        UploadConfig { total, resume_from, chunk_size: MAX_CHUNK }
    }
}

/// An acknowledgement from the relay.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AckInfo {
    /// Bytes of the content the relay holds, counted from offset 0 (so including a resumed prefix).
    pub acked_bytes: u64,
    /// The relay's clock when it had received them (any origin; only differences are used).
    pub relay_time: Duration,
}

/// Where an upload stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UploadState {
    /// Learning the link: no settled rate estimate yet.
    Probing,
    /// Sending at the estimated rate.
    Sending,
    /// Everything is sent; waiting for the last acks.
    Finishing,
    /// The relay has every byte.
    Done,
    /// Given up; a new [`Upload`] resuming from the relay's count can continue.
    Failed { reason: FailReason },
    /// Cancelled by the user.
    Cancelled,
}

impl UploadState {
    /// Done, failed or cancelled: nothing more will be sent.
    pub fn is_terminal(&self) -> bool {
        matches!(self, UploadState::Done | UploadState::Failed { .. } | UploadState::Cancelled)
    }
}

/// Why an upload failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// Data was in flight and no ack advanced for [`STALL_TIMEOUT`] (relay gone, network changed).
    Stalled { since: Duration },
    /// The relay sent something impossible.
    Peer(UploadError),
}

/// A configuration the upload cannot start from, or an impossible message from the relay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UploadError {
    /// The relay acknowledged bytes that were never sent.
    #[error("relay acknowledged {acked} bytes but only {sent} were sent")]
    AckBeyondSent { acked: u64, sent: u64 },
    /// The relay claims to hold more than the content's size.
    #[error("resume offset {resume_from} lies beyond the content's {total} bytes")]
    ResumeBeyondEnd { resume_from: u64, total: u64 },
    /// The chunk size is below [`MIN_CHUNK`] or above [`MAX_CHUNK`].
    #[error("chunk size {chunk_size} is outside {min}..={max}")]
    ChunkSize { chunk_size: u64, min: u64, max: u64 },
}

/// What the progress line shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub state: UploadState,
    /// Content size.
    pub total: u64,
    /// Bytes the relay holds (including a resumed prefix).
    pub acked: u64,
    /// Bytes handed to the stream (from offset 0, including a resumed prefix).
    pub sent: u64,
    /// Sent and not yet acknowledged.
    pub in_flight: u64,
    /// The cap on `in_flight` right now.
    pub window: u64,
    /// `acked` of `total`, 0..=100.
    pub percent: f64,
    /// Estimated delivery rate in bytes per second, once measured.
    pub rate: Option<u64>,
    /// `(total - acked) / rate`, once the rate is measured.
    pub time_left: Option<Duration>,
    /// The least round trip seen (send of a chunk to the ack covering it).
    pub min_rtt: Option<Duration>,
    /// The least queueing delay chunks met at the bottleneck over about the last minimum RTT
    /// (see [`Upload::standing_queue`]).
    pub standing_queue: Option<Duration>,
    /// Bytes per second the pacer releases at right now; none before the first estimate.
    pub pacing_rate: Option<u64>,
    /// Since [`Upload::new`].
    pub elapsed: Duration,
}

/// The sending half of one upload, sans-IO.
///
/// # Calling contract
/// - Create with [`Upload::new`] once the relay has said how much of the content it holds
///   (`resume_from`). If it holds all of it the upload starts [`UploadState::Done`] and sends
///   nothing. After an interruption, make a new `Upload` from the relay's new count; the rate
///   estimate is not carried over by itself (the path may have changed): the link's owner may
///   keep a [`LinkMemory`] and seed the next one with [`remembered`](Self::remembered).
/// - Whenever anything happened (creation, an ack, a timer), drain
///   [`poll_chunk`](Self::poll_chunk): each `Some(range)` is a range of content bytes to write
///   on the stream now, in order; the ranges are contiguous and each is at most `chunk_size`
///   long. `None` means wait.
/// - Feed every relay ack to [`handle_ack`](Self::handle_ack). Old and duplicate acks are
///   ignored; an ack beyond what was sent is an error and fails the upload.
/// - Arm one timer at [`poll_timeout`](Self::poll_timeout) (pacing and stall detection) and call
///   [`handle_timeout`](Self::handle_timeout) when it fires, then drain `poll_chunk` again. A
///   spurious or late call is harmless.
/// - `now` is the driver's monotonic clock and never goes backwards across calls; the relay's
///   timestamps are only compared with each other (never with `now`, except for their variation).
/// - Nothing here panics on anything the relay sends.
#[derive(Clone, Debug)]
pub struct Upload {
    total: u64,
    chunk_size: u64,
    start_offset: u64,
    started_at: Instant,
    /// Next byte to send; everything below has been handed to the driver.
    next_send: u64,
    /// Bytes the relay holds.
    acked: u64,
    /// Sent chunks not yet fully acknowledged, oldest first: (range, send time), for RTT samples.
    sent: std::collections::VecDeque<(Range<u64>, Instant)>,
    rate: DeliveryRate,
    path: PathDelay,
    /// Pacing: the earliest time the next chunk may leave.
    release_at: Instant,
    /// Probing bookkeeping: a round ends when an ack covers `round_end` (what was sent when the
    /// round began); `full_rate` is the best estimate at a round's end, `flat_rounds` how many
    /// rounds in a row failed to beat it by a quarter.
    round_end: u64,
    full_rate: u64,
    flat_rounds: u32,
    /// When probing ended (the gain cycle counts phases from here).
    settled: Option<Instant>,
    /// After probing: pacing below the estimate until in flight is down to what the path holds.
    draining: bool,
    /// The standing queue at the bottleneck: the least queueing delay (in microseconds) a chunk
    /// met over the last phase, from forward trips on the relay's clock.
    queue: WindowedMin,
    /// The path's round trip as the caller knows it (the link's own estimate), if given: the
    /// window before the first estimate is paced over it instead of leaving in one burst.
    rtt_hint: Option<Duration>,
    /// The slow (integral) part of the cruise correction, in millionths of the estimate: learns
    /// how far the estimate sits from the rate that holds the queue at [`QUEUE_TARGET`] (the max
    /// filter reads a few percent high on a jittery relay). Updated on acks once settled.
    bias_ppm: i64,
    /// When `bias_ppm` was last updated.
    bias_at: Option<Instant>,
    /// Set once the standing queue was at the target after settling; the bias learns from then.
    bias_armed: bool,
    /// The remembered link this transfer was seeded with ([`Upload::remembered`]), until it
    /// probes again on a faster link.
    seeded: Option<LinkEstimate>,
    /// The remembered least round trip, until the path measures its own.
    rtt_seed: Option<Duration>,
    /// A seeded transfer found a faster link and probes it.
    reprobed: bool,
    /// The link time a chunk is shrunk to ([`CHUNK_LINK_TIME`] unless set).
    chunk_time: Duration,
    /// The standing queue cruising holds ([`QUEUE_TARGET`] unless set).
    queue_target: Duration,
    /// Last time an ack advanced (or sending resumed from nothing in flight): the stall clock.
    last_progress: Instant,
    terminal: Option<UploadState>,
}

impl Upload {
    /// Starts an upload at `now`. Fails on an impossible configuration.
    pub fn new(config: UploadConfig, now: Instant) -> Result<Self, UploadError> {
        let UploadConfig { total, resume_from, chunk_size } = config;
        if !(MIN_CHUNK..=MAX_CHUNK).contains(&chunk_size) {
            return Err(UploadError::ChunkSize { chunk_size, min: MIN_CHUNK, max: MAX_CHUNK });
        }
        if resume_from > total {
            return Err(UploadError::ResumeBeyondEnd { resume_from, total });
        }
        Ok(Upload {
            total,
            chunk_size,
            start_offset: resume_from,
            started_at: now,
            next_send: resume_from,
            acked: resume_from,
            sent: Default::default(),
            rate: DeliveryRate::default(),
            path: PathDelay::default(),
            release_at: Instant::ZERO,
            round_end: resume_from,
            full_rate: 0,
            flat_rounds: 0,
            settled: None,
            draining: false,
            queue: WindowedMin::default(),
            rtt_hint: None,
            bias_ppm: 0,
            bias_at: None,
            bias_armed: false,
            seeded: None,
            rtt_seed: None,
            reprobed: false,
            chunk_time: CHUNK_LINK_TIME,
            queue_target: QUEUE_TARGET,
            last_progress: now,
            terminal: (resume_from == total).then_some(UploadState::Done),
        })
    }

    /// The path's round trip as the link knows it (QUIC's, or mosh's SRTT): the first window is
    /// spread over it. Ignored when zero.
    #[must_use]
    pub fn rtt_hint(mut self, rtt: Duration) -> Self {
        self.rtt_hint = (!rtt.is_zero()).then_some(rtt);
        self
    }

    /// Starts from what an earlier transfer on the same link learned ([`LinkMemory`]) instead of
    /// probing from the small window: the estimate begins at `link.rate` (paced 1/16 under it:
    /// the cruise bias starts there), the minimum round trip at `link.min_rtt` (until measured), and the
    /// pacer cruises at once (the gain cycle, the queue controller). A slower link: the seed
    /// lapses from the max filter after a few round trips and the samples, which read the link,
    /// take over. A faster one: the cruise lifts the estimate, and an eighth above `link.rate`
    /// the transfer probes as a fresh one would.
    /// Call before the first [`poll_chunk`](Self::poll_chunk); ignored for an empty estimate.
    #[must_use]
    pub fn remembered(mut self, link: LinkEstimate) -> Self {
        if link.rate == 0 || link.min_rtt.is_zero() || self.terminal.is_some() {
            return self;
        }
        let now = self.started_at;
        self.rtt_seed = Some(link.min_rtt);
        self.rate.seed(link.rate, now + link.min_rtt * SEED_RTTS);
        self.rate.limit_steps(SETTLED_SAMPLE_STEP);
        self.full_rate = link.rate;
        // The queue starts empty: the integral part of the controller learns from the start,
        // a little under the remembered rate.
        self.bias_ppm = SEED_BIAS_PPM;
        self.bias_armed = true;
        self.settled = Some(now);
        self.seeded = Some(link);
        self
    }

    /// What this transfer learned of its link, for the next one ([`LinkMemory::end`]): its rate
    /// estimate and the least round trip; none before it has an estimate of its own (probing, or
    /// still on its seed). The estimate, not the rate the queue controller corrected it to: a
    /// controller pulling a burst-stamping receiver's rate down (its queue reads a burst high)
    /// carried over as the next seed compounded transfer by transfer.
    pub fn link_estimate(&self) -> Option<LinkEstimate> {
        // Probing again after a seeded start found a faster link: the estimate is already an
        // eighth above what was remembered, the better lower bound.
        let reprobing = self.reprobed && self.settled.is_none();
        if !(self.settled.is_some() || reprobing) || self.draining || self.rate.is_seed() {
            return None;
        }
        Some(LinkEstimate { rate: self.rate.estimate()?, min_rtt: self.path.min_rtt()? })
    }

    /// Chunks of about `d` of link time instead of [`CHUNK_LINK_TIME`] (still within
    /// [`MIN_CHUNK`]..=`chunk_size`); see [`SHORT_CHUNK_LINK_TIME`].
    #[must_use]
    pub fn chunk_time(mut self, d: Duration) -> Self {
        self.chunk_time = d;
        self
    }

    /// Cruise at a standing queue of `d` instead of [`QUEUE_TARGET`] (a trade-off: keystrokes
    /// wait for the queue, a shorter one lets host stalls idle the link; the benchmark compares
    /// them by echo and by the link's idle time).
    #[must_use]
    pub fn queue_target(mut self, d: Duration) -> Self {
        self.queue_target = d;
        self
    }

    /// The next range to write on the stream now, if the window and the pacer allow one.
    pub fn poll_chunk(&mut self, now: Instant) -> Option<Range<u64>> {
        if self.terminal.is_some() || self.next_send >= self.total {
            return None;
        }
        let len = self.chunk_len().min(self.total - self.next_send);
        let in_flight = self.in_flight();
        if in_flight + len > self.window() || now < self.release_at {
            return None;
        }
        if in_flight == 0 {
            // Nothing was outstanding, so nothing could have stalled until now.
            self.last_progress = now;
        }
        let range = self.next_send..self.next_send + len;
        self.next_send = range.end;
        self.sent.push_back((range.clone(), now));
        if let Some(rate) = self.pacing_rate(now) {
            // Earliest-departure-time pacing with a burst of two chunks: after an idle spell the
            // credit is capped, so a clump of acks releases at most two chunks at once.
            let burst = duration_for(2 * self.chunk_len(), rate);
            let base = self.release_at.max(now - burst);
            self.release_at = base + duration_for(len, rate);
        }
        Some(range)
    }

    /// Processes an ack from the relay. Stale and duplicate acks change nothing.
    pub fn handle_ack(&mut self, now: Instant, ack: AckInfo) -> Result<(), UploadError> {
        if self.terminal.is_some() {
            return Ok(());
        }
        let AckInfo { acked_bytes, relay_time } = ack;
        if acked_bytes > self.next_send {
            let error = UploadError::AckBeyondSent { acked: acked_bytes, sent: self.next_send };
            self.terminal = Some(UploadState::Failed { reason: FailReason::Peer(error.clone()) });
            return Err(error);
        }
        if acked_bytes <= self.acked {
            return Ok(());
        }
        self.acked = acked_bytes;
        self.last_progress = now;

        // The chunk holding the last acked byte: its send time times the forward trip, and how far
        // into it that byte lies (its serialization is part of the trip).
        let mut sent_at = None;
        while let Some((range, at)) = self.sent.front() {
            if range.start >= acked_bytes {
                break;
            }
            sent_at = Some((*at, acked_bytes.min(range.end) - range.start));
            if range.end > acked_bytes {
                break;
            }
            self.sent.pop_front();
        }

        let relay_us = u64::try_from(relay_time.as_micros()).unwrap_or(u64::MAX);
        let window = self.filter_window();
        let forward = self.path.on_ack(now, relay_us, sent_at, window);
        let span = self.min_rtt().unwrap_or_default().clamp(MIN_RATE_SPAN, MAX_RATE_SPAN);
        self.rate.on_ack(now, relay_us, acked_bytes, span, window);
        if let (Some(f), Some(rate)) = (forward, self.rate.estimate()) {
            // Queueing = excess forward trip - this byte's serialization in its chunk + the
            // serialization the minimum included.
            let queued = (f.excess + duration_for(f.min_offset, rate))
                .saturating_sub(duration_for(f.offset, rate));
            let micros = u64::try_from(queued.as_micros()).unwrap_or(u64::MAX);
            self.queue.push(now, micros, QUEUE_WINDOW_PHASES * self.phase());
        }
        self.update_bias(now);

        if acked_bytes >= self.round_end {
            self.end_round(now);
        }
        if self.draining && self.in_flight() <= self.path_holds() {
            // The probing queue is gone: start the gain cycle from here.
            self.draining = false;
            self.settled = Some(now);
        }
        if acked_bytes == self.total {
            self.terminal = Some(UploadState::Done);
        }
        Ok(())
    }

    /// When [`handle_timeout`](Self::handle_timeout) should be called, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.terminal.is_some() {
            return None;
        }
        let stall = (self.in_flight() > 0).then(|| self.last_progress + STALL_TIMEOUT);
        let len = self.chunk_len().min(self.total - self.next_send);
        // Only the pacer can be holding back a chunk the window has room for; if the driver
        // drained poll_chunk, this instant is in the future.
        let pacing = (self.next_send < self.total && self.in_flight() + len <= self.window())
            .then_some(self.release_at);
        match (stall, pacing) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Timer expiry: fails a stalled upload. The driver then drains
    /// [`poll_chunk`](Self::poll_chunk).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.terminal.is_none()
            && self.in_flight() > 0
            && now >= self.last_progress + STALL_TIMEOUT
        {
            let since = now - self.last_progress;
            self.terminal = Some(UploadState::Failed { reason: FailReason::Stalled { since } });
        }
    }

    /// Stops the upload: no more chunks. Has no effect once it is done or failed.
    pub fn cancel(&mut self) {
        if self.terminal.is_none() {
            self.terminal = Some(UploadState::Cancelled);
        }
    }

    pub fn state(&self) -> UploadState {
        if let Some(state) = &self.terminal {
            state.clone()
        } else if self.next_send == self.total {
            UploadState::Finishing
        } else if self.settled.is_some() {
            UploadState::Sending
        } else {
            UploadState::Probing
        }
    }

    /// The figures for the progress line.
    pub fn progress(&self, now: Instant) -> Progress {
        let rate = self.rate.estimate();
        let remaining = self.total - self.acked;
        Progress {
            state: self.state(),
            total: self.total,
            acked: self.acked,
            sent: self.next_send,
            in_flight: self.in_flight(),
            window: self.window(),
            percent: if self.total == 0 {
                100.0
            } else {
                self.acked as f64 * 100.0 / self.total as f64
            },
            rate,
            time_left: rate.map(|r| duration_for(remaining, r)),
            min_rtt: self.min_rtt(),
            standing_queue: self.standing_queue(),
            pacing_rate: self.pacing_rate(now),
            elapsed: now - self.started_at,
        }
    }

    /// Bytes sent and not yet acknowledged.
    pub fn in_flight(&self) -> u64 {
        self.next_send - self.acked
    }

    /// The offset this upload started from (the relay's count when it was created).
    pub fn resumed_from(&self) -> u64 {
        self.start_offset
    }

    /// The cap on data in flight now, in bytes.
    ///
    /// With an estimate: `rate * (2 * min_rtt + chunk_time + ack_delay)`, at most
    /// [`MAX_IN_FLIGHT_TIME`] of the rate, at least two chunks (the floor wins below ~1 Mbit/s).
    /// Two minimum round trips keep the link busy with about one round trip's worth queued (so a
    /// keystroke waits about one RTT behind the picture), and tolerate an estimate down to half
    /// the true rate without idling, which lets a low estimate recover. `chunk_time` is there
    /// because a chunk is acked only once all of it arrived. `ack_delay` (the recent worst ack
    /// lateness, from the relay's timestamps) covers bytes already at the relay whose acks are
    /// still in a clump on the way back; without it the link idles between clumps. While acks
    /// are late those bytes sit at the relay, not in the queue; when acks come early they can.
    /// Without an estimate: [`INITIAL_WINDOW_CHUNKS`] chunks of `chunk_size` plus what was acked
    /// so far (doubling per round trip), up to [`MAX_UNESTIMATED_WINDOW_CHUNKS`] of them.
    pub fn window(&self) -> u64 {
        let floor = 2 * self.chunk_len();
        match (self.rate.estimate(), self.min_rtt()) {
            (Some(rate), Some(min_rtt)) => {
                let chunk_time = duration_for(self.chunk_len(), rate);
                let horizon =
                    (2 * min_rtt + chunk_time + self.path.max_ack_delay()).min(MAX_IN_FLIGHT_TIME);
                bytes_in(rate, horizon).max(floor)
            }
            _ => (INITIAL_WINDOW_CHUNKS * self.chunk_size + (self.acked - self.start_offset))
                .min(MAX_UNESTIMATED_WINDOW_CHUNKS * self.chunk_size)
                .max(floor),
        }
    }

    /// What the path holds without a queue: the estimate times (min RTT + a chunk's time + the
    /// recent ack delay). Drain ends when in flight is down to this.
    fn path_holds(&self) -> u64 {
        match (self.rate.estimate(), self.min_rtt()) {
            (Some(rate), Some(min_rtt)) => {
                let chunk_time = duration_for(self.chunk_len(), rate);
                bytes_in(rate, min_rtt + chunk_time + self.path.max_ack_delay())
            }
            _ => 0,
        }
    }

    /// The size of the next full chunk: `chunk_size`, shrunk on slow links to about
    /// [`CHUNK_LINK_TIME`] (or [`Upload::chunk_time`]) of the estimated rate, but not below
    /// [`MIN_CHUNK`].
    pub fn chunk_len(&self) -> u64 {
        match self.rate.estimate() {
            Some(rate) => bytes_in(rate, self.chunk_time)
                .clamp(MIN_CHUNK.min(self.chunk_size), self.chunk_size),
            None => START_CHUNK.min(self.chunk_size),
        }
    }

    /// The path's least round trip, without ack clumping (see [`PathDelay`]).
    pub fn min_rtt(&self) -> Option<Duration> {
        self.path.min_rtt().or(self.rtt_seed)
    }

    /// Bytes per second the pacer releases; before the first estimate the window over the round
    /// trip hint, or none (the small window alone limits the start).
    fn pacing_rate(&self, now: Instant) -> Option<u64> {
        let Some(rate) = self.rate.estimate() else {
            // Before the first estimate: the window spread over the round trip the caller knows
            // (a burst of it would queue at once on a link slower than the sender's).
            let rtt = self.rtt_hint?;
            return Some(bytes_per_second(self.window(), rtt));
        };
        let Some(settled) = self.settled else {
            return Some(rate.saturating_mul(PROBE_GAIN.0) / PROBE_GAIN.1);
        };
        if self.draining {
            return Some(rate.saturating_mul(DRAIN_GAIN_QUARTERS) / 4);
        }
        let phase = self.phase();
        let n = (now - settled).as_micros() / phase.as_micros().max(1);
        let step = SEND_CYCLE[(n % SEND_CYCLE.len() as u128) as usize];
        let phase_us = u128::from(u64::try_from(phase.as_micros()).unwrap_or(u64::MAX).max(1));
        // `rate × d / phase`, capped: the change of pacing rate that adds (or removes) `d` of
        // queue over one phase.
        let over_phase = |d: Duration, cap: u64| {
            let part = u128::from(rate) * d.as_micros() / phase_us;
            u64::try_from(part).unwrap_or(u64::MAX).min(cap)
        };
        // The estimate corrected by what the queue taught (see `update_bias`).
        let base = u64::try_from(
            (i128::from(rate) * (1_000_000 + i128::from(self.bias_ppm)) / 1_000_000).max(1),
        )
        .unwrap_or(u64::MAX);
        let probe_cap = rate.saturating_mul(PROBE_GAIN_MAX_EIGHTHS) / 8;
        let cruise_cap = rate / CRUISE_PROPORTIONAL_MAX_DIV;
        let target = self.queue_target;
        Some(match step {
            // A seeded transfer's first probe goes the full quarter above the estimate (BBR's
            // 1.25): on a link faster than remembered its samples follow, and the round ends an
            // eighth above the remembered rate (`end_round` probes again from there).
            1 if self.seeded.is_some() && n == 0 => base + probe_cap,
            1 => base + over_phase(PROBE_QUEUE, probe_cap),
            -1 => base.saturating_sub(over_phase(PROBE_QUEUE, probe_cap)).max(1),
            // Cruise: the corrected estimate, plus a proportional step towards the target queue
            // (a quarter of the way per phase: the queue is seen a round trip late, and a
            // faster correction only oscillates between an idle link and a long queue).
            _ => match self.standing_queue() {
                Some(q) if q > 2 * target && !self.bias_armed => {
                    let drain_cap = rate / CRUISE_DRAIN_MAX_DIV;
                    base.saturating_sub(over_phase((q - target) / 2, drain_cap)).max(1)
                }
                Some(q) if q > target => {
                    base.saturating_sub(over_phase((q - target) / 4, cruise_cap)).max(1)
                }
                Some(q) => base + over_phase((target - q) / 4, cruise_cap),
                None => base,
            },
        })
    }

    /// The integral part of the cruise correction: the bias moves by
    /// `(target - standing queue) / phase` (the error clamped to ±target) per [`BIAS_TIME_PHASES`]
    /// phases of time, within -[`BIAS_MIN_PPM`]..=[`BIAS_MAX_PPM`]. An estimate that reads 3 %
    /// high would otherwise need 10 ms of extra queue (at 80 ms) to hold the proportional step
    /// down; with the bias the queue returns to the target within a couple of seconds.
    fn update_bias(&mut self, now: Instant) {
        let cruising = self.settled.is_some() && !self.draining && self.next_send < self.total;
        let Some(q) = self.standing_queue().filter(|_| cruising) else {
            self.bias_at = None;
            return;
        };
        // Not before the queue the start left behind has drained to the target once: that
        // queue says nothing about the estimate.
        let cruised_long = self
            .settled
            .is_some_and(|s| now.saturating_duration_since(s) >= self.phase() * BIAS_ARM_PHASES);
        self.bias_armed |= q <= self.queue_target || cruised_long;
        if !self.bias_armed {
            return;
        }
        let Some(at) = self.bias_at.replace(now) else { return };
        let phase_us = i128::try_from(self.phase().as_micros()).unwrap_or(i128::MAX).max(1);
        let dt_us = i128::try_from((now - at).as_micros()).unwrap_or(0).min(phase_us);
        // The error counts at most the target either way: a queue far above it (left over from
        // the start, a stall of the relay) must not drive the bias down much faster than an empty
        // queue can bring it back up.
        let target_us = i128::try_from(self.queue_target.as_micros()).unwrap_or(0);
        let err_us = (target_us - i128::try_from(q.as_micros()).unwrap_or(i128::MAX / 4))
            .clamp(-target_us, target_us);
        let step =
            1_000_000 * err_us * dt_us / (phase_us * phase_us * i128::from(BIAS_TIME_PHASES));
        let bias = (i128::from(self.bias_ppm) + step).clamp(-BIAS_MIN_PPM, BIAS_MAX_PPM);
        self.bias_ppm = i64::try_from(bias).unwrap_or(0);
    }

    /// The least queueing delay a chunk met at the bottleneck over about the last minimum RTT,
    /// measured on the relay's clock: forward trips above the least one, less serialization.
    pub fn standing_queue(&self) -> Option<Duration> {
        self.queue.get().map(Duration::from_micros)
    }

    /// The length of one phase of the gain cycle, and of the standing queue's window.
    fn phase(&self) -> Duration {
        self.min_rtt().unwrap_or_default().clamp(PHASE_MIN, PHASE_MAX)
    }

    fn filter_window(&self) -> Duration {
        (self.min_rtt().unwrap_or_default() * FILTER_RTTS).clamp(FILTER_MIN, FILTER_MAX)
    }

    /// A round trip of acks is complete: decide whether probing has found the link's rate.
    fn end_round(&mut self, now: Instant) {
        self.round_end = self.next_send;
        let Some(rate) = self.rate.estimate() else { return };
        if let Some(link) = self.seeded {
            if rate >= link.rate.saturating_mul(SEED_REPROBE_EIGHTHS) / 8 {
                // A faster link than remembered: probe it from here.
                self.seeded = None;
                self.reprobed = true;
                self.settled = None;
                self.draining = false;
                self.full_rate = rate;
                self.flat_rounds = 0;
                self.bias_ppm = 0;
                self.bias_at = None;
                self.bias_armed = false;
                self.rate.unlimit_steps();
                return;
            }
        }
        if self.settled.is_some() {
            return;
        }
        if rate >= self.full_rate.saturating_add(self.full_rate / 4) {
            self.full_rate = rate;
            self.flat_rounds = 0;
        } else {
            self.flat_rounds += 1;
            if self.flat_rounds >= FLAT_ROUNDS {
                self.settled = Some(now);
                self.draining = true;
                self.rate.limit_steps(SETTLED_SAMPLE_STEP);
            }
        }
    }
}

/// Bytes delivered in `d` at `rate` bytes per second.
fn bytes_in(rate: u64, d: Duration) -> u64 {
    u64::try_from(u128::from(rate) * d.as_micros() / 1_000_000).unwrap_or(u64::MAX)
}

/// The rate that delivers `bytes` in `d` (at least 1 byte per second).
fn bytes_per_second(bytes: u64, d: Duration) -> u64 {
    let micros = d.as_micros().max(1);
    u64::try_from(u128::from(bytes) * 1_000_000 / micros).unwrap_or(u64::MAX).max(1)
}

/// Time to deliver `bytes` at `rate` bytes per second (rounded up to a microsecond).
fn duration_for(bytes: u64, rate: u64) -> Duration {
    let micros = (u128::from(bytes) * 1_000_000).div_ceil(u128::from(rate.max(1)));
    Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}
