//! The control stream's messages: the first bidirectional WebTransport stream of a session.
//!
//! The page opens it and sends one `hello`; the relay answers `ready` or `error`; the stream then
//! stays open for the life of the session (closing it ends the session) and carries
//! `ping`/`pong` and the relay's final `ended`. docs/RELAY.md describes each field.

use super::info::RelayInfo;
use super::json::{DecodeError, Fields, ObjectWriter};
use super::line::Message;
use super::point::CarriedPoint;
use super::proof::{Challenge, Proof, ProofNonce};

/// Longest control message accepted before the relay answers, newline included: a hello is a few
/// hundred bytes, and nothing is buffered for a browser that has not shown its token yet.
pub const MAX_MESSAGE: usize = 4096;
/// Longest control message once a session is ready (both ways): a `ready` or `seed` carries a
/// resume point, the screen included (a 300x100 screen in many colours is a few hundred kB).
pub const MAX_SESSION_MESSAGE: usize = 4 << 20;

/// Longest the relay holds a server datagram for the page ([`ClientMessage::Hold`]): Chromium
/// runs a hidden tab's timers at most once a second, so a hidden page does little more anyway.
pub const MAX_HOLD_MS: u32 = 1000;

/// How the relay finds the mosh-server of a browser session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

    pub fn parse(s: &str) -> Option<Mode> {
        [Mode::Spawn, Mode::Bridge].into_iter().find(|m| m.as_str() == s)
    }

    fn read(f: &Fields<'_>, key: &'static str) -> Result<Option<Mode>, DecodeError> {
        f.opt_str(key)?
            .map(|m| Mode::parse(&m).ok_or(DecodeError::data("unknown value", key)))
            .transpose()
    }
}

/// Page → relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMessage {
    /// The page's first line: its protocol and its share of the challenge
    /// ([`proof`](super::proof)). The relay answers [`ServerMessage::Challenge`]; the page sends
    /// its [`Hello`] (with its proof) only once the relay proved it knows the token.
    Greet {
        protocol: u32,
        nonce: ProofNonce,
        /// A named token's id ([`token_id`](super::proof::token_id)): the relay proves with that
        /// token's key. Absent: the owner's token.
        token_id: Option<String>,
    },
    Hello(Hello),
    Ping,
    /// Spawn mode, after `ready`: the page took the session over with a point of its own (a
    /// reload): the relay's copy of the session adopts it where it is newer (it may be stale after
    /// a relay restart).
    Seed {
        point: CarriedPoint,
    },
    /// What became of an [`Offer`](super::offer::Offer) (a file saved, a URL opened or not).
    Answer {
        id: String,
        answer: super::offer::OfferAnswer,
    },
    /// Hold the server's datagrams up to `ms` milliseconds (at most [`MAX_HOLD_MS`]) and send
    /// them together as [`ServerMessage::Held`]; 0: send what is held now and every datagram as
    /// it comes. A browser's cost is per datagram delivered, not per byte: the page asks this
    /// while it is hidden and during a long flood (`tern::session::DrawPacer::poll_relay_hold`).
    /// A new connection holds nothing.
    Hold {
        ms: u32,
    },
}

/// Who I am (a proof, or the token) and which mosh-server I want: the page's second line, after
/// the relay answered its [`ClientMessage::Greet`]; a native client's first.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Hello {
    /// The page's [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION); a relay of another version
    /// refuses with [`ErrorCode::VersionMismatch`]. Absent: a client that does not check.
    pub protocol: Option<u32>,
    /// After a greet: the page's proof over both nonces (the page never sends the token).
    pub proof: Option<ProofText>,
    /// A native client's access token (tern-probe, tests); may be omitted when the connect URL
    /// carried `?token=`. Pages prove instead.
    pub token: Option<String>,
    /// Must equal the relay's mode.
    pub mode: Option<Mode>,
    /// Spawn mode: the id of a session to re-attach to (after a reload or a relay restart).
    pub resume: Option<String>,
    /// Bridge mode: the mosh-server's host and port.
    pub host: Option<String>,
    pub port: Option<u16>,
    /// Bridge mode: the session key's fingerprint ([`key_id`](super::proof::key_id)), so the
    /// relay keeps sequence floors per server and key across restarts without the key.
    pub key_id: Option<String>,
    /// Spawn mode, a new session: start it on this host of the relay's `ssh_hosts` (over ssh)
    /// instead of the relay's own machine.
    pub ssh_host: Option<String>,
    /// The browser's `transport.datagrams.maxDatagramSize`, if it knows it.
    pub max_datagram_size: Option<usize>,
    /// Watch the session `resume` names, read-only ([`ServerMessage::Screen`] from the relay's
    /// copy; no key, no datagrams). A read-only token's link is always a viewer.
    pub view: bool,
}

