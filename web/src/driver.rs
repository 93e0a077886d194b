//! The driver: moves bytes between xterm.js, the relay link and the core, with `now` from the
//! page's clock. Every decision is the core's: the session (`tern::session`), the connection policy
//! (`tern::relay_client`), the paste queue and uploads (`tern::paste`), the echo meter.
//!
//! ```text
//!  xterm.js onData ─▶ input ─▶ PasteQueue::key ─▶ send_input ─▶ ClientSession::handle_input ─┐
//!  RelayLink datagram ─▶ Joiner ─▶ ClientSession::handle_datagram ────────────────────────────┤
//!  timer at poll_timeout ─▶ ClientSession::handle_timeout ─────────────────────────────────────┤
//!      flush: poll_transmit ─▶ RelayLink::send_datagram;  poll_event ─▶ render ─▶ xterm.write ◀┘
//! ```
//!
//! Single-threaded (the page's event loop): state lives in one `RefCell`, never borrowed across
//! an `await` or a call into JavaScript.

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use gloo_timers::callback::Timeout;
use gloo_timers::future::TimeoutFuture;
use js_sys::Uint8Array;
use tern::paste::{KeyAction, PasteProgress, PasteQueue};
use tern::relay_client::{
    self, Backoff, ConnectError, ControlEvent, FailCode, LinkCheck, Liveness, PING_AFTER, Status,
    Takeover, Target,
};
use tern::relay_proto::Mode;
use tern::relay_proto::framing::Joiner;
use tern::relay_proto::{ClientMessage, UploadReply, decode};
use tern::session::{ClientSession, CloseReason, DrawPacer, EchoMeter, Event, Pace, SessionConfig};
use tern::terminal::{Complete, Notification, SideEffects, join_messages, screen_text};
use tern::time::Instant;
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;
use wasm_bindgen::closure::Closure;

use crate::clock::{ms, now, now_ms};
use crate::frame_cost::FrameCost;
use crate::hooks::{Hooks, object};
use crate::paste::{PasteFiles, UploadStream, read_file};
use crate::relay_link::{self, RelayLink};
use crate::screen::Screen;
use crate::stats;
use crate::storage::{self, NonceStore};
use crate::xterm::Terminal;

mod downloads;
use downloads::DownloadsState;

/// The notification bar counts seconds: while it shows anything, or a flood, paste or download
/// is under way, the overlay clock wakes this often; otherwise only when the bar would change
/// (`Notification::next_change`), since every wake costs an idle tab a browser task.
const OVERLAY_TICK: Duration = Duration::from_secs(1);
/// Upload progress redraws at most this often (acks come every few milliseconds).
const PASTE_REDRAW: Duration = Duration::from_millis(100);
/// The tab's saved session (what a reload continues) is refreshed at most this often, when the
/// session does something (a datagram, a key, a timer: an idle session still hears mosh's
/// heartbeat every 3 s), and when the page goes away; a crash loses what came after (the keys
/// typed since are sent again, nothing more). A timer only when a save is left waiting: an idle
/// tab does not wake for it.
const SAVE_INTERVAL: Duration = Duration::from_secs(2);
/// Datagrams of a session restored before any link told its limit (the smallest a browser link
/// has; the first `ready` sets the real one).
const RESTORED_MTU: usize = 1200;

/// Link-level counters (the core keeps its own).
#[derive(Debug, Default)]
struct LinkCounters {
    info_requests: u32,
    session_list_requests: u32,
    connects: u32,
    readies: u32,
    datagrams_in: u64,
    datagrams_out: u64,
    dropped_offline: u64,
    framing_errors: u64,
    /// Batches of server datagrams the relay held (the page hidden, or a long flood), and their datagrams
    /// (not in `datagrams_in`).
    held_batches: u64,
    held_datagrams: u64,
    /// Links that came over the WebSocket fallback.
    websocket_links: u32,
}

/// The link to the relay and what the driver counts about it.
#[derive(Debug, Default)]
struct RelayState {
    link: Option<Rc<RelayLink>>,
    joiner: Joiner,
    counters: LinkCounters,
    /// The link's line in the notification bar (`None`: the bar shows only lateness).
    message: Option<String>,
    /// How the current (or last) link came: `webtransport` or `websocket`.
    kind: Option<&'static str>,
    /// `performance.now()` when the relay first answered `ready`.
    first_ready_ms: Option<f64>,
    /// When the current link last heard from the relay (any line or datagram).
    liveness: Liveness,
    last_error: Option<String>,
}

/// The core's paste queue and the I/O the driver does for it.
#[derive(Debug, Default)]
struct PasteState {
    queue: PasteQueue,
    files: PasteFiles,
    /// The active upload's stream, once open; `opening` while it is being opened.
    stream: Option<UploadStream>,
    opening: bool,
    timer: Option<Timeout>,
    /// What the page's `paste` hook was last told.
    reported: Option<PasteProgress>,
    last_redraw_ms: f64,
}

#[derive(Debug)]
struct State {
    status: Status,
    session: Option<ClientSession<Complete>>,
    session_id: Option<String>,
    /// A new session goes to this ssh host of the relay's (chosen in the session list).
    ssh_host: Option<String>,
    /// Why the relay cannot take pasted files (its `/api/info`), when it cannot: a paste then
    /// fails at once, uploading nothing.
    paste_unavailable: Option<String>,
    /// Which relay this is (`tern-relay 0.1.0 (1a2b3c4d5e6f)`), once its `/api/info` came.
    relay_build: Option<String>,
    /// The session's key as text, for the tab's saved session. A secret: never logged.
    key_text: Option<String>,
    /// The session was restored from the tab's storage and no relay has confirmed it yet.
    restored: bool,
    /// The point the restored session was made from, as saved: what the first `ready` weighs
    /// against the relay's copy. The session itself numbers its input `RESUME_STATE_GAP` above
    /// it, which would make any saved point look newer than everything the relay saw.
    restored_point: Option<tern::session::ResumePoint>,
    /// Keys handed to the restored session before the first `ready`: typed again into the
    /// relay's copy when that one wins, so none is dropped.
    typed_since_restore: Vec<u8>,
    nonces: Option<NonceStore>,
    /// The session's timer (`poll_timeout`) and when it runs out. Armed again only when the
    /// core's deadline comes sooner: during a flood the deadline (the delayed ack, mostly) stays
    /// the same for many datagrams, and a timer that runs out early is harmless (the core does
    /// nothing, and the flush after it arms the timer for the real deadline).
    timer: Option<(Timeout, Instant)>,
    /// Keys typed before the first session existed.
    early_input: Vec<u8>,
    screen: Screen,
    /// When to draw: at most once per animation frame, nothing while the page is hidden.
    pacer: DrawPacer,
    /// Title, bell and clipboard as last reported (reported on every new state, drawn or not:
    /// a hidden tab's title and bell still tell the person what happens).
    side_effects: SideEffects,
    echo: EchoMeter,
    /// `performance.now()` when the first frame with server content was written.
    first_frame_ms: Option<f64>,
    /// `performance.now()` when a session restored from the tab's storage was first drawn.
    restored_ms: Option<f64>,
    /// `performance.now()` when this page first asked the relay (`/api/info`).
    first_connect_ms: Option<f64>,
    /// `performance.now()` when this page first got a new server state (the session is live).
    live_ms: Option<f64>,
    /// Predictive echo's mode, for the session (when it starts) and `stats()`.
    predict: tern::predict::PredictConfig,
    relay: RelayState,
    paste: PasteState,
    /// Files from the shell (`tern send`) on their way to the browser.
    downloads: DownloadsState,
    /// Lines of history the relay keeps per session (`/api/info`); 0: none (bridge mode).
    history_lines: u64,
    /// The page is resizing the terminal: nothing is drawn until it is done (`end_resize`).
    resizing: bool,
    /// Writes of screen content to xterm.js (the pacer's effect, seen from the outside).
    xterm_writes: u64,
    /// Whether the page was last told that the output floods (`Hooks::flooding`).
    flooding_reported: bool,
    /// The notification bar's text at the last draw (`None`: no bar).
    drawn_bar: Option<String>,
    /// `performance.now()` of the last save of the tab's session ([`SAVE_INTERVAL`]).
    saved_ms: f64,
    /// Where the page's time goes (`stats().cost`).
    cost: FrameCost,
}

