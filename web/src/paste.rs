//! Pasted and dropped files: hash, ask the relay, upload paced by `tern::upload`, type the path.
//!
//! ```text
//!  paste/drop ─▶ queue: Paste(id) ─ hash (crypto.subtle) ─▶ RecentUploads::begin
//!     Uploaded(path) ─▶ the path is ready at once (nothing asked or sent)
//!     InProgress     ─▶ waits for the upload of the same content
//!     New            ─▶ job: stream, header, {"have"} ─▶ Upload (pacer) ─▶ chunks … ─▶ {"path"}
//!  keys typed meanwhile ─▶ queue: Keys(..)          (held, in order, behind the paste)
//!  release(): from the front, type each ready path (bracketed when the remote wants it) and
//!             send the keys behind it; stop at the first paste still under way
//! ```
//!
//! Keystrokes stay datagrams on their own writer: nothing here awaits on the input path, and
//! stream writes are capped by the pacer's window, so Chromium never has more than about two
//! round trips of picture queued in front of a datagram. Escape (or the page's cancel button)
//! cancels: the upload stops, the paste's place in the queue is dropped, held keys go out.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use gloo_timers::callback::Timeout;
use gloo_timers::future::TimeoutFuture;
use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use web_sys::WritableStreamDefaultWriter;

use crate::link::{StreamLines, object};
use crate::{Shell, ms, now, now_ms};
use tern::upload::{
    AckInfo, ContentHash, FailReason, Recall, RecentUploads, Upload, UploadConfig, UploadState,
};

/// Hashes remembered for repeat pastes (one question to the relay when forgotten).
const RECENT: usize = 64;
/// An interrupted upload gives up after this long without a live link or any progress.
const GIVE_UP: Duration = Duration::from_secs(120);
/// Pause between attempts on a link that is up (the stream failed, the pacer stalled).
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// How long the result line ("failed: …", "cancelled") stays in the notification bar.
const RESULT_SHOWN: Duration = Duration::from_secs(8);
/// Progress redraws at most this often (acks come every few milliseconds).
const REDRAW: Duration = Duration::from_millis(100);

/// One entry of the ordered input queue that exists while pastes are under way.
#[derive(Debug)]
enum Held {
    /// Keys typed after an unfinished paste.
    Keys(Vec<u8>),
    /// A paste: its hash once known; `dropped` after failure or cancel.
    Paste { id: u32, hash: Option<ContentHash>, dropped: bool },
}

/// An upload waiting or under way.
#[derive(Debug)]
struct Job {
    hash: ContentHash,
    bytes: Rc<Vec<u8>>,
    mime: String,
}

/// The upload on the wire right now.
#[derive(Debug)]
struct Active {
    hash: ContentHash,
    total: u64,
    bytes: Rc<Vec<u8>>,
    /// `None` until the relay said what it has.
    upload: Option<Upload>,
    writer: Option<WritableStreamDefaultWriter>,
    lines: Option<Rc<StreamLines>>,
    timer: Option<Timeout>,
    /// What the line shows before there is an `Upload` (hashing, asking, interrupted).
    phase: &'static str,
    /// `performance.now()` of the first content byte written (for `stats().paste.lastUploadMs`).
    first_byte_ms: Option<f64>,
    cancelled: bool,
}

/// Counters for `stats().paste` (docs/BROWSER.md).
#[derive(Debug, Default)]
struct Counters {
    pastes: u32,
    /// Jobs that asked the relay (a repeat paste the page remembers asks nothing).
    uploads: u32,
    /// Upload streams opened (more than `uploads` when resumed).
    streams: u32,
    /// Content bytes written on upload streams.
    bytes_sent: u64,
    /// Bytes the relay already had when a stream started (resumed or repeat).
    bytes_skipped: u64,
    completed: u32,
    failed: u32,
    cancelled: u32,
    paths_typed: u32,
    held_keys: u64,
}

/// The shell's paste state (in `State`).
#[derive(Debug)]
pub(super) struct Pastes {
    recent: RecentUploads,
    queue: VecDeque<Held>,
    jobs: VecDeque<Job>,
    active: Option<Active>,
    next_id: u32,
    counters: Counters,
    /// A result to show for a while: (text, until `now_ms`).
    result: Option<(String, f64)>,
    last_error: Option<String>,
    last_path: Option<String>,
    last_upload_ms: Option<f64>,
    last_redraw_ms: f64,
    /// Last line reported to the page's `paste` hook.
    pub reported: Option<String>,
    /// Hold typed keys behind an unfinished paste (the default; the benchmark turns it off to
    /// measure the datagram path under an upload).
    pub hold_keys: bool,
    /// Swallows rejected stream writes (a stream aborted by cancel or a dying link); each
    /// would otherwise be an "uncaught (in promise)" in the console.
    ignore: Closure<dyn FnMut(JsValue)>,
}

