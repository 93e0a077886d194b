//! The mosh client session: the one type drivers touch.

mod draw_pacer;
mod echo_meter;
mod host_log;
mod prestart;
mod resume;
mod shadow;
mod viewer;

use std::collections::VecDeque;
use std::time::Duration;

pub use draw_pacer::{DrawPacer, FLOOD_RELAY_HOLD, HIDDEN_RELAY_HOLD, Pace, PacerCounters};
pub use echo_meter::{EchoMeter, EchoSummary, MAX_ECHO_SAMPLES};
pub use host_log::HostLog;
pub use prestart::Prestart;
pub use resume::{RESUME_STATE_GAP, ResumeError, ResumePoint};
pub use shadow::{ClientDatagram, INFLATE_BURST, INFLATE_RATE, Shadow, ShadowError, ShadowSummary};
pub use viewer::{ScreenUpdate, VIEWER_INTERVAL, ViewerFeed, ViewerScreen};

use crate::predict::{PredictConfig, Predictor};
use crate::terminal::Framebuffer;
use crate::time::Instant;
pub use crate::transport::ReceiveStage;
use crate::transport::{Counters, Outcome, SyncState, Transport, TransportConfig, UserStream};
use crate::wire::{Key, StateNum, TimestampEcho};

/// At most this much typed or pasted input is outstanding (sent, not acknowledged) at once. The
/// server drops an instruction that inflates beyond 4 MiB forever (MOSH-PROTOCOL.md 4), and every
/// retransmission carries all of it; the rest waits in the session, in order, and is never dropped.
pub const MAX_UNACKED_INPUT: usize = 64 * 1024;

/// The server's side of the synchronized state, as the client holds it.
pub trait ServerState: SyncState {
    /// State 0: what the client assumes before the server said anything (a blank screen of the
    /// size in the client's first Resize, MOSH-PROTOCOL.md 7.2).
    fn blank(cols: u16, rows: u16) -> Self;
    /// The newest client state whose input the server has had time to echo (MOSH-PROTOCOL.md 7.4).
    fn echo_ack(&self) -> StateNum;
    /// The screen, for states that keep one (prediction judges against it); `None` otherwise.
    fn framebuffer(&self) -> Option<&Framebuffer> {
        None
    }
}

/// How a session starts.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub key: Key,
    pub cols: u16,
    pub rows: u16,
    /// Seeds the chaff (and anything else random); the same seed reproduces a run.
    pub seed: u64,
    /// Whole datagram size on the wire: 1252 for mosh over IPv4, at most 1211 through the browser.
    pub mtu: usize,
    /// First datagram sequence number under this key (continue a persisted counter; never reuse).
    pub first_seq: u64,
    /// First fragment id under this key (continue a persisted counter, like `first_seq`).
    pub first_fragment_id: u64,
    /// Apply only instructions based on the newest state (exists to measure what that costs).
    pub stop_and_wait: bool,
    /// Wait after the first new key before sending, to gather a burst into one datagram
    /// (mosh-client's 1 ms). A driver whose input already arrives in bursts may use zero.
    pub min_delay: Duration,
    /// Predictive local echo (adaptive by default, as mosh-client).
    pub predict: PredictConfig,
}

impl SessionConfig {
    pub fn new(key: Key, cols: u16, rows: u16) -> Self {
        SessionConfig {
            key,
            cols,
            rows,
            seed: 0,
            mtu: crate::wire::DEFAULT_MTU,
            first_seq: 0,
            first_fragment_id: 1,
            stop_and_wait: false,
            min_delay: crate::transport::CLIENT_MIN_DELAY,
            predict: PredictConfig::default(),
        }
    }
}

/// Something the driver should act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The server's newest state changed: redraw.
    ServerStateChanged { num: StateNum },
    /// The session is over; nothing more will be sent.
    Closed(CloseReason),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The server shut down (the shell exited) and we acknowledged it.
    ServerShutdown,
    /// We asked to quit and the server acknowledged.
    ClientShutdown,
    /// We asked to quit and the server did not answer within 16 tries or 10 s.
    ShutdownTimedOut,
}

