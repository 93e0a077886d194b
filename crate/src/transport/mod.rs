//! The State Synchronization Protocol: one endpoint's sender and receiver over the wire layer.
//!
//! [`Transport`] is generic over its own state `L` and the peer's state `R`. The client uses
//! `Transport<UserStream, Screen>`; the simulation runs the same type as a server,
//! `Transport<TestState, UserStream>`, with the other [`Direction`].

mod receiver;
mod rtt;
mod sender;
mod state;
mod user_stream;

use std::collections::VecDeque;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub use receiver::{Outcome, ReceivePolicy, Receiver};
pub use rtt::{RttEstimator, SEND_INTERVAL_MAX, SEND_INTERVAL_MIN};
pub use sender::{ACK_DELAY, ACK_INTERVAL, ACTIVE_RETRY_TIMEOUT, InputPacing, Sender};
pub use state::{ApplyError, SyncState};
pub use user_stream::UserStream;

use crate::time::Instant;
use crate::wire::{
    Direction, Fragmenter, Instruction, Key, PacketLayer, Reassembler, StateNum, TimestampEcho,
};

/// Mosh-client's wait after the first change before sending (gathers a burst of keys).
pub const CLIENT_MIN_DELAY: Duration = Duration::from_millis(1);
/// Mosh-server's wait after a change before sending a frame.
pub const SERVER_MIN_DELAY: Duration = Duration::from_millis(8);
/// Chaff is 0..=16 random bytes (MOSH-PROTOCOL.md 6.7).
const MAX_CHAFF: usize = 16;

/// The steps of receiving one datagram, in order (a step that fails ends the list early).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiveStage {
    /// Authenticated and decrypted (AES-128-OCB3).
    Opened,
    /// The fragments made a whole instruction, inflated (zlib) and decoded (protobuf).
    Assembled,
    /// The instruction's diff was applied to the state it is based on.
    Applied,
}

/// How one endpoint behaves.
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// The direction of the datagrams this endpoint sends.
    pub sending: Direction,
    /// Whole datagram size on the wire (the browser path needs at most 1211).
    pub mtu: usize,
    pub min_delay: Duration,
    pub input_pacing: InputPacing,
    pub receive_policy: ReceivePolicy,
    /// Seeds the chaff; the same seed reproduces a run.
    pub seed: u64,
    /// First datagram sequence number (a browser that reloads must continue, never repeat).
    pub first_seq: u64,
    /// First fragment id. The server keeps the fragments of the last id it saw and aborts on a
    /// conflicting one, so a driver that restarts under the same key continues this too.
    pub first_fragment_id: u64,
}

impl TransportConfig {
    /// Tern's client: keys leave after 1 ms, every retained state is used.
    pub fn client(mtu: usize, seed: u64) -> Self {
        TransportConfig {
            sending: Direction::ToServer,
            mtu,
            min_delay: CLIENT_MIN_DELAY,
            input_pacing: InputPacing::Immediate,
            receive_policy: ReceivePolicy::AllRetained,
            seed,
            first_seq: 0,
            first_fragment_id: 1,
        }
    }

    /// A server with mosh-server's pacing (the simulation's peer).
    pub fn server(mtu: usize, seed: u64) -> Self {
        TransportConfig {
            sending: Direction::ToClient,
            min_delay: SERVER_MIN_DELAY,
            input_pacing: InputPacing::FrameInterval,
            ..TransportConfig::client(mtu, seed)
        }
    }
}

/// Transport counters, for tests, benchmarks and the page's stats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Datagrams that failed authentication (wrong key, corrupted, or not mosh at all).
    pub auth_failures: u64,
    /// Authentic datagrams whose content was malformed (fragment, zlib, protobuf, version).
    pub malformed: u64,
    /// Data instructions sent again under a state number already sent.
    pub retransmits: u64,
    /// Peer instructions that produced a state.
    pub applied: u64,
    /// Of those, applied to a base older than the newest state (a stop-and-wait client drops
    /// these).
    pub applied_to_older_base: u64,
    pub duplicates: u64,
    /// Instructions that arrived before their base and waited for it.
    pub parked: u64,
    pub stale: u64,
    /// Instructions dropped because their base was a state we had received and no longer held.
    /// Reads 0: we keep every state the server may diff from (see [`Outcome::UnknownBase`]).
    pub dropped_unknown_base: u64,
    /// Instructions built on a server state that was lost on the path (see [`Outcome::LostBase`]);
    /// the server's retransmission repairs them. 0 on a loss-free path.
    pub lost_base: u64,
    /// Empty acks based on a state we never got (harmless: their ack was still processed).
    pub acks_on_unknown_base: u64,
    /// Instructions refused by the stop-and-wait policy although their base was held.
    pub refused_older_base: u64,
    pub quenched: u64,
    /// Peer diffs that did not apply.
    pub apply_failures: u64,
}

