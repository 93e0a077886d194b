//! Bridge mode, authentication, limits and robustness, against a UDP echo server on loopback.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::*;
use tern::relay_proto::RelayInfo;
use tern_relay::control::{ClientMessage, ErrorCode, LineReader, MAX_MESSAGE, ServerMessage};
use tern_relay::framing::Joiner;
use tern_relay::{PROTOCOL_VERSION, Relay, RelayError};
use tokio::net::UdpSocket;

/// A UDP echo server. `big:N` is answered with N bytes (a pattern), anything else is echoed.
async fn echo_server() -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else { return };
            let msg = &buf[..n];
            let reply = match std::str::from_utf8(msg).ok().and_then(|s| s.strip_prefix("big:")) {
                Some(len) => (0..len.parse::<usize>().unwrap()).map(|i| (i % 251) as u8).collect(),
                None => msg.to_vec(),
            };
            let _ = sock.send_to(&reply, from).await;
        }
    });
    addr
}

async fn bridged(
    relay: &TestRelay,
    token: &str,
    echo: SocketAddr,
) -> (wtransport::Connection, Control, Ready) {
    let conn = connect(relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, bridge_hello(token, "127.0.0.1", echo.port())).await;
    (conn, control, expect_ready(reply))
}

async fn echo_once(conn: &wtransport::Connection, payload: &[u8]) -> Vec<u8> {
    conn.send_datagram(payload).unwrap();
    let mut j = Joiner::new();
    loop {
        if let Some(d) = recv_joined(conn, &mut j).await {
            return d;
        }
    }
}

#[tokio::test]
async fn bridge_forwards_datagrams_both_ways_and_frames_large_ones() {
    let token = test_token("bridge");
    let echo = echo_server().await;
    let relay =
        TestRelay::start(bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())])).await;
    let (conn, _control, ready) = bridged(&relay, &token, echo).await;
    assert_eq!(ready.key, None, "bridge mode never handles a key");
    assert_eq!(ready.port, echo.port());
    assert!(ready.max_datagram_size <= 1211);

    assert_eq!(echo_once(&conn, b"hello mosh").await, b"hello mosh");
    // mosh-server's largest datagram (1252) and the largest mosh accepts (2048) come whole.
    for len in [1210usize, 1252, 2048] {
        let mut j = Joiner::new();
        conn.send_datagram(format!("big:{len}").as_bytes()).unwrap();
        let mut parts = 0;
        let joined = loop {
            let d = tokio::time::timeout(Duration::from_secs(10), conn.receive_datagram())
                .await
                .unwrap()
                .unwrap();
            assert!(d.len() <= ready.max_datagram_size, "relay sent {} > limit", d.len());
            parts += 1;
            if let Some(x) = j.push(&d).unwrap() {
                break x;
            }
        };
        assert_eq!(joined.len(), len);
        assert!(joined.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert!(len < 1211 || parts >= 2, "{len} bytes should have been split");
    }
    relay.stop().await;
    assert_not_logged(&token, "token");
}

#[tokio::test]
async fn bridge_refuses_targets_outside_the_allowlist() {
    let token = test_token("allow");
    let echo = echo_server().await;
    let relay =
        TestRelay::start(bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())])).await;
    for (host, port) in [
        ("127.0.0.1", echo.port().wrapping_add(1)),
        ("127.0.0.2", echo.port()),
        ("localhost", echo.port()),
        ("10.1.2.3", 60001),
    ] {
        let conn = connect(&relay, None).await.unwrap();
        let (_c, reply) = hello(&conn, bridge_hello(&token, host, port)).await;
        assert_eq!(expect_error(reply), "target_not_allowed", "{host}:{port}");
    }
    // A spawn request to a bridge relay is refused too.
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn, spawn_hello(Some(&token), None)).await;
    assert_eq!(expect_error(reply), "wrong_mode");
    relay.stop().await;
    assert_not_logged(&token, "token");
}

