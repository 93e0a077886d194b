//! The relay as a warm spare's first client, so that the spare's shell starts before any page
//! asks for it.
//!
//! mosh-server runs its command only when the first new client state arrives (its child waits
//! for the server's release, MOSH-PROTOCOL.md 1.4-1.5): a spare mosh-server started ahead still
//! leaves the recorder's and the shell's start on the page's path. A [`Prestart`] is the client
//! that releases it: its one state is the window size it is started with, so the shell starts at
//! once and draws its prompt on the server's screen, and it keeps that screen (acknowledging the
//! server's frames, as any client does) until a page takes the spare.
//!
//! The page then continues the session exactly as a page that resumes one: [`Prestart::hand_over`]
//! is the point it continues from (the screen with the prompt, the input state the server has),
//! and a client resumed from it numbers its states above every one this client sent
//! ([`RESUME_STATE_GAP`](super::RESUME_STATE_GAP) above its next) and its datagrams from the
//! point's sequence number (the relay raises it to its floor): no state number reaches the server
//! twice (its first state, the page's size, is never taken for a duplicate and lost), and no nonce
//! is used twice under the key. Its first state carries the page's size: the shell gets SIGWINCH
//! before anything is typed.

use super::{ClientSession, ResumePoint, SessionConfig};
use crate::terminal::Complete;
use crate::time::Instant;
use crate::wire::Key;

/// A spare session's first client (see the module documentation). It never types.
#[derive(Debug)]
pub struct Prestart {
    session: ClientSession<Complete>,
}

impl Prestart {
    /// A client of the session under `key` at `cols`×`rows`; its first datagram releases the
    /// shell (drain [`poll_transmit`](Self::poll_transmit)).
    pub fn new(key: Key, cols: u16, rows: u16, now: Instant) -> Self {
        let mut config = SessionConfig::new(key, cols.max(1), rows.max(1));
        // Nothing is typed: no local echo to predict.
        config.predict.mode = crate::predict::PredictMode::Never;
        Prestart { session: ClientSession::new(config, now) }
    }

