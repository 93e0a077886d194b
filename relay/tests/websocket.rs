//! The WebSocket fallback against the real relay: who is let in (Origin, token), the same session
//! as over WebTransport (hello, datagrams both ways, ping, an upload), and that a bad client harms
//! only itself.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use sha2::{Digest, Sha256};
use support::*;
use tern::relay_proto::websocket::{Frame, MAX_FRAME};
use tern::relay_proto::{
    ClientMessage, ErrorCode, LineBuffer, ServerMessage, UploadHeader, UploadReply, WEBSOCKET_PATH,
    decode,
};
use tern_relay::framing::Joiner;
use tokio::net::{TcpStream, UdpSocket};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

type Ws = WebSocketStream<TcpStream>;

async fn echo_server() -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let _ = sock.send_to(&buf[..n], from).await;
        }
    });
    addr
}

/// Opens the WebSocket as a native client does: its own Origin, the token as a subprotocol.
async fn open(relay: &TestRelay, origin: Option<&str>, token: Option<&str>) -> Result<Ws, WsError> {
    let protocols = match token {
        Some(t) => format!("tern, tern-token.{t}"),
        None => "tern".to_string(),
    };
    open_offering(relay, origin, &protocols).await
}

/// Opens the WebSocket offering `protocols`.
async fn open_offering(
    relay: &TestRelay,
    origin: Option<&str>,
    protocols: &str,
) -> Result<Ws, WsError> {
    let addr = relay.addr();
    let mut request = format!("ws://{addr}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    if let Some(o) = origin {
        h.insert("origin", HeaderValue::from_str(o).unwrap());
    }
    h.insert("sec-websocket-protocol", HeaderValue::from_str(protocols).unwrap());
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, response) = tokio_tungstenite::client_async(request, tcp).await?;
    assert_eq!(response.headers()["sec-websocket-protocol"], "tern");
    Ok(ws)
}

fn status(e: WsError) -> u16 {
    match e {
        WsError::Http(r) => r.status().as_u16(),
        other => panic!("expected an HTTP refusal, got {other}"),
    }
}

async fn send(ws: &mut Ws, frame: Frame<'_>) {
    ws.send(Message::Binary(frame.encode().into())).await.unwrap();
}

/// The next frame of a kind the test waits for, skipping others, within 10 s.
async fn next_frame(ws: &mut Ws) -> Option<Vec<u8>> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.ok()?? {
            Ok(Message::Binary(b)) => return Some(b.to_vec()),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

/// Reads control lines until one decodes as a server message.
async fn control_message(ws: &mut Ws, lines: &mut LineBuffer) -> ServerMessage {
    loop {
        if let Some(line) = lines.next_line().unwrap() {
            return decode(&line).expect("valid control line");
        }
        let bytes = next_frame(ws).await.expect("a frame");
        if let Ok(Frame::Control(b)) = Frame::decode(&bytes) {
            lines.push(b);
        }
    }
}

async fn bridged_session(relay: &TestRelay, token: &str, echo: SocketAddr) -> (Ws, LineBuffer) {
    let origin = format!("http://{}", relay.addr());
    let mut ws = open(relay, Some(&origin), Some(token)).await.expect("upgrade");
    let hello = ClientMessage::Hello(bridge_hello(token, "127.0.0.1", echo.port()));
    send(&mut ws, Frame::Control(&hello.to_line())).await;
    let mut lines = LineBuffer::new(4096);
    let ready = control_message(&mut ws, &mut lines).await;
    assert!(matches!(ready, ServerMessage::Ready(_)), "{ready:?}");
    (ws, lines)
}

#[tokio::test]
async fn foreign_origins_and_wrong_tokens_are_refused_at_the_upgrade_and_a_page_proves_in_band() {
    let token = test_token("ws");
    let echo = echo_server().await;
    let relay =
        TestRelay::start(bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())])).await;
    let own = format!("http://{}", relay.addr());
    let e = open(&relay, Some("https://evil.example"), Some(&token)).await.unwrap_err();
    assert_eq!(status(e), 403, "a foreign page cannot ride the browser's access");
    let e = open(&relay, Some(&own), Some("wrong")).await.unwrap_err();
    assert_eq!(status(e), 401);
    assert!(open(&relay, Some(&own), Some(&token)).await.is_ok());

    // A page offers no token: the upgrade is let through, and the control stream's challenge
    // decides. The relay proves first; a hello without the page's proof is refused.
    let mut ws = open(&relay, Some(&own), None).await.expect("a tokenless upgrade");
    let mut lines = LineBuffer::new(4096);
    let verifier = tern::relay_client::Verifier::new([3; 32]);
    send(&mut ws, Frame::Control(&verifier.greet(&token).to_line())).await;
    let challenge = control_message(&mut ws, &mut lines).await;
    let ServerMessage::Challenge(c) = &challenge else { panic!("{challenge:?}") };
    verifier.answer(&token, &c.0).expect("the relay proves it knows the token");
    let mut hello = bridge_hello(&token, "127.0.0.1", echo.port());
    hello.token = None;
    send(&mut ws, Frame::Control(&ClientMessage::Hello(hello.clone()).to_line())).await;
    let refused = control_message(&mut ws, &mut lines).await;
    assert!(
        matches!(refused, ServerMessage::Error { code: ErrorCode::BadToken, .. }),
        "{refused:?}"
    );

    // With the page's proof: ready.
    let mut ws = open(&relay, Some(&own), None).await.expect("a tokenless upgrade");
    let mut lines = LineBuffer::new(4096);
    send(&mut ws, Frame::Control(&verifier.greet(&token).to_line())).await;
    let ServerMessage::Challenge(c) = control_message(&mut ws, &mut lines).await else { panic!() };
    hello.proof =
        Some(tern::relay_proto::control::ProofText(verifier.answer(&token, &c.0).unwrap()));
    send(&mut ws, Frame::Control(&ClientMessage::Hello(hello).to_line())).await;
    let ready = control_message(&mut ws, &mut lines).await;
    assert!(matches!(ready, ServerMessage::Ready(_)), "{ready:?}");

    // The page's upgrade carries a proof over a challenge it fetched (the relay proved itself
    // there): accepted once (its slot from the authenticated pool), refused when replayed.
    let page = tern::relay_client::Verifier::new([4; 32]);
    let body = tern::relay_proto::encode(&page.request(&token));
    let (code, answer) =
        http_post(relay.addr(), tern::relay_proto::CHALLENGE_PATH, None, &body).await;
    let (nonce, proof) = page.http_proof(&token, code, answer.as_bytes()).expect("verified");
    let offered =
        format!("tern, {}", tern::relay_proto::websocket::proof_subprotocol(&nonce, &proof));
    assert!(open_offering(&relay, Some(&own), &offered).await.is_ok());
    let e = open_offering(&relay, Some(&own), &offered).await.unwrap_err();
    assert_eq!(status(e), 401, "a proof is spent by one upgrade");
    relay.stop().await;
}