impl Pastes {
    pub fn new() -> Self {
        Pastes {
            recent: RecentUploads::new(RECENT),
            queue: VecDeque::new(),
            jobs: VecDeque::new(),
            active: None,
            next_id: 0,
            counters: Counters::default(),
            result: None,
            last_error: None,
            last_path: None,
            last_upload_ms: None,
            last_redraw_ms: 0.0,
            reported: None,
            hold_keys: true,
            ignore: Closure::new(|_| {}),
        }
    }

    /// Typed input goes into the queue instead of out while this is true.
    pub fn holding(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Holds typed bytes behind the unfinished paste(s).
    pub fn hold(&mut self, bytes: &[u8]) {
        self.counters.held_keys += bytes.len() as u64;
        match self.queue.back_mut() {
            Some(Held::Keys(k)) => k.extend_from_slice(bytes),
            _ => self.queue.push_back(Held::Keys(bytes.to_vec())),
        }
    }

    /// Anything under way (a paste being hashed, a job, an upload)?
    pub fn busy(&self) -> bool {
        self.holding() || self.active.is_some() || !self.jobs.is_empty()
    }

    /// The line for the notification bar, if any.
    pub fn line(&self) -> Option<String> {
        if let Some(a) = &self.active {
            let waiting = self.jobs.len();
            let more = if waiting > 0 { format!(" (+{waiting} queued)") } else { String::new() };
            let text = match &a.upload {
                Some(u) if a.phase.is_empty() => {
                    let p = u.progress(now());
                    let rate = p.rate.map_or("measuring".to_string(), |r| format!("{}/s", size(r)));
                    let left = p.time_left.map_or(String::new(), |t| {
                        format!(", {} left", human_secs(t.as_secs_f64().ceil() as u64))
                    });
                    format!(
                        "Pasting: {:.0}% of {}, {rate}{left}{more} [Esc cancels]",
                        p.percent.floor(),
                        size(p.total)
                    )
                }
                _ => format!("Pasting {}: {}{more} [Esc cancels]", size(a.total), a.phase),
            };
            return Some(text);
        }
        if self.holding() {
            return Some("Pasting: reading the file… [Esc cancels]".into());
        }
        let (text, until) = self.result.as_ref()?;
        (now_ms() < *until).then(|| text.clone())
    }

    fn show_result(&mut self, text: String) {
        self.result = Some((text, now_ms() + RESULT_SHOWN.as_secs_f64() * 1000.0));
    }

    pub fn stats(&self) -> JsValue {
        let c = &self.counters;
        let progress =
            self.active.as_ref().and_then(|a| a.upload.as_ref()).map_or(JsValue::NULL, |u| {
                let p = u.progress(now());
                object(&[
                    ("percent", p.percent.into()),
                    ("acked", (p.acked as f64).into()),
                    ("total", (p.total as f64).into()),
                    ("inFlight", (p.in_flight as f64).into()),
                    ("window", (p.window as f64).into()),
                    ("rate", p.rate.map_or(JsValue::NULL, |r| (r as f64).into())),
                    ("pacingRate", p.pacing_rate.map_or(JsValue::NULL, |r| (r as f64).into())),
                    (
                        "queueMs",
                        p.standing_queue
                            .map_or(JsValue::NULL, |d| (d.as_secs_f64() * 1000.0).into()),
                    ),
                    (
                        "minRttMs",
                        p.min_rtt.map_or(JsValue::NULL, |d| (d.as_secs_f64() * 1000.0).into()),
                    ),
                ])
            });
        let opt = |s: &Option<String>| s.as_deref().map_or(JsValue::NULL, JsValue::from);
        object(&[
            ("pastes", c.pastes.into()),
            ("uploadsStarted", c.uploads.into()),
            ("streams", c.streams.into()),
            ("uploadBytesSent", (c.bytes_sent as f64).into()),
            ("bytesSkipped", (c.bytes_skipped as f64).into()),
            ("completed", c.completed.into()),
            ("failed", c.failed.into()),
            ("cancelled", c.cancelled.into()),
            ("pathsTyped", c.paths_typed.into()),
            ("heldKeys", (c.held_keys as f64).into()),
            ("active", self.busy().into()),
            ("line", opt(&self.line())),
            ("lastPath", opt(&self.last_path)),
            ("lastError", opt(&self.last_error)),
            ("lastUploadMs", self.last_upload_ms.map_or(JsValue::NULL, JsValue::from)),
            ("progress", progress),
            ("holdKeys", self.hold_keys.into()),
        ])
    }
}

/// Bytes for humans (decimal units, as network rates are).
fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

fn human_secs(s: u64) -> String {
    if s < 60 { format!("{s} s") } else { format!("{}:{:02}", s / 60, s % 60) }
}

fn hex(hash: &ContentHash) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// A path as typed into a shell: quoted when it holds anything but plain path characters.
fn shell_word(path: &str) -> String {
    if path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%".contains(&b)) {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    }
}

/// What the relay says on an upload stream.
enum Reply {
    Have { have: u64, path: Option<String> },
    Ack(AckInfo),
    Path(String),
    Error(String),
    Other,
}

fn parse_reply(line: &[u8]) -> Reply {
    let Ok(text) = std::str::from_utf8(line) else { return Reply::Other };
    let Ok(v) = js_sys::JSON::parse(text) else { return Reply::Other };
    let num = |f: &str| Reflect::get(&v, &f.into()).ok().and_then(|x| x.as_f64());
    let text = |f: &str| Reflect::get(&v, &f.into()).ok().and_then(|x| x.as_string());
    if let Some(e) = text("error") {
        return Reply::Error(text("message").unwrap_or(e));
    }
    if let Some(have) = num("have") {
        return Reply::Have { have: have as u64, path: text("path") };
    }
    if let (Some(acked), Some(t)) = (num("acked"), num("relay_time_us")) {
        return Reply::Ack(AckInfo {
            acked_bytes: acked as u64,
            relay_time: Duration::from_micros(t as u64),
        });
    }
    match text("path") {
        Some(p) => Reply::Path(p),
        None => Reply::Other,
    }
}

/// How one attempt (one stream) ended.
enum Attempt {
    Done(String),
    /// The relay refused or failed for good: say why.
    Fatal(String),
    /// The stream broke (relay restart, network change, stall): resume on a live link.
    Interrupted,
    Cancelled,
}

async fn sha256(data: &Uint8Array) -> Result<ContentHash, String> {
    let describe = |e: JsValue| format!("{e:?}");
    let subtle = web_sys::window().ok_or("no window")?.crypto().map_err(describe)?.subtle();
    let promise = subtle.digest_with_str_and_buffer_source("SHA-256", data).map_err(describe)?;
    let digest = wasm_bindgen_futures::JsFuture::from(promise).await.map_err(describe)?;
    let bytes = Uint8Array::new(&digest).to_vec();
    bytes.try_into().map_err(|_| "SHA-256 is not 32 bytes".to_string())
}

impl Shell {
    /// A file was pasted or dropped: take its place in the input queue now, hash it, go on.
    pub(super) fn paste(self: &Rc<Self>, blob: web_sys::Blob) {
        let id = {
            let mut st = self.st.borrow_mut();
            let p = &mut st.paste;
            p.counters.pastes += 1;
            p.next_id += 1;
            let id = p.next_id;
            p.queue.push_back(Held::Paste { id, hash: None, dropped: false });
            id
        };
        self.render(false);
        let shell = Rc::clone(self);
        wasm_bindgen_futures::spawn_local(async move {
            let mime = blob.type_();
            let read = async {
                let buf = wasm_bindgen_futures::JsFuture::from(blob.array_buffer())
                    .await
                    .map_err(|e| format!("cannot read the file: {e:?}"))?;
                let data = Uint8Array::new(&buf);
                let hash = sha256(&data).await?;
                Ok::<_, String>((hash, data.to_vec()))
            };
            match read.await {
                Ok((hash, bytes)) => shell.hashed(id, hash, bytes, mime),
                Err(e) => shell.paste_failed_id(id, &e),
            }
        });
    }

