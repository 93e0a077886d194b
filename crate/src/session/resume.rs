//! Taking a session over from an earlier client of it (a page reload, a reopened tab).
//!
//! mosh-server keeps diffing from the last screen state the client acknowledged and keeps
//! applying the client's input as diffs from the last input state it acknowledged. A client that
//! holds those two states, the state numbers, and sequence numbers above every one used under the
//! key can carry on where the earlier one stopped; stock mosh-client cannot, because it keeps none
//! of it. A [`ResumePoint`] is that: small, encoded to bytes for browser storage or the relay.
//!
//! - **Screen**: the newest server state received, as the HostMessage that draws it on a blank
//!   screen of its size (the same diff mosh-server would send), and its number. The server
//!   retains every state from the one the client acknowledged onwards, so it can diff from this
//!   one (unless its sent-state list overflowed, more than 32 frames in flight, and thinned this
//!   one out: then nothing it sends applies and the driver must start over).
//! - **Input**: the number of the client's last state the server acknowledged, and every event
//!   typed since (sent or not, and input still held back): the resumed client sends them again as
//!   one diff from that state, numbered above every state the earlier client sent, so the server
//!   applies exactly what it had not yet (its diff against what it had is the rest) and nothing
//!   typed is lost or doubled.
//! - **Nonces**: the next sequence number and fragment id; AES-OCB must never see a (direction,
//!   sequence number) pair twice under one key. A driver that cannot save a point at the last
//!   moment must reserve ranges ahead (as the page's `NonceStore` does) and pass the larger.

use std::fmt;

use super::{ClientSession, SessionConfig};
use crate::terminal::Complete;
use crate::time::Instant;
use crate::transport::{SyncState, Transport, UserStream};
use crate::wire::StateNum;

/// A resumed client numbers its states this far above the point's `input_next`: a point written
/// before a crash may be older than the last states sent (at one per key, far fewer than this
/// between two saves a few seconds apart). State numbers are 64-bit: room for 2^43 takeovers.
pub const RESUME_STATE_GAP: u64 = 1 << 20;

/// Leads every encoded point; the digit is the format's version.
const MAGIC: &[u8; 4] = b"TRP1";
/// A screen or input larger than this is not a point this code wrote.
const MAX_PART: usize = 16 << 20;

/// Everything a new client needs to continue a session (see the module documentation).
#[derive(Clone, PartialEq, Eq)]
pub struct ResumePoint {
    /// The newest server state received, and the HostMessage that draws it from blank.
    pub server_num: StateNum,
    pub screen_cols: u16,
    pub screen_rows: u16,
    pub screen: Vec<u8>,
    /// The client's newest state the server acknowledged.
    pub input_acked: StateNum,
    /// The number the next client state gets (above every number sent so far).
    pub input_next: StateNum,
    /// Every user event after `input_acked`, as a UserMessage.
    pub input_pending: Vec<u8>,
    pub next_seq: u64,
    pub next_fragment_id: u64,
}

impl fmt::Debug for ResumePoint {
    /// Sizes and numbers only: the screen and the typed input are the user's (maybe a password).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResumePoint")
            .field("server_num", &self.server_num.0)
            .field("screen", &format_args!("{}x{}", self.screen_cols, self.screen_rows))
            .field("screen_bytes", &self.screen.len())
            .field("input_acked", &self.input_acked.0)
            .field("input_next", &self.input_next.0)
            .field("input_pending_bytes", &self.input_pending.len())
            .field("next_seq", &self.next_seq)
            .field("next_fragment_id", &self.next_fragment_id)
            .finish()
    }
}

/// Why a point could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("not a resume point of this version")]
    Format,
    #[error("the resume point is cut short")]
    Truncated,
    #[error("the resume point's {0} does not apply: {1}")]
    Invalid(&'static str, String),
}