/// The notification bar's message: the link's state, then the paste's and the download's
/// progress, which share mosh's bar with it.
fn bar_message(
    relay: &RelayState,
    paste: Option<&PasteProgress>,
    downloads: &DownloadsState,
) -> Option<String> {
    let line = paste.map(PasteProgress::line);
    let download = downloads.progress().map(|p| p.line());
    join_messages([relay.message.as_deref(), line.as_deref(), download.as_deref()])
}

/// The notification bar for `session` now, with `message`.
fn notification<'a, S: tern::session::ServerState>(
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

/// Asks the relay to hold the server's datagrams up to `hold` (zero: not at all).
fn send_hold(link: &RelayLink, hold: Duration) {
    let ms = u32::try_from(hold.as_millis()).unwrap_or(u32::MAX);
    link.send_control(&ClientMessage::Hold { ms });
}

/// `requestAnimationFrame`'s callback (its argument is the frame's time).
type FrameCallback = Closure<dyn FnMut(f64)>;

/// One terminal session through tern-relay, as the page drives it.
#[derive(Debug)]
pub struct Driver {
    term: Terminal,
    target: Target,
    hooks: Hooks,
    /// Test-only WebTransport port override (`#wt_port=` in the page's address).
    wt_port: Option<u16>,
    st: RefCell<State>,
    /// The animation frame callback, made once in [`Driver::start`] and asked for by the pacer.
    frame_callback: RefCell<Option<FrameCallback>>,
    /// The pacer's timer during a flood (`Pace::wait`); dropped (cancelled) when a frame is
    /// asked for instead.
    pacer_timer: RefCell<Option<Timeout>>,
    /// The overlay clock's next wake ([`Driver::tick`]) and when it is due (`performance.now()`).
    tick_timer: RefCell<Option<(Timeout, f64)>>,
    /// A save of the tab's session due later ([`Driver::save_if_due`]).
    save_timer: RefCell<Option<Timeout>>,
}

impl Driver {
    pub fn new(term: Terminal, target: Target, hooks: Hooks, wt_port: Option<u16>) -> Rc<Self> {
        let st = State {
            status: Status::Connecting,
            session: None,
            session_id: None,
            ssh_host: None,
            paste_unavailable: None,
            relay_build: None,
            key_text: None,
            restored: false,
            restored_point: None,
            typed_since_restore: Vec::new(),
            nonces: None,
            timer: None,
            early_input: Vec::new(),
            screen: Screen::default(),
            pacer: DrawPacer::new(),
            side_effects: SideEffects::new(),
            echo: EchoMeter::new(),
            first_frame_ms: None,
            restored_ms: None,
            first_connect_ms: None,
            live_ms: None,
            predict: tern::predict::PredictConfig::default(),
            relay: RelayState::default(),
            history_lines: 0,
            resizing: false,
            xterm_writes: 0,
            flooding_reported: false,
            drawn_bar: None,
            saved_ms: f64::NEG_INFINITY,
            cost: FrameCost::default(),
            paste: PasteState::default(),
            downloads: DownloadsState::default(),
        };
        Rc::new(Driver {
            term,
            target,
            hooks,
            wt_port,
            st: RefCell::new(st),
            frame_callback: RefCell::new(None),
            pacer_timer: RefCell::new(None),
            tick_timer: RefCell::new(None),
            save_timer: RefCell::new(None),
        })
    }

    pub fn term(&self) -> &Terminal {
        &self.term
    }

    /// `GET /api/sessions` (counted in `stats().sessionListRequests`).
    pub async fn list_sessions(&self) -> Result<tern::relay_proto::SessionList, ConnectError> {
        self.st.borrow_mut().relay.counters.session_list_requests += 1;
        relay_link::fetch_sessions(&self.target.token).await
    }

    /// Restores the tab's saved session (its screen shows at once), then starts the overlay
    /// clock, the saving clock and the connection loop.
    pub fn start(self: &Rc<Self>) {
        self.watch_frames_and_visibility();
        self.restore();
        self.arm_tick();
        wasm_bindgen_futures::spawn_local(Driver::connection_loop(Rc::clone(self)));
    }

    /// The session this tab had before a reload, if it saved one: it becomes the session now,
    /// drawn before the relay is even asked; the first `ready` confirms it (or the relay says
    /// it is over, and a new one starts).
    fn restore(self: &Rc<Self>) {
        let Some((saved, _)) = storage::load_saved_session() else { return };
        let predict = self.st.borrow().predict;
        let resumed = saved.fits(&self.target).then(|| {
            let key = saved.key_text.parse().ok()?;
            let (config, nonces) = self.session_config(key, &saved.key_text, RESTORED_MTU, predict);
            ClientSession::resume(config, &saved.point, now()).ok().map(|s| (s, nonces))
        });
        let Some(Some((session, nonces))) = resumed else {
            // Not for this page (bridge mode, another server): the browser's copy stays.
            storage::forget_session(None);
            return;
        };
        {
            let mut st = self.st.borrow_mut();
            st.session = Some(session);
            st.nonces = Some(nonces);
            st.session_id = Some(saved.session_id);
            st.key_text = Some(saved.key_text);
            st.restored = true;
            st.restored_point = Some(saved.point.clone());
            st.typed_since_restore.clear();
            st.screen.forget();
        }
        if let Some(id) = self.st.borrow().session_id.clone() {
            self.hooks.session(&id);
        }
        self.render(false);
        self.st.borrow_mut().restored_ms = Some(now_ms());
        // Keys typed while the page was still starting go first, before anything typed later.
        self.send_early_input();
    }

    /// The keys kept until a session existed go to it now (sending them flushes), or the
    /// session just flushes.
    fn send_early_input(self: &Rc<Self>) {
        let early = std::mem::take(&mut self.st.borrow_mut().early_input);
        if early.is_empty() {
            self.flush(false);
        } else {
            self.send_input(&early);
        }
    }