impl std::fmt::Debug for Hello {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hello")
            .field("protocol", &self.protocol)
            .field("proof", &self.proof.is_some())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("mode", &self.mode)
            .field("resume", &self.resume)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("key_id", &self.key_id)
            .field("ssh_host", &self.ssh_host)
            .field("max_datagram_size", &self.max_datagram_size)
            .field("view", &self.view)
            .finish()
    }
}

/// The relay's answer to a hello that it accepted: datagrams now flow.
#[derive(Clone, PartialEq, Eq)]
pub struct Ready {
    pub session: String,
    pub mode: Mode,
    pub port: u16,
    /// Only in spawn mode (the relay started the server and knows its key).
    pub key: Option<String>,
    /// Largest framed datagram the relay sends (header included).
    pub max_datagram_size: usize,
    /// The datagram framing in use ([`FRAMING_VERSION`](super::framing::FRAMING_VERSION)).
    pub framing: u8,
    /// True when this attached to an existing mosh-server.
    pub resumed: bool,
    /// The lowest sequence number the relay forwards from this page: above every one it ever
    /// forwarded to this mosh-server. The page sends from here (or above); nothing below is passed
    /// on, so no (direction, sequence number) pair repeats under the key, whatever pages do.
    pub seq_floor: u64,
    /// Spawn mode, resuming: the relay's copy of the session as a resume point, for a page with
    /// nothing saved or with a point older than what another page did since. A secret, like the
    /// key.
    pub point: Option<CarriedPoint>,
    /// A viewer's link: no key, no datagrams; the screen comes as [`ServerMessage::Screen`].
    pub view: bool,
    /// A viewer's link: who started the session (a token's name, `proxy:USER`, or `owner`), for
    /// the viewer's bar.
    pub owner: Option<String>,
    /// Spawn mode: what this session lacks that a session on the relay's own machine has, and
    /// why (a session on an `--ssh-host` host without the recorder). The page says it once.
    pub off: Option<FeaturesOff>,
    /// The relay's info, as `/api/info` answers it: a page whose hello left before its info
    /// request was answered (the early link, whose relay proved the token with its pushed
    /// challenge) reads it here instead of waiting. `None` from a relay older than the field.
    pub info: Option<Box<RelayInfo>>,
}

/// Features a session lacks and why: `history`, `pictures`, `signals` (the recorder's), on
/// `host`, because `why` ("its machine is aarch64, this relay is x86_64").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeaturesOff {
    pub host: String,
    pub features: Vec<String>,
    pub why: String,
}

impl FeaturesOff {
    /// What the page says, once: "History, pictures and signals are off on devbox: WHY."
    pub fn sentence(&self) -> String {
        let mut list = match self.features.as_slice() {
            [] => "Some features".to_owned(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        };
        if let Some(first) = list.get(..1) {
            list = first.to_uppercase() + &list[1..];
        }
        let verb = if self.features.len() == 1 { "is" } else { "are" };
        let why = self.why.trim_end_matches('.');
        format!("{list} {verb} off on {}: {why}.", self.host)
    }

    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("host", &self.host).strings("features", &self.features).str("why", &self.why);
    }

    fn read(f: &Fields<'_>) -> Result<Self, DecodeError> {
        Ok(FeaturesOff {
            host: f.str("host")?,
            features: f.strings("features")?,
            why: f.str("why")?,
        })
    }
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
            .field("seq_floor", &self.seq_floor)
            .field("point", &self.point)
            .field("view", &self.view)
            .field("owner", &self.owner)
            .field("off", &self.off)
            .field("info", &self.info)
            .finish()
    }
}

