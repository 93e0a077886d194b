//! A server state that keeps the raw host bytes, for tests and tools that need no terminal.

use super::ServerState;
use crate::transport::{ApplyError, SyncState};
use crate::wire::{self, HostEvent, StateNum};

/// Every host byte the server sent to reach this state, in order, plus size and echo ack.
///
/// Host bytes are only meaningful relative to the framebuffer they were diffed from, so this is a
/// log, not a screen: tests search it for output (`tern-42`), the terminal model interprets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLog {
    bytes: Vec<u8>,
    cols: u16,
    rows: u16,
    echo_ack: StateNum,
}

impl HostLog {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn size(&self) -> (u16, u16) {
        (self.cols, self.rows)
    }

    /// Appends output (a simulated server writing to its screen).
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    pub fn set_size(&mut self, cols: u16, rows: u16) {
        (self.cols, self.rows) = (cols, rows);
    }

    /// Records that the input of client state `num` has been echoed (a simulated server).
    pub fn set_echo_ack(&mut self, num: StateNum) {
        self.echo_ack = self.echo_ack.max(num);
    }

    /// Whether `needle` occurs in the host bytes.
    pub fn contains(&self, needle: &[u8]) -> bool {
        !needle.is_empty() && self.bytes.windows(needle.len()).any(|w| w == needle)
    }
}

impl ServerState for HostLog {
    fn blank(cols: u16, rows: u16) -> Self {
        HostLog { bytes: Vec::new(), cols, rows, echo_ack: StateNum::INITIAL }
    }

    fn echo_ack(&self) -> StateNum {
        self.echo_ack
    }
}

impl SyncState for HostLog {
    fn diff_from(&self, base: &Self) -> Vec<u8> {
        let mut events = Vec::new();
        if self.echo_ack != base.echo_ack {
            events.push(HostEvent::EchoAck(self.echo_ack));
        }
        if self.size() != base.size() {
            events.push(HostEvent::Resize { cols: self.cols, rows: self.rows });
        }
        let new_bytes = self.bytes.strip_prefix(base.bytes.as_slice()).unwrap_or(&self.bytes);
        if !new_bytes.is_empty() {
            events.push(HostEvent::Bytes(new_bytes.to_vec()));
        }
        if events.is_empty() { Vec::new() } else { wire::encode_host_message(&events) }
    }

    fn apply(&mut self, diff: &[u8]) -> Result<(), ApplyError> {
        for event in wire::decode_host_message(diff).map_err(|e| ApplyError(e.to_string()))? {
            match event {
                HostEvent::Bytes(bytes) => self.bytes.extend_from_slice(&bytes),
                HostEvent::Resize { cols, rows } => (self.cols, self.rows) = (cols, rows),
                HostEvent::EchoAck(num) => self.echo_ack = self.echo_ack.max(num),
            }
        }
        Ok(())
    }
}
