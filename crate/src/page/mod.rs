//! The page client: everything the browser page decides about one terminal session through
//! tern-relay, sans-IO. The browser driver (`web/src/driver.rs`) is a loop around it: it hands
//! in what happened, with `now`, and does what comes out.
//!
//! ```text
//!  inputs (each with now)                         PageClient                 outputs
//!  key ───────────▶ PasteQueue::key ─▶ ClientSession::handle_input ─┐   poll_effect():
//!  datagram / held batch ─▶ Joiner ─▶ ClientSession::handle_datagram ┤     Control, Datagram
//!  control line ─▶ relay_client::control_after_ready ───────────────┤     ReserveNonces, Save...
//!  info, link_up(ready) ─▶ takeover, seed, hold, link_up ───────────┤     Write, RequestFrame
//!  visibility, animation frame ─▶ DrawPacer ────────────────────────┤     hooks, streams
//!  paste / upload and download stream events ─▶ PasteQueue, Downloads┤   poll_timeout():
//!  handle_timeout ─▶ the timer table (timers.rs) ────────────────────┘     one deadline
//! ```
//!
//! The integration, as quinn-proto's connection: after every `handle`-style call, drain
//! [`PageClient::poll_effect`] in order and do each effect (the order is a rule: a nonce
//! reservation before the datagrams it covers, a hold's release before the key that ended it);
//! then arm one timer for [`PageClient::poll_timeout`] and call
//! [`PageClient::handle_timeout`] when it runs out. A timeout that comes early does nothing.
//!
//! The rules it keeps, each a scenario in `crate/tests/page_client.rs`:
//! - a typed key ends the relay's hold before the key's datagram leaves;
//! - the nonce bound covering a datagram is reserved before the datagram;
//! - a new link: the seed (the relay's copy is older), the hold, the session, the status, the
//!   link's kind, the session's datagrams over the new link, keys typed meanwhile, a draw, then
//!   the pastes and downloads that wait for a link;
//! - an idle page wakes only when its notification bar would change and saves at most every
//!   [`SAVE_INTERVAL`], with no timer for a save unless one is left waiting.

mod connect;
mod cost;
mod downloads;
mod draw;
mod effect;
mod input;
mod pastes;
mod remote_copy;
mod save;
mod timers;

use std::collections::VecDeque;
use std::time::Duration;

pub use connect::LinkUp;
pub use cost::{PageCost, Stopwatch};
pub use downloads::ChunkVerdict;
pub use draw::OVERLAY_TICK;
pub use effect::{Effect, LinkId, StreamStep};
pub use pastes::{PASTE_REDRAW, PastedFile};
pub use remote_copy::{
    PREVIEW_CHARS, RemoteCopy, RemoteCopyAction, RemoteCopyPolicy, preview, remote_copy,
};
pub use save::{NONCE_RESERVE, NonceBounds, NonceReservation, SAVE_INTERVAL};
pub use timers::{Timer, TimerTable};

use crate::download::Downloads;
use crate::paste::PasteQueue;
use crate::predict::PredictConfig;
use crate::relay_client::{Backoff, Liveness, Status, Target};
use crate::relay_proto::framing::Joiner;
use crate::session::{ClientSession, DrawPacer, EchoMeter, ResumePoint};
use crate::terminal::{Complete, SideEffects, Size};
use crate::time::Instant;
use draw::Screen;

/// Datagrams of a session restored before any link told its limit (the smallest a browser
/// link has; the first `ready` sets the real one).
pub const RESTORED_MTU: usize = 1200;

/// Link-level counters (the session keeps its own).
#[derive(Debug, Default, Clone)]
pub struct LinkCounters {
    pub info_requests: u32,
    pub session_list_requests: u32,
    pub connects: u32,
    pub readies: u32,
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    pub dropped_offline: u64,
    pub framing_errors: u64,
    /// Batches of server datagrams the relay held (the page hidden, or a long flood), and
    /// their datagrams (not in `datagrams_in`).
    pub held_batches: u64,
    pub held_datagrams: u64,
    /// Links that came over the WebSocket fallback.
    pub websocket_links: u32,
}

