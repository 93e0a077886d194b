//! Test support: a deterministic two-party simulation of the core against a Rust SSP server over a
//! simulated link, with a simulated clock. Seeds reproduce runs.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tern::session::{ClientSession, Event, HostLog, ServerState, SessionConfig};
use tern::time::Instant;
use tern::transport::{Transport, TransportConfig, UserStream};
use tern::wire::{self, Key, TimestampEcho, UserEvent};

/// One direction of the simulated link.
#[derive(Clone, Debug, Default)]
pub struct LinkConfig {
    pub delay: Duration,
    /// Extra uniform random delay in 0..jitter; reorders datagrams.
    pub jitter: Duration,
    pub loss: f64,
    pub duplicate: f64,
}

impl LinkConfig {
    pub fn delay(ms: u64) -> Self {
        LinkConfig { delay: Duration::from_millis(ms), ..Default::default() }
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    order: u64,
    to_server: bool,
    bytes: Vec<u8>,
}

/// A datagram that crossed the link, for tests that inspect traffic.
#[derive(Clone, Debug)]
pub struct Sent {
    pub at: Instant,
    pub to_server: bool,
    pub bytes: Vec<u8>,
}

/// The client session and a simulated server, joined by a simulated lossy link.
pub struct Pair {
    pub now: Instant,
    pub client: ClientSession<HostLog>,
    pub server: Transport<HostLog, UserStream>,
    pub up: LinkConfig,
    pub down: LinkConfig,
    /// Everything the server's pty received, in order.
    pub server_input: Vec<u8>,
    pub server_resizes: Vec<(u16, u16)>,
    pub client_events: Vec<Event>,
    /// Every datagram put on the link (before loss), in send order.
    pub log: Vec<Sent>,
    /// Server datagrams held on the way and handed to the client together after this long, the
    /// way tern-relay holds them for a page that asks (`ClientMessage::Hold`), with the echo the
    /// client is told to use for such a batch. `None`: each as it comes (and what is held goes).
    pub down_hold: Option<(Duration, TimestampEcho)>,
    /// Batches handed over so far, and the datagrams in them.
    pub held_batches: u64,
    pub held_datagrams: u64,
    held: Vec<Vec<u8>>,
    held_since: Option<Instant>,
    server_heard_client: bool,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    rng: SmallRng,
    pub key: Key,
}

pub fn test_key() -> Key {
    "WLThFE98+opDlEMyexqWsA".parse().expect("valid key")
}

impl Pair {
    pub fn new(seed: u64, up: LinkConfig, down: LinkConfig) -> Pair {
        Pair::with_mtu(seed, up, down, 1252)
    }

    pub fn with_mtu(seed: u64, up: LinkConfig, down: LinkConfig, mtu: usize) -> Pair {
        let key = test_key();
        let now = Instant::from_millis(1_000_000);
        let mut config = SessionConfig::new(key.clone(), 80, 24);
        config.seed = seed;
        config.mtu = mtu;
        let client = ClientSession::new(config, now);
        let server_config = TransportConfig::server(mtu, seed ^ 0x5eed);
        let server = Transport::new(
            &server_config,
            &key,
            HostLog::blank(80, 24),
            UserStream::default(),
            now,
        );
        let mut pair = Pair {
            now,
            client,
            server,
            up,
            down,
            server_input: Vec::new(),
            server_resizes: Vec::new(),
            client_events: Vec::new(),
            log: Vec::new(),
            down_hold: None,
            held_batches: 0,
            held_datagrams: 0,
            held: Vec::new(),
            held_since: None,
            server_heard_client: false,
            in_flight: BinaryHeap::new(),
            order: 0,
            rng: SmallRng::seed_from_u64(seed),
            key,
        };
        pair.drain();
        pair
    }

    pub fn type_bytes(&mut self, bytes: &[u8]) {
        self.client.handle_input(self.now, bytes);
        self.drain();
    }

    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.client.handle_resize(self.now, cols, rows);
        self.drain();
    }

    /// The next instant anything happens.
    fn next_event(&mut self) -> Option<Instant> {
        let link = self.in_flight.peek().map(|Reverse(p)| p.at);
        let client = self.client.poll_timeout();
        let server = Some(self.server.poll_timeout(self.now));
        [link, client, server, self.held_due()].into_iter().flatten().min()
    }

    /// When what is held goes to the client.
    fn held_due(&self) -> Option<Instant> {
        let since = self.held_since?;
        Some(match self.down_hold {
            Some((hold, _)) => since + hold,
            None => self.now,
        })
    }

    /// Advances the simulated clock by `duration`, delivering and timing out as due.
    pub fn run_for(&mut self, duration: Duration) {
        let end = self.now + duration;
        self.run_until_time(end, |_| false);
    }