    /// The overlay clock: draws only when a draw would show something new (the bar's text, a
    /// paste's progress, the end of a flood), and lets the relay stop holding datagrams once a
    /// flood is over. An idle page draws nothing: each draw costs the browser a frame (a few
    /// milliseconds of its main thread here, docs/BENCHMARKS.md "Fifth round").
    fn tick(self: &Rc<Self>) {
        let t = now();
        let due = {
            let st = self.st.borrow();
            let progress = st.paste.queue.progress(t);
            let bar = st.session.as_ref().and_then(|session| {
                let message = bar_message(&st.relay, progress.as_ref(), &st.downloads);
                notification(session, message.as_deref(), t).text()
            });
            bar != st.drawn_bar
                || progress != st.paste.reported
                || st.pacer.flooding(t) != st.flooding_reported
        };
        if due {
            self.render(false);
        } else {
            self.ask_relay_hold();
            self.arm_tick();
        }
    }

    /// When the overlay clock should wake next (see [`OVERLAY_TICK`]).
    fn tick_delay(&self) -> Duration {
        let st = self.st.borrow();
        let t = now();
        let lively = st.relay.message.is_some()
            || st.drawn_bar.is_some()
            || st.flooding_reported
            || st.pacer.flooding(t)
            || st.paste.queue.progress(t).is_some()
            || st.downloads.progress().is_some();
        match st.session.as_ref() {
            Some(session) if !lively => notification(session, None, t).next_change(),
            _ => OVERLAY_TICK,
        }
    }

    /// Sets the overlay clock for [`Driver::tick_delay`] from now, unless it wakes sooner already.
    fn arm_tick(self: &Rc<Self>) {
        let delay = self.tick_delay();
        let due = now_ms() + delay.as_secs_f64() * 1000.0;
        let mut timer = self.tick_timer.borrow_mut();
        if timer.as_ref().is_some_and(|(_, at)| *at <= due) {
            return;
        }
        let weak = Rc::downgrade(self);
        let wake = Timeout::new(ms(delay).max(1), move || {
            let Some(d) = weak.upgrade() else { return };
            d.tick_timer.borrow_mut().take();
            d.tick();
        });
        *timer = Some((wake, due));
    }

    /// Saves the tab's session if [`SAVE_INTERVAL`] has passed since the last save; otherwise
    /// makes sure one save follows when it has (one timer, only while the session is busy), so
    /// what is saved is never more than that old.
    fn save_if_due(self: &Rc<Self>) {
        let wait = {
            let mut st = self.st.borrow_mut();
            let t = now_ms();
            let left = st.saved_ms + SAVE_INTERVAL.as_secs_f64() * 1000.0 - t;
            if left <= 0.0 {
                st.saved_ms = t;
                None
            } else {
                Some(left)
            }
        };
        let Some(left) = wait else {
            self.save_timer.borrow_mut().take();
            return self.save();
        };
        if self.save_timer.borrow().is_some() {
            return;
        }
        let weak = Rc::downgrade(self);
        let timer = Timeout::new(left.ceil() as u32 + 1, move || {
            let Some(d) = weak.upgrade() else { return };
            d.save_timer.borrow_mut().take();
            d.save_if_due();
        });
        *self.save_timer.borrow_mut() = Some(timer);
    }

    /// Writes the tab's saved session (see [`SAVE_INTERVAL`]); nothing while there is none.
    pub fn save(&self) {
        let st = self.st.borrow();
        let (Some(session), Some(id), Some(key_text)) =
            (st.session.as_ref(), st.session_id.as_ref(), st.key_text.as_ref())
        else {
            return;
        };
        if session.is_closed() || st.status.is_final() {
            return;
        }
        storage::save_session(&relay_client::SavedSession {
            session_id: id.clone(),
            key_text: key_text.clone(),
            point: session.resume_point(),
        });
    }

    /// A session's configuration for this page, with the nonce bounds kept for its key.
    fn session_config(
        &self,
        key: tern::wire::Key,
        key_text: &str,
        max_datagram_size: usize,
        predict: tern::predict::PredictConfig,
    ) -> (SessionConfig, NonceStore) {
        let (store, first_seq, first_fragment_id) = NonceStore::load(key_text);
        let mut config = SessionConfig::new(key, self.term.cols().max(1), self.term.rows().max(1));
        // The browser silently drops datagrams above its limit.
        config.mtu = max_datagram_size.min(config.mtu);
        config.first_seq = first_seq;
        config.first_fragment_id = first_fragment_id;
        config.seed = (js_sys::Math::random() * 9_007_199_254_740_992.0) as u64;
        // Send keys from inside the input handler: a 1 ms gathering timer becomes >= 4 ms in a
        // browser (nested timers are clamped), and xterm.js already hands a burst or a paste over
        // in one call, so there is nothing to gather.
        config.min_delay = Duration::ZERO;
        config.predict = predict;
        (config, store)
    }

    fn set_status(&self, status: Status, message: &str) {
        self.st.borrow_mut().status = status;
        self.hooks.status(status, message);
    }

    /// Retrying cannot help: stop and say why.
    pub fn fail(&self, code: FailCode, message: &str) {
        self.stop(Status::Failed(code), message);
    }

    /// Stops at a final `status` (no reconnecting): the session's timer and the link go. The
    /// status is set first, so the connection loop sees it when the link it served ends.
    fn stop(&self, status: Status, message: &str) {
        self.set_status(status, message);
        let link = {
            let mut st = self.st.borrow_mut();
            st.timer = None;
            st.relay.link.take()
        };
        if let Some(l) = link {
            l.close();
        }
    }

    /// The session is over for good (shell exited, or the relay says the session is gone).
    fn end(&self, message: &str) {
        let link = {
            let mut st = self.st.borrow_mut();
            if st.status.is_final() {
                return;
            }
            st.timer = None;
            st.paste.queue.abandon(now());
            st.relay.link.take()
        };
        if let Some(l) = link {
            l.close();
        }
        // Nothing left to continue: a reload starts a new session.
        storage::forget_session(self.st.borrow().session_id.as_deref());
        self.set_status(Status::Ended, message);
    }

    /// When the session came from the tab's storage and no relay has confirmed it: forgets it
    /// (and the saved copy) and says so. Returns whether it did.
    fn drop_restored(&self) -> bool {
        let mut st = self.st.borrow_mut();
        if !st.restored {
            return false;
        }
        st.restored = false;
        st.session = None;
        let id = st.session_id.take();
        st.key_text = None;
        st.nonces = None;
        drop(st);
        storage::forget_session(id.as_deref());
        true
    }

    fn is_over(&self) -> bool {
        self.st.borrow().status.is_final()
    }

    // --- Connection ------------------------------------------------------------------------

    /// Connects, serves the link until it dies, pauses, reconnects; until the session is over.
    async fn connection_loop(self: Rc<Self>) {
        let mut backoff = Backoff::new();
        while !self.is_over() {
            let started = now();
            match self.connect_once().await {
                Ok(link) => {
                    self.serve_link(link).await;
                    backoff.link_ended(started, now());
                }
                Err(ConnectError::Fatal { code, message }) => return self.fail(code, &message),
                Err(ConnectError::Ended(_)) if self.drop_restored() => {
                    // The shell the tab saved is gone: a new session, right away.
                    continue;
                }
                Err(ConnectError::Ended(message)) => return self.end(&message),
                Err(ConnectError::Retry(why)) => self.st.borrow_mut().relay.last_error = Some(why),
            }
            if self.is_over() {
                return;
            }
            let delay = backoff.next_pause(js_sys::Math::random());
            let had_session = {
                let mut st = self.st.borrow_mut();
                st.relay.message = Some("Connection to the relay lost; reconnecting...".into());
                st.session.is_some()
            };
            if had_session {
                self.render(false);
            }
            let why = self.st.borrow().relay.last_error.clone().unwrap_or_default();
            self.set_status(Status::Reconnecting, &why);
            TimeoutFuture::new(ms(delay)).await;
        }
    }

