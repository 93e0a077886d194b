//! The WebSocket fallback's carrier: one WebSocket to the page's own origin, framed by
//! `tern::relay_proto::websocket`, offering what a WebTransport session offers: datagrams, the
//! control stream and upload streams. For networks that pass only TCP (an `ssh -L` tunnel, a
//! reverse proxy, UDP blocked).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures_channel::{mpsc, oneshot};
use futures_util_lite::next;
use js_sys::{ArrayBuffer, Uint8Array};
use tern::relay_proto::WEBSOCKET_PATH;
use tern::relay_proto::websocket::{Frame, MAX_STREAMS};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{BinaryType, MessageEvent, WebSocket};

/// The control stream's id in the reader's table (stream ids from the page start at 1).
const CONTROL_ID: u32 = 0;
/// Bytes of a stream per DATA frame (the relay accepts frames up to `MAX_FRAME`).
const CHUNK: usize = 32 * 1024;

/// What arrives for one stream.
#[derive(Debug)]
pub enum Inbound {
    Data(Vec<u8>),
    /// The relay finished (or abandoned) the stream.
    End,
}

/// The socket and its stream table: what the carrier and every stream's writer send through.
#[derive(Debug)]
struct Multiplexer {
    socket: WebSocket,
    streams: RefCell<HashMap<u32, mpsc::UnboundedSender<Inbound>>>,
    next_stream: Cell<u32>,
    /// The datagram and control readers' senders, until the socket is done with.
    ends: RefCell<Option<ReaderEnds>>,
}

/// What feeds the datagram reader and the control stream's reader.
type ReaderEnds = (mpsc::UnboundedSender<Vec<u8>>, mpsc::UnboundedSender<Inbound>);

impl Multiplexer {
    fn send(&self, frame: Frame<'_>) {
        // A closing or closed socket drops what it is given (and the browser logs an error for
        // each): the session notices the link gone through its reads ending, and sends again
        // on the next one.
        if self.socket.ready_state() != WebSocket::OPEN {
            return;
        }
        let _ = self.socket.send_with_u8_array(&frame.encode());
    }

    /// The socket stops calling into closures that are about to be dropped (a call after that
    /// throws "closure invoked after being dropped" into the page).
    fn detach_handlers(&self) {
        self.socket.set_onmessage(None);
        self.socket.set_onclose(None);
        self.socket.set_onerror(None);
        self.socket.set_onopen(None);
    }

    /// Every reader ends: the session sees the link gone.
    fn end_readers(&self) {
        if let Some((datagrams, control)) = self.ends.borrow_mut().take() {
            datagrams.close_channel();
            control.close_channel();
        }
        for (_, tx) in self.streams.borrow_mut().drain() {
            tx.close_channel();
        }
    }

    /// Closes the socket and ends the readers now. The socket's `close` event can come much
    /// later: over a stalled TCP connection (a dead network) the closing handshake waits for
    /// the peer, and the session must not stay `live` on a link it has given up.
    fn close(&self) {
        let _ = self.socket.close();
        self.end_readers();
    }
}

/// One open WebSocket to the relay.
#[derive(Debug)]
pub struct WsCarrier {
    mux: Rc<Multiplexer>,
    datagrams: RefCell<mpsc::UnboundedReceiver<Vec<u8>>>,
    control: RefCell<Option<mpsc::UnboundedReceiver<Inbound>>>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_close: Closure<dyn FnMut(JsValue)>,
}

impl Drop for WsCarrier {
    /// The link is done with: the socket closes, and its events (a late `close`, a message
    /// still in flight) no longer reach the handlers dropped with the carrier.
    fn drop(&mut self) {
        self.mux.detach_handlers();
        self.mux.close();
    }
}

/// The sending half of a stream over the WebSocket.
#[derive(Debug, Clone)]
pub struct WsWriter {
    mux: Rc<Multiplexer>,
    /// `None`: the control stream.
    id: Option<u32>,
}

impl WsWriter {
    pub fn write(&self, bytes: &[u8]) {
        for chunk in bytes.chunks(CHUNK) {
            match self.id {
                None => self.mux.send(Frame::Control(chunk)),
                Some(id) => self.mux.send(Frame::Data(id, chunk)),
            }
        }
    }

