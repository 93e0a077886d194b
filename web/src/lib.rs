//! The browser shell: drives the sans-IO core with WebTransport, timers and xterm.js (wasm32 only).
//!
//! ```text
//!  xterm.js onData/onResize ──> handle_input / handle_resize ─┐
//!  WebTransport datagrams ──> relay_framing::Joiner ──> handle_datagram ─┤  ClientSession<Complete>
//!  gloo timer at poll_timeout ──> handle_timeout ─────────────┘      │
//!        poll_transmit ──> WebTransport datagrams      poll_event ──> Renderer(shown, wanted) ──> xterm.js
//! ```
//!
//! It owns I/O only: the protocol, the screen model and the notification bar are the core's.
//! The page (`www/app.js`) owns the DOM: it creates the xterm.js `Terminal`, fits it to the
//! window, and shows what the hooks report. Exported surface: [`Client`].

// The browser client exists only in the browser; elsewhere this crate is empty.
#![cfg(target_arch = "wasm32")]

mod input;
mod link;
mod paste;
mod storage;
mod xterm;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use std::time::Duration;

use gloo_timers::callback::{Interval, Timeout};
use gloo_timers::future::TimeoutFuture;
use js_sys::{Function, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

use link::{ConnectError, Control, Link, RelayInfo, object};
use storage::NonceStore;
use tern::relay_proto::framing::Joiner;
use tern::session::{ClientSession, CloseReason, Event, SessionConfig};
use tern::terminal::{
    Complete, Framebuffer, Notification, Renderer, overlay_notification, screen_text,
};
use tern::time::Instant;
use tern::wire::{Key, StateNum};
pub use xterm::Terminal;

/// First pause before reconnecting; doubles per failed attempt up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A link that lived this long counts as having worked: the next loss starts the backoff over.
const STABLE_LINK: Duration = Duration::from_secs(10);
/// Control-stream pings: a relay killed without a goodbye (or a dead network path) shows up
/// as missing pongs long before QUIC's own idle timeout.
const PING_INTERVAL: Duration = Duration::from_secs(2);
const PING_DEADLINE: Duration = Duration::from_secs(7);
/// The notification bar counts seconds; redraw it this often.
const OVERLAY_TICK: Duration = Duration::from_secs(1);
/// Echo latency samples kept for `stats()`.
const MAX_ECHO_SAMPLES: usize = 4096;

/// Milliseconds on the page's monotonic clock (`performance.now()`, 0.1 ms resolution unless
/// the page is cross-origin isolated).
fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}

/// The core's clock: microseconds on the same timeline as [`now_ms`].
fn now() -> Instant {
    Instant::from_micros((now_ms() * 1000.0) as u64)
}

fn ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// Where the session stands, from the page's point of view.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Connecting,
    Live,
    Reconnecting,
    /// Over for good: the shell exited or the page quit. No reconnect.
    Ended,
    /// Retrying cannot help (wrong token, no WebTransport, refused).
    Failed,
}

/// Link-level counters (the core keeps its own, see `stats()`).
#[derive(Debug, Default)]
struct LinkCounters {
    info_requests: u32,
    connects: u32,
    readies: u32,
    datagrams_in: u64,
    datagrams_out: u64,
    dropped_offline: u64,
    framing_errors: u64,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    session: Option<ClientSession<Complete>>,
    session_id: Option<String>,
    nonces: Option<NonceStore>,
    link: Option<Rc<Link>>,
    joiner: Joiner,
    /// What xterm.js shows, as the renderer left it; `None` when unknown (start, after a resize).
    shown: Option<Framebuffer>,
    timer: Option<Timeout>,
    /// The notification bar's message (`None`: the bar shows only lateness).
    message: Option<String>,
    /// Keys typed before the first session existed.
    early_input: Vec<u8>,
    /// Keystrokes waiting for their echo: (time handed to the core, client state carrying it).
    echo_pending: VecDeque<(f64, StateNum)>,
    echo_samples: Vec<f64>,
    seen_bell: u32,
    seen_title: String,
    seen_clipboard: String,
    counters: LinkCounters,
    /// `performance.now()` when the first frame with server content was written.
    first_frame_ms: Option<f64>,
    /// `performance.now()` when the relay first answered `ready`.
    first_ready_ms: Option<f64>,
    last_control_ms: f64,
    last_error: Option<String>,
    /// Pasted and dropped files (paste.rs).
    paste: paste::Pastes,
}

