//! Tern's browser client: the wasm facade between the page and the sans-IO core.
//!
//! ```text
//!  www/app.js ── Client (this file: the exported surface) ── Driver (driver.rs: moves bytes)
//!                                                               │
//!      relay_link: WebTransport or the WebSocket fallback (websocket.rs): info, control,
//!                  datagrams, upload streams
//!      screen: frames into xterm.js      hooks: typed callbacks to the page
//!      paste: blob reading, hashing, the upload stream     stats: the core's figures as JS
//!      input: keyboard bytes             storage: nonce bounds in sessionStorage
//! ```
//!
//! Nothing here decides anything: the protocol, the screen model, the connection policy, the
//! paste queue and the measurements are the core's (`tern`), tested natively. The page
//! (`www/app.js`) owns the DOM: it creates the xterm.js `Terminal`, fits it to the window, and
//! formats what the hooks report.

// The browser client exists only in the browser; elsewhere this crate is empty.
#![cfg(target_arch = "wasm32")]

mod clock;
mod driver;
mod first_hello;
mod hooks;
mod input;
mod js;
mod paste;
mod relay_link;
mod stats;
mod storage;
mod websocket;
mod xterm;

use std::rc::Rc;

use js_sys::{Reflect, Uint8Array};
use tern::relay_client::Target;
use wasm_bindgen::prelude::*;

use driver::Driver;
pub use hooks::StatusKind;
pub use xterm::Terminal;

/// The page's handle: one terminal session through tern-relay.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Client {
    driver: Rc<Driver>,
}

/// Reads the page's options: `{ token, hooks, bridge?: { host, port, key }, wtPort? }`.
fn options(options: &JsValue) -> Result<(Target, JsValue, Option<u16>), JsValue> {
    let token = Reflect::get(options, &"token".into())?
        .as_string()
        .ok_or_else(|| JsValue::from_str("options.token missing"))?;
    let hooks = Reflect::get(options, &"hooks".into())?;
    // Test-only: WebTransport to this port instead of the relay's (a link emulator in front of
    // the relay, docs/BROWSER.md). HTTP still goes to the page's origin.
    let wt_port = Reflect::get(options, &"wtPort".into())
        .ok()
        .and_then(|p| p.as_f64())
        .and_then(|p| u16::try_from(p as u64).ok())
        .filter(|&p| p != 0);
    let bridge =
        Reflect::get(options, &"bridge".into()).ok().filter(|b| b.is_object()).and_then(|b| {
            let s = |f: &str| Reflect::get(&b, &f.into()).ok()?.as_string();
            let port = Reflect::get(&b, &"port".into()).ok()?.as_f64()?;
            let key = tern::relay_client::key_text(&s("key")?);
            Some((s("host")?, u16::try_from(port as u64).ok()?, key))
        });
    Ok((Target { token, bridge }, hooks, wt_port))
}

#[wasm_bindgen]
impl Client {
    /// `options`: `{ token, hooks, bridge?, wtPort? }` (see `www/app.js`).
    #[wasm_bindgen(constructor)]
    pub fn new(term: Terminal, options: JsValue) -> Result<Client, JsValue> {
        let (target, hooks, wt_port) = self::options(&options)?;
        crate::storage::init(&target.token);
        let client =
            Client { driver: Driver::new(term, target, hooks::Hooks::new(hooks), wt_port) };
        // From now on, not from `start`: the page awaits things in between (the session's
        // lock, the relay's list of sessions) while the terminal already has the focus, and a
        // key typed then (a reload, and typing on at once) must wait for the session, not vanish.
        client.wire_terminal();
        Ok(client)
    }

    /// Asks the relay's `/api/info` now, before the client exists (the page builds its terminal
    /// meanwhile); the first connect of a client with this token takes the answer. `greet`: greet
    /// on the early link meanwhile too (false only for the load bench's "before").
    #[wasm_bindgen(js_name = prefetchInfo)]
    pub fn prefetch_info(token: &str, greet: bool) {
        crate::relay_link::prefetch_info(token, greet);
    }

