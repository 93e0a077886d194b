//! The control channel's messages: newline-delimited JSON on one bidirectional WebTransport stream.
//!
//! The browser opens the stream and sends one `hello`; the relay answers `ready` or `error`; the
//! stream then stays open for the life of the session (closing it ends the session) and carries
//! `ping`/`pong` and the relay's final `ended`. See docs/RELAY.md for the full description.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::config::Mode;

/// Longest control message accepted, newline included. A hello is a few hundred bytes.
pub const MAX_MESSAGE: usize = 4096;

/// Version of the relay framing of server→browser datagrams (see `framing`).
pub const FRAMING_VERSION: u8 = 1;

/// Browser → relay.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMessage {
    Hello(Hello),
    Ping,
}

/// The first message: who I am (token) and which mosh-server I want.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// The access token; may be omitted when the connect URL carried `?token=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Must equal the relay's mode.
    pub mode: Option<Mode>,
    /// Spawn mode: the id of a session to re-attach to (after a reload or a relay restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    /// Bridge mode: the mosh-server's host and port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The browser's `transport.datagrams.maxDatagramSize`, if it knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_datagram_size: Option<usize>,
}

impl std::fmt::Debug for Hello {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hello")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("mode", &self.mode)
            .field("resume", &self.resume)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("max_datagram_size", &self.max_datagram_size)
            .finish()
    }
}

/// Relay → browser.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// Datagrams now flow. `key` only in spawn mode (the relay started the server).
    Ready {
        session: String,
        mode: Mode,
        port: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// Largest framed datagram the relay sends (header included).
        max_datagram_size: usize,
        framing: u8,
        /// True when this attached to an existing mosh-server.
        resumed: bool,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    /// The session is over (mosh-server gone, idle, relay shutting down).
    Ended {
        code: ErrorCode,
        message: String,
    },
    Pong,
}

impl std::fmt::Debug for ServerMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerMessage::Ready {
                session,
                mode,
                port,
                key,
                max_datagram_size,
                framing,
                resumed,
            } => f
                .debug_struct("Ready")
                .field("session", session)
                .field("mode", mode)
                .field("port", port)
                .field("key", &key.as_ref().map(|_| "<redacted>"))
                .field("max_datagram_size", max_datagram_size)
                .field("framing", framing)
                .field("resumed", resumed)
                .finish(),
            ServerMessage::Error { code, message } => {
                f.debug_struct("Error").field("code", code).field("message", message).finish()
            }
            ServerMessage::Ended { code, message } => {
                f.debug_struct("Ended").field("code", code).field("message", message).finish()
            }
            ServerMessage::Pong => f.write_str("Pong"),
        }
    }
}

impl ServerMessage {
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        ServerMessage::Error { code, message: message.into() }
    }

    /// One line of JSON with its newline.
    pub fn to_line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).expect("server messages always serialize");
        v.push(b'\n');
        v
    }
}

/// Machine-readable error codes, stable for the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadToken,
    RateLimited,
    TooManySessions,
    TargetNotAllowed,
    SpawnFailed,
    SessionEnded,
    UnknownSession,
    WrongMode,
    BadRequest,
    MessageTooLarge,
    HelloTimeout,
    IdleTimeout,
    ShuttingDown,
    Internal,
}

/// Why a control message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("control stream closed")]
    Closed,
    #[error("control message longer than {MAX_MESSAGE} bytes")]
    TooLarge,
    #[error("malformed control message: {0}")]
    Malformed(String),
    #[error("control stream: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads newline-delimited messages with a hard bound on line length.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(inner: R) -> Self {
        Self { inner, buf: Vec::new() }
    }

    /// The next line, without its newline. Never buffers more than [`MAX_MESSAGE`] bytes.
    pub async fn next_line(&mut self) -> Result<Vec<u8>, ReadError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=pos).collect();
                line.pop();
                return Ok(line);
            }
            if self.buf.len() >= MAX_MESSAGE {
                return Err(ReadError::TooLarge);
            }
            let mut chunk = [0u8; 1024];
            let want = chunk.len().min(MAX_MESSAGE - self.buf.len());
            let n = self.inner.read(&mut chunk[..want]).await?;
            if n == 0 {
                return Err(ReadError::Closed);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub async fn next_message(&mut self) -> Result<ClientMessage, ReadError> {
        let line = self.next_line().await?;
        // serde_json's own messages may quote input ("unknown variant `...`"), which could be a
        // token put in the wrong field: keep only the error's category and position.
        serde_json::from_slice(&line).map_err(|e| {
            ReadError::Malformed(format!(
                "{:?} error at line {} column {}",
                e.classify(),
                e.line(),
                e.column()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_hides_token_in_debug() {
        let line =
            r#"{"type":"hello","token":"sekrit","mode":"spawn","resume":"00ff00ff00ff00ff"}"#;
        let m: ClientMessage = serde_json::from_str(line).unwrap();
        let ClientMessage::Hello(h) = &m else { panic!("not a hello") };
        assert_eq!(h.token.as_deref(), Some("sekrit"));
        assert_eq!(h.mode, Some(Mode::Spawn));
        assert!(!format!("{m:?}").contains("sekrit"));
    }

    #[test]
    fn ready_serializes_as_documented() {
        let r = ServerMessage::Ready {
            session: "ab".into(),
            mode: Mode::Bridge,
            port: 60001,
            key: None,
            max_datagram_size: 1211,
            framing: 1,
            resumed: false,
        };
        assert_eq!(
            String::from_utf8(r.to_line()).unwrap(),
            "{\"type\":\"ready\",\"session\":\"ab\",\"mode\":\"bridge\",\"port\":60001,\"max_datagram_size\":1211,\"framing\":1,\"resumed\":false}\n"
        );
        let e = ServerMessage::error(ErrorCode::TargetNotAllowed, "no");
        assert_eq!(
            String::from_utf8(e.to_line()).unwrap(),
            "{\"type\":\"error\",\"code\":\"target_not_allowed\",\"message\":\"no\"}\n"
        );
    }

    #[tokio::test]
    async fn malformed_error_does_not_echo_input() {
        for line in [
            &b"{\"type\":\"sekrit\"}\n"[..],
            b"{\"type\":\"hello\",\"mode\":\"sekrit\"}\n",
            b"{\"type\":\"hello\",\"port\":\"sekrit\"}\n",
            b"sekrit\n",
        ] {
            let e = LineReader::new(line).next_message().await.unwrap_err();
            assert!(matches!(e, ReadError::Malformed(_)));
            assert!(!e.to_string().contains("sekrit"), "{e}");
        }
    }

    #[tokio::test]
    async fn line_reader_bounds_lines() {
        let data = b"{\"type\":\"ping\"}\n".to_vec();
        let mut r = LineReader::new(&data[..]);
        assert_eq!(r.next_message().await.unwrap(), ClientMessage::Ping);
        assert!(matches!(r.next_message().await, Err(ReadError::Closed)));
        let big = vec![b'x'; MAX_MESSAGE + 10];
        let mut r = LineReader::new(&big[..]);
        assert!(matches!(r.next_line().await, Err(ReadError::TooLarge)));
    }
}
