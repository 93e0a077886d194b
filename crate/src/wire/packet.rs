//! The datagram endpoint: sequence numbers, the 16-bit timestamps and their echo, replay marking.

use std::time::Duration;

use super::cipher::{MAX_SEQ, NONCE_LEN, Nonce, TAG_LEN};
use super::{Cipher, Direction, Key, WireError};
use crate::time::Instant;

/// Bytes of `timestamp` and `timestamp_reply` at the start of every plaintext.
pub const TIMESTAMPS_LEN: usize = 4;
/// `timestamp_reply` value meaning "no reply".
pub const NO_TIMESTAMP: u16 = 0xFFFF;
/// A remembered peer timestamp is echoed only if it arrived less than this long ago.
const ECHO_WINDOW: Duration = Duration::from_millis(1000);
/// Round-trip samples at or above this are discarded (MOSH-PROTOCOL.md 2.5).
const MAX_RTT_SAMPLE: Duration = Duration::from_millis(5000);

/// mosh's 16-bit clock: milliseconds mod 65536, with 0xFFFF (the "none" marker) sent as 0.
fn timestamp16(now: Instant) -> u16 {
    match (now.as_millis() % 65_536) as u16 {
        NO_TIMESTAMP => 0,
        ts => ts,
    }
}

/// Which peer timestamp waits to be echoed when several datagrams come before the next send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampEcho {
    /// The newest, as mosh does (`Connection::recv_one`): the freshest round-trip sample.
    #[default]
    Newest,
    /// The one that came first (while it is still within the echo window). For datagrams that
    /// were held on the way and come together: the peer's sample then measures what the oldest
    /// of them really took, hold included, and mosh-server paces its frames to that
    /// (`DrawPacer::held_batch_echo` says when).
    Oldest,
}

/// An in-order peer timestamp, waiting to be echoed once.
#[derive(Debug, Clone, Copy)]
struct HeldTimestamp {
    peer_ts: u16,
    received: Instant,
}

/// The datagram endpoint: seals and opens datagrams, keeps the sequence counters and the
/// timestamp echo (MOSH-PROTOCOL.md 2).
///
/// Sequence numbers count datagrams (every fragment), from 0, and must never repeat under one key:
/// a driver that can restart with the same key (a browser reload) persists
/// [`PacketLayer::next_seq`] before sending and resumes with [`PacketLayer::with_next_seq`].
#[derive(Debug)]
pub struct PacketLayer {
    cipher: Cipher,
    sending: Direction,
    /// Next sequence number to seal; `MAX_SEQ + 1` and above mean exhausted.
    next_seq: u64,
    /// Lowest peer sequence number that counts as in order.
    expected_seq: u64,
    held: Option<HeldTimestamp>,
    echo: TimestampEcho,
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
    /// A fresh endpoint: sends from sequence number 0.
    pub fn new(key: &Key, sending: Direction) -> Self {
        PacketLayer::with_next_seq(key, sending, 0)
    }

    /// Resumes sending under the same key at `next_seq` (a value saved from
    /// [`PacketLayer::next_seq`]).
    pub fn with_next_seq(key: &Key, sending: Direction, next_seq: u64) -> Self {
        PacketLayer {
            cipher: Cipher::new(key),
            sending,
            next_seq,
            expected_seq: 0,
            held: None,
            echo: TimestampEcho::Newest,
        }
    }

    /// The sequence number the next sealed datagram will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Skips ahead to `floor` if below it (never back: a number once used stays used).
    pub fn raise_next_seq(&mut self, floor: u64) {
        self.next_seq = self.next_seq.max(floor);
    }

    /// Which timestamp the datagrams opened from now on leave to be echoed (default: the newest).
    pub fn set_timestamp_echo(&mut self, echo: TimestampEcho) {
        self.echo = echo;
    }

    pub fn sending_direction(&self) -> Direction {
        self.sending
    }