#[tokio::test]
async fn a_page_of_another_protocol_version_is_told_to_reload() {
    let token = test_token("version");
    let echo = echo_server().await;
    let relay =
        TestRelay::start(bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())])).await;
    let refused = |reply: ServerMessage| match reply {
        ServerMessage::Error { code, message } => (code, message),
        other => panic!("expected error, got {other:?}"),
    };

    // A well-formed hello naming another version.
    let conn = connect(&relay, None).await.unwrap();
    let mut h = bridge_hello(&token, "127.0.0.1", echo.port());
    h.protocol = Some(PROTOCOL_VERSION + 1);
    let (code, message) = refused(hello(&conn, h).await.1);
    assert_eq!(code, ErrorCode::VersionMismatch);
    assert_eq!(message, "this page is from another tern-relay version; reload the page");

    // A newer page's hello this relay cannot even parse (a field it does not know) still gets
    // the version answer rather than bad_request, and it costs no authentication attempt.
    for _ in 0..6 {
        let conn = connect(&relay, None).await.unwrap();
        let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
        let line = format!(
            "{{\"type\":\"hello\",\"protocol\":{},\"mode\":\"bridge\",\"shiny\":true}}\n",
            PROTOCOL_VERSION + 1
        );
        send.write_all(line.as_bytes()).await.unwrap();
        let mut c = Control { send, reader: LineReader::new(recv) };
        assert_eq!(refused(c.next().await).0, ErrorCode::VersionMismatch);
    }

    // This version, or none named, is served; /api/info says which version the relay speaks.
    let conn = connect(&relay, None).await.unwrap();
    let mut h = bridge_hello(&token, "127.0.0.1", echo.port());
    h.protocol = Some(PROTOCOL_VERSION);
    let (_c, reply) = hello(&conn, h).await;
    expect_ready(reply);
    let (status, body) = http_get(relay.addr(), "/api/info", Some(&token)).await;
    assert_eq!(status, 200);
    let info: RelayInfo =
        tern::relay_proto::decode(body.as_bytes()).expect("/api/info is a RelayInfo");
    assert_eq!(info.protocol, PROTOCOL_VERSION);
    relay.stop().await;
    assert_not_logged(&token, "token");
}

#[tokio::test]
async fn wrong_or_missing_token_is_refused_everywhere() {
    let token = test_token("auth");
    let echo = echo_server().await;
    let relay =
        TestRelay::start(bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())])).await;
    let addr = relay.addr();

    // HTTP API: no token, wrong token.
    assert_eq!(http_get(addr, "/api/info", None).await.0, 401);
    assert_eq!(http_get(addr, "/api/sessions", Some("nope")).await.0, 401);
    let (status, body) = http_get(addr, "/api/info", Some(&token)).await;
    assert_eq!(status, 200);
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(info["port"], addr.port());
    assert_eq!(info["mode"], "bridge");
    assert_eq!(info["cert_hashes"].as_array().unwrap().len(), 1);
    assert!(!body.contains(&token));

    // WebTransport: wrong token in the URL is refused before the session exists.
    assert!(connect(&relay, Some("wrong")).await.is_err());
    // Right token in the URL: accepted, and the hello needs none.
    let conn = connect(&relay, Some(&token)).await.expect("query token accepted");
    let mut h = bridge_hello(&token, "127.0.0.1", echo.port());
    h.token = None;
    let (_c, reply) = hello(&conn, h).await;
    expect_ready(reply);
    // Hello without a token (refused, not counted: anyone can send one) and with a wrong one
    // (failure 3, after `nope` and the wrong URL token: a success does not wipe the count).
    let conn = connect(&relay, None).await.unwrap();
    let mut h = bridge_hello(&token, "127.0.0.1", echo.port());
    h.token = None;
    assert_eq!(expect_error(hello(&conn, h).await.1), "bad_token");
    let conn = connect(&relay, None).await.unwrap();
    assert_eq!(
        expect_error(hello(&conn, bridge_hello("wrong", "127.0.0.1", echo.port())).await.1),
        "bad_token"
    );
    // The sixth failure blocks this source for a while, for wrong tokens only: the right one
    // still passes, and the source still connects (what it presents is judged in the hello).
    for _ in 0..3 {
        assert_eq!(http_get(addr, "/api/info", Some("wrong")).await.0, 401);
    }
    assert_eq!(http_get(addr, "/api/info", Some("wrong")).await.0, 429);
    assert_eq!(http_get(addr, "/api/info", Some(&token)).await.0, 200);
    let conn = connect(&relay, None).await.expect("a blocked source still connects");
    let reply = hello(&conn, bridge_hello("wrong", "127.0.0.1", echo.port())).await.1;
    assert_eq!(expect_error(reply), "rate_limited");
    // After the back-off, a wrong token is an ordinary (counted) failure again.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(http_get(addr, "/api/info", Some("wrong")).await.0, 401);

    relay.stop().await;
    assert_not_logged(&token, "token");
}

