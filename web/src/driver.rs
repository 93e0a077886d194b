//! The driver: a loop around the page client (`tern::page::PageClient`), which decides
//! everything. It hands the client what happened (keys, datagrams, control lines, a new link,
//! visibility, animation frames, stream events), each with `now` from the page's clock, then
//! does what comes out, in order, and arms one timer for the client's `poll_timeout`.
//!
//! ```text
//!  xterm.js onData ─▶ key ──────────┐                      ┌─▶ RelayLink: datagrams, control
//!  RelayLink datagram / control ─▶ ─┤                      ├─▶ xterm.write, animation frames
//!  link.rs: info, open, ready ─▶ ───┼─▶ PageClient ─effects┼─▶ storage: nonces, saved session
//!  streams.rs: uploads, downloads ──┤                      ├─▶ hooks (www/app.js)
//!  the one timer ─▶ handle_timeout ─┘                      └─▶ streams.rs, link.rs (spawned)
//! ```
//!
//! Single-threaded (the page's event loop): the client lives in one `RefCell`, never borrowed
//! across an `await` or a call into JavaScript (effects are taken one at a time).

mod link;
mod streams;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use gloo_timers::callback::Timeout;
use js_sys::Uint8Array;
use tern::page::{Effect, LinkId, PageClient, Stopwatch, StreamStep, millis_until};
use tern::relay_client::{ConnectError, FailCode, Target};
use tern::relay_proto::OfferAnswer;
use tern::terminal::Size;
use tern::time::Instant;
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;
use wasm_bindgen::closure::Closure;

use crate::clock::{now, now_ms};
use crate::hooks::Hooks;
use crate::relay_link::{self, RelayLink, StreamLines, StreamWriter};
use crate::storage;
use crate::xterm::Terminal;

/// `requestAnimationFrame`'s callback (its argument is the frame's time).
type FrameCallback = Closure<dyn FnMut(f64)>;

/// A stream the client asked for, as the browser holds it.
#[derive(Debug)]
struct OpenStream {
    writer: StreamWriter,
    lines: Rc<StreamLines>,
}

impl OpenStream {
    fn step(&self, step: StreamStep) {
        match step {
            StreamStep::Write(bytes) => self.writer.write(&bytes),
            StreamStep::Close => {
                self.writer.close();
                self.lines.cancel();
            }
            StreamStep::Abort => {
                self.writer.abort();
                self.lines.cancel();
            }
            StreamStep::StopReading => self.lines.cancel(),
        }
    }
}

/// One terminal session through tern-relay, as the page drives it.
#[derive(Debug)]
pub struct Driver {
    term: Terminal,
    hooks: Hooks,
    /// Test-only WebTransport port override (`#wt_port=` in the page's address).
    wt_port: Option<u16>,
    client: RefCell<PageClient>,
    /// The client's current link.
    link: RefCell<Option<(LinkId, Rc<RelayLink>)>>,
    uploads: RefCell<HashMap<u32, OpenStream>>,
    downloads: RefCell<HashMap<u32, OpenStream>>,
    /// The download's bytes so far, in the browser's own buffers (outside wasm memory).
    download_chunks: RefCell<js_sys::Array>,
    /// The SHA-256 of `download_chunks`, kept as they come (the check at the end compares).
    download_hash: RefCell<tern::relay_proto::RunningSha256>,
    /// The one timer: set for the client's `poll_timeout`, and when it runs out.
    timer: RefCell<Option<(Timeout, Instant)>>,
    /// The animation frame callback, made once in [`Driver::start`].
    frame_callback: RefCell<Option<FrameCallback>>,
}

impl Driver {
    pub fn new(term: Terminal, target: Target, hooks: Hooks, wt_port: Option<u16>) -> Rc<Self> {
        let seed = (js_sys::Math::random() * 9_007_199_254_740_992.0) as u64;
        let mut client = PageClient::new(target, terminal_size(&term), seed);
        client.cost_mut().set_stopwatch(Stopwatch(now_ms));
        Rc::new(Driver {
            term,
            hooks,
            wt_port,
            client: RefCell::new(client),
            link: RefCell::new(None),
            uploads: RefCell::default(),
            downloads: RefCell::default(),
            download_chunks: RefCell::new(js_sys::Array::new()),
            download_hash: RefCell::default(),
            timer: RefCell::new(None),
            frame_callback: RefCell::new(None),
        })
    }