    pub fn close(&self) {
        if let Some(id) = self.id {
            self.mux.send(Frame::Fin(id));
        }
    }

    pub fn abort(&self) {
        if let Some(id) = self.id {
            self.mux.send(Frame::Reset(id));
            self.mux.streams.borrow_mut().remove(&id);
        }
    }
}

/// The receiving half of a stream over the WebSocket.
#[derive(Debug)]
pub struct WsReader {
    mux: Rc<Multiplexer>,
    id: u32,
    inbound: RefCell<mpsc::UnboundedReceiver<Inbound>>,
}

impl WsReader {
    /// The next piece of the stream; `None` once it ended or was cancelled.
    // One reader per stream: the borrow is never contended; `cancel` goes through the sender.
    #[allow(clippy::await_holding_refcell_ref)]
    pub async fn next(&self) -> Option<Vec<u8>> {
        match next(&mut *self.inbound.borrow_mut()).await? {
            Inbound::Data(d) => Some(d),
            Inbound::End => None,
        }
    }

    /// Ends a pending [`next`](Self::next) (it returns `None`).
    pub fn cancel(&self) {
        if let Some(tx) = self.mux.streams.borrow_mut().remove(&self.id) {
            let _ = tx.unbounded_send(Inbound::End);
        }
    }
}

/// `ws://` or `wss://` to the page's own host and directory (`/ws`, or `/tern/ws` under a base
/// path), offering `tern` and `proof` (`relay_proto::websocket::proof_subprotocol`: a one-time
/// proof over a challenge the relay answered first). No token, anywhere; the control stream's
/// challenge proves both sides again. Behind a trusted front door (`proof` none) it offers
/// `tern` alone: the proxy's login names the person on the upgrade.
fn open_socket(proof: Option<&str>) -> Result<WebSocket, String> {
    let location = web_sys::window().ok_or("no window")?.location();
    let host = location.host().map_err(|_| "no host")?;
    let scheme =
        if location.protocol().map_err(|_| "no protocol")? == "https:" { "wss" } else { "ws" };
    let pathname = location.pathname().map_err(|_| "no path")?;
    let path = tern::relay_client::route_under_page(&pathname, WEBSOCKET_PATH);
    let url = format!("{scheme}://{host}{path}");
    let protocols = match proof {
        Some(proof) => {
            js_sys::Array::of2(&tern::relay_proto::websocket::SUBPROTOCOL.into(), &proof.into())
        }
        None => js_sys::Array::of1(&tern::relay_proto::websocket::SUBPROTOCOL.into()),
    };
    let socket = WebSocket::new_with_str_sequence(&url, &protocols);
    socket.map_err(|e| crate::js::describe(&e))
}

