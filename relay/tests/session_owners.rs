//! Issue 35 item 3: sessions belong to whoever started them. Token B attacks token A's session
//! every way there is: lists the sessions, resumes it and takes it over (over WebTransport and
//! over the WebSocket), reads and searches its history; each is refused (`not_your_session`)
//! and audited, and A's link keeps its session. The owner's token sees and takes both.

mod support;

use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use support::*;
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{
    ClientMessage, ErrorCode, HISTORY_PATH, HISTORY_SEARCH_PATH, HistoryRequest, HistorySearch,
    LineBuffer, SESSIONS_PATH, ServerMessage, WEBSOCKET_PATH, decode,
};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// `tern-relay token add NAME --state-dir STATE`: the token it printed once.
fn add_token(state: &Path, name: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["token", "add", name, "--state-dir"])
        .arg(state)
        .output()
        .unwrap();
    assert!(out.status.success(), "token add: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.split("shown this once: ").nth(1))
        .expect("the token is printed")
        .trim()
        .to_string()
}

/// A WebSocket link as a native client opens it (the token as a subprotocol and in the hello),
/// resuming `resume` if given: the relay's first answer.
async fn ws_hello(relay: &TestRelay, token: &str, resume: Option<&str>) -> ServerMessage {
    let addr = relay.addr();
    let mut request = format!("ws://{addr}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{addr}")).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(request, tcp).await.expect("upgrade");
    let hello = ClientMessage::Hello(spawn_hello(Some(token), resume));
    ws.send(Message::Binary(Frame::Control(&hello.to_line()).encode().into())).await.unwrap();
    let mut lines = LineBuffer::new(64 * 1024);
    loop {
        if let Some(line) = lines.next_line().unwrap() {
            return decode(&line).expect("a control line");
        }
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("an answer within 20 s")
            .expect("the socket stays open until the answer")
            .unwrap();
        if let Message::Binary(b) = msg
            && let Ok(Frame::Control(c)) = Frame::decode(&b)
        {
            lines.push(c);
        }
    }
}

/// A WebTransport link with the token in its hello, resuming `resume` if given.
async fn wt_hello(
    relay: &TestRelay,
    token: &str,
    resume: Option<&str>,
) -> (Control, ServerMessage) {
    let conn = connect(relay, None).await.expect("WebTransport connects");
    let (control, answer) = hello(&conn, spawn_hello(Some(token), resume)).await;
    // The connection must outlive the answer's use: leak it into the control's lifetime.
    std::mem::forget(conn);
    (control, answer)
}

fn not_yours(m: ServerMessage, what: &str) {
    match m {
        ServerMessage::Error { code: ErrorCode::NotYourSession, message } => {
            assert!(message.contains("someone else"), "{what}: said plainly: {message}")
        }
        other => panic!("{what}: refused as not_your_session, got {other:?}"),
    }
}

/// The ids `/api/sessions` lists for `token`.
async fn listed(relay: &TestRelay, token: &str) -> Vec<String> {
    let (status, body) = http_get(relay.addr(), SESSIONS_PATH, Some(token)).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().into()).collect()
}

async fn history(relay: &TestRelay, token: &str, session: &str) -> (u16, String) {
    let page = HistoryRequest { session: session.into(), before: None, count: 10 };
    let body = tern::relay_proto::encode(&page);
    http_post(relay.addr(), HISTORY_PATH, Some(token), &body).await
}

async fn search(relay: &TestRelay, token: &str, session: &str) -> (u16, String) {
    let s = HistorySearch {
        session: session.into(),
        pattern: "a".into(),
        case_sensitive: false,
        regex: false,
    };
    http_post(relay.addr(), HISTORY_SEARCH_PATH, Some(token), &tern::relay_proto::encode(&s)).await
}

