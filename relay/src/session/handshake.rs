//! The control stream's opening: accept it, read the greet and answer its challenge (or a native
//! client's hello), check version, credential, mode and datagram size, take a session slot, or
//! refuse.
//!
//! Every check is a small function returning `Result<_, Refusal>`; [`refuse`] is the one place
//! a refusal is sent.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::OwnedSemaphorePermit;

use super::SessionContext;
use crate::auth::{AuthOutcome, Credential, SourceKey};
use crate::control::{ClientMessage, ErrorCode, Hello, LineReader, ReadError, ServerMessage};
use crate::link::{BrowserLink, RecvHalf, SendHalf};
use crate::tokens::Who;
use tern::relay_proto::PROTOCOL_VERSION;
use tern::relay_proto::control::ChallengeText;
use tern::relay_proto::control::announced_protocol;
use tern::relay_proto::decode;
use tern::relay_proto::proof::ProofNonce;

/// How long a last line (error or ended) may take to reach the browser before the connection
/// is closed.
pub(super) const LINGER: Duration = Duration::from_secs(2);
/// Smallest datagram limit a browser may announce: 16 parts of it must hold mosh's 2048 bytes,
/// and anything this small is a broken client anyway.
const MIN_DATAGRAM: usize = 512;

/// The control stream: the relay's half to write, the browser's half to read lines from.
pub(super) struct Control {
    pub send: SendHalf,
    pub reader: LineReader<RecvHalf>,
    /// The challenge pushed to the page as its WebTransport was accepted ([`push_challenge`]),
    /// until a first line answers or ignores it.
    pub pushed: Option<PushedChallenge>,
}

/// A challenge the relay pushed under the owner's token, before the control stream opened: the
/// page's nonce from its CONNECT, and the relay's.
#[derive(Debug, Clone, Copy)]
pub(super) struct PushedChallenge {
    page: ProofNonce,
    relay: ProofNonce,
}

/// Answers a page that sent its nonce in its CONNECT (`?greet=`,
/// `tern::relay_proto::proof::pushed_challenge_query`): the relay's nonce and its proof under
/// the owner's token go on the session's first unidirectional stream now, so they arrive with
/// the link and the page's hello leaves at once (one round trip less than a greet, issue 36).
/// It proves no more than a greet would make the relay prove, to anyone; a page that answers
/// it is checked in [`admit`] as one that greeted. `None` when there is no randomness or no
/// stream to write on: the page then greets.
pub(super) async fn push_challenge(
    shared: &SessionContext,
    conn: &BrowserLink,
    page: ProofNonce,
) -> Option<PushedChallenge> {
    let (_, key) = shared.key_for(None)?;
    let relay = crate::challenge::fresh_nonce().ok()?;
    let line =
        ServerMessage::Challenge(ChallengeText(crate::challenge::answer(&key, &page, relay)))
            .to_line();
    let wait = shared.settings.handshake_timeout;
    match tokio::time::timeout(wait, conn.push_line(&line)).await {
        Ok(Ok(())) => Some(PushedChallenge { page, relay }),
        _ => None,
    }
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control").finish_non_exhaustive()
    }
}

/// Why a hello is refused: the `error` line the browser gets before the connection closes.
#[derive(Debug)]
pub(super) struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal { code, message: message.into() }
    }
}

/// Why a handshake stopped.
#[derive(Debug)]
pub(super) enum Stop {
    /// Tell the browser, then close.
    Refused(Refusal),
    /// The browser left before saying anything: nobody to tell.
    Gone,
}

impl From<Refusal> for Stop {
    fn from(r: Refusal) -> Self {
        Stop::Refused(r)
    }
}

/// A hello that passed every check, and the session slot it holds until the session ends.
#[derive(Debug)]
pub(super) struct Admitted {
    pub hello: Hello,
    pub slot: OwnedSemaphorePermit,
    /// Whose credential it proved: the owner's token or a named one.
    pub who: Who,
}

/// Why there is no control stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NoControl {
    /// The browser left.
    Gone,
    /// It held its handshake slot for `--handshake-timeout` without opening one (closed now).
    TimedOut,
}