#[tokio::test]
async fn bad_clients_do_not_disturb_a_concurrent_session() {
    let token = test_token("robust");
    let echo = echo_server().await;
    // The flooder has a mosh-server of its own: a second page on the good one's would take it
    // over (the newest page drives, tested below).
    let other = echo_server().await;
    let mut config = bridge_config(
        &token,
        &[&format!("127.0.0.1:{}", echo.port()), &format!("127.0.0.1:{}", other.port())],
    );
    config.datagram_rate = 200;
    config.datagram_burst = 50;
    let relay = TestRelay::start(config).await;
    let (good, _gc, _) = bridged(&relay, &token, echo).await;
    assert_eq!(echo_once(&good, b"before").await, b"before");

    // An oversized control message (no newline in sight).
    let conn = connect(&relay, None).await.unwrap();
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let _ = send.write_all(&vec![b'{'; MAX_MESSAGE * 4]).await;
    let mut c = Control { send, reader: LineReader::new(recv) };
    assert_eq!(expect_error(c.next().await), "message_too_large");

    // Malformed JSON, and a first message that is not a hello.
    for junk in [&b"{\"type\":\"hello\",\"mode\":42}\n"[..], b"\xff\xfe garbage\n"] {
        let conn = connect(&relay, None).await.unwrap();
        let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
        send.write_all(junk).await.unwrap();
        let mut c = Control { send, reader: LineReader::new(recv) };
        assert_eq!(expect_error(c.next().await), "bad_request");
    }
    let conn = connect(&relay, None).await.unwrap();
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let ping = ClientMessage::Ping.to_line();
    send.write_all(&ping).await.unwrap();
    let mut c = Control { send, reader: LineReader::new(recv) };
    assert_eq!(expect_error(c.next().await), "bad_request");

    // A datagram limit too small to carry mosh.
    let conn = connect(&relay, None).await.unwrap();
    let mut h = bridge_hello(&token, "127.0.0.1", echo.port());
    h.max_datagram_size = Some(100);
    assert_eq!(expect_error(hello(&conn, h).await.1), "bad_request");

    // Datagrams before any hello go nowhere; a connection that never says hello is dropped.
    let silent = connect(&relay, None).await.unwrap();
    let _ = silent.send_datagram(b"unauthenticated");

    // An authenticated flooder: a short bounded flood is rate limited, not fatal.
    let (flood, _fc, _) = bridged(&relay, &token, other).await;
    let started = std::time::Instant::now();
    let mut sent = 0;
    for i in 0..3000u32 {
        if flood.send_datagram(i.to_be_bytes()).is_ok() {
            sent += 1;
        }
        if i % 100 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let mut echoed = 0u32;
    while let Ok(Ok(_)) =
        tokio::time::timeout(Duration::from_millis(300), flood.receive_datagram()).await
    {
        echoed += 1;
    }
    let allowed = 50.0 + 200.0 * started.elapsed().as_secs_f64() + 5.0;
    assert!(sent > 0);
    assert!(f64::from(echoed) <= allowed, "{echoed} echoed, rate limit allows {allowed:.0}");

    // Raw garbage at the QUIC port.
    let raw = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for n in 0..200usize {
        let junk: Vec<u8> = (0..(n * 7) % 1400 + 1).map(|i| (i * 31 + n) as u8).collect();
        raw.send_to(&junk, relay.addr()).await.unwrap();
    }

    // The good session is unaffected, and new sessions still work.
    assert_eq!(echo_once(&good, b"after").await, b"after");
    let (fresh, _c, _) = bridged(&relay, &token, other).await;
    assert_eq!(echo_once(&fresh, b"fresh").await, b"fresh");
    relay.stop().await;
    assert_not_logged(&token, "token");
}

#[tokio::test]
async fn session_limit_and_idle_timeout_give_clear_errors() {
    let token = test_token("limits");
    let echo = echo_server().await;
    let mut config = bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())]);
    config.max_sessions = 1;
    config.idle_timeout_secs = 1;
    let relay = TestRelay::start(config).await;
    let (first, mut control, _) = bridged(&relay, &token, echo).await;
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn, bridge_hello(&token, "127.0.0.1", echo.port())).await;
    assert_eq!(expect_error(reply), "too_many_sessions");
    // The first session goes idle (no datagrams) and is ended with a reason.
    match control.next().await {
        tern_relay::control::ServerMessage::Ended { code, .. } => {
            assert_eq!(code.as_str(), "idle_timeout")
        }
        other => panic!("expected ended, got {other:?}"),
    }
    drop(first);
    // Its slot is free again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (again, _c, _) = bridged(&relay, &token, echo).await;
    assert_eq!(echo_once(&again, b"x").await, b"x");
    relay.stop().await;
}