/// One SSP endpoint. See [`crate::session::ClientSession`] for the calling contract; this type
/// has the same shape (handle_*, poll_*), without the client's policies.
#[derive(Debug)]
pub struct Transport<L: SyncState, R: SyncState> {
    packets: PacketLayer,
    fragmenter: Fragmenter,
    reassembler: Reassembler,
    sender: Sender<L>,
    receiver: Receiver<R>,
    rtt: RttEstimator,
    rng: SmallRng,
    outbox: VecDeque<Vec<u8>>,
    counters: Counters,
    /// Send time of the newest of our states the peer acknowledged (MOSH-PROTOCOL.md 7.5).
    last_roundtrip_success: Option<Instant>,
    /// Why the last datagram was rejected, for diagnostics.
    last_error: Option<String>,
}

impl<L: SyncState, R: SyncState> Transport<L, R> {
    pub fn new(config: &TransportConfig, key: &Key, local: L, remote: R, now: Instant) -> Self {
        Transport {
            packets: PacketLayer::with_next_seq(key, config.sending, config.first_seq),
            fragmenter: Fragmenter::with_next_id(config.mtu, config.first_fragment_id),
            reassembler: Reassembler::default(),
            sender: Sender::new(local, now, config.input_pacing, config.min_delay),
            receiver: Receiver::new(remote, now, config.receive_policy),
            rtt: RttEstimator::default(),
            rng: SmallRng::seed_from_u64(config.seed),
            outbox: VecDeque::new(),
            counters: Counters::default(),
            last_roundtrip_success: None,
            last_error: None,
        }
    }

    /// An endpoint that takes over from an earlier one of the same session (see
    /// [`crate::session::ResumePoint`]): the peer acknowledged our state `local.0` (content
    /// `local.1`), `pending` is our current state, new states are numbered from `next_local_num`;
    /// we hold the peer's state `remote.1` numbered `remote.0` and acknowledge it at once.
    pub fn resumed(
        config: &TransportConfig,
        key: &Key,
        local: (StateNum, L),
        pending: L,
        next_local_num: StateNum,
        remote: (StateNum, R),
        now: Instant,
    ) -> Self {
        let mut t = Transport::new(config, key, local.1.clone(), remote.1.clone(), now);
        t.sender = Sender::resumed(
            local.0,
            local.1,
            pending,
            next_local_num,
            now,
            config.input_pacing,
            config.min_delay,
        );
        t.receiver = Receiver::resumed(remote.1, remote.0, now, config.receive_policy);
        t.sender.set_ack_num(remote.0);
        t
    }

    /// Our current state.
    pub fn local(&self) -> &L {
        self.sender.current()
    }

    /// Changes our state; the change goes out after the minimum delay.
    pub fn update_local(&mut self, now: Instant, change: impl FnOnce(&mut L)) {
        self.sender.update(now, change);
    }

    pub fn sender(&self) -> &Sender<L> {
        &self.sender
    }

    pub fn receiver(&self) -> &Receiver<R> {
        &self.receiver
    }

    /// The peer's newest state.
    pub fn remote(&self) -> &R {
        self.receiver.newest()
    }

    pub fn remote_num(&self) -> StateNum {
        self.receiver.newest_num()
    }

    /// See [`Receiver::take_new_diff`].
    pub fn take_remote_diff(&mut self) -> Vec<u8> {
        self.receiver.take_new_diff()
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    pub fn last_roundtrip_success(&self) -> Option<Instant> {
        self.last_roundtrip_success
    }

    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The next datagram sequence number (persist it with the key; never reuse one).
    pub fn next_seq(&self) -> u64 {
        self.packets.next_seq()
    }

    /// Sends from sequence number `floor` on, if below it (the relay forwards nothing lower).
    pub fn raise_next_seq(&mut self, floor: u64) {
        self.packets.raise_next_seq(floor);
    }

    /// See [`Sender::path_changed`].
    pub fn path_changed(&mut self, now: Instant) {
        self.sender.path_changed(now);
    }

    /// Which peer timestamp the datagrams handled from now on leave to be echoed
    /// ([`TimestampEcho`]; mosh's is the newest).
    pub fn set_timestamp_echo(&mut self, echo: TimestampEcho) {
        self.packets.set_timestamp_echo(echo);
    }

    /// Whole datagrams are at most `mtu` bytes from now on (a link with another limit).
    pub fn set_mtu(&mut self, mtu: usize) {
        self.fragmenter.set_mtu(mtu);
    }

    /// The next fragment id (persist it with the key, like the sequence number).
    pub fn next_fragment_id(&self) -> u64 {
        self.fragmenter.next_id()
    }

    /// Takes one datagram from the peer. Anything malformed is counted and dropped.
    /// Returns what became of the instruction it completed, if any.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) -> Option<Outcome> {
        self.handle_datagram_staged(now, datagram, &mut |_| {})
    }