/// The control stream, the first bidirectional stream the browser opens, within `wait`
/// (`--handshake-timeout`).
pub(super) async fn accept_control(
    conn: &BrowserLink,
    wait: Duration,
) -> Result<Control, NoControl> {
    match tokio::time::timeout(wait, conn.accept_stream()).await {
        Ok(Some((send, recv))) => Ok(Control { send, reader: LineReader::new(recv), pushed: None }),
        Ok(None) => Err(NoControl::Gone),
        Err(_) => {
            conn.close(1, "no control stream");
            Err(NoControl::TimedOut)
        }
    }
}

/// Reads the hello and runs every check on it, in this order: version, credential, mode,
/// datagram size, session slot. Nothing is done for a browser before its credential is checked.
///
/// A page greets first (`greet`: its protocol and nonce); the relay answers with its nonce and
/// its proof that it knows the token (`challenge`), and the page's hello carries the page's
/// proof. A native client's first line is its hello, with the token in it or in its URL.
pub(super) async fn admit(
    shared: &Arc<SessionContext>,
    control: &mut Control,
    pre_authed: Option<Who>,
    peer: SocketAddr,
    source: SourceKey,
) -> Result<Admitted, Stop> {
    let authed = pre_authed.is_some();
    let first = read_first(shared, &mut control.reader, authed, source).await?;
    // A pushed challenge answers one first line at most: a greet instead (a named token's page)
    // spends it too.
    let pushed = control.pushed.take();
    let (hello, who) = match first {
        ClientMessage::Greet { protocol, nonce, token_id } => {
            check_version(Some(protocol))?;
            challenge(shared, control, pre_authed, peer, source, nonce, token_id.as_deref()).await?
        }
        ClientMessage::Hello(hello) => {
            check_version(hello.protocol)?;
            let who = match (pushed, &hello.proof, pre_authed) {
                (Some(pushed), Some(_), None) => {
                    answered_push(shared, &hello, pushed, peer, source)?
                }
                (_, _, pre_authed) => authenticate(shared, &hello, pre_authed, peer, source)?,
            };
            (hello, who)
        }
        _ => {
            let first = "first message must be greet or hello";
            return Err(Refusal::new(ErrorCode::BadRequest, first).into());
        }
    };
    check_mode(shared, &hello)?;
    check_datagram_size(&hello)?;
    let slot = session_slot(shared)?;
    shared.tokens.used(&who);
    Ok(Admitted { hello, slot, who })
}

/// The relay proves it knows the token (its nonce and proof over both), then reads the page's
/// hello and checks the page's proof over the same two nonces. A named token's greet names its
/// id: the proofs are under that token's key.
async fn challenge(
    shared: &Arc<SessionContext>,
    control: &mut Control,
    pre_authed: Option<Who>,
    peer: SocketAddr,
    source: SourceKey,
    page: ProofNonce,
    token_id: Option<&str>,
) -> Result<(Hello, Who), Stop> {
    let Some((named, key)) = shared.key_for(token_id) else {
        // An id no live token has: revoked, expired, or never made. Said plainly (ids are not
        // secret), and counted as a wrong credential.
        let outcome = shared.auth.judge(Credential::Wrong, source, std::time::Instant::now());
        shared.audit.event(
            "refused",
            &crate::audit::Fields::new()
                .addr(peer.ip())
                .reason("a named token that was revoked, has expired or never was"),
        );
        refuse_unless_ok(outcome, peer)?;
        return Err(Refusal::new(
            ErrorCode::BadToken,
            "this token was revoked or has expired: ask the relay's owner for a new one",
        )
        .into());
    };
    let relay = crate::challenge::fresh_nonce()
        .map_err(|_| Refusal::new(ErrorCode::Internal, "no randomness for a challenge"))?;
    let answer = crate::challenge::answer(&key, &page, relay);
    let line = ServerMessage::Challenge(ChallengeText(answer)).to_line();
    if control.send.write_all(&line).await.is_err() {
        return Err(Stop::Gone);
    }
    let hello = match read_first(shared, &mut control.reader, pre_authed.is_some(), source).await? {
        ClientMessage::Hello(hello) => hello,
        _ => {
            let expected = "a challenge is answered by hello";
            return Err(Refusal::new(ErrorCode::BadRequest, expected).into());
        }
    };
    check_version(hello.protocol)?;
    if let Some(who) = pre_authed {
        return Ok((hello, who));
    }
    let credential = match &hello.proof {
        None => Credential::Absent,
        Some(p) if crate::challenge::page_proof_holds(&key, &page, &relay, &p.0) => {
            Credential::Right
        }
        Some(_) => Credential::Wrong,
    };
    let outcome = shared.auth.judge(credential, source, std::time::Instant::now());
    refuse_unless_ok_audited(shared, outcome, peer)?;
    Ok((hello, named))
}

