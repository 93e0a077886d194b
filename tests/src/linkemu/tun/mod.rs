//! The link emulator for any IPv4 traffic, TCP included: a "reflecting NAT" over one TUN device,
//! for tests that run in a network namespace of their own.
//!
//! The UDP proxy cannot carry TCP, and the kernel here has no netem, so this mode puts the
//! kernel's own TCP (retransmission, congestion control, head-of-line blocking) behind the same
//! shaper. The caller runs it inside a fresh network namespace (`unshare -n`); it creates a TUN
//! device with the subnet's `.1` as its address and reflects packets for `.2` and `.3` back into
//! the kernel after each direction's delay, loss and rate:
//!
//! ```text
//!  client socket ─ host:X → far:P ──> TUN ─[up shaper]──> mirror:X → host:P ─> TUN ─> server socket
//!  client socket <─ far:P → host:X ─ TUN <─[down shaper]─ host:P → mirror:X <─ TUN <─ server socket
//! ```
//!
//! So a client that connects to `far:P` reaches a server listening on port P (on `0.0.0.0` or the
//! host address) through the emulated link both ways. See `packet.rs` for the rewriting and
//! `docs/LINK-EMULATOR.md` for the limits.

mod device;
mod packet;

use std::io;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

pub use device::ensure_private_netns;
pub use packet::{Reflection, Unreflected, internet_checksum};

use super::engine::{Engine, Framing, bump};
use super::{
    Dir, DirectionConfig, DirectionStats, LinkError, STOP_POLL, Tap, seed_from_clock, spawn,
};
use device::TunDevice;

/// Largest packet a TUN read can return.
const MAX_PACKET: usize = 65_535;

/// The subnet the reflector's addresses come from: the device (`host`) is `.1`, `far` is `.2`,
/// `mirror` is `.3` (offsets from the network address). Reads and prints as `10.77.0.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunNet {
    network: Ipv4Addr,
    prefix: u8,
}

impl TunNet {
    /// `network/prefix`; the prefix leaves room for the three addresses (at most /30) and the
    /// host bits of `network` are zero.
    pub fn new(network: Ipv4Addr, prefix: u8) -> Result<Self, LinkError> {
        let bad = |msg: String| Err(LinkError::InvalidConfig(format!("TUN net: {msg}")));
        if !(1..=30).contains(&prefix) {
            return bad(format!("prefix /{prefix} must be /1 to /30 to hold .1, .2 and .3"));
        }
        let host_bits = u32::MAX >> prefix;
        if u32::from(network) & host_bits != 0 {
            return bad(format!("{network}/{prefix} has host bits set"));
        }
        Ok(Self { network, prefix })
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The addresses of the reflection in this subnet.
    pub fn reflection(&self) -> Reflection {
        let at = |offset: u32| Ipv4Addr::from(u32::from(self.network) + offset);
        Reflection { host: at(1), far: at(2), mirror: at(3) }
    }
}

impl Default for TunNet {
    /// `10.77.0.0/24`: inside a namespace of its own any subnet works; this one is unlikely to
    /// collide with anything a reader knows.
    fn default() -> Self {
        Self { network: Ipv4Addr::new(10, 77, 0, 0), prefix: 24 }
    }
}

impl std::str::FromStr for TunNet {
    type Err = LinkError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad =
            || LinkError::InvalidConfig(format!("bad TUN net {text:?}: expected 10.77.0.0/24"));
        let (network, prefix) = text.trim().split_once('/').ok_or_else(bad)?;
        Self::new(network.parse().map_err(|_| bad())?, prefix.parse().map_err(|_| bad())?)
    }
}

impl std::fmt::Display for TunNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// The TUN link's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct TunConfig {
    /// Interface name (at most 15 bytes; `%d` lets the kernel number it).
    pub device: String,
    pub net: TunNet,
    /// Client (connecting to `far`) to server.
    pub up: DirectionConfig,
    /// Server to client.
    pub down: DirectionConfig,
    /// Seed of every random draw; `None` picks one from the clock.
    pub seed: Option<u64>,
}