#[tokio::test]
async fn another_identity_can_neither_list_resume_take_over_nor_read_a_session() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let owner = test_token("owners");
    let relay = TestRelay::start(spawn_config(state.path(), &owner)).await;
    let alice = add_token(state.path(), "alice");
    let bob = add_token(state.path(), "bob");

    // Alice starts one over WebTransport and keeps it attached; Bob one over the WebSocket.
    let (mut alice_control, answer) = wt_hello(&relay, &alice, None).await;
    let a = expect_ready(answer).session;
    let b = match ws_hello(&relay, &bob, None).await {
        ServerMessage::Ready(r) => r.session,
        other => panic!("bob's session: {other:?}"),
    };
    let record = std::fs::read_to_string(state.path().join(format!("sessions/{a}.json"))).unwrap();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["owner"], "alice", "the record says who started it");

    // The list: each sees their own; the owner sees both.
    assert_eq!(listed(&relay, &alice).await, vec![a.clone()]);
    assert_eq!(listed(&relay, &bob).await, vec![b.clone()]);
    let mut all = listed(&relay, &owner).await;
    all.sort();
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(all, both, "the owner sees every session");

    // Bob takes over Alice's session while her link drives it: refused on both transports.
    not_yours(wt_hello(&relay, &bob, Some(&a)).await.1, "take-over over WebTransport");
    not_yours(ws_hello(&relay, &bob, Some(&a)).await, "take-over over the WebSocket");
    // Her link was not moved off: it still answers pings and got no `moved`.
    alice_control
        .send
        .write_all(&ClientMessage::Ping.to_line())
        .await
        .expect("alice's control stream is open");
    match alice_control.try_next(Duration::from_secs(10)).await {
        Some(ServerMessage::Pong) => {}
        other => panic!("alice's link keeps its session: {other:?}"),
    }
    // Her link gone, Bob resumes it: refused on both transports.
    drop(alice_control);
    tokio::time::sleep(Duration::from_millis(200)).await;
    not_yours(wt_hello(&relay, &bob, Some(&a)).await.1, "resume over WebTransport");
    not_yours(ws_hello(&relay, &bob, Some(&a)).await, "resume over the WebSocket");

    // Its history, a page and a search: refused; Alice and the owner read it.
    for (status, body) in [history(&relay, &bob, &a).await, search(&relay, &bob, &a).await] {
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("not_your_session"), "{body}");
    }
    assert_eq!(history(&relay, &alice, &a).await.0, 200);
    assert_eq!(history(&relay, &owner, &a).await.0, 200);
    assert_eq!(history(&relay, &alice, &b).await.0, 403, "nor Alice Bob's");
    // Its pictures over HTTP (the page's way before a link is up): refused before the store is
    // read (image 1 need not exist: Alice's own request gets "no such image", not a refusal).
    let picture = tern::relay_proto::ImageRequest { session: a.clone(), image: 1 };
    let picture = tern::relay_proto::encode(&picture);
    let (status, body) =
        http_post(relay.addr(), tern::relay_proto::IMAGE_PATH, Some(&bob), &picture).await;
    assert_eq!(status, 403, "bob reads a picture of alice's session: {body}");
    assert!(body.contains("not_your_session"), "{body}");
    let (status, body) =
        http_post(relay.addr(), tern::relay_proto::IMAGE_PATH, Some(&alice), &picture).await;
    assert_eq!(status, 404, "alice's own: no such image yet: {body}");

    // The owner takes both, on either transport; Alice resumes her own.
    let (_c, answer) = wt_hello(&relay, &owner, Some(&a)).await;
    assert_eq!(expect_ready(answer).session, a);
    match ws_hello(&relay, &owner, Some(&b)).await {
        ServerMessage::Ready(r) => assert_eq!(r.session, b),
        other => panic!("the owner takes bob's: {other:?}"),
    }
    let (_c2, answer) = wt_hello(&relay, &alice, Some(&a)).await;
    assert_eq!(expect_ready(answer).session, a, "alice takes hers back from the owner");

    // Every refusal is in the audit trail, naming Bob and Alice's session.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let audit = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    let refusals = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["event"] == "refused" && l["who"] == "bob" && l["session"] == a.as_str())
        .count();
    assert_eq!(refusals, 7, "4 attaches, 2 history reads and a picture refused: {audit}");
    for link in ["webtransport", "websocket"] {
        let on_link = format!("\"link\":\"{link}\"");
        let n = audit.lines().filter(|l| l.contains("another identity") && l.contains(&on_link));
        assert_eq!(n.count(), 2, "a take-over and a resume over {link}: {audit}");
    }
    assert!(audit.contains("another identity's session"), "{audit}");
    relay.stop().await;
}

#[test]
fn a_record_from_before_owners_belongs_to_the_owner() {
    let old = r#"{"id":"0123456789abcdef","port":60001,"key":"AAAAAAAAAAAAAAAAAAAAAA","pid":null,"created":1}"#;
    let r: tern_relay::state::SessionRecord = serde_json::from_str(old).unwrap();
    assert_eq!(r.owner_name(), "owner");
}

/// A WebTransport client connecting from `bind` with `X-Forwarded-User: user` on its CONNECT.
async fn wt_with_identity(relay: &TestRelay, bind: [u8; 4], user: &str) -> wtransport::Connection {
    let config = wtransport::ClientConfig::builder()
        .with_bind_address(std::net::SocketAddr::from((bind, 0)))
        .with_server_certificate_hashes(cert_digests(relay))
        .build();
    let endpoint = wtransport::Endpoint::client(config).unwrap();
    let url = format!("https://127.0.0.1:{}/wt", relay.addr().port());
    let options = wtransport::endpoint::ConnectOptions::builder(url)
        .add_header("X-Forwarded-User", user)
        .build();
    let conn = endpoint.connect(options).await.expect("WebTransport connects");
    std::mem::forget(endpoint);
    conn
}

/// A WebTransport CONNECT through a trusted front door (an HTTP/3 proxy that passes WebTransport
/// on) names its person as an HTTP request does; from any other address the header is ignored.
#[tokio::test]
async fn a_webtransport_connect_from_a_trusted_proxy_names_its_person() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let owner = test_token("owners-wt");
    let mut config = spawn_config(state.path(), &owner);
    config.trust_proxy = vec!["127.0.0.2".parse().unwrap()];
    config.identity_header = Some("X-Forwarded-User".into());
    let relay = TestRelay::start(config).await;

    // From the proxy's address: carol, with no token; her session is hers.
    let conn = wt_with_identity(&relay, [127, 0, 0, 2], "carol").await;
    let (_c, answer) = hello(&conn, spawn_hello(None, None)).await;
    let carol = expect_ready(answer).session;
    let record =
        std::fs::read_to_string(state.path().join(format!("sessions/{carol}.json"))).unwrap();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["owner"], "proxy:carol");
    // Dave, through the same door, may not take it.
    let conn = wt_with_identity(&relay, [127, 0, 0, 2], "dave").await;
    not_yours(hello(&conn, spawn_hello(None, Some(&carol))).await.1, "dave over WebTransport");

    // The same header from another address: ignored, so no token, no session.
    let conn = wt_with_identity(&relay, [127, 0, 0, 1], "carol").await;
    match hello(&conn, spawn_hello(None, Some(&carol))).await.1 {
        ServerMessage::Error { code: ErrorCode::BadToken, .. } => {}
        other => panic!("a spoofed identity opens nothing: {other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let audit = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    assert!(audit.contains("\"who\":\"proxy:carol\""), "{audit}");
    assert!(audit.contains("not a trusted proxy"), "the spoof is audited: {audit}");
    relay.stop().await;
}