    /// [`handle_datagram`](Self::handle_datagram), telling `stage` as each step is done, so that
    /// a driver can time them on its own clock (the core reads none).
    pub fn handle_datagram_staged(
        &mut self,
        now: Instant,
        datagram: &[u8],
        stage: &mut dyn FnMut(ReceiveStage),
    ) -> Option<Outcome> {
        self.counters.datagrams_in += 1;
        self.counters.bytes_in += datagram.len() as u64;
        let opened = match self.packets.open(now, datagram) {
            Ok(opened) => opened,
            Err(error) => {
                self.counters.auth_failures += 1;
                self.last_error = Some(error.to_string());
                return None;
            }
        };
        if opened.in_order
            && let Some(sample) = opened.rtt_sample
        {
            self.rtt.on_sample(sample);
        }
        stage(ReceiveStage::Opened);
        let instruction = match self.reassembler.add(&opened.payload) {
            Ok(Some(instruction)) => instruction,
            Ok(None) => return None,
            Err(error) => {
                self.counters.malformed += 1;
                self.last_error = Some(error.to_string());
                return None;
            }
        };
        stage(ReceiveStage::Assembled);
        let outcome = self.receive_instruction(now, instruction);
        stage(ReceiveStage::Applied);
        Some(outcome)
    }

    fn receive_instruction(&mut self, now: Instant, instruction: Instruction) -> Outcome {
        // Acks are processed for every assembled instruction, even duplicates (MOSH-PROTOCOL 6.2).
        if let Some(acked_sent_at) = self.sender.process_ack(instruction.ack_num) {
            self.last_roundtrip_success = Some(acked_sent_at);
        }
        let new_num = instruction.new_num;
        let mut outcome = self.receiver.receive(now, instruction);
        self.count(now, new_num, outcome);
        // Applying one state may be the base that parked instructions were waiting for.
        while let Some((num, unparked)) = self.receiver.next_unparked(now) {
            self.count(now, num, unparked);
            if matches!(unparked, Outcome::Newest { .. }) {
                outcome = unparked;
            }
        }
        outcome
    }

    /// Books one instruction's outcome, and acknowledges a new newest state.
    fn count(&mut self, now: Instant, new_num: StateNum, outcome: Outcome) {
        let counters = &mut self.counters;
        match outcome {
            Outcome::Newest { had_diff, base_was_newest } => {
                counters.applied += 1;
                if !base_was_newest {
                    counters.applied_to_older_base += 1;
                }
                self.sender.set_ack_num(new_num);
                self.sender.remote_heard(now);
                if had_diff {
                    self.sender.set_data_ack();
                }
            }
            Outcome::OutOfOrder => counters.applied += 1,
            Outcome::Duplicate => counters.duplicates += 1,
            Outcome::Parked => counters.parked += 1,
            Outcome::Stale => counters.stale += 1,
            Outcome::UnknownBase => counters.dropped_unknown_base += 1,
            Outcome::LostBase => counters.lost_base += 1,
            Outcome::AckOnUnknownBase => counters.acks_on_unknown_base += 1,
            Outcome::RefusedOlderBase => counters.refused_older_base += 1,
            Outcome::Quenched => counters.quenched += 1,
            Outcome::ApplyFailed => counters.apply_failures += 1,
        }
    }

    /// Lets timers fire: sends what is due into the outbox.
    pub fn handle_timeout(&mut self, now: Instant) {
        let (rto, interval) = (self.rtt.rto(), self.rtt.send_interval());
        let Some(outgoing) = self.sender.poll(now, rto, interval) else {
            return;
        };
        if outgoing.is_retransmission {
            self.counters.retransmits += 1;
        }
        let chaff_len = self.rng.random_range(0..=MAX_CHAFF);
        let chaff = (0..chaff_len).map(|_| self.rng.random()).collect();
        let instruction = Instruction {
            old_num: outgoing.old_num,
            new_num: outgoing.new_num,
            ack_num: self.sender.ack_num(),
            throwaway_num: outgoing.throwaway_num,
            diff: outgoing.diff,
            chaff,
        };
        let fragments = match self.fragmenter.fragment(&instruction) {
            Ok(fragments) => fragments,
            // Only an instruction too large for 32767 fragments ends up here; the session caps
            // outstanding input far below that.
            Err(error) => {
                self.last_error = Some(error.to_string());
                return;
            }
        };
        for fragment in fragments {
            match self.packets.seal(now, &fragment) {
                Ok(datagram) => {
                    self.counters.datagrams_out += 1;
                    self.counters.bytes_out += datagram.len() as u64;
                    self.outbox.push_back(datagram);
                }
                // Only the 63-bit sequence space running out ends up here: nothing can be sent
                // under this key any more.
                Err(error) => self.last_error = Some(error.to_string()),
            }
        }
    }

    /// The next datagram to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.outbox.pop_front()
    }

    /// When [`Transport::handle_timeout`] should next be called.
    pub fn poll_timeout(&mut self, now: Instant) -> Instant {
        self.sender.next_wakeup(now, self.rtt.rto(), self.rtt.send_interval())
    }

    /// Starts the shutdown handshake: every further state is `SHUTDOWN`.
    pub fn start_shutdown(&mut self, now: Instant) {
        self.sender.start_shutdown(now);
    }
}