/// The page's handle: one terminal session through tern-relay.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Client {
    shell: Rc<Shell>,
}

#[derive(Debug)]
struct Shell {
    term: Terminal,
    token: String,
    /// `{ status(kind, message), title(text), bell(), clipboard(text) }`, each optional.
    hooks: JsValue,
    /// Bridge mode: `{ host, port, key }` of a mosh-server started elsewhere.
    bridge: Option<(String, u16, String)>,
    /// Test-only WebTransport port override (`#wt_port=` in the page's address).
    wt_port: Option<u16>,
    st: RefCell<State>,
}

#[wasm_bindgen]
impl Client {
    /// `options`: `{ token, hooks, bridge? }` (see `www/app.js`).
    #[wasm_bindgen(constructor)]
    pub fn new(term: Terminal, options: JsValue) -> Result<Client, JsValue> {
        let token = Reflect::get(&options, &"token".into())?
            .as_string()
            .ok_or_else(|| JsValue::from_str("options.token missing"))?;
        let hooks = Reflect::get(&options, &"hooks".into())?;
        // Test-only: send WebTransport to this port instead of the relay's (a link emulator in
        // front of the relay, docs/BROWSER.md). HTTP still goes to the page's origin.
        let wt_port = Reflect::get(&options, &"wtPort".into())
            .ok()
            .and_then(|p| p.as_f64())
            .and_then(|p| u16::try_from(p as u64).ok())
            .filter(|&p| p != 0);
        let bridge =
            Reflect::get(&options, &"bridge".into()).ok().filter(|b| b.is_object()).and_then(|b| {
                let s = |f: &str| Reflect::get(&b, &f.into()).ok()?.as_string();
                let port = Reflect::get(&b, &"port".into()).ok()?.as_f64()?;
                Some((s("host")?, u16::try_from(port as u64).ok()?, s("key")?))
            });
        let st = State {
            phase: Phase::Connecting,
            session: None,
            session_id: None,
            nonces: None,
            link: None,
            joiner: Joiner::new(),
            shown: None,
            timer: None,
            message: None,
            early_input: Vec::new(),
            echo_pending: VecDeque::new(),
            echo_samples: Vec::new(),
            seen_bell: 0,
            seen_title: String::new(),
            seen_clipboard: String::new(),
            counters: LinkCounters::default(),
            first_frame_ms: None,
            first_ready_ms: None,
            last_control_ms: 0.0,
            last_error: None,
            paste: paste::Pastes::new(),
        };
        Ok(Client {
            shell: Rc::new(Shell { term, token, hooks, bridge, wt_port, st: RefCell::new(st) }),
        })
    }

    /// Wires the terminal's events and starts connecting (and reconnecting) in the background.
    pub fn start(&self) {
        let shell = &self.shell;
        if !Reflect::has(&js_sys::global(), &"WebTransport".into()).unwrap_or(false) {
            shell.fail(
                "no_webtransport",
                "This browser has no WebTransport. Use Chrome or Edge 97 or later, or Firefox 114 or later.",
            );
            return;
        }
        // mosh-client keeps the local terminal in DECCKM for good (MOSH-PROTOCOL.md 7.1), so
        // xterm.js sends cursor keys as ESC O A..D; input::translate_typed covers the rest.
        shell.term.write(&Uint8Array::from(&b"\x1b[?1h"[..]));

        let weak = Rc::downgrade(shell);
        let on_data = Closure::<dyn FnMut(String)>::new(move |data: String| {
            if let Some(shell) = weak.upgrade() {
                shell.input(&input::translate_typed(&data));
            }
        });
        shell.term.on_data(&on_data);
        let weak = Rc::downgrade(shell);
        let on_binary = Closure::<dyn FnMut(String)>::new(move |data: String| {
            if let Some(shell) = weak.upgrade() {
                shell.input(&input::binary_string(&data));
            }
        });
        shell.term.on_binary(&on_binary);
        let weak = Rc::downgrade(shell);
        let on_resize = Closure::<dyn FnMut(JsValue)>::new(move |_size: JsValue| {
            if let Some(shell) = weak.upgrade() {
                shell.resized();
            }
        });
        shell.term.on_resize(&on_resize);
        // The terminal lives as long as the page: so do its callbacks.
        on_data.forget();
        on_binary.forget();
        on_resize.forget();

        let weak = Rc::downgrade(shell);
        Interval::new(ms(OVERLAY_TICK), move || {
            if let Some(shell) = weak.upgrade() {
                shell.render(false);
            }
        })
        .forget();

        wasm_bindgen_futures::spawn_local(Shell::connection_loop(Rc::clone(shell)));
    }

