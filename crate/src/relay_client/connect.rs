//! One connection attempt from the page's side: the info answer, the hello, the relay's answer.

use crate::relay_proto::control::Ready;
use crate::relay_proto::framing::FRAMING_VERSION;
use crate::relay_proto::line::Message;
use crate::relay_proto::{
    ErrorCode, Hello, Mode, PROTOCOL_VERSION, RelayInfo, ServerMessage, SessionList, decode,
};
use crate::wire::Key;
use std::time::Duration;

use super::status::FailCode;

/// How long WebTransport gets to open before the page falls back to the WebSocket: about a
/// second, more on a link whose `/api/info` round trip (`info_time`) says it is slow (the
/// handshake takes about two round trips), so a slow link does not fall back needlessly.
pub fn webtransport_patience(info_time: Duration) -> Duration {
    const AT_LEAST: Duration = Duration::from_secs(1);
    const AT_MOST: Duration = Duration::from_secs(5);
    (info_time * 3).clamp(AT_LEAST, AT_MOST)
}

/// Why an attempt did not produce a live link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectError {
    /// Retrying cannot help (wrong token, refused, another version): stop and say so.
    Fatal { code: FailCode, message: String },
    /// The session is over (its shell exited or it is unknown): stop, say so.
    Ended(String),
    /// The relay is unreachable or went away meanwhile: try again after a pause.
    Retry(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Fatal { message, .. }
            | ConnectError::Ended(message)
            | ConnectError::Retry(message) => f.write_str(message),
        }
    }
}

impl ConnectError {
    fn fatal(code: FailCode, message: impl Into<String>) -> Self {
        ConnectError::Fatal { code, message: message.into() }
    }
}

/// What this page connects to: the token, and in bridge mode the mosh-server it names.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    pub token: String,
    /// Bridge mode: host, port and key of a mosh-server started elsewhere (the key stays here).
    pub bridge: Option<(String, u16, String)>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("token", &"<redacted>")
            .field("bridge", &self.bridge.as_ref().map(|(h, p, _)| (h, p, "<redacted>")))
            .finish()
    }
}

impl Target {
    /// The hello for a relay in `mode`: `resume` names the session to continue (spawn mode), else
    /// `ssh_host` the relay's ssh host to start a new one on; `max_datagram_size` is the
    /// browser's datagram limit.
    pub fn hello(
        &self,
        mode: Mode,
        resume: Option<&str>,
        ssh_host: Option<&str>,
        max_datagram_size: usize,
    ) -> Hello {
        let (host, port, key_id) = match &self.bridge {
            Some((host, port, key)) => {
                let key_id = crate::relay_proto::proof::key_id(&super::address::key_text(key));
                (Some(host.clone()), Some(*port), Some(key_id))
            }
            None => (None, None, None),
        };
        Hello {
            protocol: Some(PROTOCOL_VERSION),
            // The proof comes from the relay's challenge (`Verifier::control_answer`); the page
            // never sends the token.
            proof: None,
            token: None,
            mode: Some(mode),
            resume: resume.map(str::to_string),
            host,
            port,
            key_id,
            ssh_host: if resume.is_none() { ssh_host.map(str::to_string) } else { None },
            max_datagram_size: Some(max_datagram_size),
            view: false,
        }
    }

    /// The session's mosh key and its text (the nonce store is named after it): the relay's in
    /// spawn mode, this page's own in bridge mode.
    pub fn session_key(&self, ready: &Ready) -> Result<(Key, String), ConnectError> {
        let text = match (&ready.key, &self.bridge) {
            (Some(k), _) => k.clone(),
            (None, Some((_, _, k))) => super::address::key_text(k),
            (None, None) => {
                return Err(ConnectError::fatal(
                    FailCode::BadKey,
                    "The relay sent no session key.",
                ));
            }
        };
        let key = text
            .parse()
            .map_err(|_| ConnectError::fatal(FailCode::BadKey, "The session key is malformed."))?;
        Ok((key, text))
    }
}

/// `GET /api/info`'s answer: 401 and 429 are final (no retry storm against the relay's rate
/// limiter); other statuses and network trouble are worth a retry.
pub fn info_response(status: u16, body: &[u8]) -> Result<RelayInfo, ConnectError> {
    api_response(status, body)
}

/// `GET /api/sessions`'s answer (as [`info_response`]).
pub fn sessions_response(status: u16, body: &[u8]) -> Result<SessionList, ConnectError> {
    api_response(status, body)
}

