//! The page as a security boundary (docs/SECURITY.md), against the real relay: the headers of
//! every kind of answer (the page, a file, the API, an error), and the Origin check of the
//! browser-facing handshakes (WebSocket upgrade, WebTransport CONNECT, `/api/*`), with
//! `--allow-origin`; the token (also one that is no subprotocol word) never reaches the log.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::*;
use tern::relay_proto::websocket::token_subprotocol;
use tern::relay_proto::{ServerMessage, WEBSOCKET_PATH};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{Error as WsError, handshake::client::Response};
use wtransport::endpoint::ConnectOptions;
use wtransport::error::ConnectingError;
use wtransport::{ClientConfig, Endpoint};

/// One header of a lower-cased response head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(str::trim))
}

/// The headers every answer carries, whatever it is.
fn assert_boundary_headers(head: &str, addr: SocketAddr, what: &str) {
    let csp = header(head, "content-security-policy").unwrap_or_else(|| panic!("{what}: no CSP"));
    for directive in [
        "default-src 'none'",
        "style-src 'self' 'unsafe-inline'",
        &format!("connect-src 'self' https://{}:*", addr.ip()),
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "object-src 'none'",
    ] {
        assert!(csp.split(';').any(|d| d.trim() == directive), "{what}: {directive:?} in {csp}");
    }
    // Scripts: the page's files, its wasm, and the document's one inline script by its hash.
    let mut scripts = String::from("script-src 'self' 'wasm-unsafe-eval'");
    for hash in tern_relay::assets::inline_script_hashes() {
        scripts.push(' ');
        scripts.push_str(hash);
    }
    // (The head is lowercased, the hash's base64 with it: the browser tests check the exact one.)
    let scripts = scripts.to_lowercase();
    assert!(csp.split(';').any(|d| d.trim() == scripts), "{what}: {scripts:?} in {csp}");
    assert!(!csp.contains("'unsafe-eval'"), "{what}: no eval ({csp})");
    assert!(
        !csp.split(';').any(|d| d.trim().starts_with("script-src") && d.contains("unsafe-inline"))
    );
    let want = [
        ("x-frame-options", "deny"),
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
    ];
    for (name, value) in want {
        assert_eq!(header(head, name), Some(value), "{what}: {name}\n{head}");
    }
}

/// What a hashed script, wasm or stylesheet carries: the headers a subresource's browser reads, not
/// the document-only ones (tern_relay::assets::is_subresource).
fn assert_subresource_headers(head: &str, what: &str) {
    for (name, value) in [
        ("x-content-type-options", "nosniff"),
        ("cross-origin-resource-policy", "same-origin"),
        ("referrer-policy", "no-referrer"),
    ] {
        assert_eq!(header(head, name), Some(value), "{what}: {name}\n{head}");
    }
    for name in ["content-security-policy", "x-frame-options", "cross-origin-opener-policy"] {
        assert_eq!(header(head, name), None, "{what}: no {name} on a subresource\n{head}");
    }
}