    pub fn term(&self) -> &Terminal {
        &self.term
    }

    /// Hands the client something with `now`, then does what it asks.
    fn call<R>(self: &Rc<Self>, f: impl FnOnce(&mut PageClient, Instant) -> R) -> R {
        let result = f(&mut self.client.borrow_mut(), now());
        self.drain();
        result
    }

    /// Does the client's effects, in order, then arms the timer.
    fn drain(self: &Rc<Self>) {
        loop {
            let effect = self.client.borrow_mut().poll_effect();
            let Some(effect) = effect else { break };
            self.apply(effect);
        }
        self.arm_timer();
    }

    fn apply(self: &Rc<Self>, effect: Effect) {
        match effect {
            Effect::Connect => {
                wasm_bindgen_futures::spawn_local(Driver::connect(Rc::clone(self)));
            }
            Effect::Datagram(d) => {
                if let Some((_, link)) = &*self.link.borrow() {
                    link.send_datagram(&d);
                }
            }
            Effect::Control(message) => {
                if let Some((_, link)) = &*self.link.borrow() {
                    link.send_control(&message);
                }
            }
            Effect::CloseLink => {
                let link = self.link.borrow_mut().take();
                if let Some((_, link)) = link {
                    link.close();
                }
            }
            Effect::ReserveNonces { key_text, seq, fragment_id } => {
                storage::reserve_nonces(&key_text, tern::page::NonceBounds { seq, fragment_id });
            }
            Effect::SaveSession(saved) => storage::save_session(&saved),
            Effect::ForgetSession(id) => storage::forget_session(id.as_deref()),
            Effect::Write(bytes) => {
                let started = now_ms();
                // A copy: xterm.js keeps the buffer until it parses it later.
                self.term.write(&Uint8Array::from(&bytes[..]));
                let mut client = self.client.borrow_mut();
                let cost = client.cost_mut();
                cost.write_ms += now_ms() - started;
                cost.bytes_written += bytes.len() as u64;
            }
            Effect::RequestFrame => {
                if let (Some(window), Some(callback)) =
                    (web_sys::window(), &*self.frame_callback.borrow())
                {
                    // Fails only without a window; the next request asks again.
                    let _ = window.request_animation_frame(callback.as_ref().unchecked_ref());
                }
            }
            Effect::Status { status, message } => self.hooks.status(status, &message),
            Effect::SessionId(id) => self.hooks.session(&id),
            Effect::LinkKind { kind, fallback } => self.hooks.link(kind, fallback),
            Effect::Title(title) => self.hooks.title(&title),
            Effect::Bell => self.hooks.bell(),
            Effect::Clipboard(copy) => self.hooks.clipboard(&copy),
            Effect::Notify { title, body } => self.hooks.notify(&title, &body),
            Effect::Link { url, text, col } => self.hooks.link_text(&url, &text, col),
            Effect::Refused(message) => self.hooks.refused(&message),
            Effect::ViewerScreen(update) => {
                // The page sizes (and resets) its terminal first: the bytes assume that size.
                self.hooks.viewer_screen(update.cols, update.rows, update.full);
                self.term.write(&Uint8Array::from(&update.data[..]));
            }
            Effect::Viewers(count) => self.hooks.viewers(count),
            Effect::ViewerOf(owner) => self.hooks.viewer_of(&owner),
            Effect::PasteProgress(progress) => self.hooks.paste(progress.as_ref()),
            Effect::Flooding(on) => self.hooks.flooding(on),
            Effect::OfferUrl { id, url } => self.hooks.offer_url(&id, &url),
            Effect::OpenUpload { serial } => self.open_upload(serial),
            Effect::Upload { serial, step } => step_stream(&self.uploads, serial, step),
            Effect::OpenDownload { serial, request, from_start } => {
                if from_start {
                    self.download_chunks.borrow().set_length(0);
                    self.download_hash.take();
                }
                self.open_download(serial, request);
            }
            Effect::Download { serial, step } => step_stream(&self.downloads, serial, step),
            Effect::VerifyDownload(offer) => {
                wasm_bindgen_futures::spawn_local(Driver::verify_download(Rc::clone(self), offer));
            }
            Effect::Log(line) => web_sys::console::info_1(&line.into()),
        }
    }