impl WsCarrier {
    /// Opens the WebSocket and waits until it is open (or failed).
    pub async fn open(proof: Option<&str>) -> Result<WsCarrier, String> {
        let socket = open_socket(proof)?;
        socket.set_binary_type(BinaryType::Arraybuffer);
        let mux = Rc::new(Multiplexer {
            socket: socket.clone(),
            streams: RefCell::new(HashMap::new()),
            next_stream: Cell::new(1),
            ends: RefCell::new(None),
        });
        let (datagrams_tx, datagrams) = mpsc::unbounded();
        let (control_tx, control) = mpsc::unbounded();
        *mux.ends.borrow_mut() = Some((datagrams_tx.clone(), control_tx.clone()));
        let (opened_tx, opened) = oneshot::channel::<bool>();
        let opened_tx = Rc::new(RefCell::new(Some(opened_tx)));

        let demux = Rc::clone(&mux);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
            let Ok(buf) = e.data().dyn_into::<ArrayBuffer>() else { return };
            let bytes = Uint8Array::new(&buf).to_vec();
            dispatch(&demux, &datagrams_tx, &control_tx, &bytes);
        });
        socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));

        let ends = Rc::clone(&mux);
        let opened_on_close = Rc::clone(&opened_tx);
        let on_close = Closure::<dyn FnMut(JsValue)>::new(move |_| {
            if let Some(tx) = opened_on_close.borrow_mut().take() {
                let _ = tx.send(false);
            }
            ends.end_readers();
        });
        socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        socket.set_onerror(Some(on_close.as_ref().unchecked_ref()));
        let on_open = Closure::once_into_js(move || {
            if let Some(tx) = opened_tx.borrow_mut().take() {
                let _ = tx.send(true);
            }
        });
        socket.set_onopen(Some(on_open.unchecked_ref()));

        if !opened.await.unwrap_or(false) {
            mux.detach_handlers();
            let _ = socket.close();
            return Err("the WebSocket did not open".into());
        }
        Ok(WsCarrier {
            mux,
            datagrams: RefCell::new(datagrams),
            control: RefCell::new(Some(control)),
            _on_message: on_message,
            _on_close: on_close,
        })
    }

    pub fn send_datagram(&self, bytes: &[u8]) {
        self.mux.send(Frame::Datagram(bytes));
    }

    /// The next framed datagram from the relay; `None` once the socket closed.
    // One reader (the driver's datagram loop): the borrow is never contended.
    #[allow(clippy::await_holding_refcell_ref)]
    pub async fn next_datagram(&self) -> Option<Vec<u8>> {
        next(&mut *self.datagrams.borrow_mut()).await
    }

    pub fn control_writer(&self) -> WsWriter {
        WsWriter { mux: Rc::clone(&self.mux), id: None }
    }

    /// The control stream's reading half (once: the control stream is read by one owner).
    pub fn control_reader(&self) -> WsReader {
        let rx = self.control.borrow_mut().take().unwrap_or_else(|| mpsc::unbounded().1);
        WsReader { mux: Rc::clone(&self.mux), id: CONTROL_ID, inbound: RefCell::new(rx) }
    }

    /// Closes the link from a deadline: the socket, and its readers at once (see `close`).
    pub fn closer(&self) -> impl FnOnce() + 'static {
        let mux = Rc::clone(&self.mux);
        move || mux.close()
    }

    /// Opens an upload stream.
    pub fn open_stream(&self) -> Result<(WsWriter, WsReader), String> {
        let mut streams = self.mux.streams.borrow_mut();
        if streams.len() >= MAX_STREAMS {
            return Err("too many streams open".into());
        }
        let id = self.mux.next_stream.get();
        self.mux.next_stream.set(id.wrapping_add(1));
        let (tx, rx) = mpsc::unbounded();
        streams.insert(id, tx);
        drop(streams);
        self.mux.send(Frame::Open(id));
        let writer = WsWriter { mux: Rc::clone(&self.mux), id: Some(id) };
        let reader = WsReader { mux: Rc::clone(&self.mux), id, inbound: RefCell::new(rx) };
        Ok((writer, reader))
    }

    /// Closes the link; every pending read ends at once.
    pub fn close(&self) {
        self.mux.close();
    }
}

/// One message from the relay, to where it belongs.
fn dispatch(
    mux: &Multiplexer,
    datagrams: &mpsc::UnboundedSender<Vec<u8>>,
    control: &mpsc::UnboundedSender<Inbound>,
    bytes: &[u8],
) {
    let Ok(frame) = Frame::decode(bytes) else {
        // A relay of another build: the session's version check says so; drop the socket.
        let _ = mux.socket.close();
        return;
    };
    match frame {
        Frame::Datagram(d) => {
            let _ = datagrams.unbounded_send(d.to_vec());
        }
        Frame::Control(b) => {
            let _ = control.unbounded_send(Inbound::Data(b.to_vec()));
        }
        Frame::Data(id, b) => {
            if let Some(tx) = mux.streams.borrow().get(&id) {
                let _ = tx.unbounded_send(Inbound::Data(b.to_vec()));
            }
        }
        Frame::Fin(id) | Frame::Reset(id) => {
            if let Some(tx) = mux.streams.borrow_mut().remove(&id) {
                let _ = tx.unbounded_send(Inbound::End);
            }
        }
        // The relay never opens streams.
        Frame::Open(_) => {}
    }
}

/// A tiny `StreamExt::next` for futures-channel's receivers, without the whole futures crate.
mod futures_util_lite {
    use std::future::poll_fn;
    use std::pin::Pin;

    use futures_core::Stream;

    pub async fn next<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
        poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
    }
}
