//! The SSP sender: which of our states to send, as a diff from which state the peer holds, and when
//! (MOSH-PROTOCOL.md 6.2-6.4 and 6.8).

use std::collections::VecDeque;
use std::time::Duration;

use super::SyncState;
use crate::time::Instant;
use crate::wire::StateNum;

/// An empty ack at least this often keeps the peer's idle timers and "last contact" alive.
pub const ACK_INTERVAL: Duration = Duration::from_millis(3000);
/// Delay of the ack after a non-empty peer diff; also added to the RTO before a retransmission.
pub const ACK_DELAY: Duration = Duration::from_millis(100);
/// Retransmit only while the peer produced a new state within this; also the shutdown limit.
pub const ACTIVE_RETRY_TIMEOUT: Duration = Duration::from_secs(10);
/// Shutdown sends before giving up.
pub const SHUTDOWN_RETRIES: u32 = 16;
/// When more states than this are outstanding, one in the middle is forgotten (mosh's cap).
const SENT_STATES_CAP: usize = 32;
/// Diffs from the acked state shorter than this may be up to `RESEND_SLACK` longer than the
/// optimistic diff and still be preferred: they survive the loss of everything in flight.
const RESEND_SMALL: usize = 1000;
const RESEND_SLACK: usize = 100;

/// How the sender paces a new state of its own.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum InputPacing {
    /// A new state leaves after the minimum delay, whatever the frame interval (Tern's client: a
    /// typed key is never held back; the stock mosh-client holds it up to its send interval).
    Immediate,
    /// A new state waits for the frame interval as well (mosh-server's pacing of screen frames).
    FrameInterval,
}

#[derive(Clone, Debug)]
struct SentState<S> {
    sent_at: Instant,
    num: StateNum,
    state: S,
}

/// An instruction the sender decided to send; the transport encodes and fragments it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub old_num: StateNum,
    pub new_num: StateNum,
    pub throwaway_num: StateNum,
    pub diff: Vec<u8>,
    /// Same state number as the previous send: the peer may already have it.
    pub is_retransmission: bool,
}

/// Mosh's `TransportSender`, with the clock passed in.
#[derive(Debug)]
pub struct Sender<S: SyncState> {
    current: S,
    /// Front: the newest state the peer is known to hold. Back: the last state sent.
    sent: VecDeque<SentState<S>>,
    pacing: InputPacing,
    min_delay: Duration,
    /// When the first change not yet sent was made.
    min_delay_since: Option<Instant>,
    next_ack_at: Instant,
    next_send_at: Option<Instant>,
    /// A non-empty peer diff arrived and is not acknowledged yet.
    data_ack_pending: bool,
    /// The newest peer state received in order (what we acknowledge).
    ack_num: StateNum,
    /// Arrival of the newest in-order peer state; retransmission stops 10 s after it.
    last_heard: Option<Instant>,
    shutdown: Option<Shutdown>,
    /// The `ack_num` of the last instruction sent (to know the peer's shutdown was acknowledged).
    last_ack_sent: Option<StateNum>,
    /// New states are numbered at least this (a resumed sender continues above every number an
    /// earlier incarnation may have sent, so no number names two different states).
    num_floor: StateNum,
}

#[derive(Copy, Clone, Debug)]
struct Shutdown {
    started: Instant,
    tries: u32,
}

impl<S: SyncState> Sender<S> {
    pub fn new(initial: S, now: Instant, pacing: InputPacing, min_delay: Duration) -> Self {
        Sender {
            current: initial.clone(),
            sent: VecDeque::from([SentState {
                sent_at: now,
                num: StateNum::INITIAL,
                state: initial,
            }]),
            pacing,
            min_delay,
            min_delay_since: None,
            next_ack_at: now,
            next_send_at: None,
            data_ack_pending: false,
            ack_num: StateNum::INITIAL,
            last_heard: None,
            shutdown: None,
            last_ack_sent: None,
            num_floor: StateNum::INITIAL,
        }
    }

    /// A sender that takes over from an earlier one of the same session (a page reload): the
    /// peer acknowledged `acked` as `acked_num`; `current` holds what was typed since (sent or
    /// not: it all goes out again, from `acked_num`); new states are numbered from `next_num`.
    pub fn resumed(
        acked_num: StateNum,
        acked: S,
        current: S,
        next_num: StateNum,
        now: Instant,
        pacing: InputPacing,
        min_delay: Duration,
    ) -> Self {
        let mut sender = Sender::new(acked, now, pacing, min_delay);
        if let Some(front) = sender.sent.front_mut() {
            front.num = acked_num;
        }
        sender.num_floor = next_num;
        sender.update(now, |c| *c = current);
        sender
    }

    pub fn current(&self) -> &S {
        &self.current
    }

    /// Changes our state. The change is sent after the minimum delay (see [`InputPacing`]).
    pub fn update(&mut self, now: Instant, change: impl FnOnce(&mut S)) {
        change(&mut self.current);
        if self.min_delay_since.is_none() && self.current != self.back().state {
            self.min_delay_since = Some(now);
        }
    }

