//! The connection loop as a state machine: restore what the tab saved, reach the relay, weigh
//! the relay's copy of the session against the page's own on `ready`, serve the link (liveness,
//! control lines), and pause before the next attempt.

use std::time::Duration;

use super::{
    Effect, LinkId, NonceBounds, NonceReservation, PageClient, RESTORED_MTU, Restored, Timer,
};
use crate::relay_client::{
    self, ConnectError, ControlEvent, FailCode, LinkCheck, Liveness, PING_AFTER, SavedSession,
    Status, Takeover,
};
use crate::relay_proto::control::Ready;
use crate::relay_proto::framing::Joiner;
use crate::relay_proto::{ClientMessage, ErrorCode, Hello, Mode, RelayInfo, ServerMessage};
use crate::session::{ClientSession, ResumePoint, SessionConfig};
use crate::time::Instant;
use crate::wire::Key;

/// What the driver knows of a link it just opened.
#[derive(Debug)]
pub struct LinkUp<'a> {
    /// `webtransport` or `websocket`.
    pub kind: &'static str,
    /// The largest datagram the link carries.
    pub max_datagram_size: usize,
    /// The relay's answer to `hello`.
    pub ready: &'a Ready,
}

impl PageClient {
    /// The session this tab had before a reload, if it saved one: it becomes the session now,
    /// drawn before the relay is even asked; the first `ready` confirms it (or the relay says
    /// it is over, and a new one starts). `kept`: the nonce bounds kept for a key.
    pub fn restore(
        &mut self,
        now: Instant,
        saved: Option<SavedSession>,
        kept: &dyn Fn(&str) -> Option<NonceBounds>,
    ) {
        let Some(saved) = saved.filter(|_| !self.viewing) else { return };
        let resumed = saved.fits(&self.target).then(|| {
            let key = saved.key_text.parse().ok()?;
            let (config, nonces) = self.session_config(key, &saved.key_text, RESTORED_MTU, kept);
            ClientSession::resume(config, &saved.point, now).ok().map(|s| (s, nonces))
        });
        let Some(Some((session, nonces))) = resumed else {
            // Not for this page (bridge mode, another server): the browser's copy stays.
            self.push(Effect::ForgetSession(None));
            return;
        };
        self.session = Some(session);
        self.nonces = Some(nonces);
        self.session_id = Some(saved.session_id.clone());
        self.key_text = Some(saved.key_text);
        self.restored = Some(Restored { point: saved.point, typed: Vec::new() });
        self.screen.forget();
        self.push(Effect::SessionId(saved.session_id));
        self.render(now, false);
        self.milestones.restored = Some(now);
        // Keys typed while the page was still starting go first, before anything typed later.
        self.send_early_input(now);
    }

    /// Starts the overlay clock and the connection loop.
    pub fn start(&mut self, now: Instant) {
        self.arm_overlay(now);
        self.connect(now);
    }

    /// The person takes the session back after it moved: connect again (the relay moves it
    /// away from the other page, and this one continues from the relay's copy).
    pub fn take_back(&mut self, now: Instant) {
        if self.status != Status::Moved {
            return;
        }
        self.set_status(Status::Connecting, "");
        self.connection = super::Connection::default();
        self.connect(now);
    }

    /// One attempt begins: the driver asks `/api/info`.
    pub(super) fn connect(&mut self, now: Instant) {
        if self.is_over() {
            return;
        }
        self.timers.stop(Timer::Reconnect);
        self.connection.started = Some(now);
        self.connection.serving = None;
        self.link.counters.info_requests += 1;
        self.milestones.first_connect.get_or_insert(now);
        self.push(Effect::Connect);
    }

