//! Mosh's bytes: keys, AES-128-OCB3 packets with timestamps, fragments, zlib and protobuf.
//!
//! Only this module knows how mosh lays out a datagram (MOSH-PROTOCOL.md sections 1-5). Everything
//! above it speaks in [`Instruction`]s, [`UserEvent`]s and [`HostEvent`]s.
//!
//! Peer data never panics here: every decoder returns a [`WireError`] that names what was wrong.

use std::time::Duration;

use crate::time::Instant;

/// Which way a datagram travels. The direction bit keeps nonces of the two directions apart,
/// since both use one key (MOSH-PROTOCOL.md 2.2).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server: direction bit 0.
    ToServer,
    /// Server to client: direction bit 1.
    ToClient,
}

impl Direction {
    pub fn reverse(self) -> Direction {
        match self {
            Direction::ToServer => Direction::ToClient,
            Direction::ToClient => Direction::ToServer,
        }
    }
}

/// A state number of the State Synchronization Protocol. 0 is the initial state both sides know,
/// [`StateNum::SHUTDOWN`] (`u64::MAX`) means "I am shutting down".
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StateNum(pub u64);

impl StateNum {
    pub const INITIAL: StateNum = StateNum(0);
    pub const SHUTDOWN: StateNum = StateNum(u64::MAX);
}

/// One `TransportBuffers.Instruction`: "apply `diff` to your copy of my state `old_num` to get my
/// state `new_num`; I have your states up to `ack_num`; drop my states below `throwaway_num`".
///
/// `protocol_version` is not a field: encoding always writes 2, decoding rejects anything else.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instruction {
    pub old_num: StateNum,
    pub new_num: StateNum,
    pub ack_num: StateNum,
    pub throwaway_num: StateNum,
    /// An encoded `UserMessage` or `HostMessage`; empty for a pure ack.
    pub diff: Vec<u8>,
    /// Random padding that blurs lengths; receivers ignore it.
    pub chaff: Vec<u8>,
}

/// One event of the client's state (`ClientBuffers.UserMessage`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserEvent {
    /// Bytes typed or pasted, as the server hands them to the pty.
    Keys(Vec<u8>),
    /// A window size in character cells.
    Resize { cols: u16, rows: u16 },
}

/// One instruction of a server diff (`HostBuffers.HostMessage`), in the order the server sent them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostEvent {
    /// Escape sequences that turn the old framebuffer into the new one (MOSH-PROTOCOL.md 8).
    Bytes(Vec<u8>),
    Resize {
        cols: u16,
        rows: u16,
    },
    /// The newest client state whose input the server has had 50 ms to echo (MOSH-PROTOCOL.md 7.4).
    EchoAck(StateNum),
}

/// What was wrong with bytes from the peer (or with a request to send).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    #[error("placeholder")]
    Placeholder,
}

/// The datagram endpoint: seals and opens datagrams, keeps the sequence counters and the
/// timestamp echo (MOSH-PROTOCOL.md 2).
#[derive(Debug)]
pub struct PacketLayer {
    _private: (),
}

/// A datagram that authenticated and decrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The fragment bytes (10-byte header and contents).
    pub payload: Vec<u8>,
    /// False for a sequence number below the expected one (a replay or reordering): its payload is
    /// still valid, but it updated no timestamp, RTT or liveness.
    pub in_order: bool,
    /// A round-trip sample from the peer's timestamp reply, when it carried one.
    pub rtt_sample: Option<Duration>,
}

impl PacketLayer {
    pub fn new(_key: &Key, _sending: Direction) -> Self {
        unimplemented!()
    }
    pub fn with_next_seq(self, _seq: u64) -> Self {
        unimplemented!()
    }
    pub fn next_seq(&self) -> u64 {
        unimplemented!()
    }
    pub fn seal(&mut self, _now: Instant, _payload: &[u8]) -> Result<Vec<u8>, WireError> {
        unimplemented!()
    }
    pub fn open(&mut self, _now: Instant, _datagram: &[u8]) -> Result<Opened, WireError> {
        unimplemented!()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad key")]
pub struct KeyError;

impl std::str::FromStr for Key {
    type Err = KeyError;
    fn from_str(_s: &str) -> Result<Key, KeyError> {
        unimplemented!()
    }
}

/// A 16-byte session key, printed by mosh-server as 22 characters of base64.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(pub [u8; 16]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Cuts instructions into fragments (serialize, compress, slice).
#[derive(Debug)]
pub struct Fragmenter {
    _private: (),
}

impl Fragmenter {
    /// `mtu` is the size of whole datagrams on the wire.
    pub fn new(_mtu: usize) -> Self {
        unimplemented!()
    }
    /// Fragment payloads (header and slice), ready for [`PacketLayer::seal`].
    pub fn fragment(&mut self, _instruction: &Instruction) -> Vec<Vec<u8>> {
        unimplemented!()
    }
}

/// Joins fragments back into instructions (one assembly slot, as mosh has).
#[derive(Debug, Default)]
pub struct Reassembler {
    _private: (),
}

impl Reassembler {
    pub fn add(&mut self, _payload: &[u8]) -> Result<Option<Instruction>, WireError> {
        unimplemented!()
    }
}

pub fn encode_user_message(_events: &[UserEvent]) -> Vec<u8> {
    unimplemented!()
}
pub fn decode_user_message(_diff: &[u8]) -> Result<Vec<UserEvent>, WireError> {
    unimplemented!()
}
pub fn encode_host_message(_events: &[HostEvent]) -> Vec<u8> {
    unimplemented!()
}
pub fn decode_host_message(_diff: &[u8]) -> Result<Vec<HostEvent>, WireError> {
    unimplemented!()
}