/// When things first happened, for `stats()` and the page-load benchmark.
#[derive(Debug, Default, Clone, Copy)]
pub struct Milestones {
    /// The page first asked the relay (`/api/info`).
    pub first_connect: Option<Instant>,
    /// The relay first answered `ready`.
    pub first_ready: Option<Instant>,
    /// A session restored from the tab's storage was first drawn.
    pub restored: Option<Instant>,
    /// The first new server state came (the session is live).
    pub live: Option<Instant>,
    /// The first frame with server content was written.
    pub first_frame: Option<Instant>,
}

/// The link to the relay, as the client knows it.
#[derive(Debug, Default)]
struct LinkState {
    /// The driver's current link; `None` while there is none (offline).
    current: Option<LinkId>,
    next_id: u64,
    joiner: Joiner,
    counters: LinkCounters,
    /// The link's line in the notification bar (`None`: the bar shows only lateness).
    message: Option<String>,
    /// How the current (or last) link came: `webtransport` or `websocket`.
    kind: Option<&'static str>,
    /// When the current link last heard from the relay (any line or datagram).
    liveness: Option<Liveness>,
    last_error: Option<String>,
}

/// The connection loop: an attempt, the link it served, the pause before the next.
#[derive(Debug, Default)]
struct Connection {
    backoff: Backoff,
    /// When the attempt under way (or the one whose link is served) started.
    started: Option<Instant>,
    /// The link the loop serves, once the attempt succeeded.
    serving: Option<LinkId>,
}

/// A session restored from the tab's storage that no relay has confirmed yet.
#[derive(Debug)]
struct Restored {
    /// The point as saved: what the first `ready` weighs against the relay's copy. The
    /// session itself numbers its input `RESUME_STATE_GAP` above it, which would make any
    /// saved point look newer than everything the relay saw.
    point: ResumePoint,
    /// Keys handed to the restored session before the first `ready`: typed again into the
    /// relay's copy when that one wins, so none is dropped.
    typed: Vec<u8>,
}

/// The page's side of one terminal session through tern-relay (see the module docs).
#[derive(Debug)]
pub struct PageClient {
    target: Target,
    /// The terminal's size, as the driver last said.
    size: Size,
    /// Seeds each session and jitters the reconnect pauses.
    rng: u64,
    status: Status,
    session: Option<ClientSession<Complete>>,
    session_id: Option<String>,
    /// A new session goes to this ssh host of the relay's (chosen in the session list).
    ssh_host: Option<String>,
    /// Why the relay cannot take pasted files (its `/api/info`), when it cannot: a paste then
    /// fails at once, uploading nothing.
    paste_unavailable: Option<String>,
    /// What this session lacks and why, as the relay's `ready` said (a session on an ssh host
    /// without the recorder): the page says it once.
    features_off: Option<String>,
    /// Which relay this is (`tern-relay 0.1.0 (1a2b3c4d5e6f)`), once its `/api/info` came.
    relay_build: Option<String>,
    /// The relay's `/api/info` offered WebTransport (so a WebSocket link is a fallback).
    relay_has_webtransport: bool,
    /// Lines of history the relay keeps per session (`/api/info`); 0: none (bridge mode).
    history_lines: u64,
    /// The session's key as text, for the tab's saved session. A secret: never logged.
    key_text: Option<String>,
    restored: Option<Restored>,
    nonces: Option<NonceReservation>,
    /// Keys typed before the first session existed.
    early_input: Vec<u8>,
    predict: PredictConfig,
    link: LinkState,
    connection: Connection,
    screen: Screen,
    /// When to draw: at most once per animation frame, nothing while the page is hidden.
    pacer: DrawPacer,
    /// Title, bell and clipboard as last reported (reported on every new state, drawn or not:
    /// a hidden tab's title and bell still tell the person what happens).
    side_effects: SideEffects,
    /// "Programs may set the clipboard" (the page's settings).
    remote_copy: RemoteCopyPolicy,
    echo: EchoMeter,
    milestones: Milestones,
    pastes: pastes::Pastes,
    downloads: downloads::DownloadState,
    /// The page is resizing the terminal: nothing is drawn until it is done.
    resizing: bool,
    /// Writes of screen content to the terminal (the pacer's effect, seen from the outside).
    terminal_writes: u64,
    /// Whether the page was last told that the output floods.
    flooding_reported: bool,
    /// The notification bar's text at the last draw (`None`: no bar).
    drawn_bar: Option<String>,
    /// The last save of the tab's session ([`SAVE_INTERVAL`]).
    saved_at: Option<Instant>,
    cost: PageCost,
    timers: TimerTable,
    effects: VecDeque<Effect>,
    /// A viewer's page (a share link, a read-only token): it watches `session_id` from the
    /// relay's copy; no session, no key, nothing typed leaves ([`watch_session`](Self::watch_session)).
    viewing: bool,
    /// A viewer's page: what its terminal shows, from the relay's updates (where its image
    /// markers are found).
    viewer_screen: Option<crate::session::ViewerScreen>,
    /// The person was told once that keys do nothing here.
    told_view_only: bool,
}

