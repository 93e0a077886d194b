//! Drawing: when (the draw pacer, the overlay clock), what (the server's screen with the
//! predictions that may be shown and the notification bar), and only the difference to what
//! the terminal shows.

use std::time::Duration;

use super::{Effect, PageClient, Timer};
use crate::paste::PasteProgress;
use crate::relay_proto::ClientMessage;
use crate::session::{ClientSession, Pace, ServerState};
use crate::terminal::{
    Framebuffer, Notification, Renderer, Size, join_messages, overlay_notification, push_rows,
    rows_scrolled_off,
};
use crate::time::Instant;

/// The notification bar counts seconds: while it shows anything, or a flood, paste or
/// download is under way, the overlay clock wakes this often; otherwise only when the bar
/// would change (`Notification::next_change`), since every wake costs an idle tab a task.
pub const OVERLAY_TICK: Duration = Duration::from_secs(1);

/// What the terminal shows, to draw only the difference: the frame last drawn and the server
/// screen it came from (to tell which rows scrolled off since, into the terminal's
/// scrollback).
#[derive(Debug, Default)]
pub(super) struct Screen {
    shown: Option<Framebuffer>,
    server: Option<Framebuffer>,
    pub scrollback_rows: u64,
}

impl Screen {
    /// The terminal's screen is no longer what was drawn (a reflow, a new session): the next
    /// draw is whole.
    pub fn forget(&mut self) {
        self.shown = None;
        self.server = None;
    }

    /// The server's screen as of the last draw (what the terminal shows, without the overlays).
    pub fn drawn_server(&self) -> Option<&Framebuffer> {
        self.server.as_ref()
    }

    /// The bytes that turn what the terminal shows into `frame` (the server's screen with
    /// predictions) with the bar `note`, at the terminal's `size`; rows of `server` that
    /// scrolled off since the last draw go into the terminal's scrollback first.
    pub fn draw(
        &mut self,
        server: &Framebuffer,
        frame: &Framebuffer,
        note: &Notification<'_>,
        size: Size,
    ) -> Vec<u8> {
        let mut bytes = Vec::new();
        if let (Some(before), Some(shown)) = (&self.server, &mut self.shown) {
            let gone = if server.size() == size { rows_scrolled_off(before, server) } else { 0 };
            if gone > 0 {
                bytes = push_rows(shown, &before.rows()[..gone]);
                self.scrollback_rows += gone as u64;
            }
        }
        let wanted = overlay_notification(&frame.fitted(size), note);
        bytes.extend(Renderer::in_place().render(self.shown.as_ref(), &wanted));
        self.shown = Some(wanted);
        self.server = Some(server.clone());
        bytes
    }
}

/// The notification bar for `session` now, with `message`.
fn notification<'a, S: ServerState>(
    session: &ClientSession<S>,
    message: Option<&'a str>,
    now: Instant,
) -> Notification<'a> {
    Notification {
        since_server_state: session.since_last_contact(now),
        since_reply: session.since_last_reply(now),
        message,
        never_heard: !session.has_heard_server(),
    }
}

impl PageClient {
    /// The notification bar's message: the link's state, then the paste's and the download's
    /// progress, which share mosh's bar with it.
    fn bar_message(&self, paste: Option<&PasteProgress>, now: Instant) -> Option<String> {
        let line = paste.map(PasteProgress::line);
        let download = self.downloads.core.progress(now).map(|p| p.line());
        join_messages([self.link.message.as_deref(), line.as_deref(), download.as_deref()])
    }

    /// Something to show changed (`new_state`: the server's screen): reports the title, bell
    /// and clipboard at once, and draws when the pacer says (at once on a quiet screen, at the
    /// next animation frame during a flood, not while the page is hidden).
    pub(super) fn render(&mut self, now: Instant, new_state: bool) {
        let changes = self
            .session
            .as_ref()
            .map(|s| self.side_effects.observe(s.server_state().framebuffer()));
        let pace = self.pacer.request(new_state, now);
        if let Some(changes) = changes {
            if let Some(title) = changes.title {
                self.push(Effect::Title(title));
            }
            if changes.bell {
                self.push(Effect::Bell);
            }
            if let Some(text) = changes.clipboard {
                self.push(Effect::Clipboard(super::remote_copy(self.remote_copy, &text)));
            }
        }
        self.follow(pace, now);
        self.arm_overlay(now);
    }

    /// Does what the pacer said: asks for an animation frame (or sets its timer), draws; and
    /// asks the relay for another hold when the pacer wants one.
    pub(super) fn follow(&mut self, pace: Pace, now: Instant) {
        self.ask_relay_hold(now);
        if let Some(wait) = pace.wait {
            self.timers.set(Timer::Pacer, now + wait.max(Duration::from_millis(1)));
        }
        if pace.request_frame {
            self.timers.stop(Timer::Pacer);
            self.push(Effect::RequestFrame);
        }
        if let Some(new_state) = pace.draw {
            self.draw(now, new_state);
        }
    }

    /// The animation frame the client asked for ([`Effect::RequestFrame`]).
    pub fn animation_frame(&mut self, now: Instant) {
        let pace = self.pacer.on_animation_frame(now);
        self.follow(pace, now);
    }

    /// The page was hidden or shown: hidden, nothing is drawn; shown, the newest screen is
    /// drawn in one go, and the relay is asked for the hold that goes with it.
    pub fn set_visible(&mut self, now: Instant, visible: bool) {
        let pace = self.pacer.set_visible(visible, now);
        self.follow(pace, now);
    }

