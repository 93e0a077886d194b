//! The page's callbacks, typed: the page formats what these hand over (`www/app.js`).

use js_sys::{Function, Object, Reflect};
use tern::page::RemoteCopy;
use tern::paste::PasteProgress;
use tern::relay_client::{FailCode, Status};
use wasm_bindgen::prelude::*;

/// Where the connection stands, as the page's `status` hook receives it.
#[wasm_bindgen]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StatusKind {
    Connecting = "connecting",
    Connected = "connected",
    Resumed = "resumed",
    Reconnecting = "reconnecting",
    Ended = "ended",
    /// Another page took the session over (`Client.takeBack()` takes it back).
    Moved = "moved",
    /// Bridge mode: nothing here can continue the session the address names.
    CannotResume = "cannot_resume",
    BadToken = "bad_token",
    RateLimited = "rate_limited",
    NoWebTransport = "no_webtransport",
    VersionMismatch = "version_mismatch",
    /// Any other reason retrying cannot help; the hook's `code` says which.
    Failed = "failed",
}

impl From<Status> for StatusKind {
    fn from(s: Status) -> Self {
        match s {
            Status::Connecting => StatusKind::Connecting,
            Status::Connected => StatusKind::Connected,
            Status::Resumed => StatusKind::Resumed,
            Status::Reconnecting => StatusKind::Reconnecting,
            Status::Ended => StatusKind::Ended,
            Status::Moved => StatusKind::Moved,
            Status::CannotResume => StatusKind::CannotResume,
            Status::Failed(FailCode::BadToken) => StatusKind::BadToken,
            Status::Failed(FailCode::RateLimited) => StatusKind::RateLimited,
            Status::Failed(FailCode::NoWebTransport) => StatusKind::NoWebTransport,
            Status::Failed(FailCode::VersionMismatch) => StatusKind::VersionMismatch,
            Status::Failed(_) => StatusKind::Failed,
        }
    }
}

/// `{ status(kind, message, code), paste(progress|null), title(text), bell(), clipboard(notice) }`,
/// each optional.
#[derive(Debug)]
pub struct Hooks {
    hooks: JsValue,
}

impl Hooks {
    pub fn new(hooks: JsValue) -> Self {
        Hooks { hooks }
    }

    fn call(&self, name: &str, args: &[JsValue]) {
        let Ok(f) = Reflect::get(&self.hooks, &name.into()) else { return };
        let Some(f) = f.dyn_ref::<Function>() else { return };
        let arr: js_sys::Array = args.iter().collect();
        // A throwing hook is the page's bug; it must not break the session.
        let _ = f.apply(&self.hooks, &arr);
    }

    /// `status(kind: StatusKind, message: string, code: string)`.
    pub fn status(&self, status: Status, message: &str) {
        let code = match status {
            Status::Failed(c) => c.as_str(),
            _ => "",
        };
        self.call("status", &[StatusKind::from(status).into(), message.into(), code.into()]);
    }

    /// `paste(progress)`: `null` once nothing is to be shown.
    pub fn paste(&self, progress: Option<&PasteProgress>) {
        self.call("paste", &[progress.map_or(JsValue::NULL, progress_object)]);
    }

    /// `link(kind, fallback)`: how the session reaches the relay now, `webtransport` or
    /// `websocket`; `fallback`: the WebSocket stands in for WebTransport the relay offers.
    /// This page now drives the relay session `id` (new, or continued after a reload): the page
    /// holds a lock on it for its life, so that a duplicated tab does not take it over too.
    pub fn session(&self, id: &str) {
        self.call("session", &[id.into()]);
    }

    pub fn link(&self, kind: &str, fallback: bool) {
        self.call("link", &[kind.into(), fallback.into()]);
    }

    pub fn title(&self, title: &str) {
        self.call("title", &[title.into()]);
    }

    /// `flooding(on)`: the output floods and is drawn only a few times a second
    /// (`tern::session::DrawPacer`), or no longer; the page stops the cursor's blink meanwhile.
    pub fn flooding(&self, on: bool) {
        self.call("flooding", &[on.into()]);
    }

