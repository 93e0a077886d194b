//! A relay's silent copy of a session it forwards, so that a page with nothing saved (another
//! browser, another device) can take the session over.
//!
//! In spawn mode the relay started mosh-server and knows its key; every datagram of the session
//! passes through it. A [`Shadow`] opens them all, both ways, and keeps what a [`ResumePoint`]
//! needs: the server's screen states (as the client does, from the instructions it received), the
//! client's input states (as the server does), both sides' acknowledgements, and the highest
//! sequence number and fragment id the clients used. It never sends anything and never changes a
//! datagram; a datagram it cannot read is counted and forwarded all the same.
//!
//! It holds the plaintext of the session (the screen, keys typed): the relay keeps it in memory
//! and in its private state directory only, and `Debug` shows numbers only.

use std::fmt;

use super::ResumePoint;
use crate::terminal::Complete;
use crate::time::Instant;
use crate::transport::{Outcome, ReceivePolicy, Receiver, SyncState, UserStream};
use crate::wire::{
    Direction, Fragment, Instruction, Key, PacketLayer, Reassembler, StateNum, WireError,
};

/// A resumed client's fragment ids start this far above the highest one seen: fragment ids only
/// need to differ from recent ones, and a shadow restored from disk may have missed a few.
const FRAGMENT_ID_GAP: u64 = 1 << 16;

/// What a relay can show about a session without showing its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowSummary {
    pub cols: u16,
    pub rows: u16,
    /// The window title the program set (OSC 0/2), empty when none.
    pub title: String,
}

/// An authentic client datagram, opened (see [`Shadow::open_client`]).
#[derive(Debug)]
pub struct ClientDatagram {
    /// Its sequence number.
    pub seq: u64,
    payload: Vec<u8>,
}

/// Why the shadow has no point to give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShadowError {
    /// The newest client state does not extend the one the server acknowledged (the shadow
    /// missed datagrams, e.g. it was restored from an older save): a point from it could make
    /// mosh-server see input go backwards.
    #[error("the relay's copy of this session's input is incomplete")]
    InputOutOfStep,
}

/// A relay's copy of one session (see the module documentation).
pub struct Shadow {
    /// Opens the server's datagrams (we pose as the client: we "send" to the server).
    from_server: PacketLayer,
    /// Opens the client's datagrams.
    from_client: PacketLayer,
    server_fragments: Reassembler,
    client_fragments: Reassembler,
    screen: Receiver<Complete>,
    input: Receiver<UserStream>,
    /// The newest client state the server acknowledged.
    input_acked: StateNum,
    /// The highest client state number seen.
    input_newest: StateNum,
    /// The highest sequence number and fragment id of any client datagram opened.
    client_seq: Option<u64>,
    client_fragment_id: Option<u64>,
    /// Datagrams that did not authenticate or decode (forwarded all the same).
    pub unreadable: u64,
    /// Set by every change a save would record; cleared by [`Shadow::take_changed`].
    changed: bool,
}

impl fmt::Debug for Shadow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shadow")
            .field("server_num", &self.screen.newest_num().0)
            .field("input_acked", &self.input_acked.0)
            .field("input_newest", &self.input_newest.0)
            .field("client_seq", &self.client_seq)
            .field("unreadable", &self.unreadable)
            .finish_non_exhaustive()
    }
}

impl Shadow {
    /// The shadow of a session from its start (the relay spawned its server).
    pub fn new(key: &Key, now: Instant) -> Self {
        // mosh-server's state 0 is a blank 80x24 screen; its first diff resizes it.
        Shadow::from_parts(
            key,
            Receiver::new(Complete::new(80, 24), now, ReceivePolicy::AllRetained),
            now,
        )
    }