    fn hashed(self: &Rc<Self>, id: u32, hash: ContentHash, bytes: Vec<u8>, mime: String) {
        let start = {
            let mut st = self.st.borrow_mut();
            let p = &mut st.paste;
            let Some(slot) = p.queue.iter_mut().find_map(|h| match h {
                Held::Paste { id: i, hash, dropped: false } if *i == id => Some(hash),
                _ => None,
            }) else {
                return; // cancelled meanwhile
            };
            *slot = Some(hash);
            match p.recent.begin(hash) {
                Recall::New => {
                    p.jobs.push_back(Job { hash, bytes: Rc::new(bytes), mime });
                    p.active.is_none()
                }
                Recall::InProgress | Recall::Uploaded(_) => false,
            }
        };
        if start {
            wasm_bindgen_futures::spawn_local(Shell::run_jobs(Rc::clone(self)));
        }
        self.release();
    }

    /// Types every ready path from the front of the queue and the keys behind it.
    pub(super) fn release(self: &Rc<Self>) {
        loop {
            let next = {
                let mut st = self.st.borrow_mut();
                let st = &mut *st;
                let bracketed = st
                    .session
                    .as_ref()
                    .is_some_and(|s| s.server_state().framebuffer().bracketed_paste());
                let p = &mut st.paste;
                match p.queue.front() {
                    None => None,
                    Some(Held::Keys(_)) => match p.queue.pop_front() {
                        Some(Held::Keys(k)) => Some(k),
                        _ => None,
                    },
                    Some(Held::Paste { dropped: true, .. }) => {
                        p.queue.pop_front();
                        continue;
                    }
                    Some(Held::Paste { hash: None, .. }) => None,
                    Some(Held::Paste { hash: Some(h), .. }) => match p.recent.recall(h) {
                        Recall::InProgress => None,
                        Recall::New => {
                            // Failed or cancelled since: its place is dropped.
                            p.queue.pop_front();
                            continue;
                        }
                        Recall::Uploaded(path) => {
                            p.queue.pop_front();
                            p.counters.paths_typed += 1;
                            p.last_path = Some(path.clone());
                            let word = shell_word(&path);
                            // A trailing space separates it from whatever is typed next.
                            let text = if bracketed {
                                format!("\x1b[200~{word}\x1b[201~ ")
                            } else {
                                format!("{word} ")
                            };
                            Some(text.into_bytes())
                        }
                    },
                }
            };
            match next {
                Some(bytes) => self.send_input(&bytes),
                None => break,
            }
        }
        self.render(false);
    }