    /// The core's screen (not xterm.js's) as text: rows joined by `\n`, trailing blanks trimmed.
    #[wasm_bindgen(js_name = screenText)]
    pub fn screen_text(&self) -> String {
        let st = self.shell.st.borrow();
        st.session
            .as_ref()
            .map(|s| screen_text(s.server_state().framebuffer()).rows.join("\n"))
            .unwrap_or_default()
    }

    /// Counters, SRTT and echo latency; see docs/BROWSER.md for each field.
    pub fn stats(&self) -> JsValue {
        self.shell.stats()
    }

    /// A pasted or dropped file (a `File` is a `Blob`): uploaded to the relay's paste directory,
    /// then its path is typed. Keys typed meanwhile follow the path.
    pub fn paste(&self, file: web_sys::Blob) {
        self.shell.paste(file);
    }

    /// Cancels the pastes under way (as Escape does); held keys go out.
    #[wasm_bindgen(js_name = cancelPaste)]
    pub fn cancel_paste(&self) {
        self.shell.cancel_pastes();
    }

    /// Whether keys typed during a paste wait for its path (default true). The benchmark turns
    /// it off to measure keystroke echo while an upload shares the link.
    #[wasm_bindgen(js_name = setHoldKeysDuringPaste)]
    pub fn set_hold_keys_during_paste(&self, hold: bool) {
        self.shell.st.borrow_mut().paste.hold_keys = hold;
    }

    /// The page is going away: start mosh's quit handshake (best effort; a reload starts a new
    /// session, and the old mosh-server should not linger).
    pub fn quit(&self) {
        let shell = &self.shell;
        {
            let mut st = shell.st.borrow_mut();
            st.phase = Phase::Ended;
            if let Some(s) = st.session.as_mut() {
                s.shutdown(now());
            }
        }
        shell.flush(false);
    }
}

impl Shell {
    fn hook(&self, name: &str, args: &[JsValue]) {
        let Ok(f) = Reflect::get(&self.hooks, &name.into()) else { return };
        let Some(f) = f.dyn_ref::<Function>() else { return };
        let arr: js_sys::Array = args.iter().collect();
        // A throwing hook is the page's bug; it must not break the session.
        let _ = f.apply(&self.hooks, &arr);
    }

    fn status(&self, kind: &str, message: &str) {
        self.hook("status", &[kind.into(), message.into()]);
    }

    fn fail(&self, code: &str, message: &str) {
        let link = {
            let mut st = self.st.borrow_mut();
            st.phase = Phase::Failed;
            st.timer = None;
            st.link.take()
        };
        if let Some(l) = link {
            l.close();
        }
        self.status(code, message);
    }

    /// The session is over for good (shell exited, or the relay says the session is gone).
    fn end(&self, message: &str) {
        let link = {
            let mut st = self.st.borrow_mut();
            if matches!(st.phase, Phase::Ended | Phase::Failed) {
                return;
            }
            st.phase = Phase::Ended;
            st.timer = None;
            st.link.take()
        };
        if let Some(l) = link {
            l.close();
        }
        self.status("ended", message);
    }

    fn is_over(&self) -> bool {
        matches!(self.st.borrow().phase, Phase::Ended | Phase::Failed)
    }