    /// The relay's `/api/info`, asked at `asked`: checks it and says how long to wait for
    /// WebTransport before the WebSocket fallback.
    pub fn info(
        &mut self,
        now: Instant,
        asked: Instant,
        info: &RelayInfo,
    ) -> Result<Duration, ConnectError> {
        let patience = relay_client::webtransport_patience(now.saturating_duration_since(asked));
        relay_client::check_info(info, &self.target)?;
        self.link.counters.connects += 1;
        self.history_lines = if info.mode == Mode::Spawn { info.history_lines } else { 0 };
        self.relay_build = Some(info.relay_build());
        self.relay_has_webtransport = info.has_webtransport();
        self.paste_unavailable = (!info.paste.available).then(|| {
            let why = info.paste.reason.as_deref().unwrap_or("the relay cannot store files");
            format!("pasting files is off here: {why}")
        });
        Ok(patience)
    }

    /// The mode a hello asks for when it leaves before the relay's `/api/info` is in (on a link
    /// whose relay proved the token already): bridge for a page that names a mosh-server, spawn
    /// otherwise. A relay of the other mode refuses it, and the info then says why
    /// ([`relay_client::check_info`]).
    pub fn mode_before_info(&self) -> Mode {
        if self.target.bridge.is_some() { Mode::Bridge } else { Mode::Spawn }
    }

    /// The `hello` for a relay in `mode` over a link that carries `max_datagram_size`.
    pub fn hello(&self, mode: Mode, max_datagram_size: usize) -> Hello {
        let hello = self.target.hello(
            mode,
            self.session_id.as_deref(),
            self.ssh_host.as_deref(),
            max_datagram_size,
        );
        Hello { view: self.viewing, ..hello }
    }

    /// The attempt failed before a link was up.
    pub fn connect_failed(&mut self, now: Instant, error: ConnectError) {
        match error {
            ConnectError::Fatal { code, message } => return self.fail(code, &message),
            ConnectError::Ended(_) if self.drop_restored() => {
                // The shell the tab saved is gone: a new session, right away.
                return self.connect(now);
            }
            ConnectError::Ended(message) => return self.end(now, &message),
            ConnectError::Retry(why) => self.link.last_error = Some(why),
        }
        self.pause(now);
    }