    /// One attempt: info, WebTransport, hello/ready, and the session if this is the first.
    async fn connect_once(self: &Rc<Self>) -> Result<Rc<RelayLink>, ConnectError> {
        {
            let mut st = self.st.borrow_mut();
            st.relay.counters.info_requests += 1;
            st.first_connect_ms.get_or_insert(now_ms());
        }
        let asked = now();
        let info = relay_link::fetch_info(&self.target.token).await?;
        let patience = relay_client::webtransport_patience(now().saturating_duration_since(asked));
        relay_client::check_info(&info, &self.target)?;
        {
            let mut st = self.st.borrow_mut();
            st.relay.counters.connects += 1;
            st.history_lines = if info.mode == Mode::Spawn { info.history_lines } else { 0 };
            st.relay_build = Some(info.relay_build());
            st.paste_unavailable = (!info.paste.available).then(|| {
                let why = info.paste.reason.as_deref().unwrap_or("the relay cannot store files");
                format!("pasting files is off here: {why}")
            });
        }
        let (resume, ssh_host) = {
            let st = self.st.borrow();
            (st.session_id.clone(), st.ssh_host.clone())
        };
        let port = self.wt_port.unwrap_or(info.port);
        let (link, ready) = RelayLink::open(&info, port, &self.target.token, patience, |max| {
            self.target.hello(info.mode, resume.as_deref(), ssh_host.as_deref(), max)
        })
        .await?;
        let link = Rc::new(link);
        let (key, key_text) = match self.target.session_key(&ready) {
            Ok(k) => k,
            Err(e) => {
                link.close();
                return Err(e);
            }
        };
        let mut seed = None;
        let mut cannot_resume = false;
        {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            if st.status.is_final() {
                link.close();
                return Err(ConnectError::Retry("closed meanwhile".into()));
            }
            st.relay.counters.readies += 1;
            st.relay.kind = Some(link.kind());
            if link.kind() == "websocket" {
                st.relay.counters.websocket_links += 1;
            }
            st.relay.first_ready_ms.get_or_insert(now_ms());
            st.relay.liveness = Liveness::new(now());
            st.relay.message = None;
            st.relay.joiner = Joiner::new();
            st.relay.link = Some(Rc::clone(&link));
            if st.restored && st.key_text.as_deref() != Some(key_text.as_str()) {
                // Not the session the tab saved after all: start afresh with the relay's.
                st.session = None;
            }
            let was_restored = std::mem::take(&mut st.restored);
            let restored_point = st.restored_point.take();
            let typed_since_restore = std::mem::take(&mut st.typed_since_restore);
            let local = st.session.as_ref().map(ClientSession::resume_point);
            // A session restored from the tab's storage is weighed as it was saved (see
            // `restored_point`); one this page drove is weighed as it is.
            let weighed = match (&local, was_restored) {
                (Some(_), true) => restored_point.or_else(|| local.clone()),
                _ => local.clone(),
            };
            let mtu = link.max_datagram_size;
            let takeover = relay_client::takeover(weighed.as_ref(), &ready);
            // One line a connect, for whoever debugs a resume: which point won and why.
            web_sys::console::info_1(
                &relay_client::describe_takeover(&takeover, weighed.as_ref(), &ready).into(),
            );
            match takeover {
                Takeover::Fresh => {
                    // A new session cannot fail to start.
                    let _ = self.begin_session(st, key, &key_text, mtu, &ready.session, None);
                }
                Takeover::KeepLocal => {
                    if let Some(s) = st.session.as_mut() {
                        // A session that goes on over a new link: that link's datagram limit.
                        s.set_mtu(mtu);
                    }
                    // The relay's copy may be older than ours (a relay restart): it takes ours.
                    if info.mode == Mode::Spawn {
                        seed = local;
                    }
                }
                Takeover::Adopt(point) => {
                    let adopted =
                        self.begin_session(st, key, &key_text, mtu, &ready.session, Some(&point));
                    if let Err(e) = adopted {
                        link.close();
                        return Err(ConnectError::Fatal { code: FailCode::BadKey, message: e });
                    }
                    // Keys typed since the load went into the restored session: they go again,
                    // in order, into the one continued from the relay's copy.
                    if was_restored && !typed_since_restore.is_empty() {
                        if let Some(s) = st.session.as_mut() {
                            s.handle_input(now(), &typed_since_restore);
                        }
                    }
                }
                Takeover::CannotResume => cannot_resume = true,
            }
            if let Some(s) = st.session.as_mut() {
                // Nothing below the floor is forwarded: another page, or this one before a
                // reload, used those numbers.
                s.raise_next_seq(ready.seq_floor);
            }
        }
        if cannot_resume {
            link.close();
            self.cannot_resume();
            return Err(ConnectError::Retry("cannot resume".into()));
        }
        if let Some(point) = seed {
            link.send_control(&ClientMessage::Seed { point: relay_client::encode_point(&point) });
        }
        // A new link holds nothing until asked.
        let hold = self.st.borrow().pacer.relay_hold();
        if !hold.is_zero() {
            send_hold(&link, hold);
        }
        if let Some(id) = self.st.borrow().session_id.clone() {
            self.hooks.session(&id);
        }
        self.set_status(if ready.resumed { Status::Resumed } else { Status::Connected }, "");
        self.hooks.link(link.kind());
        // The core sends at once over the new link (mosh-server roams to the relay's new socket;
        // what went out while there was none is sent again).
        if let Some(s) = self.st.borrow_mut().session.as_mut() {
            s.link_up(now());
        }
        self.send_early_input();
        self.render(false);
        // An upload interrupted by the lost link resumes on this one, and a download too.
        self.drive_pastes();
        self.drive_downloads();
        Ok(link)
    }

    /// The session this page drives from now on, under nonce bounds kept for this key: a new one
    /// (the first `ready`), or one continued from the relay's copy of it (`from`: this page has
    /// nothing saved, or another page drove it since), whose screen shows at once.
    fn begin_session(
        &self,
        st: &mut State,
        key: tern::wire::Key,
        key_text: &str,
        max_datagram_size: usize,
        session_id: &str,
        from: Option<&tern::session::ResumePoint>,
    ) -> Result<(), String> {
        let (config, store) = self.session_config(key, key_text, max_datagram_size, st.predict);
        let session = match from {
            None => ClientSession::new(config, now()),
            Some(point) => ClientSession::resume(config, point, now())
                .map_err(|e| format!("The relay's copy of the session is unusable: {e}"))?,
        };
        st.session = Some(session);
        st.nonces = Some(store);
        st.screen.forget();
        st.session_id = Some(session_id.to_string());
        st.key_text = Some(key_text.to_string());
        Ok(())
    }