    /// Escape or the page's button: stop every paste under way, release the held keys.
    pub(super) fn cancel_pastes(self: &Rc<Self>) {
        let lines = {
            let mut st = self.st.borrow_mut();
            let p = &mut st.paste;
            if !p.busy() {
                return;
            }
            let mut hashes: Vec<ContentHash> = p.jobs.drain(..).map(|j| j.hash).collect();
            let mut lines = None;
            if let Some(a) = p.active.as_mut() {
                a.cancelled = true;
                a.timer = None;
                if let Some(u) = a.upload.as_mut() {
                    u.cancel();
                }
                if let Some(w) = a.writer.take() {
                    let _ = w.abort();
                }
                lines = a.lines.clone();
                hashes.push(a.hash);
            }
            for h in &hashes {
                p.recent.abandon(h);
            }
            for h in p.queue.iter_mut() {
                if let Held::Paste { dropped, .. } = h {
                    *dropped = true;
                }
            }
            p.counters.cancelled += 1;
            p.show_result("Paste cancelled.".into());
            lines
        };
        if let Some(l) = lines {
            l.cancel();
        }
        self.release();
    }

    fn paste_failed_id(self: &Rc<Self>, id: u32, why: &str) {
        {
            let mut st = self.st.borrow_mut();
            let p = &mut st.paste;
            for h in p.queue.iter_mut() {
                if let Held::Paste { id: i, dropped, .. } = h {
                    if *i == id {
                        *dropped = true;
                    }
                }
            }
            p.counters.failed += 1;
            p.last_error = Some(why.to_string());
            p.show_result(format!("Paste failed: {why}"));
        }
        self.release();
    }

