//! One link to tern-relay: the info request (each API request after the relay proved it knows
//! the token), then WebTransport (or the WebSocket fallback, `websocket.rs`) carrying the control
//! stream, datagrams and upload streams. Pure I/O: it moves bytes and lines; what they mean is
//! `tern::relay_client`'s and `tern::relay_proto`'s business, what to do about a failure the
//! driver's.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::clock::now;
use crate::js::describe;
use crate::websocket::{WsCarrier, WsReader, WsWriter};
use js_sys::{Reflect, Uint8Array};
use tern::relay_client::{self, ConnectError};
use tern::relay_proto::control::{MAX_SESSION_MESSAGE, Ready};
use tern::relay_proto::upload::MAX_REPLY;
use tern::relay_proto::{
    CHALLENGE_PATH, ClientMessage, Hello, INFO_PATH, LineBuffer, LinkHint, Message, Proof,
    ProofNonce, RelayInfo, SESSIONS_PATH, SessionList,
};
use tern::time::Instant;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    Headers, ReadableStreamDefaultReader, ReadableStreamReadResult, Request, RequestCache,
    RequestInit, Response, WebTransport, WritableStreamDefaultWriter,
};

/// Handshake, control stream and the relay's answer to hello must all come within this; a path
/// that died mid-handshake would otherwise hang the attempt until QUIC's idle timeout.
const OPEN_TIMEOUT_MS: u32 = 10_000;

/// A relay route (`/api/info`, `/ws`) as a path under the page's own directory, where the relay
/// serves it (WebTransport's path is on the UDP port and stays as `/api/info` gives it).
pub fn under_page(route: &str) -> Result<String, ConnectError> {
    let location = web_sys::window().ok_or(ConnectError::Retry("no window".into()))?.location();
    let pathname = location.pathname().map_err(|e| retry("location", e))?;
    Ok(tern::relay_client::route_under_page(&pathname, route))
}

fn retry(what: &str, e: JsValue) -> ConnectError {
    ConnectError::Retry(format!("{what}: {}", describe(&e)))
}

/// `GET /api/info` (under the page's directory), read by `relay_client::info_response`.
pub async fn fetch_info(token: &str) -> Result<RelayInfo, ConnectError> {
    let (status, body) = get_api(token, INFO_PATH).await?;
    relay_client::info_response(status, &body)
}

/// `/api/info`'s answer and when it came.
type InfoAnswer = (Instant, Result<RelayInfo, ConnectError>);

/// `/api/info` asked before the client starts ([`prefetch_info`]): the first connect takes it.
struct EarlyInfo {
    token: String,
    asked: Instant,
    /// Settles once `answer` is in.
    done: js_sys::Promise,
    answer: Rc<RefCell<Option<InfoAnswer>>>,
}

thread_local! {
    static EARLY_INFO: RefCell<Option<EarlyInfo>> = const { RefCell::new(None) };
}

/// An answer older than this is asked again: the relay may have restarted meanwhile (a page
/// that showed the list of sessions first, say).
const EARLY_INFO_FRESH: Duration = Duration::from_secs(10);

/// Asks `/api/info` (its challenge first) now, while the page still builds its terminal: the
/// first connect then waits only for what is left of it (issue 36, docs/BENCHMARKS.md "First
/// prompt"). The page calls it as soon as the wasm is in and it knows its token; with `greet`,
/// the early link's greet goes meanwhile too ([`greet_early_link`]).
pub fn prefetch_info(token: &str, greet: bool) {
    let answer = Rc::new(RefCell::new(None));
    let into = Rc::clone(&answer);
    let owned = token.to_owned();
    let done = wasm_bindgen_futures::future_to_promise(async move {
        let info = fetch_info(&owned).await;
        *into.borrow_mut() = Some((now(), info));
        Ok(JsValue::UNDEFINED)
    });
    let early = EarlyInfo { token: token.to_owned(), asked: now(), done, answer };
    EARLY_INFO.with(|e| *e.borrow_mut() = Some(early));
    if greet {
        greet_early_link(token);
    }
}

/// The prefetched `/api/info` for `token` once it is in, if one was asked and is fresh: taken
/// once. The moment returned stands for "asked": as long before now as the request took, so
/// WebTransport's patience is reckoned from the request's own round trip, not from the wait.
pub async fn take_early_info(token: &str) -> Option<(Instant, Result<RelayInfo, ConnectError>)> {
    let early = EARLY_INFO.with(|e| e.borrow_mut().take())?;
    if early.token != token {
        return None;
    }
    let _ = JsFuture::from(early.done).await;
    let (answered, info) = early.answer.borrow_mut().take()?;
    let now = now();
    if now.saturating_duration_since(answered) > EARLY_INFO_FRESH {
        return None;
    }
    Some((now - answered.saturating_duration_since(early.asked), info))
}

/// Lets the prefetched info go unread: the link's `ready` brought the relay's info instead.
pub fn forget_early_info() {
    EARLY_INFO.with(|e| e.borrow_mut().take());
}

/// A WebTransport handshake the page started early ([`keep_early_link`]), waiting for the relay's
/// info to say whether it is the right one; greeted meanwhile once the page knew its token
/// ([`greet_early_link`]).
struct EarlyLink {
    hint: String,
    transport: WebTransport,
    /// The nonce its CONNECT carried for the relay's pushed challenge, if it asked for one.
    nonce: Option<[u8; 32]>,
    /// What the page's inline script started as soon as the link was up, before the wasm was
    /// in: its control stream (`createBidirectionalStream()`) and the read of the relay's first
    /// unidirectional stream (the pushed challenge). Each takes the browser a few ms of its
    /// network process, off the path this way.
    started: StartedStreams,
    greeted: Option<EarlyGreet>,
}