/// Sends the error line, waits briefly for it to be delivered, closes the connection.
pub(super) async fn refuse(conn: &BrowserLink, send: &mut SendHalf, refusal: Refusal) {
    let Refusal { code, message } = refusal;
    let line = ServerMessage::error(code, message).to_line();
    let _ = tokio::time::timeout(LINGER, async {
        send.write_all(&line).await?;
        send.finish().await
    })
    .await;
    conn.close(1, "refused");
}

/// The next line (a greet or a hello), within `--handshake-timeout`.
async fn read_first(
    shared: &SessionContext,
    reader: &mut LineReader<RecvHalf>,
    pre_authed: bool,
    source: SourceKey,
) -> Result<ClientMessage, Stop> {
    let wait = shared.settings.handshake_timeout;
    // Counted as a failed authentication unless the connection proved its credential already:
    // a client that holds a handshake slot and never says a usable hello must not get unlimited
    // free attempts.
    let failed_attempt = || {
        if !pre_authed {
            shared.auth.judge(Credential::Wrong, source, std::time::Instant::now());
        }
    };
    let line = match tokio::time::timeout(wait, reader.next_line()).await {
        Ok(Ok(line)) => line,
        Ok(Err(e @ ReadError::TooLarge)) => {
            failed_attempt();
            return Err(Refusal::new(ErrorCode::MessageTooLarge, e.to_string()).into());
        }
        Ok(Err(_)) => return Err(Stop::Gone),
        Err(_) => {
            failed_attempt();
            let message = format!("no hello within {} s", wait.as_secs());
            return Err(Refusal::new(ErrorCode::HelloTimeout, message).into());
        }
    };
    match decode::<ClientMessage>(&line) {
        Ok(m @ (ClientMessage::Hello(_) | ClientMessage::Greet { .. })) => Ok(m),
        Ok(_) => Err(Refusal::new(ErrorCode::BadRequest, "first message must be hello").into()),
        Err(e) => {
            // A page of another version may send a hello this relay cannot parse (a new
            // field): if it says which version it speaks, the useful answer is "reload".
            check_version(announced_protocol(&line))?;
            failed_attempt();
            Err(Refusal::new(ErrorCode::BadRequest, ReadError::Malformed(e).to_string()).into())
        }
    }
}

/// A page that says it speaks another protocol version is from another relay build (a cached
/// page after an upgrade): it cannot work here, and only a reload fixes it. Checked before the
/// token, which such a page may not even send where this relay looks.
fn check_version(protocol: Option<u32>) -> Result<(), Refusal> {
    match protocol {
        Some(v) if v != PROTOCOL_VERSION => {
            tracing::info!(
                page = v,
                relay = PROTOCOL_VERSION,
                "hello from another protocol version"
            );
            Err(Refusal::new(
                ErrorCode::VersionMismatch,
                "this page is from another tern-relay version; reload the page",
            ))
        }
        _ => Ok(()),
    }
}

/// A hello answering the pushed challenge: the page's proof over its nonce and the relay's,
/// under the owner's token (judged as a greet's hello is).
fn answered_push(
    shared: &SessionContext,
    hello: &Hello,
    pushed: PushedChallenge,
    peer: SocketAddr,
    source: SourceKey,
) -> Result<Who, Refusal> {
    let (who, key) = shared
        .key_for(None)
        .ok_or_else(|| Refusal::new(ErrorCode::Internal, "no owner's token"))?;
    let credential = match &hello.proof {
        Some(p) if crate::challenge::page_proof_holds(&key, &pushed.page, &pushed.relay, &p.0) => {
            Credential::Right
        }
        _ => Credential::Wrong,
    };
    let outcome = shared.auth.judge(credential, source, std::time::Instant::now());
    refuse_unless_ok_audited(shared, outcome, peer)?;
    Ok(who)
}