    /// A shadow taken up again from a point (a save of the shadow, or what a page holds).
    pub fn from_point(
        key: &Key,
        point: &ResumePoint,
        now: Instant,
    ) -> Result<Self, super::ResumeError> {
        let screen = point.server_state()?;
        let mut shadow = Shadow::from_parts(
            key,
            Receiver::resumed(screen, point.server_num, now, ReceivePolicy::AllRetained),
            now,
        );
        shadow.seed_input(point, now)?;
        shadow.client_seq = point.next_seq.checked_sub(1);
        shadow.client_fragment_id = point.next_fragment_id.checked_sub(1);
        Ok(shadow)
    }

    fn from_parts(key: &Key, screen: Receiver<Complete>, now: Instant) -> Self {
        Shadow {
            from_server: PacketLayer::new(key, Direction::ToServer),
            from_client: PacketLayer::new(key, Direction::ToClient),
            server_fragments: Reassembler::new(),
            client_fragments: Reassembler::new(),
            screen,
            input: Receiver::new(UserStream::default(), now, ReceivePolicy::AllRetained),
            input_acked: StateNum::INITIAL,
            input_newest: StateNum::INITIAL,
            client_seq: None,
            client_fragment_id: None,
            unreadable: 0,
            changed: false,
        }
    }

    /// The input side of a point: the acknowledged state (its content is what came before, which
    /// only the server needs) and the pending events as the newest state after it.
    fn seed_input(&mut self, point: &ResumePoint, now: Instant) -> Result<(), super::ResumeError> {
        self.input = Receiver::resumed(
            UserStream::default(),
            point.input_acked,
            now,
            ReceivePolicy::AllRetained,
        );
        self.input_acked = point.input_acked;
        self.input_newest = point.input_acked;
        let last = StateNum(point.input_next.0.saturating_sub(1));
        if last > point.input_acked {
            let pending = Instruction {
                old_num: point.input_acked,
                new_num: last,
                diff: point.input_pending.clone(),
                ..Instruction::default()
            };
            if !matches!(self.input.receive(now, pending), Outcome::Newest { .. }) {
                return Err(super::ResumeError::Invalid("input", "does not apply".into()));
            }
        }
        self.input_newest = self.input_newest.max(last);
        Ok(())
    }

    /// A page took the session over with its own saved point (after a relay restart, the page may
    /// know newer states than this copy restored from disk): adopt the point where it is newer.
    /// Sequence numbers and fragment ids only ever go up.
    pub fn seed(&mut self, key: &Key, point: &ResumePoint, now: Instant) -> bool {
        let newer = point.server_num > self.screen.newest_num()
            || (point.server_num == self.screen.newest_num()
                && point.input_acked > self.input_acked);
        if !newer {
            return false;
        }
        let Ok(mut seeded) = Shadow::from_point(key, point, now) else { return false };
        seeded.client_seq = seeded.client_seq.max(self.client_seq);
        seeded.client_fragment_id = seeded.client_fragment_id.max(self.client_fragment_id);
        seeded.unreadable = self.unreadable;
        seeded.changed = true;
        *self = seeded;
        true
    }

    /// A datagram from the client, as forwarded to the server.
    pub fn client_datagram(&mut self, now: Instant, datagram: &[u8]) {
        match self.open_client(now, datagram) {
            Ok(opened) => self.absorb_client(now, opened),
            Err(_) => self.unreadable += 1,
        }
    }

    /// Authenticates a client datagram (a relay forwards only authentic ones: a forged one could
    /// claim any sequence number). Changes nothing the shadow reports.
    pub fn open_client(
        &mut self,
        now: Instant,
        datagram: &[u8],
    ) -> Result<ClientDatagram, WireError> {
        let opened = self.from_client.open(now, datagram)?;
        let seq = crate::wire::Nonce::of_datagram(datagram)
            .map(|n| n.seq)
            .ok_or(WireError::DatagramTooShort { len: datagram.len() })?;
        Ok(ClientDatagram { seq, payload: opened.payload })
    }

