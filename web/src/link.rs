//! One WebTransport connection to tern-relay: the info request, the control stream, datagrams.
//!
//! Pure I/O: it moves bytes and JSON lines and says why something failed; what the bytes mean
//! is the core's business, what to do about a failure is the shell's (`super`).

use std::cell::RefCell;

use js_sys::{Array, JSON, Object, Reflect, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{
    Headers, ReadableStreamDefaultReader, ReadableStreamReadResult, Request, RequestCache,
    RequestInit, Response, WebTransport, WebTransportHash, WebTransportOptions,
    WritableStreamDefaultWriter,
};

/// Longest control line accepted from the relay (its own limit is 4096 bytes; `ended` and
/// `error` lines are far shorter).
const MAX_CONTROL_LINE: usize = 16 * 1024;
/// Handshake, control stream and the relay's answer to hello must all come within this; a path
/// that died mid-handshake would otherwise hang the attempt until QUIC's idle timeout.
const OPEN_TIMEOUT_MS: u32 = 10_000;

/// Why a connection attempt did not produce a live link.
#[derive(Debug)]
pub enum ConnectError {
    /// Retrying cannot help (wrong token, session gone, refused): stop and say so.
    Fatal { code: String, message: String },
    /// The relay is unreachable or went away meanwhile: try again after a pause.
    Retry(String),
}

impl ConnectError {
    fn retry(what: &str, e: JsValue) -> Self {
        ConnectError::Retry(format!("{what}: {}", describe(&e)))
    }
}

/// What `GET /api/info` says about the relay.
#[derive(Debug)]
pub struct RelayInfo {
    pub port: u16,
    pub path: String,
    pub mode: String,
    pub self_signed: bool,
    /// SHA-256 hashes of the current WebTransport certificates (raw bytes).
    pub cert_hashes: Vec<Vec<u8>>,
}

/// The relay's answer to our hello.
#[derive(Debug)]
pub struct Ready {
    pub session: String,
    pub key: Option<String>,
    pub resumed: bool,
}

/// A message on the control stream after `ready`.
#[derive(Debug)]
pub enum Control {
    Pong,
    /// The relay ended the session (`code` as in the relay's `ErrorCode`).
    Ended {
        code: String,
        message: String,
    },
    /// A refusal (only expected in answer to hello).
    Error {
        code: String,
        message: String,
    },
    Ready(Ready),
    /// A message type this page does not know; ignored.
    Other,
}

fn describe(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

fn get_str(obj: &JsValue, field: &str) -> Option<String> {
    Reflect::get(obj, &field.into()).ok()?.as_string()
}

fn get_f64(obj: &JsValue, field: &str) -> Option<f64> {
    Reflect::get(obj, &field.into()).ok()?.as_f64()
}

/// `GET /api/info` with the token. 401 and 429 are final (no retry storm against the relay's
/// rate limiter); anything network-level is worth a retry.
pub async fn fetch_info(token: &str) -> Result<RelayInfo, ConnectError> {
    let window = web_sys::window().ok_or(ConnectError::Retry("no window".into()))?;
    let headers = Headers::new().map_err(|e| ConnectError::retry("headers", e))?;
    headers.set("Authorization", &format!("Bearer {token}")).map_err(|_| ConnectError::Fatal {
        code: "bad_token".into(),
        message: "The token in the address is not valid text.".into(),
    })?;
    let init = RequestInit::new();
    init.set_method("GET");
    init.set_headers(&headers);
    init.set_cache(RequestCache::NoStore);
    let request = Request::new_with_str_and_init("/api/info", &init)
        .map_err(|e| ConnectError::retry("request", e))?;
    let response: Response = window
        .fetch_with_request(&request)
        .await
        .map_err(|e| ConnectError::retry("relay unreachable", e))?
        .unchecked_into();
    match response.status() {
        200 => {}
        401 => {
            return Err(ConnectError::Fatal {
                code: "bad_token".into(),
                message:
                    "The relay refused the access token. Open the exact URL tern-relay printed \
                          (it carries the token after #token=)."
                        .into(),
            });
        }
        429 => {
            return Err(ConnectError::Fatal {
                code: "rate_limited".into(),
                message: "The relay is refusing this address after too many wrong tokens; wait a \
                          minute, then open the URL tern-relay printed."
                    .into(),
            });
        }
        s => return Err(ConnectError::Retry(format!("relay answered HTTP {s}"))),
    }
    let json = response.json().map_err(|e| ConnectError::retry("info", e))?;
    let info = json.await.map_err(|e| ConnectError::retry("info", e))?;
    let hashes = Reflect::get(&info, &"cert_hashes".into()).unwrap_or(JsValue::UNDEFINED);
    let cert_hashes = Array::from(&hashes)
        .iter()
        .filter_map(|h| h.as_string())
        .filter_map(|h| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(h).ok()
        })
        .collect();
    Ok(RelayInfo {
        port: get_f64(&info, "port").and_then(|p| u16::try_from(p as u64).ok()).unwrap_or(0),
        path: get_str(&info, "webtransport_path").unwrap_or_else(|| "/wt".into()),
        mode: get_str(&info, "mode").unwrap_or_else(|| "spawn".into()),
        self_signed: Reflect::get(&info, &"cert_self_signed".into())
            .ok()
            .and_then(|v| v.as_bool())
            .unwrap_or(true),
        cert_hashes,
    })
}

/// A live WebTransport session with its control stream.
#[derive(Debug)]
pub struct Link {
    transport: WebTransport,
    datagrams_out: WritableStreamDefaultWriter,
    datagrams_in: ReadableStreamDefaultReader,
    control_out: WritableStreamDefaultWriter,
    control_in: ReadableStreamDefaultReader,
    /// Control bytes received but not yet a whole line.
    control_buf: RefCell<Vec<u8>>,
    /// `transport.datagrams.maxDatagramSize`: the largest datagram this browser sends.
    pub max_datagram_size: usize,
    /// Swallows the rejections of datagram writes on a closing transport (else each one is an
    /// "uncaught (in promise)" in the console). Datagrams are unreliable anyway.
    ignore: Closure<dyn FnMut(JsValue)>,
}

impl Link {
    /// Opens the WebTransport session, sends `hello` (built by `hello` from the browser's
    /// datagram limit) and waits for the relay's answer.
    pub async fn open(
        info: &RelayInfo,
        hello: impl FnOnce(usize) -> JsValue,
    ) -> Result<(Link, Ready), ConnectError> {
        let location = web_sys::window().ok_or(ConnectError::Retry("no window".into()))?.location();
        // `hostname` keeps the brackets of an IPv6 literal, as a URL needs them.
        let host = location.hostname().map_err(|e| ConnectError::retry("location", e))?;
        let url = format!("https://{host}:{}{}", info.port, info.path);
        let options = WebTransportOptions::new();
        if info.self_signed {
            let hashes: Vec<WebTransportHash> = info
                .cert_hashes
                .iter()
                .map(|h| {
                    let hash = WebTransportHash::new();
                    hash.set_algorithm("sha-256");
                    hash.set_value_u8_array(&Uint8Array::from(&h[..]));
                    hash
                })
                .collect();
            options.set_server_certificate_hashes(&hashes);
        }
        let transport = WebTransport::new_with_options(&url, &options)
            .map_err(|e| ConnectError::retry("WebTransport", e))?;
        // Closing the transport makes every pending step below fail; dropped (cancelled) on return.
        let _deadline = {
            let transport = transport.clone();
            gloo_timers::callback::Timeout::new(OPEN_TIMEOUT_MS, move || close(&transport))
        };
        if let Err(e) = transport.ready().await {
            close(&transport);
            return Err(ConnectError::retry("WebTransport handshake", e));
        }
        let datagrams = transport.datagrams();
        let max_datagram_size = datagrams.max_datagram_size() as usize;
        let datagrams_out =
            datagrams.writable().get_writer().map_err(|e| ConnectError::retry("datagrams", e))?;
        let datagrams_in: ReadableStreamDefaultReader =
            datagrams.readable().get_reader().unchecked_into();
        let bidi = match transport.create_bidirectional_stream().await {
            Ok(b) => b,
            Err(e) => {
                close(&transport);
                return Err(ConnectError::retry("control stream", e));
            }
        };
        let control_out =
            bidi.writable().get_writer().map_err(|e| ConnectError::retry("control", e))?;
        let control_in: ReadableStreamDefaultReader = bidi.readable().get_reader().unchecked_into();
        let link = Link {
            transport,
            datagrams_out,
            datagrams_in,
            control_out,
            control_in,
            control_buf: RefCell::new(Vec::new()),
            max_datagram_size,
            ignore: Closure::new(|_| {}),
        };
        let hello = hello(max_datagram_size);
        let line = JSON::stringify(&hello).map(String::from).unwrap_or_default();
        link.send_control(&line);
        let answer = link.next_control().await;
        match answer {
            Some(Control::Ready(ready)) => Ok((link, ready)),
            Some(Control::Error { code, message }) | Some(Control::Ended { code, message }) => {
                link.close();
                Err(classify_refusal(code, message))
            }
            Some(_) | None => {
                link.close();
                Err(ConnectError::Retry("the relay closed the control stream".into()))
            }
        }
    }

    /// Sends one datagram; never waits (a full queue or a closed transport loses it, which
    /// mosh's retransmission covers).
    pub fn send_datagram(&self, bytes: &[u8]) {
        let chunk = Uint8Array::from(bytes);
        let _ = self.datagrams_out.write_with_chunk(&chunk).catch(&self.ignore);
    }

    /// The next datagram from the relay (still framed), or `None` once the transport closed.
    pub async fn next_datagram(&self) -> Option<Vec<u8>> {
        let result: ReadableStreamReadResult =
            self.datagrams_in.read().await.ok()?.unchecked_into();
        if result.get_done().unwrap_or(false) {
            return None;
        }
        Some(result.get_value().dyn_into::<Uint8Array>().ok()?.to_vec())
    }

    /// Sends one JSON line on the control stream.
    pub fn send_control(&self, json: &str) {
        let mut bytes = json.as_bytes().to_vec();
        bytes.push(b'\n');
        let chunk = Uint8Array::from(&bytes[..]);
        let _ = self.control_out.write_with_chunk(&chunk).catch(&self.ignore);
    }

    /// The next control message, or `None` once the stream ended (or sent garbage).
    pub async fn next_control(&self) -> Option<Control> {
        loop {
            let line = {
                let mut buf = self.control_buf.borrow_mut();
                buf.iter().position(|&b| b == b'\n').map(|at| {
                    let mut line: Vec<u8> = buf.drain(..=at).collect();
                    line.pop();
                    line
                })
            };
            if let Some(line) = line {
                return Some(parse_control(&line));
            }
            let result: ReadableStreamReadResult =
                self.control_in.read().await.ok()?.unchecked_into();
            if result.get_done().unwrap_or(false) {
                return None;
            }
            let chunk = result.get_value().dyn_into::<Uint8Array>().ok()?.to_vec();
            let mut buf = self.control_buf.borrow_mut();
            buf.extend_from_slice(&chunk);
            if buf.len() > MAX_CONTROL_LINE {
                return None;
            }
        }
    }

    /// Opens a bidirectional stream beside the control stream (one per paste upload). Its
    /// writer is separate from the datagram writer: nothing written here can hold up a datagram.
    pub async fn open_stream(&self) -> Result<(WritableStreamDefaultWriter, StreamLines), String> {
        let bidi = self.transport.create_bidirectional_stream().await.map_err(|e| describe(&e))?;
        let bidi: web_sys::WebTransportBidirectionalStream = bidi.unchecked_into();
        let writer = bidi.writable().get_writer().map_err(|e| describe(&e))?;
        let reader: ReadableStreamDefaultReader = bidi.readable().get_reader().unchecked_into();
        Ok((writer, StreamLines { reader, buf: RefCell::new(Vec::new()) }))
    }

    /// Closes the WebTransport session; pending reads then end.
    pub fn close(&self) {
        close(&self.transport);
    }
}

/// Newline-delimited lines from the receiving half of a stream.
#[derive(Debug)]
pub struct StreamLines {
    reader: ReadableStreamDefaultReader,
    buf: RefCell<Vec<u8>>,
}

impl StreamLines {
    /// The next line (without its newline), or `None` once the stream ended, failed or sent a
    /// line longer than [`MAX_CONTROL_LINE`].
    pub async fn next_line(&self) -> Option<Vec<u8>> {
        loop {
            {
                let mut buf = self.buf.borrow_mut();
                if let Some(at) = buf.iter().position(|&b| b == b'\n') {
                    let mut line: Vec<u8> = buf.drain(..=at).collect();
                    line.pop();
                    return Some(line);
                }
                if buf.len() > MAX_CONTROL_LINE {
                    return None;
                }
            }
            let result: ReadableStreamReadResult = self.reader.read().await.ok()?.unchecked_into();
            if result.get_done().unwrap_or(false) {
                return None;
            }
            let chunk = result.get_value().dyn_into::<Uint8Array>().ok()?;
            self.buf.borrow_mut().extend_from_slice(&chunk.to_vec());
        }
    }

    /// Ends a pending [`next_line`](Self::next_line) (it returns `None`).
    pub fn cancel(&self) {
        let _ = self.reader.cancel();
    }
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

/// Maps the relay's refusal codes (relay/src/control.rs `ErrorCode`) to what the page does.
fn classify_refusal(code: String, message: String) -> ConnectError {
    match code.as_str() {
        // The relay itself is going away or timed us out: it (or its successor) may take us back.
        "shutting_down" | "hello_timeout" | "idle_timeout" | "internal" => {
            ConnectError::Retry(format!("{code}: {message}"))
        }
        _ => ConnectError::Fatal { code, message },
    }
}

fn parse_control(line: &[u8]) -> Control {
    let Ok(text) = std::str::from_utf8(line) else { return Control::Other };
    let Ok(v) = JSON::parse(text) else { return Control::Other };
    if !v.is_object() {
        return Control::Other;
    }
    let field = |f: &str| get_str(&v, f).unwrap_or_default();
    match field("type").as_str() {
        "pong" => Control::Pong,
        "ended" => Control::Ended { code: field("code"), message: field("message") },
        "error" => Control::Error { code: field("code"), message: field("message") },
        "ready" => Control::Ready(Ready {
            session: field("session"),
            key: get_str(&v, "key"),
            resumed: Reflect::get(&v, &"resumed".into()).ok().and_then(|r| r.as_bool())
                == Some(true),
        }),
        _ => Control::Other,
    }
}

/// A JS object from field/value pairs (for hello and stats).
pub fn object(fields: &[(&str, JsValue)]) -> JsValue {
    let obj = Object::new();
    for (k, v) in fields {
        let _ = Reflect::set(&obj, &(*k).into(), v);
    }
    obj.into()
}