    /// Nothing here or at the relay can continue the session the page names.
    fn cannot_resume(&self) {
        {
            let mut st = self.st.borrow_mut();
            st.timer = None;
            st.session = None;
            st.relay.link = None;
        }
        storage::forget_session(self.st.borrow().session_id.as_deref());
        self.set_status(
            Status::CannotResume,
            "This session cannot be resumed from here: its state was kept in the browser tab that \
             ran it, and this tab has none.",
        );
    }

    /// Another page took the session over: stop (no reconnecting) until the person takes it back.
    fn moved(&self) {
        self.stop(
            Status::Moved,
            "This session is open in another window now. Take it back to continue here.",
        );
    }

    /// Which relay serves this page, once it said (`/api/info`).
    pub fn relay_build(&self) -> Option<String> {
        self.st.borrow().relay_build.clone()
    }

    /// Why pasted files cannot reach this session's shell, once the relay said so.
    pub fn paste_unavailable(&self) -> Option<String> {
        self.st.borrow().paste_unavailable.clone()
    }

    /// Start the new session on the relay's ssh host `name` (chosen from the session list)
    /// instead of the relay's own machine. Call before [`Driver::start`].
    pub fn start_on_host(&self, name: &str) {
        self.st.borrow_mut().ssh_host = Some(name.to_string());
    }

    /// The person takes the session back after it moved: connect again (the relay moves it away
    /// from the other page, and this one continues from the relay's copy).
    pub fn take_back(self: &Rc<Self>) {
        if self.st.borrow().status != Status::Moved {
            return;
        }
        self.set_status(Status::Connecting, "");
        wasm_bindgen_futures::spawn_local(Driver::connection_loop(Rc::clone(self)));
    }

    /// Continue the relay session `id`, which this page has nothing saved of (chosen from the
    /// relay's session list): the relay's copy gives the screen. Call before [`Driver::start`].
    pub fn resume_session(&self, id: &str) {
        let mut st = self.st.borrow_mut();
        if st.session.is_none() {
            st.session_id = Some(id.to_string());
        }
    }

    /// Runs one live link: datagrams here, control messages and pings beside; returns when the
    /// link is gone.
    async fn serve_link(self: &Rc<Self>, link: Rc<RelayLink>) {
        wasm_bindgen_futures::spawn_local(Driver::watch_link(
            Rc::downgrade(self),
            Rc::downgrade(&link),
        ));
        wasm_bindgen_futures::spawn_local(Driver::control_loop(
            Rc::downgrade(self),
            Rc::clone(&link),
        ));
        while let Some(d) = link.next_datagram().await {
            self.datagram(&d);
        }
        link.close();
        let mut st = self.st.borrow_mut();
        if st.relay.link.as_ref().is_some_and(|l| Rc::ptr_eq(l, &link)) {
            st.relay.link = None;
            if let Some(job) = st.paste.queue.active() {
                job.link_lost(now());
            }
        }
    }

    /// Pings the relay when the link has been silent, and drops a link silent too long
    /// (`relay_client::Liveness`); ends when the link is no longer the driver's.
    async fn watch_link(driver: Weak<Driver>, link: Weak<RelayLink>) {
        let mut wait = PING_AFTER;
        loop {
            TimeoutFuture::new(ms(wait).max(1)).await;
            let (Some(d), Some(link)) = (driver.upgrade(), link.upgrade()) else { return };
            let check = {
                let st = d.st.borrow();
                if !st.relay.link.as_ref().is_some_and(|l| Rc::ptr_eq(l, &link)) {
                    return;
                }
                st.relay.liveness.poll(now())
            };
            let t = now();
            wait = match check {
                LinkCheck::WaitUntil(at) => at.saturating_duration_since(t),
                LinkCheck::Ping { next } => {
                    link.send_control(&ClientMessage::Ping);
                    next.saturating_duration_since(t)
                }
                LinkCheck::Dead => return link.close(),
            };
        }
    }

    async fn control_loop(driver: Weak<Driver>, link: Rc<RelayLink>) {
        loop {
            let line = link.next_control().await;
            let Some(d) = driver.upgrade() else { return };
            match line.as_deref().map(relay_client::control_after_ready) {
                Some(ControlEvent::Alive) => d.st.borrow_mut().relay.liveness.heard(now()),
                Some(ControlEvent::SessionOver(message)) => return d.end(&message),
                Some(ControlEvent::Moved) => return d.moved(),
                Some(ControlEvent::Offer(offer)) => {
                    d.st.borrow_mut().relay.liveness.heard(now());
                    d.offer(offer);
                }
                Some(ControlEvent::Held(datagrams)) => {
                    d.st.borrow_mut().relay.liveness.heard(now());
                    d.held_datagrams(&datagrams);
                }
                Some(ControlEvent::LinkOver) | None => return link.close(),
            }
        }
    }