/// A native client's hello token, unless the connect URL's token was checked already.
fn authenticate(
    shared: &SessionContext,
    hello: &Hello,
    pre_authed: Option<Who>,
    peer: SocketAddr,
    source: SourceKey,
) -> Result<Who, Refusal> {
    if let Some(who) = pre_authed {
        return Ok(who);
    }
    let (credential, who) = shared.check_plain(hello.token.as_deref());
    let outcome = shared.auth.judge(credential, source, std::time::Instant::now());
    refuse_unless_ok_audited(shared, outcome, peer)?;
    who.ok_or_else(|| Refusal::new(ErrorCode::BadToken, "missing or wrong token"))
}

/// [`refuse_unless_ok`], with a wrong credential in the audit trail.
fn refuse_unless_ok_audited(
    shared: &SessionContext,
    outcome: AuthOutcome,
    peer: SocketAddr,
) -> Result<(), Refusal> {
    let refused = refuse_unless_ok(outcome, peer);
    if let Err(r) = &refused {
        shared
            .audit
            .event("refused", &crate::audit::Fields::new().addr(peer.ip()).reason(&r.message));
    }
    refused
}

/// The refusal a limiter's verdict calls for.
fn refuse_unless_ok(outcome: AuthOutcome, peer: SocketAddr) -> Result<(), Refusal> {
    match outcome {
        AuthOutcome::Ok => Ok(()),
        AuthOutcome::BadToken => {
            tracing::info!(%peer, "hello with a missing or wrong credential");
            Err(Refusal::new(ErrorCode::BadToken, "missing or wrong token"))
        }
        AuthOutcome::RateLimited(wait) => Err(Refusal::new(
            ErrorCode::RateLimited,
            format!("too many failed attempts; retry in {} s", wait.as_secs() + 1),
        )),
    }
}

fn check_mode(shared: &SessionContext, hello: &Hello) -> Result<(), Refusal> {
    let mode = shared.settings.mode;
    match hello.mode {
        Some(m) if m != mode => Err(Refusal::new(
            ErrorCode::WrongMode,
            format!("this relay runs in {} mode", mode.as_str()),
        )),
        _ => Ok(()),
    }
}

fn check_datagram_size(hello: &Hello) -> Result<(), Refusal> {
    match hello.max_datagram_size {
        Some(m) if m < MIN_DATAGRAM => Err(Refusal::new(
            ErrorCode::BadRequest,
            format!("max_datagram_size below {MIN_DATAGRAM} cannot carry mosh"),
        )),
        _ => Ok(()),
    }
}

/// One of `--max-sessions` slots, held for the life of the session.
fn session_slot(shared: &SessionContext) -> Result<OwnedSemaphorePermit, Refusal> {
    Arc::clone(&shared.sessions).try_acquire_owned().map_err(|_| {
        Refusal::new(
            ErrorCode::TooManySessions,
            format!("{} browser sessions already open", shared.settings.max_sessions),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_another_announced_version_is_a_mismatch() {
        assert!(check_version(None).is_ok(), "a client that does not say is let through");
        assert!(check_version(Some(PROTOCOL_VERSION)).is_ok());
        let r = check_version(Some(PROTOCOL_VERSION + 1)).unwrap_err();
        assert_eq!(r.code, ErrorCode::VersionMismatch);
        assert!(r.message.contains("reload the page"), "{}", r.message);
    }

    #[test]
    fn the_version_is_found_in_hellos_this_relay_cannot_parse() {
        let newer = br#"{"type":"hello","protocol":99,"mode":"spawn","shiny":true}"#;
        assert_eq!(announced_protocol(newer), Some(99));
        assert_eq!(announced_protocol(br#"{"type":"hello","mode":42}"#), None);
        assert_eq!(announced_protocol(br#"{"protocol":"two"}"#), None);
        assert_eq!(announced_protocol(b"\xff\xfe garbage"), None);
    }
}