impl PageClient {
    /// A client for `target` on a terminal of `size`; `seed` seeds the sessions and the
    /// reconnect jitter (the driver draws it once). Nothing happens until
    /// [`restore`](Self::restore) and [`start`](Self::start).
    pub fn new(target: Target, size: Size, seed: u64) -> Self {
        PageClient {
            target,
            size,
            rng: seed | 1,
            status: Status::Connecting,
            session: None,
            session_id: None,
            ssh_host: None,
            paste_unavailable: None,
            features_off: None,
            relay_build: None,
            relay_has_webtransport: true,
            history_lines: 0,
            key_text: None,
            restored: None,
            nonces: None,
            early_input: Vec::new(),
            predict: PredictConfig::default(),
            link: LinkState::default(),
            connection: Connection::default(),
            screen: Screen::default(),
            pacer: DrawPacer::new(),
            side_effects: SideEffects::new(),
            remote_copy: RemoteCopyPolicy::default(),
            echo: EchoMeter::new(),
            milestones: Milestones::default(),
            pastes: pastes::Pastes::default(),
            downloads: downloads::DownloadState::default(),
            resizing: false,
            terminal_writes: 0,
            flooding_reported: false,
            drawn_bar: None,
            saved_at: None,
            cost: PageCost::default(),
            timers: TimerTable::default(),
            effects: VecDeque::new(),
            viewing: false,
            viewer_screen: None,
            told_view_only: false,
        }
    }

    /// The next thing to do, in order.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Runs every timer that has run out at `now` (none, when the wake came early).
    pub fn handle_timeout(&mut self, now: Instant) {
        for timer in Timer::ALL {
            if !self.timers.expire(timer, now) {
                continue;
            }
            match timer {
                Timer::Session => self.session_timeout(now),
                Timer::Liveness => self.check_liveness(now),
                Timer::Pacer => {
                    let pace = self.pacer.on_wait_over(now);
                    self.follow(pace, now);
                }
                Timer::Paste => self.paste_timeout(now),
                Timer::Download => self.download_timeout(now),
                Timer::Overlay => self.tick(now),
                Timer::Save => self.save_if_due(now),
                Timer::Reconnect => self.connect(now),
            }
        }
    }

    fn push(&mut self, effect: Effect) {
        self.effects.push_back(effect);
    }

    /// A number from the client's generator, in [0, 1).
    fn random(&mut self) -> f64 {
        // xorshift64*: reproducible from the seed; quality is plenty for jitter and seeds.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let x = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    // --- Reports ------------------------------------------------------------------------

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn session(&self) -> Option<&ClientSession<Complete>> {
        self.session.as_ref()
    }

    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Which relay serves this page, once it said (`/api/info`).
    pub fn relay_build(&self) -> Option<&str> {
        self.relay_build.as_deref()
    }

    /// Why pasted files cannot reach this session's shell, once the relay said so.
    pub fn paste_unavailable(&self) -> Option<&str> {
        self.paste_unavailable.as_deref()
    }

    /// "History, pictures and signals are off on devbox: WHY.", when the relay said so.
    pub fn features_off(&self) -> Option<&str> {
        self.features_off.as_deref()
    }

    /// The session whose history the relay keeps, once the relay said it keeps one.
    pub fn history_session(&self) -> Option<&str> {
        self.session_id.as_deref().filter(|_| self.history_lines > 0)
    }

    pub fn counters(&self) -> &LinkCounters {
        &self.link.counters
    }

    pub fn link_kind(&self) -> Option<&'static str> {
        self.link.kind
    }

