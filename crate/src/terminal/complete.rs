//! `Complete`: the server's state as the transport synchronizes it (framebuffer + echo_ack).
//!
//! mosh's `Terminal::Complete` (MOSH-PROTOCOL.md 7.3). Applying a diff feeds HostBytes through
//! the emulator, resizes on Resize and raises echo_ack on EchoAck; a diff is EchoAck if it
//! changed, Resize if the size changed, then the renderer's HostBytes, exactly what mosh-server's
//! `Complete::diff_from` sends, so a `Complete` can also play the server in simulations.
//!
//! The event-level methods (`apply_events`, `diff_events`) hold the logic; the [`SyncState`]
//! impl only adds the protobuf `HostMessage` encoding of the wire module.

use std::fmt;

use super::display::Renderer;
use super::emulator::Emulator;
use super::framebuffer::{Framebuffer, Size};
use crate::transport::{ApplyError, SyncState};
use crate::wire::{self, HostEvent, StateNum};

/// The largest screen a peer may ask for, in cells (about 2M: 4096 x 512); a bigger Resize is
/// refused rather than allocated.
pub const MAX_CELLS: usize = 1 << 21;

/// One state of the server's terminal.
#[derive(Clone)]
pub struct Complete {
    emulator: Emulator,
    echo_ack: StateNum,
}

impl Complete {
    /// mosh's initial state: a blank framebuffer of the client's size, echo_ack 0
    /// (MOSH-PROTOCOL.md 7.2: state 0 has the size of the client's first Resize).
    pub fn new(cols: u16, rows: u16) -> Complete {
        Complete { emulator: Emulator::new(Size { cols, rows }), echo_ack: StateNum(0) }
    }
    pub fn framebuffer(&self) -> &Framebuffer {
        self.emulator.framebuffer()
    }
    /// The newest client state the server had 50 ms to echo (MOSH-PROTOCOL.md 7.4).
    pub fn echo_ack(&self) -> StateNum {
        self.echo_ack
    }

    /// Applies the instructions of one HostMessage in order. Peer data: an invalid size is an
    /// error (the state is then partly applied; the caller drops it), an older echo_ack is ignored.
    pub fn apply_events(&mut self, events: &[HostEvent]) -> Result<(), ApplyError> {
        for event in events {
            match event {
                HostEvent::Bytes(bytes) => self.emulator.feed(bytes),
                HostEvent::Resize { cols, rows } => self.resize(*cols, *rows)?,
                // mosh asserts monotonicity; we keep the larger value.
                HostEvent::EchoAck(n) => self.echo_ack = self.echo_ack.max(*n),
            }
        }
        Ok(())
    }

    /// The instructions that turn `base` into `self`: EchoAck if changed, Resize if the size
    /// changed, HostBytes if the screen changed (mosh-server's `Complete::diff_from`).
    pub fn diff_events(&self, base: &Complete) -> Vec<HostEvent> {
        let mut events = Vec::new();
        if self.echo_ack != base.echo_ack {
            events.push(HostEvent::EchoAck(self.echo_ack));
        }
        let (fb, base_fb) = (self.framebuffer(), base.framebuffer());
        if fb != base_fb {
            if fb.size() != base_fb.size() {
                let Size { cols, rows } = fb.size();
                events.push(HostEvent::Resize { cols, rows });
            }
            let bytes = Renderer::new().render(Some(base_fb), fb);
            if !bytes.is_empty() {
                events.push(HostEvent::Bytes(bytes));
            }
        }
        events
    }

    // ---- the server side, for simulations and tests ----

    /// Feeds terminal output (what mosh-server reads from the pty).
    pub fn feed_host_bytes(&mut self, bytes: &[u8]) {
        self.emulator.feed(bytes);
    }
    /// Resizes (mosh's Resize instruction): keep what fits, blank the rest, clamp the cursor.
    pub fn resize(&mut self, cols: u16, rows: u16) -> Result<(), ApplyError> {
        if cols == 0 || rows == 0 || usize::from(cols) * usize::from(rows) > MAX_CELLS {
            return Err(ApplyError(format!("refusing a screen of {cols}x{rows}")));
        }
        self.emulator.resize(Size { cols, rows });
        Ok(())
    }
    pub fn set_echo_ack(&mut self, n: StateNum) {
        self.echo_ack = self.echo_ack.max(n);
    }
}

impl PartialEq for Complete {
    /// The parser's partial sequence does not count, as in mosh.
    fn eq(&self, other: &Complete) -> bool {
        self.echo_ack == other.echo_ack && self.framebuffer() == other.framebuffer()
    }
}

impl fmt::Debug for Complete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Complete(echo_ack {}) {:?}", self.echo_ack.0, self.framebuffer())
    }
}

impl SyncState for Complete {
    fn diff_from(&self, base: &Self) -> Vec<u8> {
        let events = self.diff_events(base);
        if events.is_empty() {
            return Vec::new();
        }
        wire::encode_host_message(&events)
    }

    fn apply(&mut self, diff: &[u8]) -> Result<(), ApplyError> {
        if diff.is_empty() {
            return Ok(());
        }
        let events =
            wire::decode_host_message(diff).map_err(|e| ApplyError(format!("HostMessage: {e}")))?;
        self.apply_events(&events)
    }
}