/// Relay → page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMessage {
    /// The answer to a greet: the relay's nonce and its proof that it knows the token.
    Challenge(ChallengeText),
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
    /// Another page took this session over: this one is no longer forwarded. It may take the
    /// session back by connecting again (which moves it away from the other).
    Moved,
    /// Spawn mode: the shell sent something to the browser (`tern send`, `tern open`).
    Offer(super::offer::Offer),
    /// Server datagrams held as the page asked ([`ClientMessage::Hold`]), oldest first, each one
    /// whole (no framing: a stream has no size limit). On the wire each is base64, so the line
    /// stays text.
    Held {
        datagrams: Vec<Vec<u8>>,
    },
    /// A request this link may not make, refused; the link stays (a read-only token's typing,
    /// resize, paste, seed, offer answer or download). `what` names the request.
    Refused {
        what: String,
        message: String,
    },
    /// Spawn mode: a clipboard write or notification a program printed that mosh-server drops
    /// (type `clipboard` or `notify`); only to a page that may type.
    Signal(super::signal::PageSignal),
    /// A viewer's link: terminal bytes that turn what its terminal shows into the session's
    /// screen (`tern::session::ViewerFeed`). `full`: reset the terminal to `cols` x `rows` first.
    /// On the wire `data` is base64.
    Screen {
        cols: u16,
        rows: u16,
        full: bool,
        data: Vec<u8>,
    },
    /// The owner's link: how many viewers watch this session now (sent when it changes).
    Viewers {
        count: u32,
    },
}

/// A [`Proof`] inside a message: equal when the bytes are (messages compare in tests; a proof's
/// own comparison is [`Proof::matches`], in constant time).
#[derive(Debug, Clone, Copy)]
pub struct ProofText(pub Proof);

impl PartialEq for ProofText {
    fn eq(&self, other: &Self) -> bool {
        self.0.matches(&other.0)
    }
}

impl Eq for ProofText {}

/// A [`Challenge`] inside a message (see [`ProofText`]).
#[derive(Debug, Clone, Copy)]
pub struct ChallengeText(pub Challenge);

impl PartialEq for ChallengeText {
    fn eq(&self, other: &Self) -> bool {
        self.0.nonce == other.0.nonce && self.0.proof.matches(&other.0.proof)
    }
}

impl Eq for ChallengeText {}

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// The session belongs to another identity (`relay/src/session/target.rs`): only its owner
    /// and the relay's owner token may list, resume, take over or read it.
    NotYourSession,
    Internal,
    /// A code this build does not know (sent by a newer relay); treated as final.
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

    /// Every code, for tests and tables.
    pub const ALL: [ErrorCode; 17] = [
        ErrorCode::BadToken,
        ErrorCode::RateLimited,
        ErrorCode::TooManySessions,
        ErrorCode::TargetNotAllowed,
        ErrorCode::SpawnFailed,
        ErrorCode::SessionEnded,
        ErrorCode::UnknownSession,
        ErrorCode::WrongMode,
        ErrorCode::BadRequest,
        ErrorCode::MessageTooLarge,
        ErrorCode::HelloTimeout,
        ErrorCode::IdleTimeout,
        ErrorCode::ShuttingDown,
        ErrorCode::VersionMismatch,
        ErrorCode::NotYourSession,
        ErrorCode::Internal,
        ErrorCode::Unknown,
    ];

    /// The code of a wire name; a name this build does not know is [`ErrorCode::Unknown`].
    pub fn parse(s: &str) -> ErrorCode {
        Self::ALL.into_iter().find(|c| c.as_str() == s).unwrap_or(ErrorCode::Unknown)
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
            ErrorCode::NotYourSession => "not_your_session",
            ErrorCode::Internal => "internal",
            ErrorCode::Unknown => "unknown",
        }
    }
}