/// A history request's answer (`relay_proto::history`): the message, or what to tell the person
/// (the relay's own message for a refused pattern or an unknown session).
pub fn history_response<M: Message>(status: u16, body: &[u8]) -> Result<M, String> {
    match status {
        200 => decode(body).map_err(|e| format!("the relay's answer could not be read: {e}")),
        _ => match decode::<crate::relay_proto::ApiError>(body) {
            Ok(e) => Err(e.message),
            Err(_) => Err(format!("the relay answered HTTP {status}")),
        },
    }
}

fn api_response<M: Message>(status: u16, body: &[u8]) -> Result<M, ConnectError> {
    match status {
        200 => decode(body).map_err(|e| {
            ConnectError::fatal(
                FailCode::VersionMismatch,
                format!(
                    "The relay's description could not be read ({e}): this page is from another \
                     version of tern-relay. Reload the page."
                ),
            )
        }),
        401 => Err(ConnectError::fatal(
            FailCode::BadToken,
            "The relay refused the access token. Open the exact URL tern-relay printed (it \
             carries the token after #token=).",
        )),
        429 => Err(ConnectError::fatal(
            FailCode::RateLimited,
            "The relay is refusing this address after too many wrong tokens; wait a minute, then \
             open the URL tern-relay printed.",
        )),
        s => Err(ConnectError::Retry(format!("relay answered HTTP {s}"))),
    }
}

/// The port and key of a `MOSH CONNECT <port> <key>` line a person pasted: the line as
/// `mosh-server new` printed it, anywhere in the text (other lines, blanks around it), or just
/// `<port> <key>`. `None` when no line holds a valid port and key.
pub fn parse_mosh_connect(text: &str) -> Option<(u16, String)> {
    text.lines().find_map(|line| {
        let line = line.trim();
        let from = line
            .find("MOSH CONNECT ")
            .map_or_else(|| format!("MOSH CONNECT {line}"), |at| line[at..].to_string());
        let (port, key) = crate::wire::parse_connect_line(&from).ok()?;
        Some((port, key.to_base64()))
    })
}

/// Whether this page can use the relay `info` describes.
pub fn check_info(info: &RelayInfo, target: &Target) -> Result<(), ConnectError> {
    if info.protocol != PROTOCOL_VERSION || info.framing != FRAMING_VERSION {
        return Err(ConnectError::fatal(
            FailCode::VersionMismatch,
            format!(
                "This page is from another version of tern-relay (page protocol {PROTOCOL_VERSION}, \
                 relay {}). Reload the page.",
                info.protocol
            ),
        ));
    }
    if info.mode == Mode::Bridge && target.bridge.is_none() {
        return Err(ConnectError::fatal(
            FailCode::BridgeNeedsTarget,
            "This relay runs in bridge mode: add &host=...&port=...&key=... (from MOSH CONNECT) \
             to the address.",
        ));
    }
    Ok(())
}

/// The relay's answer to the hello (`None`: the control stream closed or sent garbage first).
pub fn answer(line: Option<&[u8]>) -> Result<Ready, ConnectError> {
    let closed = || ConnectError::Retry("the relay closed the control stream".into());
    let message: ServerMessage = decode(line.ok_or_else(closed)?)
        .map_err(|e| ConnectError::Retry(format!("the relay's answer could not be read: {e}")))?;
    match message {
        ServerMessage::Ready(ready) if ready.framing == FRAMING_VERSION => Ok(ready),
        ServerMessage::Ready(ready) => Err(ConnectError::fatal(
            FailCode::VersionMismatch,
            format!(
                "The relay frames datagrams as version {}, this page knows {FRAMING_VERSION}. \
                 Reload the page.",
                ready.framing
            ),
        )),
        ServerMessage::Error { code, message } | ServerMessage::Ended { code, message } => {
            Err(refusal(code, message))
        }
        ServerMessage::Pong
        | ServerMessage::Challenge(_)
        | ServerMessage::Moved
        | ServerMessage::Offer(_)
        | ServerMessage::Signal(_)
        | ServerMessage::Held { .. }
        | ServerMessage::Refused { .. }
        | ServerMessage::Screen { .. }
        | ServerMessage::Viewers { .. } => Err(closed()),
    }
}

pub(super) fn refusal(code: ErrorCode, message: String) -> ConnectError {
    if code.session_is_over() {
        ConnectError::Ended(format!("The session is over: {message}"))
    } else if code.is_retryable() {
        ConnectError::Retry(format!("{}: {message}", code.as_str()))
    } else {
        ConnectError::Fatal { code: FailCode::from_refusal(code), message }
    }
}

