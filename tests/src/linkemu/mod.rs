//! Userspace UDP link emulator: sits between a UDP client and server and applies delay, jitter,
//! loss, a rate limit with a bottleneck queue, and duplication, per direction, from a seed.
//!
//! ```text
//!  client ──> listen socket ──[up shaper]──> release heap ──> flow socket (one per client) ──> target
//!  client <── listen socket <──[release heap]<──[down shaper]<── flow socket <────────────────── target
//! ```
//!
//! The kernel here has no netem, so delay, loss and a bottleneck queue need this proxy (see
//! `docs/LINK-EMULATOR.md`). Each client source address gets its own upstream socket, so the server
//! sees distinct flows and a client that reconnects from a new port shows up as a roaming client.
//! It forwards only to the configured target, and accepts on a flow socket only the target's
//! datagrams (the socket is connected).
//!
//! The link model itself (shaper, release heap, scheduler threads, counters, tap) lives in
//! `engine.rs`, shared with the TUN link (`tun/`), which carries any IP traffic, TCP included,
//! through the same model inside a network namespace.
//!
//! Threads, not tokio: tokio's timer wheel has 1 ms resolution and rounds sleeps up to the next
//! millisecond, while a release scheduler must hit sub-millisecond times on loopback. A thread per
//! direction waiting on a condvar with the exact time to the next release wakes within tens of
//! microseconds (futex timeouts are nanosecond based, minus timer slack). The flows are few (one
//! per client), so one receiving thread per socket costs nothing that matters.

mod engine;
mod parse;
mod shaper;
mod tap;
pub mod tun;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use parse::{ParseError, parse_bytes, parse_duration, parse_probability, parse_rate};
pub use shaper::{Admission, PACKET_OVERHEAD_BYTES, Shaper, serialization_time};
pub use tap::{Fate, Tap, TapLog, TapRecord};

use engine::{Engine, Framing, bump};

/// How often blocked receive calls look at the stop flag. Bounds how long `stop` takes.
const STOP_POLL: Duration = Duration::from_millis(20);
/// Socket buffers asked of the kernel (it may cap them at `net.core.rmem_max`): bursts into the
/// emulator must be dropped by the emulated queue, not by the kernel.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// Largest UDP payload.
const MAX_DATAGRAM: usize = 65_535;

/// One direction of the emulated link. `Default` is a perfect link: no delay, loss or limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectionConfig {
    /// Fixed one-way delay added to every datagram after the bottleneck.
    pub delay: Duration,
    /// Extra random delay, uniform in `[0, jitter]`, drawn per datagram.
    pub jitter: Duration,
    /// Whether jitter may reorder datagrams. When false a datagram is never released before one
    /// that arrived earlier (its jittered time is raised to the previous release time).
    pub reorder: bool,
    /// Probability that a datagram is dropped on arrival, in `[0, 1]`.
    pub loss: f64,
    /// Probability that a datagram is sent twice, in `[0, 1]`; the copy uses the queue too.
    pub duplicate: f64,
    /// Bottleneck rate in bits per second, counting [`PACKET_OVERHEAD_BYTES`] per datagram. `None`:
    /// unlimited, and then nothing queues.
    pub rate_bps: Option<u64>,
    /// Drop-tail when the bytes queued at the bottleneck (counting the one being sent) would exceed
    /// this. Only meaningful with a rate.
    pub queue_bytes: Option<usize>,
    /// Drop-tail when a datagram would wait longer than this before its serialization starts.
    /// Only meaningful with a rate.
    pub queue_delay: Option<Duration>,
}

impl DirectionConfig {
    fn validate(&self, which: &str) -> Result<(), LinkError> {
        let bad = |msg: String| Err(LinkError::InvalidConfig(format!("{which}: {msg}")));
        if !(0.0..=1.0).contains(&self.loss) {
            return bad(format!("loss {} is not in [0, 1]", self.loss));
        }
        if !(0.0..=1.0).contains(&self.duplicate) {
            return bad(format!("duplicate {} is not in [0, 1]", self.duplicate));
        }
        if self.rate_bps == Some(0) {
            return bad("rate 0 would never send; use None for unlimited".into());
        }
        Ok(())
    }
}

/// The whole emulator's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Where clients send to (port 0 picks a free port; see [`LinkEmulator::local_addr`]).
    pub listen: SocketAddr,
    /// The server every flow is forwarded to; the only address this emulator sends to upstream.
    pub target: SocketAddr,
    /// Client to server.
    pub up: DirectionConfig,
    /// Server to client.
    pub down: DirectionConfig,
    /// Seed of every random draw; `None` picks one from the clock (read it back with
    /// [`LinkEmulator::seed`] to reproduce a run).
    pub seed: Option<u64>,
    /// Most client flows at once; datagrams from further clients are dropped and counted.
    pub max_flows: usize,
}