    /// The page's `openWebTransport(hint, query)`: makes a WebTransport to where a hint's text
    /// (`tern::relay_proto::LinkHint`) says, with `query` (the pushed challenge's nonce) after
    /// its path; every link of this page is made by it.
    #[wasm_bindgen(js_name = webTransportOpener)]
    pub fn webtransport_opener(open: js_sys::Function) {
        crate::relay_link::set_webtransport_opener(open);
    }

    /// The WebTransport the page started before its wasm was in, where the relay's document
    /// said (`hint`: its `Server-Timing: tern-link` description, as the page knocked): the first
    /// connect uses it if the relay's info gives the same hint (relay_link.rs). `nonce`: the 32
    /// random bytes its CONNECT asked the relay's pushed challenge to (empty: none asked).
    /// `control` and `pushed`: what the page began on it once it was up (undefined: not begun),
    /// `createBidirectionalStream()` and the first read of `incomingUnidirectionalStreams`.
    #[wasm_bindgen(js_name = keepEarlyLink)]
    pub fn keep_early_link(
        hint: String,
        transport: web_sys::WebTransport,
        nonce: Vec<u8>,
        control: Option<js_sys::Promise>,
        pushed: Option<js_sys::Promise>,
    ) {
        let started = crate::relay_link::StartedStreams { control, pushed };
        crate::relay_link::keep_early_link(hint, transport, nonce.try_into().ok(), started);
    }

    /// Starts connecting (and reconnecting) in the background.
    pub fn start(&self) {
        self.driver.start();
    }

    /// Resolves once this page's first hello has left for the relay (at once if it has): the
    /// page opens its terminal after that, so the main thread is free when the link's challenge
    /// comes in.
    #[wasm_bindgen(js_name = helloSent)]
    pub fn hello_sent() -> js_sys::Promise {
        first_hello::when_sent()
    }

    /// The core's screen (not xterm.js's) as text: rows joined by `\n`, trailing blanks trimmed.
    #[wasm_bindgen(js_name = screenText)]
    pub fn screen_text(&self) -> String {
        self.driver.screen_text()
    }

    /// Where images are in the core's screen (their markers, docs/IMAGES.md): a flat
    /// `Uint32Array` of `[row, col, id, ...]`, rows of the screen from its top.
    #[wasm_bindgen(js_name = imageMarkers)]
    pub fn image_markers(&self) -> js_sys::Uint32Array {
        js_sys::Uint32Array::from(&self.driver.image_markers()[..])
    }

    /// Image `id` of this session from the relay: `{ cols, rows, width, height, name, blob, via }`
    /// (`blob` a `Blob` of its MIME type, drawn by the browser; `via` `stream` or `http`).
    /// Rejects with a message (an image evicted by the session's quota, say).
    #[wasm_bindgen(js_name = image)]
    pub async fn image(&self, id: f64) -> Result<JsValue, JsValue> {
        self.fetch_image(id as u64, None).await
    }

    /// The next picture the session's recorder stores (`tern::relay_proto::NEXT_IMAGE`), on a
    /// stream of the link (rejects at once without one): as [`image`](Self::image), with its
    /// `id`; `on_header(id)` is called as soon as the relay says which picture is coming, before
    /// its bytes. The relay answers only when one is stored: the page asks before the picture's
    /// marker reaches it, so no round trip is left after the marker.
    #[wasm_bindgen(js_name = nextImage)]
    pub async fn next_image(&self, on_header: js_sys::Function) -> Result<JsValue, JsValue> {
        if self.driver.current_link().is_none() {
            return Err(JsValue::from_str("no link"));
        }
        self.fetch_image(tern::relay_proto::NEXT_IMAGE, Some(on_header)).await
    }

