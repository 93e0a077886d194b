//! The session's traffic: keys in, datagrams in, and what the session has to send, tell and
//! wait for after each (`flush`).

use super::{Effect, PageClient, Timer};
use crate::paste::KeyAction;
use crate::session::{CloseReason, Event};
use crate::terminal::Size;
use crate::time::Instant;

impl PageClient {
    /// Typed input: held behind an unfinished paste (Escape cancels it instead), else sent.
    /// The relay's hold ends before the key leaves.
    pub fn key(&mut self, now: Instant, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.viewing {
            return self.tell_view_only();
        }
        // The person is typing: every echo is drawn at once, flood or not.
        self.pacer.note_input(now);
        let action = self.pastes.queue.key(now, bytes);
        // And the relay holds nothing back any more, before the key goes out.
        self.ask_relay_hold(now);
        match action {
            KeyAction::Send => self.send_input(now, bytes),
            KeyAction::Held => self.render(now, false),
            KeyAction::CancelledPastes => self.pastes_cancelled(now),
        }
    }

    /// Hands bytes to the session now (or keeps them until the first session exists).
    pub(super) fn send_input(&mut self, now: Instant, bytes: &[u8]) {
        if bytes.is_empty() || !self.keeps_session() {
            return;
        }
        let Some(s) = self.session.as_mut() else {
            self.early_input.extend_from_slice(bytes);
            return;
        };
        s.handle_input(now, bytes);
        if let Some(restored) = self.restored.as_mut() {
            restored.typed.extend_from_slice(bytes);
        }
        self.flush(now, false);
        if let Some(num) = self.session.as_ref().map(|s| s.sent_state_num()) {
            self.echo.key_sent(now, num);
        }
        // Predictions show at once, not on the next server frame.
        self.render(now, false);
    }

    /// The keys kept until a session existed go to it now (sending them flushes), or the
    /// session just flushes.
    pub(super) fn send_early_input(&mut self, now: Instant) {
        let early = std::mem::take(&mut self.early_input);
        if early.is_empty() {
            self.flush(now, false);
        } else {
            self.send_input(now, &early);
        }
    }

    /// A datagram from the relay (framed: a server datagram, or a part of one).
    pub fn datagram(&mut self, now: Instant, framed: &[u8]) {
        self.link.counters.datagrams_in += 1;
        if let Some(liveness) = self.link.liveness.as_mut() {
            liveness.heard(now);
        }
        match self.link.joiner.push(framed) {
            Ok(Some(d)) => {
                if let Some(s) = self.session.as_mut() {
                    s.handle_datagram_staged(now, &d, &mut self.cost.receive(1));
                }
            }
            Ok(None) => return,
            Err(_) => {
                self.link.counters.framing_errors += 1;
                return;
            }
        }
        self.flush(now, true);
    }

    /// Server datagrams the relay held for the page: handled together (they are whole: no
    /// joiner), with the timestamp echo the pacer picks for a batch, then one flush.
    pub(super) fn held_datagrams(&mut self, now: Instant, datagrams: &[Vec<u8>]) {
        self.link.counters.held_batches += 1;
        self.link.counters.held_datagrams += datagrams.len() as u64;
        let Some(s) = self.session.as_mut() else { return };
        let echo = self.pacer.held_batch_echo();
        s.handle_held_datagrams(now, datagrams, echo, &mut self.cost.receive(datagrams.len()));
        self.flush(now, true);
    }

    /// The terminal has a new size.
    pub fn resized(&mut self, now: Instant, size: Size) {
        self.size = size;
        if self.viewing {
            // The viewer's terminal follows the session's size (the relay's updates); it never
            // resizes the session.
            return;
        }
        // The terminal reflowed its buffer: what it shows is no longer what was drawn.
        self.screen.forget();
        let Some(s) = self.session.as_mut() else { return };
        s.handle_resize(now, size.cols.max(1), size.rows.max(1));
        self.flush(now, false);
        self.render(now, false);
    }

    pub(super) fn session_timeout(&mut self, now: Instant) {
        let Some(s) = self.session.as_mut() else { return };
        s.handle_timeout(now);
        self.flush(now, false);
        // The predictor's judge may have changed what is shown (a stalled echo, a reset).
        self.render(now, false);
    }

    /// Drains the session after a `handle_*`: the nonce reservation, then datagrams out,
    /// events, the session's deadline; redraws on a new state, saves when due.
    pub(super) fn flush(&mut self, now: Instant, from_server: bool) {
        let Some(session) = self.session.as_mut() else { return };
        let mut out = Vec::new();
        while let Some(d) = session.poll_transmit() {
            out.push(d);
        }
        let mut changed = false;
        let mut closed = None;
        while let Some(e) = session.poll_event() {
            match e {
                Event::ServerStateChanged { .. } => changed = true,
                Event::Closed(reason) => closed = Some(reason),
            }
        }
        let deadline = session.poll_timeout();
        // Reserve the nonce bound before any of these numbers leaves.
        self.reserve_nonces();
        for d in out {
            if self.link.current.is_some() {
                self.link.counters.datagrams_out += 1;
                self.push(Effect::Datagram(d));
            } else {
                // Offline: the session keeps the state and retransmits after reconnecting.
                self.link.counters.dropped_offline += 1;
            }
        }
        self.timers.put(Timer::Session, deadline);
        if changed {
            self.milestones.live.get_or_insert(now);
            self.render(now, from_server);
        }
        self.save_if_due(now);
        if let Some(reason) = closed {
            self.end(
                now,
                match reason {
                    CloseReason::ServerShutdown => "The shell exited; the session is over.",
                    CloseReason::ClientShutdown => "The session was closed.",
                    CloseReason::ShutdownTimedOut => {
                        "The session was closed (the server did not answer)."
                    }
                },
            );
        }
    }
}