impl Default for TunConfig {
    /// A perfect link on `tern0`, `10.77.0.0/24`, seed from the clock.
    fn default() -> Self {
        Self {
            device: "tern0".into(),
            net: TunNet::default(),
            up: DirectionConfig::default(),
            down: DirectionConfig::default(),
            seed: None,
        }
    }
}

/// Counters of the TUN link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunStats {
    /// Client to server: whole IP packets (`forwarded_bytes` counts their headers).
    pub up: DirectionStats,
    /// Server to client.
    pub down: DirectionStats,
    /// Packets out of the device that were not reflected and so dropped (see [`Unreflected`]).
    pub unreflected: u64,
}

#[derive(Debug)]
struct Shared {
    engine: Engine<()>,
    device: TunDevice,
    reflection: Reflection,
    unreflected: AtomicU64,
}

/// A running TUN link. Dropping it stops its threads and removes the device.
#[derive(Debug)]
pub struct TunLink {
    shared: Arc<Shared>,
    seed: u64,
    threads: Vec<JoinHandle<()>>,
}

impl TunLink {
    /// Creates and configures the device in the current network namespace (refusing the
    /// machine's own, see [`ensure_private_netns`]) and starts reflecting.
    pub fn start(config: TunConfig) -> Result<Self, LinkError> {
        let seed = config.seed.unwrap_or_else(seed_from_clock);
        let engine = Engine::new(config.up, config.down, seed, Framing::IpPacket)?;
        ensure_private_netns()?;
        let reflection = config.net.reflection();
        let device = TunDevice::create(&config.device)?;
        device.configure(reflection.host, config.net.prefix())?;
        let shared =
            Arc::new(Shared { engine, device, reflection, unreflected: AtomicU64::new(0) });
        let mut link = Self { shared, seed, threads: Vec::new() };
        for (name, dir) in [("linkemu-tun-up", Dir::Up), ("linkemu-tun-down", Dir::Down)] {
            let shared = Arc::clone(&link.shared);
            let release =
                move || shared.engine.release_loop(dir, |(), packet| shared.device.send(packet));
            link.threads.push(spawn(name, release)?);
        }
        let shared = Arc::clone(&link.shared);
        link.threads.push(spawn("linkemu-tun-read", move || read_loop(&shared))?);
        Ok(link)
    }

    /// The addresses: connect to `far` to reach a server on this namespace through the link.
    pub fn reflection(&self) -> Reflection {
        self.shared.reflection
    }

    /// The interface name of the device.
    pub fn device_name(&self) -> &str {
        self.shared.device.name()
    }

    /// The seed in use; put it in `TunConfig::seed` to replay the same random draws.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> TunStats {
        TunStats {
            up: self.shared.engine.stats(Dir::Up),
            down: self.shared.engine.stats(Dir::Down),
            unreflected: self.shared.unreflected.load(Ordering::Relaxed),
        }
    }

    /// The configuration of one direction now.
    pub fn config(&self, dir: Dir) -> DirectionConfig {
        self.shared.engine.config(dir)
    }

    /// Changes one direction for packets arriving from now on (as [`super::LinkEmulator::set_config`]).
    pub fn set_config(&self, dir: Dir, config: DirectionConfig) -> Result<(), LinkError> {
        self.shared.engine.set_config(dir, config)
    }

    /// Hands every packet from now on to `tap`; its bytes are the IP packet as written back
    /// into the kernel, addresses already swapped.
    pub fn set_tap(&self, tap: Option<Arc<dyn Tap>>) {
        self.shared.engine.set_tap(tap);
    }

    /// Stops and joins every thread, then removes the device (what dropping does).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.engine.request_stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for TunLink {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Reads what the kernel routes out of the device, reflects it and feeds it to its direction.
fn read_loop(shared: &Shared) {
    let mut buf = vec![0u8; MAX_PACKET];
    while !shared.engine.stopping() {
        let len = match shared.device.recv_timeout(&mut buf, STOP_POLL) {
            Ok(Some(len)) => len,
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("linkemu: reading the TUN device failed, stopping: {e}");
                return;
            }
        };
        let packet = &mut buf[..len];
        match shared.reflection.reflect(packet) {
            Ok(dir) => shared.engine.arrive(dir, packet, || ()),
            Err(_) => bump(&shared.unreflected, 1),
        }
    }
}