    pub fn last_error(&self) -> Option<&str> {
        self.link.last_error.as_deref()
    }

    /// Fragments of server datagrams the joiner gave up on.
    pub fn joiner_evicted(&self) -> u64 {
        self.link.joiner.evicted
    }

    pub fn milestones(&self) -> &Milestones {
        &self.milestones
    }

    pub fn echo(&self) -> &EchoMeter {
        &self.echo
    }

    pub fn predict(&self) -> PredictConfig {
        self.predict
    }

    pub fn pacer(&self) -> &DrawPacer {
        &self.pacer
    }

    pub fn pastes(&self) -> &PasteQueue {
        &self.pastes.queue
    }

    pub fn downloads(&self) -> &Downloads {
        &self.downloads.core
    }

    /// Rows pushed into the terminal's scrollback.
    pub fn scrollback_rows(&self) -> u64 {
        self.screen.scrollback_rows
    }

    pub fn terminal_writes(&self) -> u64 {
        self.terminal_writes
    }

    /// Every deadline the client keeps (what [`poll_timeout`](Self::poll_timeout) is the
    /// soonest of): which concern wakes the page, for tests and for whoever debugs a wake.
    pub fn timers(&self) -> &TimerTable {
        &self.timers
    }

    pub fn cost(&self) -> &PageCost {
        &self.cost
    }

    pub fn cost_mut(&mut self) -> &mut PageCost {
        &mut self.cost
    }

    /// The core's screen (not the terminal's) as text: rows joined by `\n`, trailing blanks
    /// trimmed.
    pub fn screen_text(&self) -> String {
        self.session
            .as_ref()
            .map(|s| crate::terminal::screen_text(s.server_state().framebuffer()).rows.join("\n"))
            .unwrap_or_default()
    }

    /// The image markers in the screen last drawn into the terminal (docs/IMAGES.md; the server
    /// screen of that draw, so rows match the terminal's, not a newer frame's): `[row, col, id,
    /// ...]`, top to bottom.
    pub fn image_markers(&self) -> Vec<u32> {
        let drawn = match &self.viewer_screen {
            Some(viewer) => Some(viewer.framebuffer()),
            None => self.screen.drawn_server(),
        };
        let Some(fb) = drawn else { return Vec::new() };
        let mut out = Vec::new();
        for (row, r) in fb.rows().iter().enumerate() {
            for (col, id) in crate::images::marker::find(r.cells()) {
                out.extend([row as u32, u32::from(col), id as u32]);
            }
        }
        out
    }

    // --- Settings -----------------------------------------------------------------------

    /// Another prediction mode (the page's settings).
    pub fn set_predict(&mut self, config: PredictConfig) {
        self.predict = config;
        if let Some(s) = self.session.as_mut() {
            s.set_predict_config(config);
        }
    }

    /// Whether a program's OSC 52 writes the clipboard, asks, or only tells (the page's
    /// settings; see [`RemoteCopyPolicy`]).
    pub fn set_remote_copy(&mut self, policy: RemoteCopyPolicy) {
        self.remote_copy = policy;
    }

    /// Keys typed during a paste wait behind its path (default), or go at once.
    pub fn set_hold_keys(&mut self, hold: bool) {
        self.pastes.queue.hold_keys = hold;
    }

    /// Uploads send their first bytes with the header (default), or wait for the relay's
    /// `have` (the benchmark's comparison).
    pub fn set_eager_paste(&mut self, eager: bool) {
        self.pastes.queue.eager = eager;
    }

    /// The upload pacer's standing-queue target (`None`: the transfer default, 5 ms; pastes
    /// start at `paste::PASTE_QUEUE_TARGET`).
    pub fn set_paste_queue_target(&mut self, target: Option<std::time::Duration>) {
        self.pastes.queue.queue_target = target;
    }

    /// Start the new session on the relay's ssh host `name` (chosen from the session list)
    /// instead of the relay's own machine. Call before [`start`](Self::start).
    pub fn start_on_host(&mut self, name: &str) {
        self.ssh_host = Some(name.to_string());
    }