    /// The relay said `ready` on a new link: which session continues, from which point (the
    /// relay's copy or the page's), and then, in this order: the seed, the hold, the session,
    /// the status, the link's kind, the session's datagrams over the new link, the keys typed
    /// meanwhile, a draw, the pastes and downloads. `None`: this link is not used (the driver
    /// closes it); the client has said why, and goes on as the failure demands.
    pub fn link_up(
        &mut self,
        now: Instant,
        up: LinkUp<'_>,
        kept: &dyn Fn(&str) -> Option<NonceBounds>,
    ) -> Option<LinkId> {
        let ready = up.ready;
        if ready.view || self.viewing {
            return self.viewer_up(now, up);
        }
        let (key, key_text) = match self.target.session_key(ready) {
            Ok(k) => k,
            Err(e) => {
                self.connect_failed(now, e);
                return None;
            }
        };
        if self.is_over() {
            self.connect_failed(now, ConnectError::Retry("closed meanwhile".into()));
            return None;
        }
        let id = LinkId(self.link.next_id);
        self.link.next_id += 1;
        self.link.counters.readies += 1;
        self.features_off = ready.off.as_ref().map(|off| off.sentence());
        self.link.kind = Some(up.kind);
        if up.kind == "websocket" {
            self.link.counters.websocket_links += 1;
        }
        self.milestones.first_ready.get_or_insert(now);
        self.link.liveness = Some(Liveness::new(now));
        self.link.message = None;
        self.link.joiner = Joiner::new();
        self.link.current = Some(id);
        self.connection.serving = Some(id);
        self.timers.set(Timer::Liveness, now + PING_AFTER);

        if self.restored.is_some() && self.key_text.as_deref() != Some(key_text.as_str()) {
            // Not the session the tab saved after all: start afresh with the relay's.
            self.session = None;
        }
        let restored = self.restored.take();
        let local = self.session.as_ref().map(ClientSession::resume_point);
        // A session restored from the tab's storage is weighed as it was saved (see
        // `Restored::point`); one this page drove is weighed as it is.
        let weighed = match (&local, &restored) {
            (Some(_), Some(r)) => Some(r.point.clone()),
            _ => local.clone(),
        };
        let mtu = up.max_datagram_size;
        let takeover = relay_client::takeover(weighed.as_ref(), ready);
        // One line a connect, for whoever debugs a resume: which point won and why.
        self.push(Effect::Log(relay_client::describe_takeover(&takeover, weighed.as_ref(), ready)));
        let mut seed = None;
        match takeover {
            Takeover::Fresh => {
                let key = (key, key_text.as_str());
                // A new session cannot fail to start; only a point can be unusable.
                let _ = self.begin_session(now, key, mtu, &ready.session, None, kept);
            }
            Takeover::KeepLocal => {
                if let Some(s) = self.session.as_mut() {
                    // A session that goes on over a new link: that link's datagram limit.
                    s.set_mtu(mtu);
                }
                // The relay's copy may be older than ours (a relay restart): it takes ours.
                if ready.mode == Mode::Spawn {
                    seed = local;
                }
            }
            Takeover::Adopt(point) => {
                let key = (key, key_text.as_str());
                let adopted = self.begin_session(now, key, mtu, &ready.session, Some(&point), kept);
                if let Err(message) = adopted {
                    self.drop_link();
                    self.fail(FailCode::BadKey, &message);
                    return None;
                }
                // Keys typed since the load went into the restored session: they go again, in
                // order, into the one continued from the relay's copy.
                if let (Some(r), Some(s)) = (restored, self.session.as_mut()) {
                    if !r.typed.is_empty() {
                        s.handle_input(now, &r.typed);
                    }
                }
            }
            Takeover::CannotResume => {
                self.cannot_resume();
                return None;
            }
        }
        if let Some(s) = self.session.as_mut() {
            // Nothing below the floor is forwarded: another page, or this one before a reload,
            // used those numbers.
            s.raise_next_seq(ready.seq_floor);
        }
        if let Some(point) = seed {
            self.push(Effect::Control(ClientMessage::Seed {
                point: relay_client::encode_point(&point),
            }));
        }
        // A new link holds nothing until asked.
        let hold = self.pacer.relay_hold();
        if !hold.is_zero() {
            self.send_hold(hold);
        }
        if let Some(id) = self.session_id.clone() {
            self.push(Effect::SessionId(id));
        }
        self.set_status(if ready.resumed { Status::Resumed } else { Status::Connected }, "");
        let fallback = up.kind == "websocket" && self.relay_has_webtransport;
        self.push(Effect::LinkKind { kind: up.kind, fallback });
        // The session sends at once over the new link (mosh-server roams to the relay's new
        // socket; what went out while there was none is sent again).
        if let Some(s) = self.session.as_mut() {
            s.link_up(now);
        }
        self.send_early_input(now);
        self.render(now, false);
        // An upload interrupted by the lost link resumes on this one, and a download too.
        self.drive_pastes(now);
        self.drive_downloads(now);
        Some(id)
    }

    /// A viewer's `ready`: the link carries the relay's render of the session's screen
    /// ([`Effect::ViewerScreen`]), nothing else; the first update paints it whole.
    fn viewer_up(&mut self, now: Instant, up: LinkUp<'_>) -> Option<LinkId> {
        if self.is_over() {
            self.connect_failed(now, ConnectError::Retry("closed meanwhile".into()));
            return None;
        }
        self.viewing = true;
        let id = LinkId(self.link.next_id);
        self.link.next_id += 1;
        self.link.counters.readies += 1;
        self.link.kind = Some(up.kind);
        if up.kind == "websocket" {
            self.link.counters.websocket_links += 1;
        }
        self.milestones.first_ready.get_or_insert(now);
        self.link.liveness = Some(Liveness::new(now));
        self.link.message = None;
        self.link.current = Some(id);
        self.connection.serving = Some(id);
        self.timers.set(Timer::Liveness, now + PING_AFTER);
        self.session_id = Some(up.ready.session.clone());
        // A file pasted here fails at once, saying why (nothing is uploaded).
        self.paste_unavailable = Some("this page only watches the session (read-only)".into());
        self.push(Effect::SessionId(up.ready.session.clone()));
        self.push(Effect::ViewerOf(up.ready.owner.clone().unwrap_or_default()));
        self.set_status(Status::Resumed, "");
        let fallback = up.kind == "websocket" && self.relay_has_webtransport;
        self.push(Effect::LinkKind { kind: up.kind, fallback });
        Some(id)
    }