    /// Before the page resizes the terminal: clears xterm.js's screen and holds drawing, so that
    /// xterm.js's own resize moves nothing between its screen and its scrollback. Call
    /// [`end_resize`](Self::end_resize) once xterm.js has parsed what was written and resized.
    #[wasm_bindgen(js_name = beginResize)]
    pub fn begin_resize(&self) {
        self.driver.begin_resize();
    }

    /// The terminal has its new size (or kept its old one): draws everything again.
    #[wasm_bindgen(js_name = endResize)]
    pub fn end_resize(&self) {
        self.driver.end_resize();
    }

    /// Counters, SRTT and echo latency; see docs/BROWSER.md for each field.
    pub fn stats(&self) -> JsValue {
        self.driver.stats()
    }

    /// A pasted or dropped file (a `File` is a `Blob`): uploaded to the relay's paste directory,
    /// then its path is typed. Keys typed meanwhile follow the path.
    pub fn paste(&self, file: web_sys::Blob) {
        self.driver.paste(file);
    }

    /// The person's answer to `offerUrl(id, url)`: opened it, or not.
    #[wasm_bindgen(js_name = answerOffer)]
    pub fn answer_offer(&self, id: &str, opened: bool) {
        let answer = if opened {
            tern::relay_proto::OfferAnswer::Opened
        } else {
            tern::relay_proto::OfferAnswer::Dismissed
        };
        self.driver.answer(id, answer);
    }

    /// Cancels the pastes under way (as Escape does); held keys go out.
    #[wasm_bindgen(js_name = cancelPaste)]
    pub fn cancel_paste(&self) {
        self.driver.cancel_pastes();
    }

    /// Predictive local echo: `mode` is `adaptive` (the default), `always`, `never` or
    /// `experimental` (shows passwords until the server answers); `overwrite` predicts typing
    /// over the rest of the line instead of pushing it right. An unknown mode is an error.
    #[wasm_bindgen(js_name = setPrediction)]
    pub fn set_prediction(&self, mode: &str, overwrite: bool) -> Result<(), JsValue> {
        let mode = tern::predict::PredictMode::parse(mode)
            .ok_or_else(|| JsValue::from_str(&format!("unknown prediction mode {mode:?}")))?;
        self.driver.set_predict(tern::predict::PredictConfig { mode, overwrite });
        Ok(())
    }

    /// "Programs may set the clipboard" (OSC 52): `off`, `ask` (the default) or `on`. An unknown
    /// name is an error.
    #[wasm_bindgen(js_name = setRemoteCopy)]
    pub fn set_remote_copy(&self, policy: &str) -> Result<(), JsValue> {
        let policy = tern::page::RemoteCopyPolicy::parse(policy)
            .ok_or_else(|| JsValue::from_str(&format!("unknown clipboard setting {policy:?}")))?;
        self.driver.set_remote_copy(policy);
        Ok(())
    }

    /// Whether keys typed during a paste wait for its path (default true). The benchmark turns
    /// it off to measure keystroke echo while an upload shares the link.
    #[wasm_bindgen(js_name = setHoldKeysDuringPaste)]
    pub fn set_hold_keys_during_paste(&self, hold: bool) {
        self.driver.set_hold_keys(hold);
    }

    /// Whether an upload's first bytes follow its header at once (default true) or wait a round
    /// trip for the relay's answer. The benchmark turns it off to measure the difference.
    #[wasm_bindgen(js_name = setEagerPaste)]
    pub fn set_eager_paste(&self, eager: bool) {
        self.driver.set_eager_paste(eager);
    }

    /// The upload pacer's standing-queue target in milliseconds (`undefined`: the transfer
    /// default, 5 ms; a page starts at 2 ms, `PASTE_QUEUE_TARGET`). The benchmark's trade-off
    /// between echo during an upload and the link idling.
    #[wasm_bindgen(js_name = setPasteQueueTarget)]
    pub fn set_paste_queue_target(&self, ms: Option<f64>) {
        let target = ms
            .filter(|m| m.is_finite() && *m >= 0.0)
            .map(|m| std::time::Duration::from_micros((m * 1000.0).min(1e9) as u64));
        self.driver.set_paste_queue_target(target);
    }