    /// Seals one fragment payload into a datagram: `timestamp || timestamp_reply || payload`
    /// under the next sequence number.
    pub fn seal(&mut self, now: Instant, payload: &[u8]) -> Result<Vec<u8>, WireError> {
        let seq = self.next_seq;
        if seq > MAX_SEQ {
            return Err(WireError::SequenceExhausted);
        }
        let reply = self.take_timestamp_reply(now);
        let mut plaintext = Vec::with_capacity(TIMESTAMPS_LEN + payload.len());
        plaintext.extend_from_slice(&timestamp16(now).to_be_bytes());
        plaintext.extend_from_slice(&reply.to_be_bytes());
        plaintext.extend_from_slice(payload);
        let datagram = self.cipher.seal(Nonce { direction: self.sending, seq }, &plaintext)?;
        self.next_seq = seq + 1;
        Ok(datagram)
    }

    /// The peer timestamp advanced by how long we held it, once, within [`ECHO_WINDOW`]; else none.
    fn take_timestamp_reply(&mut self, now: Instant) -> u16 {
        match self.held.take() {
            Some(held) => {
                let held_ms = now.as_millis().saturating_sub(held.received.as_millis());
                if held_ms < ECHO_WINDOW.as_millis() as u64 {
                    held.peer_ts.wrapping_add(held_ms as u16)
                } else {
                    NO_TIMESTAMP
                }
            }
            None => NO_TIMESTAMP,
        }
    }

    /// Whether the timestamp waiting to be echoed stays, rather than a newer one taking its place.
    fn keeps_held_timestamp(&self, now: Instant) -> bool {
        self.echo == TimestampEcho::Oldest
            && self.held.is_some_and(|held| {
                now.as_millis().saturating_sub(held.received.as_millis())
                    < ECHO_WINDOW.as_millis() as u64
            })
    }

    /// Authenticates and decrypts a datagram from the peer.
    pub fn open(&mut self, now: Instant, datagram: &[u8]) -> Result<Opened, WireError> {
        if datagram.len() < NONCE_LEN + TAG_LEN {
            return Err(WireError::DatagramTooShort { len: datagram.len() });
        }
        let expected = self.sending.reverse();
        if let Some(nonce) = Nonce::of_datagram(datagram) {
            if nonce.direction != expected {
                return Err(WireError::WrongDirection { got: nonce.direction, expected });
            }
        }
        let (nonce, plaintext) = self.cipher.open(datagram)?;
        if plaintext.len() < TIMESTAMPS_LEN {
            return Err(WireError::PlaintextTooShort { len: plaintext.len() });
        }
        let peer_ts = u16::from_be_bytes([plaintext[0], plaintext[1]]);
        let reply = u16::from_be_bytes([plaintext[2], plaintext[3]]);
        let payload = plaintext[TIMESTAMPS_LEN..].to_vec();

        if nonce.seq < self.expected_seq {
            return Ok(Opened { payload, in_order: false, rtt_sample: None });
        }
        self.expected_seq = nonce.seq + 1;
        if peer_ts != NO_TIMESTAMP && !self.keeps_held_timestamp(now) {
            self.held = Some(HeldTimestamp { peer_ts, received: now });
        }
        let rtt_sample = (reply != NO_TIMESTAMP)
            .then(|| Duration::from_millis(u64::from(timestamp16(now).wrapping_sub(reply))))
            .filter(|rtt| *rtt < MAX_RTT_SAMPLE);
        Ok(Opened { payload, in_order: true, rtt_sample })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp16_wraps_and_avoids_ffff() {
        assert_eq!(timestamp16(Instant::from_millis(0x1234)), 0x1234);
        assert_eq!(timestamp16(Instant::from_millis(65_536 + 7)), 7);
        assert_eq!(timestamp16(Instant::from_millis(0xFFFF)), 0);
        assert_eq!(timestamp16(Instant::from_micros(0xFFFE * 1000 + 999)), 0xFFFE);
    }
}
