//! The browser's side of a session, whichever way it came: a WebTransport connection, or the
//! WebSocket fallback carrying the same datagrams and streams (`tern::relay_proto::websocket`,
//! demultiplexed in [`websocket`]). Everything after the accept (handshake, attach, forward,
//! pastes, downloads) works on this and on the stream halves it hands out.

mod websocket;

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::oneshot;
use wtransport::error::SendDatagramError;
use wtransport::{Connection, SendStream, VarInt};

pub(crate) use websocket::WsLink;

/// The browser's half of a stream, to read.
pub(crate) type RecvHalf = Box<dyn AsyncRead + Send + Unpin>;

/// The relay's half of a stream, to write.
pub(crate) struct SendHalf(SendKind);

enum SendKind {
    Quic(SendStream),
    /// A WebSocket stream's pipe; `drained` fires once everything written has been queued as
    /// frames for the socket.
    Pipe {
        write: WriteHalf<DuplexStream>,
        drained: Option<oneshot::Receiver<()>>,
    },
}

impl std::fmt::Debug for SendHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            SendKind::Quic(_) => "SendHalf(Quic)",
            SendKind::Pipe { .. } => "SendHalf(Pipe)",
        })
    }
}

/// Most time `finish` waits for the peer (WebTransport) or the socket queue (WebSocket).
const FINISH_WAIT: Duration = Duration::from_secs(2);

impl SendHalf {
    pub fn quic(stream: SendStream) -> Self {
        SendHalf(SendKind::Quic(stream))
    }

    pub fn pipe(write: WriteHalf<DuplexStream>, drained: oneshot::Receiver<()>) -> Self {
        SendHalf(SendKind::Pipe { write, drained: Some(drained) })
    }

    /// Ends the stream and waits until what was written is on its way (WebTransport: acknowledged
    /// by the browser), so that closing the connection right after loses nothing.
    pub async fn finish(&mut self) -> std::io::Result<()> {
        match &mut self.0 {
            SendKind::Quic(s) => s.finish().await.map_err(std::io::Error::other),
            SendKind::Pipe { write, drained } => {
                write.shutdown().await?;
                if let Some(d) = drained.take() {
                    let _ = tokio::time::timeout(FINISH_WAIT, d).await;
                }
                Ok(())
            }
        }
    }
}

impl AsyncWrite for SendHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().0 {
            SendKind::Quic(s) => Pin::new(s).poll_write(cx, buf),
            SendKind::Pipe { write, .. } => Pin::new(write).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().0 {
            SendKind::Quic(s) => Pin::new(s).poll_flush(cx),
            SendKind::Pipe { write, .. } => Pin::new(write).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().0 {
            SendKind::Quic(s) => Pin::new(s).poll_shutdown(cx),
            SendKind::Pipe { write, .. } => Pin::new(write).poll_shutdown(cx),
        }
    }
}

/// The browser is gone: nothing more can be sent.
#[derive(Debug)]
pub(crate) struct Gone;

/// How a browser session reached the relay.
#[derive(Debug)]
pub(crate) enum BrowserLink {
    WebTransport(Connection),
    WebSocket(WsLink),
}

impl BrowserLink {
    /// `webtransport` or `websocket`, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            BrowserLink::WebTransport(_) => "webtransport",
            BrowserLink::WebSocket(_) => "websocket",
        }
    }

    /// The next stream the browser opens (the first is the control stream); `None` once the
    /// browser is gone.
    pub async fn accept_stream(&self) -> Option<(SendHalf, RecvHalf)> {
        match self {
            BrowserLink::WebTransport(c) => {
                let (send, recv) = c.accept_bi().await.ok()?;
                Some((SendHalf::quic(send), Box::new(recv)))
            }
            BrowserLink::WebSocket(w) => w.accept_stream().await,
        }
    }

    /// Writes `line` on a new unidirectional stream to the browser (WebTransport only: a
    /// WebSocket page greets instead). The stream ends once the line is queued.
    pub async fn push_line(&self, line: &[u8]) -> Result<(), Gone> {
        match self {
            BrowserLink::WebTransport(c) => {
                let mut stream = c.open_uni().await.map_err(|_| Gone)?.await.map_err(|_| Gone)?;
                stream.write_all(line).await.map_err(|_| Gone)?;
                // Dropping the stream finishes it; nothing waits for the browser's ack.
                Ok(())
            }
            BrowserLink::WebSocket(_) => Err(Gone),
        }
    }

    /// The next datagram from the browser; `None` once it is gone.
    pub async fn receive_datagram(&self) -> Option<Vec<u8>> {
        match self {
            BrowserLink::WebTransport(c) => c.receive_datagram().await.ok().map(|d| d.to_vec()),
            BrowserLink::WebSocket(w) => w.receive_datagram().await,
        }
    }

    /// Sends a datagram; one the link cannot take now is dropped (mosh retransmits). `Err` only
    /// when the browser is gone.
    pub fn send_datagram(&self, datagram: &[u8]) -> Result<(), Gone> {
        match self {
            BrowserLink::WebTransport(c) => match c.send_datagram(datagram) {
                Err(SendDatagramError::NotConnected) => Err(Gone),
                Err(e) => {
                    tracing::debug!("send_datagram: {e}");
                    Ok(())
                }
                Ok(()) => Ok(()),
            },
            BrowserLink::WebSocket(w) => w.send_datagram(datagram),
        }
    }

    /// The largest datagram the link carries, when it has a limit (WebSocket has none).
    pub fn max_datagram_size(&self) -> Option<usize> {
        match self {
            BrowserLink::WebTransport(c) => c.max_datagram_size(),
            BrowserLink::WebSocket(_) => None,
        }
    }

    /// The link's own round-trip estimate: QUIC's; none for the WebSocket (TCP keeps its own).
    pub fn rtt(&self) -> Option<Duration> {
        match self {
            BrowserLink::WebTransport(c) => Some(c.rtt()),
            BrowserLink::WebSocket(_) => None,
        }
    }

    /// Ends the connection; `code` 0 is a normal end.
    pub fn close(&self, code: u32, reason: &str) {
        match self {
            BrowserLink::WebTransport(c) => c.close(VarInt::from_u32(code), reason.as_bytes()),
            BrowserLink::WebSocket(w) => w.close(),
        }
    }
}