    /// Whether the relay may hold the server's datagrams and send them together while the page
    /// is hidden or a flood is drawn (default true). The benchmark turns it off to measure both
    /// in one run.
    #[wasm_bindgen(js_name = setRelayHold)]
    pub fn set_relay_hold(&self, allowed: bool) {
        self.driver.set_relay_hold(allowed);
    }

    /// The relay session this page would continue, if any: the one this tab saved before a
    /// reload, else the one this browser drove last (a tab opened again, the browser restarted).
    /// The page checks that no other tab drives it before [`start`](Self::start) continues it.
    #[wasm_bindgen(js_name = savedSessionId)]
    pub fn saved_session_id(&self) -> Option<String> {
        crate::storage::load_saved_session().map(|(s, _)| s.session_id)
    }

    /// Whether that saved session is this tab's own (a reload) rather than the browser's last:
    /// an address that names a session (`#session=`) passes over only the browser's last.
    #[wasm_bindgen(js_name = savedSessionIsTabs)]
    pub fn saved_session_is_tabs(&self) -> bool {
        matches!(crate::storage::load_saved_session(), Some((_, crate::storage::SavedIn::Tab)))
    }

    /// Forgets the tab's saved session: [`start`](Self::start) then begins a new one (a
    /// duplicated tab, whose copied storage names a session the original tab still drives).
    #[wasm_bindgen(js_name = forgetSavedSession)]
    pub fn forget_saved_session(&self) {
        crate::storage::pass_over_saved_session();
    }

    /// The sessions running on a spawn-mode relay, for a page with nothing saved to offer, and
    /// where a new one may start: `{ sessions: [{ id, created, lastActive, cols, rows, title,
    /// attached, host }], sshHosts: [name] }` (times in Unix seconds, oldest first; `host` empty
    /// for the relay's machine); both empty when the relay cannot be asked now (connecting will
    /// retry); `null` when asking showed that connecting cannot succeed (a wrong token, say): the
    /// status hook has said why, and the page should not start.
    #[wasm_bindgen(js_name = listSessions)]
    pub async fn list_sessions(&self) -> JsValue {
        let list = match self.driver.list_sessions().await {
            Ok(list) => list,
            Err(tern::relay_client::ConnectError::Fatal { code, message }) => {
                self.driver.fail(code, &message);
                return JsValue::NULL;
            }
            Err(_) => {
                tern::relay_proto::SessionList { sessions: Vec::new(), ssh_hosts: Vec::new() }
            }
        };
        stats::session_list(&list)
    }

    /// Continues the session `id` chosen from [`list_sessions`](Self::list_sessions) instead of
    /// starting a new one (call before [`start`](Self::start)).
    #[wasm_bindgen(js_name = resumeSession)]
    pub fn resume_session(&self, id: &str) {
        self.driver.resume_session(id);
    }

    /// Watch the session `id` read-only (a share link's `#view=ID`) instead of driving one:
    /// call before [`start`](Self::start), and restore nothing.
    #[wasm_bindgen(js_name = watchSession)]
    pub fn watch_session(&self, id: &str) {
        self.driver.watch_session(id);
    }

    /// Whether this page only watches its session.
    pub fn viewing(&self) -> bool {
        self.driver.viewing()
    }