    /// A datagram from the server (or anything claiming to be one: garbage is dropped).
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) {
        self.session.handle_datagram(now, datagram);
        while self.session.poll_event().is_some() {}
    }

    /// The instant from [`poll_timeout`](Self::poll_timeout) has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
        while self.session.poll_event().is_some() {}
    }

    /// The next datagram to send to the server.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.session.poll_transmit()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    /// Whether the server answered (the shell was released).
    pub fn has_heard_server(&self) -> bool {
        self.session.has_heard_server()
    }

    /// The server's newest screen as this client has it.
    pub fn screen(&self) -> &Complete {
        self.session.server_state()
    }

    /// The point a page continues from; this client sends nothing more.
    pub fn hand_over(self) -> ResumePoint {
        self.session.resume_point()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::session::Shadow;
    use crate::transport::{Transport, TransportConfig, UserStream};
    use crate::wire::{DEFAULT_MTU, StateNum, UserEvent};

    fn key() -> Key {
        "PWSoCIVurTVBGXAj873xNg".parse().expect("key")
    }

    type Server = Transport<Complete, UserStream>;

    fn server(now: Instant) -> Server {
        Transport::new(
            &TransportConfig::server(DEFAULT_MTU, 1),
            &key(),
            Complete::new(80, 24),
            UserStream::default(),
            now,
        )
    }

    /// The sequence number in a datagram's clear nonce (direction bit off).
    fn seq(datagram: &[u8]) -> u64 {
        u64::from_be_bytes(datagram[..8].try_into().expect("nonce")) & !(1 << 63)
    }

    /// What the relay does with a spare: the prestart client releases the shell, the shell draws
    /// its prompt, and a page takes over through the relay's copy (the registry's path for a
    /// resume); returns the server, the page's client, the sequence numbers and the highest
    /// state number the prestart sent.
    fn take_over(
        page_size: (u16, u16),
        lose_first_ack: bool,
    ) -> (Server, ClientSession<Complete>, Vec<u64>, Vec<u64>, StateNum) {
        let mut now = Instant::from_millis(1_000);
        let mut server = server(now);
        let mut pre = Prestart::new(key(), 80, 24, now);
        let mut pre_seqs = Vec::new();
        let mut pre_states = StateNum(0);
        for tick in 0..100u64 {
            now = now + Duration::from_millis(10);
            pre.handle_timeout(now);
            while let Some(d) = pre.poll_transmit() {
                pre_seqs.push(seq(&d));
                server.handle_datagram(now, &d);
            }
            pre_states = pre_states.max(server.remote_num());
            if tick == 3 {
                // The shell was released by the first state: it draws its prompt.
                assert!(server.remote_num() >= StateNum(1), "the first state arrived");
                server.update_local(now, |s| s.feed_host_bytes(b"user@host:~$ "));
            }
            server.handle_timeout(now);
            while let Some(d) = server.poll_transmit() {
                if lose_first_ack && tick < 5 {
                    continue;
                }
                pre.handle_datagram(now, &d);
            }
        }
        assert!(pre.has_heard_server() || lose_first_ack);
        // The relay's copy starts from the handed-over point; the page gets its point with the
        // sequence numbers from the floor (above all the prestart used).
        let point = pre.hand_over();
        let floor = point.next_seq + (1 << 20);
        assert!(pre_seqs.iter().all(|s| *s < point.next_seq), "{pre_seqs:?} {point:?}");
        let shadow = Shadow::from_point(&key(), &point, now).expect("a point the copy takes");
        let given = ResumePoint { next_seq: floor, ..shadow.resume_point().expect("whole") };
        let config = SessionConfig::new(key(), page_size.0, page_size.1);
        let mut page = ClientSession::resume(config, &given, now).expect("resumes");
        page.raise_next_seq(floor);
        let mut page_seqs = Vec::new();
        for _ in 0..20 {
            now = now + Duration::from_millis(10);
            page.handle_timeout(now);
            while let Some(d) = page.poll_transmit() {
                page_seqs.push(seq(&d));
                server.handle_datagram(now, &d);
            }
            server.handle_timeout(now);
            while let Some(d) = server.poll_transmit() {
                page.handle_datagram(now, &d);
            }
        }
        (server, page, pre_seqs, page_seqs, pre_states)
    }

    #[test]
    fn a_page_continues_a_prestarted_session_at_its_own_size_with_fresh_numbers() {
        let (server, page, pre_seqs, page_seqs, pre_states) = take_over((101, 37), false);
        // The page's first state is newer than every state the prestart sent: the server
        // applied it (a duplicate number would be dropped with its resize).
        assert!(server.remote_num() > pre_states, "{:?} <= {pre_states:?}", server.remote_num());
        let last_resize = server.remote().events().iter().rev().find_map(|e| match e {
            UserEvent::Resize { cols, rows } => Some((*cols, *rows)),
            UserEvent::Keys(_) => None,
        });
        assert_eq!(last_resize, Some((101, 37)), "the shell gets the page's size");
        // No nonce twice under the key.
        let highest = pre_seqs.iter().max().copied().expect("the prestart sent");
        assert!(!page_seqs.is_empty() && page_seqs.iter().all(|s| *s > highest));
        // The prompt was on the page's screen from its first moment.
        let fb = page.server_state().framebuffer();
        let row: &crate::terminal::Row = fb.row(0).expect("a first row");
        let text: String = row.cells().iter().map(|c| c.text()).collect();
        assert!(text.starts_with("user@host:~$"), "{text:?}");
    }

    #[test]
    fn a_page_that_takes_over_before_the_server_acknowledged_still_sends_its_size() {
        // The server's answers to the prestart were lost: the point holds the unacknowledged
        // first state as pending input, and the page's first state still comes after it.
        let (server, _page, _pre, _seqs, pre_states) = take_over((90, 30), true);
        assert!(server.remote_num() > pre_states);
        let sizes: Vec<_> = server
            .remote()
            .events()
            .iter()
            .filter_map(|e| match e {
                UserEvent::Resize { cols, rows } => Some((*cols, *rows)),
                UserEvent::Keys(_) => None,
            })
            .collect();
        assert_eq!(sizes.last(), Some(&(90, 30)), "{sizes:?}");
        assert!(
            server.remote().events().iter().all(|e| matches!(e, UserEvent::Resize { .. })),
            "nothing but sizes reached the shell"
        );
    }
}