#[tokio::test]
async fn the_same_session_runs_over_the_websocket() {
    let token = test_token("ws");
    let echo = echo_server().await;
    let mut config = bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())]);
    let pastes = tempfile::tempdir().unwrap();
    config.paste_dir = Some(pastes.path().join("p"));
    let relay = TestRelay::start(config).await;
    let (mut ws, mut lines) = bridged_session(&relay, &token, echo).await;

    // Datagrams both ways (the echo server plays mosh-server), framed as over WebTransport.
    let mut joiner = Joiner::new();
    for i in 0..20u8 {
        // Never 0 in its first bytes: bridge mode drops numbers below the page's floor.
        let datagram = vec![i + 1; 100 + usize::from(i) * 60];
        send(&mut ws, Frame::Datagram(&datagram)).await;
        // Split like over WebTransport when above the relay's datagram size.
        loop {
            let bytes = next_frame(&mut ws).await.expect("echo");
            if let Ok(Frame::Datagram(d)) = Frame::decode(&bytes) {
                if let Some(joined) = joiner.push(d).unwrap() {
                    assert_eq!(joined, datagram);
                    break;
                }
            }
        }
    }
    send(&mut ws, Frame::Control(&ClientMessage::Ping.to_line())).await;
    assert_eq!(control_message(&mut ws, &mut lines).await, ServerMessage::Pong);

    // An upload on stream 1: header, have 0, content, acks, the path.
    let content: Vec<u8> =
        b"\x89PNG\r\n\x1a\n".iter().copied().chain((0..200_000u32).map(|i| i as u8)).collect();
    let hash = tern::relay_proto::Sha256(Sha256::digest(&content).into()).to_string();
    send(&mut ws, Frame::Open(1)).await;
    let header =
        UploadHeader { hash: hash.clone(), size: content.len() as u64, mime: None, eager: false };
    send(&mut ws, Frame::Data(1, &header.to_line())).await;
    for chunk in content.chunks(30_000) {
        send(&mut ws, Frame::Data(1, chunk)).await;
    }
    send(&mut ws, Frame::Fin(1)).await;
    let mut replies = LineBuffer::new(4096);
    let path = 'replies: loop {
        let bytes = next_frame(&mut ws).await.expect("upload replies");
        if let Ok(Frame::Data(1, b)) = Frame::decode(&bytes) {
            replies.push(b);
        }
        while let Some(line) = replies.next_line().unwrap() {
            match decode::<UploadReply>(&line).unwrap() {
                UploadReply::Path { path } => break 'replies path,
                UploadReply::Error { message, .. } => panic!("{message}"),
                _ => {}
            }
        }
    };
    assert_eq!(std::fs::read(&path).unwrap(), content);
    relay.stop().await;
}