    /// Shares this session read-only (`tern::relay_proto::share`): `{ url, expires }` (the URL
    /// holds the share's token: shown once; `expires` in unix seconds). Rejects with a message.
    pub async fn share(&self, expires_secs: f64, allow_history: bool) -> Result<JsValue, JsValue> {
        let request = tern::relay_proto::ShareRequest {
            expires: Some(expires_secs.max(1.0) as u64),
            allow_history,
            ..Default::default()
        };
        let reply = self.share_call(request).await?;
        Ok(hooks::object(&[
            ("url", reply.url.unwrap_or_default().into()),
            ("expires", (reply.expires.unwrap_or(0) as f64).into()),
        ]))
    }

    /// Ends every share of this session (its viewers are closed): how many ended.
    #[wasm_bindgen(js_name = endSharing)]
    pub async fn end_sharing(&self) -> Result<f64, JsValue> {
        let request = tern::relay_proto::ShareRequest { end: true, ..Default::default() };
        Ok(self.share_call(request).await?.ended as f64)
    }

    async fn share_call(
        &self,
        mut request: tern::relay_proto::ShareRequest,
    ) -> Result<tern::relay_proto::ShareReply, JsValue> {
        let (token, session) = self
            .driver
            .session_target()
            .ok_or_else(|| JsValue::from_str("no session to share yet"))?;
        request.session = session;
        relay_link::history_call(&token, tern::relay_proto::SHARE_PATH, &request)
            .await
            .map_err(|e| JsValue::from_str(&e))
    }

    /// Why files pasted or dropped here cannot reach the shell (bridge mode without a paste
    /// directory), once connected; `undefined` when they can. The page says so up front.
    /// What this session lacks and why ("History, pictures and signals are off on devbox:
    /// ..."), once connected; `undefined` when nothing is off. The page says it once.
    #[wasm_bindgen(js_name = featuresOff)]
    pub fn features_off(&self) -> Option<String> {
        self.driver.features_off()
    }

    #[wasm_bindgen(js_name = pasteUnavailable)]
    pub fn paste_unavailable(&self) -> Option<String> {
        self.driver.paste_unavailable()
    }

    /// Which relay serves this page, `tern-relay 0.1.0 (1a2b3c4d5e6f)`, once connected
    /// (`/api/info`'s version and commit); `undefined` before. The settings panel shows it.
    #[wasm_bindgen(js_name = relayBuild)]
    pub fn relay_build(&self) -> Option<String> {
        self.driver.relay_build()
    }

    /// Starts the new session on the relay's ssh host `name` (from `sshHosts()`), not on the
    /// relay's machine. Call before `start`.
    #[wasm_bindgen(js_name = startOnHost)]
    pub fn start_on_host(&self, name: &str) {
        self.driver.start_on_host(name);
    }

    /// After the `moved` status: take the session back from the page that has it now.
    #[wasm_bindgen(js_name = takeBack)]
    pub fn take_back(&self) {
        self.driver.take_back();
    }

    /// The printed URL's fragment (`location.hash` without `#`) as `[[name, value], ...]`:
    /// percent-decoded, with `+` kept (a mosh key holds `+`; `URLSearchParams` would make it a
    /// space).
    #[wasm_bindgen(js_name = fragmentParams)]
    pub fn fragment_params(fragment: &str) -> js_sys::Array {
        tern::relay_client::fragment_params(fragment)
            .into_iter()
            .map(|(name, value)| -> JsValue {
                js_sys::Array::of2(&JsValue::from(name), &JsValue::from(value)).into()
            })
            .collect::<js_sys::Array>()
    }

    /// The port and key of a pasted `MOSH CONNECT <port> <key>` line, `{ port, key }`, or
    /// `null` when it holds none (bridge mode's connect form).
    #[wasm_bindgen(js_name = parseMoshConnect)]
    pub fn parse_mosh_connect(line: &str) -> JsValue {
        match tern::relay_client::parse_mosh_connect(line) {
            Some((port, key)) => hooks::object(&[("port", port.into()), ("key", key.into())]),
            None => JsValue::NULL,
        }
    }