impl ResumePoint {
    /// The bytes to store: magic, then fixed-width little-endian numbers and length-prefixed parts.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.screen.len() + self.input_pending.len());
        out.extend_from_slice(MAGIC);
        for n in [self.server_num.0, self.input_acked.0, self.input_next.0] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        out.extend_from_slice(&self.next_seq.to_le_bytes());
        out.extend_from_slice(&self.next_fragment_id.to_le_bytes());
        out.extend_from_slice(&self.screen_cols.to_le_bytes());
        out.extend_from_slice(&self.screen_rows.to_le_bytes());
        for part in [&self.screen, &self.input_pending] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part);
        }
        out
    }

    /// Reads what [`encode`](Self::encode) wrote. Storage is outside our control: anything else
    /// is an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<ResumePoint, ResumeError> {
        let mut r = Reader(bytes);
        if r.take(MAGIC.len())? != MAGIC {
            return Err(ResumeError::Format);
        }
        let server_num = StateNum(r.u64()?);
        let input_acked = StateNum(r.u64()?);
        let input_next = StateNum(r.u64()?);
        let next_seq = r.u64()?;
        let next_fragment_id = r.u64()?;
        let screen_cols = r.u16()?;
        let screen_rows = r.u16()?;
        let screen = r.part()?;
        let input_pending = r.part()?;
        if !r.0.is_empty() {
            return Err(ResumeError::Format);
        }
        Ok(ResumePoint {
            server_num,
            screen_cols,
            screen_rows,
            screen,
            input_acked,
            input_next,
            input_pending,
            next_seq,
            next_fragment_id,
        })
    }

    /// The screen it holds, rebuilt.
    pub fn server_state(&self) -> Result<Complete, ResumeError> {
        if self.screen_cols == 0 || self.screen_rows == 0 {
            return Err(ResumeError::Invalid("screen", "a size of 0".into()));
        }
        // The size a Resize may ask for, no more: a point from storage or a relay is not trusted
        // to allocate gigabytes (found by fuzz/fuzz_targets/resume_point.rs).
        if usize::from(self.screen_cols) * usize::from(self.screen_rows)
            > crate::terminal::MAX_CELLS
        {
            return Err(ResumeError::Invalid("screen", "larger than any screen".into()));
        }
        let mut state = Complete::new(self.screen_cols, self.screen_rows);
        state.apply(&self.screen).map_err(|e| ResumeError::Invalid("screen", e.to_string()))?;
        Ok(state)
    }

    /// The input it holds, rebuilt.
    fn pending_input(&self) -> Result<UserStream, ResumeError> {
        let mut pending = UserStream::default();
        pending
            .apply(&self.input_pending)
            .map_err(|e| ResumeError::Invalid("input", e.to_string()))?;
        Ok(pending)
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ResumeError> {
        if self.0.len() < n {
            return Err(ResumeError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, ResumeError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| ResumeError::Truncated)?))
    }

    fn u16(&mut self) -> Result<u16, ResumeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes(b.try_into().map_err(|_| ResumeError::Truncated)?))
    }

    fn part(&mut self) -> Result<Vec<u8>, ResumeError> {
        let b = self.take(4)?;
        let len = u32::from_le_bytes(b.try_into().map_err(|_| ResumeError::Truncated)?) as usize;
        if len > MAX_PART {
            return Err(ResumeError::Format);
        }
        Ok(self.take(len)?.to_vec())
    }
}

impl ClientSession<Complete> {
    /// What a later client needs to carry on from here (save it when the page goes away, and
    /// now and then before: a crash loses only what came after the last save).
    pub fn resume_point(&self) -> ResumePoint {
        let screen_state = self.transport.remote();
        let size = screen_state.framebuffer().size();
        let screen = screen_state.diff_from(&Complete::new(size.cols, size.rows));
        let mut pending = self.transport.local().clone();
        pending.subtract(self.transport.sender().acked_state());
        let held: Vec<u8> = self.held_input.iter().copied().collect();
        pending.push_keys(&held);
        let sender = self.transport.sender();
        ResumePoint {
            server_num: self.transport.remote_num(),
            screen_cols: size.cols,
            screen_rows: size.rows,
            screen,
            input_acked: sender.acked_num(),
            input_next: StateNum(sender.last_sent_num().0.saturating_add(1)),
            input_pending: pending.diff_from(&UserStream::default()),
            next_seq: self.transport.next_seq(),
            next_fragment_id: self.transport.next_fragment_id(),
        }
    }