impl LinkConfig {
    /// A perfect link from `listen` to `target`, 64 flows at most, seed from the clock.
    pub fn new(listen: SocketAddr, target: SocketAddr) -> Self {
        Self {
            listen,
            target,
            up: DirectionConfig::default(),
            down: DirectionConfig::default(),
            seed: None,
            max_flows: 64,
        }
    }
}

/// What went wrong starting or reconfiguring the emulator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// A parameter out of range; the message names it.
    #[error("invalid link configuration: {0}")]
    InvalidConfig(String),
    /// A socket or thread could not be set up.
    #[error("link emulator I/O: {0}")]
    Io(#[from] io::Error),
}

/// Which way through the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

/// Counters of one direction, read with [`LinkEmulator::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Datagrams that reached the emulator.
    pub received: u64,
    /// Datagrams sent on (duplicates included).
    pub forwarded: u64,
    /// Payload bytes sent on.
    pub forwarded_bytes: u64,
    /// Dropped by the random loss draw.
    pub dropped_loss: u64,
    /// Dropped at the tail of the bottleneck queue (duplicates included).
    pub dropped_queue: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Sends the OS refused (for example the server's port closed).
    pub send_errors: u64,
}

/// A snapshot of all counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Client to server.
    pub up: DirectionStats,
    /// Server to client.
    pub down: DirectionStats,
    /// Client flows opened so far.
    pub flows_opened: u64,
    /// Datagrams dropped because `max_flows` flows were open.
    pub flows_rejected: u64,
}

/// One client flow: the client's address and the local address of its upstream socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowInfo {
    /// Where the client sends from.
    pub client: SocketAddr,
    /// The emulator's socket for this client, as the server sees it.
    pub upstream: SocketAddr,
}

/// Where a released datagram goes.
#[derive(Debug)]
enum Route {
    /// Up: out of this flow's connected socket to the target.
    Upstream(Arc<UdpSocket>),
    /// Down: out of the listen socket to this client.
    Client(SocketAddr),
}

#[derive(Debug)]
struct Shared {
    engine: Engine<Route>,
    listen: UdpSocket,
    target: SocketAddr,
    flows: Mutex<HashMap<SocketAddr, FlowInfo>>,
    flows_opened: AtomicU64,
    flows_rejected: AtomicU64,
    max_flows: usize,
    /// Threads of the flows opened after start, joined on stop.
    flow_threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.engine.stopping()
    }

    /// Sends one released datagram on its way.
    fn send(&self, route: &Route, data: &[u8]) -> io::Result<usize> {
        match route {
            Route::Upstream(socket) => socket.send(data),
            Route::Client(client) => self.listen.send_to(data, client),
        }
    }
}

/// A running emulator. Dropping it stops every thread and closes every socket.
#[derive(Debug)]
pub struct LinkEmulator {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    seed: u64,
    threads: Vec<JoinHandle<()>>,
}

impl LinkEmulator {
    /// Binds `config.listen` and starts forwarding to `config.target`.
    pub fn start(config: LinkConfig) -> Result<Self, LinkError> {
        let seed = config.seed.unwrap_or_else(seed_from_clock);
        let engine = Engine::new(config.up, config.down, seed, Framing::UdpPayload)?;
        let listen = bind_udp(config.listen)?;
        listen.set_read_timeout(Some(STOP_POLL))?;
        let local_addr = listen.local_addr()?;
        let shared = Arc::new(Shared {
            engine,
            listen,
            target: config.target,
            flows: Mutex::new(HashMap::new()),
            flows_opened: AtomicU64::new(0),
            flows_rejected: AtomicU64::new(0),
            max_flows: config.max_flows,
            flow_threads: Mutex::new(Vec::new()),
        });
        let mut emulator = Self { shared, local_addr, seed, threads: Vec::new() };
        for (name, dir) in [("linkemu-up", Dir::Up), ("linkemu-down", Dir::Down)] {
            let shared = Arc::clone(&emulator.shared);
            let release = move || shared.engine.release_loop(dir, |r, data| shared.send(r, data));
            emulator.threads.push(spawn(name, release)?);
        }
        let shared = Arc::clone(&emulator.shared);
        emulator.threads.push(spawn("linkemu-listen", move || listen_loop(shared))?);
        Ok(emulator)
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The seed in use; put it in `LinkConfig::seed` to replay the same random draws.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> LinkStats {
        LinkStats {
            up: self.shared.engine.stats(Dir::Up),
            down: self.shared.engine.stats(Dir::Down),
            flows_opened: self.shared.flows_opened.load(Ordering::Relaxed),
            flows_rejected: self.shared.flows_rejected.load(Ordering::Relaxed),
        }
    }

    /// The client flows seen so far.
    pub fn flows(&self) -> Vec<FlowInfo> {
        let flows = self.shared.flows.lock().unwrap_or_else(|e| e.into_inner());
        flows.values().copied().collect()
    }

    /// The configuration of one direction now.
    pub fn config(&self, dir: Dir) -> DirectionConfig {
        self.shared.engine.config(dir)
    }

    /// Changes one direction's behaviour for datagrams arriving from now on; datagrams already
    /// queued keep their release times, and the bottleneck's backlog carries over.
    pub fn set_config(&self, dir: Dir, config: DirectionConfig) -> Result<(), LinkError> {
        self.shared.engine.set_config(dir, config)
    }

    /// Hands every datagram from now on, with its timestamps and fate, to `tap` (`None` removes
    /// it). Benchmarks use this to time protocol events on both sides of the link.
    pub fn set_tap(&self, tap: Option<Arc<dyn Tap>>) {
        self.shared.engine.set_tap(tap);
    }

    /// Stops and joins every thread (what dropping does).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.engine.request_stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let flow_threads: Vec<_> = {
            let mut v = self.shared.flow_threads.lock().unwrap_or_else(|e| e.into_inner());
            v.drain(..).collect()
        };
        for t in flow_threads {
            let _ = t.join();
        }
    }
}

