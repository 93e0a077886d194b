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
//! Reading a client instruction means inflating it, and whoever holds the key can build one that
//! inflates to 4 MiB from a few KB, at datagram rate. So the copy inflates client instructions on a
//! budget ([`INFLATE_RATE`], [`INFLATE_BURST`]): past it, it skips client datagrams (they are
//! still forwarded; only the copy goes without), counts them in [`Shadow::over_budget`], and
//! gives no [`ResumePoint`] until a later client instruction has brought its input up to date.
//! Server instructions are not rationed: mosh-server deflated each one itself (more work than
//! inflating it), and a screen state the copy skipped could never be rebuilt, as the server's
//! later diffs build on it.
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

/// Bytes of client instructions the copy inflates per second, at most (see the module
/// documentation). A page's client keeps at most
/// [`MAX_UNACKED_INPUT`](super::MAX_UNACKED_INPUT) (64 KiB) of input outstanding and every
/// instruction carries all of it, sent about every 20 ms at most (mosh's shortest send interval): a
/// paste costs the copy about 3.2 MiB/s, typing almost nothing. A crafted instruction inflates
/// to 4 MiB from a few KB: this lets through two of them a second, where the thousand datagrams
/// a second a page may send would have the relay inflate about a gigabyte a second.
pub const INFLATE_RATE: u64 = 8 << 20;
/// The most the budget saves up while a session is quiet: four instructions of the largest size,
/// or five seconds of the largest paste.
pub const INFLATE_BURST: u64 = 16 << 20;

/// A token bucket of inflated bytes. It may go into debt by one instruction: an instruction is
/// inflated whenever some budget is left, and paid for afterwards (its size is known only then).
#[derive(Debug, Clone)]
struct InflateBudget {
    /// Bytes left (negative: owed).
    tokens: i64,
    /// When `tokens` was last topped up.
    at: Instant,
}

impl InflateBudget {
    fn full(now: Instant) -> Self {
        InflateBudget { tokens: INFLATE_BURST as i64, at: now }
    }

    /// Tops up for the time since the last call; says whether anything is left to spend.
    fn available(&mut self, now: Instant) -> bool {
        let micros = now.saturating_duration_since(self.at).as_micros();
        let earned = micros.saturating_mul(u128::from(INFLATE_RATE)) / 1_000_000;
        let cap = INFLATE_BURST as i64;
        let room = u128::try_from(cap.saturating_sub(self.tokens)).unwrap_or(0);
        // Never above the burst; `earned.min(room)` fits, as `room` came from an i64.
        self.tokens = self.tokens.saturating_add(earned.min(room) as i64);
        self.at = self.at.max(now);
        self.tokens > 0
    }

