//! The WebSocket fallback's link: one WebSocket, demultiplexed into what a WebTransport session
//! offers (datagrams, the control stream, upload streams) by `tern::relay_proto::websocket`.
//!
//! ```text
//!  socket ─▶ reader task ─ Datagram ─▶ datagram queue (bounded: full drops, as UDP would)
//!                         ─ Control  ─▶ control pipe ─▶ session's LineReader
//!                         ─ Open/Data/Fin/Reset ─▶ one pipe per stream ─▶ paste handler
//!  session writes (control, streams) ─▶ pump tasks ─▶ frame queue ─▶ writer task ─▶ socket
//!  send_datagram ─▶ frame queue (try: a full queue drops the datagram rather than wait)
//! ```
//!
//! A misbehaving page harms only its own session: frames are bounded (`MAX_FRAME`), streams are
//! counted (`MAX_STREAMS`), an unknown frame closes its socket, and a page that floods stalls only
//! its own reader.

use std::collections::HashMap;

use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tern::relay_proto::websocket::{Frame, MAX_STREAMS};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::{Gone, RecvHalf, SendHalf};

/// Datagrams waiting for the session (beyond this they are dropped, like a full UDP buffer).
const DATAGRAM_QUEUE: usize = 256;
/// Frames waiting for the socket.
const FRAME_QUEUE: usize = 256;
/// Buffer of each stream's pipes: an upload's window is far below this.
const PIPE: usize = 256 * 1024;
/// Bytes read from a stream's pipe per frame (below `MAX_FRAME` with its header).
const CHUNK: usize = 32 * 1024;

type Socket = WebSocketStream<TokioIo<Upgraded>>;

/// One WebSocket, seen as a session's link.
#[derive(Debug)]
pub(crate) struct WsLink {
    datagrams: Mutex<mpsc::Receiver<Vec<u8>>>,
    streams: Mutex<mpsc::Receiver<(SendHalf, RecvHalf)>>,
    frames: mpsc::Sender<Vec<u8>>,
    closed: CancellationToken,
}

impl WsLink {
    /// Takes over an upgraded connection (the token was checked at the upgrade), with frames
    /// bounded by `MAX_FRAME`.
    pub async fn accept(io: Upgraded) -> WsLink {
        use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
        let config = WebSocketConfig::default()
            .max_message_size(Some(tern::relay_proto::websocket::MAX_FRAME))
            .max_frame_size(Some(tern::relay_proto::websocket::MAX_FRAME));
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, Some(config)).await;
        WsLink::start(socket)
    }

    /// Starts the reader and writer tasks of an accepted WebSocket. The control stream is the
    /// first stream [`accept_stream`](Self::accept_stream) returns.
    fn start(socket: Socket) -> WsLink {
        let (sink, source) = socket.split();
        let (frames, frames_rx) = mpsc::channel(FRAME_QUEUE);
        let (datagrams_tx, datagrams) = mpsc::channel(DATAGRAM_QUEUE);
        let (streams_tx, streams) = mpsc::channel(MAX_STREAMS + 1);
        let closed = CancellationToken::new();
        tokio::spawn(write_frames(sink, frames_rx, closed.clone()));
        let mut reader = Reader {
            datagrams: datagrams_tx,
            streams: streams_tx,
            frames: frames.clone(),
            open: HashMap::new(),
            control: None,
        };
        reader.control = Some(reader.open_pipe(None));
        tokio::spawn(reader.run(source, closed.clone()));
        WsLink { datagrams: Mutex::new(datagrams), streams: Mutex::new(streams), frames, closed }
    }

    pub async fn accept_stream(&self) -> Option<(SendHalf, RecvHalf)> {
        self.streams.lock().await.recv().await
    }

    pub async fn receive_datagram(&self) -> Option<Vec<u8>> {
        self.datagrams.lock().await.recv().await
    }

    pub fn send_datagram(&self, datagram: &[u8]) -> Result<(), Gone> {
        match self.frames.try_send(Frame::Datagram(datagram).encode()) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Gone),
        }
    }

    pub fn close(&self) {
        self.closed.cancel();
    }
}