    /// A client that continues the session `point` was taken from. `config` carries the key and
    /// the window size now (a different size is sent as a resize); its sequence numbers are
    /// raised to the point's when lower. The screen shows at once, before the server answers.
    pub fn resume(
        config: SessionConfig,
        point: &ResumePoint,
        now: Instant,
    ) -> Result<Self, ResumeError> {
        let screen = point.server_state()?;
        let pending = point.pending_input()?;
        let mut config = config;
        // A point saved a moment before a crash (no `pagehide`) may predate states the old
        // client still sent: skip far above them, so no number names two different states.
        let input_next = StateNum(point.input_next.0.saturating_add(RESUME_STATE_GAP));
        config.first_seq = config.first_seq.max(point.next_seq);
        config.first_fragment_id = config.first_fragment_id.max(point.next_fragment_id);
        let transport = Transport::resumed(
            &Self::transport_config(&config),
            &config.key,
            (point.input_acked, UserStream::default()),
            pending,
            input_next,
            (point.server_num, screen),
            now,
        );
        let mut session = Self::with_transport(config.clone(), transport, now);
        // The window size, even when unchanged: a non-empty first state makes mosh-server
        // acknowledge within its 100 ms ack delay (an empty one waits for its 3 s heartbeat), so
        // the session is live a round trip after the link opens (a same-size resize changes
        // nothing on the server: no SIGWINCH).
        session.handle_resize(now, config.cols, config.rows);
        session.after_input(now);
        Ok(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Key;

    fn key() -> Key {
        "zr0jtuYVKJnfJHP/XOOsbQ".parse().expect("key")
    }

    fn session_with_screen() -> ClientSession<Complete> {
        let config = SessionConfig::new(key(), 20, 4);
        // A screen with colours, a title and the cursor mid-row, as a server diff would draw it.
        let mut shown = Complete::new(20, 4);
        shown.feed_host_bytes(b"\x1b]0;build\x07\x1b[1;31mred\x1b[0m plain\r\nsecond\x1b[2;4H");
        shown.set_echo_ack(StateNum(3));
        let transport = Transport::resumed(
            &ClientSession::<Complete>::transport_config(&config),
            &config.key,
            (StateNum(5), UserStream::default()),
            UserStream::default(),
            StateNum(9),
            (StateNum(7), shown),
            Instant::ZERO,
        );
        let mut s = ClientSession::with_transport(config, transport, Instant::ZERO);
        s.handle_input(Instant::ZERO, b"typed");
        s
    }

    #[test]
    fn a_point_round_trips_and_rebuilds_the_same_screen() {
        let s = session_with_screen();
        let point = s.resume_point();
        assert_eq!(ResumePoint::decode(&point.encode()), Ok(point.clone()));
        let rebuilt = point.server_state().expect("screen");
        assert_eq!(&rebuilt, s.server_state(), "cells, pen, cursor, title and echo ack");
        assert_eq!((point.server_num, point.input_acked), (StateNum(7), StateNum(5)));
        assert!(point.input_next > StateNum(9), "above every number sent");
        let pending = point.pending_input().expect("input");
        assert_eq!(pending.key_bytes(), 5, "what was typed and not acknowledged");
    }

    #[test]
    fn the_debug_form_shows_no_screen_or_input() {
        let point = session_with_screen().resume_point();
        let shown = format!("{point:?}");
        assert!(!shown.contains("typed") && !shown.contains("red"), "{shown}");
    }

    #[test]
    fn anything_else_is_an_error_not_a_panic() {
        let good = session_with_screen().resume_point().encode();
        assert_eq!(ResumePoint::decode(b"nope"), Err(ResumeError::Format));
        for cut in 0..good.len() {
            assert!(ResumePoint::decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(ResumePoint::decode(&long), Err(ResumeError::Format));
        // A length beyond the limit is refused before anything is allocated.
        let mut huge = good[..MAGIC.len() + 44].to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(ResumePoint::decode(&huge), Err(ResumeError::Format));
        // A screen that does not decode.
        let mut bad = session_with_screen().resume_point();
        bad.screen = vec![0xff; 7];
        assert!(matches!(bad.server_state(), Err(ResumeError::Invalid("screen", _))));
        assert!(
            ClientSession::resume(SessionConfig::new(key(), 20, 4), &bad, Instant::ZERO).is_err()
        );
    }
}