    /// Runs queued jobs one after another until none is left.
    async fn run_jobs(shell: Rc<Shell>) {
        loop {
            let job = {
                let mut st = shell.st.borrow_mut();
                let p = &mut st.paste;
                if p.active.is_some() {
                    return;
                }
                let Some(job) = p.jobs.pop_front() else { return };
                p.counters.uploads += 1;
                p.active = Some(Active {
                    hash: job.hash,
                    total: job.bytes.len() as u64,
                    bytes: Rc::clone(&job.bytes),
                    upload: None,
                    writer: None,
                    lines: None,
                    timer: None,
                    phase: "asking the relay…",
                    first_byte_ms: None,
                    cancelled: false,
                });
                job
            };
            shell.render(false);
            let outcome = shell.run_job(&job).await;
            {
                let mut st = shell.st.borrow_mut();
                let p = &mut st.paste;
                let active = p.active.take();
                match &outcome {
                    Ok(path) => {
                        p.recent.finish(job.hash, path.clone());
                        p.counters.completed += 1;
                        if let Some(t) = active.and_then(|a| a.first_byte_ms) {
                            p.last_upload_ms = Some(now_ms() - t);
                        }
                        p.result = None;
                    }
                    Err(None) => {} // cancelled: already reported
                    Err(Some(why)) => {
                        p.recent.abandon(&job.hash);
                        p.counters.failed += 1;
                        p.last_error = Some(why.clone());
                        p.show_result(format!("Paste failed: {why}"));
                    }
                }
            }
            shell.release();
        }
    }

    /// One job to its end: `Ok(path)`, `Err(None)` when cancelled, `Err(Some(why))` on failure.
    /// Interruptions (relay restart, network change, a stalled stream) resume from what the
    /// relay holds, on whatever link is live.
    async fn run_job(self: &Rc<Self>, job: &Job) -> Result<String, Option<String>> {
        let mut last_progress = now_ms();
        let mut progress_mark = 0u64;
        loop {
            if self.is_over() {
                return Err(Some("the session ended".into()));
            }
            if self.paste_cancelled() {
                return Err(None);
            }
            let link = self.st.borrow().link.clone();
            let Some(link) = link else {
                self.set_phase("interrupted; waiting for the relay…");
                if now_ms() - last_progress > GIVE_UP.as_secs_f64() * 1000.0 {
                    return Err(Some("no connection to the relay for two minutes".into()));
                }
                TimeoutFuture::new(200).await;
                continue;
            };
            match self.attempt(&link, job).await {
                Attempt::Done(path) => return Ok(path),
                Attempt::Fatal(why) => return Err(Some(why)),
                Attempt::Cancelled => return Err(None),
                Attempt::Interrupted => {
                    let acked = self.acked();
                    if acked > progress_mark {
                        progress_mark = acked;
                        last_progress = now_ms();
                    } else if now_ms() - last_progress > GIVE_UP.as_secs_f64() * 1000.0 {
                        return Err(Some("the upload made no progress for two minutes".into()));
                    }
                    self.set_phase("interrupted; resuming…");
                    TimeoutFuture::new(ms(RETRY_PAUSE)).await;
                }
            }
        }
    }

    fn paste_cancelled(&self) -> bool {
        self.st.borrow().paste.active.as_ref().is_none_or(|a| a.cancelled)
    }

    fn acked(&self) -> u64 {
        let st = self.st.borrow();
        st.paste
            .active
            .as_ref()
            .and_then(|a| a.upload.as_ref())
            .map_or(0, |u| u.progress(now()).acked)
    }

    fn set_phase(self: &Rc<Self>, phase: &'static str) {
        if let Some(a) = self.st.borrow_mut().paste.active.as_mut() {
            a.phase = phase;
        }
        self.render(false);
    }

    /// One stream: header, the relay's `have`, paced chunks, acks, the final path.
    async fn attempt(self: &Rc<Self>, link: &Rc<crate::Link>, job: &Job) -> Attempt {
        let (writer, lines) = match link.open_stream().await {
            Ok(s) => s,
            Err(_) => return Attempt::Interrupted,
        };
        let lines = Rc::new(lines);
        let total = job.bytes.len() as u64;
        let header = object(&[
            ("hash", hex(&job.hash).into()),
            ("size", (total as f64).into()),
            ("mime", job.mime.as_str().into()),
        ]);
        let mut line = js_sys::JSON::stringify(&header).map(String::from).unwrap_or_default();
        line.push('\n');
        {
            let mut st = self.st.borrow_mut();
            let _ =
                writer.write_with_chunk(&Uint8Array::from(line.as_bytes())).catch(&st.paste.ignore);
            st.paste.counters.streams += 1;
            match st.paste.active.as_mut() {
                Some(a) if !a.cancelled => {
                    a.writer = Some(writer.clone());
                    a.lines = Some(Rc::clone(&lines));
                    a.phase = "asking the relay…";
                }
                _ => return Attempt::Cancelled,
            }
        }
        let result = self.serve_stream(&lines, total).await;
        let mut st = self.st.borrow_mut();
        if let Some(a) = st.paste.active.as_mut() {
            a.timer = None;
            a.writer = None;
            a.lines = None;
            if a.cancelled {
                return Attempt::Cancelled;
            }
        }
        drop(st);
        if matches!(result, Attempt::Interrupted) {
            let _ = writer.abort();
            lines.cancel();
        } else {
            let _ = writer.close();
        }
        result
    }

