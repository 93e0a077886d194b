//! The WebSocket fallback: one WebSocket carries what a WebTransport session carries in its
//! datagrams and streams, for networks that pass only TCP (an `ssh -L` tunnel, a proxy, UDP
//! blocked).
//!
//! Every binary WebSocket message is one frame: a kind byte, then its fields.
//!
//! ```text
//!  0x00 DATAGRAM                 bytes          page→relay: a mosh datagram; relay→page: a framed
//!                                               datagram (framing::WHOLE + the datagram)
//!  0x01 CONTROL                  bytes          a piece of the control stream (its JSON lines)
//!  0x02 OPEN      id (u32 BE)                   the page opens stream `id` (one paste upload)
//!  0x03 DATA      id (u32 BE)    bytes          a piece of stream `id`, either direction
//!  0x04 FIN       id (u32 BE)                   the sender has finished stream `id`
//!  0x05 RESET     id (u32 BE)                   stream `id` is abandoned, both directions
//! ```
//!
//! The control stream and the upload streams keep their meaning and their messages (`control`,
//! `upload`); only the carriage differs. Datagrams keep mosh's own loss handling: the relay
//! drops them when the socket is backed up rather than queue keystrokes behind old screens.

/// Path of the WebSocket endpoint on the relay's TCP port.
pub const WEBSOCKET_PATH: &str = "/ws";
/// Largest frame either side sends or accepts: an upload chunk (at most 32 KiB) plus headers,
/// with room to spare.
pub const MAX_FRAME: usize = 64 * 1024;
/// Upload streams one WebSocket may have open at once.
pub const MAX_STREAMS: usize = 8;

/// The subprotocol the page asks for (and the relay answers with).
pub const SUBPROTOCOL: &str = "tern";

/// The subprotocol that carries the token next to [`SUBPROTOCOL`], so the token is never in a
/// URL (which proxies and servers log): `tern-token.TOKEN` when the token is a subprotocol word
/// already (letters, digits, `-_.~`), else `tern-token-hex.` and the hex of its UTF-8 bytes.
pub fn token_subprotocol(token: &str) -> String {
    let is_word = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b));
    if is_word {
        return format!("tern-token.{token}");
    }
    let mut out = String::from("tern-token-hex.");
    for b in token.bytes() {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// The token of one offered subprotocol written by [`token_subprotocol`], if it is one.
pub fn token_from_subprotocol(protocol: &str) -> Option<String> {
    if let Some(hex) = protocol.strip_prefix("tern-token-hex.") {
        let digits = hex.as_bytes();
        if digits.len() % 2 != 0 {
            return None;
        }
        let nibble = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
        let bytes: Option<Vec<u8>> =
            digits.chunks(2).map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?)).collect();
        return String::from_utf8(bytes?).ok();
    }
    protocol.strip_prefix("tern-token.").map(str::to_string)
}

/// The subprotocol a page's upgrade carries next to [`SUBPROTOCOL`]: a challenge from
/// `/api/challenge` and the page's proof over it (`tern-proof.R.PROOF`, both 64 hex digits), the
/// relay having proved itself first (`super::proof`). Spent by this one upgrade; it lets the
/// upgrade take its handshake slot from the pool that unauthenticated clients cannot fill.
pub fn proof_subprotocol(relay: &super::ProofNonce, proof: &super::Proof) -> String {
    format!("tern-proof.{relay}.{proof}")
}

/// The challenge and proof of one offered subprotocol written by [`proof_subprotocol`].
pub fn proof_from_subprotocol(protocol: &str) -> Option<(super::ProofNonce, super::Proof)> {
    let (relay, proof) = protocol.strip_prefix("tern-proof.")?.split_once('.')?;
    Some((relay.parse().ok()?, proof.parse().ok()?))
}

const DATAGRAM: u8 = 0x00;
const CONTROL: u8 = 0x01;
const OPEN: u8 = 0x02;
const DATA: u8 = 0x03;
const FIN: u8 = 0x04;
const RESET: u8 = 0x05;

/// One WebSocket message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Datagram(&'a [u8]),
    Control(&'a [u8]),
    Open(u32),
    Data(u32, &'a [u8]),
    Fin(u32),
    Reset(u32),
}

/// Why a message is not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    Empty,
    UnknownKind(u8),
    /// A stream frame without its 4-byte id.
    Truncated,
    TooLarge(usize),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Empty => write!(f, "empty WebSocket frame"),
            FrameError::UnknownKind(k) => write!(f, "unknown WebSocket frame kind {k:#04x}"),
            FrameError::Truncated => write!(f, "stream frame without its id"),
            FrameError::TooLarge(n) => {
                write!(f, "WebSocket frame of {n} bytes (limit {MAX_FRAME})")
            }
        }
    }
}