impl Message for ClientMessage {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        match self {
            ClientMessage::Greet { protocol, nonce, token_id } => {
                w.str("type", "greet")
                    .u64("protocol", u64::from(*protocol))
                    .str("nonce", &nonce.to_string())
                    .opt_str("token_id", token_id.as_deref());
            }
            ClientMessage::Hello(h) => {
                w.str("type", "hello")
                    .opt_u64("protocol", h.protocol.map(u64::from))
                    .opt_str("proof", h.proof.as_ref().map(|p| p.0.to_string()).as_deref())
                    .opt_str("token", h.token.as_deref())
                    .opt_str("mode", h.mode.map(Mode::as_str))
                    .opt_str("resume", h.resume.as_deref())
                    .opt_str("host", h.host.as_deref())
                    .opt_u64("port", h.port.map(u64::from))
                    .opt_str("key_id", h.key_id.as_deref())
                    .opt_str("ssh_host", h.ssh_host.as_deref())
                    .opt_u64("max_datagram_size", h.max_datagram_size.map(|m| m as u64));
                if h.view {
                    w.bool("view", true);
                }
            }
            ClientMessage::Ping => {
                w.str("type", "ping");
            }
            ClientMessage::Seed { point } => {
                w.str("type", "seed").str("point", &point.to_text());
            }
            ClientMessage::Answer { id, answer } => {
                w.str("type", "answer").str("id", id);
                answer.write_fields(w);
            }
            ClientMessage::Hold { ms } => {
                w.str("type", "hold").u64("ms", u64::from(*ms));
            }
        }
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        match f.str("type")?.as_str() {
            "greet" => {
                f.only(&["type", "protocol", "nonce", "token_id"])?;
                let nonce = f.str("nonce")?;
                let nonce =
                    nonce.parse().map_err(|_| DecodeError::data("not 64 hex digits", "nonce"))?;
                let token_id = super::proof::read_token_id(&f)?;
                Ok(ClientMessage::Greet { protocol: f.int("protocol")?, nonce, token_id })
            }
            "hello" => {
                f.only(&[
                    "type",
                    "protocol",
                    "proof",
                    "token",
                    "mode",
                    "resume",
                    "host",
                    "port",
                    "key_id",
                    "ssh_host",
                    "max_datagram_size",
                    "view",
                ])?;
                Ok(ClientMessage::Hello(Hello {
                    protocol: f.opt_int("protocol")?,
                    proof: f
                        .opt_str("proof")?
                        .map(|p| p.parse::<Proof>().map(ProofText))
                        .transpose()
                        .map_err(|_| DecodeError::data("not 64 hex digits", "proof"))?,
                    token: f.opt_str("token")?,
                    mode: Mode::read(&f, "mode")?,
                    resume: f.opt_str("resume")?,
                    host: f.opt_str("host")?,
                    port: f.opt_int("port")?,
                    key_id: f.opt_str("key_id")?,
                    ssh_host: f.opt_str("ssh_host")?,
                    max_datagram_size: f.opt_int("max_datagram_size")?,
                    view: f.opt_bool("view")?,
                }))
            }
            "ping" => {
                f.only(&["type"])?;
                Ok(ClientMessage::Ping)
            }
            "seed" => {
                f.only(&["type", "point"])?;
                Ok(ClientMessage::Seed { point: CarriedPoint::from_text(&f.str("point")?) })
            }
            "answer" => {
                f.only(&["type", "id", "answer", "message"])?;
                let answer = super::offer::OfferAnswer::read_fields(&f)?;
                Ok(ClientMessage::Answer { id: f.str("id")?, answer })
            }
            "hold" => {
                f.only(&["type", "ms"])?;
                Ok(ClientMessage::Hold { ms: f.int("ms")? })
            }
            _ => Err(DecodeError::data("unknown value", "type")),
        }
    }
}