#[tokio::test]
async fn every_answer_carries_the_boundary_headers_and_its_cache_rule() {
    let token = test_token("headers");
    let relay = TestRelay::start(bridge_config(&token, &["127.0.0.1:60001"])).await;
    let addr = relay.addr();
    assert!(tern_relay::assets::page_present(), "build the page first (scripts/build-wasm.sh)");

    let (status, head, body) = http_get_with_head(addr, "/", None).await;
    assert_eq!(status, 200);
    assert!(body.contains("<script type=\"module\" src=\"app."), "the page itself");
    // One inline script (the early link's), allowed by its hash; no inline handler.
    let inline: Vec<&[u8]> = tern_relay::assets::inline_scripts(body.as_bytes()).collect();
    assert_eq!(inline.len(), 1, "the early link's inline script alone");
    let policy = header(&head, "content-security-policy").unwrap_or_default();
    let allowed = tern_relay::assets::script_source(inline[0]).to_lowercase();
    assert!(policy.contains(&allowed), "{policy}");
    assert!(!body.contains(" onclick=") && !body.contains(" onload="), "no inline handler");
    assert_boundary_headers(&head, addr, "/");
    assert_eq!(header(&head, "cache-control"), Some("no-store"), "the page is never stored");

    // Content-hashed names (scripts/hash-page.mjs) are kept a year; sw.js revalidates.
    let hashed = |prefix: &str| {
        let file = tern_relay::assets::ASSETS.iter().find(|e| e.path.starts_with(prefix));
        format!("/{}", file.unwrap_or_else(|| panic!("no {prefix}* in the page")).path)
    };
    let immutable = "max-age=31536000, immutable";
    // The worker's script and an SVG (a document when opened alone) carry them all; the page's
    // scripts, wasm, styles and manifest only what a subresource needs.
    for (asset, rule, subresource) in [
        (hashed("app."), immutable, true),
        (hashed("pkg/tern_bg."), immutable, true),
        (hashed("xterm/xterm."), immutable, true),
        (hashed("style."), immutable, true),
        ("/sw.js".into(), "no-cache", false),
        (hashed("manifest."), immutable, true),
        (hashed("icon."), immutable, false),
    ] {
        let (status, head, _) = http_get_with_head(addr, &asset, None).await;
        assert_eq!(status, 200, "{asset}");
        if subresource {
            assert_subresource_headers(&head, &asset);
        } else {
            assert_boundary_headers(&head, addr, &asset);
        }
        assert_eq!(header(&head, "cache-control"), Some(rule), "{asset}");
    }

    let (status, head, body) = http_get_with_head(addr, "/api/info", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    assert_boundary_headers(&head, addr, "/api/info");
    assert_eq!(header(&head, "cache-control"), Some("no-store"));

    for (path, bearer, want) in
        [("/api/info", None, 401), ("/api/nothing", Some(&token), 404), ("/nothing", None, 404)]
    {
        let (status, head, _) = http_get_with_head(addr, path, bearer.map(String::as_str)).await;
        assert_eq!(status, want, "{path}");
        assert_boundary_headers(&head, addr, path);
        assert_eq!(header(&head, "cache-control"), Some("no-store"), "{path}");
    }
    relay.stop().await;
}

/// A WebSocket upgrade as a browser sends it: `origin`, and the token as the page offers it.
async fn ws_upgrade(
    addr: SocketAddr,
    host: Option<&str>,
    origin: Option<&str>,
    token: &str,
) -> Result<Response, WsError> {
    let mut request = format!("ws://{addr}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    if let Some(o) = origin {
        h.insert("origin", HeaderValue::from_str(o).unwrap());
    }
    if let Some(host) = host {
        h.insert("host", HeaderValue::from_str(host).unwrap());
    }
    let protocols = format!("tern, {}", token_subprotocol(token));
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    let tcp = TcpStream::connect(addr).await.unwrap();
    tokio_tungstenite::client_async(request, tcp).await.map(|(_, r)| r)
}

fn refusal(e: WsError) -> u16 {
    match e {
        WsError::Http(r) => r.status().as_u16(),
        other => panic!("expected an HTTP refusal, got {other}"),
    }
}

/// A WebTransport CONNECT to the relay, with `origin` as a browser would name its page.
async fn wt_connect(relay: &TestRelay, origin: Option<&str>) -> Result<(), ConnectingError> {
    let hashes = cert_digests(relay);
    let config =
        ClientConfig::builder().with_bind_default().with_server_certificate_hashes(hashes).build();
    let endpoint = Endpoint::client(config).unwrap();
    let mut options =
        ConnectOptions::builder(format!("https://127.0.0.1:{}/wt", relay.addr().port()));
    if let Some(o) = origin {
        options = options.add_header("origin", o);
    }
    let conn = endpoint.connect(options.build()).await?;
    conn.close(0u32.into(), b"done");
    Ok(())
}

#[tokio::test]
async fn handshakes_from_a_foreign_origin_are_refused() {
    // Not a subprotocol word: the page sends it hex-encoded, never as `?token=`.
    let token = format!("{} with spaces/and+signs", test_token("origin"));
    let mut config = bridge_config(&token, &["127.0.0.1:60001"]);
    config.allow_origin = vec!["https://portal.example:8443".parse().unwrap()];
    let relay = TestRelay::start(config).await;
    let addr = relay.addr();
    let own = format!("http://{addr}");

    // WebSocket: the page's own origin, no Origin (a native client), an allowed one: in.
    for origin in [Some(own.as_str()), None, Some("https://portal.example:8443")] {
        let r = ws_upgrade(addr, None, origin, &token)
            .await
            .unwrap_or_else(|e| panic!("{origin:?}: {e}"));
        assert_eq!(r.status().as_u16(), 101);
    }
    // A foreign page, the relay's port on another host name, another port, `null` (a sandboxed
    // frame), another scheme: 403, before the token is looked at.
    let other_port = format!("http://{}:{}", addr.ip(), addr.port() + 1);
    let foreign = [
        "https://evil.example",
        "http://localhost:1",
        &other_port,
        "null",
        &format!("https://{addr}"),
    ];
    for origin in foreign {
        let e = ws_upgrade(addr, None, Some(origin), &token).await.unwrap_err();
        assert_eq!(refusal(e), 403, "{origin}");
    }
    // A Host naming another site than the Origin is refused (by the Host check first, see
    // `a_dns_rebinding_page_is_refused`).
    let e = ws_upgrade(addr, Some("relay.example"), Some(&own), &token).await.unwrap_err();
    assert_eq!(refusal(e), 421);

    // /api/*: a foreign page's fetch is refused even with the token.
    let (status, _) = http_get_origin(addr, "/api/info", &token, "https://evil.example").await;
    assert_eq!(status, 403);
    let (status, _) = http_get_origin(addr, "/api/info", &token, &own).await;
    assert_eq!(status, 200);

    // WebTransport: the CONNECT's Origin against the host it went to.
    wt_connect(&relay, None).await.expect("a native client (no Origin)");
    wt_connect(&relay, Some(&own)).await.expect("the relay's own page");
    wt_connect(&relay, Some(&format!("http://127.0.0.1:{}", addr.port() + 7)))
        .await
        .expect("the page through a forwarder on another port of the same host");
    wt_connect(&relay, Some("https://portal.example:8443")).await.expect("--allow-origin");
    for origin in ["https://evil.example", "http://localhost:1", "null"] {
        match wt_connect(&relay, Some(origin)).await {
            Err(ConnectingError::SessionRejected) => {}
            other => panic!("{origin}: expected a refused session, got {other:?}"),
        }
    }

    tokio::time::sleep(Duration::from_millis(200)).await;
    let logs = logs();
    assert!(logs.contains("websocket from a foreign Origin refused (403)"), "a clear log line");
    assert!(logs.contains("webtransport connect from a foreign Origin refused (403)"));
    assert!(logs.contains("\"https://evil.example\""), "the refused origin is named");
    assert_not_logged(&token, "token");
    assert_not_logged(&token_subprotocol(&token), "token (as a subprotocol)");
    relay.stop().await;
}

/// `GET path` with the token and an `Origin`, as a page's fetch sends it.
async fn http_get_origin(addr: SocketAddr, path: &str, token: &str, origin: &str) -> (u16, String) {
    http_get_as(addr, &addr.to_string(), path, token, origin).await
}

/// `GET path` sent to `addr` naming `host` in its `Host`, with the token and an `Origin`.
async fn http_get_as(
    addr: SocketAddr,
    host: &str,
    path: &str,
    token: &str,
    origin: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut resp)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

/// Sends `request` (a whole HTTP/1.1 request, `Connection: close`) from the local address
/// `from`; the status of the answer.
async fn raw_status(addr: SocketAddr, from: &str, request: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = socket.connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut resp)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&resp);
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// `GET /api/info` from `from` with `headers` (each `Name: value\r\n`).
async fn api_info_from(addr: SocketAddr, from: &str, headers: &str) -> u16 {
    let req =
        format!("GET /api/info HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n");
    raw_status(addr, from, &req).await
}