impl Drop for LinkEmulator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.to_owned()).spawn(body)
}

fn seed_from_clock() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

/// A UDP socket bound to `addr` with large kernel buffers (bursts are the emulator's to drop, not
/// the kernel's); tests' own peers use it too.
pub fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // Best effort: the kernel caps these at its own maximum.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// The local address for a flow socket: loopback for a loopback target, else any address of the
/// target's family.
fn upstream_bind_addr(target: SocketAddr) -> SocketAddr {
    let ip = match (target.ip(), target.ip().is_loopback()) {
        (IpAddr::V4(_), true) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        (IpAddr::V6(_), true) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        (IpAddr::V4(_), false) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        (IpAddr::V6(_), false) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

/// Errors from a receive that only mean "nothing yet" or a peer's ICMP reply to an earlier send.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
    )
}

/// Receives from clients, opens a flow per new client address, feeds the up direction.
fn listen_loop(shared: Arc<Shared>) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut sockets: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
    while !shared.stopping() {
        let (len, client) = match shared.listen.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e) if is_transient(&e) => continue,
            Err(e) => {
                eprintln!("linkemu: listen socket failed, stopping: {e}");
                return;
            }
        };
        let socket = match sockets.get(&client) {
            Some(s) => Arc::clone(s),
            None => match open_flow(&shared, client, sockets.len()) {
                Some(s) => {
                    sockets.insert(client, Arc::clone(&s));
                    s
                }
                None => continue,
            },
        };
        let route = || Route::Upstream(Arc::clone(&socket));
        shared.engine.arrive(Dir::Up, &buf[..len], route);
    }
}

/// Opens the upstream socket and receiving thread of a new client; `None` drops the datagram.
fn open_flow(shared: &Arc<Shared>, client: SocketAddr, open: usize) -> Option<Arc<UdpSocket>> {
    if open >= shared.max_flows {
        bump(&shared.flows_rejected, 1);
        return None;
    }
    let setup = || -> io::Result<(Arc<UdpSocket>, JoinHandle<()>)> {
        let socket = bind_udp(upstream_bind_addr(shared.target))?;
        socket.connect(shared.target)?;
        socket.set_read_timeout(Some(STOP_POLL))?;
        let socket = Arc::new(socket);
        let (s, sh) = (Arc::clone(&socket), Arc::clone(shared));
        let thread = spawn("linkemu-flow", move || flow_loop(sh, s, client))?;
        Ok((socket, thread))
    };
    match setup() {
        Ok((socket, thread)) => {
            let upstream = socket.local_addr().unwrap_or(shared.target);
            let mut flows = shared.flows.lock().unwrap_or_else(|e| e.into_inner());
            flows.insert(client, FlowInfo { client, upstream });
            drop(flows);
            shared.flow_threads.lock().unwrap_or_else(|e| e.into_inner()).push(thread);
            bump(&shared.flows_opened, 1);
            Some(socket)
        }
        Err(e) => {
            eprintln!("linkemu: cannot open a flow for {client}: {e}");
            bump(&shared.flows_rejected, 1);
            None
        }
    }
}

/// Receives the server's datagrams for one client and feeds the down direction.
fn flow_loop(shared: Arc<Shared>, socket: Arc<UdpSocket>, client: SocketAddr) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !shared.stopping() {
        match socket.recv(&mut buf) {
            Ok(len) => shared.engine.arrive(Dir::Down, &buf[..len], || Route::Client(client)),
            Err(e) if is_transient(&e) => {}
            Err(e) => {
                eprintln!("linkemu: flow socket for {client} failed: {e}");
                return;
            }
        }
    }
}
