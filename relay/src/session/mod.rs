//! One browser session: WebTransport accept (or a WebSocket the HTTP side upgraded), the URL
//! token, then handshake, target and the datagram bridge, each in its own module.
//!
//! ```text
//!  accept_loop ─▶ handle_incoming (path, ?token=) ─▶ run_session ◀─ serve_websocket (from http)
//!    serve: handshake::admit (control stream, hello, version, token, mode, limits)
//!           ─▶ target::attach (spawn: the warm spare (spare.rs) or a new mosh-server;
//!              resume or bridge) ─▶ ready
//!           ─▶ forward::run (datagrams both ways, held as the page asks; pings) ─▶ ended
//!                └─ every further stream ─▶ streams::serve (a paste upload or a download)
//! ```
//!
//! Each session runs in its own task; whatever goes wrong in it (a bad client, a dead
//! mosh-server) ends that task only. [`SessionContext`] is what they all share.

mod context;
mod forward;
mod handshake;
mod hold;
mod slots;
mod spare;
mod streams;
mod target;
mod view;

pub(crate) use context::{SessionContext, SessionSettings};
pub(crate) use slots::{HandshakeSlot, HandshakeSlots, NoSlot, Pool};
pub(crate) use spare::{Spare, keep as keep_spare};
pub use target::AllowRule;
pub(crate) use target::{NOT_YOURS, TargetSettings};

use std::net::SocketAddr;
use std::sync::Arc;

use tern::relay_proto::WEBTRANSPORT_PATH;
use tokio::io::AsyncWriteExt;
use tokio::net::UdpSocket;
use tokio::sync::OwnedSemaphorePermit;
use wtransport::Endpoint;
use wtransport::endpoint::IncomingSession;
use wtransport::endpoint::endpoint_side::Server;

use crate::auth::{AuthOutcome, Credential, SourceKey};
use crate::control::{FRAMING_VERSION, Hello, MAX_SESSION_MESSAGE, Ready, ServerMessage};
use crate::link::{BrowserLink, SendHalf};
use crate::registry::Attach;
use forward::End;
use handshake::{Admitted, LINGER, NoControl, Stop};
use target::Target;

/// An admitted session attached to its mosh-server: what the bridge works with.
struct Attached {
    hello: Hello,
    /// Whose token opened it: the owner's or a named one (read-only or not).
    who: crate::tokens::Who,
    target: Target,
    /// Connected to the target; a fresh one per browser session.
    udp: UdpSocket,
    /// This page's hold on the mosh-server: nonce bounds, the relay's copy, moved or not.
    attach: Attach,
    /// The `--max-sessions` slot, released when the session ends.
    _slot: OwnedSemaphorePermit,
}