    /// The newest of our states the peer acknowledged.
    pub fn acked_num(&self) -> StateNum {
        self.front().num
    }

    /// The acknowledged state itself (the user stream's unacknowledged input is `current` minus
    /// it).
    pub fn acked_state(&self) -> &S {
        &self.front().state
    }

    /// Send time of the newest state the peer acknowledged ("last reply" for the notification bar).
    pub fn acked_sent_at(&self) -> Instant {
        self.front().sent_at
    }

    /// The last state number sent (mosh's "frame sent", an input to prediction).
    pub fn last_sent_num(&self) -> StateNum {
        self.back().num
    }

    pub fn ack_num(&self) -> StateNum {
        self.ack_num
    }

    /// Records the peer's newest in-order state, which we must acknowledge.
    pub fn set_ack_num(&mut self, num: StateNum) {
        self.ack_num = num;
    }

    /// A non-empty peer diff arrived: acknowledge it within [`ACK_DELAY`].
    pub fn set_data_ack(&mut self) {
        self.data_ack_pending = true;
    }

    pub fn remote_heard(&mut self, now: Instant) {
        self.last_heard = Some(now);
    }

    /// The peer acknowledged our state `ack`: forget the states before it. Unknown numbers are
    /// ignored (a state we dropped from the list, or a duplicate). Returns the acked state's send
    /// time when the ack named a state we still hold.
    pub fn process_ack(&mut self, ack: StateNum) -> Option<Instant> {
        let index = self.sent.iter().position(|s| s.num == ack)?;
        self.sent.drain(..index);
        Some(self.front().sent_at)
    }

    /// A new path to the peer opened (what was sent before may never have left): send at once,
    /// as a diff from the acknowledged state, instead of waiting for the retransmission timer.
    pub fn path_changed(&mut self, now: Instant) {
        let long_ago = Instant::ZERO;
        for sent in self.sent.iter_mut().skip(1) {
            sent.sent_at = long_ago;
        }
        self.next_ack_at = now;
        if self.current != self.front().state {
            self.min_delay_since = Some(now);
        }
    }

    pub fn start_shutdown(&mut self, now: Instant) {
        if self.shutdown.is_none() {
            self.shutdown = Some(Shutdown { started: now, tries: 0 });
        }
    }

    pub fn shutdown_in_progress(&self) -> bool {
        self.shutdown.is_some()
    }

    /// The peer acknowledged our shutdown state.
    pub fn shutdown_acknowledged(&self) -> bool {
        self.front().num == StateNum::SHUTDOWN
    }

    pub fn shutdown_timed_out(&self, now: Instant) -> bool {
        self.shutdown.is_some_and(|s| {
            s.tries >= SHUTDOWN_RETRIES
                || now.saturating_duration_since(s.started) >= ACTIVE_RETRY_TIMEOUT
        })
    }

    /// We sent an instruction acknowledging the peer's shutdown state (we may now stop).
    pub fn peer_shutdown_ack_sent(&self) -> bool {
        self.last_ack_sent == Some(StateNum::SHUTDOWN)
    }

    /// When [`Sender::poll`] next has something to do.
    pub fn next_wakeup(&mut self, now: Instant, rto: Duration, send_interval: Duration) -> Instant {
        self.calculate_timers(now, rto, send_interval);
        match self.next_send_at {
            Some(send) => send.min(self.next_ack_at),
            None => self.next_ack_at,
        }
    }

    /// Decides whether to send now, and what. The caller sends the returned instruction at once.
    pub fn poll(
        &mut self,
        now: Instant,
        rto: Duration,
        send_interval: Duration,
    ) -> Option<Outgoing> {
        self.calculate_timers(now, rto, send_interval);
        let send_due = self.next_send_at.is_some_and(|t| now >= t);
        let ack_due = now >= self.next_ack_at;
        if !send_due && !ack_due {
            return None;
        }
        let assumed = self.assumed_receiver_index(now, rto);
        let (base, diff) = self.choose_base(assumed);
        let outgoing = if diff.is_empty() {
            if !ack_due {
                // The state equals what the peer is assumed to hold: nothing to send yet.
                self.next_send_at = None;
                self.min_delay_since = None;
                return None;
            }
            self.empty_ack(now, base)
        } else {
            self.data(now, base, diff)
        };
        self.min_delay_since = None;
        self.data_ack_pending = false;
        self.last_ack_sent = Some(self.ack_num);
        if outgoing.new_num == StateNum::SHUTDOWN
            && let Some(shutdown) = &mut self.shutdown
        {
            shutdown.tries += 1;
        }
        self.next_ack_at = now + ACK_INTERVAL;
        self.next_send_at = None;
        Some(outgoing)
    }

    fn front(&self) -> &SentState<S> {
        // The list is never empty: it starts with state 0 and acks only drop states before the
        // acked one, which stays.
        self.sent.front().expect("sent-state list is never empty")
    }

