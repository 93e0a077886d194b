//! The relay's caps against the real relay: the session past `--max-sessions` is refused with a
//! clear error while every open one keeps working (100 sessions, WebTransport and WebSocket: the
//! short load test; the 1,000-session run is `tern-bench --only sessions`), slowloris HTTP
//! clients are cut off after `--header-timeout` and cannot starve a real request, and WebSocket
//! and QUIC handshakes that never finish hold at most `--max-handshakes` slots (WebSocket
//! upgrades that carry the token: `--max-authenticated-handshakes`), each for at most
//! `--handshake-timeout`; one source holds at most `--max-handshakes-per-source` of them, and a
//! hello that never comes counts as a failed attempt.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use support::*;
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{ClientMessage, LineBuffer, ServerMessage, WEBSOCKET_PATH, decode};
use tern_relay::framing::Joiner;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use wtransport::Connection;

type Ws = WebSocketStream<TcpStream>;

/// Generous bound for anything that should happen "soon" on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// UDP echo sockets, one per session: the relay treats a second page on the same target as a
/// takeover, so every session needs a mosh-server (here: an echo) of its own.
async fn echo_servers(n: usize) -> Vec<SocketAddr> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        out.push(sock.local_addr().unwrap());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                let _ = sock.send_to(&buf[..n], from).await;
            }
        });
    }
    out
}

/// Bridge mode to any loopback port (the echo servers' ports are random).
fn any_loopback_config(token: &str) -> tern_relay::Config {
    bridge_config(token, &["127.0.0.1:1024-65535"])
}

// ---------------------------------------------------------------- the two kinds of session

/// A session as the page holds it: over WebTransport or over the WebSocket fallback.
enum Session {
    WebTransport { conn: Connection, _control: Control, joiner: Joiner },
    WebSocket { ws: Ws, joiner: Joiner },
}

impl Session {
    /// Sends one datagram (a keystroke's) and waits for its echo (the screen's answer).
    async fn round_trip(&mut self, payload: &[u8]) -> bool {
        let work = async {
            match self {
                Session::WebTransport { conn, joiner, .. } => {
                    conn.send_datagram(payload).ok()?;
                    loop {
                        let d = conn.receive_datagram().await.ok()?;
                        if let Some(joined) = joiner.push(&d).ok()? {
                            return Some(joined == payload);
                        }
                    }
                }
                Session::WebSocket { ws, joiner } => {
                    let frame = Frame::Datagram(payload).encode();
                    ws.send(Message::Binary(frame.into())).await.ok()?;
                    loop {
                        let Message::Binary(b) = ws.next().await?.ok()? else { continue };
                        if let Ok(Frame::Datagram(d)) = Frame::decode(&b) {
                            if let Some(joined) = joiner.push(d).ok()? {
                                return Some(joined == payload);
                            }
                        }
                    }
                }
            }
        };
        matches!(tokio::time::timeout(PATIENCE, work).await, Ok(Some(true)))
    }
}