/// The attack of finding 2 (issue 32), natively: a foreign page's requests (a `no-cors` POST to
/// `/api/history` carries an Origin and no token; a WebSocket with a wrong token), requests with
/// no credential at all, and wrong tokens, all from 127.0.0.1 (what every client is behind a
/// proxy or `ssh -L`). Then the owner's right token is served at once on every route, and a
/// wrong one is still rate limited.
#[tokio::test]
async fn nobody_can_lock_the_owner_out() {
    let token = test_token("lockout");
    let relay = TestRelay::start(bridge_config(&token, &["127.0.0.1:60001"])).await;
    let addr = relay.addr();
    let evil = "Origin: https://evil.example\r\n";

    for _ in 0..8 {
        let body = r#"{"session":"x","count":1}"#;
        let post = format!(
            "POST /api/history HTTP/1.1\r\nHost: {addr}\r\n{evil}Content-Type: text/plain\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(raw_status(addr, "127.0.0.1", &post).await, 403, "a foreign page's POST");
        let wrong = format!("{evil}Authorization: Bearer wrong-from-a-page\r\n");
        assert_eq!(api_info_from(addr, "127.0.0.1", &wrong).await, 403);
        let e = ws_upgrade(addr, None, Some("https://evil.example"), "wrong").await.unwrap_err();
        assert_eq!(refusal(e), 403, "a foreign page's WebSocket");
    }
    // No credential at all (a link preview, a stray request): refused, not counted.
    for _ in 0..8 {
        assert_eq!(api_info_from(addr, "127.0.0.1", "").await, 401);
    }
    // After all that the owner's token still works, and a wrong one is merely refused.
    let right = format!("Authorization: Bearer {token}\r\n");
    assert_eq!(api_info_from(addr, "127.0.0.1", &right).await, 200, "after the page's requests");
    // Eight wrong tokens from the owner's own address.
    let mut answers = Vec::new();
    for i in 0..8 {
        let wrong = format!("Authorization: Bearer wrong-{i}\r\n");
        answers.push(api_info_from(addr, "127.0.0.1", &wrong).await);
    }
    assert_eq!(&answers[..5], &[401; 5], "five free failures: {answers:?}");
    assert_eq!(answers[7], 429, "then the guesser is rate limited: {answers:?}");
    assert_eq!(api_info_from(addr, "127.0.0.1", "Authorization: Bearer wrong-9\r\n").await, 429);

    // The right token is served at once, on every route and transport.
    assert_eq!(api_info_from(addr, "127.0.0.1", &right).await, 200, "/api/info");
    let own = format!("http://{addr}");
    let r = ws_upgrade(addr, None, Some(&own), &token).await.expect("the owner's WebSocket");
    assert_eq!(r.status().as_u16(), 101);
    let conn = connect(&relay, None).await.expect("the owner's WebTransport connect");
    let (_control, reply) = hello(&conn, bridge_hello(&token, "127.0.0.1", 60001)).await;
    assert!(matches!(reply, ServerMessage::Ready(_)), "the owner's hello: {reply:?}");
    // And the guesser is still blocked.
    assert_eq!(api_info_from(addr, "127.0.0.1", "Authorization: Bearer wrong-10\r\n").await, 429);
    relay.stop().await;
}

/// `--trust-proxy`: behind a proxy every request comes from the proxy's address; the limiter
/// counts the client the proxy forwards, so a guesser behind it blocks only itself. A peer that
/// is no trusted proxy cannot choose its key by writing the headers itself.
#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_counts_alone() {
    let token = test_token("proxy");
    let mut config = bridge_config(&token, &["127.0.0.1:60001"]);
    config.trust_proxy = vec!["127.0.0.1".parse().unwrap()];
    let relay = TestRelay::start(config).await;
    let addr = relay.addr();
    let proxy = "127.0.0.1";
    let wrong = |client: &str, n: u32| {
        format!("X-Forwarded-For: {client}\r\nAuthorization: Bearer wrong-{n}\r\n")
    };

    // Client A, behind the proxy, guesses until it is blocked.
    for n in 0..8 {
        api_info_from(addr, proxy, &wrong("198.51.100.1", n)).await;
    }
    assert_eq!(api_info_from(addr, proxy, &wrong("198.51.100.1", 8)).await, 429, "A is blocked");
    // Client B behind the same proxy is not; neither is one named in `Forwarded: for=`.
    assert_eq!(api_info_from(addr, proxy, &wrong("198.51.100.2", 0)).await, 401, "B is not");
    let fwd = "Forwarded: for=\"[2001:db8::7]:4711\"\r\nAuthorization: Bearer wrong\r\n";
    assert_eq!(api_info_from(addr, proxy, fwd).await, 401);
    // An entry A writes itself before the proxy's is not believed: A stays A.
    let spoof = "X-Forwarded-For: 198.51.100.3, 198.51.100.1\r\nAuthorization: Bearer wrong\r\n";
    assert_eq!(api_info_from(addr, proxy, spoof).await, 429);

    // 127.0.0.2 is no trusted proxy: its forwarded headers are ignored, so naming a new client
    // each time does not give it fresh free guesses.
    for n in 0..8 {
        let client = format!("203.0.113.{n}");
        api_info_from(addr, "127.0.0.2", &wrong(&client, n)).await;
    }
    let fresh = wrong("203.0.113.200", 9);
    assert_eq!(api_info_from(addr, "127.0.0.2", &fresh).await, 429, "keyed on the peer");
    // The right token passes for everyone.
    let right = format!("X-Forwarded-For: 198.51.100.1\r\nAuthorization: Bearer {token}\r\n");
    assert_eq!(api_info_from(addr, proxy, &right).await, 200);
    relay.stop().await;
}