/// What a control line after `ready` means for the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlEvent {
    /// The relay is alive (a pong, or a message this page does not know).
    Alive,
    /// The session is over for good.
    SessionOver(String),
    /// This link is finished (the relay is going away, or timed us out): reconnect.
    LinkOver,
    /// Another page took the session over: stop, and offer to take it back.
    Moved,
    /// The shell sent a file or a URL to the browser (the relay is alive, too).
    Offer(crate::relay_proto::Offer),
    /// The relay refused a request this link may not make (a read-only token's typing, resize,
    /// paste, download): the link stays; the page tells the person why (`message`), so keys typed
    /// on a read-only page are not lost without a word.
    Refused(String),
    /// Server datagrams the relay held as the page asked (hidden, or a long flood), oldest first,
    /// each whole: to be handled like datagrams that came one by one (the relay is alive, too).
    Held(Vec<Vec<u8>>),
    /// A clipboard write or notification a program printed that mosh-server drops.
    Signal(crate::relay_proto::PageSignal),
    /// A viewer's link: the next bytes for its terminal (from the relay's copy of the screen).
    Screen(crate::session::ScreenUpdate),
    /// The owner's link: how many viewers watch the session now.
    Viewers(u32),
}

/// Reads one control line received after `ready`.
pub fn control_after_ready(line: &[u8]) -> ControlEvent {
    match decode::<ServerMessage>(line) {
        Ok(ServerMessage::Ended { code, message }) if code.session_is_over() => {
            ControlEvent::SessionOver(format!("The session is over: {message}"))
        }
        Ok(ServerMessage::Ended { .. } | ServerMessage::Error { .. }) => ControlEvent::LinkOver,
        Ok(ServerMessage::Moved) => ControlEvent::Moved,
        Ok(ServerMessage::Offer(offer)) => ControlEvent::Offer(offer),
        Ok(ServerMessage::Held { datagrams }) => ControlEvent::Held(datagrams),
        Ok(ServerMessage::Signal(s)) => ControlEvent::Signal(s),
        Ok(ServerMessage::Refused { message, .. }) => ControlEvent::Refused(message),
        Ok(ServerMessage::Screen { cols, rows, full, data }) => {
            ControlEvent::Screen(crate::session::ScreenUpdate { cols, rows, full, data })
        }
        Ok(ServerMessage::Viewers { count }) => ControlEvent::Viewers(count),
        Ok(ServerMessage::Pong | ServerMessage::Ready(_) | ServerMessage::Challenge(_))
        | Err(_) => ControlEvent::Alive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay_proto::{ClientMessage, encode_line};

    fn target(bridge: bool) -> Target {
        Target {
            token: "tok".into(),
            bridge: bridge.then(|| ("::1".into(), 60001, "PWSoCIVurTVBGXAj873xNg".into())),
        }
    }

    fn line(m: &ServerMessage) -> Vec<u8> {
        let mut l = encode_line(m);
        l.pop();
        l
    }

    #[test]
    fn mosh_connect_lines_are_read_as_printed() {
        let key = "PWSoCIVurTVBGXAj873xNg";
        let want = Some((60001, key.to_string()));
        assert_eq!(parse_mosh_connect(&format!("MOSH CONNECT 60001 {key}")), want);
        assert_eq!(parse_mosh_connect(&format!("\r\nMOSH CONNECT 60001 {key}\r\n")), want);
        assert_eq!(parse_mosh_connect(&format!("60001 {key}")), want);
        assert_eq!(parse_mosh_connect("MOSH CONNECT 60001 short"), None);
        assert_eq!(parse_mosh_connect(&format!("MOSH CONNECT 0 {key}")), None);
        assert_eq!(parse_mosh_connect("nonsense"), None);
    }

    #[test]
    fn hello_carries_version_target_and_resume_and_never_the_token() {
        let h = target(true).hello(Mode::Bridge, Some("ab"), Some("devbox"), 1200);
        assert_eq!(h.protocol, Some(PROTOCOL_VERSION));
        // The page proves it knows the token (the proof is added after the relay's challenge).
        assert_eq!(h.token, None);
        assert!(
            !String::from_utf8(ClientMessage::Hello(h.clone()).to_line()).unwrap().contains("tok")
        );
        assert_eq!((h.host.as_deref(), h.port), (Some("::1"), Some(60001)));
        assert_eq!(h.resume.as_deref(), Some("ab"));
        assert_eq!(h.max_datagram_size, Some(1200));
        assert!(!format!("{:?}", target(true)).contains("PWSo"));
        // A host is for a new session only: a resumed one stays where it runs.
        assert_eq!(h.ssh_host, None);
        let new = target(false).hello(Mode::Spawn, None, Some("devbox"), 1200);
        assert_eq!(new.ssh_host.as_deref(), Some("devbox"));
    }

    #[test]
    fn answers_are_classified() {
        let ready = Ready {
            session: "s".into(),
            mode: Mode::Spawn,
            port: 1,
            key: Some("PWSoCIVurTVBGXAj873xNg".into()),
            max_datagram_size: 1211,
            framing: FRAMING_VERSION,
            resumed: false,
            seq_floor: 0,
            point: None,
            view: false,
            owner: None,
            off: None,
            info: None,
        };
        let ok = answer(Some(&line(&ServerMessage::Ready(ready.clone())))).unwrap();
        assert_eq!(target(false).session_key(&ok).unwrap().1, "PWSoCIVurTVBGXAj873xNg");
        let newer = Ready { framing: 9, ..ready.clone() };
        assert!(matches!(
            answer(Some(&line(&ServerMessage::Ready(newer)))),
            Err(ConnectError::Fatal { code: FailCode::VersionMismatch, .. })
        ));
        let e = |code| answer(Some(&line(&ServerMessage::error(code, "m")))).unwrap_err();
        assert_eq!(e(ErrorCode::ShuttingDown), ConnectError::Retry("shutting_down: m".into()));
        assert_eq!(
            e(ErrorCode::SessionEnded),
            ConnectError::Ended("The session is over: m".into())
        );
        assert_eq!(
            e(ErrorCode::BadToken),
            ConnectError::Fatal { code: FailCode::BadToken, message: "m".into() }
        );
        assert!(matches!(answer(None), Err(ConnectError::Retry(_))));
        assert!(matches!(answer(Some(b"garbage")), Err(ConnectError::Retry(_))));
        let keyless = Ready { key: None, ..ready };
        assert!(target(false).session_key(&keyless).is_err());
        assert!(target(true).session_key(&keyless).is_ok(), "bridge mode brings its own key");
    }

    #[test]
    fn control_lines_after_ready() {
        let l = |m| line(&m);
        assert_eq!(control_after_ready(&l(ServerMessage::Pong)), ControlEvent::Alive);
        assert_eq!(control_after_ready(b"{\"type\":\"news\"}"), ControlEvent::Alive);
        // A read-only link's refused keys: the page is told why, the link stays.
        assert_eq!(
            control_after_ready(&l(ServerMessage::Refused {
                what: "input".into(),
                message: "read-only".into()
            })),
            ControlEvent::Refused("read-only".into())
        );
        assert_eq!(
            control_after_ready(&l(ServerMessage::Held { datagrams: vec![vec![1, 2], vec![3]] })),
            ControlEvent::Held(vec![vec![1, 2], vec![3]])
        );
        assert_eq!(
            control_after_ready(&l(ServerMessage::Ended {
                code: ErrorCode::SessionEnded,
                message: "bye".into()
            })),
            ControlEvent::SessionOver("The session is over: bye".into())
        );
        assert_eq!(
            control_after_ready(&l(ServerMessage::Ended {
                code: ErrorCode::ShuttingDown,
                message: "restart".into()
            })),
            ControlEvent::LinkOver
        );
    }

    #[test]
    fn webtransport_gets_about_a_second_more_on_slow_links() {
        assert_eq!(webtransport_patience(Duration::from_millis(3)), Duration::from_secs(1));
        assert_eq!(webtransport_patience(Duration::from_millis(600)), Duration::from_millis(1800));
        assert_eq!(webtransport_patience(Duration::from_secs(30)), Duration::from_secs(5));
    }

    #[test]
    fn info_statuses() {
        assert!(matches!(
            info_response(401, b""),
            Err(ConnectError::Fatal { code: FailCode::BadToken, .. })
        ));
        assert!(matches!(
            info_response(429, b""),
            Err(ConnectError::Fatal { code: FailCode::RateLimited, .. })
        ));
        assert!(matches!(info_response(502, b""), Err(ConnectError::Retry(_))));
        assert!(matches!(
            info_response(200, b"{\"version\":\"0.0.1\"}"),
            Err(ConnectError::Fatal { code: FailCode::VersionMismatch, .. })
        ));
    }
}