    /// The link `id` is gone (its datagrams ended): pause, then try again, unless the session
    /// is over.
    pub fn link_lost(&mut self, now: Instant, id: LinkId) {
        if self.link.current == Some(id) {
            self.link.current = None;
            self.timers.stop(Timer::Liveness);
            if let Some(job) = self.pastes.queue.active() {
                job.link_lost(now);
            }
        }
        if self.connection.serving != Some(id) {
            return;
        }
        self.connection.serving = None;
        if let Some(started) = self.connection.started {
            self.connection.backoff.link_ended(started, now);
        }
        self.pause(now);
    }

    /// Between attempts: says so, and sets the reconnect timer.
    fn pause(&mut self, now: Instant) {
        if self.is_over() {
            return;
        }
        let random = self.random();
        let delay = self.connection.backoff.next_pause(random);
        self.link.message = Some("Connection to the relay lost; reconnecting...".into());
        if self.session.is_some() {
            self.render(now, false);
        }
        let why = self.link.last_error.clone().unwrap_or_default();
        self.set_status(Status::Reconnecting, &why);
        self.timers.set(Timer::Reconnect, now + delay);
    }

    /// A control line on link `id` (`None`: the control stream ended). Returns whether to
    /// keep reading that link's control lines; when not, the driver closes that link.
    pub fn control_line(&mut self, now: Instant, id: LinkId, line: Option<&[u8]>) -> bool {
        // A viewer whose share ended or expired: said in the relay's words, no retry (the
        // token is gone).
        if self.viewing
            && let Some(Ok(ServerMessage::Ended { code: ErrorCode::BadToken, message })) =
                line.map(crate::relay_proto::decode::<ServerMessage>)
        {
            self.fail(FailCode::BadToken, &message);
            return false;
        }
        let event = line.map(relay_client::control_after_ready);
        let heard = |client: &mut Self| {
            if client.link.current == Some(id) {
                if let Some(l) = client.link.liveness.as_mut() {
                    l.heard(now);
                }
            }
        };
        match event {
            Some(ControlEvent::Alive) => heard(self),
            Some(ControlEvent::SessionOver(message)) => {
                self.end(now, &message);
                return false;
            }
            Some(ControlEvent::Moved) => {
                self.moved();
                return false;
            }
            Some(ControlEvent::Offer(offer)) => {
                heard(self);
                self.offer(now, offer);
            }
            Some(ControlEvent::Refused(message)) => {
                heard(self);
                self.push(Effect::Refused(message));
            }
            Some(ControlEvent::Screen(update)) => {
                heard(self);
                match &mut self.viewer_screen {
                    Some(screen) => screen.apply(&update),
                    None => self.viewer_screen = Some(crate::session::ViewerScreen::new(&update)),
                }
                self.push(Effect::ViewerScreen(update));
            }
            Some(ControlEvent::Viewers(count)) => {
                heard(self);
                self.push(Effect::Viewers(count));
            }
            Some(ControlEvent::Held(datagrams)) => {
                heard(self);
                self.held_datagrams(now, &datagrams);
            }
            Some(ControlEvent::Signal(signal)) => {
                heard(self);
                self.signal(signal);
            }
            Some(ControlEvent::LinkOver) | None => return false,
        }
        true
    }