#[tokio::test]
async fn certificate_rotation_keeps_live_sessions_and_serves_new_hashes() {
    let token = test_token("cert");
    let echo = echo_server().await;
    let mut config = bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())]);
    config.cert_rotate_secs = 3;
    config.cert_publish_ahead_secs = 1;
    let relay = TestRelay::start(config).await;
    let old = relay.relay.cert_hashes();
    assert_eq!(old.len(), 1);
    let (live, _c, _) = bridged(&relay, &token, echo).await;

    // Ahead of the switch both hashes are published, current first.
    tokio::time::sleep(Duration::from_millis(2400)).await;
    let (_, body) = http_get(relay.addr(), "/api/info", Some(&token)).await;
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    let both: Vec<String> = info["cert_hashes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(both.len(), 2, "{both:?}");
    assert_eq!(both[0], old[0]);

    // After it, only the new one; the live session still works; new ones use the new cert.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let now = relay.relay.cert_hashes();
    assert_eq!(now, vec![both[1].clone()]);
    assert_eq!(echo_once(&live, b"still here").await, b"still here");
    let (fresh, _c2, _) = bridged(&relay, &token, echo).await;
    assert_eq!(echo_once(&fresh, b"new cert").await, b"new cert");
    let old_digest = {
        use base64::Engine;
        let b: [u8; 32] =
            base64::engine::general_purpose::STANDARD.decode(&old[0]).unwrap().try_into().unwrap();
        wtransport::tls::Sha256Digest::new(b)
    };
    assert!(
        connect_with_hashes(relay.addr(), vec![old_digest], None).await.is_err(),
        "a client pinning only the old hash must fail"
    );
    relay.stop().await;
}

#[tokio::test]
async fn unsafe_configurations_refuse_to_start() {
    let mut c = bridge_config("t", &["127.0.0.1:1-2"]);
    c.listen = "0.0.0.0:0".parse().unwrap();
    let e = Relay::new(c).await.unwrap_err();
    assert!(matches!(e, RelayError::InsecureListen(_)), "{e}");
    assert!(e.to_string().contains("--tls-cert"), "{e}");
    let c = bridge_config("t", &[]);
    assert!(matches!(Relay::new(c).await.unwrap_err(), RelayError::BridgeWithoutAllowlist));
}