    /// Sets the one timer for the client's next deadline, when that changed.
    fn arm_timer(self: &Rc<Self>) {
        let next = self.client.borrow().poll_timeout();
        let mut timer = self.timer.borrow_mut();
        if timer.as_ref().map(|(_, at)| *at) == next {
            return;
        }
        *timer = next.map(|at| {
            let weak = Rc::downgrade(self);
            let wake = Timeout::new(millis_until(now(), at), move || {
                let Some(d) = weak.upgrade() else { return };
                d.timer.borrow_mut().take();
                d.call(|c, now| c.handle_timeout(now));
            });
            (wake, at)
        });
    }

    // --- The page's calls ----------------------------------------------------------------

    /// Restores the tab's saved session (its screen shows at once), then starts the overlay
    /// clock and the connection loop.
    pub fn start(self: &Rc<Self>) {
        self.watch_frames_and_visibility();
        let saved = storage::load_saved_session().map(|(saved, _)| saved);
        self.call(|c, now| c.restore(now, saved, &storage::kept_nonces));
        self.call(|c, now| c.start(now));
    }

    /// `GET /api/sessions` (counted in `stats().sessionListRequests`).
    pub async fn list_sessions(&self) -> Result<tern::relay_proto::SessionList, ConnectError> {
        let token = {
            let mut client = self.client.borrow_mut();
            client.count_session_list_request();
            client.target().token.clone()
        };
        relay_link::fetch_sessions(&token).await
    }

    /// Retrying cannot help: stop and say why.
    pub fn fail(self: &Rc<Self>, code: FailCode, message: &str) {
        self.call(|c, _| c.fail(code, message));
    }

    pub fn relay_build(&self) -> Option<String> {
        self.client.borrow().relay_build().map(str::to_string)
    }

    pub fn paste_unavailable(&self) -> Option<String> {
        self.client.borrow().paste_unavailable().map(str::to_string)
    }

    pub fn features_off(&self) -> Option<String> {
        self.client.borrow().features_off().map(str::to_string)
    }

    pub fn start_on_host(&self, name: &str) {
        self.client.borrow_mut().start_on_host(name);
    }

    pub fn take_back(self: &Rc<Self>) {
        self.call(|c, now| c.take_back(now));
    }

    pub fn resume_session(&self, id: &str) {
        self.client.borrow_mut().resume_session(id);
    }

    pub fn watch_session(&self, id: &str) {
        self.client.borrow_mut().watch_session(id);
    }

    pub fn viewing(&self) -> bool {
        self.client.borrow().viewing()
    }

    /// The session this page drives (or watches), with the token to ask about it.
    pub fn session_target(&self) -> Option<(String, String)> {
        let client = self.client.borrow();
        let id = client.session_id()?.to_string();
        Some((client.target().token.clone(), id))
    }

    /// Typed input (the client holds it behind a paste, or sends it).
    pub fn input(self: &Rc<Self>, bytes: &[u8]) {
        self.call(|c, now| c.key(now, bytes));
    }

    pub fn resized(self: &Rc<Self>) {
        let size = terminal_size(&self.term);
        self.call(|c, now| c.resized(now, size));
    }

    pub fn set_predict(&self, config: tern::predict::PredictConfig) {
        self.client.borrow_mut().set_predict(config);
    }

    pub fn set_remote_copy(&self, policy: tern::page::RemoteCopyPolicy) {
        self.client.borrow_mut().set_remote_copy(policy);
    }

    pub fn begin_resize(self: &Rc<Self>) {
        self.call(|c, _| c.begin_resize());
    }

    pub fn end_resize(self: &Rc<Self>) {
        let size = terminal_size(&self.term);
        self.call(|c, now| c.end_resize(now, size));
    }