impl std::error::Error for FrameError {}

impl<'a> Frame<'a> {
    /// The message bytes.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, id, body): (u8, Option<u32>, &[u8]) = match *self {
            Frame::Datagram(b) => (DATAGRAM, None, b),
            Frame::Control(b) => (CONTROL, None, b),
            Frame::Open(id) => (OPEN, Some(id), &[]),
            Frame::Data(id, b) => (DATA, Some(id), b),
            Frame::Fin(id) => (FIN, Some(id), &[]),
            Frame::Reset(id) => (RESET, Some(id), &[]),
        };
        let mut out = Vec::with_capacity(5 + body.len());
        out.push(kind);
        if let Some(id) = id {
            out.extend_from_slice(&id.to_be_bytes());
        }
        out.extend_from_slice(body);
        out
    }

    /// Reads one message. Never panics on anything.
    pub fn decode(message: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        if message.len() > MAX_FRAME {
            return Err(FrameError::TooLarge(message.len()));
        }
        let (&kind, rest) = message.split_first().ok_or(FrameError::Empty)?;
        let stream = |rest: &'a [u8]| -> Result<(u32, &'a [u8]), FrameError> {
            let (id, body) = rest.split_first_chunk::<4>().ok_or(FrameError::Truncated)?;
            Ok((u32::from_be_bytes(*id), body))
        };
        match kind {
            DATAGRAM => Ok(Frame::Datagram(rest)),
            CONTROL => Ok(Frame::Control(rest)),
            OPEN => Ok(Frame::Open(stream(rest)?.0)),
            DATA => {
                let (id, body) = stream(rest)?;
                Ok(Frame::Data(id, body))
            }
            FIN => Ok(Frame::Fin(stream(rest)?.0)),
            RESET => Ok(Frame::Reset(stream(rest)?.0)),
            k => Err(FrameError::UnknownKind(k)),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_travel_as_subprotocols() {
        use super::{token_from_subprotocol as back, token_subprotocol as sub};
        let (r, p) = (crate::relay_proto::ProofNonce([1; 32]), crate::relay_proto::Proof([2; 32]));
        let offered = super::proof_subprotocol(&r, &p);
        let (r2, p2) = super::proof_from_subprotocol(&offered).unwrap();
        assert!(r2 == r && p2.matches(&p));
        assert!(super::proof_from_subprotocol("tern-proof.12.34").is_none());
        assert!(back(&offered).is_none(), "a proof is not a token");
        assert_eq!(sub("a1-b_c.d~"), "tern-token.a1-b_c.d~");
        assert_eq!(sub("a b/é"), "tern-token-hex.6120622fc3a9");
        for t in ["a1-b_c.d~", "a b/é", "x+y=z", "%41"] {
            assert_eq!(back(&sub(t)).as_deref(), Some(t));
            assert!(sub(t).bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b)));
        }
        assert_eq!(back("tern"), None);
        assert_eq!(back("tern-token-hex.6"), None);
        assert_eq!(back("tern-token-hex.zz"), None);
        assert_eq!(back("tern-token-hex.ff"), None, "not UTF-8");
    }

    use super::*;

    #[test]
    fn frames_round_trip_with_their_documented_bytes() {
        let cases: [(Frame<'_>, &[u8]); 6] = [
            (Frame::Datagram(b"\x00mosh"), b"\x00\x00mosh"),
            (Frame::Control(b"{\"type\":\"ping\"}\n"), b"\x01{\"type\":\"ping\"}\n"),
            (Frame::Open(7), b"\x02\x00\x00\x00\x07"),
            (Frame::Data(258, b"png"), b"\x03\x00\x00\x01\x02png"),
            (Frame::Fin(1), b"\x04\x00\x00\x00\x01"),
            (Frame::Reset(u32::MAX), b"\x05\xff\xff\xff\xff"),
        ];
        for (frame, bytes) in cases {
            assert_eq!(frame.encode(), bytes, "{frame:?}");
            assert_eq!(Frame::decode(bytes), Ok(frame));
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert_eq!(Frame::decode(b""), Err(FrameError::Empty));
        assert_eq!(Frame::decode(b"\x09x"), Err(FrameError::UnknownKind(9)));
        assert_eq!(Frame::decode(b"\x03\x00\x01"), Err(FrameError::Truncated));
        let big = vec![0u8; MAX_FRAME + 1];
        assert_eq!(Frame::decode(&big), Err(FrameError::TooLarge(MAX_FRAME + 1)));
        for a in 0..=255u8 {
            for len in 0..6 {
                let _ = Frame::decode(&[a, 1, 2, 3, 4, 5][..len]);
            }
        }
    }
}