#[tokio::test]
async fn page_assets_are_public_and_explain_their_absence() {
    let token = test_token("page");
    let relay = TestRelay::start(bridge_config(&token, &["127.0.0.1:1-2"])).await;
    let (status, body) = http_get(relay.addr(), "/", None).await;
    if tern_relay::assets::page_present() {
        assert_eq!(status, 200);
    } else {
        // Never a bare error: the document says how to build the page.
        assert_eq!(status, 200);
        assert!(body.contains("scripts/build-wasm.sh"), "{body}");
        let (status, _) = http_get(relay.addr(), "/app.js", None).await;
        assert_eq!(status, 404);
    }
    relay.stop().await;
}

/// Accepts exactly one certificate, by its SHA-256 (what a pinned client does).
#[derive(Debug)]
struct PinnedCert(Vec<u8>);

impl tokio_rustls::rustls::client::danger::ServerCertVerifier for PinnedCert {
    fn verify_server_cert(
        &self,
        end_entity: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &[tokio_rustls::rustls::pki_types::CertificateDer<'_>],
        _: &tokio_rustls::rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: tokio_rustls::rustls::pki_types::UnixTime,
    ) -> Result<tokio_rustls::rustls::client::danger::ServerCertVerified, tokio_rustls::rustls::Error>
    {
        let hash = wtransport::tls::Certificate::from_der(end_entity.to_vec()).unwrap().hash();
        if hash.as_ref().as_slice() == self.0.as_slice() {
            Ok(tokio_rustls::rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(tokio_rustls::rustls::Error::General("unexpected certificate".into()))
        }
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<
        tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
        tokio_rustls::rustls::Error,
    > {
        Ok(tokio_rustls::rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<
        tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
        tokio_rustls::rustls::Error,
    > {
        Ok(tokio_rustls::rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<tokio_rustls::rustls::SignatureScheme> {
        tokio_rustls::rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[tokio::test]
async fn self_signed_https_serves_the_api_with_the_webtransport_certificate() {
    use base64::Engine;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;
    let token = test_token("https");
    let mut config = bridge_config(&token, &["127.0.0.1:1-2"]);
    config.tls_self_signed = true;
    let relay = TestRelay::start(config).await;
    assert!(relay.relay.page_url().starts_with("https://127.0.0.1:"));
    let hash =
        base64::engine::general_purpose::STANDARD.decode(&relay.relay.cert_hashes()[0]).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(std::sync::Arc::new(PinnedCert(hash)))
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(relay.addr()).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(client))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .expect("TLS with the relay's own certificate");
    let req = format!(
        "GET /api/info HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    let _ = tls.read_to_end(&mut resp).await;
    let text = String::from_utf8_lossy(&resp);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    // Plain HTTP is not served on that port any more.
    let mut plain = tokio::net::TcpStream::connect(relay.addr()).await.unwrap();
    plain.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut buf)).await;
    assert!(!String::from_utf8_lossy(&buf).contains("HTTP/1.1 200"));
    relay.stop().await;
}

#[tokio::test]
async fn a_second_page_on_the_same_server_takes_it_over_and_the_first_is_told() {
    let token = test_token("moved");
    let echo = echo_server().await;
    let relay =
        TestRelay::start(bridge_config(&token, &[&format!("127.0.0.1:{}", echo.port())])).await;
    let (first, mut first_control, ready) = bridged(&relay, &token, echo).await;
    assert_eq!(ready.seq_floor, 0, "nobody used this server through the relay yet");
    // A mosh datagram's first 8 bytes are its sequence number.
    let mut numbered = 41u64.to_be_bytes().to_vec();
    numbered.extend_from_slice(b" and some payload");
    assert_eq!(echo_once(&first, &numbered).await, numbered);

    let (second, _second_control, ready) = bridged(&relay, &token, echo).await;
    assert!(ready.seq_floor >= 42, "the new page starts above every number forwarded");
    // It drives from its first datagram on; the first page is told.
    assert_eq!(echo_once(&second, b"the newest drives").await, b"the newest drives");
    assert_eq!(first_control.next().await, ServerMessage::Moved);
    relay.stop().await;
}