    async fn serve_stream(self: &Rc<Self>, lines: &Rc<StreamLines>, total: u64) -> Attempt {
        loop {
            let Some(line) = lines.next_line().await else {
                return if self.paste_cancelled() {
                    Attempt::Cancelled
                } else {
                    Attempt::Interrupted
                };
            };
            match parse_reply(&line) {
                Reply::Have { path: Some(path), have } => {
                    self.st.borrow_mut().paste.counters.bytes_skipped += have;
                    return Attempt::Done(path);
                }
                Reply::Have { have, path: None } => {
                    let created = {
                        let mut st = self.st.borrow_mut();
                        let p = &mut st.paste;
                        p.counters.bytes_skipped += have.min(total);
                        let Some(a) = p.active.as_mut() else { return Attempt::Cancelled };
                        a.phase = "";
                        Upload::new(UploadConfig::new(total, have), now())
                            .map(|u| a.upload = Some(u))
                    };
                    if let Err(e) = created {
                        return Attempt::Fatal(format!("the relay's answer makes no sense: {e}"));
                    }
                    self.pump();
                }
                Reply::Ack(ack) => {
                    let bad = {
                        let mut st = self.st.borrow_mut();
                        let Some(u) = st.paste.active.as_mut().and_then(|a| a.upload.as_mut())
                        else {
                            continue;
                        };
                        u.handle_ack(now(), ack).err()
                    };
                    if let Some(e) = bad {
                        return Attempt::Fatal(format!(
                            "the relay sent a bad acknowledgement: {e}"
                        ));
                    }
                    self.pump();
                }
                Reply::Path(path) => return Attempt::Done(path),
                Reply::Error(why) => return Attempt::Fatal(why),
                Reply::Other => {}
            }
        }
    }

    /// Writes what the pacer releases, re-arms its timer, redraws the progress now and then.
    fn pump(self: &Rc<Self>) {
        let redraw = {
            let mut st = self.st.borrow_mut();
            let p = &mut st.paste;
            let Some(a) = p.active.as_mut() else { return };
            let (Some(u), Some(w)) = (a.upload.as_mut(), a.writer.as_ref()) else { return };
            let t = now();
            while let Some(range) = u.poll_chunk(t) {
                let (start, end) = (range.start as usize, range.end as usize);
                // A copy: the stream keeps the chunk until QUIC sent it.
                let chunk = Uint8Array::from(&a.bytes[start..end]);
                // Not awaited: the window bounds what is queued, and nothing waits on it.
                let _ = w.write_with_chunk(&chunk).catch(&p.ignore);
                a.first_byte_ms.get_or_insert_with(now_ms);
                p.counters.bytes_sent += (end - start) as u64;
            }
            if let UploadState::Failed { reason: FailReason::Stalled { .. } } = u.state() {
                // No ack for 10 s: end this stream; run_job resumes on a live link.
                if let Some(l) = a.lines.as_ref() {
                    l.cancel();
                }
            }
            a.timer = u.poll_timeout().map(|at| {
                let wait = at.saturating_duration_since(t);
                let weak = Rc::downgrade(self);
                Timeout::new(ms(wait).max(1), move || {
                    if let Some(shell) = weak.upgrade() {
                        if let Some(u) = shell
                            .st
                            .borrow_mut()
                            .paste
                            .active
                            .as_mut()
                            .and_then(|a| a.upload.as_mut())
                        {
                            u.handle_timeout(now());
                        }
                        shell.pump();
                    }
                })
            });
            let due = now_ms() - p.last_redraw_ms > REDRAW.as_secs_f64() * 1000.0;
            if due {
                p.last_redraw_ms = now_ms();
            }
            due
        };
        if redraw {
            self.render(false);
        }
    }
}
