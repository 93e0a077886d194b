//! One WebTransport connection to tern-relay: the info request, the control stream, datagrams and
//! upload streams. Pure I/O: it moves bytes and lines; what they mean is `tern::relay_client`'s
//! and `tern::relay_proto`'s business, what to do about a failure the driver's.

use std::cell::RefCell;

use js_sys::{Reflect, Uint8Array};
use tern::relay_client::{self, ConnectError};
use tern::relay_proto::control::{MAX_MESSAGE, Ready};
use tern::relay_proto::upload::MAX_REPLY;
use tern::relay_proto::{ClientMessage, Hello, INFO_PATH, LineBuffer, RelayInfo};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{
    Headers, ReadableStreamDefaultReader, ReadableStreamReadResult, Request, RequestCache,
    RequestInit, Response, WebTransport, WebTransportHash, WebTransportOptions,
    WritableStreamDefaultWriter,
};

/// Handshake, control stream and the relay's answer to hello must all come within this; a path
/// that died mid-handshake would otherwise hang the attempt until QUIC's idle timeout.
const OPEN_TIMEOUT_MS: u32 = 10_000;

/// A JavaScript exception as text.
pub fn describe(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

fn retry(what: &str, e: JsValue) -> ConnectError {
    ConnectError::Retry(format!("{what}: {}", describe(&e)))
}

/// `GET /api/info` with the token, read by `relay_client::info_response`.
pub async fn fetch_info(token: &str) -> Result<RelayInfo, ConnectError> {
    let window = web_sys::window().ok_or(ConnectError::Retry("no window".into()))?;
    let headers = Headers::new().map_err(|e| retry("headers", e))?;
    if headers.set("Authorization", &format!("Bearer {token}")).is_err() {
        // Not a valid header value: the relay would refuse it anyway.
        return relay_client::info_response(401, b"");
    }
    let init = RequestInit::new();
    init.set_method("GET");
    init.set_headers(&headers);
    init.set_cache(RequestCache::NoStore);
    let request =
        Request::new_with_str_and_init(INFO_PATH, &init).map_err(|e| retry("request", e))?;
    let response: Response =
        wasm_bindgen_futures::JsFuture::from(window.fetch_with_request(&request))
            .await
            .map_err(|e| retry("relay unreachable", e))?
            .unchecked_into();
    let body = match response.array_buffer() {
        Ok(p) => wasm_bindgen_futures::JsFuture::from(p).await.map_err(|e| retry("info", e))?,
        Err(e) => return Err(retry("info", e)),
    };
    relay_client::info_response(response.status(), &Uint8Array::new(&body).to_vec())
}

/// Lines from the receiving half of a stream, through the protocol's one line codec.
#[derive(Debug)]
pub struct StreamLines {
    reader: ReadableStreamDefaultReader,
    buf: RefCell<LineBuffer>,
}

impl StreamLines {
    fn new(reader: ReadableStreamDefaultReader, limit: usize) -> Self {
        StreamLines { reader, buf: RefCell::new(LineBuffer::new(limit)) }
    }

    /// The next line (without its newline), or `None` once the stream ended, failed or sent a
    /// line over the limit.
    pub async fn next_line(&self) -> Option<Vec<u8>> {
        loop {
            if let Some(line) = self.buf.borrow_mut().next_line().ok()? {
                return Some(line);
            }
            let result: ReadableStreamReadResult =
                wasm_bindgen_futures::JsFuture::from(self.reader.read())
                    .await
                    .ok()?
                    .unchecked_into();
            if result.get_done().unwrap_or(false) {
                return None;
            }
            let chunk = result.get_value().dyn_into::<Uint8Array>().ok()?;
            self.buf.borrow_mut().push(&chunk.to_vec());
        }
    }

    /// Ends a pending [`next_line`](Self::next_line) (it returns `None`).
    pub fn cancel(&self) {
        let _ = self.reader.cancel();
    }
}

/// The sending half of a stream; writes never wait (see [`RelayLink::send_datagram`]).
#[derive(Debug, Clone)]
pub struct StreamWriter {
    writer: WritableStreamDefaultWriter,
}

impl StreamWriter {
    /// Queues a copy of `bytes` (the stream keeps the chunk until QUIC sent it).
    pub fn write(&self, bytes: &[u8], ignore: &Closure<dyn FnMut(JsValue)>) {
        let _ = self.writer.write_with_chunk(&Uint8Array::from(bytes)).catch(ignore);
    }

    pub fn close(&self) {
        let _ = self.writer.close();
    }

    pub fn abort(&self) {
        let _ = self.writer.abort();
    }
}

/// A live WebTransport session with its control stream.
#[derive(Debug)]
pub struct RelayLink {
    transport: WebTransport,
    datagrams_out: WritableStreamDefaultWriter,
    datagrams_in: ReadableStreamDefaultReader,
    control_out: StreamWriter,
    control_in: StreamLines,
    /// `transport.datagrams.maxDatagramSize`: the largest datagram this browser sends.
    pub max_datagram_size: usize,
    /// Swallows the rejections of writes on a closing transport (else each one is an
    /// "uncaught (in promise)" in the console). Datagrams are unreliable anyway.
    ignore: Closure<dyn FnMut(JsValue)>,
}

impl RelayLink {
    /// Opens the WebTransport session to the relay `info` describes (`port` overrides its port),
    /// sends the hello `hello` builds from the browser's datagram limit, and reads the answer.
    pub async fn open(
        info: &RelayInfo,
        port: u16,
        hello: impl FnOnce(usize) -> Hello,
    ) -> Result<(RelayLink, Ready), ConnectError> {
        let location = web_sys::window().ok_or(ConnectError::Retry("no window".into()))?.location();
        // `hostname` keeps the brackets of an IPv6 literal, as a URL needs them.
        let host = location.hostname().map_err(|e| retry("location", e))?;
        let url = format!("https://{host}:{port}{}", info.webtransport_path);
        let options = WebTransportOptions::new();
        if info.cert_self_signed {
            let hashes: Vec<WebTransportHash> = info
                .cert_hash_bytes()
                .iter()
                .map(|h| {
                    let hash = WebTransportHash::new();
                    hash.set_algorithm(&info.cert_hash_algorithm);
                    hash.set_value_u8_array(&Uint8Array::from(&h[..]));
                    hash
                })
                .collect();
            options.set_server_certificate_hashes(&hashes);
        }
        let transport =
            WebTransport::new_with_options(&url, &options).map_err(|e| retry("WebTransport", e))?;
        // Closing the transport makes every pending step below fail; dropped (cancelled) on return.
        let _deadline = {
            let transport = transport.clone();
            gloo_timers::callback::Timeout::new(OPEN_TIMEOUT_MS, move || close(&transport))
        };
        let link = match Self::streams(transport.clone()).await {
            Ok(link) => link,
            Err(e) => {
                close(&transport);
                return Err(e);
            }
        };
        let hello = ClientMessage::Hello(hello(link.max_datagram_size));
        link.control_out.write(&hello.to_line(), &link.ignore);
        let answer = link.control_in.next_line().await;
        match relay_client::answer(answer.as_deref()) {
            Ok(ready) => Ok((link, ready)),
            Err(e) => {
                link.close();
                Err(e)
            }
        }
    }

    /// Waits for the handshake, then takes the datagram halves and opens the control stream.
    async fn streams(transport: WebTransport) -> Result<RelayLink, ConnectError> {
        wasm_bindgen_futures::JsFuture::from(transport.ready())
            .await
            .map_err(|e| retry("WebTransport handshake", e))?;
        let datagrams = transport.datagrams();
        let max_datagram_size = datagrams.max_datagram_size() as usize;
        let datagrams_out = datagrams.writable().get_writer().map_err(|e| retry("datagrams", e))?;
        let datagrams_in: ReadableStreamDefaultReader =
            datagrams.readable().get_reader().unchecked_into();
        let (control_out, control_in) = open_bidi(&transport, MAX_MESSAGE)
            .await
            .map_err(|e| ConnectError::Retry(format!("control stream: {e}")))?;
        Ok(RelayLink {
            transport,
            datagrams_out,
            datagrams_in,
            control_out,
            control_in,
            max_datagram_size,
            ignore: Closure::new(|_| {}),
        })
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
            wasm_bindgen_futures::JsFuture::from(self.datagrams_in.read())
                .await
                .ok()?
                .unchecked_into();
        if result.get_done().unwrap_or(false) {
            return None;
        }
        Some(result.get_value().dyn_into::<Uint8Array>().ok()?.to_vec())
    }

    /// Sends one control message.
    pub fn send_control(&self, message: &ClientMessage) {
        self.control_out.write(&message.to_line(), &self.ignore);
    }

    /// The next control line, or `None` once the stream ended (or broke its line limit).
    pub async fn next_control(&self) -> Option<Vec<u8>> {
        self.control_in.next_line().await
    }

    /// Opens a bidirectional stream beside the control stream (one per paste upload). Its
    /// writer is separate from the datagram writer: nothing written here can hold up a datagram.
    pub async fn open_stream(&self) -> Result<(StreamWriter, StreamLines), String> {
        open_bidi(&self.transport, MAX_REPLY).await
    }

    /// Closes the WebTransport session; pending reads then end.
    pub fn close(&self) {
        close(&self.transport);
    }
}

async fn open_bidi(
    transport: &WebTransport,
    limit: usize,
) -> Result<(StreamWriter, StreamLines), String> {
    let bidi = wasm_bindgen_futures::JsFuture::from(transport.create_bidirectional_stream())
        .await
        .map_err(|e| describe(&e))?;
    let bidi: web_sys::WebTransportBidirectionalStream = bidi.unchecked_into();
    let writer = bidi.writable().get_writer().map_err(|e| describe(&e))?;
    let reader: ReadableStreamDefaultReader = bidi.readable().get_reader().unchecked_into();
    Ok((StreamWriter { writer }, StreamLines::new(reader, limit)))
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