/// Stream operations begun on a WebTransport before the wasm took it (each a `Promise`, or none:
/// the wasm begins it itself).
#[derive(Default)]
pub struct StartedStreams {
    /// `createBidirectionalStream()`'s promise.
    pub control: Option<js_sys::Promise>,
    /// The first `read()` of `incomingUnidirectionalStreams`.
    pub pushed: Option<js_sys::Promise>,
}

/// The greet sent on the early link before the info came, and the relay's challenge to it.
struct EarlyGreet {
    token: String,
    /// Settles once `outcome` is in.
    done: js_sys::Promise,
    outcome: Rc<RefCell<Option<Result<Greeted, ConnectError>>>>,
}

/// The verifier whose greet went on a link, and the relay's answer to it (its challenge).
#[derive(Debug)]
struct GreetSent {
    verifier: relay_client::Verifier,
    challenge: Option<Vec<u8>>,
    /// The challenge came pushed with the link (and proved the token): no greet was said.
    pushed: bool,
}

/// A link whose control stream carried the greet, with what the relay answered.
struct Greeted {
    link: RelayLink,
    sent: GreetSent,
}

thread_local! {
    static EARLY_LINK: RefCell<Option<EarlyLink>> = const { RefCell::new(None) };
}

/// Keeps the WebTransport the page started before its wasm was in (www/app.js `earlyLink`:
/// where the relay's document said, `Server-Timing: tern-link`), for the first connect: its
/// handshake runs beside the wasm's download and `/api/info` instead of after them (issue 36).
/// `hint`: where it knocked (the header's `desc`, `tern::relay_proto::LinkHint`, with the port of
/// `#wt_port=` if the page has one). The link is used only once the relay's info gives the same
/// hint (`LinkHint::describes`), and then the control stream's challenge as always: nothing but
/// a nonce goes on it before the relay proved the token. `nonce`: the one its CONNECT carried
/// (the relay pushed its challenge to it, `tern::relay_proto::proof::PUSHED_CHALLENGE_PARAM`).
pub fn keep_early_link(
    hint: String,
    transport: WebTransport,
    nonce: Option<[u8; 32]>,
    started: StartedStreams,
) {
    // Closed if no connect took it soon: a page that shows the list of sessions first must not
    // hold a silent link until the relay gives up waiting for its hello (--handshake-timeout,
    // 10 s by default from the control stream, which `greet_early_link` opens about now), which
    // the relay counts as a failed attempt of the address. The connect then makes its own link.
    let expiring = transport.clone();
    gloo_timers::callback::Timeout::new(EARLY_LINK_UNUSED_MS, move || {
        EARLY_LINK.with(|e| {
            let mut early = e.borrow_mut();
            if early.as_ref().is_some_and(|early| *early.transport == *expiring) {
                early.take();
                close(&expiring);
            }
        });
    })
    .forget();
    let early = EarlyLink { hint, transport, nonce, started, greeted: None };
    EARLY_LINK.with(|e| *e.borrow_mut() = Some(early));
}

/// How long the early link waits for the first connect to take it (see [`keep_early_link`]):
/// well inside the relay's default wait for a hello.
const EARLY_LINK_UNUSED_MS: u32 = 5_000;

/// Greets on the early link as soon as it is up, before `/api/info` confirmed it: the greet is a
/// nonce (and a named token's id), no proof, so it may go where the document said; the relay's
/// challenge is then in when the info is, and the hello leaves at once (one round trip less to
/// the first prompt, issue 36). The proof goes only after the relay proved the token on this
/// link and the info named it, as on any link. Not behind a front door (no greet there).
fn greet_early_link(token: &str) {
    if front_door(token) {
        return;
    }
    EARLY_LINK.with(|e| {
        let mut early = e.borrow_mut();
        let Some(early) = early.as_mut().filter(|early| early.greeted.is_none()) else { return };
        let outcome = Rc::new(RefCell::new(None));
        let into = Rc::clone(&outcome);
        let (transport, owned, nonce) = (early.transport.clone(), token.to_owned(), early.nonce);
        let started = std::mem::take(&mut early.started);
        let done = wasm_bindgen_futures::future_to_promise(async move {
            let greeted = greet_on(transport, &owned, nonce, started).await;
            *into.borrow_mut() = Some(greeted);
            Ok(JsValue::UNDEFINED)
        });
        early.greeted = Some(EarlyGreet { token: token.to_owned(), done, outcome });
    });
}

/// Waits for `transport`'s handshake, opens its streams and takes the relay's challenge
/// ([`challenge_on`]). Nothing bounds the wait here: the first connect does, as for any
/// handshake ([`RelayLink::webtransport`]), by closing the transport.
async fn greet_on(
    transport: WebTransport,
    token: &str,
    nonce: Option<[u8; 32]>,
    started: StartedStreams,
) -> Result<Greeted, ConnectError> {
    JsFuture::from(transport.ready()).await.map_err(|e| retry("WebTransport handshake", e))?;
    let link = RelayLink::webtransport_streams(transport.clone(), started.control).await?;
    let sent = challenge_on(&link, &transport, token, nonce, started.pushed).await?;
    Ok(Greeted { link, sent })
}

/// The relay's challenge on a WebTransport link whose streams are open: the one it pushed to
/// `nonce` (the CONNECT's) if that proves `token`, else the answer to a greet on the control
/// stream (a named token's page, or a link that asked for none). Whichever it is, the caller
/// checks it again before its hello carries a proof.
async fn challenge_on(
    link: &RelayLink,
    transport: &WebTransport,
    token: &str,
    nonce: Option<[u8; 32]>,
    pushed_read: Option<js_sys::Promise>,
) -> Result<GreetSent, ConnectError> {
    if let Some(nonce) = nonce {
        let verifier = relay_client::Verifier::new(nonce);
        let pushed = first_pushed_line(transport, pushed_read).await;
        if verifier.pushed_challenge_holds(token, pushed.as_deref()) {
            PUSHED_CHALLENGES.with(|n| n.set(n.get() + 1));
            return Ok(GreetSent { verifier, challenge: pushed, pushed: true });
        }
        return Ok(greet(link, token, verifier).await);
    }
    Ok(greet(link, token, relay_client::Verifier::new(random_or_retry()?)).await)
}