    pub fn set_relay_hold(self: &Rc<Self>, allowed: bool) {
        self.call(|c, now| c.set_relay_hold(now, allowed));
    }

    /// The page is going away (a reload, a closed tab): the tab saves where it stands.
    pub fn leave(self: &Rc<Self>) {
        self.call(|c, _| c.leave());
    }

    pub fn end_session(self: &Rc<Self>) {
        self.call(|c, now| c.end_session(now));
    }

    pub fn cancel_pastes(self: &Rc<Self>) {
        self.call(|c, now| c.cancel_pastes(now));
    }

    pub fn set_hold_keys(&self, hold: bool) {
        self.client.borrow_mut().set_hold_keys(hold);
    }

    pub fn set_eager_paste(&self, eager: bool) {
        self.client.borrow_mut().set_eager_paste(eager);
    }

    pub fn set_paste_queue_target(&self, target: Option<std::time::Duration>) {
        self.client.borrow_mut().set_paste_queue_target(target);
    }

    pub fn answer(self: &Rc<Self>, id: &str, answer: OfferAnswer) {
        self.call(|c, _| c.answer(id, answer));
    }

    /// The current link to the relay, if one is up.
    pub fn current_link(&self) -> Option<Rc<crate::relay_link::RelayLink>> {
        self.link.borrow().as_ref().map(|(_, l)| Rc::clone(l))
    }

    /// The image markers in the core's screen: `[row, col, id, ...]`.
    pub fn image_markers(&self) -> Vec<u32> {
        self.client.borrow().image_markers()
    }

    /// The core's screen (not xterm.js's) as text.
    pub fn screen_text(&self) -> String {
        self.client.borrow().screen_text()
    }

    /// Counters, SRTT and echo latency; see docs/BROWSER.md for each field.
    pub fn stats(&self) -> JsValue {
        let link = self.link.borrow();
        let control_chunks = link.as_ref().map_or(0, |(_, l)| l.control_chunks());
        crate::stats::page(&self.client.borrow(), control_chunks, now())
    }

    /// The session whose history the relay keeps, with the token to ask for it.
    pub fn history_target(&self) -> Option<(String, String)> {
        let client = self.client.borrow();
        let id = client.history_session()?.to_string();
        Some((client.target().token.clone(), id))
    }

    /// Makes the animation frame callback and follows the page's visibility: the client draws
    /// at most once per frame and nothing while the page is hidden.
    fn watch_frames_and_visibility(self: &Rc<Self>) {
        let weak = Rc::downgrade(self);
        let on_frame = Closure::<dyn FnMut(f64)>::new(move |_at: f64| {
            if let Some(d) = weak.upgrade() {
                d.call(|c, now| c.animation_frame(now));
            }
        });
        *self.frame_callback.borrow_mut() = Some(on_frame);
        let Some(document) = web_sys::window().and_then(|w| w.document()) else { return };
        let visible = document.visibility_state() == web_sys::VisibilityState::Visible;
        self.call(|c, now| c.set_visible(now, visible));
        let weak = Rc::downgrade(self);
        let on_change = Closure::<dyn FnMut()>::new(move || {
            let Some(d) = weak.upgrade() else { return };
            let visible = web_sys::window()
                .and_then(|w| w.document())
                .is_none_or(|doc| doc.visibility_state() == web_sys::VisibilityState::Visible);
            d.call(|c, now| c.set_visible(now, visible));
        });
        let _ = document.add_event_listener_with_callback(
            "visibilitychange",
            on_change.as_ref().unchecked_ref(),
        );
        // The page's life: the listener stays as long as the page.
        on_change.forget();
    }
}

/// Does `step` on stream `serial`; a stream closed or aborted is forgotten.
fn step_stream(streams: &RefCell<HashMap<u32, OpenStream>>, serial: u32, step: StreamStep) {
    let ends = matches!(step, StreamStep::Close | StreamStep::Abort);
    let mut streams = streams.borrow_mut();
    if let Some(stream) = streams.get(&serial) {
        stream.step(step);
    }
    if ends {
        streams.remove(&serial);
    }
}

fn terminal_size(term: &Terminal) -> Size {
    Size { cols: term.cols(), rows: term.rows() }
}