    pub fn bell(&self) {
        self.call("bell", &[]);
    }

    /// `refused(message)`: the relay refused what this link asked (a read-only token's typing,
    /// resize, paste or download); the page says so.
    pub fn refused(&self, message: &str) {
        self.call("refused", &[message.into()]);
    }

    /// `viewerScreen(cols, rows, full)`: a viewer's link; the terminal must be `cols` x `rows`
    /// (reset first when `full`) before the bytes that follow are written.
    pub fn viewer_screen(&self, cols: u16, rows: u16, full: bool) {
        self.call("viewerScreen", &[cols.into(), rows.into(), full.into()]);
    }

    /// `viewerOf(owner)`: a viewer's link is up; whose session it watches.
    pub fn viewer_of(&self, owner: &str) {
        self.call("viewerOf", &[owner.into()]);
    }

    /// `viewers(count)`: the owner's link; how many watch the session now.
    pub fn viewers(&self, count: u32) {
        self.call("viewers", &[count.into()]);
    }

    /// `clipboard({ action, text, chars, message, preview })`: a program wrote the clipboard
    /// (OSC 52); `action` is `write` (write it and show `message`), `ask` (show `message` and
    /// `preview`, write it on the person's Copy) or `refused` (show `message`; `text` is empty).
    pub fn clipboard(&self, copy: &RemoteCopy) {
        let notice = object(&[
            ("action", copy.action.as_str().into()),
            ("text", copy.text.as_str().into()),
            ("chars", (copy.chars as f64).into()),
            ("message", copy.message.as_str().into()),
            ("preview", copy.preview.as_str().into()),
        ]);
        self.call("clipboard", &[notice]);
    }

    /// `notify(title, body)`: a program asked for a notification (OSC 9 / 777); the page shows
    /// it when its setting is on and the tab hidden.
    pub fn notify(&self, title: &str, body: &str) {
        self.call("notify", &[title.into(), body.into()]);
    }

    /// `linkText(url, text, col)`: a program printed `text` at column `col` as a hyperlink to
    /// `url` (OSC 8; http, https or mailto only); the page makes it a link where a row shows it.
    pub fn link_text(&self, url: &str, text: &str, col: u16) {
        self.call("linkText", &[url.into(), text.into(), f64::from(col).into()]);
    }

    /// `offerUrl(id, url)`: the shell asks to open `url` (`tern open`); the page asks the person
    /// and answers with `Client.answerOffer(id, opened)`.
    pub fn offer_url(&self, id: &str, url: &str) {
        self.call("offerUrl", &[id.into(), url.into()]);
    }

    /// `saveFile(name, blob)`: a download from the shell (`tern send`), its SHA-256 checked.
    pub fn save_file(&self, name: &str, blob: &web_sys::Blob) {
        self.call("saveFile", &[name.into(), blob.into()]);
    }
}

/// `{ state, bytesDone, total, percent, rate, secondsLeft, queued, error, line }`.
fn progress_object(p: &PasteProgress) -> JsValue {
    let opt_f64 = |v: Option<f64>| v.map_or(JsValue::NULL, JsValue::from);
    object(&[
        ("state", p.state.as_str().into()),
        ("active", p.state.is_active().into()),
        ("bytesDone", (p.bytes_done as f64).into()),
        ("total", (p.total as f64).into()),
        ("percent", p.percent().into()),
        ("rate", opt_f64(p.rate.map(|r| r as f64))),
        ("secondsLeft", opt_f64(p.time_left.map(|t| t.as_secs_f64()))),
        ("queued", (p.queued as f64).into()),
        ("error", p.error.as_deref().map_or(JsValue::NULL, JsValue::from)),
        ("line", p.line().into()),
        ("text", p.text().into()),
    ])
}

/// A JS object from field/value pairs.
pub fn object(fields: &[(&str, JsValue)]) -> JsValue {
    let obj = Object::new();
    for (k, v) in fields {
        let _ = Reflect::set(&obj, &(*k).into(), v);
    }
    obj.into()
}