    /// Runs until `done` holds (checked after every step) or `limit` simulated time passes.
    pub fn run_until(&mut self, limit: Duration, done: impl FnMut(&Pair) -> bool) -> bool {
        let end = self.now + limit;
        self.run_until_time(end, done)
    }

    fn run_until_time(&mut self, end: Instant, mut done: impl FnMut(&Pair) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            let next = self.next_event().unwrap_or(end).max(self.now);
            if next > end {
                self.now = end;
                return done(self);
            }
            self.now = next;
            self.step();
        }
    }

    fn step(&mut self) {
        let now = self.now;
        while self.in_flight.peek().is_some_and(|Reverse(p)| p.at <= now) {
            let Reverse(packet) = self.in_flight.pop().expect("peeked");
            if packet.to_server {
                self.server_heard_client = true;
                self.server.handle_datagram(now, &packet.bytes);
                self.serve_new_input();
            } else if self.down_hold.is_some() {
                self.held_since.get_or_insert(now);
                self.held.push(packet.bytes);
            } else {
                self.release_held();
                self.client.handle_datagram(now, &packet.bytes);
            }
        }
        if self.held_due().is_some_and(|due| due <= now) {
            self.release_held();
        }
        self.client.handle_timeout(now);
        self.server.handle_timeout(now);
        self.drain();
    }

    /// Hands what is held to the client as one batch.
    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let echo = self.down_hold.map_or(TimestampEcho::Newest, |(_, echo)| echo);
        let batch = std::mem::take(&mut self.held);
        self.held_since = None;
        self.held_batches += 1;
        self.held_datagrams += batch.len() as u64;
        self.client.handle_held_datagrams(self.now, &batch, echo, &mut |_| {});
    }

    /// The simulated server's pty: applies new user events once, echoes keys to its screen and
    /// acknowledges the echo (as mosh-server's echo_ack, without the 50 ms wait).
    fn serve_new_input(&mut self) {
        let diff = self.server.take_remote_diff();
        if diff.is_empty() {
            return;
        }
        let events = wire::decode_user_message(&diff).expect("client sends valid user messages");
        let echoed = self.server.remote_num();
        let mut output = Vec::new();
        for event in events {
            match event {
                UserEvent::Keys(keys) => {
                    self.server_input.extend_from_slice(&keys);
                    output.extend_from_slice(&keys);
                }
                UserEvent::Resize { cols, rows } => self.server_resizes.push((cols, rows)),
            }
        }
        let last_size = self.server_resizes.last().copied();
        self.server.update_local(self.now, |screen| {
            screen.push_bytes(&output);
            if let Some((cols, rows)) = last_size {
                screen.set_size(cols, rows);
            }
            screen.set_echo_ack(echoed);
        });
    }

    /// Moves every pending transmission onto the link.
    fn drain(&mut self) {
        while let Some(datagram) = self.client.poll_transmit() {
            self.send(true, datagram);
        }
        while let Some(datagram) = self.server.poll_transmit() {
            // mosh-server sends nothing before it has heard the client (MOSH-PROTOCOL.md 2.6).
            if self.server_heard_client {
                self.send(false, datagram);
            }
        }
        while let Some(event) = self.client.poll_event() {
            self.client_events.push(event);
        }
    }

    fn send(&mut self, to_server: bool, bytes: Vec<u8>) {
        self.log.push(Sent { at: self.now, to_server, bytes: bytes.clone() });
        let config = if to_server { &self.up } else { &self.down };
        let copies = if self.rng.random_bool(config.loss) {
            0
        } else if self.rng.random_bool(config.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let jitter = if config.jitter.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_micros(self.rng.random_range(0..config.jitter.as_micros() as u64))
            };
            let at = self.now + config.delay + jitter;
            self.order += 1;
            self.in_flight.push(Reverse(InFlight {
                at,
                order: self.order,
                to_server,
                bytes: bytes.clone(),
            }));
        }
    }

    /// Whether the client's view of the server state equals the server's own.
    pub fn converged(&self) -> bool {
        self.client.server_state() == self.server.local()
            && self.client.unacked_input() == 0
            && self.server_input_len_matches()
    }

    fn server_input_len_matches(&self) -> bool {
        self.client.server_state().bytes().len() == self.server_input.len()
    }
}

/// Decodes a client datagram as the server would (each datagram alone; multi-fragment
/// instructions yield `None` until their last fragment).
pub struct ServerEyes {
    packets: wire::PacketLayer,
    reassembler: wire::Reassembler,
}

impl ServerEyes {
    pub fn new(key: &Key) -> Self {
        ServerEyes {
            packets: wire::PacketLayer::new(key, wire::Direction::ToClient),
            reassembler: wire::Reassembler::default(),
        }
    }

    pub fn instruction(&mut self, at: Instant, datagram: &[u8]) -> Option<wire::Instruction> {
        let opened = self.packets.open(at, datagram).ok()?;
        self.reassembler.add(&opened.payload).ok().flatten()
    }
}