    fn back(&self) -> &SentState<S> {
        self.sent.back().expect("sent-state list is never empty")
    }

    /// The newest state the peer probably holds: walk forward from the acked state while each later
    /// state was sent less than RTO + ACK_DELAY ago (so is probably not lost yet).
    fn assumed_receiver_index(&self, now: Instant, rto: Duration) -> usize {
        let mut assumed = 0;
        for (index, sent) in self.sent.iter().enumerate().skip(1) {
            if now.saturating_duration_since(sent.sent_at) < rto + ACK_DELAY {
                assumed = index;
            } else {
                break;
            }
        }
        assumed
    }

    /// The diff to send and the state number it is based on: from the assumed state, or from the
    /// acked one when that costs little more (a diff from the acked state survives any loss).
    fn choose_base(&self, assumed: usize) -> (StateNum, Vec<u8>) {
        let optimistic = &self.sent[assumed];
        let diff = self.current.diff_from(&optimistic.state);
        if assumed == 0 {
            return (optimistic.num, diff);
        }
        let front = self.front();
        let safe = self.current.diff_from(&front.state);
        if safe.len() <= diff.len()
            || (safe.len() < RESEND_SMALL && safe.len() - diff.len() < RESEND_SLACK)
        {
            (front.num, safe)
        } else {
            (optimistic.num, diff)
        }
    }

    fn empty_ack(&mut self, now: Instant, base: StateNum) -> Outgoing {
        let new_num = if self.shutdown.is_some() { StateNum::SHUTDOWN } else { self.next_num() };
        self.record_sent(now, new_num);
        Outgoing {
            old_num: base,
            new_num,
            throwaway_num: self.front().num,
            diff: Vec::new(),
            is_retransmission: false,
        }
    }

    fn data(&mut self, now: Instant, base: StateNum, diff: Vec<u8>) -> Outgoing {
        let is_retransmission = self.current == self.back().state;
        let new_num = if self.shutdown.is_some() {
            StateNum::SHUTDOWN
        } else if is_retransmission {
            self.back().num
        } else {
            self.next_num()
        };
        self.record_sent(now, new_num);
        Outgoing {
            old_num: base,
            new_num,
            throwaway_num: self.front().num,
            diff,
            is_retransmission,
        }
    }

    fn next_num(&self) -> StateNum {
        StateNum(self.back().num.0.saturating_add(1).max(self.num_floor.0).min(u64::MAX - 1))
    }

    /// Notes that `current` went out as `num`.
    fn record_sent(&mut self, now: Instant, num: StateNum) {
        if num == self.back().num {
            // Re-sending the last state (or the shutdown state again): refresh its send time so
            // it counts as in flight again.
            if let Some(back) = self.sent.back_mut() {
                back.sent_at = now;
            }
            return;
        }
        let state = self.current.clone();
        self.sent.push_back(SentState { sent_at: now, num, state });
        if self.sent.len() > SENT_STATES_CAP {
            // Forget one state in the middle: acks for it are then ignored, as mosh does.
            let middle = self.sent.len() - 16;
            self.sent.remove(middle);
        }
    }

    /// Mosh's `calculate_timers`, plus [`InputPacing`].
    fn calculate_timers(&mut self, now: Instant, rto: Duration, send_interval: Duration) {
        self.rationalize();
        if self.data_ack_pending && self.next_ack_at > now + ACK_DELAY {
            self.next_ack_at = now + ACK_DELAY;
        }
        let assumed = self.assumed_receiver_index(now, rto);
        let back_sent_at = self.back().sent_at;
        let peer_active = self.last_heard.is_some_and(|t| now < t + ACTIVE_RETRY_TIMEOUT);
        self.next_send_at = if self.current != self.back().state {
            let since = *self.min_delay_since.get_or_insert(now);
            let after_min_delay = since + self.min_delay;
            Some(match self.pacing {
                InputPacing::Immediate => after_min_delay,
                InputPacing::FrameInterval => after_min_delay.max(back_sent_at + send_interval),
            })
        } else if self.current != self.sent[assumed].state && peer_active {
            let frame = back_sent_at + send_interval;
            Some(self.min_delay_since.map_or(frame, |since| frame.max(since + self.min_delay)))
        } else if self.current != self.front().state && peer_active {
            Some(back_sent_at + rto + ACK_DELAY)
        } else {
            None
        };
        if self.shutdown.is_some() || self.ack_num == StateNum::SHUTDOWN {
            // Shutting down, or answering the peer's shutdown: at frame rate.
            self.next_ack_at = self.back().sent_at + send_interval;
        }
    }

    /// Drops from every kept state what the acknowledged state already holds.
    fn rationalize(&mut self) {
        let known = self.front().state.clone();
        self.current.subtract(&known);
        for sent in &mut self.sent {
            sent.state.subtract(&known);
        }
    }
}