/// Greets on `link`'s control stream with `verifier`'s nonce; the relay's answer read.
async fn greet(link: &RelayLink, token: &str, verifier: relay_client::Verifier) -> GreetSent {
    link.control_out.write(&verifier.greet(token).to_line());
    let challenge = link.control_in.next_line().await;
    GreetSent { verifier, challenge, pushed: false }
}

/// The first line of the first unidirectional stream the relay opened: its pushed challenge
/// (it opens no other stream before the session is ready). `None` if the link closed first.
/// `read`: that stream's `read()` of `incomingUnidirectionalStreams`, if begun already.
async fn first_pushed_line(
    transport: &WebTransport,
    read: Option<js_sys::Promise>,
) -> Option<Vec<u8>> {
    let next = match read {
        Some(read) => JsFuture::from(read).await,
        None => {
            let streams: ReadableStreamDefaultReader =
                transport.incoming_unidirectional_streams().get_reader().unchecked_into();
            let next = JsFuture::from(streams.read()).await;
            streams.release_lock();
            next
        }
    };
    let result: ReadableStreamReadResult = next.ok()?.unchecked_into();
    if result.get_done().unwrap_or(false) {
        return None;
    }
    let stream: web_sys::ReadableStream = result.get_value().unchecked_into();
    let reader: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
    let lines = StreamLines::new(Source::WebTransport(reader), MAX_SESSION_MESSAGE);
    lines.next_line().await
}