    fn spend(&mut self, bytes: u64) {
        self.tokens = self.tokens.saturating_sub(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

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

impl ClientDatagram {
    /// Whether this datagram may change the session: an instruction that carries input or a
    /// resize (a diff of the client's state, or a new state number), or one that cannot be read
    /// alone (a fragment of a larger instruction, garbage). Only a pure acknowledgement (the
    /// state the server has, nothing new) is `false`. A relay forwards only such datagrams from
    /// a read-only link: acknowledgements keep the server's screen coming, anything else would
    /// be typing.
    pub fn carries_input(&self) -> bool {
        let Ok(fragment) = Fragment::parse(&self.payload) else { return true };
        if fragment.num != 0 || !fragment.is_final {
            return true;
        }
        match Reassembler::new().add(&self.payload) {
            Ok(Some(i)) => !i.diff.is_empty() || i.new_num != i.old_num,
            _ => true,
        }
    }
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
    /// Client datagrams the copy skipped because its inflation budget was spent (forwarded all
    /// the same).
    pub over_budget: u64,
    /// Bytes of client instructions inflated (failed attempts included).
    pub inflated: u64,
    /// What is left of the client direction's inflation budget.
    client_budget: InflateBudget,
    /// The newest fragment id of a client datagram skipped over budget, until an instruction
    /// with a later id is taken in (a client's instructions get increasing ids and carry its
    /// newest state, so that one brings the input up to date, or shows it cannot).
    client_missed: Option<u64>,
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
            .field("over_budget", &self.over_budget)
            .field("inflated", &self.inflated)
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
            over_budget: 0,
            inflated: 0,
            client_budget: InflateBudget::full(now),
            client_missed: None,
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
        seeded.over_budget = self.over_budget;
        seeded.inflated = self.inflated;
        // A page's own point is whole (it knows what it sent): a missed datagram no longer
        // matters, but what was spent stays spent.
        seeded.client_budget = self.client_budget.clone();
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
        let fragment_id = Fragment::parse(&datagram.payload)?.id;
        self.client_fragment_id = self.client_fragment_id.max(Some(fragment_id));
        self.changed = true;
        if !self.client_budget.available(now) {
            // Not even handed to the reassembler: the copy goes without this datagram.
            self.over_budget += 1;
            self.client_missed = self.client_missed.max(Some(fragment_id));
            return Ok(());
        }
        let before = self.client_fragments.inflated_bytes();
        let added = self.client_fragments.add(&datagram.payload);
        let inflated = self.client_fragments.inflated_bytes().saturating_sub(before);
        self.inflated = self.inflated.saturating_add(inflated);
        // A duplicate fragment hands out the instruction again without inflating: copying it
        // costs as much, so it pays by its size.
        let handed = match &added {
            Ok(Some(instruction)) => instruction.diff.len() as u64,
            _ => 0,
        };
        self.client_budget.spend(inflated.max(handed));
        let Some(instruction) = added? else { return Ok(()) };
        if self.client_missed.is_some_and(|missed| fragment_id > missed) {
            self.client_missed = None;
        }
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

    /// The number of the newest screen state the copy holds (a viewer's feed wakes when it
    /// changes).
    pub fn screen_num(&self) -> u64 {
        self.screen.newest_num().0
    }

    /// The session's screen as the copy has it now (what a viewer is shown).
    pub fn framebuffer(&self) -> &crate::terminal::Framebuffer {
        self.screen.newest().framebuffer()
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
        if self.client_missed.is_some() {
            // Skipped over budget: a client state may have reached the server that this copy
            // never saw, and a point from it would reuse that state's number.
            return Err(ShadowError::InputOutOfStep);
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::session::{ClientSession, SessionConfig};
    use crate::transport::{Transport, TransportConfig};
    use crate::wire::{
        DEFAULT_MTU, Fragmenter, MAX_INFLATED_LEN, UserEvent, encode_instruction,
        encode_user_message,
    };

    fn key() -> Key {
        "PWSoCIVurTVBGXAj873xNg".parse().expect("key")
    }

    /// A client instruction's fragment payloads, as mosh-client's fragmenter cuts them.
    fn fragments(old: u64, new: u64, diff: Vec<u8>) -> Vec<Vec<u8>> {
        let instruction = Instruction {
            old_num: StateNum(old),
            new_num: StateNum(new),
            ack_num: StateNum(0),
            throwaway_num: StateNum(old),
            diff,
            chaff: vec![],
        };
        assert!(encode_instruction(&instruction).len() <= MAX_INFLATED_LEN);
        Fragmenter::new(DEFAULT_MTU).fragment(&instruction).expect("fits")
    }

    /// The same fragments under instruction id `id`: what a client retransmitting an instruction
    /// sends (one deflate of 4 MiB serves every copy, as it would for a mosh client).
    fn with_id(fragments: &[Vec<u8>], id: u64) -> Vec<Vec<u8>> {
        fragments
            .iter()
            .map(|payload| {
                Fragment { id, ..Fragment::parse(payload).expect("fragment") }.to_bytes()
            })
            .collect()
    }

    /// Feeds a client's fragment payloads, sealed under the key, to the shadow as the registry
    /// does (open, then absorb), checking each would be forwarded.
    fn feed(shadow: &mut Shadow, client: &mut PacketLayer, now: Instant, payloads: &[Vec<u8>]) {
        for payload in payloads {
            let datagram = client.seal(now, payload).expect("sequence numbers left");
            let opened = shadow.open_client(now, &datagram).expect("authentic: forwarded");
            shadow.absorb_client(now, opened);
        }
    }

    /// Issue 32, finding 8: a page holding the key sends instructions that inflate to 4 MiB from
    /// a few KB each, as fast as it can. The copy inflates a burst of them, then skips the rest
    /// (each still forwarded) until its budget refills; meanwhile it offers no point.
    #[test]
    fn a_compression_bomb_flood_is_rationed() {
        let start = Instant::from_millis(1_000);
        let mut shadow = Shadow::new(&key(), start);
        let mut client = PacketLayer::new(&key(), Direction::ToServer);
        // One keystroke, four MiB long: the largest instruction a receiver accepts.
        let diff = encode_user_message(&[UserEvent::Keys(vec![b'a'; MAX_INFLATED_LEN - 64])]);
        let bomb = fragments(0, 1, diff);
        let compressed: usize = bomb.iter().map(Vec::len).sum();
        assert!(compressed < 8 * 1024, "a bomb is {compressed} bytes on the wire");
        let one = MAX_INFLATED_LEN as u64;

        let mut sent = 0u64;
        let mut id = 1;
        for _ in 0..100 {
            feed(&mut shadow, &mut client, start, &with_id(&bomb, id));
            id += 1;
            sent += bomb.len() as u64;
        }
        let first = shadow.inflated;
        assert!(first <= INFLATE_BURST + one, "inflated {first} bytes at one instant");
        assert!(first >= INFLATE_BURST, "the burst is spent before any is refused ({first})");
        assert!(shadow.over_budget >= 90 * bomb.len() as u64, "{:?}", shadow);
        assert_eq!(shadow.unreadable, 0);
        // Every datagram was authentic and forwarded; the copy still tracks their numbers.
        assert_eq!(shadow.next_client_seq(), sent);
        assert_eq!(shadow.resume_point(), Err(ShadowError::InputOutOfStep));

        // A few seconds later the budget is back: it inflates again, a burst's worth at most.
        let later = start + Duration::from_secs(3);
        for _ in 0..20 {
            feed(&mut shadow, &mut client, later, &with_id(&bomb, id));
            id += 1;
        }
        let second = shadow.inflated - first;
        assert!(second >= 3 * one, "the budget refilled: {second} bytes inflated");
        assert!(second <= INFLATE_BURST + one, "inflated {second} bytes at one instant");

        // The client's next instruction (typing, after the flood) brings the copy up to date.
        let typed = fragments(0, 2, encode_user_message(&[UserEvent::Keys(b"ls\r".to_vec())]));
        feed(&mut shadow, &mut client, later + Duration::from_secs(3), &with_id(&typed, id));
        let point = shadow.resume_point().expect("whole again");
        assert_eq!(point.input_next, StateNum(3));
    }

    /// A session as people use it (typing, a paste as large as a client sends at once, a busy
    /// screen) never runs out of budget.
    #[test]
    fn a_normal_session_stays_within_budget() {
        let key = key();
        let (cols, rows) = (80, 24);
        let mut now = Instant::from_millis(1_000);
        let mut server = Transport::new(
            &TransportConfig::server(DEFAULT_MTU, 1),
            &key,
            Complete::new(cols, rows),
            UserStream::default(),
            now,
        );
        let mut client =
            ClientSession::<Complete>::new(SessionConfig::new(key.clone(), cols, rows), now);
        let mut shadow = Shadow::new(&key, now);
        for tick in 0..1_000u64 {
            now = now + Duration::from_millis(10);
            if tick % 5 == 0 {
                client.handle_input(now, &[b'a' + (tick % 26) as u8]);
            }
            if tick == 100 || tick == 500 {
                // A 1 MiB paste, sent 64 KiB outstanding at a time.
                client.handle_input(now, &vec![b'x'; 1 << 20]);
            }
            if tick % 10 == 0 {
                let line =
                    format!("\x1b[{};1H\x1b[3{}m{}", tick % 24 + 1, tick % 8, "#".repeat(79));
                server.update_local(now, |screen| screen.feed_host_bytes(line.as_bytes()));
            }
            client.handle_timeout(now);
            while let Some(d) = client.poll_transmit() {
                shadow.client_datagram(now, &d);
                server.handle_datagram(now, &d);
            }
            server.handle_timeout(now);
            while let Some(d) = server.poll_transmit() {
                shadow.server_datagram(now, &d);
                client.handle_datagram(now, &d);
            }
        }
        assert!(shadow.inflated > 2 << 20, "the pastes went through the copy ({:?})", shadow);
        assert_eq!((shadow.over_budget, shadow.unreadable), (0, 0), "{:?}", shadow);
        shadow.resume_point().expect("the copy is whole");
    }
}