    /// Pings the relay when the link has been silent, and drops a link silent too long.
    pub(super) fn check_liveness(&mut self, now: Instant) {
        let Some(liveness) = self.link.liveness.as_ref().filter(|_| self.link.current.is_some())
        else {
            return;
        };
        match liveness.poll(now) {
            LinkCheck::WaitUntil(at) => self.timers.set(Timer::Liveness, at),
            LinkCheck::Ping { next } => {
                self.push(Effect::Control(ClientMessage::Ping));
                self.timers.set(Timer::Liveness, next);
            }
            // The link stays the client's until its datagrams end (`link_lost`), which tells
            // an upload on it that it broke.
            LinkCheck::Dead => self.push(Effect::CloseLink),
        }
    }

    /// A session's configuration for this page, with the nonce reservation kept for its key.
    fn session_config(
        &mut self,
        key: Key,
        key_text: &str,
        max_datagram_size: usize,
        kept: &dyn Fn(&str) -> Option<NonceBounds>,
    ) -> (SessionConfig, NonceReservation) {
        let nonces = NonceReservation::new(key_text, kept(key_text));
        let start = nonces.start();
        let mut config = SessionConfig::new(key, self.size.cols.max(1), self.size.rows.max(1));
        // The browser silently drops datagrams above its limit.
        config.mtu = max_datagram_size.min(config.mtu);
        config.first_seq = start.seq;
        config.first_fragment_id = start.fragment_id;
        config.seed = (self.random() * 9_007_199_254_740_992.0) as u64;
        // Send keys from inside the input handler: a 1 ms gathering timer becomes >= 4 ms in a
        // browser (nested timers are clamped), and the terminal already hands a burst or a
        // paste over in one call, so there is nothing to gather.
        config.min_delay = Duration::ZERO;
        config.predict = self.predict;
        (config, nonces)
    }

    /// The session this page drives from now on, under nonce bounds kept for this key: a new
    /// one (the first `ready`), or one continued from the relay's copy of it (`from`: this page
    /// has nothing saved, or another page drove it since), whose screen shows at once.
    fn begin_session(
        &mut self,
        now: Instant,
        (key, key_text): (Key, &str),
        max_datagram_size: usize,
        session_id: &str,
        from: Option<&ResumePoint>,
        kept: &dyn Fn(&str) -> Option<NonceBounds>,
    ) -> Result<(), String> {
        let (config, nonces) = self.session_config(key, key_text, max_datagram_size, kept);
        let session = match from {
            None => ClientSession::new(config, now),
            Some(point) => ClientSession::resume(config, point, now)
                .map_err(|e| format!("The relay's copy of the session is unusable: {e}"))?,
        };
        self.session = Some(session);
        self.nonces = Some(nonces);
        self.screen.forget();
        self.session_id = Some(session_id.to_string());
        self.key_text = Some(key_text.to_string());
        Ok(())
    }

    /// When the session came from the tab's storage and no relay has confirmed it: forgets it
    /// (and the saved copy). Returns whether it did.
    fn drop_restored(&mut self) -> bool {
        if self.restored.take().is_none() {
            return false;
        }
        self.session = None;
        let id = self.session_id.take();
        self.key_text = None;
        self.nonces = None;
        self.push(Effect::ForgetSession(id));
        true
    }

    /// Nothing here or at the relay can continue the session the page names.
    fn cannot_resume(&mut self) {
        self.timers.stop(Timer::Session);
        self.session = None;
        self.drop_link();
        self.connection.serving = None;
        self.push(Effect::ForgetSession(self.session_id.clone()));
        self.set_status(
            Status::CannotResume,
            "This session cannot be resumed from here: its state was kept in the browser tab \
             that ran it, and this tab has none.",
        );
    }

    /// Another page took the session over: stop (no reconnecting) until the person takes it
    /// back.
    fn moved(&mut self) {
        self.stop(
            Status::Moved,
            "This session is open in another window now. Take it back to continue here.",
        );
    }
}