impl Message for ServerMessage {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        match self {
            ServerMessage::Challenge(c) => {
                w.str("type", "challenge");
                c.0.write_fields(w);
            }
            ServerMessage::Ready(r) => {
                w.str("type", "ready")
                    .str("session", &r.session)
                    .str("mode", r.mode.as_str())
                    .u64("port", r.port.into())
                    .opt_str("key", r.key.as_deref())
                    .u64("max_datagram_size", r.max_datagram_size as u64)
                    .u64("framing", r.framing.into())
                    .bool("resumed", r.resumed)
                    .u64("seq_floor", r.seq_floor)
                    .opt_str("point", r.point.as_ref().map(CarriedPoint::to_text).as_deref());
                if r.view {
                    w.bool("view", true);
                }
                w.opt_str("owner", r.owner.as_deref());
                if let Some(off) = &r.off {
                    w.object("off", |w| off.write(w));
                }
                if let Some(info) = &r.info {
                    w.object("info", |w| info.write(w));
                }
            }
            ServerMessage::Error { code, message } | ServerMessage::Ended { code, message } => {
                let kind =
                    if matches!(self, ServerMessage::Error { .. }) { "error" } else { "ended" };
                w.str("type", kind).str("code", code.as_str()).str("message", message);
            }
            ServerMessage::Pong => {
                w.str("type", "pong");
            }
            ServerMessage::Moved => {
                w.str("type", "moved");
            }
            ServerMessage::Offer(o) => o.write_fields(w),
            ServerMessage::Held { datagrams } => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD;
                let encoded: Vec<String> = datagrams.iter().map(|d| b64.encode(d)).collect();
                w.str("type", "held").strings("datagrams", &encoded);
            }
            ServerMessage::Refused { what, message } => {
                w.str("type", "refused").str("what", what).str("message", message);
            }
            ServerMessage::Signal(s) => s.write_fields(w),
            ServerMessage::Screen { cols, rows, full, data } => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD;
                w.str("type", "screen")
                    .u64("cols", u64::from(*cols))
                    .u64("rows", u64::from(*rows))
                    .bool("full", *full)
                    .str("data", &b64.encode(data));
            }
            ServerMessage::Viewers { count } => {
                w.str("type", "viewers").u64("count", u64::from(*count));
            }
        }
    }

    /// Unknown fields are allowed: a newer relay may add some.
    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        let code = || Ok::<_, DecodeError>(ErrorCode::parse(&f.str("code")?));
        match f.str("type")?.as_str() {
            "challenge" => Ok(ServerMessage::Challenge(ChallengeText(Challenge::read_fields(&f)?))),
            "ready" => Ok(ServerMessage::Ready(Ready {
                session: f.str("session")?,
                mode: Mode::read(&f, "mode")?.ok_or(DecodeError::data("missing field", "mode"))?,
                port: f.int("port")?,
                key: f.opt_str("key")?,
                max_datagram_size: f.int("max_datagram_size")?,
                framing: f.int("framing")?,
                resumed: f.bool("resumed")?,
                seq_floor: f.u64("seq_floor")?,
                point: f.opt_str("point")?.as_deref().map(CarriedPoint::from_text),
                view: f.opt_bool("view")?,
                owner: f.opt_str("owner")?,
                off: f
                    .get("off")
                    .map(|v| Fields::of(v, "off").and_then(|o| FeaturesOff::read(&o)))
                    .transpose()?,
                info: f
                    .get("info")
                    .map(|v| Fields::of(v, "info").and_then(RelayInfo::read).map(Box::new))
                    .transpose()?,
            })),
            "error" => Ok(ServerMessage::Error { code: code()?, message: f.str("message")? }),
            "ended" => Ok(ServerMessage::Ended { code: code()?, message: f.str("message")? }),
            "pong" => Ok(ServerMessage::Pong),
            "refused" => {
                Ok(ServerMessage::Refused { what: f.str("what")?, message: f.str("message")? })
            }
            "moved" => Ok(ServerMessage::Moved),
            "offer" => super::offer::Offer::read_fields(&f).map(ServerMessage::Offer),
            kind @ ("clipboard" | "notify" | "link") => {
                super::signal::PageSignal::read_fields(kind, &f).map(ServerMessage::Signal)
            }
            "held" => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD;
                let datagrams = f
                    .strings("datagrams")?
                    .iter()
                    .map(|d| {
                        b64.decode(d).map_err(|_| DecodeError::data("not base64", "datagrams"))
                    })
                    .collect::<Result<_, _>>()?;
                Ok(ServerMessage::Held { datagrams })
            }
            "screen" => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD;
                let data = b64
                    .decode(f.str("data")?)
                    .map_err(|_| DecodeError::data("not base64", "data"))?;
                Ok(ServerMessage::Screen {
                    cols: f.int("cols")?,
                    rows: f.int("rows")?,
                    full: f.bool("full")?,
                    data,
                })
            }
            "viewers" => Ok(ServerMessage::Viewers { count: f.int("count")? }),
            _ => Err(DecodeError::data("unknown value", "type")),
        }
    }
}

/// The `protocol` a line announces, even when it is not a hello this build can read (a newer
/// page's hello with fields this build does not know): the relay then answers "reload" rather
/// than "bad request".
pub fn announced_protocol(line: &[u8]) -> Option<u32> {
    let value = super::json::parse(line).ok()?;
    Fields::of(&value, "message").ok()?.opt_int("protocol").ok()?
}