/// Opens a bridged WebTransport session: `Ok` with the session, or the relay's error code.
async fn webtransport_session(
    relay: &TestRelay,
    token: &str,
    target: SocketAddr,
) -> Result<Session, String> {
    let conn = connect(relay, None).await.map_err(|e| format!("connect: {e}"))?;
    let (control, reply) = hello(&conn, bridge_hello(token, "127.0.0.1", target.port())).await;
    match reply {
        ServerMessage::Ready(_) => {
            Ok(Session::WebTransport { conn, _control: control, joiner: Joiner::new() })
        }
        ServerMessage::Error { code, message } => Err(format!("{}: {message}", code.as_str())),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Opens the WebSocket as the page does (its Origin, the token as a subprotocol).
async fn open_websocket(relay: &TestRelay, token: &str) -> Result<Ws, WsError> {
    let addr = relay.addr();
    let mut request = format!("ws://{addr}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{addr}")).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    let tcp = TcpStream::connect(addr).await.unwrap();
    Ok(tokio_tungstenite::client_async(request, tcp).await?.0)
}

/// The first control message on a WebSocket, or `None` when it closes first.
async fn websocket_control(ws: &mut Ws) -> Option<ServerMessage> {
    let mut lines = LineBuffer::new(4096);
    let work = async {
        loop {
            if let Some(line) = lines.next_line().ok()? {
                return decode(&line).ok();
            }
            let Message::Binary(b) = ws.next().await?.ok()? else { continue };
            if let Ok(Frame::Control(c)) = Frame::decode(&b) {
                lines.push(c);
            }
        }
    };
    tokio::time::timeout(PATIENCE, work).await.ok()?
}

/// Opens a bridged WebSocket session: `Ok` with the session, or the relay's error code.
async fn websocket_session(
    relay: &TestRelay,
    token: &str,
    target: SocketAddr,
) -> Result<Session, String> {
    let mut ws = open_websocket(relay, token).await.map_err(|e| format!("upgrade: {e}"))?;
    let hello = ClientMessage::Hello(bridge_hello(token, "127.0.0.1", target.port()));
    ws.send(Message::Binary(Frame::Control(&hello.to_line()).encode().into())).await.unwrap();
    match websocket_control(&mut ws).await {
        Some(ServerMessage::Ready(_)) => Ok(Session::WebSocket { ws, joiner: Joiner::new() }),
        Some(ServerMessage::Error { code, message }) => {
            Err(format!("{}: {message}", code.as_str()))
        }
        other => panic!("unexpected reply {other:?}"),
    }
}

// ---------------------------------------------------------------- sessions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_past_the_limit_is_refused_clearly_while_a_hundred_keep_working() {
    const LIMIT: usize = 100;
    let token = test_token("limits");
    let mut config = any_loopback_config(&token);
    config.max_sessions = LIMIT;
    let relay = Arc::new(TestRelay::start(config).await);
    let targets = echo_servers(LIMIT + 3).await;

    // 100 sessions, every third over the WebSocket fallback, opened 10 at a time (below
    // --max-handshakes' 64, which is not what this test is about).
    let mut sessions = Vec::with_capacity(LIMIT);
    for batch in targets[..LIMIT].chunks(10) {
        let opening = batch.iter().enumerate().map(|(i, &target)| {
            let (relay, token) = (Arc::clone(&relay), token.clone());
            tokio::spawn(async move {
                if i % 3 == 0 {
                    websocket_session(&relay, &token, target).await
                } else {
                    webtransport_session(&relay, &token, target).await
                }
            })
        });
        for s in futures_util::future::join_all(opening).await {
            sessions.push(s.unwrap().unwrap_or_else(|e| panic!("a session below the limit: {e}")));
        }
    }
    assert_eq!(sessions.len(), LIMIT);

    // The 101st, over either transport: a clear refusal that names the limit.
    let refused = [
        webtransport_session(&relay, &token, targets[LIMIT]).await,
        websocket_session(&relay, &token, targets[LIMIT + 1]).await,
    ];
    for r in refused {
        let e = r.err().expect("the session past the limit is refused");
        assert!(e.starts_with("too_many_sessions"), "{e}");
        assert!(e.contains("100 browser sessions already open"), "{e}");
    }

    // Every one of the hundred still carries keystrokes and their echoes.
    for (i, s) in sessions.iter_mut().enumerate() {
        let key = format!("key {i}");
        assert!(s.round_trip(key.as_bytes()).await, "session {i} still works");
    }

    // A session that ends frees its slot for the next.
    drop(sessions.pop());
    let mut admitted = None;
    for _ in 0..120 {
        match webtransport_session(&relay, &token, targets[LIMIT + 2]).await {
            Ok(s) => {
                admitted = Some(s);
                break;
            }
            Err(e) if e.starts_with("too_many_sessions") => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let mut admitted = admitted.expect("a freed slot is taken by the next session");
    assert!(admitted.round_trip(b"the next one").await);
    drop(admitted);
    drop(sessions);
    Arc::try_unwrap(relay).ok().expect("one owner").stop().await;
}

// ---------------------------------------------------------------- slow HTTP clients

/// A client that sends `head` and then one more header byte every 300 ms, never finishing its
/// headers. Resolves when the relay closes the connection.
async fn slowloris(addr: SocketAddr, head: &'static [u8]) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let trickle = async move {
        if write.write_all(head).await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if write.write_all(b"a").await.is_err() {
                return;
            }
        }
    };
    // Whatever the relay sends back (nothing, or an error status), it ends with a close.
    let closed = async move {
        let mut buf = [0u8; 512];
        while let Ok(n) = read.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::select! {
        _ = closed => {}
        _ = trickle => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_clients_are_cut_off_and_cannot_starve_a_real_request() {
    let token = test_token("limits");
    let mut config = any_loopback_config(&token);
    config.header_timeout_secs = 1;
    config.max_http_connections = 4;
    let relay = TestRelay::start(config).await;
    let addr = relay.addr();

    // Twice as many slow clients as the relay serves at once, on the page and on the WebSocket
    // path, plus connections that send nothing at all.
    let mut slow = Vec::new();
    for i in 0..8 {
        let head: &'static [u8] = match i % 2 {
            0 => b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
            _ => b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nX-Slow: ",
        };
        slow.push(tokio::spawn(slowloris(addr, head)));
    }
    for _ in 0..2 {
        slow.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let mut buf = [0u8; 64];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // A real request, sent while every slot is held: answered once the header timeout frees one.
    let real = tokio::time::timeout(PATIENCE, http_get(addr, "/api/info", Some(&token)))
        .await
        .expect("a real request is answered although slow clients held every connection slot");
    assert_eq!(real.0, 200, "{}", real.1);

    // Every slow client was cut off although it kept sending.
    for s in slow {
        tokio::time::timeout(PATIENCE, s)
            .await
            .expect("a slow client is disconnected after the header timeout")
            .unwrap();
    }
    // A kept-alive connection that goes quiet after its answer is cut off as well.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req =
        format!("GET /api/info HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read_all)
        .await
        .expect("an idle kept-alive connection is closed");
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    relay.stop().await;
}

// ---------------------------------------------------------------- handshakes that never finish

/// Upgrades a WebSocket and then says nothing (no hello). Resolves with the control message
/// the relay sends before it closes the socket, if any.
async fn silent_websocket(relay: &TestRelay, token: &str) -> Ws {
    open_websocket(relay, token).await.expect("the upgrade itself succeeds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_that_never_say_hello_are_bounded_and_cut_off() {
    let token = test_token("limits");
    let target = echo_servers(1).await[0];

    // Held for long: two silent sockets (which carry the token) take both slots of the
    // authenticated pool; the next upgrade is refused at once, with a reason. WebTransport
    // attempts draw from the other pool and are not refused.
    let mut config = any_loopback_config(&token);
    config.max_authenticated_handshakes = 2;
    config.handshake_timeout_secs = 600;
    let relay = TestRelay::start(config).await;
    let _held = [silent_websocket(&relay, &token).await, silent_websocket(&relay, &token).await];
    let (status, body) = match open_websocket(&relay, &token).await {
        Err(WsError::Http(r)) => {
            let body = r.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default();
            (r.status().as_u16(), body.into_owned())
        }
        Err(e) => panic!("expected an HTTP refusal, got {e}"),
        Ok(_) => panic!("a third handshake got a slot past --max-handshakes 2"),
    };
    assert_eq!(status, 503);
    assert!(body.contains("too_many_handshakes"), "{body}");
    assert!(connect(&relay, None).await.is_ok(), "QUIC attempts have a pool of their own");
    relay.stop().await;

    // Cut short: silent sockets are told `hello_timeout` and closed, freeing their slots.
    let mut config = any_loopback_config(&token);
    config.max_authenticated_handshakes = 2;
    config.handshake_timeout_secs = 1;
    let relay = TestRelay::start(config).await;
    for _ in 0..2 {
        let mut ws = silent_websocket(&relay, &token).await;
        match websocket_control(&mut ws).await {
            Some(ServerMessage::Error { code, .. }) => assert_eq!(code.as_str(), "hello_timeout"),
            other => panic!("expected a hello_timeout error, got {other:?}"),
        }
        assert!(tokio::time::timeout(PATIENCE, ws.next()).await.is_ok(), "then the socket closes");
    }
    let mut s = websocket_session(&relay, &token, target).await.expect("the slots are free again");
    assert!(s.round_trip(b"hello after the silent ones").await);
    relay.stop().await;
}

/// A QUIC client whose handshake never finishes: a proxy passes its packets to the relay and
/// drops every answer. Returns once the relay has answered (so it holds the attempt); the
/// client and proxy run until the task is aborted.
async fn blackholed_quic(relay: &TestRelay) -> tokio::task::JoinHandle<()> {
    let front = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let back = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    back.connect(relay.addr()).await.unwrap();
    let front_addr = front.local_addr().unwrap();
    let hashes = cert_digests(relay);
    let (answered_tx, answered) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let client = connect_with_hashes(front_addr, hashes, None);
        let forward = async {
            let mut buf = vec![0u8; 65536];
            loop {
                let (n, _) = front.recv_from(&mut buf).await.unwrap();
                back.send(&buf[..n]).await.unwrap();
            }
        };
        let swallow = async {
            let mut buf = vec![0u8; 65536];
            let mut answered = Some(answered_tx);
            loop {
                back.recv(&mut buf).await.unwrap();
                if let Some(tx) = answered.take() {
                    let _ = tx.send(());
                }
            }
        };
        tokio::select! {
            _ = client => {}
            _ = forward => {}
            _ = swallow => {}
        }
    });
    tokio::time::timeout(PATIENCE, answered).await.expect("the relay answers the Initial").unwrap();
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incomplete_quic_handshakes_are_bounded_and_cut_off() {
    let token = test_token("limits");
    let target = echo_servers(1).await[0];

    // Held for long: three half-open handshakes fill --max-handshakes 3; the next attempt is
    // refused at once (CONNECTION_REFUSED). A WebSocket upgrade that carries the token is not:
    // it takes its slot from the authenticated pool, which no unauthenticated flood can empty.
    let mut config = any_loopback_config(&token);
    config.max_handshakes = 3;
    config.handshake_timeout_secs = 600;
    let relay = TestRelay::start(config).await;
    let mut half_open = Vec::new();
    for _ in 0..3 {
        half_open.push(blackholed_quic(&relay).await);
    }
    let refused = tokio::time::timeout(PATIENCE, connect(&relay, None))
        .await
        .expect("refused at once, not left waiting");
    let Err(e) = refused else { panic!("a fourth handshake got a slot past --max-handshakes 3") };
    assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
    let mut s = websocket_session(&relay, &token, target)
        .await
        .unwrap_or_else(|e| panic!("an authenticated upgrade during a QUIC flood: {e}"));
    assert!(s.round_trip(b"past the flood").await);
    drop(s);
    half_open.iter().for_each(|t| t.abort());
    relay.stop().await;

    // Cut short: after --handshake-timeout the attempts are dropped and a real session gets in,
    // although the half-open clients keep retransmitting.
    let mut config = any_loopback_config(&token);
    config.max_handshakes = 3;
    config.handshake_timeout_secs = 1;
    let relay = TestRelay::start(config).await;
    let mut half_open = Vec::new();
    for _ in 0..3 {
        half_open.push(blackholed_quic(&relay).await);
    }
    let mut session = None;
    for _ in 0..120 {
        match webtransport_session(&relay, &token, target).await {
            Ok(s) => {
                session = Some(s);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    let mut session = session.expect("a real session gets a slot once the half-open ones expire");
    assert!(session.round_trip(b"through").await);
    half_open.iter().for_each(|t| t.abort());
    relay.stop().await;
}

// ---------------------------------------------------------------- one source against the rest

/// Another loopback address: Linux routes all of 127/8 to `lo`, so a client socket bound to it
/// is a second source to the relay.
const SECOND_SOURCE: &str = "127.0.0.2";

/// A WebTransport client bound to `local` (its source address as the relay sees it).
async fn connect_from(
    relay: &TestRelay,
    local: &str,
) -> Result<Connection, wtransport::error::ConnectingError> {
    let config = wtransport::ClientConfig::builder()
        .with_bind_address(format!("{local}:0").parse().unwrap())
        .with_server_certificate_hashes(cert_digests(relay))
        .keep_alive_interval(Some(Duration::from_secs(2)))
        .build();
    let endpoint = wtransport::Endpoint::client(config).unwrap();
    endpoint.connect(format!("https://127.0.0.1:{}/wt", relay.addr().port())).await
}

/// A bridged WebTransport session from `local`: `Ok`, or the relay's error code and message.
async fn webtransport_session_from(
    relay: &TestRelay,
    local: &str,
    hello_msg: tern_relay::control::Hello,
) -> Result<Session, String> {
    let conn = connect_from(relay, local).await.map_err(|e| format!("connect: {e}"))?;
    let (control, reply) = hello(&conn, hello_msg).await;
    match reply {
        ServerMessage::Ready(_) => {
            Ok(Session::WebTransport { conn, _control: control, joiner: Joiner::new() })
        }
        ServerMessage::Error { code, message } => Err(format!("{}: {message}", code.as_str())),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// A bridged WebSocket session from `local`, opened as the page opens it.
async fn websocket_session_from(
    relay: &TestRelay,
    local: &str,
    token: &str,
    target: SocketAddr,
) -> Result<Session, String> {
    let addr = relay.addr();
    let mut request = format!("ws://{addr}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{addr}")).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let mut ws = match tokio_tungstenite::client_async(request, tcp).await {
        Ok((ws, _)) => ws,
        Err(e) => return Err(format!("upgrade: {e}")),
    };
    let hello = ClientMessage::Hello(bridge_hello(token, "127.0.0.1", target.port()));
    ws.send(Message::Binary(Frame::Control(&hello.to_line()).encode().into())).await.unwrap();
    match websocket_control(&mut ws).await {
        Some(ServerMessage::Ready(_)) => Ok(Session::WebSocket { ws, joiner: Joiner::new() }),
        Some(ServerMessage::Error { code, message }) => {
            Err(format!("{}: {message}", code.as_str()))
        }
        other => panic!("unexpected reply {other:?}"),
    }
}

/// The attack of finding 5 (issue 32): one source opens 64 WebSocket upgrades and 64 QUIC
/// handshakes that never say hello, every slot `--max-handshakes` has (defaults throughout).
/// A second source still gets a session at once, over either transport; the first source holds
/// no more than its share (`--max-handshakes-per-source`, 8 by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_cannot_hold_every_handshake_slot() {
    let token = test_token("limits");
    let targets = echo_servers(2).await;
    let mut config = any_loopback_config(&token);
    config.handshake_timeout_secs = 600;
    let relay = TestRelay::start(config).await;
    let slots = 64;

    // The flood, from 127.0.0.1: upgrades that say nothing after the upgrade...
    let mut held_sockets = Vec::new();
    let mut refused_upgrades = 0;
    for _ in 0..slots {
        match open_websocket(&relay, &token).await {
            Ok(ws) => held_sockets.push(ws),
            Err(WsError::Http(r)) if r.status().as_u16() == 503 => refused_upgrades += 1,
            Err(e) => panic!("unexpected upgrade failure: {e}"),
        }
    }
    // ... and QUIC handshakes that never finish.
    let mut half_open = Vec::new();
    for _ in 0..slots {
        half_open.push(blackholed_quic(&relay).await);
    }
    println!(
        "one source: {} silent upgrades held, {refused_upgrades} refused; {} QUIC attempts sent",
        held_sockets.len(),
        half_open.len()
    );

    // A second source gets a session at once, over WebTransport and over the WebSocket.
    let hello_b = bridge_hello(&token, "127.0.0.1", targets[0].port());
    let mut wt = webtransport_session_from(&relay, SECOND_SOURCE, hello_b)
        .await
        .unwrap_or_else(|e| panic!("another source's WebTransport session: {e}"));
    assert!(wt.round_trip(b"through the flood").await);
    let mut ws = websocket_session_from(&relay, SECOND_SOURCE, &token, targets[1])
        .await
        .unwrap_or_else(|e| panic!("another source's WebSocket session: {e}"));
    assert!(ws.round_trip(b"through the flood, by TCP").await);

    // The flooding source held at most its share.
    assert!(held_sockets.len() <= 8, "{} silent upgrades held by one source", held_sockets.len());
    assert_eq!(held_sockets.len() + refused_upgrades, slots);
    half_open.iter().for_each(|t| t.abort());
    drop((wt, ws, held_sockets));
    relay.stop().await;
}

/// A client that takes a slot and never says hello is cut off after `--handshake-timeout`; each
/// time counts as a failed attempt, so after a few the source is rate limited like a guesser
/// (a wrong token is answered `rate_limited`), while another source is not, and the right
/// token still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_timeouts_count_as_failed_attempts() {
    let token = test_token("limits");
    let target = echo_servers(1).await[0];
    let mut config = any_loopback_config(&token);
    config.handshake_timeout_secs = 1;
    let relay = TestRelay::start(config).await;

    // Ten silent WebTransport clients, in two batches of five (below the per-source cap). The
    // first five failures are free; the next five block the source for 0.5 s doubling to 8 s.
    let relay = Arc::new(relay);
    for _ in 0..2 {
        let batch = (0..5).map(|_| {
            let relay = Arc::clone(&relay);
            tokio::spawn(async move {
                let conn = connect(&relay, None).await.expect("a silent client connects");
                let (_send, recv) = conn.open_bi().await.unwrap().await.unwrap();
                let mut reader = tern_relay::control::LineReader::new(recv);
                let line = tokio::time::timeout(PATIENCE, reader.next_line())
                    .await
                    .expect("the relay gives up on a silent client")
                    .expect("an error line");
                match decode::<ServerMessage>(&line).unwrap() {
                    ServerMessage::Error { code, .. } => assert_eq!(code.as_str(), "hello_timeout"),
                    other => panic!("expected hello_timeout, got {other:?}"),
                }
            })
        });
        for r in futures_util::future::join_all(batch).await {
            r.unwrap();
        }
    }

    let wrong = bridge_hello("not-the-token", "127.0.0.1", target.port());
    let from_silent = webtransport_session_from(&relay, "127.0.0.1", wrong.clone()).await;
    let e = from_silent.err().expect("a wrong token is refused");
    assert!(e.starts_with("rate_limited"), "the silent source is rate limited: {e}");
    let from_other = webtransport_session_from(&relay, SECOND_SOURCE, wrong).await;
    let e = from_other.err().expect("a wrong token is refused");
    assert!(e.starts_with("bad_token"), "another source is not: {e}");
    let right = bridge_hello(&token, "127.0.0.1", target.port());
    let mut s = webtransport_session_from(&relay, "127.0.0.1", right)
        .await
        .unwrap_or_else(|e| panic!("the right token passes while the source is blocked: {e}"));
    assert!(s.round_trip(b"still mine").await);
    drop(s);
    Arc::try_unwrap(relay).ok().expect("one owner").stop().await;
}