/// DNS rebinding: a page on `evil.example` has its name re-resolve to 127.0.0.1 and talks to the
/// relay as its own origin, so its `Host` and `Origin` agree (`evil.example:PORT`) and the Origin
/// check passes. The relay on loopback answers only to loopback names, addresses and
/// `--allow-host`: the API, the WebSocket upgrade and the page itself get 421. (It has the token
/// here, as a page that learned it would: the Host check is the layer under test.)
#[tokio::test]
async fn a_dns_rebinding_page_is_refused() {
    capture_logs();
    let token = test_token("rebinding");
    let mut config = bridge_config(&token, &["127.0.0.1:60001"]);
    config.allow_host = vec!["relay.example".into()];
    let relay = TestRelay::start(config).await;
    let addr = relay.addr();
    let port = addr.port();
    let evil = format!("evil.example:{port}");
    let evil_origin = format!("http://{evil}");

    let (status, body) = http_get_as(addr, &evil, "/api/info", &token, &evil_origin).await;
    assert_eq!(status, 421, "/api/info from a rebinding page: {body}");
    assert!(body.contains("bad_host"), "{body}");
    let (status, _) = http_get_as(addr, &evil, "/", &token, &evil_origin).await;
    assert_eq!(status, 421, "the page too");
    let e = ws_upgrade(addr, Some(&evil), Some(&evil_origin), &token).await.unwrap_err();
    assert_eq!(refusal(e), 421, "the WebSocket upgrade from a rebinding page");

    // Loopback names and addresses, and --allow-host, are answered.
    for host in
        [format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("relay.example:{port}")]
    {
        let origin = format!("http://{host}");
        let (status, body) = http_get_as(addr, &host, "/api/info", &token, &origin).await;
        assert_eq!(status, 200, "{host}: {body}");
        let r = ws_upgrade(addr, Some(&host), Some(&origin), &token).await.unwrap();
        assert_eq!(r.status().as_u16(), 101, "{host}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(logs().contains("\"evil.example:"), "the refused host is named in the log");
    relay.stop().await;
}