/// A mosh client session over one key: sans-IO, no clock, no sockets, no OS randomness.
///
/// # Calling contract
/// * **Time.** Every call takes `now` from one monotonic clock ([`Instant`]); the session never
///   reads a clock. Calls must not go back in time.
/// * **Inputs.** [`handle_datagram`](Self::handle_datagram) for each datagram from the server (any
///   bytes: garbage is counted and dropped, never a panic), [`handle_input`](Self::handle_input)
///   for typed or pasted bytes (never dropped; beyond [`MAX_UNACKED_INPUT`] in flight they wait in
///   order), [`handle_resize`](Self::handle_resize) when the window changes, and
///   [`handle_timeout`](Self::handle_timeout) once `poll_timeout()` has passed (a spurious call is
///   harmless).
/// * **Outputs.** After any `handle_*` call, drain [`poll_transmit`](Self::poll_transmit) until it
///   returns `None` and send each datagram as it is; drain [`poll_event`](Self::poll_event); then
///   arm one timer for [`poll_timeout`](Self::poll_timeout).
/// * **Ending.** [`shutdown`](Self::shutdown) starts the quit handshake; the session emits
///   [`Event::Closed`] when it is over, either way round. After that every call is a no-op.
/// * **Sequence numbers.** A driver that may restart under the same key (a page reload) persists
///   [`next_seq`](Self::next_seq) and [`next_fragment_id`](Self::next_fragment_id) and passes them
///   back as `first_seq` and `first_fragment_id`: mosh nonces must never repeat, and the server
///   aborts on a reused fragment id with other content.
#[derive(Debug)]
pub struct ClientSession<S: ServerState = HostLog> {
    transport: Transport<UserStream, S>,
    /// Input beyond [`MAX_UNACKED_INPUT`], waiting for acks.
    held_input: VecDeque<u8>,
    events: VecDeque<Event>,
    next_wakeup: Option<Instant>,
    closed: bool,
    started: Instant,
    /// Predictive local echo; it alone is told the carrier state and the echo ack.
    predictor: Predictor,
}

impl<S: ServerState> ClientSession<S> {
    pub fn new(config: SessionConfig, now: Instant) -> Self {
        let blank = S::blank(config.cols, config.rows);
        let mut transport = Transport::new(
            &Self::transport_config(&config),
            &config.key,
            UserStream::default(),
            blank,
            now,
        );
        // The first event of state 1 is the real window size (MOSH-PROTOCOL.md 7.2).
        transport.update_local(now, |user| user.push_resize(config.cols, config.rows));
        let mut session = Self::with_transport(config, transport, now);
        session.after_input(now);
        session
    }

    fn transport_config(config: &SessionConfig) -> TransportConfig {
        TransportConfig {
            receive_policy: if config.stop_and_wait {
                crate::transport::ReceivePolicy::NewestOnly
            } else {
                crate::transport::ReceivePolicy::AllRetained
            },
            first_seq: config.first_seq,
            first_fragment_id: config.first_fragment_id,
            min_delay: config.min_delay,
            ..TransportConfig::client(config.mtu, config.seed)
        }
    }

    fn with_transport(
        config: SessionConfig,
        transport: Transport<UserStream, S>,
        now: Instant,
    ) -> Self {
        ClientSession {
            transport,
            held_input: VecDeque::new(),
            events: VecDeque::new(),
            next_wakeup: None,
            closed: false,
            started: now,
            predictor: Predictor::new(config.predict),
        }
    }

