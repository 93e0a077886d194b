//! Every way bytes from the peer (or a request to send) can be wrong, each named precisely.

use super::Direction;

/// What was wrong with bytes from the peer (or with a request to send).
///
/// Receivers drop the offending datagram or instruction and carry on; none of these is fatal to a
/// session by itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    // --- datagrams (MOSH-PROTOCOL.md 2) ---
    /// Fewer bytes than nonce (8) plus tag (16).
    #[error("datagram of {len} bytes is shorter than the 24-byte minimum (nonce + tag)")]
    DatagramTooShort { len: usize },
    /// The direction bit says the datagram travels the way we send, not towards us (a reflection).
    #[error("datagram direction bit says {got:?}, expected {expected:?}")]
    WrongDirection { got: Direction, expected: Direction },
    /// The OCB tag did not verify: wrong key, or bytes changed on the way.
    #[error("datagram failed authentication (wrong key or corrupted)")]
    AuthenticationFailed,
    /// Authentic, but too short to hold the two 16-bit timestamps.
    #[error("authentic plaintext of {len} bytes is shorter than the 4 timestamp bytes")]
    PlaintextTooShort { len: usize },
    /// All 2^63 sequence numbers of this key and direction are used up; sending more would reuse
    /// a nonce.
    #[error("sequence numbers exhausted: no datagram can be sealed under this key any more")]
    SequenceExhausted,
    /// The cipher refused the plaintext (beyond OCB's length limit; not reachable with datagrams).
    #[error("plaintext of {len} bytes is too long to seal")]
    PlaintextTooLong { len: usize },

    // --- fragments (MOSH-PROTOCOL.md 3) ---
    /// A fragment needs a 10-byte header (id, final bit and number).
    #[error("fragment of {len} bytes is shorter than its 10-byte header")]
    FragmentHeaderTooShort { len: usize },
    /// A fragment number we already hold arrived with different contents or final bit.
    #[error("fragment {num} of instruction {id} conflicts with the copy already received")]
    ConflictingFragment { id: u64, num: u16 },
    /// A final fragment disagrees with the fragment count already fixed by another final fragment.
    #[error(
        "final fragment {num} of instruction {id} conflicts with an earlier final fragment {previous}"
    )]
    ConflictingFinalFragment { id: u64, num: u16, previous: u16 },
    /// A fragment number at or beyond the count fixed by the final fragment.
    #[error(
        "fragment {num} of instruction {id} lies beyond its final fragment ({count} fragments)"
    )]
    FragmentBeyondFinal { id: u64, num: u16, count: u16 },
    /// The compressed instruction grows past what any instruction within the inflate limit needs.
    #[error("instruction {id} assembles to more than {limit} compressed bytes")]
    AssemblyTooLarge { id: u64, limit: usize },
    /// Sending: the instruction needs more fragments than the 15-bit fragment number allows.
    #[error("instruction needs {needed} fragments, at most {max} are possible")]
    TooManyFragments { needed: usize, max: usize },
    /// Sending: the datagram size leaves no room for fragment contents, or exceeds what mosh
    /// receives.
    #[error("MTU of {mtu} bytes is outside {min}..={max}")]
    MtuOutOfRange { mtu: usize, min: usize, max: usize },
    /// Sending: all 2^64 instruction ids are used up.
    #[error("fragment instruction ids exhausted")]
    FragmentIdExhausted,

    // --- compression (MOSH-PROTOCOL.md 4) ---
    /// The zlib stream is corrupt or truncated.
    #[error("inflating the instruction failed: {reason}")]
    InflateFailed { reason: String },
    /// The zlib stream inflates to more than mosh's limit.
    #[error("instruction inflates to more than {limit} bytes")]
    InflatedTooLarge { limit: usize },

    // --- protobuf (MOSH-PROTOCOL.md 5) ---
    /// A message did not parse as protobuf.
    #[error("{message} does not decode: {reason}")]
    ProtobufDecode { message: &'static str, reason: String },
    /// `Instruction.protocol_version` is not 2 (absent reads as 0).
    #[error("mosh protocol version mismatch: got {got}, expected 2")]
    ProtocolVersionMismatch { got: u32 },
    /// A resize to a negative size or one beyond 65535 cells.
    #[error("resize to {width}x{height} is out of range")]
    ResizeOutOfRange { width: i32, height: i32 },
}