thread_local! {
    /// Links whose challenge came pushed with the link (`stats().pushedChallenges`).
    static PUSHED_CHALLENGES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many links took the relay's pushed challenge (the rest greeted).
pub fn pushed_challenges() -> u64 {
    PUSHED_CHALLENGES.with(|n| n.get())
}

thread_local! {
    /// The page's `openWebTransport(hint)` (www/app.js): the one place a WebTransport is made,
    /// for the early link and for this file's.
    static OPENER: RefCell<Option<js_sys::Function>> = const { RefCell::new(None) };
}

/// Keeps the page's function that opens a WebTransport to where a `LinkHint`'s text says (and
/// with a query after its path).
pub fn set_webtransport_opener(open: js_sys::Function) {
    OPENER.with(|o| *o.borrow_mut() = Some(open));
}

/// A WebTransport to where `hint` (`LinkHint::encode`) says, its CONNECT asking the relay to
/// push its challenge to `nonce`, made by the page's opener.
fn open_webtransport(hint: &str, nonce: &[u8; 32]) -> Result<WebTransport, ConnectError> {
    let open = OPENER.with(|o| o.borrow().clone());
    let open = open.ok_or(ConnectError::Retry("no WebTransport opener".into()))?;
    let query = tern::relay_proto::proof::pushed_challenge_query(&ProofNonce(*nonce));
    let made = open
        .call2(&JsValue::NULL, &hint.into(), &query.into())
        .map_err(|e| retry("WebTransport", e))?;
    made.dyn_into().map_err(|e| retry("WebTransport", e))
}

/// The early link if the relay's fresh info gives its hint and the page would knock at the same
/// port (closed otherwise): taken once.
fn take_early_link(info: &RelayInfo, port: u16) -> Option<EarlyLink> {
    let early = EARLY_LINK.with(|e| e.borrow_mut().take())?;
    if LinkHint::describes(&early.hint, info, port) {
        return Some(early);
    }
    close(&early.transport);
    None
}

/// The early link, whose relay proved the page's token with the challenge it pushed there
/// (`greet_early_link`), ready for the hello before `/api/info` is in.
pub struct ProvenEarlyLink {
    link: RelayLink,
    sent: GreetSent,
}

/// The early link, taken, if the challenge the relay pushed on it proved `token` before the
/// prefetched `/api/info` answered (whichever comes first is waited for). Such a link needs no
/// info to be trusted: what answers there knows the token, as the info's own challenge would
/// show, so the hello can leave at once and the info is read beside it (one round trip or more
/// off the first prompt, issue 36). `None`, and the link stays for the usual way (the info
/// names it first), when there is no early link or info in flight, the info came first, or the
/// link's challenge was not pushed or did not prove the token.
/// A page told to take WebTransport to another port (`wt_port`) takes this way only a link to
/// that port (`LinkHint::goes_to_port`).
pub async fn take_proven_early_link(token: &str, wt_port: Option<u16>) -> Option<ProvenEarlyLink> {
    let greet_done = EARLY_LINK.with(|e| {
        let early = e.borrow();
        let early = early.as_ref().filter(|early| LinkHint::goes_to_port(&early.hint, wt_port))?;
        let greeted = early.greeted.as_ref().filter(|g| g.token == token)?;
        Some(greeted.done.clone())
    })?;
    let info_done = EARLY_INFO.with(|e| e.borrow().as_ref().map(|info| info.done.clone()))?;
    let first = js_sys::Promise::race(&js_sys::Array::of2(&greet_done, &info_done));
    let _ = JsFuture::from(first).await;
    let proven = EARLY_LINK.with(|e| {
        let early = e.borrow();
        let greeted = early.as_ref()?.greeted.as_ref()?;
        let outcome = greeted.outcome.borrow();
        Some(matches!(outcome.as_ref(), Some(Ok(g)) if g.sent.pushed))
    });
    if proven != Some(true) {
        return None;
    }
    let early = EARLY_LINK.with(|e| e.borrow_mut().take())?;
    let outcome = early.greeted?.outcome.borrow_mut().take();
    let greeted = outcome?.ok()?;
    Some(ProvenEarlyLink { link: greeted.link, sent: greeted.sent })
}

impl ProvenEarlyLink {
    /// Sends the hello `hello` builds (from the link's datagram limit) with the page's proof;
    /// the relay's answer is then due within the open timeout.
    pub fn send_hello(
        self,
        token: &str,
        hello: impl FnOnce(usize) -> Hello,
    ) -> Result<HelloSent, ConnectError> {
        crate::clock::mark_once("tern:link");
        let deadline = gloo_timers::callback::Timeout::new(OPEN_TIMEOUT_MS, self.link.closer());
        self.link.send_hello(token, self.sent, hello)?;
        Ok(HelloSent { link: self.link, _deadline: deadline })
    }
}

/// A link whose hello left: its answer is read (or the link closed) within the open timeout.
pub struct HelloSent {
    link: RelayLink,
    _deadline: gloo_timers::callback::Timeout,
}

impl HelloSent {
    /// The relay's answer: `ready`, or why not (the link closed then).
    pub async fn answer(self) -> Result<(RelayLink, Ready), ConnectError> {
        self.link.answer().await
    }
}

/// `GET /api/sessions`: the spawned sessions still running.
pub async fn fetch_sessions(token: &str) -> Result<SessionList, ConnectError> {
    let (status, body) = get_api(token, SESSIONS_PATH).await?;
    relay_client::sessions_response(status, &body)
}

/// `POST` a history request (`tern::relay_proto::history`): its answer, or what to tell the
/// person.
pub async fn history_call<Req: Message, Resp: Message>(
    token: &str,
    route: &str,
    request: &Req,
) -> Result<Resp, String> {
    let body = tern::relay_proto::encode(request);
    match call_api(token, "POST", route, Some(&body)).await {
        Ok((status, body)) => relay_client::history_response(status, &body),
        Err(ConnectError::Retry(e)) => Err(format!("the relay cannot be reached ({e})")),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether the page has no token because a trusted front door names the person
/// (`--identity-header` behind a reverse proxy that logs people in): then nothing is proved in
/// either direction, requests carry no `Authorization`, and the link is the WebSocket through
/// the proxy (WebTransport's CONNECT does not pass it). What protects such a page is the
/// proxy's TLS and login (docs/SECURITY.md, "A trusted front door").
pub fn front_door(token: &str) -> bool {
    token.is_empty()
}

/// One image of the session (`tern::relay_proto::image`): its header and bytes.
pub async fn image_call(
    token: &str,
    request: &tern::relay_proto::ImageRequest,
) -> Result<(tern::relay_proto::ImageInfo, Vec<u8>), String> {
    let body = tern::relay_proto::encode(request);
    match call_api(token, "POST", tern::relay_proto::IMAGE_PATH, Some(&body)).await {
        Ok((200, body)) => tern::relay_proto::image::split_answer(&body)
            .map(|(info, bytes)| (info, bytes.to_vec())),
        Ok((status, body)) => {
            Err(relay_client::history_response::<tern::relay_proto::ImageInfo>(status, &body)
                .err()
                .unwrap_or_else(|| format!("the relay answered HTTP {status}")))
        }
        Err(ConnectError::Retry(e)) => Err(format!("the relay cannot be reached ({e})")),
        Err(e) => Err(e.to_string()),
    }
}

/// One image of the session on a stream of `link` (`tern::relay_proto::image`): its header and
/// its bytes as the browser's own chunks, paced by the relay as a download; the page acknowledges
/// every chunk with its clock's time (the relay's pacer sizes its window from these).
pub async fn image_stream(
    link: &RelayLink,
    request: &tern::relay_proto::ImageRequest,
    on_header: Option<&js_sys::Function>,
) -> Result<(tern::relay_proto::ImageInfo, js_sys::Array), String> {
    use tern::relay_proto::{ApiError, DownloadAck, ImageInfo, StreamRequest, decode, encode_line};
    let (writer, lines) = link.open_stream().await?;
    writer.write(&encode_line(&StreamRequest::Image(request.clone())));
    let Some(head) = lines.next_line().await else {
        // Closed on this side too: a stream left half open holds one of the link's streams.
        writer.close();
        return Err("the image's stream ended at once".into());
    };
    let info: ImageInfo = match decode(&head) {
        Ok(info) => info,
        Err(_) => {
            writer.close();
            lines.cancel();
            return Err(decode::<ApiError>(&head)
                .map(|e| e.message)
                .unwrap_or_else(|e| format!("the image's answer could not be read: {e}")));
        }
    };
    if let (Some(f), Some(id)) = (on_header, info.id) {
        let _ = f.call1(&wasm_bindgen::JsValue::NULL, &wasm_bindgen::JsValue::from_f64(id as f64));
    }
    let chunks = js_sys::Array::new();
    let mut got = 0u64;
    while got < info.size {
        let Some(chunk) = lines.next_js_chunk().await else {
            writer.close();
            return Err(format!("the image's stream ended after {got} of {} bytes", info.size));
        };
        got += u64::from(chunk.length());
        chunks.push(&chunk);
        let ack = DownloadAck { acked: got, page_time_us: crate::clock::now().as_micros() };
        writer.write(&encode_line(&ack));
    }
    writer.close();
    // Done with its reading side too: a stream left half open keeps one of the link's few
    // concurrent streams, and later ones would wait for it.
    lines.cancel();
    Ok((info, chunks))
}

async fn get_api(token: &str, route: &str) -> Result<(u16, Vec<u8>), ConnectError> {
    call_api(token, "GET", route, None).await
}

/// One request to the relay's API, authorized by a challenge: the relay proves it knows the
/// token first (`POST /api/challenge`), and only then does the request leave, with the page's
/// proof (`Authorization: Tern …`), never the token. Status and body.
async fn call_api(
    token: &str,
    method: &str,
    route: &str,
    body: Option<&[u8]>,
) -> Result<(u16, Vec<u8>), ConnectError> {
    if front_door(token) {
        return fetch(route, method, None, body).await;
    }
    let mut attempt = 1;
    loop {
        let (nonce, proof) = prove(token).await?;
        let authorization = tern::relay_proto::proof::authorization(&nonce, &proof);
        let (status, answer) = fetch(route, method, Some(&authorization), body).await?;
        if attempt < relay_client::API_ATTEMPTS
            && relay_client::Verifier::challenge_was_lost(status)
        {
            attempt += 1;
            continue;
        }
        return Ok((status, answer));
    }
}

/// A challenge from the relay (`POST /api/challenge`), its proof checked, and the page's proof
/// over it: good for one request.
async fn prove(token: &str) -> Result<(ProofNonce, Proof), ConnectError> {
    let verifier = relay_client::Verifier::new(random_or_retry()?);
    let challenge = tern::relay_proto::encode(&verifier.request(token));
    let (status, answer) = fetch(CHALLENGE_PATH, "POST", None, Some(&challenge)).await?;
    verifier.http_proof(token, status, &answer)
}

/// 32 random bytes for a challenge, or a retry when the browser has none to give.
pub fn random_or_retry() -> Result<[u8; 32], ConnectError> {
    crate::js::random().map_err(|e| ConnectError::Retry(format!("no random numbers: {e}")))
}

/// One request to the relay (under the page's directory): status and body.
async fn fetch(
    route: &str,
    method: &str,
    authorization: Option<&str>,
    body: Option<&[u8]>,
) -> Result<(u16, Vec<u8>), ConnectError> {
    let window = web_sys::window().ok_or(ConnectError::Retry("no window".into()))?;
    let headers = Headers::new().map_err(|e| retry("headers", e))?;
    if let Some(authorization) = authorization {
        headers.set("Authorization", authorization).map_err(|e| retry("headers", e))?;
    }
    let init = RequestInit::new();
    init.set_method(method);
    if let Some(body) = body {
        let _ = headers.set("Content-Type", "application/json");
        init.set_body(&Uint8Array::from(body));
    }
    init.set_headers(&headers);
    init.set_cache(RequestCache::NoStore);
    let url = under_page(route)?;
    let request = Request::new_with_str_and_init(&url, &init).map_err(|e| retry("request", e))?;
    let response: Response =
        wasm_bindgen_futures::JsFuture::from(window.fetch_with_request(&request))
            .await
            .map_err(|e| retry("relay unreachable", e))?
            .unchecked_into();
    let body = match response.array_buffer() {
        Ok(p) => wasm_bindgen_futures::JsFuture::from(p).await.map_err(|e| retry("answer", e))?,
        Err(e) => return Err(retry("answer", e)),
    };
    Ok((response.status(), Uint8Array::new(&body).to_vec()))
}

/// Where a stream's bytes come from.
#[derive(Debug)]
enum Source {
    WebTransport(ReadableStreamDefaultReader),
    WebSocket(WsReader),
}

/// Lines from the receiving half of a stream, through the protocol's one line codec.
#[derive(Debug)]
pub struct StreamLines {
    source: Source,
    buf: RefCell<LineBuffer>,
    /// Chunks read so far (each one a read the browser resolved: its cost is per chunk).
    chunks: std::cell::Cell<u64>,
}

impl StreamLines {
    fn new(source: Source, limit: usize) -> Self {
        StreamLines {
            source,
            buf: RefCell::new(LineBuffer::new(limit)),
            chunks: Default::default(),
        }
    }

    /// Chunks read so far.
    pub fn chunks(&self) -> u64 {
        self.chunks.get()
    }

    /// The next line (without its newline), or `None` once the stream ended, failed or sent a
    /// line over the limit.
    pub async fn next_line(&self) -> Option<Vec<u8>> {
        loop {
            if let Some(line) = self.buf.borrow_mut().next_line().ok()? {
                return Some(line);
            }
            let chunk = match &self.source {
                Source::WebTransport(reader) => {
                    let result: ReadableStreamReadResult =
                        JsFuture::from(reader.read()).await.ok()?.unchecked_into();
                    if result.get_done().unwrap_or(false) {
                        return None;
                    }
                    result.get_value().dyn_into::<Uint8Array>().ok()?.to_vec()
                }
                Source::WebSocket(reader) => reader.next().await?,
            };
            self.chunks.set(self.chunks.get() + 1);
            self.buf.borrow_mut().push(&chunk);
        }
    }

    /// The stream's next bytes as they came, after its lines (what the line buffer holds beyond
    /// the last line read comes first): a download's content. The browser's own buffer where
    /// it can be, so a large file stays outside wasm memory. `None` once the stream ended.
    pub async fn next_js_chunk(&self) -> Option<Uint8Array> {
        let held = self.buf.borrow_mut().take_rest();
        if !held.is_empty() {
            return Some(Uint8Array::from(&held[..]));
        }
        match &self.source {
            Source::WebTransport(reader) => {
                let result: ReadableStreamReadResult =
                    JsFuture::from(reader.read()).await.ok()?.unchecked_into();
                if result.get_done().unwrap_or(false) {
                    return None;
                }
                result.get_value().dyn_into::<Uint8Array>().ok()
            }
            Source::WebSocket(reader) => reader.next().await.map(|v| Uint8Array::from(&v[..])),
        }
    }

    /// Ends a pending [`next_line`](Self::next_line) (it returns `None`).
    pub fn cancel(&self) {
        match &self.source {
            Source::WebTransport(reader) => {
                let _ = reader.cancel();
            }
            Source::WebSocket(reader) => reader.cancel(),
        }
    }
}

/// The sending half of a stream; writes never wait (see [`RelayLink::send_datagram`]).
#[derive(Debug, Clone)]
pub enum StreamWriter {
    WebTransport(WritableStreamDefaultWriter),
    WebSocket(WsWriter),
}

impl StreamWriter {
    /// Queues a copy of `bytes` (the stream keeps the chunk until it is sent).
    pub fn write(&self, bytes: &[u8]) {
        match self {
            StreamWriter::WebTransport(w) => {
                let _ = ignore_rejection(w.write_with_chunk(&Uint8Array::from(bytes)));
            }
            StreamWriter::WebSocket(w) => w.write(bytes),
        }
    }

    pub fn close(&self) {
        match self {
            StreamWriter::WebTransport(w) => {
                // The relay may have stopped reading (it has every byte): nothing to report.
                let _ = ignore_rejection(w.close());
            }
            StreamWriter::WebSocket(w) => w.close(),
        }
    }

    pub fn abort(&self) {
        match self {
            StreamWriter::WebTransport(w) => {
                let _ = ignore_rejection(w.abort());
            }
            StreamWriter::WebSocket(w) => w.abort(),
        }
    }
}

/// What carries the session: a WebTransport session, or the WebSocket fallback.
#[derive(Debug)]
enum Carrier {
    WebTransport {
        transport: WebTransport,
        datagrams_out: WritableStreamDefaultWriter,
        datagrams_in: ReadableStreamDefaultReader,
    },
    WebSocket(WsCarrier),
}

/// A live link to the relay with its control stream.
#[derive(Debug)]
pub struct RelayLink {
    carrier: Carrier,
    control_out: StreamWriter,
    control_in: StreamLines,
    /// The largest datagram this browser sends (`datagrams.maxDatagramSize` over WebTransport).
    pub max_datagram_size: usize,
}

/// The datagram size the page uses over the WebSocket: what Chromium allows over WebTransport,
/// so a session keeps one MTU whichever way it reconnects.
const WEBSOCKET_DATAGRAM: usize = 1211;

impl RelayLink {
    /// Opens a link to the relay `info` describes: WebTransport to `port`, or the WebSocket
    /// fallback when WebTransport is missing, fails, or has not opened within `patience`. Then
    /// greets, checks the relay's proof that it knows `token` (nothing else leaves before), sends
    /// the hello `hello` builds from the datagram limit with the page's proof, and reads the answer.
    pub async fn open(
        info: &RelayInfo,
        port: u16,
        token: &str,
        patience: Duration,
        hello: impl FnOnce(usize) -> Hello,
    ) -> Result<(RelayLink, Ready), ConnectError> {
        let has_webtransport = info.has_webtransport()
            && !front_door(token)
            && Reflect::has(&js_sys::global(), &"WebTransport".into()).unwrap_or(false);
        let (link, greeted) = match has_webtransport {
            true => match Self::webtransport(info, port, token, patience).await {
                Ok(opened) => opened,
                Err(e) => {
                    let why = match &e {
                        ConnectError::Retry(why) => why.clone(),
                        other => format!("{other:?}"),
                    };
                    let link = Self::websocket(token).await.map_err(|ws| match ws {
                        ConnectError::Retry(ws) => {
                            ConnectError::Retry(format!("WebTransport: {why}; WebSocket: {ws}"))
                        }
                        other => other,
                    })?;
                    (link, None)
                }
            },
            false => (Self::websocket(token).await?, None),
        };
        // The challenge and the answer must come within the open timeout whichever way the link
        // came.
        crate::clock::mark_once("tern:link");
        let closer = link.closer();
        let _deadline = gloo_timers::callback::Timeout::new(OPEN_TIMEOUT_MS, closer);
        if front_door(token) {
            // The proxy named the person on the upgrade: the hello is the first line, no proofs.
            link.write_hello(hello(link.max_datagram_size));
            return link.answer().await;
        }
        // A WebTransport has its challenge already (pushed with the link, or its greet's); the
        // WebSocket greets now.
        let sent = match greeted {
            Some(sent) => sent,
            None => {
                let verifier = relay_client::Verifier::new(random_or_retry()?);
                greet(&link, token, verifier).await
            }
        };
        link.send_hello(token, sent, hello)?;
        link.answer().await
    }

    /// Sends the hello with the page's proof over `sent`'s challenge, checked first: nothing
    /// leaves for a relay that did not prove `token` (the link is closed then).
    fn send_hello(
        &self,
        token: &str,
        sent: GreetSent,
        hello: impl FnOnce(usize) -> Hello,
    ) -> Result<(), ConnectError> {
        crate::clock::mark_once("tern:challenge");
        let proof =
            sent.verifier.control_answer(token, sent.challenge.as_deref()).inspect_err(|_| {
                self.close();
            })?;
        let mut hello = hello(self.max_datagram_size);
        hello.proof = Some(proof);
        self.write_hello(hello);
        Ok(())
    }

    /// Writes the hello, and tells the page (`Client.helloSent()`) the first time.
    fn write_hello(&self, hello: Hello) {
        self.control_out.write(&ClientMessage::Hello(hello).to_line());
        crate::first_hello::sent();
    }

    /// The relay's answer to the hello: `ready`, or why not (the link closed then).
    async fn answer(self) -> Result<(RelayLink, Ready), ConnectError> {
        let link = self;
        let answer = link.control_in.next_line().await;
        crate::clock::mark_once("tern:ready");
        match relay_client::answer(answer.as_deref()) {
            Ok(ready) => Ok((link, ready)),
            Err(e) => {
                link.close();
                Err(e)
            }
        }
    }

    /// `webtransport` or `websocket`.
    pub fn kind(&self) -> &'static str {
        match self.carrier {
            Carrier::WebTransport { .. } => "webtransport",
            Carrier::WebSocket(_) => "websocket",
        }
    }

    /// WebTransport to the relay: handshake within `patience`, then the control stream and the
    /// relay's challenge (pushed with the link, or the answer to a greet; the early link's was
    /// taken meanwhile).
    async fn webtransport(
        info: &RelayInfo,
        port: u16,
        token: &str,
        patience: Duration,
    ) -> Result<(RelayLink, Option<GreetSent>), ConnectError> {
        // A new link asks the relay to push its challenge to a fresh nonce.
        let fresh = || match LinkHint::from_info(info, port) {
            Some(hint) => {
                let nonce = random_or_retry()?;
                Ok((open_webtransport(&hint.encode(), &nonce)?, Some(nonce)))
            }
            None => Err(ConnectError::Retry("the relay's info names no WebTransport".into())),
        };
        // The early link, if the info names it. One that fails is a WebTransport that failed:
        // the WebSocket follows at once, as for a fresh one (a second handshake first would
        // double the wait where UDP is blocked, the case the fallback is for).
        let ((transport, nonce), greeted, started) = match take_early_link(info, port) {
            // Greeted for another token (the page's token never changes while it runs): not ours.
            Some(early) if early.greeted.as_ref().is_some_and(|g| g.token != token) => {
                close(&early.transport);
                (fresh()?, None, StartedStreams::default())
            }
            // Not greeted (the info came first, or none was asked early): what the page began
            // on it is its control stream and pushed challenge still.
            Some(early) => ((early.transport, early.nonce), early.greeted, early.started),
            None => (fresh()?, None, StartedStreams::default()),
        };
        // Closing the transport makes every pending step below fail; dropped (cancelled) on
        // return.
        let handshake_deadline = {
            let transport = transport.clone();
            gloo_timers::callback::Timeout::new(crate::clock::ms(patience), move || {
                close(&transport)
            })
        };
        let ready = JsFuture::from(transport.ready()).await;
        drop(handshake_deadline);
        if let Err(e) = ready {
            close(&transport);
            return Err(retry("WebTransport handshake", e));
        }
        let _deadline = {
            let transport = transport.clone();
            gloo_timers::callback::Timeout::new(OPEN_TIMEOUT_MS, move || close(&transport))
        };
        let opened = match greeted {
            Some(greeted) => {
                let _ = JsFuture::from(greeted.done).await;
                let outcome = greeted.outcome.borrow_mut().take();
                outcome
                    .unwrap_or_else(|| Err(ConnectError::Retry("the early greet was lost".into())))
                    .map(|g| (g.link, Some(g.sent)))
            }
            None => match Self::webtransport_streams(transport.clone(), started.control).await {
                Ok(link) => {
                    let sent = challenge_on(&link, &transport, token, nonce, started.pushed).await;
                    sent.map(|sent| (link, Some(sent)))
                }
                Err(e) => Err(e),
            },
        };
        if opened.is_err() {
            close(&transport);
        }
        opened
    }

    /// The datagram halves and the control stream of a ready WebTransport.
    /// `control`: its control stream's `createBidirectionalStream()`, if begun already.
    async fn webtransport_streams(
        transport: WebTransport,
        control: Option<js_sys::Promise>,
    ) -> Result<RelayLink, ConnectError> {
        let datagrams = transport.datagrams();
        let max_datagram_size = datagrams.max_datagram_size() as usize;
        let datagrams_out = datagram_writer(&datagrams).map_err(|e| retry("datagrams", e))?;
        let datagrams_in: ReadableStreamDefaultReader =
            datagrams.readable().get_reader().unchecked_into();
        let (control_out, control_in) =
            open_bidi(&transport, MAX_SESSION_MESSAGE, control)
                .await
                .map_err(|e| ConnectError::Retry(format!("control stream: {e}")))?;
        Ok(RelayLink {
            carrier: Carrier::WebTransport { transport, datagrams_out, datagrams_in },
            control_out,
            control_in,
            max_datagram_size,
        })
    }

    /// The WebSocket fallback to the page's own origin; its upgrade carries a proof over a fresh
    /// challenge (so it takes its handshake slot from the pool others cannot fill).
    async fn websocket(token: &str) -> Result<RelayLink, ConnectError> {
        let offered = match front_door(token) {
            true => None,
            false => {
                let (nonce, proof) = prove(token).await?;
                Some(tern::relay_proto::websocket::proof_subprotocol(&nonce, &proof))
            }
        };
        let carrier = WsCarrier::open(offered.as_deref()).await.map_err(ConnectError::Retry)?;
        let control_out = StreamWriter::WebSocket(carrier.control_writer());
        let control_in =
            StreamLines::new(Source::WebSocket(carrier.control_reader()), MAX_SESSION_MESSAGE);
        Ok(RelayLink {
            carrier: Carrier::WebSocket(carrier),
            control_out,
            control_in,
            max_datagram_size: WEBSOCKET_DATAGRAM,
        })
    }

    /// A callback that closes this link (for deadlines).
    fn closer(&self) -> impl FnOnce() + 'static {
        let transport = match &self.carrier {
            Carrier::WebTransport { transport, .. } => Some(transport.clone()),
            Carrier::WebSocket(_) => None,
        };
        let socket = match &self.carrier {
            Carrier::WebSocket(ws) => Some(ws.closer()),
            Carrier::WebTransport { .. } => None,
        };
        move || {
            if let Some(t) = transport {
                close(&t);
            }
            if let Some(close_socket) = socket {
                close_socket();
            }
        }
    }

    /// Sends one datagram; never waits (a full queue or a closed transport loses it, which
    /// mosh's retransmission covers).
    pub fn send_datagram(&self, bytes: &[u8]) {
        match &self.carrier {
            Carrier::WebTransport { datagrams_out, .. } => {
                let chunk = Uint8Array::from(bytes);
                let _ = ignore_rejection(datagrams_out.write_with_chunk(&chunk));
            }
            Carrier::WebSocket(ws) => ws.send_datagram(bytes),
        }
    }

    /// The next datagram from the relay (still framed), or `None` once the link closed.
    pub async fn next_datagram(&self) -> Option<Vec<u8>> {
        match &self.carrier {
            Carrier::WebTransport { datagrams_in, .. } => {
                let result: ReadableStreamReadResult =
                    JsFuture::from(datagrams_in.read()).await.ok()?.unchecked_into();
                if result.get_done().unwrap_or(false) {
                    return None;
                }
                Some(result.get_value().dyn_into::<Uint8Array>().ok()?.to_vec())
            }
            Carrier::WebSocket(ws) => ws.next_datagram().await,
        }
    }

    /// Sends one control message.
    pub fn send_control(&self, message: &ClientMessage) {
        self.control_out.write(&message.to_line());
    }

    /// The next control line, or `None` once the stream ended (or broke its line limit).
    /// Chunks of the control stream read so far.
    pub fn control_chunks(&self) -> u64 {
        self.control_in.chunks()
    }

    pub async fn next_control(&self) -> Option<Vec<u8>> {
        self.control_in.next_line().await
    }

    /// Opens a stream beside the control stream (one per paste upload). Its writer is separate
    /// from the datagram writer: nothing written here can hold up a datagram inside the page.
    pub async fn open_stream(&self) -> Result<(StreamWriter, StreamLines), String> {
        match &self.carrier {
            Carrier::WebTransport { transport, .. } => open_bidi(transport, MAX_REPLY, None).await,
            Carrier::WebSocket(ws) => {
                let (w, r) = ws.open_stream()?;
                Ok((StreamWriter::WebSocket(w), StreamLines::new(Source::WebSocket(r), MAX_REPLY)))
            }
        }
    }

    /// Closes the link; pending reads then end.
    pub fn close(&self) {
        match &self.carrier {
            Carrier::WebTransport { transport, datagrams_in, .. } => {
                close(transport);
                // Firefox (153) leaves a pending `datagrams.readable` read unsettled after
                // close(), so next_datagram() would wait forever; cancelling the reader ends it.
                let _ = ignore_rejection(datagrams_in.cancel());
            }
            Carrier::WebSocket(ws) => ws.close(),
        }
    }
}

/// `created`: the stream's `createBidirectionalStream()`, if begun already.
async fn open_bidi(
    transport: &WebTransport,
    limit: usize,
    created: Option<js_sys::Promise>,
) -> Result<(StreamWriter, StreamLines), String> {
    let created =
        created.unwrap_or_else(|| transport.create_bidirectional_stream().unchecked_into());
    let bidi = JsFuture::from(created).await.map_err(|e| describe(&e))?;
    let bidi: web_sys::WebTransportBidirectionalStream = bidi.unchecked_into();
    let writer = bidi.writable().get_writer().map_err(|e| describe(&e))?;
    let reader: ReadableStreamDefaultReader = bidi.readable().get_reader().unchecked_into();
    Ok((StreamWriter::WebTransport(writer), StreamLines::new(Source::WebTransport(reader), limit)))
}

#[wasm_bindgen]
extern "C" {
    /// A `WebTransportDatagramDuplexStream` seen through the spec's current shape: web-sys
    /// 0.3.107 binds only its `writable` getter, not `createWritable()`.
    type SpecDatagrams;

    #[wasm_bindgen(method, catch, js_name = createWritable)]
    fn create_writable(this: &SpecDatagrams) -> Result<web_sys::WritableStream, JsValue>;
}

/// The writer of outgoing datagrams, in whichever shape this browser has it. The W3C spec's
/// current shape is `datagrams.createWritable()` (a `WebTransportDatagramsWritable`, a
/// `WritableStream`); the `writable` getter is the older one, now removed from the spec. WebKit
/// (Safari 26.4+) has only `createWritable()` (its `writable` is undefined, and `getWriter()` on
/// it threw, which sent Safari to the WebSocket fallback); Chromium (156) has only `writable`;
/// Firefox has `writable` and, from 155, both (MDN browser-compat-data,
/// `api/WebTransportDatagramDuplexStream.json`). So `createWritable()` where it exists, the
/// getter otherwise, and the getter too when `createWritable()` throws.
fn datagram_writer(
    datagrams: &web_sys::WebTransportDatagramDuplexStream,
) -> Result<WritableStreamDefaultWriter, JsValue> {
    let has_create = Reflect::get(datagrams, &"createWritable".into())
        .is_ok_and(|f| f.is_instance_of::<js_sys::Function>());
    let created = has_create.then(|| {
        let spec: &SpecDatagrams = datagrams.unchecked_ref();
        spec.create_writable().and_then(|w| w.get_writer())
    });
    if let Some(Ok(writer)) = created {
        return Ok(writer);
    }
    if let Ok(writable) = JsValue::from(datagrams.writable()).dyn_into::<web_sys::WritableStream>()
    {
        return writable.get_writer();
    }
    match created {
        Some(Err(e)) => Err(e),
        _ => Err("datagrams have neither createWritable() nor a writable stream".into()),
    }
}

/// Marks a promise's rejection as handled (a write to a link that closed meanwhile, say): nothing
/// to do about it, and an unhandled one would be logged as an error. One handler for the page's
/// life: a promise may settle after the link that made it is gone, and a handler freed with the
/// link would then be called after being dropped.
pub fn ignore_rejection(promise: js_sys::Promise) -> js_sys::Promise {
    thread_local! {
        static IGNORE: &'static Closure<dyn FnMut(JsValue)> =
            Box::leak(Box::new(Closure::new(|_: JsValue| {})));
    }
    IGNORE.with(|ignore| promise.catch(ignore))
}

/// Closes a WebTransport through Reflect, so that a throw (closing one that already failed, say)
/// comes back as an Err instead of unwinding through wasm.
fn close(transport: &WebTransport) {
    if let Ok(close) = Reflect::get(transport, &"close".into()) {
        if let Some(close) = close.dyn_ref::<js_sys::Function>() {
            let _ = close.call0(transport);
        }
    }
}