    /// Continue the relay session `id`, which this page has nothing saved of (chosen from the
    /// relay's session list): the relay's copy gives the screen. Call before
    /// [`start`](Self::start).
    pub fn resume_session(&mut self, id: &str) {
        if self.session.is_none() {
            self.session_id = Some(id.to_string());
        }
    }

    /// Watch the relay session `id` read-only (a share link's `#view=ID`): the relay renders its
    /// copy of the screen for this page ([`Effect::ViewerScreen`]); the page holds no key and
    /// sends no input. Call before [`start`](Self::start), instead of [`restore`](Self::restore).
    pub fn watch_session(&mut self, id: &str) {
        self.viewing = true;
        self.session = None;
        self.restored = None;
        self.session_id = Some(id.to_string());
    }

    /// Whether this page only watches (see [`watch_session`](Self::watch_session)).
    pub fn viewing(&self) -> bool {
        self.viewing
    }

    /// A viewer's keys, pastes and resizes do nothing: said once (the relay refuses them
    /// anyway; the page never sends them).
    pub(super) fn tell_view_only(&mut self) {
        if !std::mem::replace(&mut self.told_view_only, true) {
            self.push(Effect::Refused(
                "You are watching this session read-only: your keys, pastes and resizes are not \
                 sent."
                    .into(),
            ));
        }
    }

    /// `GET /api/sessions` went out (counted in `stats()`).
    pub fn count_session_list_request(&mut self) {
        self.link.counters.session_list_requests += 1;
    }

    // --- Status -------------------------------------------------------------------------

    fn set_status(&mut self, status: Status, message: &str) {
        self.status = status;
        self.push(Effect::Status { status, message: message.to_string() });
    }

    fn is_over(&self) -> bool {
        self.status.is_final()
    }

    /// Whether the shell is this page's to continue: not ended, not moved to another page. A
    /// page that stopped trying (`Failed`: a relay it could not verify, a rate limit) still
    /// takes keys and saves them, and a reload continues with them.
    fn keeps_session(&self) -> bool {
        !self.status.is_final() || matches!(self.status, Status::Failed(_))
    }

    /// Stops at a final `status` (no reconnecting): the session's timer and the link go.
    fn stop(&mut self, status: Status, message: &str) {
        self.set_status(status, message);
        self.timers.stop(Timer::Session);
        self.drop_link();
    }

    /// Forgets the current link and tells the driver to close it.
    fn drop_link(&mut self) {
        if self.link.current.take().is_some() {
            self.timers.stop(Timer::Liveness);
            self.push(Effect::CloseLink);
        }
    }

    /// Retrying cannot help: stop and say why.
    pub fn fail(&mut self, code: crate::relay_client::FailCode, message: &str) {
        self.stop(Status::Failed(code), message);
        // What was typed until now is kept for the reload that tries again.
        self.save();
    }

    /// The session is over for good (shell exited, or the relay says the session is gone).
    fn end(&mut self, now: Instant, message: &str) {
        if self.is_over() {
            return;
        }
        self.timers.stop(Timer::Session);
        self.pastes.queue.abandon(now);
        self.drop_link();
        // Nothing left to continue: a reload starts a new session (a viewer saved nothing).
        if !self.viewing {
            self.push(Effect::ForgetSession(self.session_id.clone()));
        }
        self.set_status(Status::Ended, message);
    }

    /// The page is going away (a reload, a closed tab): the shell keeps running; the tab
    /// saves where it stands, so a reload continues it.
    pub fn leave(&mut self) {
        self.save();
    }

    /// The person ends the session: mosh's quit handshake (the shell gets a hangup), and
    /// nothing for a reload to continue.
    pub fn end_session(&mut self, now: Instant) {
        if let Some(s) = self.session.as_mut() {
            s.shutdown(now);
        }
        self.push(Effect::ForgetSession(self.session_id.clone()));
        self.flush(now, false);
    }
}

/// How long until `at`, rounded up to whole milliseconds (browser timers count those: one
/// that ran out a fraction too early would only come back at once).
pub fn millis_until(now: Instant, at: Instant) -> u32 {
    let wait = at.saturating_duration_since(now) + Duration::from_micros(999);
    u32::try_from(wait.as_millis()).unwrap_or(u32::MAX)
}