/// Accepts WebTransport sessions until shutdown, one task each.
pub(crate) async fn accept_loop(shared: Arc<SessionContext>, endpoint: &Endpoint<Server>) {
    let tracker = tokio_util::task::TaskTracker::new();
    loop {
        let incoming = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            i = endpoint.accept() => i,
        };
        // A source the limiter blocks is not refused here: what it will present is not known
        // yet, and it may be the owner sharing an address with a guesser. Its handshakes are
        // bounded like everyone's, below.
        let source = SourceKey::of(incoming.remote_address().ip());
        // Past the cap (in all, or this source's share), refused at once (QUIC
        // CONNECTION_REFUSED, before any TLS work): the client hears "no" instead of waiting, and
        // the sessions already open are not touched.
        let slot = match shared.handshakes.take(Pool::Shared, source) {
            Ok(slot) => slot,
            Err(why) => {
                let cap = match why {
                    NoSlot::PoolFull => "--max-handshakes",
                    NoSlot::SourceFull => "--max-handshakes-per-source",
                };
                tracing::debug!(peer = %incoming.remote_address(), "webtransport connect refused: {cap} reached");
                incoming.refuse();
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        tracker.spawn(async move {
            // A handshake still under way when the relay stops is dropped, not waited for.
            let shutdown = shared.shutdown.clone();
            tokio::select! {
                _ = shutdown.cancelled() => {}
                r = handle_incoming(shared, incoming, slot) => if let Err(e) = r {
                    tracing::debug!("webtransport session setup failed: {e:#}");
                }
            }
        });
    }
    tracker.close();
    tracker.wait().await;
}

/// The token carried in the connect URL's query, if any, percent-decoded (a page builds the URL
/// with `encodeURIComponent`; a random token needs no escaping, a user-chosen one might).
pub(crate) fn query_token(path: &str) -> Option<String> {
    let (_, query) = path.split_once('?')?;
    let raw = query.split('&').find_map(|kv| kv.strip_prefix("token="))?;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

async fn handle_incoming(
    shared: Arc<SessionContext>,
    incoming: IncomingSession,
    slot: HandshakeSlot,
) -> anyhow::Result<()> {
    // The QUIC handshake and the CONNECT request: a client that never finishes them is dropped
    // (its slot freed) after the timeout.
    let request = tokio::time::timeout(shared.settings.handshake_timeout, incoming).await??;
    let peer = request.remote_address();
    let source = SourceKey::of(peer.ip());
    let path = request.path().split('?').next().unwrap_or("");
    if path != WEBTRANSPORT_PATH {
        request.not_found().await;
        return Ok(());
    }
    // The name the CONNECT went to, as for HTTP: a DNS-rebinding page's name is refused.
    if !shared.settings.host_policy.allows(Some(request.authority())) {
        tracing::warn!(
            %peer,
            authority = ?request.authority(),
            "webtransport connect for a host name this relay does not answer to refused (403): DNS rebinding? (--allow-host adds one)"
        );
        request.forbidden().await;
        return Ok(());
    }
    // A browser names the page that opens the session: only the relay's own page (or an
    // --allow-origin one) may, checked before the token so a foreign page learns nothing.
    let origin = request.origin();
    if !crate::security::webtransport_origin_ok(
        origin,
        request.authority(),
        &shared.settings.allow_origin,
    ) {
        tracing::warn!(
            %peer,
            ?origin,
            authority = ?request.authority(),
            "webtransport connect from a foreign Origin refused (403): not this relay's page (--allow-origin adds one)"
        );
        shared.audit.event(
            "refused",
            &crate::audit::Fields::new()
                .addr(peer.ip())
                .agent(request.user_agent())
                .link("webtransport")
                .reason("a foreign Origin"),
        );
        request.forbidden().await;
        return Ok(());
    }
    // A token in the URL is checked before the session is accepted; without one, the hello
    // must carry it and nothing happens before that check either.
    let agent = request.user_agent().map(str::to_string);
    // A CONNECT through a trusted front door that names its person (an HTTP/3 proxy that
    // passes WebTransport on; nginx does not): that person, as for an HTTP request.
    let named = shared.settings.front_door.header.as_deref().map(|h| {
        // HTTP/3 names are lowercase on the wire; a client library may keep another case.
        let value = request
            .headers()
            .iter()
            .find_map(|(k, v)| k.eq_ignore_ascii_case(h).then_some(v.as_bytes()));
        shared.settings.front_door.vouch(peer.ip(), value)
    });
    if named == Some(crate::security::Vouch::Untrusted) {
        tracing::warn!(%peer, "an identity header from a peer that is not a trusted proxy ignored");
        shared.audit.event(
            "refused",
            &crate::audit::Fields::new()
                .addr(peer.ip().to_canonical())
                .agent(agent.as_deref())
                .link("webtransport")
                .reason("identity header from a peer that is not a trusted proxy: ignored"),
        );
    }
    let pre_authed = match query_token(request.path()) {
        None => match named {
            Some(crate::security::Vouch::Person(who)) => Some(who),
            _ => None,
        },
        Some(t) => {
            let (credential, who) = shared.check_plain(Some(&t));
            match shared.auth.judge(credential, source, std::time::Instant::now()) {
                AuthOutcome::Ok => who,
                AuthOutcome::BadToken => {
                    tracing::info!(%peer, "webtransport connect with a wrong token");
                    request.forbidden().await;
                    return Ok(());
                }
                AuthOutcome::RateLimited(_) => {
                    request.too_many_requests().await;
                    return Ok(());
                }
            }
        }
    };
    let pushed_to = tern::relay_proto::proof::pushed_challenge_nonce(request.path());
    let conn = BrowserLink::WebTransport(request.accept().await?);
    let pushed = match (pushed_to, &pre_authed) {
        (Some(page), None) => handshake::push_challenge(&shared, &conn, page).await,
        _ => None,
    };
    run_session(shared, conn, Opening { pre_authed, pushed }, peer, source, slot, agent).await;
    Ok(())
}

/// Serves one upgraded WebSocket (the HTTP side checked its Origin, and its token when a native
/// client offered one: `pre_authed`) as a browser session. A page offers no token: its control
/// stream starts with the challenge. `source` is who the limiter counts it against (the client
/// behind a trusted proxy).
pub(crate) async fn serve_websocket(
    shared: Arc<SessionContext>,
    io: hyper::upgrade::Upgraded,
    pre_authed: Option<crate::tokens::Who>,
    peer: SocketAddr,
    source: SourceKey,
    slot: HandshakeSlot,
    agent: Option<String>,
) {
    let link = BrowserLink::WebSocket(crate::link::WsLink::accept(io).await);
    run_session(shared, link, Opening { pre_authed, pushed: None }, peer, source, slot, agent)
        .await;
}

/// What a link's opening settled before its control stream: a credential checked in the URL
/// (or a person a trusted front door named), and the challenge pushed to the page.
struct Opening {
    pre_authed: Option<crate::tokens::Who>,
    pushed: Option<handshake::PushedChallenge>,
}

/// Serves an accepted browser link until the session or the relay ends. `slot` is released
/// once the hello is admitted or refused.
async fn run_session(
    shared: Arc<SessionContext>,
    conn: BrowserLink,
    opening: Opening,
    peer: SocketAddr,
    source: SourceKey,
    slot: HandshakeSlot,
    agent: Option<String>,
) {
    let shutdown = shared.shutdown.clone();
    tokio::select! {
        _ = shutdown.cancelled() => conn.close(0, "relay shutting down"),
        _ = serve(shared, &conn, opening, peer, source, slot, agent) => {}
    }
}

/// The life of one session on an accepted connection.
async fn serve(
    shared: Arc<SessionContext>,
    conn: &BrowserLink,
    opening: Opening,
    peer: SocketAddr,
    source: SourceKey,
    slot: HandshakeSlot,
    agent: Option<String>,
) {
    let Opening { pre_authed, pushed } = opening;
    let wait = shared.settings.handshake_timeout;
    let mut control = match handshake::accept_control(conn, wait).await {
        Ok(control) => control,
        Err(why) => {
            // A connection that held a slot and never opened its control stream: a failed
            // attempt, unless it proved its credential already (as in `handshake::read_hello`).
            if why == NoControl::TimedOut && pre_authed.is_none() {
                shared.auth.judge(Credential::Wrong, source, std::time::Instant::now());
            }
            return;
        }
    };
    control.pushed = pushed;
    let opened =
        open(&shared, &mut control, pre_authed, peer, source, (conn.kind(), agent.as_deref()))
            .await;
    drop(slot);
    let session = match opened {
        Ok(Opened::Drive(s)) => *s,
        Ok(Opened::View(v)) => {
            return view::serve(&shared, conn, &mut control, *v, peer, agent.as_deref()).await;
        }
        Err(Stop::Gone) => return,
        Err(Stop::Refused(r)) => {
            tracing::info!(%peer, code = r.code.as_str(), "session refused: {}", r.message);
            return handshake::refuse(conn, &mut control.send, r).await;
        }
    };
    let span = tracing::info_span!("session", id = %session.target.session, %peer);
    let limit = forward::datagram_limit(&shared, conn, session.hello.max_datagram_size);
    let ready = ready(&shared, &session, limit);
    if control.send.write_all(&ready.to_line()).await.is_err() {
        return;
    }
    // From now on the page may send its own resume point (`seed`).
    control.reader.set_limit(MAX_SESSION_MESSAGE);
    let t = &session.target;
    tracing::info!(parent: &span, port = t.port, resumed = t.resumed, max_datagram = limit, link = conn.kind(), who = session.who.name(), read_only = session.who.read_only(), "bridging");
    let audit = || {
        crate::audit::Fields::new()
            .who(session.who.name())
            .addr(peer.ip())
            .agent(agent.as_deref())
            .session(&t.session)
            .link(conn.kind())
    };
    // A session someone else's page drove until now is taken over; one this relay knows of
    // but nobody drove is resumed.
    let event = match (t.resumed, session.attach.took_over) {
        (false, _) => "attach",
        (true, true) => "take_over",
        (true, false) => "resume",
    };
    shared.audit.event(
        event,
        &audit().kind(if session.who.read_only() { "read-only" } else { "read-write" }),
    );
    let end = forward::run(&shared, conn, &mut control, &session).await;
    let moved = matches!(end, End::Moved);
    let (event, reason) = match &end {
        End::Ended { code, .. } if code.session_is_over() => ("end", code.as_str()),
        End::Ended { code, .. } => ("detach", code.as_str()),
        End::BrowserGone(why) => ("detach", *why),
        End::Moved => ("detach", "another page took the session over"),
    };
    shared.audit.event(event, &audit().reason(reason));
    say_goodbye(&mut control.send, end, &span).await;
    if moved {
        // The page closes the link once it has read `moved`: closed from here first, it might see
        // the link drop before the line and reconnect, taking the session back unasked.
        let _ = tokio::time::timeout(MOVED_LINGER, async {
            while conn.receive_datagram().await.is_some() {}
        })
        .await;
    }
    conn.close(0, "session over");
}

/// How long a moved page's link stays open for the page to close it.
const MOVED_LINGER: std::time::Duration = std::time::Duration::from_secs(10);

/// What an admitted hello becomes: the page that drives the session, or a viewer of it.
enum Opened {
    Drive(Box<Attached>),
    View(Box<view::Viewing>),
}

/// Admits the hello and attaches it to its mosh-server (or, for a viewer, to the relay's copy).
async fn open(
    shared: &Arc<SessionContext>,
    control: &mut handshake::Control,
    pre_authed: Option<crate::tokens::Who>,
    peer: SocketAddr,
    source: SourceKey,
    (link, agent): (&str, Option<&str>),
) -> Result<Opened, Stop> {
    let t0 = std::time::Instant::now();
    let Admitted { hello, slot, who } =
        handshake::admit(shared, control, pre_authed, peer, source).await?;
    if view::is_viewer(&hello, &who) {
        let (name, resume) = (who.name().to_string(), hello.resume.clone());
        return view::admit(shared, hello, who, slot).map(|v| Opened::View(Box::new(v))).map_err(
            |r| {
                tracing::info!(%peer, who = %name, "a viewer refused: {}", r.message);
                shared.audit.event(
                    "refused",
                    &crate::audit::Fields::new()
                        .who(&name)
                        .addr(peer.ip())
                        .agent(agent)
                        .link(link)
                        .session(resume.as_deref().unwrap_or_default())
                        .kind(if resume.is_none() { "new-session" } else { "view" })
                        .reason(&r.message),
                );
                r.into()
            },
        );
    }
    let t1 = std::time::Instant::now();
    let target = target::attach(shared, &hello, &who).await.inspect_err(|r| {
        if r.code == crate::control::ErrorCode::NotYourSession {
            shared.audit.event(
                "refused",
                &crate::audit::Fields::new()
                    .who(who.name())
                    .addr(peer.ip())
                    .agent(agent)
                    .link(link)
                    .session(hello.resume.as_deref().unwrap_or_default())
                    .reason("another identity's session"),
            );
        }
    })?;
    let t2 = std::time::Instant::now();
    let mut target = target;
    let (udp, prestarted) = match target.prestarted.take() {
        // The socket the relay released the spare's shell from (connected to the same
        // mosh-server): the server's client address stays the same.
        Some(spare::Released { udp, point }) => (udp, Some(point)),
        None => (target::connect_udp(target.addr).await?, None),
    };
    // Last: from here on this page drives, and the one before it is told it was moved.
    let attach = match (&target.record, &shared.state) {
        (Some(record), Some(store)) => match &prestarted {
            // The page continues from the relay's client as from a resume point.
            Some(point) => shared.registry.attach_prestarted(store, record, point),
            None => shared.registry.attach_spawned(store, record, target.resumed),
        },
        _ => {
            // The page's fingerprint of its key, when well formed: floors per server and key.
            let key_id = hello.key_id.as_deref().filter(|k| tern::relay_proto::proof::is_key_id(k));
            shared.registry.attach_bridge(target.addr, key_id)
        }
    };
    // A read-only link never moves a session away from the page that drives it: it would end
    // the driver's link (one client per mosh session).
    if who.read_only() && attach.took_over {
        return Err(handshake::Refusal::new(
            crate::control::ErrorCode::BadRequest,
            "this link's token is read-only: it cannot take over a session another page is using",
        )
        .into());
    }
    // Where the time to `ready` goes (docs/BENCHMARKS.md, "Page load"), in microseconds.
    let us = |a: std::time::Instant, b: std::time::Instant| (b - a).as_micros() as u64;
    let t3 = std::time::Instant::now();
    tracing::debug!(
        admit_us = us(t0, t1),
        attach_us = us(t1, t2),
        rest_us = us(t2, t3),
        "session opened"
    );
    Ok(Opened::Drive(Box::new(Attached { hello, who, target, udp, attach, _slot: slot })))
}

fn ready(shared: &SessionContext, session: &Attached, max_datagram_size: usize) -> ServerMessage {
    let target = &session.target;
    ServerMessage::Ready(Ready {
        session: target.session.clone(),
        mode: shared.settings.mode,
        port: target.port,
        key: target.key.clone(),
        max_datagram_size,
        framing: FRAMING_VERSION,
        // Bridge mode: whether the server has had a page through this relay, so that a page with
        // nothing saved knows it cannot continue it (its floor is above zero either way).
        resumed: target.resumed || session.attach.known,
        seq_floor: session.attach.seq_floor,
        point: session.attach.point.clone(),
        view: false,
        owner: None,
        off: target.off.clone(),
        info: Some(Box::new(shared.relay_info())),
    })
}

/// Logs why the session ended and, if the browser can still hear it, says so (`ended`).
async fn say_goodbye(send: &mut SendHalf, end: End, span: &tracing::Span) {
    let line = match end {
        End::Ended { code, message } => {
            tracing::info!(parent: span, reason = code.as_str(), "session over: {message}");
            ServerMessage::Ended { code, message }.to_line()
        }
        End::Moved => {
            tracing::info!(parent: span, "another page took the session over");
            ServerMessage::Moved.to_line()
        }
        End::BrowserGone(why) => {
            tracing::info!(parent: span, "session over: {why}");
            return;
        }
    };
    let _ = tokio::time::timeout(LINGER, async {
        send.write_all(&line).await?;
        send.finish().await
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::query_token;

    #[test]
    fn query_tokens_are_found_and_percent_decoded() {
        assert_eq!(query_token("/wt?token=abc").as_deref(), Some("abc"));
        assert_eq!(query_token("/wt?x=1&token=a%2Bb%2f").as_deref(), Some("a+b/"));
        assert_eq!(query_token("/wt?token=50%").as_deref(), Some("50%"));
        assert_eq!(query_token("/wt?tokens=abc"), None);
        assert_eq!(query_token("/wt"), None);
        assert_eq!(query_token("/wt?token=%ff"), None);
    }
}