    /// Whether the relay may hold the server's datagrams and send them together, for a hidden
    /// page or during a flood (default true). The benchmark turns it off to measure both.
    pub fn set_relay_hold(&mut self, now: Instant, allowed: bool) {
        self.pacer.allow_relay_hold(allowed);
        self.follow(Pace::default(), now);
    }

    /// Asks the relay for the hold the pacer wants now, when it changed.
    pub(super) fn ask_relay_hold(&mut self, now: Instant) {
        let Some(hold) = self.pacer.poll_relay_hold(now) else { return };
        if self.link.current.is_some() {
            self.send_hold(hold);
        }
    }

    /// Asks the relay to hold the server's datagrams up to `hold` (zero: not at all).
    pub(super) fn send_hold(&mut self, hold: Duration) {
        let ms = u32::try_from(hold.as_millis()).unwrap_or(u32::MAX);
        self.push(Effect::Control(ClientMessage::Hold { ms }));
    }

    /// The overlay clock: draws only when a draw would show something new (the bar's text, a
    /// paste's progress, the end of a flood), and lets the relay stop holding datagrams once a
    /// flood is over. An idle page draws nothing: each draw costs the browser a frame.
    pub(super) fn tick(&mut self, now: Instant) {
        let progress = self.pastes.queue.progress(now);
        let bar = self.session.as_ref().and_then(|session| {
            let message = self.bar_message(progress.as_ref(), now);
            notification(session, message.as_deref(), now).text()
        });
        let due = bar != self.drawn_bar
            || progress != self.pastes.reported
            || self.pacer.flooding(now) != self.flooding_reported;
        if due {
            self.render(now, false);
        } else {
            self.ask_relay_hold(now);
            self.arm_overlay(now);
        }
    }

    /// When the overlay clock should wake next (see [`OVERLAY_TICK`]).
    fn overlay_delay(&self, now: Instant) -> Duration {
        let lively = self.link.message.is_some()
            || self.drawn_bar.is_some()
            || self.flooding_reported
            || self.pacer.flooding(now)
            || self.pastes.queue.progress(now).is_some()
            || self.downloads.core.progress(now).is_some();
        match self.session.as_ref() {
            Some(session) if !lively => notification(session, None, now).next_change(),
            _ => OVERLAY_TICK,
        }
    }

    /// Sets the overlay clock for [`overlay_delay`](Self::overlay_delay) from now, unless it
    /// wakes sooner already.
    pub(super) fn arm_overlay(&mut self, now: Instant) {
        let at = now + self.overlay_delay(now).max(Duration::from_millis(1));
        self.timers.set_unless_sooner(Timer::Overlay, at);
    }

    /// Draws the core's newest screen with the notification bar (only the difference to what
    /// the terminal shows), and reports paste progress and floods.
    pub(super) fn draw(&mut self, now: Instant, new_state: bool) {
        if self.resizing {
            return;
        }
        let progress = self.pastes.queue.progress(now);
        let paste_report = (progress != self.pastes.reported).then(|| {
            self.pastes.reported.clone_from(&progress);
            progress.clone()
        });
        let started = self.cost.read();
        let message = self.bar_message(progress.as_ref(), now);
        let size = self.size;
        let bytes = self.session.as_mut().map(|session| {
            let note = notification(session, message.as_deref(), now);
            self.drawn_bar = note.text();
            // The server's screen with the predictions that may be shown, then the bar.
            let frame = session
                .display_frame()
                .unwrap_or_else(|| session.server_state().framebuffer().clone());
            let server = session.server_state().framebuffer();
            let bytes = self.screen.draw(server, &frame, &note, size);
            // Every keystroke whose client state the server has acknowledged is echoed by the
            // first frame with visible change written after that ack; when predictions are
            // shown, a new server frame that changes nothing matches what was predicted, so it
            // is that echo too.
            let echoed = !bytes.is_empty() || session.predictor().showing();
            if echoed && new_state && session.has_heard_server() {
                self.echo.frame_drawn(now, session.acked_state_num());
                self.milestones.first_frame.get_or_insert(now);
            }
            if !bytes.is_empty() {
                self.terminal_writes += 1;
            }
            bytes
        });
        self.cost.diff_ms += self.cost.read() - started;
        let flooding = self.pacer.flooding(now);
        let flood_report = (flooding != self.flooding_reported).then(|| {
            self.flooding_reported = flooding;
            flooding
        });
        if let Some(p) = paste_report {
            self.push(Effect::PasteProgress(p));
        }
        if let Some(on) = flood_report {
            self.push(Effect::Flooding(on));
        }
        if let Some(bytes) = bytes.filter(|b| !b.is_empty()) {
            self.push(Effect::Write(bytes));
        }
    }

    /// The page is about to resize the terminal. The terminal moves screen rows into its
    /// scrollback when it shrinks (and back out when it grows), while the screen is repainted
    /// after a resize anyway: so the screen is cleared, the cursor homed, and nothing drawn
    /// until [`end_resize`](Self::end_resize), and the scrollback keeps only what scrolled
    /// off, once.
    pub fn begin_resize(&mut self) {
        self.resizing = true;
        self.screen.forget();
        self.push(Effect::Write(b"\x1b[H\x1b[2J".to_vec()));
    }

    /// The resize is done (or was not needed): draw again, everything, at `size`.
    pub fn end_resize(&mut self, now: Instant, size: Size) {
        self.resizing = false;
        self.size = size;
        self.screen.forget();
        // Repainted now, not at the next animation frame: the terminal has just resized and
        // shows a cleared screen, and a paced draw left for later raced the next resize (lines
        // went missing after several resizes in a row).
        self.draw(now, false);
    }
}