    /// The page is going away (`pagehide`): the shell keeps running, and the tab saves where
    /// it stands so that a reload continues it (docs/BROWSER.md, "Reload").
    pub fn leave(&self) {
        self.driver.leave();
    }

    /// Ends the session for good: mosh's quit handshake (the shell gets a hangup). The page
    /// then shows that the session is over.
    #[wasm_bindgen(js_name = endSession)]
    pub fn end_session(&self) {
        self.driver.end_session();
    }

    /// Whether the relay keeps this session's whole history (spawn mode with its recorder):
    /// then [`history_page`](Self::history_page) and [`search_history`](Self::search_history)
    /// reach every line, not only the ones this page saw.
    #[wasm_bindgen(js_name = historyAvailable)]
    pub fn history_available(&self) -> bool {
        self.driver.history_target().is_some()
    }

    /// Up to `count` history lines before line `before` (the newest when `null`):
    /// `{ first, end, start, lines }`, lines `start..` oldest first, of a history holding lines
    /// `first..end` (numbers stay put as the program prints more). Rejects with a message.
    #[wasm_bindgen(js_name = historyPage)]
    pub async fn history_page(&self, before: Option<f64>, count: u32) -> Result<JsValue, JsValue> {
        use tern::relay_proto::{HISTORY_PATH, HistoryPage, HistoryRequest};
        let (token, session) = self.history_target()?;
        let request = HistoryRequest { session, before: before.map(|b| b as u64), count };
        let page: HistoryPage = relay_link::history_call(&token, HISTORY_PATH, &request)
            .await
            .map_err(|e| JsValue::from_str(&e))?;
        let lines: js_sys::Array = page.lines.iter().map(|l| JsValue::from_str(l)).collect();
        Ok(hooks::object(&[
            ("first", (page.first as f64).into()),
            ("end", (page.end as f64).into()),
            ("start", (page.start as f64).into()),
            ("lines", lines.into()),
        ]))
    }

    /// Searches the whole history on the relay: `{ first, end, hits, totalHits, truncated }`,
    /// `hits` flat `[line, start, end, ...]` (characters of the line without its escapes),
    /// oldest first. Rejects with a message (a bad regular expression, say).
    #[wasm_bindgen(js_name = searchHistory)]
    pub async fn search_history(
        &self,
        pattern: String,
        case_sensitive: bool,
        regex: bool,
    ) -> Result<JsValue, JsValue> {
        use tern::relay_proto::{HISTORY_SEARCH_PATH, HistorySearch, HistorySearchResult};
        let (token, session) = self.history_target()?;
        let request = HistorySearch { session, pattern, case_sensitive, regex };
        let found: HistorySearchResult =
            relay_link::history_call(&token, HISTORY_SEARCH_PATH, &request)
                .await
                .map_err(|e| JsValue::from_str(&e))?;
        let hits: Vec<f64> =
            found.hits.iter().flat_map(|h| [h.line as f64, h.start.into(), h.end.into()]).collect();
        Ok(hooks::object(&[
            ("first", (found.first as f64).into()),
            ("end", (found.end as f64).into()),
            ("hits", js_sys::Float64Array::from(&hits[..]).into()),
            ("totalHits", (found.total_hits as f64).into()),
            ("truncated", found.truncated.into()),
        ]))
    }

    /// One history line as HTML for the history view: colours as classes (`f1`, `b4`, ...) or
    /// inline styles, `marks` (flat `[start, end, ...]`) wrapped in `<mark>`, the `current` one
    /// with class `current`.
    /// The image markers in a history line (docs/IMAGES.md): `[offset, id, ...]`, offsets in
    /// characters of the line without its escapes.
    #[wasm_bindgen(js_name = lineImageMarkers)]
    pub fn line_image_markers(line: &str) -> js_sys::Uint32Array {
        let flat: Vec<u32> = tern::terminal::line_image_markers(line)
            .into_iter()
            .flat_map(|(at, id)| [at as u32, id as u32])
            .collect();
        js_sys::Uint32Array::from(&flat[..])
    }