    fn datagram(self: &Rc<Self>, framed: &[u8]) {
        {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let t = now();
            st.relay.counters.datagrams_in += 1;
            st.relay.liveness.heard(t);
            match st.relay.joiner.push(framed) {
                Ok(Some(d)) => {
                    if let Some(s) = st.session.as_mut() {
                        s.handle_datagram_staged(t, &d, &mut st.cost.receive(1));
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    st.relay.counters.framing_errors += 1;
                    return;
                }
            }
        }
        self.flush(true);
    }

    /// Server datagrams the relay held for the page: handled together (they are whole: no
    /// joiner), with the timestamp echo the pacer picks for a batch, then one flush.
    fn held_datagrams(self: &Rc<Self>, datagrams: &[Vec<u8>]) {
        {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            st.relay.counters.held_batches += 1;
            st.relay.counters.held_datagrams += datagrams.len() as u64;
            let Some(s) = st.session.as_mut() else { return };
            let echo = st.pacer.held_batch_echo();
            s.handle_held_datagrams(now(), datagrams, echo, &mut st.cost.receive(datagrams.len()));
        }
        self.flush(true);
    }

    // --- Session ---------------------------------------------------------------------------

    /// Typed input: held behind an unfinished paste (Escape cancels it instead), else sent.
    pub fn input(self: &Rc<Self>, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let action = {
            let mut st = self.st.borrow_mut();
            // The person is typing: every echo is drawn at once, flood or not.
            st.pacer.note_input(now());
            st.paste.queue.key(now(), bytes)
        };
        // And the relay holds nothing back any more, before the key goes out.
        self.ask_relay_hold();
        match action {
            KeyAction::Send => self.send_input(bytes),
            KeyAction::Held => self.render(false),
            KeyAction::CancelledPastes => self.pastes_cancelled(),
        }
    }

    /// Hands bytes to the core now (or keeps them until the first session exists).
    fn send_input(self: &Rc<Self>, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let t_in = now();
        {
            let mut st = self.st.borrow_mut();
            if st.status.is_final() {
                return;
            }
            let Some(s) = st.session.as_mut() else {
                st.early_input.extend_from_slice(bytes);
                return;
            };
            s.handle_input(t_in, bytes);
            if st.restored {
                st.typed_since_restore.extend_from_slice(bytes);
            }
        }
        self.flush(false);
        {
            let mut st = self.st.borrow_mut();
            if let Some(num) = st.session.as_ref().map(|s| s.sent_state_num()) {
                st.echo.key_sent(t_in, num);
            }
        }
        // Predictions show at once, not on the next server frame.
        self.render(false);
    }

    pub fn resized(self: &Rc<Self>) {
        {
            let mut st = self.st.borrow_mut();
            let (cols, rows) = (self.term.cols().max(1), self.term.rows().max(1));
            // xterm.js reflowed its buffer: what it shows is no longer what we drew.
            st.screen.forget();
            let Some(s) = st.session.as_mut() else { return };
            s.handle_resize(now(), cols, rows);
        }
        self.flush(false);
        self.render(false);
    }

    /// Drains the core after a `handle_*`: datagrams out, events, timer; redraws on a new state.
    fn flush(self: &Rc<Self>, from_server: bool) {
        let mut changed = false;
        let mut closed = None;
        {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let Some(session) = st.session.as_mut() else { return };
            let mut out = Vec::new();
            while let Some(d) = session.poll_transmit() {
                out.push(d);
            }
            // Persist the nonce bound before any of these numbers leaves.
            if let Some(n) = st.nonces.as_mut() {
                n.cover(session.next_seq(), session.next_fragment_id());
            }
            for d in &out {
                match &st.relay.link {
                    Some(l) => {
                        l.send_datagram(d);
                        st.relay.counters.datagrams_out += 1;
                    }
                    // Offline: the core keeps the state and retransmits after reconnecting.
                    None => st.relay.counters.dropped_offline += 1,
                }
            }
            while let Some(e) = session.poll_event() {
                match e {
                    Event::ServerStateChanged { .. } => changed = true,
                    Event::Closed(reason) => closed = Some(reason),
                }
            }
            match session.poll_timeout() {
                None => st.timer = None,
                Some(at) if st.timer.as_ref().is_some_and(|(_, armed)| *armed <= at) => {}
                Some(at) => {
                    let weak = Rc::downgrade(self);
                    // Rounded up to the browser's milliseconds: one that ran out a fraction too
                    // early would only come back at once.
                    let wait = at.saturating_duration_since(now()) + Duration::from_micros(999);
                    let timer = Timeout::new(ms(wait), move || {
                        if let Some(d) = weak.upgrade() {
                            d.timeout();
                        }
                    });
                    st.timer = Some((timer, at));
                }
            }
        }
        if changed {
            self.st.borrow_mut().live_ms.get_or_insert(now_ms());
            self.render(from_server);
        }
        self.save_if_due();
        if let Some(reason) = closed {
            self.end(match reason {
                CloseReason::ServerShutdown => "The shell exited; the session is over.",
                CloseReason::ClientShutdown => "The session was closed.",
                CloseReason::ShutdownTimedOut => {
                    "The session was closed (the server did not answer)."
                }
            });
        }
    }

    fn timeout(self: &Rc<Self>) {
        {
            let mut st = self.st.borrow_mut();
            // This timer has run: the flush below arms the next.
            st.timer = None;
            let Some(s) = st.session.as_mut() else { return };
            s.handle_timeout(now());
        }
        self.flush(false);
        // The predictor's judge may have changed what is shown (a stalled echo, a reset).
        self.render(false);
    }

    /// Another prediction mode (the page's settings).
    pub fn set_predict(&self, config: tern::predict::PredictConfig) {
        let mut st = self.st.borrow_mut();
        st.predict = config;
        if let Some(s) = st.session.as_mut() {
            s.set_predict_config(config);
        }
    }

    /// The page is about to resize the terminal. xterm.js moves screen rows into its scrollback
    /// when it shrinks (and back out when it grows), while the screen is repainted after a resize
    /// anyway: so the screen is cleared, the cursor homed, and nothing drawn until
    /// [`end_resize`](Self::end_resize), and the scrollback keeps only what scrolled off, once.
    pub fn begin_resize(&self) {
        let mut st = self.st.borrow_mut();
        st.resizing = true;
        st.screen.forget();
        self.term.write(&js_sys::Uint8Array::from(&b"\x1b[H\x1b[2J"[..]));
    }

    /// The resize is done (or was not needed): draw again, everything.
    pub fn end_resize(&self) {
        {
            let mut st = self.st.borrow_mut();
            st.resizing = false;
            st.screen.forget();
        }
        // Repainted now, not at the next animation frame: xterm.js has just resized and shows a
        // cleared screen, and a paced draw left for later raced the next resize (lines went
        // missing after several resizes in a row).
        self.draw(false);
    }

    /// Something to show changed (`new_state`: the server's screen): reports the title, bell and
    /// clipboard at once, and draws when the pacer says (at once on a quiet screen, at the next
    /// animation frame during a flood, not while the page is hidden).
    pub fn render(self: &Rc<Self>, new_state: bool) {
        let (changes, pace) = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let changes = st
                .session
                .as_ref()
                .map(|s| st.side_effects.observe(s.server_state().framebuffer()));
            (changes, st.pacer.request(new_state, now()))
        };
        if let Some(changes) = changes {
            if let Some(title) = &changes.title {
                self.hooks.title(title);
            }
            if changes.bell {
                self.hooks.bell();
            }
            if let Some(text) = &changes.clipboard {
                self.hooks.clipboard(text);
            }
        }
        self.follow(pace);
        self.arm_tick();
    }

    /// Does what the pacer said: asks for an animation frame (or sets its timer), draws; and
    /// asks the relay for another hold when the pacer wants one.
    fn follow(self: &Rc<Self>, pace: Pace) {
        self.ask_relay_hold();
        if let Some(wait) = pace.wait {
            let weak = Rc::downgrade(self);
            let timer = Timeout::new(ms(wait).max(1), move || {
                let Some(d) = weak.upgrade() else { return };
                d.pacer_timer.borrow_mut().take();
                let pace = d.st.borrow_mut().pacer.on_wait_over(now());
                d.follow(pace);
            });
            *self.pacer_timer.borrow_mut() = Some(timer);
        }
        if pace.request_frame {
            self.pacer_timer.borrow_mut().take();
            if let (Some(window), Some(callback)) =
                (web_sys::window(), &*self.frame_callback.borrow())
            {
                // Fails only without a window; the next request asks again.
                let _ = window.request_animation_frame(callback.as_ref().unchecked_ref());
            }
        }
        if let Some(new_state) = pace.draw {
            self.draw(new_state);
        }
    }

    /// Makes the animation frame callback and follows the page's visibility: the pacer draws at
    /// most once per frame and nothing while the page is hidden.
    fn watch_frames_and_visibility(self: &Rc<Self>) {
        let weak = Rc::downgrade(self);
        let on_frame = Closure::<dyn FnMut(f64)>::new(move |_at: f64| {
            if let Some(d) = weak.upgrade() {
                let pace = d.st.borrow_mut().pacer.on_animation_frame(now());
                d.follow(pace);
            }
        });
        *self.frame_callback.borrow_mut() = Some(on_frame);
        let Some(document) = web_sys::window().and_then(|w| w.document()) else { return };
        self.set_visible(document.visibility_state() == web_sys::VisibilityState::Visible);
        let weak = Rc::downgrade(self);
        let on_change = Closure::<dyn FnMut()>::new(move || {
            let Some(d) = weak.upgrade() else { return };
            let visible = web_sys::window()
                .and_then(|w| w.document())
                .is_none_or(|doc| doc.visibility_state() == web_sys::VisibilityState::Visible);
            d.set_visible(visible);
        });
        let _ = document.add_event_listener_with_callback(
            "visibilitychange",
            on_change.as_ref().unchecked_ref(),
        );
        // The page's life: the listener stays as long as the page.
        on_change.forget();
    }

