//! Mosh's bytes: keys, AES-128-OCB3 packets with timestamps, fragments, zlib and protobuf.
//!
//! Only this module knows how mosh lays out a datagram (MOSH-PROTOCOL.md sections 1-5). Everything
//! above it speaks in [`Instruction`]s, [`UserEvent`]s and [`HostEvent`]s.
//!
//! ```text
//!  send:    Instruction --Fragmenter::fragment--> fragments --PacketLayer::seal (each)--> datagrams
//!  receive: datagram --PacketLayer::open--> Opened.payload --Reassembler::add--> Option<Instruction>
//!  diffs:   encode_/decode_user_message (client state), encode_/decode_host_message (server state)
//! ```
//!
//! Nonces must never repeat under one key: a driver that can restart with the same key (a browser
//! reload) persists [`PacketLayer::next_seq`] and [`Fragmenter::next_id`] and resumes with
//! [`PacketLayer::with_next_seq`] and [`Fragmenter::with_next_id`].
//!
//! Peer data never panics here: every decoder returns a [`WireError`] that names what was wrong.

mod cipher;
mod compress;
mod connect_line;
mod error;
mod fragment;
mod key;
mod messages;
mod packet;
mod proto;

pub use cipher::{Cipher, MAX_SEQ, NONCE_LEN, Nonce, TAG_LEN};
pub use compress::MAX_INFLATED_LEN;
pub use connect_line::{ConnectLineError, parse_connect_line};
pub use error::WireError;
pub use fragment::{
    DATAGRAM_OVERHEAD, DEFAULT_MTU, FRAGMENT_HEADER_LEN, Fragment, Fragmenter, IPV6_MTU,
    MAX_ASSEMBLY_LEN, MAX_DATAGRAM_LEN, MAX_FRAGMENTS, MIN_MTU, Reassembler,
};
pub use key::{KEY_TEXT_LEN, Key, KeyError};
pub use messages::{
    PROTOCOL_VERSION, decode_host_message, decode_instruction, decode_user_message,
    encode_host_message, encode_instruction, encode_user_message,
};
pub use packet::{NO_TIMESTAMP, Opened, PacketLayer, TIMESTAMPS_LEN, TimestampEcho};

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
    /// The other direction: the one a receiver expects from its peer.
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