    #[wasm_bindgen(js_name = lineHtml)]
    pub fn line_html(line: &str, marks: Vec<u32>, current: Option<u32>) -> String {
        let marks: Vec<(usize, usize)> =
            marks.chunks_exact(2).map(|m| (m[0] as usize, m[1] as usize)).collect();
        tern::terminal::line_html(line, &marks, current.map(|c| c as usize))
    }

    fn history_target(&self) -> Result<(String, String), JsValue> {
        self.driver.history_target().ok_or_else(|| {
            JsValue::from_str("this relay keeps no history for this session (bridge mode)")
        })
    }
}

impl Client {
    /// Image `id` (or [`NEXT_IMAGE`](tern::relay_proto::NEXT_IMAGE)) as a JS object (see
    /// [`image`](Self::image)); `on_header` hears its id once the relay says which it is.
    async fn fetch_image(
        &self,
        id: u64,
        on_header: Option<js_sys::Function>,
    ) -> Result<JsValue, JsValue> {
        let (token, session) = self.history_target()?;
        let request = tern::relay_proto::ImageRequest { session, image: id };
        // On a stream of the link, paced as a download (typing stays fast while it comes);
        // over HTTP when no link is up yet (a reload draws before it connects).
        let (info, parts, via) = match self.driver.current_link() {
            Some(link) => match relay_link::image_stream(&link, &request, on_header.as_ref()).await
            {
                Ok((info, parts)) => (info, parts, "stream"),
                Err(e) => return Err(JsValue::from_str(&e)),
            },
            None => {
                let (info, bytes) = relay_link::image_call(&token, &request)
                    .await
                    .map_err(|e| JsValue::from_str(&e))?;
                (info, js_sys::Array::of1(&Uint8Array::from(&bytes[..])), "http")
            }
        };
        let options = web_sys::BlobPropertyBag::new();
        options.set_type(&info.mime);
        let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &options)?;
        let name = info.name.as_deref().map_or(JsValue::NULL, JsValue::from_str);
        let id = info.id.map_or(JsValue::NULL, |id| JsValue::from_f64(id as f64));
        Ok(hooks::object(&[
            ("cols", info.cols.into()),
            ("rows", info.rows.into()),
            ("width", info.width.into()),
            ("height", info.height.into()),
            ("name", name),
            ("blob", blob.into()),
            ("via", JsValue::from_str(via)),
            ("id", id),
        ]))
    }

    /// The terminal's events reach the driver: keys, binary input (mouse reports), resizes.
    fn wire_terminal(&self) {
        let driver = &self.driver;
        let term = driver.term();
        // mosh-client keeps the local terminal in DECCKM for good (MOSH-PROTOCOL.md 7.1), so
        // xterm.js sends cursor keys as ESC O A..D; input::translate_typed covers the rest.
        term.write(&Uint8Array::from(&b"\x1b[?1h"[..]));

        let weak = Rc::downgrade(driver);
        let on_data = Closure::<dyn FnMut(String)>::new(move |data: String| {
            if let Some(d) = weak.upgrade() {
                d.input(&input::translate_typed(&data));
            }
        });
        term.on_data(&on_data);
        let weak = Rc::downgrade(driver);
        let on_binary = Closure::<dyn FnMut(String)>::new(move |data: String| {
            if let Some(d) = weak.upgrade() {
                d.input(&input::binary_string(&data));
            }
        });
        term.on_binary(&on_binary);
        let weak = Rc::downgrade(driver);
        let on_resize = Closure::<dyn FnMut(JsValue)>::new(move |_size: JsValue| {
            if let Some(d) = weak.upgrade() {
                d.resized();
            }
        });
        term.on_resize(&on_resize);
        // The terminal lives as long as the page: so do its callbacks.
        on_data.forget();
        on_binary.forget();
        on_resize.forget();
    }
}
