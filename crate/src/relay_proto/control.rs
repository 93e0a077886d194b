//! The control stream's messages: the first bidirectional WebTransport stream of a session.
//!
//! The page opens it and sends one `hello`; the relay answers `ready` or `error`; the stream then
//! stays open for the life of the session (closing it ends the session) and carries
//! `ping`/`pong` and the relay's final `ended`. docs/RELAY.md describes each field.

use serde::{Deserialize, Serialize};

/// Longest control message accepted, newline included. A hello is a few hundred bytes.
pub const MAX_MESSAGE: usize = 4096;

/// How the relay finds the mosh-server of a browser session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The relay starts mosh-server itself and hands port and key to the page.
    Spawn,
    /// The browser names host and port of a mosh-server; the key stays in the browser.
    Bridge,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Spawn => "spawn",
            Mode::Bridge => "bridge",
        }
    }
}

/// Page → relay.
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
    /// The page's [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION); a relay of another version
    /// refuses with [`ErrorCode::VersionMismatch`]. Absent: a client that does not check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
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
            .field("protocol", &self.protocol)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("mode", &self.mode)
            .field("resume", &self.resume)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("max_datagram_size", &self.max_datagram_size)
            .finish()
    }
}

/// The relay's answer to a hello that it accepted: datagrams now flow.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Ready {
    pub session: String,
    pub mode: Mode,
    pub port: u16,
    /// Only in spawn mode (the relay started the server and knows its key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Largest framed datagram the relay sends (header included).
    pub max_datagram_size: usize,
    /// The datagram framing in use ([`FRAMING_VERSION`](super::framing::FRAMING_VERSION)).
    pub framing: u8,
    /// True when this attached to an existing mosh-server.
    pub resumed: bool,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready")
            .field("session", &self.session)
            .field("mode", &self.mode)
            .field("port", &self.port)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("max_datagram_size", &self.max_datagram_size)
            .field("framing", &self.framing)
            .field("resumed", &self.resumed)
            .finish()
    }
}

/// Relay → page.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    Ready(Ready),
    /// The hello was refused; the relay closes the connection after this.
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

impl ServerMessage {
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        ServerMessage::Error { code, message: message.into() }
    }

    /// One line of JSON with its newline.
    pub fn to_line(&self) -> Vec<u8> {
        super::encode_line(self)
    }
}

impl ClientMessage {
    /// One line of JSON with its newline.
    pub fn to_line(&self) -> Vec<u8> {
        super::encode_line(self)
    }
}

/// Machine-readable error codes of `error` and `ended`, stable for the page.
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
    /// The page and the relay speak different [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION)s.
    VersionMismatch,
    Internal,
    /// A code this build does not know (sent by a newer relay); treated as final.
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// Whether trying again later may succeed: the relay (or its successor after a restart)
    /// may take the page back. Everything else needs the person to act.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::ShuttingDown
                | ErrorCode::HelloTimeout
                | ErrorCode::IdleTimeout
                | ErrorCode::Internal
        )
    }

    /// Whether the shell is gone for good (as opposed to this connection being refused).
    pub fn session_is_over(self) -> bool {
        matches!(self, ErrorCode::SessionEnded | ErrorCode::UnknownSession)
    }

    /// The wire name, for logs and the page's status.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadToken => "bad_token",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::TooManySessions => "too_many_sessions",
            ErrorCode::TargetNotAllowed => "target_not_allowed",
            ErrorCode::SpawnFailed => "spawn_failed",
            ErrorCode::SessionEnded => "session_ended",
            ErrorCode::UnknownSession => "unknown_session",
            ErrorCode::WrongMode => "wrong_mode",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::MessageTooLarge => "message_too_large",
            ErrorCode::HelloTimeout => "hello_timeout",
            ErrorCode::IdleTimeout => "idle_timeout",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::VersionMismatch => "version_mismatch",
            ErrorCode::Internal => "internal",
            ErrorCode::Unknown => "unknown",
        }
    }
}