    /// Connects, serves the link until it dies, pauses, reconnects; until the session is over.
    async fn connection_loop(self: Rc<Self>) {
        let mut backoff = BACKOFF_FIRST;
        loop {
            if self.is_over() {
                return;
            }
            let started = now_ms();
            match self.connect_once().await {
                Ok(link) => {
                    self.serve_link(link).await;
                    if now_ms() - started > STABLE_LINK.as_secs_f64() * 1000.0 {
                        backoff = BACKOFF_FIRST;
                    }
                }
                Err(ConnectError::Fatal { code, message }) => {
                    match code.as_str() {
                        "session_ended" | "unknown_session" => {
                            self.end(&format!("The session is over: {message}"))
                        }
                        _ => self.fail(&code, &message),
                    }
                    return;
                }
                Err(ConnectError::Retry(why)) => {
                    self.st.borrow_mut().last_error = Some(why);
                }
            }
            if self.is_over() {
                return;
            }
            // Full jitter on the upper half: many tabs of one relay do not return in lockstep.
            let delay = backoff.mul_f64(0.5 + 0.5 * js_sys::Math::random());
            backoff = (backoff * 2).min(BACKOFF_MAX);
            let had_session = {
                let mut st = self.st.borrow_mut();
                st.phase = Phase::Reconnecting;
                st.message = Some("Connection to the relay lost; reconnecting...".into());
                st.session.is_some()
            };
            if had_session {
                self.render(false);
            }
            let why = self.st.borrow().last_error.clone().unwrap_or_default();
            self.status("reconnecting", &why);
            TimeoutFuture::new(ms(delay)).await;
        }
    }

    fn hello(&self, info: &RelayInfo, max_datagram_size: usize) -> JsValue {
        let st = self.st.borrow();
        let mut fields: Vec<(&str, JsValue)> = vec![
            ("type", "hello".into()),
            ("token", self.token.as_str().into()),
            ("mode", info.mode.as_str().into()),
            ("max_datagram_size", (max_datagram_size as f64).into()),
        ];
        if let Some(id) = &st.session_id {
            fields.push(("resume", id.as_str().into()));
        }
        if let Some((host, port, _)) = &self.bridge {
            fields.push(("host", host.as_str().into()));
            fields.push(("port", f64::from(*port).into()));
        }
        object(&fields)
    }

    /// One attempt: info, WebTransport, hello/ready, and the session if this is the first.
    async fn connect_once(self: &Rc<Self>) -> Result<Rc<Link>, ConnectError> {
        self.st.borrow_mut().counters.info_requests += 1;
        let mut info = link::fetch_info(&self.token).await?;
        if let Some(p) = self.wt_port {
            info.port = p;
        }
        if info.mode == "bridge" && self.bridge.is_none() {
            return Err(ConnectError::Fatal {
                code: "bridge_needs_target".into(),
                message: "This relay runs in bridge mode: add &host=...&port=...&key=... (from \
                          MOSH CONNECT) to the address."
                    .into(),
            });
        }
        self.st.borrow_mut().counters.connects += 1;
        let (link, ready) = Link::open(&info, |max| self.hello(&info, max)).await?;
        let link = Rc::new(link);
        let key_text = match (ready.key.clone(), &self.bridge) {
            (Some(k), _) => k,
            (None, Some((_, _, k))) => k.clone(),
            (None, None) => {
                link.close();
                return Err(ConnectError::Fatal {
                    code: "no_key".into(),
                    message: "The relay sent no session key.".into(),
                });
            }
        };
        let key: Key = key_text.parse().map_err(|_| {
            link.close();
            ConnectError::Fatal {
                code: "bad_key".into(),
                message: "The session key is malformed.".into(),
            }
        })?;
        let early = {
            let mut st = self.st.borrow_mut();
            if self.is_over_locked(&st) {
                link.close();
                return Err(ConnectError::Retry("closed meanwhile".into()));
            }
            st.counters.readies += 1;
            st.first_ready_ms.get_or_insert(now_ms());
            st.last_control_ms = now_ms();
            st.phase = Phase::Live;
            st.message = None;
            st.joiner = Joiner::new();
            st.link = Some(Rc::clone(&link));
            if st.session.is_none() {
                let (store, first_seq, first_fragment_id) = NonceStore::load(&key_text);
                let mut config =
                    SessionConfig::new(key, self.term.cols().max(1), self.term.rows().max(1));
                // The browser silently drops datagrams above its limit.
                config.mtu = link.max_datagram_size.min(config.mtu);
                config.first_seq = first_seq;
                config.first_fragment_id = first_fragment_id;
                config.seed = (js_sys::Math::random() * 9_007_199_254_740_992.0) as u64;
                // Send keys from inside the input handler: a 1 ms gathering timer becomes >= 4 ms
                // in a browser (nested timers are clamped), and xterm.js already hands a burst or a
                // paste over in one call, so there is nothing to gather.
                config.min_delay = std::time::Duration::ZERO;
                st.session = Some(ClientSession::new(config, now()));
                st.nonces = Some(store);
                st.shown = None;
                st.session_id = Some(ready.session.clone());
            }
            std::mem::take(&mut st.early_input)
        };
        self.status(if ready.resumed { "resumed" } else { "connected" }, "");
        if early.is_empty() {
            // Lets the core send at once, so mosh-server roams to the relay's new socket.
            if let Some(s) = self.st.borrow_mut().session.as_mut() {
                s.handle_timeout(now());
            }
            self.flush(false);
        } else {
            self.send_input(&early);
        }
        self.render(false);
        Ok(link)
    }