    /// A datagram from the server (or anything claiming to be one).
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        self.handle_datagram_staged(now, datagram, &mut |_| {});
    }

    /// [`handle_datagram`](Self::handle_datagram), telling `stage` as each step of receiving is
    /// done (a driver times them on its clock: the page's frame cost).
    pub fn handle_datagram_staged(
        &mut self,
        now: Instant,
        datagram: &[u8],
        stage: &mut dyn FnMut(ReceiveStage),
    ) {
        if self.closed {
            return;
        }
        let outcome = self.transport.handle_datagram_staged(now, datagram, stage);
        if let Some(Outcome::Newest { .. }) = outcome {
            self.events.push_back(Event::ServerStateChanged { num: self.transport.remote_num() });
            self.judge_predictions(now);
        }
        self.release_held_input(now);
        self.after_input(now);
    }

    /// Server datagrams that were held on the way and came together (the relay's `held` batch),
    /// in the order the server sent them: each handled as if it had come alone, except that
    /// `echo` says which one's timestamp the next datagram sent echoes
    /// ([`DrawPacer::held_batch_echo`] decides).
    pub fn handle_held_datagrams(
        &mut self,
        now: Instant,
        datagrams: &[Vec<u8>],
        echo: TimestampEcho,
        stage: &mut dyn FnMut(ReceiveStage),
    ) {
        self.transport.set_timestamp_echo(echo);
        for datagram in datagrams {
            self.handle_datagram_staged(now, datagram, stage);
        }
        self.transport.set_timestamp_echo(TimestampEcho::Newest);
    }

    /// Bytes the user typed or pasted (one input event), in order. Never dropped.
    ///
    /// The predictor sees them first (judging the newest frame, then predicting over it), with
    /// the state that will carry them; a paste, or input that has to wait behind the in-flight
    /// cap, predicts nothing and resets.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        if self.closed || bytes.is_empty() {
            return;
        }
        self.judge_predictions(now);
        let waits = !self.held_input.is_empty()
            || self.transport.local().key_bytes() + bytes.len() > MAX_UNACKED_INPUT;
        if waits {
            self.predictor.reset();
        } else if let Some(fb) = self.transport.remote().framebuffer()
            && let Some(carrier) = self.sent_state_num().0.checked_add(1)
        {
            // After `shutdown` the last state sent is SHUTDOWN (u64::MAX): none carries these.
            self.predictor.on_keys(now, bytes, StateNum(carrier), fb);
        }
        self.held_input.extend(bytes);
        self.release_held_input(now);
        self.after_input(now);
    }

    /// The window now has this many character cells.
    pub fn handle_resize(&mut self, now: Instant, cols: u16, rows: u16) {
        if self.closed {
            return;
        }
        self.predictor.reset();
        self.transport.update_local(now, |user| user.push_resize(cols, rows));
        self.after_input(now);
    }

    /// The instant from `poll_timeout` has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        if self.predictor.poll_timeout().is_some_and(|t| t <= now) {
            self.judge_predictions(now);
        }
        self.after_input(now);
    }

    /// What to draw: the server's newest screen with the predictions that may be shown (the
    /// notification bar goes over it). `None` for states without a screen.
    pub fn display_frame(&mut self) -> Option<Framebuffer> {
        let fb = self.transport.remote().framebuffer()?;
        Some(self.predictor.overlay(fb))
    }

    /// A new link to the server is up (a reconnect, a resumed session's first): whatever went
    /// out before may have been lost with the old one, so the state goes out again at once (it
    /// also makes mosh-server roam to the new path without waiting for a timer).
    pub fn link_up(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        self.transport.path_changed(now);
        self.after_input(now);
    }

    /// Numbers datagrams from `floor` on, if below it: a relay forwards only numbers above every
    /// one it forwarded under the key (another page's, one from before a reload).
    pub fn raise_next_seq(&mut self, floor: u64) {
        self.transport.raise_next_seq(floor);
    }

    /// Datagrams are at most `mtu` bytes from now on (a new link to the server with its own
    /// limit: the browser silently drops larger ones).
    pub fn set_mtu(&mut self, mtu: usize) {
        self.transport.set_mtu(mtu.clamp(crate::wire::MIN_MTU, crate::wire::DEFAULT_MTU));
    }

    /// The predictor, for its counters and triggers.
    pub fn predictor(&self) -> &Predictor {
        &self.predictor
    }

    /// The predictor, to change its rules (the benchmark's side-by-side rows).
    pub fn predictor_mut(&mut self) -> &mut Predictor {
        &mut self.predictor
    }

    /// Another prediction mode (from the page's settings); what was predicted is dropped.
    pub fn set_predict_config(&mut self, config: PredictConfig) {
        self.predictor.set_config(config);
    }

    /// Starts the quit handshake.
    pub fn shutdown(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        self.transport.start_shutdown(now);
        self.after_input(now);
    }

    /// The next datagram to send to the server.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transport.poll_transmit()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next; `None` once closed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let predictor = self.predictor.poll_timeout().filter(|_| !self.closed);
        match (self.next_wakeup, predictor) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The server's newest state.
    pub fn server_state(&self) -> &S {
        self.transport.remote()
    }

    pub fn server_state_num(&self) -> StateNum {
        self.transport.remote_num()
    }

    pub fn counters(&self) -> &Counters {
        self.transport.counters()
    }

    pub fn srtt(&self) -> Duration {
        self.transport.rtt().srtt()
    }

    /// The smoothed round trip once there was a sample (before, [`srtt`](Self::srtt) is
    /// mosh's initial guess).
    pub fn measured_rtt(&self) -> Option<Duration> {
        let rtt = self.transport.rtt();
        rtt.has_sample().then(|| rtt.srtt())
    }

    pub fn send_interval(&self) -> Duration {
        self.transport.rtt().send_interval()
    }

    /// Why the last datagram was rejected, if one was.
    pub fn last_error(&self) -> Option<&str> {
        self.transport.last_error()
    }

    /// Time since the newest server state arrived (or since the start, before any).
    pub fn since_last_contact(&self, now: Instant) -> Duration {
        let last = if self.transport.remote_num() == StateNum::INITIAL {
            self.started
        } else {
            self.transport.receiver().newest_arrived()
        };
        now.saturating_duration_since(last)
    }

    /// Time since the send time of our newest state the server acknowledged.
    pub fn since_last_reply(&self, now: Instant) -> Duration {
        now.saturating_duration_since(
            self.transport.last_roundtrip_success().unwrap_or(self.started),
        )
    }

    /// Whether the server has sent any state yet.
    pub fn has_heard_server(&self) -> bool {
        self.transport.remote_num() != StateNum::INITIAL
    }

    /// Typed bytes not yet acknowledged by the server, including those still held back.
    pub fn unacked_input(&self) -> usize {
        self.transport.local().key_bytes() + self.held_input.len()
    }

    /// Our newest state number the server acknowledged (mosh's "frame acked").
    pub fn acked_state_num(&self) -> StateNum {
        self.transport.sender().acked_num()
    }

    /// Our last sent state number (mosh's "frame sent").
    pub fn sent_state_num(&self) -> StateNum {
        self.transport.sender().last_sent_num()
    }

    pub fn next_seq(&self) -> u64 {
        self.transport.next_seq()
    }

    pub fn next_fragment_id(&self) -> u64 {
        self.transport.next_fragment_id()
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Judges the predictions against the newest server frame and its echo ack.
    fn judge_predictions(&mut self, now: Instant) {
        let remote = self.transport.remote();
        if let Some(fb) = remote.framebuffer() {
            let (ack, sent) = (remote.echo_ack(), self.sent_state_num());
            let interval = self.send_interval();
            self.predictor.judge(now, fb, ack, sent, interval);
        }
    }

    /// Moves held input into the user stream while less than the cap is outstanding.
    fn release_held_input(&mut self, now: Instant) {
        let outstanding = self.transport.local().key_bytes();
        let room = MAX_UNACKED_INPUT.saturating_sub(outstanding);
        let take = room.min(self.held_input.len());
        if take == 0 {
            return;
        }
        let chunk: Vec<u8> = self.held_input.drain(..take).collect();
        self.transport.update_local(now, |user| user.push_keys(&chunk));
    }

    /// Runs the transport's timers, checks for the end, and recomputes the next wakeup.
    fn after_input(&mut self, now: Instant) {
        self.transport.handle_timeout(now);
        let sender = self.transport.sender();
        let close = if self.transport.remote_num() == StateNum::SHUTDOWN
            && sender.peer_shutdown_ack_sent()
        {
            Some(CloseReason::ServerShutdown)
        } else if sender.shutdown_in_progress() && sender.shutdown_acknowledged() {
            Some(CloseReason::ClientShutdown)
        } else if sender.shutdown_timed_out(now) {
            Some(CloseReason::ShutdownTimedOut)
        } else {
            None
        };
        if let Some(reason) = close {
            self.closed = true;
            self.next_wakeup = None;
            self.events.push_back(Event::Closed(reason));
            return;
        }
        self.next_wakeup = Some(self.transport.poll_timeout(now));
    }
}

impl ServerState for crate::terminal::Complete {
    fn blank(cols: u16, rows: u16) -> Self {
        crate::terminal::Complete::new(cols, rows)
    }

    fn echo_ack(&self) -> StateNum {
        crate::terminal::Complete::echo_ack(self)
    }

    fn framebuffer(&self) -> Option<&Framebuffer> {
        Some(crate::terminal::Complete::framebuffer(self))
    }
}
