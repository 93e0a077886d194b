//! One browser session: WebTransport accept, token check, hello, then the datagram bridge.
//!
//! Each session runs in its own task; whatever goes wrong in it (a bad client, a dead
//! mosh-server) ends that task only.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::UdpSocket;
use tokio::time::Instant;
use wtransport::endpoint::IncomingSession;
use wtransport::endpoint::endpoint_side::Server;
use wtransport::{Connection, Endpoint, RecvStream, SendStream, VarInt};

use crate::Shared;
use crate::auth::AuthOutcome;
use crate::config::{Mode, normalize_host};
use crate::control::{
    ClientMessage, ErrorCode, FRAMING_VERSION, Hello, LineReader, ReadError, ServerMessage,
};
use crate::framing::{self, Splitter};
use crate::limits::TokenBucket;
use crate::spawn::{SpawnSpec, spawn_mosh_server};
use crate::state::{SessionRecord, pid_alive, valid_id};

/// Time for the browser to finish the handshake, open the control stream and say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a spawned mosh-server's pid is checked while bridged.
const LIVENESS_INTERVAL: Duration = Duration::from_secs(5);
/// How long an error reply may take to reach the browser before the connection is closed.
const ERROR_LINGER: Duration = Duration::from_secs(2);
/// Smallest datagram limit a browser may announce: 16 parts of it must hold mosh's 2048 bytes,
/// and anything this small is a broken client anyway.
const MIN_DATAGRAM: usize = 512;
/// Datagrams from mosh-server are at most 2048 bytes (its receive MTU); read with room to spare
/// so an oversized one is seen as such instead of truncated.
const UDP_BUF: usize = 4096;

/// Accepts WebTransport sessions until shutdown, one task each.
pub(crate) async fn accept_loop(shared: Arc<Shared>, endpoint: &Endpoint<Server>) {
    let tracker = tokio_util::task::TaskTracker::new();
    loop {
        let incoming = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            i = endpoint.accept() => i,
        };
        let ip = incoming.remote_address().ip();
        if shared.auth.blocked(ip, std::time::Instant::now()).is_some() {
            // Refused before the TLS handshake: a guessing source costs us almost nothing.
            incoming.refuse();
            continue;
        }
        let shared = Arc::clone(&shared);
        tracker.spawn(async move {
            if let Err(e) = handle_incoming(shared, incoming).await {
                tracing::debug!("webtransport session setup failed: {e:#}");
            }
        });
    }
    tracker.close();
    tracker.wait().await;
}

