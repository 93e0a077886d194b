//! The emulator's tap, decrypted: each completed mosh instruction with the times it crossed the
//! link, so the suite times the stock mosh-client and Tern the same way, from outside.
//!
//! A benchmark knows the session key (it started the mosh-server), so it can open every datagram
//! with [`Cipher::open`] (stateless: no replay window or timestamps to disturb), reassemble the
//! fragments per direction and decode the diff. An instruction's times are those of the datagram
//! carrying its last fragment: that is when the receiver could act on it.

use std::time::Instant;

use tern::wire::{
    Cipher, HostEvent, Instruction, Key, Reassembler, TIMESTAMPS_LEN, UserEvent,
    decode_host_message, decode_user_message,
};
use tern_tests::linkemu::{Dir, TapRecord};

/// One instruction seen on the link.
#[derive(Debug, Clone)]
pub struct WireEvent {
    pub dir: Dir,
    /// When it reached the emulator: the sender's wire time.
    pub arrived: Instant,
    /// When the emulator handed it to the receiver; `None` if dropped.
    pub released: Option<Instant>,
    pub instruction: Instruction,
    /// The decoded diff, by direction (empty for an empty ack or an undecodable diff).
    pub diff: Diff,
}

#[derive(Debug, Clone)]
pub enum Diff {
    User(Vec<UserEvent>),
    Host(Vec<HostEvent>),
}

impl WireEvent {
    /// Whether this client instruction carries `byte` among its typed keys.
    pub fn has_key(&self, byte: u8) -> bool {
        match &self.diff {
            Diff::User(events) => {
                events.iter().any(|e| matches!(e, UserEvent::Keys(k) if k.contains(&byte)))
            }
            Diff::Host(_) => false,
        }
    }

    /// The printable text this server instruction draws (its HostBytes without escape sequences
    /// or control characters).
    pub fn drawn_text(&self) -> String {
        match &self.diff {
            Diff::Host(events) => events
                .iter()
                .filter_map(|e| match e {
                    HostEvent::Bytes(b) => Some(printable(b)),
                    _ => None,
                })
                .collect(),
            Diff::User(_) => String::new(),
        }
    }

    /// Whether this server instruction changes the screen (has HostBytes).
    pub fn draws(&self) -> bool {
        matches!(&self.diff, Diff::Host(events)
            if events.iter().any(|e| matches!(e, HostEvent::Bytes(b) if !b.is_empty())))
    }
}

/// Decrypts and reassembles the tapped datagrams. Records must be in the order the tap produced
/// them (per direction that is release order); datagrams that fail to open (another key) are
/// skipped, dropped datagrams too (their instruction, if completed by a copy, still appears).
pub fn decode(key: &Key, records: &[TapRecord]) -> Vec<WireEvent> {
    let cipher = Cipher::new(key);
    let mut up = Reassembler::new();
    let mut down = Reassembler::new();
    let mut events = Vec::new();
    for record in records {
        let Some(released) = record.released() else {
            continue;
        };
        let Ok((_nonce, plaintext)) = cipher.open(&record.data) else {
            continue;
        };
        if plaintext.len() < TIMESTAMPS_LEN {
            continue;
        }
        let reassembler = match record.dir {
            Dir::Up => &mut up,
            Dir::Down => &mut down,
        };
        let Ok(Some(instruction)) = reassembler.add(&plaintext[TIMESTAMPS_LEN..]) else {
            continue;
        };
        let diff = match record.dir {
            Dir::Up => Diff::User(decode_user_message(&instruction.diff).unwrap_or_default()),
            Dir::Down => Diff::Host(decode_host_message(&instruction.diff).unwrap_or_default()),
        };
        events.push(WireEvent {
            dir: record.dir,
            arrived: record.arrived,
            released: Some(released),
            instruction,
            diff,
        });
    }
    events
}

/// The printable characters of terminal output: CSI, OSC and other escape sequences and C0
/// controls removed (enough for mosh-server's display diffs, MOSH-PROTOCOL.md 8.2).
pub fn printable(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ST (ESC \).
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' {
                            chars.next();
                            break;
                        }
                    }
                }
                // Intermediates (charset designations and the like), then one final byte.
                Some(c) if (' '..='/').contains(&c) => {
                    while chars.next_if(|c| (' '..='/').contains(c)).is_some() {}
                    chars.next();
                }
                _ => {}
            },
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_strips_escapes() {
        let bytes = b"\x1b[?25l\x1b[1;7Habc\x1b]0;title\x07\x1b(Bd\x1b[K\r\ne\x1b[0m";
        assert_eq!(printable(bytes), "abcde");
    }
}