    fn is_over_locked(&self, st: &State) -> bool {
        matches!(st.phase, Phase::Ended | Phase::Failed)
    }

    /// Runs one live link: datagrams here, control messages and pings beside; returns when the
    /// link is gone.
    async fn serve_link(self: &Rc<Self>, link: Rc<Link>) {
        let weak = Rc::downgrade(self);
        let ping_link = Rc::downgrade(&link);
        let _ping = Interval::new(ms(PING_INTERVAL), move || {
            let (Some(shell), Some(link)) = (weak.upgrade(), ping_link.upgrade()) else { return };
            let last = shell.st.borrow().last_control_ms;
            if now_ms() - last > PING_DEADLINE.as_secs_f64() * 1000.0 {
                link.close();
            } else {
                link.send_control(r#"{"type":"ping"}"#);
            }
        });
        wasm_bindgen_futures::spawn_local(Shell::control_loop(
            Rc::downgrade(self),
            Rc::clone(&link),
        ));
        while let Some(d) = link.next_datagram().await {
            self.datagram(&d);
        }
        link.close();
        let mut st = self.st.borrow_mut();
        if st.link.as_ref().is_some_and(|l| Rc::ptr_eq(l, &link)) {
            st.link = None;
        }
    }

    async fn control_loop(shell: Weak<Shell>, link: Rc<Link>) {
        loop {
            let msg = link.next_control().await;
            let Some(shell) = shell.upgrade() else { return };
            match msg {
                Some(Control::Pong) | Some(Control::Other) | Some(Control::Ready(_)) => {
                    shell.st.borrow_mut().last_control_ms = now_ms();
                }
                Some(Control::Ended { code, message }) if code == "session_ended" => {
                    shell.end(&format!("The session is over: {message}"));
                    return;
                }
                Some(Control::Ended { .. }) | Some(Control::Error { .. }) | None => {
                    link.close();
                    return;
                }
            }
        }
    }

    fn datagram(self: &Rc<Self>, framed: &[u8]) {
        {
            let mut st = self.st.borrow_mut();
            st.counters.datagrams_in += 1;
            let joined = st.joiner.push(framed);
            match joined {
                Ok(Some(d)) => {
                    if let Some(s) = st.session.as_mut() {
                        s.handle_datagram(now(), &d);
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    st.counters.framing_errors += 1;
                    return;
                }
            }
        }
        self.flush(true);
    }

    /// Typed input: held behind an unfinished paste (Escape cancels it instead), else sent.
    fn input(self: &Rc<Self>, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let (busy, holding) = {
            let st = self.st.borrow();
            (st.paste.busy(), st.paste.holding() && st.paste.hold_keys)
        };
        if busy && bytes == b"\x1b" {
            self.cancel_pastes();
            return;
        }
        if holding {
            self.st.borrow_mut().paste.hold(bytes);
            return;
        }
        self.send_input(bytes);
    }

    /// Hands bytes to the core now (or keeps them until the first session exists).
    fn send_input(self: &Rc<Self>, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        {
            let mut st = self.st.borrow_mut();
            if matches!(st.phase, Phase::Ended | Phase::Failed) {
                return;
            }
            let Some(s) = st.session.as_mut() else {
                st.early_input.extend_from_slice(bytes);
                return;
            };
            s.handle_input(now(), bytes);
        }
        let t_in = now_ms();
        self.flush(false);
        let mut st = self.st.borrow_mut();
        if let Some(num) = st.session.as_ref().map(|s| s.sent_state_num()) {
            st.echo_pending.push_back((t_in, num));
        }
    }

    fn resized(self: &Rc<Self>) {
        {
            let mut st = self.st.borrow_mut();
            let (cols, rows) = (self.term.cols().max(1), self.term.rows().max(1));
            // xterm.js reflowed its buffer: what it shows is no longer what we drew.
            st.shown = None;
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
                match &st.link {
                    Some(l) => {
                        l.send_datagram(d);
                        st.counters.datagrams_out += 1;
                    }
                    // Offline: the core keeps the state and retransmits after reconnecting.
                    None => st.counters.dropped_offline += 1,
                }
            }
            while let Some(e) = session.poll_event() {
                match e {
                    Event::ServerStateChanged { .. } => changed = true,
                    Event::Closed(reason) => closed = Some(reason),
                }
            }
            st.timer = session.poll_timeout().map(|at| {
                let wait = at.saturating_duration_since(now());
                let weak = Rc::downgrade(self);
                Timeout::new(ms(wait), move || {
                    if let Some(shell) = weak.upgrade() {
                        shell.timeout();
                    }
                })
            });
        }
        if changed {
            self.render(from_server);
        }
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
            let Some(s) = st.session.as_mut() else { return };
            s.handle_timeout(now());
        }
        self.flush(false);
    }