/// The token carried in the connect URL's query, if any, percent-decoded (a page builds the URL
/// with `encodeURIComponent`; a random token needs no escaping, a user-chosen one might).
fn query_token(path: &str) -> Option<String> {
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

async fn handle_incoming(shared: Arc<Shared>, incoming: IncomingSession) -> anyhow::Result<()> {
    let request = tokio::time::timeout(HELLO_TIMEOUT, incoming).await??;
    let peer = request.remote_address();
    let path = request.path().split('?').next().unwrap_or("");
    if path != crate::WEBTRANSPORT_PATH {
        request.not_found().await;
        return Ok(());
    }
    // A token in the URL is checked before the session is accepted; without one, the hello
    // must carry it and nothing happens before that check either.
    let pre_authed = match query_token(request.path()) {
        None => false,
        Some(t) => {
            match shared.auth.check(&shared.token, Some(&t), peer.ip(), std::time::Instant::now()) {
                AuthOutcome::Ok => true,
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
    let conn = request.accept().await?;
    let shutdown = shared.shutdown.clone();
    tokio::select! {
        _ = shutdown.cancelled() => {
            conn.close(VarInt::from_u32(0), b"relay shutting down");
        }
        _ = serve(shared, &conn, pre_authed, peer) => {}
    }
    Ok(())
}

/// Sends an error line, waits briefly for it to be delivered, closes the connection.
async fn refuse(conn: &Connection, send: &mut SendStream, code: ErrorCode, message: String) {
    let line = ServerMessage::error(code, message).to_line();
    let _ = tokio::time::timeout(ERROR_LINGER, async {
        send.write_all(&line).await?;
        send.finish().await
    })
    .await;
    conn.close(VarInt::from_u32(1), b"refused");
}

/// Where a session's datagrams go, and what to tell the browser.
struct Target {
    session: String,
    addr: SocketAddr,
    port: u16,
    key: Option<String>,
    pid: Option<u32>,
    resumed: bool,
}

async fn serve(shared: Arc<Shared>, conn: &Connection, pre_authed: bool, peer: SocketAddr) {
    let accepted = tokio::time::timeout(HELLO_TIMEOUT, conn.accept_bi()).await;
    let (mut send, recv) = match accepted {
        Ok(Ok(s)) => s,
        Ok(Err(_)) => return,
        Err(_) => {
            conn.close(VarInt::from_u32(1), b"no control stream");
            return;
        }
    };
    let mut reader = LineReader::new(recv);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, reader.next_message()).await {
        Ok(Ok(ClientMessage::Hello(h))) => h,
        Ok(Ok(_)) => {
            return refuse(
                conn,
                &mut send,
                ErrorCode::BadRequest,
                "first message must be hello".into(),
            )
            .await;
        }
        Ok(Err(ReadError::TooLarge)) => {
            return refuse(
                conn,
                &mut send,
                ErrorCode::MessageTooLarge,
                ReadError::TooLarge.to_string(),
            )
            .await;
        }
        Ok(Err(e @ ReadError::Malformed(_))) => {
            // Counts as a failed authentication when the URL had no token: a client that cannot
            // produce a well-formed hello must not get unlimited free attempts.
            if !pre_authed {
                shared.auth.check(&shared.token, None, peer.ip(), std::time::Instant::now());
            }
            return refuse(conn, &mut send, ErrorCode::BadRequest, e.to_string()).await;
        }
        Ok(Err(_)) => return,
        Err(_) => {
            return refuse(conn, &mut send, ErrorCode::HelloTimeout, "no hello within 10 s".into())
                .await;
        }
    };
    if !pre_authed {
        match shared.auth.check(
            &shared.token,
            hello.token.as_deref(),
            peer.ip(),
            std::time::Instant::now(),
        ) {
            AuthOutcome::Ok => {}
            AuthOutcome::BadToken => {
                tracing::info!(%peer, "webtransport hello with a missing or wrong token");
                return refuse(
                    conn,
                    &mut send,
                    ErrorCode::BadToken,
                    "missing or wrong token".into(),
                )
                .await;
            }
            AuthOutcome::RateLimited(wait) => {
                return refuse(
                    conn,
                    &mut send,
                    ErrorCode::RateLimited,
                    format!("too many failed attempts; retry in {} s", wait.as_secs() + 1),
                )
                .await;
            }
        }
    }
    // Authenticated from here on.
    let mode = shared.config.mode();
    if hello.mode.is_some_and(|m| m != mode) {
        return refuse(
            conn,
            &mut send,
            ErrorCode::WrongMode,
            format!("this relay runs in {} mode", mode_name(mode)),
        )
        .await;
    }
    if hello.max_datagram_size.is_some_and(|m| m < MIN_DATAGRAM) {
        return refuse(
            conn,
            &mut send,
            ErrorCode::BadRequest,
            format!("max_datagram_size below {MIN_DATAGRAM} cannot carry mosh"),
        )
        .await;
    }
    let Ok(_slot) = Arc::clone(&shared.sessions).try_acquire_owned() else {
        return refuse(
            conn,
            &mut send,
            ErrorCode::TooManySessions,
            format!("{} browser sessions already open", shared.config.max_sessions),
        )
        .await;
    };
    let target = match mode {
        Mode::Spawn => spawn_target(&shared, &hello).await,
        Mode::Bridge => bridge_target(&shared, &hello).await,
    };
    let target = match target {
        Ok(t) => t,
        Err((code, message)) => {
            tracing::info!(%peer, ?code, "session refused: {message}");
            return refuse(conn, &mut send, code, message).await;
        }
    };
    let span = tracing::info_span!("session", id = %target.session, %peer);
    let udp = match connect_udp(target.addr).await {
        Ok(u) => u,
        Err(e) => {
            return refuse(
                conn,
                &mut send,
                ErrorCode::Internal,
                format!("cannot open a UDP socket: {e}"),
            )
            .await;
        }
    };
    let limit = datagram_limit(&shared, conn, &hello);
    let ready = ServerMessage::Ready {
        session: target.session.clone(),
        mode,
        port: target.port,
        key: target.key.clone(),
        max_datagram_size: limit,
        framing: FRAMING_VERSION,
        resumed: target.resumed,
    };
    if send.write_all(&ready.to_line()).await.is_err() {
        return;
    }
    tracing::info!(
        parent: &span,
        port = target.port,
        resumed = target.resumed,
        max_datagram = limit,
        "bridging"
    );
    let end = bridge(&shared, conn, &mut send, &mut reader, &udp, &target, &hello).await;
    tracing::info!(parent: &span, reason = ?end.0, "session over: {}", end.1);
    if end.0 != ErrorCode::Internal {
        let line = ServerMessage::Ended { code: end.0, message: end.1 }.to_line();
        let _ = tokio::time::timeout(ERROR_LINGER, async {
            send.write_all(&line).await?;
            send.finish().await
        })
        .await;
    }
    conn.close(VarInt::from_u32(0), b"session over");
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Spawn => "spawn",
        Mode::Bridge => "bridge",
    }
}

/// The largest framed datagram to send: the relay's cap, the browser's word, the connection's
/// current limit, whichever is smallest.
fn datagram_limit(shared: &Shared, conn: &Connection, hello: &Hello) -> usize {
    let mut limit = shared.config.max_datagram_size;
    if let Some(b) = hello.max_datagram_size {
        limit = limit.min(b);
    }
    if let Some(c) = conn.max_datagram_size() {
        limit = limit.min(c);
    }
    limit
}

fn new_session_id() -> String {
    let mut b = [0u8; 16];
    // A session id only names a session; the token guards it. Fall back to time if the OS
    // refuses randomness rather than failing the session.
    if getrandom::fill(&mut b).is_err() {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        b = t.to_be_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

type Refusal = (ErrorCode, String);

async fn spawn_target(shared: &Shared, hello: &Hello) -> Result<Target, Refusal> {
    let state = shared
        .state
        .as_ref()
        .ok_or((ErrorCode::Internal, "spawn mode without state".to_string()))?;
    if let Some(id) = &hello.resume {
        if !valid_id(id) {
            return Err((ErrorCode::UnknownSession, "malformed session id".into()));
        }
        return match state.check_alive(id) {
            Some(r) => Ok(Target {
                session: r.id,
                addr: SocketAddr::from(([127, 0, 0, 1], r.port)),
                port: r.port,
                key: Some(r.key),
                pid: r.pid,
                resumed: true,
            }),
            None => Err((
                ErrorCode::SessionEnded,
                "that session's mosh-server is gone (its shell exited, or nobody connected within 60 s)"
                    .into(),
            )),
        };
    }
    let _guard = shared.spawn_lock.lock().await;
    let alive = state.alive().len();
    if alive >= shared.config.max_spawned {
        return Err((
            ErrorCode::TooManySessions,
            format!("{alive} mosh-servers already running (limit {})", shared.config.max_spawned),
        ));
    }
    let spec = SpawnSpec {
        program: shared.config.mosh_server_command.clone(),
        locale: shared.config.mosh_locale.clone(),
        ports: shared.config.mosh_port_range,
        command: shared.config.mosh_command.clone(),
        timeout: shared.config.spawn_timeout(),
    };
    let spawned = spawn_mosh_server(&spec).await.map_err(|e| {
        tracing::warn!("spawning mosh-server failed: {e:#}");
        (ErrorCode::SpawnFailed, format!("{e:#}"))
    })?;
    let record = SessionRecord {
        id: new_session_id(),
        port: spawned.port,
        key: spawned.key,
        pid: spawned.pid,
        created: SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs(),
    };
    tracing::info!(session = %record.id, port = record.port, pid = ?record.pid, "spawned mosh-server");
    if let Err(e) = state.insert(record.clone()) {
        // The session still works; only a relay restart would lose track of it.
        tracing::error!("cannot record session: {e:#}");
    }
    Ok(Target {
        session: record.id,
        addr: SocketAddr::from(([127, 0, 0, 1], record.port)),
        port: record.port,
        key: Some(record.key),
        pid: record.pid,
        resumed: false,
    })
}

async fn bridge_target(shared: &Shared, hello: &Hello) -> Result<Target, Refusal> {
    let (Some(host), Some(port)) = (hello.host.as_deref(), hello.port) else {
        return Err((ErrorCode::BadRequest, "bridge mode needs host and port".into()));
    };
    let host = normalize_host(host);
    if !shared.config.allow.iter().any(|r| r.allows(host, port)) {
        return Err((
            ErrorCode::TargetNotAllowed,
            format!("{host}:{port} is not on this relay's --allow list"),
        ));
    }
    let addr = match host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or((ErrorCode::TargetNotAllowed, format!("cannot resolve {host}")))?,
    };
    Ok(Target { session: new_session_id(), addr, port, key: None, pid: None, resumed: false })
}

/// A fresh socket per browser session: mosh-server sees a new source port and roams to it.
async fn connect_udp(target: SocketAddr) -> std::io::Result<UdpSocket> {
    let local: SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let udp = UdpSocket::bind(local).await?;
    udp.connect(target).await?;
    Ok(udp)
}

/// Forwards datagrams both ways until something ends the session; returns why.
async fn bridge(
    shared: &Shared,
    conn: &Connection,
    send: &mut SendStream,
    reader: &mut LineReader<RecvStream>,
    udp: &UdpSocket,
    target: &Target,
    hello: &Hello,
) -> (ErrorCode, String) {
    let cfg = &shared.config;
    let mut buf = vec![0u8; UDP_BUF];
    let mut splitter = Splitter::new();
    let mut frames = Vec::with_capacity(framing::MAX_PARTS);
    let mut bucket =
        TokenBucket::new(cfg.datagram_rate, cfg.datagram_burst, std::time::Instant::now());
    let idle = cfg.idle_timeout();
    let mut last_heard = Instant::now();
    let mut liveness = tokio::time::interval(LIVENESS_INTERVAL);
    let mut dropped_rate = 0u64;
    let mut dropped_size = 0u64;
    let mut last_warn = Instant::now() - Duration::from_secs(60);

    loop {
        tokio::select! {
            d = conn.receive_datagram() => {
                let Ok(d) = d else {
                    return (ErrorCode::Internal, "browser connection closed".into());
                };
                last_heard = Instant::now();
                if !bucket.take(std::time::Instant::now()) {
                    dropped_rate += 1;
                    if last_warn.elapsed() > Duration::from_secs(10) {
                        last_warn = Instant::now();
                        tracing::warn!(session = %target.session, dropped = dropped_rate, "browser over its datagram rate; dropping");
                    }
                    continue;
                }
                // Errors (e.g. ECONNREFUSED from an earlier ICMP) are transient for UDP.
                let _ = udp.send(&d).await;
            }
            r = udp.recv(&mut buf) => {
                let n = match r {
                    Ok(n) => n,
                    Err(e) => {
                        // ICMP port unreachable: mosh-server is not (or no longer) there.
                        tracing::debug!(session = %target.session, "udp recv: {e}");
                        if target.pid.is_some_and(|p| !pid_alive(p)) {
                            return server_gone(shared, target);
                        }
                        continue;
                    }
                };
                frames.clear();
                let limit = datagram_limit(shared, conn, hello);
                if splitter.split(&buf[..n], limit, &mut frames).is_err() {
                    dropped_size += 1;
                    tracing::warn!(session = %target.session, len = n, limit, dropped = dropped_size, "server datagram too large to frame; dropped");
                    continue;
                }
                for f in &frames {
                    match conn.send_datagram(f) {
                        Ok(()) => {}
                        Err(wtransport::error::SendDatagramError::NotConnected) => {
                            return (ErrorCode::Internal, "browser connection closed".into());
                        }
                        Err(e) => {
                            tracing::debug!(session = %target.session, "send_datagram: {e}");
                        }
                    }
                }
            }
            m = reader.next_message() => {
                match m {
                    Ok(ClientMessage::Ping) => {
                        if send.write_all(&ServerMessage::Pong.to_line()).await.is_err() {
                            return (ErrorCode::Internal, "control stream closed".into());
                        }
                    }
                    Ok(ClientMessage::Hello(_)) => {
                        return (ErrorCode::BadRequest, "hello sent twice".into());
                    }
                    Err(ReadError::Closed) | Err(ReadError::Io(_)) => {
                        return (ErrorCode::Internal, "browser closed the control stream".into());
                    }
                    Err(ReadError::TooLarge) => {
                        return (ErrorCode::MessageTooLarge, ReadError::TooLarge.to_string());
                    }
                    Err(e @ ReadError::Malformed(_)) => return (ErrorCode::BadRequest, e.to_string()),
                }
            }
            s = conn.accept_bi() => {
                // Every bidirectional stream after the control stream is one paste upload.
                let Ok((up_send, up_recv)) = s else {
                    return (ErrorCode::Internal, "browser connection closed".into());
                };
                tokio::spawn(crate::paste::serve_upload(shared.pastes.clone(), up_send, up_recv));
            }
            _ = tokio::time::sleep_until(last_heard + idle) => {
                return (ErrorCode::IdleTimeout, format!("no datagram from the browser for {} s", idle.as_secs()));
            }
            _ = liveness.tick(), if target.pid.is_some() => {
                if target.pid.is_some_and(|p| !pid_alive(p)) {
                    return server_gone(shared, target);
                }
            }
        }
    }
}

fn server_gone(shared: &Shared, target: &Target) -> (ErrorCode, String) {
    if let Some(state) = &shared.state {
        state.remove(&target.session);
    }
    (ErrorCode::SessionEnded, "mosh-server exited (the shell ended)".into())
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