    /// The page was hidden or shown: hidden, nothing is drawn; shown, the newest screen is drawn
    /// in one go. `follow` then asks the relay for the hold that goes with it.
    fn set_visible(self: &Rc<Self>, visible: bool) {
        let pace = self.st.borrow_mut().pacer.set_visible(visible, now());
        self.follow(pace);
    }

    /// Whether the relay may hold the server's datagrams and send them together, for a hidden
    /// page or during a flood (default true). The benchmark turns it off to measure both in one
    /// run.
    pub fn set_relay_hold(self: &Rc<Self>, allowed: bool) {
        self.st.borrow_mut().pacer.allow_relay_hold(allowed);
        self.follow(Pace::default());
    }

    /// Asks the relay for the hold the pacer wants now, when it changed.
    fn ask_relay_hold(&self) {
        let (hold, link) = {
            let mut st = self.st.borrow_mut();
            let Some(hold) = st.pacer.poll_relay_hold(now()) else { return };
            (hold, st.relay.link.clone())
        };
        if let Some(link) = link {
            send_hold(&link, hold);
        }
    }

    /// Draws the core's newest screen with the notification bar into xterm.js (only the
    /// difference to what it shows), and reports paste progress.
    fn draw(&self, new_state: bool) {
        if self.st.borrow().resizing {
            return;
        }
        let t = now();
        let (bytes, paste_report, flood_report) = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let progress = st.paste.queue.progress(t);
            let paste_report = (progress != st.paste.reported).then(|| {
                st.paste.reported.clone_from(&progress);
                progress.clone()
            });
            let started = now_ms();
            let message = bar_message(&st.relay, progress.as_ref(), &st.downloads);
            let bytes = st.session.as_mut().map(|session| {
                let note = notification(session, message.as_deref(), t);
                st.drawn_bar = note.text();
                // The server's screen with the predictions that may be shown, then the bar.
                let frame = session
                    .display_frame()
                    .unwrap_or_else(|| session.server_state().framebuffer().clone());
                let server = session.server_state().framebuffer();
                let size = tern::terminal::Size { cols: self.term.cols(), rows: self.term.rows() };
                let bytes = st.screen.draw(server, &frame, &note, size);
                // Every keystroke whose client state the server has acknowledged is echoed by
                // the first frame with visible change written after that ack; when predictions
                // are shown, a new server frame that changes nothing matches what was predicted,
                // so it is that echo too.
                let echoed = !bytes.is_empty() || session.predictor().showing();
                if echoed && new_state && session.has_heard_server() {
                    st.echo.frame_drawn(now(), session.acked_state_num());
                    st.first_frame_ms.get_or_insert(now_ms());
                }
                if !bytes.is_empty() {
                    st.xterm_writes += 1;
                }
                bytes
            });
            st.cost.diff_ms += now_ms() - started;
            let flooding = st.pacer.flooding(t);
            let flood_report = (flooding != st.flooding_reported).then(|| {
                st.flooding_reported = flooding;
                flooding
            });
            (bytes, paste_report, flood_report)
        };
        if let Some(p) = paste_report {
            self.hooks.paste(p.as_ref());
        }
        if let Some(on) = flood_report {
            self.hooks.flooding(on);
        }
        if let Some(bytes) = bytes.filter(|b| !b.is_empty()) {
            let started = now_ms();
            // A copy: xterm.js keeps the buffer until it parses it later.
            self.term.write(&Uint8Array::from(&bytes[..]));
            let mut st = self.st.borrow_mut();
            st.cost.write_ms += now_ms() - started;
            st.cost.bytes_written += bytes.len() as u64;
        }
    }

    /// The page is going away (a reload, a closed tab): the shell keeps running; the tab saves
    /// where it stands, so a reload continues it.
    pub fn leave(&self) {
        self.save();
    }

    /// The person ends the session: mosh's quit handshake (the shell gets a hangup), and
    /// nothing for a reload to continue.
    pub fn end_session(self: &Rc<Self>) {
        {
            let mut st = self.st.borrow_mut();
            if let Some(s) = st.session.as_mut() {
                s.shutdown(now());
            }
        }
        storage::forget_session(self.st.borrow().session_id.as_deref());
        self.flush(false);
    }

    // --- Pastes ----------------------------------------------------------------------------

    /// A file was pasted or dropped: it takes its place in the input order now; read, hashed
    /// and queued for upload when ready.
    pub fn paste(self: &Rc<Self>, blob: web_sys::Blob) {
        let id = self.st.borrow_mut().paste.queue.begin();
        let unavailable = self.st.borrow().paste_unavailable.clone();
        if let Some(why) = unavailable {
            self.st.borrow_mut().paste.queue.read_failed(now(), id, &why);
            self.drive_pastes();
            return;
        }
        self.render(false);
        let driver = Rc::clone(self);
        wasm_bindgen_futures::spawn_local(async move {
            let read = read_file(blob).await;
            {
                let mut st = driver.st.borrow_mut();
                let st = &mut *st;
                match read {
                    Ok(f) => {
                        st.paste.queue.hashed(id, f.hash, f.bytes.len() as u64, &f.mime);
                        if st.paste.queue.needs_bytes(&f.hash) {
                            st.paste.files.keep(f.hash, f.bytes);
                        }
                    }
                    Err(why) => st.paste.queue.read_failed(now(), id, &why),
                }
            }
            driver.drive_pastes();
        });
    }

    /// Escape or the page's button: stop every paste under way, release the held keys.
    pub fn cancel_pastes(self: &Rc<Self>) {
        if self.st.borrow_mut().paste.queue.cancel(now()) {
            self.pastes_cancelled();
        }
    }

    pub fn set_hold_keys(&self, hold: bool) {
        self.st.borrow_mut().paste.queue.hold_keys = hold;
    }

    fn pastes_cancelled(self: &Rc<Self>) {
        let stream = self.st.borrow_mut().paste.stream.take();
        if let Some(s) = stream {
            s.abort();
        }
        self.drive_pastes();
    }

    /// After anything that may move the pastes on: finish the active job, start the next, open
    /// its stream when a link is up, type what is ready, re-arm the paste timer.
    fn drive_pastes(self: &Rc<Self>) {
        let t = now();
        let open = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            while let Some(outcome) = st.paste.queue.finish_active(t) {
                if let Some(s) = st.paste.stream.take() {
                    match outcome {
                        tern::paste::JobOutcome::Done(_) => s.writer.close(),
                        _ => s.abort(),
                    }
                }
            }
            st.paste.queue.start_next(t);
            let pastes = &st.paste.queue;
            st.paste.files.retain(|h| pastes.needs_bytes(h));
            let link = st.relay.link.clone().filter(|_| !st.status.is_final());
            match (st.paste.queue.active(), link) {
                (Some(job), Some(link))
                    if !st.paste.opening
                        && st.paste.stream.is_none()
                        && job.wants_stream(t, true) =>
                {
                    st.paste.opening = true;
                    Some((job.serial, link))
                }
                _ => None,
            }
        };
        if let Some((serial, link)) = open {
            wasm_bindgen_futures::spawn_local(Driver::run_stream(Rc::clone(self), link, serial));
        }
        self.release();
        self.arm_paste_timer();
    }

    /// Types every ready path from the front of the queue and the keys behind it.
    fn release(self: &Rc<Self>) {
        let bytes = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let bracketed = st
                .session
                .as_ref()
                .is_some_and(|s| s.server_state().framebuffer().bracketed_paste());
            st.paste.queue.release(bracketed)
        };
        self.send_input(&bytes);
        self.render(false);
    }

    /// One upload stream for the active job `serial`: header, replies, paced chunks.
    async fn run_stream(self: Rc<Self>, link: Rc<RelayLink>, serial: u32) {
        let opened = link.open_stream().await;
        let lines = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            st.paste.opening = false;
            match (st.paste.queue.active().filter(|j| j.serial == serial), opened) {
                (None, Ok((writer, lines))) => {
                    // Cancelled meanwhile.
                    writer.abort();
                    lines.cancel();
                    None
                }
                (None, Err(_)) => None,
                (Some(job), Err(_)) => {
                    job.stream_ended(now());
                    None
                }
                (Some(job), Ok((writer, lines))) => {
                    let header = job.stream_opened().to_line();
                    let stream = UploadStream::new(serial, writer, lines);
                    stream.write(&header);
                    let lines = Rc::clone(&stream.lines);
                    st.paste.stream = Some(stream);
                    Some(lines)
                }
            }
        };
        if let Some(lines) = lines {
            while let Some(line) = lines.next_line().await {
                // A line this page cannot read is skipped (a newer relay's addition).
                let Ok(reply) = decode::<UploadReply>(&line) else { continue };
                let over = {
                    let mut st = self.st.borrow_mut();
                    let Some(job) = st.paste.queue.active().filter(|j| j.serial == serial) else {
                        break;
                    };
                    job.handle_reply(now(), reply);
                    job.outcome().is_some()
                };
                if over {
                    break;
                }
                self.pump();
            }
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            if let Some(job) = st.paste.queue.active().filter(|j| j.serial == serial) {
                job.stream_ended(now());
                if job.outcome().is_none() {
                    // Broken: the next attempt opens a stream of its own.
                    if let Some(s) = st.paste.stream.take_if(|s| s.serial == serial) {
                        s.abort();
                    }
                }
            }
        }
        self.drive_pastes();
    }

    /// Writes what the pacer releases, re-arms the paste timer, redraws the progress now and then.
    fn pump(self: &Rc<Self>) {
        let redraw = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let (Some(job), Some(stream)) = (st.paste.queue.active(), st.paste.stream.as_ref())
            else {
                return;
            };
            if job.serial != stream.serial {
                return;
            }
            if let Some(content) = st.paste.files.get(&job.hash()) {
                stream.pump(job, &content, now());
            }
            let due = now_ms() - st.paste.last_redraw_ms > PASTE_REDRAW.as_secs_f64() * 1000.0;
            if due {
                st.paste.last_redraw_ms = now_ms();
            }
            due
        };
        self.arm_paste_timer();
        if redraw {
            self.render(false);
        }
    }

    /// One timer for the pastes: pacing, stall, retry, give-up, the result line's expiry.
    fn arm_paste_timer(self: &Rc<Self>) {
        let mut st = self.st.borrow_mut();
        st.paste.timer = st.paste.queue.poll_timeout().map(|at| {
            let weak = Rc::downgrade(self);
            Timeout::new(ms(at.saturating_duration_since(now())).max(1), move || {
                let Some(d) = weak.upgrade() else { return };
                if let Some(job) = d.st.borrow_mut().paste.queue.active() {
                    job.handle_timeout(now());
                }
                d.pump();
                d.drive_pastes();
            })
        });
    }

    // --- Reports ---------------------------------------------------------------------------

    /// The core's screen (not xterm.js's) as text: rows joined by `\n`, trailing blanks trimmed.
    pub fn screen_text(&self) -> String {
        let st = self.st.borrow();
        st.session
            .as_ref()
            .map(|s| screen_text(s.server_state().framebuffer()).rows.join("\n"))
            .unwrap_or_default()
    }

    /// Counters, SRTT and echo latency; see docs/BROWSER.md for each field.
    pub fn stats(&self) -> JsValue {
        let st = self.st.borrow();
        let c = &st.relay.counters;
        let phase = match st.status {
            Status::Connecting => "connecting",
            Status::Connected | Status::Resumed => "live",
            Status::Reconnecting => "reconnecting",
            Status::Ended => "ended",
            Status::Moved => "moved",
            Status::CannotResume => "cannot_resume",
            Status::Failed(_) => "failed",
        };
        let opt_ms = |v: Option<f64>| v.map_or(JsValue::NULL, JsValue::from);
        object(&[
            ("phase", phase.into()),
            ("session", st.session_id.as_deref().map_or(JsValue::NULL, JsValue::from)),
            ("infoRequests", c.info_requests.into()),
            ("sessionListRequests", c.session_list_requests.into()),
            ("connects", c.connects.into()),
            ("readies", c.readies.into()),
            ("linkDatagramsIn", (c.datagrams_in as f64).into()),
            ("linkDatagramsOut", (c.datagrams_out as f64).into()),
            ("droppedOffline", (c.dropped_offline as f64).into()),
            ("framingErrors", (c.framing_errors as f64).into()),
            ("heldBatches", (c.held_batches as f64).into()),
            ("heldDatagrams", (c.held_datagrams as f64).into()),
            (
                "controlChunks",
                (st.relay.link.as_ref().map_or(0, |l| l.control_chunks()) as f64).into(),
            ),
            ("transport", st.relay.kind.map_or(JsValue::NULL, JsValue::from)),
            ("websocketLinks", c.websocket_links.into()),
            ("joinerEvicted", (st.relay.joiner.evicted as f64).into()),
            ("firstReadyMs", opt_ms(st.relay.first_ready_ms)),
            ("firstFrameMs", opt_ms(st.first_frame_ms)),
            ("restoredMs", opt_ms(st.restored_ms)),
            ("firstConnectMs", opt_ms(st.first_connect_ms)),
            ("liveMs", opt_ms(st.live_ms)),
            ("lastError", st.relay.last_error.as_deref().map_or(JsValue::NULL, JsValue::from)),
            ("core", st.session.as_ref().map_or(JsValue::NULL, stats::core)),
            ("echo", stats::echo(&st.echo.summary())),
            ("predict", stats::predict(st.predict, st.session.as_ref().map(|s| s.predictor()))),
            ("paste", stats::paste(&st.paste.queue, now())),
            ("download", st.downloads.progress().map_or(JsValue::NULL, |p| stats::download(&p))),
            ("scrollbackRows", (st.screen.scrollback_rows as f64).into()),
            ("xtermWrites", (st.xterm_writes as f64).into()),
            ("draws", stats::pacer(&st.pacer)),
            ("cost", stats::frame_cost(&st.cost)),
        ])
    }

    /// The session whose history the relay keeps, with the token to ask for it.
    pub fn history_target(&self) -> Option<(String, String)> {
        let st = self.st.borrow();
        let id = st.session_id.clone().filter(|_| st.history_lines > 0)?;
        Some((self.target.token.clone(), id))
    }
}