/// Sends queued frames until the link closes, then a close frame.
async fn write_frames(
    mut sink: futures_util::stream::SplitSink<Socket, Message>,
    mut frames: mpsc::Receiver<Vec<u8>>,
    closed: CancellationToken,
) {
    loop {
        let frame = tokio::select! {
            _ = closed.cancelled() => break,
            f = frames.recv() => f,
        };
        let Some(frame) = frame else { break };
        if sink.send(Message::Binary(frame.into())).await.is_err() {
            break;
        }
    }
    // Frames queued before the close (an `ended` line) still go out, briefly.
    while let Ok(frame) = frames.try_recv() {
        if sink.send(Message::Binary(frame.into())).await.is_err() {
            break;
        }
    }
    let _ = sink.close().await;
    closed.cancel();
}

/// The page's half of one stream pipe, held by the reader.
type PageWrite = WriteHalf<DuplexStream>;

/// Demultiplexes the page's frames.
struct Reader {
    datagrams: mpsc::Sender<Vec<u8>>,
    streams: mpsc::Sender<(SendHalf, RecvHalf)>,
    frames: mpsc::Sender<Vec<u8>>,
    /// Streams the page opened and has not finished.
    open: HashMap<u32, PageWrite>,
    control: Option<PageWrite>,
}

impl Reader {
    async fn run(
        mut self,
        mut source: futures_util::stream::SplitStream<Socket>,
        closed: CancellationToken,
    ) {
        loop {
            let message = tokio::select! {
                _ = closed.cancelled() => break,
                m = source.next() => m,
            };
            let bytes = match message {
                Some(Ok(Message::Binary(b))) => b,
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                // Pings are answered by the library; text has no meaning here.
                Some(Ok(_)) => continue,
            };
            match Frame::decode(&bytes) {
                Ok(frame) => {
                    if self.dispatch(frame).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::info!("websocket: {e}; closing");
                    break;
                }
            }
        }
        closed.cancel();
    }

    /// One frame from the page; `Err` ends the link.
    async fn dispatch(&mut self, frame: Frame<'_>) -> Result<(), ()> {
        match frame {
            Frame::Datagram(d) => {
                // Full: the session is behind; drop as UDP would.
                let _ = self.datagrams.try_send(d.to_vec());
            }
            Frame::Control(bytes) => {
                let control = self.control.as_mut().ok_or(())?;
                control.write_all(bytes).await.map_err(|_| ())?;
            }
            Frame::Open(id) => {
                if self.open.contains_key(&id) || self.open.len() >= MAX_STREAMS {
                    let _ = self.frames.send(Frame::Reset(id).encode()).await;
                } else {
                    let write = self.open_pipe(Some(id));
                    self.open.insert(id, write);
                }
            }
            Frame::Data(id, bytes) => {
                if let Some(w) = self.open.get_mut(&id) {
                    if w.write_all(bytes).await.is_err() {
                        // The handler stopped reading: the stream is over for it.
                        self.open.remove(&id);
                    }
                }
            }
            Frame::Fin(id) => {
                if let Some(mut w) = self.open.remove(&id) {
                    let _ = w.shutdown().await;
                }
            }
            Frame::Reset(id) => {
                self.open.remove(&id);
            }
        }
        Ok(())
    }

    /// A new stream (`None`: the control stream): its pipe, the session's halves queued for
    /// `accept_stream`, and a pump that frames what the session writes.
    fn open_pipe(&self, id: Option<u32>) -> PageWrite {
        let (page_end, relay_end) = tokio::io::duplex(PIPE);
        let (page_read, page_write) = tokio::io::split(page_end);
        let (relay_read, relay_write) = tokio::io::split(relay_end);
        let (drained_tx, drained) = oneshot::channel();
        let send = SendHalf::pipe(relay_write, drained);
        let _ = self.streams.try_send((send, Box::new(relay_read)));
        tokio::spawn(pump(page_read, id, self.frames.clone(), drained_tx));
        page_write
    }
}

/// Frames what the session writes on a stream until it finishes it (then `Fin`).
async fn pump(
    mut from: ReadHalf<DuplexStream>,
    id: Option<u32>,
    frames: mpsc::Sender<Vec<u8>>,
    drained: oneshot::Sender<()>,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let frame = match id {
            None => Frame::Control(&buf[..n]),
            Some(id) => Frame::Data(id, &buf[..n]),
        };
        if frames.send(frame.encode()).await.is_err() {
            return;
        }
    }
    if let Some(id) = id {
        let _ = frames.send(Frame::Fin(id).encode()).await;
    }
    let _ = drained.send(());
}