#[tokio::test]
async fn a_flooding_or_malformed_client_harms_only_itself() {
    let token = test_token("ws");
    let echo = echo_server().await;
    // The other clients have mosh-servers of their own: a second page on the good one's would
    // take it over (the newest page drives).
    let (other, third) = (echo_server().await, echo_server().await);
    let allow: Vec<String> =
        [echo, other, third].iter().map(|a| format!("127.0.0.1:{}", a.port())).collect();
    let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
    let relay = TestRelay::start(bridge_config(&token, &allow)).await;
    let (mut good, _) = bridged_session(&relay, &token, echo).await;

    // A flood of datagrams and streams from a second client, then an oversized frame.
    let (mut bad, _) = bridged_session(&relay, &token, other).await;
    for i in 0..2000u32 {
        let _ = bad.send(Message::Binary(Frame::Datagram(&[7u8; 1000]).encode().into())).await;
        if i % 100 == 0 {
            let _ = bad.send(Message::Binary(Frame::Open(i).encode().into())).await;
        }
    }
    let _ = bad.send(Message::Binary(vec![0u8; MAX_FRAME * 2].into())).await;
    // The oversized frame closes that socket.
    let mut closed = false;
    for _ in 0..5000 {
        match tokio::time::timeout(Duration::from_secs(5), bad.next()).await {
            Ok(Some(Ok(_))) => continue,
            _ => {
                closed = true;
                break;
            }
        }
    }
    assert!(closed, "the flooding socket is closed");
    // Garbage from a third: an unknown frame kind ends its link.
    let (mut odd, _) = bridged_session(&relay, &token, third).await;
    let _ = odd.send(Message::Binary(vec![0x7f, 1, 2].into())).await;
    assert!(next_frame(&mut odd).await.is_none() || next_frame(&mut odd).await.is_none());

    // The good session still works.
    let mut joiner = Joiner::new();
    send(&mut good, Frame::Datagram(b"still here")).await;
    loop {
        let bytes = next_frame(&mut good).await.expect("the good session answers");
        if let Ok(Frame::Datagram(d)) = Frame::decode(&bytes) {
            assert_eq!(joiner.push(d).unwrap().unwrap(), b"still here");
            break;
        }
    }
    relay.stop().await;
}

#[tokio::test]
async fn held_datagrams_come_over_the_websocket_whole_in_order_and_once() {
    let token = test_token("ws");
    let echo = echo_server().await;
    let relay =
        TestRelay::start(bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())])).await;
    let (mut ws, mut lines) = bridged_session(&relay, &token, echo).await;
    lines.set_limit(tern::relay_proto::control::MAX_SESSION_MESSAGE);

    // The page asks for a hold (a hidden page): the echoes come back as one `held` line, whole
    // (no framing: one is larger than a datagram the relay would send) and in order.
    send(&mut ws, Frame::Control(&ClientMessage::Hold { ms: 1000 }.to_line())).await;
    // The relay reads the control stream and the datagrams in one loop: a ping's pong means it
    // has read the hold too.
    send(&mut ws, Frame::Control(&ClientMessage::Ping.to_line())).await;
    assert_eq!(control_message(&mut ws, &mut lines).await, ServerMessage::Pong);
    let sent: Vec<Vec<u8>> = (0..30u8).map(|i| vec![i + 1; 50 + usize::from(i) * 60]).collect();
    for d in &sent {
        send(&mut ws, Frame::Datagram(d)).await;
    }
    let mut got = Vec::new();
    while got.len() < sent.len() {
        let bytes = next_frame(&mut ws).await.expect("the held datagrams");
        match Frame::decode(&bytes).unwrap() {
            Frame::Datagram(d) => panic!("a datagram alone while held ({} bytes)", d.len()),
            Frame::Control(b) => lines.push(b),
            other => panic!("unexpected {other:?}"),
        }
        while let Some(line) = lines.next_line().unwrap() {
            match decode::<ServerMessage>(&line).unwrap() {
                ServerMessage::Held { datagrams } => got.extend(datagrams),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(got, sent);

    // No hold: each datagram as it comes again.
    send(&mut ws, Frame::Control(&ClientMessage::Hold { ms: 0 }.to_line())).await;
    send(&mut ws, Frame::Control(&ClientMessage::Ping.to_line())).await;
    assert_eq!(control_message(&mut ws, &mut lines).await, ServerMessage::Pong);
    send(&mut ws, Frame::Datagram(b"after")).await;
    let bytes = next_frame(&mut ws).await.expect("the echo");
    let Ok(Frame::Datagram(d)) = Frame::decode(&bytes) else { panic!("not a datagram") };
    assert_eq!(Joiner::new().push(d).unwrap().as_deref(), Some(&b"after"[..]));
    relay.stop().await;
}