    /// Draws the core's newest screen with the notification bar into xterm.js (only the
    /// difference to what it shows), then reports title, bell and clipboard changes.
    fn render(&self, new_state: bool) {
        let (bytes, title, bell, clipboard, paste_line) = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            let line = st.paste.line();
            let paste_line = (line != st.paste.reported).then(|| {
                st.paste.reported.clone_from(&line);
                line.clone()
            });
            let Some(session) = st.session.as_ref() else {
                return self.report_paste(paste_line);
            };
            let t = now();
            let fb = session.server_state().framebuffer();
            // The paste's progress shares mosh's notification bar with the link's state.
            let message = match (st.message.as_deref(), line.as_deref()) {
                (Some(m), Some(l)) => Some(format!("{m} | {l}")),
                (m, l) => m.or(l).map(str::to_string),
            };
            let note = Notification {
                since_server_state: session.since_last_contact(t),
                since_reply: session.since_last_reply(t),
                message: message.as_deref(),
            };
            let wanted = overlay_notification(fb, &note);
            let bytes = Renderer::new().render(st.shown.as_ref(), &wanted);
            st.shown = Some(wanted);
            if !bytes.is_empty() && new_state && session.has_heard_server() {
                // Echo latency: every keystroke whose client state the server has acknowledged
                // is echoed by the first frame with visible change written after that ack.
                let written = now_ms();
                let acked = session.acked_state_num();
                while st.echo_pending.front().is_some_and(|&(_, n)| n <= acked) {
                    if let Some((t_in, _)) = st.echo_pending.pop_front() {
                        if st.echo_samples.len() >= MAX_ECHO_SAMPLES {
                            st.echo_samples.remove(0);
                        }
                        st.echo_samples.push(written - t_in);
                    }
                }
                st.first_frame_ms.get_or_insert(written);
            }
            let title = (fb.title() != st.seen_title).then(|| fb.title().to_string());
            if let Some(t) = &title {
                st.seen_title.clone_from(t);
            }
            let bell = fb.bell_count() != st.seen_bell;
            st.seen_bell = fb.bell_count();
            let clipboard =
                (fb.clipboard() != st.seen_clipboard).then(|| fb.clipboard().to_string());
            if let Some(c) = &clipboard {
                st.seen_clipboard.clone_from(c);
            }
            (bytes, title, bell, clipboard, paste_line)
        };
        self.report_paste(paste_line);
        if !bytes.is_empty() {
            self.term.write(&Uint8Array::from(&bytes[..]));
        }
        if let Some(t) = title {
            self.hook("title", &[t.into()]);
        }
        if bell {
            self.hook("bell", &[]);
        }
        if let Some(c) = clipboard {
            use base64::Engine;
            // OSC 52 carries base64; "?" (a query) and garbage are ignored.
            if let Ok(text) = base64::engine::general_purpose::STANDARD
                .decode(c.as_bytes())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
            {
                self.hook("clipboard", &[text.into()]);
            }
        }
    }

    /// Tells the page's `paste` hook the new progress line (`null`: none), when it changed.
    fn report_paste(&self, line: Option<Option<String>>) {
        if let Some(l) = line {
            self.hook("paste", &[l.map_or(JsValue::NULL, JsValue::from)]);
        }
    }

    fn stats(&self) -> JsValue {
        let st = self.st.borrow();
        let c = &st.counters;
        let mut sorted = st.echo_samples.clone();
        sorted.sort_by(f64::total_cmp);
        let pick = |q: f64| -> JsValue {
            if sorted.is_empty() {
                return JsValue::NULL;
            }
            let i = ((sorted.len() - 1) as f64 * q).round() as usize;
            sorted[i.min(sorted.len() - 1)].into()
        };
        let mean = if sorted.is_empty() {
            JsValue::NULL
        } else {
            (sorted.iter().sum::<f64>() / sorted.len() as f64).into()
        };
        let samples: js_sys::Array = st.echo_samples.iter().map(|&s| JsValue::from(s)).collect();
        let echo = object(&[
            ("count", (sorted.len() as f64).into()),
            ("pending", (st.echo_pending.len() as f64).into()),
            ("minMs", pick(0.0)),
            ("medianMs", pick(0.5)),
            ("p90Ms", pick(0.9)),
            ("maxMs", pick(1.0)),
            ("meanMs", mean),
            ("samplesMs", samples.into()),
        ]);
        let core = st.session.as_ref().map_or(JsValue::NULL, |s| {
            let k = s.counters();
            object(&[
                ("datagramsIn", (k.datagrams_in as f64).into()),
                ("datagramsOut", (k.datagrams_out as f64).into()),
                ("bytesIn", (k.bytes_in as f64).into()),
                ("bytesOut", (k.bytes_out as f64).into()),
                ("authFailures", (k.auth_failures as f64).into()),
                ("malformed", (k.malformed as f64).into()),
                ("retransmits", (k.retransmits as f64).into()),
                ("applied", (k.applied as f64).into()),
                ("droppedUnknownBase", (k.dropped_unknown_base as f64).into()),
                ("applyFailures", (k.apply_failures as f64).into()),
                ("srttMs", (s.srtt().as_secs_f64() * 1000.0).into()),
                ("unackedInput", (s.unacked_input() as f64).into()),
                ("serverState", (s.server_state_num().0 as f64).into()),
            ])
        });
        let phase = match st.phase {
            Phase::Connecting => "connecting",
            Phase::Live => "live",
            Phase::Reconnecting => "reconnecting",
            Phase::Ended => "ended",
            Phase::Failed => "failed",
        };
        object(&[
            ("phase", phase.into()),
            ("session", st.session_id.as_deref().map_or(JsValue::NULL, JsValue::from)),
            ("infoRequests", c.info_requests.into()),
            ("connects", c.connects.into()),
            ("readies", c.readies.into()),
            ("linkDatagramsIn", (c.datagrams_in as f64).into()),
            ("linkDatagramsOut", (c.datagrams_out as f64).into()),
            ("droppedOffline", (c.dropped_offline as f64).into()),
            ("framingErrors", (c.framing_errors as f64).into()),
            ("joinerEvicted", (st.joiner.evicted as f64).into()),
            ("firstReadyMs", st.first_ready_ms.map_or(JsValue::NULL, JsValue::from)),
            ("firstFrameMs", st.first_frame_ms.map_or(JsValue::NULL, JsValue::from)),
            ("lastError", st.last_error.as_deref().map_or(JsValue::NULL, JsValue::from)),
            ("core", core),
            ("echo", echo),
            ("paste", st.paste.stats()),
        ])
    }
}