    /// Takes in an authentic client datagram (from [`Shadow::open_client`]) that was forwarded.
    pub fn absorb_client(&mut self, now: Instant, datagram: ClientDatagram) {
        if self.read_client(now, datagram).is_err() {
            self.unreadable += 1;
        }
    }

    /// A datagram from the server, as forwarded to the client.
    pub fn server_datagram(&mut self, now: Instant, datagram: &[u8]) {
        if self.read_server(now, datagram).is_err() {
            self.unreadable += 1;
        }
    }

    fn read_client(&mut self, now: Instant, datagram: ClientDatagram) -> Result<(), WireError> {
        self.client_seq = self.client_seq.max(Some(datagram.seq));
        let fragment = Fragment::parse(&datagram.payload)?;
        self.client_fragment_id = self.client_fragment_id.max(Some(fragment.id));
        self.changed = true;
        let Some(instruction) = self.client_fragments.add(&datagram.payload)? else {
            return Ok(());
        };
        if instruction.new_num != StateNum::SHUTDOWN {
            self.input_newest = self.input_newest.max(instruction.new_num);
        }
        self.input.receive(now, instruction);
        while self.input.next_unparked(now).is_some() {}
        // As mosh-server does: keep only what came after the oldest state still held, so the
        // copy of a long session's input stays small.
        self.input.take_new_diff();
        Ok(())
    }

    fn read_server(&mut self, now: Instant, datagram: &[u8]) -> Result<(), WireError> {
        let opened = self.from_server.open(now, datagram)?;
        let Some(instruction) = self.server_fragments.add(&opened.payload)? else { return Ok(()) };
        if instruction.ack_num != StateNum::SHUTDOWN && instruction.ack_num > self.input_acked {
            self.input_acked = instruction.ack_num;
            self.changed = true;
        }
        if matches!(self.screen.receive(now, instruction), Outcome::Newest { .. }) {
            self.changed = true;
        }
        while self.screen.next_unparked(now).is_some() {}
        Ok(())
    }

    /// Whether anything a save records changed since the last call.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// The number the next client datagram must have at least (above every one seen).
    pub fn next_client_seq(&self) -> u64 {
        self.client_seq.map_or(0, |s| s.saturating_add(1))
    }

    pub fn summary(&self) -> ShadowSummary {
        let fb = self.screen.newest().framebuffer();
        let size = fb.size();
        ShadowSummary { cols: size.cols, rows: size.rows, title: fb.title().to_string() }
    }

    /// What a new client needs to take the session over now.
    pub fn resume_point(&self) -> Result<ResumePoint, ShadowError> {
        let screen_state = self.screen.newest();
        let size = screen_state.framebuffer().size();
        let screen = screen_state.diff_from(&Complete::new(size.cols, size.rows));
        if self.input.newest_num() != self.input_newest {
            // A client state was seen whose base this copy does not hold.
            return Err(ShadowError::InputOutOfStep);
        }
        let pending = match (self.input.state(self.input_acked), self.input.newest_num()) {
            // Nothing sent after the acknowledged state (or the ack is of the newest).
            (_, newest) if newest <= self.input_acked => Vec::new(),
            (Some(base), _) => {
                let events =
                    self.input.newest().events_after(base).ok_or(ShadowError::InputOutOfStep)?;
                if events.is_empty() {
                    Vec::new()
                } else {
                    crate::wire::encode_user_message(&events)
                }
            }
            (None, _) => return Err(ShadowError::InputOutOfStep),
        };
        Ok(ResumePoint {
            server_num: self.screen.newest_num(),
            screen_cols: size.cols,
            screen_rows: size.rows,
            screen,
            input_acked: self.input_acked,
            input_next: StateNum(self.input_newest.0.max(self.input_acked.0).saturating_add(1)),
            input_pending: pending,
            next_seq: self.next_client_seq(),
            next_fragment_id: self
                .client_fragment_id
                .map_or(1, |id| id.saturating_add(FRAGMENT_ID_GAP)),
        })
    }
}
