//! Issue 35: named tokens, read-only links and the audit trail, against the real relay and the
//! real `tern-relay token` command. Each refusal is an attack performed: a revoked token's live
//! links over WebTransport and the WebSocket, a read-only token typing (a command that would
//! leave a file), resizing, pasting, seeding, answering and downloading over both transports.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use support::*;
use tern::relay_client::{self, ConnectError, FailCode, Target, Verifier};
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{
    CHALLENGE_PATH, CarriedPoint, ClientMessage, DownloadRequest, ErrorCode, Hello, INFO_PATH,
    LineBuffer, Mode, ServerMessage, WEBSOCKET_PATH, decode,
};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// `tern-relay token ARGS --state-dir STATE`: its stdout, or a panic with its stderr.
fn token_cli(state: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .arg("token")
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "token {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// `token add`: the token it printed once (and it printed the URL with it too).
fn add_token(state: &Path, args: &[&str]) -> String {
    let out = token_cli(state, &[&["add"], args].concat());
    let token = out
        .lines()
        .find_map(|l| l.split("shown this once: ").nth(1))
        .expect("the token is printed")
        .trim()
        .to_string();
    assert!(out.contains(&format!("#token={token}")), "the URL to open is printed: {out}");
    assert_eq!(tern::relay_proto::proof::token_id(&token).map(str::len), Some(12), "{token}");
    token
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).unwrap();
    b
}

/// As the page connects (`relay_client`): greet naming the token's id, the relay's proof
/// checked, the hello with the page's proof.
async fn page_attempt(
    relay: &TestRelay,
    token: &str,
) -> (wtransport::Connection, Control, Result<Ready, ConnectError>) {
    let conn = connect(relay, None).await.expect("WebTransport connects");
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let verifier = Verifier::new(random32());
    send.write_all(&verifier.greet(token).to_line()).await.unwrap();
    let mut control = Control { send, reader: tern_relay::control::LineReader::new(recv) };
    let line = tokio::time::timeout(Duration::from_secs(20), control.reader.next_line())
        .await
        .expect("an answer")
        .ok();
    let proof = match verifier.control_answer(token, line.as_deref()) {
        Ok(p) => p,
        Err(e) => return (conn, control, Err(e)),
    };
    let target = Target { token: token.into(), bridge: None };
    let mut hello = target.hello(Mode::Spawn, None, None, 1211);
    hello.proof = Some(proof);
    control.send.write_all(&ClientMessage::Hello(hello).to_line()).await.unwrap();
    let line = tokio::time::timeout(Duration::from_secs(20), control.reader.next_line())
        .await
        .expect("an answer")
        .ok();
    let ready = relay_client::answer(line.as_deref());
    (conn, control, ready)
}

/// As the page asks the API: a challenge naming the token's id, then the request.
async fn page_api(relay: &TestRelay, token: &str, route: &str) -> Result<u16, ConnectError> {
    let verifier = Verifier::new(random32());
    let request = tern::relay_proto::encode(&verifier.request(token));
    let (status, body) = http_post(relay.addr(), CHALLENGE_PATH, None, &request).await;
    let authorization = verifier.http_answer(token, status, body.as_bytes())?;
    Ok(http_get_authorized(relay.addr(), route, &authorization).await.0)
}

/// A WebSocket link as a native client opens it (the token offered as a subprotocol and in the
/// hello), with its `ready`.
async fn ws_session(relay: &TestRelay, token: &str) -> (Ws, LineBuffer, Ready) {
    let addr = relay.addr();
    let mut request = format!("ws://{addr}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{addr}")).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    h.insert("user-agent", HeaderValue::from_static("named-tokens-test/1"));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(request, tcp).await.expect("upgrade");
    let hello = ClientMessage::Hello(spawn_hello(Some(token), None));
    ws_send(&mut ws, Frame::Control(&hello.to_line())).await;
    let mut lines = LineBuffer::new(64 * 1024);
    let ready = match ws_control(&mut ws, &mut lines, Duration::from_secs(20)).await {
        Some(ServerMessage::Ready(r)) => r,
        other => panic!("expected ready, got {other:?}"),
    };
    (ws, lines, ready)
}

/// A WebSocket link sending a hello for `resume` (a new session when `None`), before its answer.
async fn ws_open(relay: &TestRelay, token: &str, resume: Option<&str>) -> (Ws, LineBuffer) {
    let addr = relay.addr();
    let mut request = format!("ws://{addr}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{addr}")).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    h.insert("user-agent", HeaderValue::from_static("named-tokens-test/1"));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(request, tcp).await.expect("upgrade");
    let hello = ClientMessage::Hello(spawn_hello(Some(token), resume));
    ws_send(&mut ws, Frame::Control(&hello.to_line())).await;
    (ws, LineBuffer::new(256 * 1024))
}

async fn ws_send(ws: &mut Ws, frame: Frame<'_>) {
    ws.send(Message::Binary(frame.encode().into())).await.unwrap();
}

/// The next control message within `wait` (`None`: none, or the link closed).
async fn ws_control(ws: &mut Ws, lines: &mut LineBuffer, wait: Duration) -> Option<ServerMessage> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some(line) = lines.next_line().unwrap() {
            return Some(decode(&line).expect("a control line"));
        }
        let next = tokio::time::timeout_at(deadline, ws.next()).await.ok()??;
        match next {
            Ok(Message::Binary(b)) => {
                if let Ok(Frame::Control(c)) = Frame::decode(&b) {
                    lines.push(c);
                }
            }
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// The next control message that is not `refused` ... or is: messages until `pick` holds.
async fn wt_until(
    control: &mut Control,
    wait: Duration,
    pick: impl Fn(&ServerMessage) -> bool,
) -> Option<ServerMessage> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let m = control.try_next(left).await?;
        if pick(&m) {
            return Some(m);
        }
    }
}

async fn ws_until(
    ws: &mut Ws,
    lines: &mut LineBuffer,
    wait: Duration,
    mut pick: impl FnMut(&ServerMessage) -> bool,
) -> Option<ServerMessage> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let m = ws_control(ws, lines, left).await?;
        if pick(&m) {
            return Some(m);
        }
    }
}

fn refused(what: &'static str) -> impl Fn(&ServerMessage) -> bool {
    move |m| matches!(m, ServerMessage::Refused { what: w, message } if w == what && message.contains("read-only"))
}

fn ended_bad_token(m: &ServerMessage) -> bool {
    matches!(m, ServerMessage::Ended { code: ErrorCode::BadToken, .. })
}

fn audit_lines(state: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(state.join("audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each audit line is JSON"))
        .collect()
}

fn has_event(lines: &[serde_json::Value], event: &str, who: &str, more: &[(&str, &str)]) -> bool {
    lines
        .iter()
        .any(|l| l["event"] == event && l["who"] == who && more.iter().all(|(k, v)| l[*k] == *v))
}

#[tokio::test]
async fn named_tokens_are_added_listed_revoked_and_expire_closing_live_links_on_both_transports() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let owner = test_token("owner");
    let relay = TestRelay::start(spawn_config(state.path(), &owner)).await;
    let laptop = add_token(state.path(), &["laptop"]);
    let brief = add_token(state.path(), &["brief", "--expires", "3s"]);
    let mode = std::fs::metadata(state.path().join("tokens.json")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the token file is private");
    let stored = std::fs::read_to_string(state.path().join("tokens.json")).unwrap();
    for t in [&laptop, &brief] {
        assert!(!stored.contains(t.rsplit('.').next().unwrap()), "no token's secret is stored");
    }

    // The page's way, over WebTransport: greet with the id, proofs under the token's verifier.
    let (_conn, mut control, ready) = page_attempt(&relay, &laptop).await;
    let ready = ready.expect("a named token opens a session");
    // It can type: the shell runs what it sends.
    let conn2 = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn2, spawn_hello(Some(&laptop), Some(&ready.session))).await;
    let resumed = expect_ready(reply);
    let mut mosh = MoshOverRelay::new(conn2, _c, &resumed.key.clone().unwrap(), 1200);
    mosh.type_bytes(b"echo laptop-$((40+2))\n");
    assert!(
        mosh.run_until(Duration::from_secs(15), |s| s.server_state().contains(b"laptop-42")).await
    );
    // A paste begins: audited with its size (its content never is).
    let (_paste, _answer) = open_upload(&mosh.conn, &"ef".repeat(32), 4).await;
    // The API, the page's way; and the WebSocket, a native client's way.
    assert_eq!(page_api(&relay, &laptop, INFO_PATH).await.unwrap(), 200);
    let (mut ws, mut lines, _) = ws_session(&relay, &laptop).await;

    // The relay writes when each token was last used within a watch interval: wait for it.
    let used = state.path().join("tokens-used.json");
    let laptop_id = tern::relay_proto::proof::token_id(&laptop).unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&used).is_ok_and(|u| u.contains(&laptop_id)) {
        assert!(Instant::now() < deadline, "the last use is written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let list = token_cli(state.path(), &["list"]);
    assert!(list.contains("laptop") && list.contains("read-write"), "{list}");
    assert!(list.contains("brief") && list.lines().count() == 3, "{list}");
    // When each was last used: the relay wrote laptop's (created and last used are both dates);
    // brief was never used yet.
    let line = |name: &str| list.lines().find(|l| l.starts_with(name)).unwrap().to_string();
    assert!(line("laptop").matches("Z ").count() >= 2, "{list}");
    assert!(line("brief").contains("never"), "{list}");

    // Revoked: every live link of the token ends within a second, over both transports.
    token_cli(state.path(), &["revoke", "laptop"]);
    let revoked_at = Instant::now();
    let wt = wt_until(&mut mosh.control, Duration::from_secs(1), ended_bad_token).await;
    assert!(wt.is_some(), "the WebTransport link ended within a second");
    let ws_end = ws_until(&mut ws, &mut lines, Duration::from_secs(1), ended_bad_token).await;
    assert!(ws_end.is_some(), "the WebSocket link ended within a second");
    println!("links closed {:?} after the revoke returned", revoked_at.elapsed());
    // The page's first link was moved off by the second; it holds no session. A new attempt
    // with the revoked token is refused, plainly; the API too.
    drop(control.send.finish().await);
    let (_c, _ctl, again) = page_attempt(&relay, &laptop).await;
    match again {
        // The page says its own words for a token the relay refuses.
        Err(ConnectError::Fatal { code: FailCode::BadToken, .. }) => {}
        other => panic!("a revoked token is refused: {other:?}"),
    }
    let (status, _) = http_post(
        relay.addr(),
        CHALLENGE_PATH,
        None,
        &tern::relay_proto::encode(&Verifier::new(random32()).request(&laptop)),
    )
    .await;
    assert_eq!(status, 401);

    // Expiry: a live link of a token that expires ends when it does.
    let (_conn3, mut control3, ready3) = page_attempt(&relay, &brief).await;
    ready3.expect("the brief token works before it expires");
    let end = wt_until(&mut control3, Duration::from_secs(8), ended_bad_token).await;
    match end {
        Some(ServerMessage::Ended { message, .. }) => assert!(message.contains("expired")),
        other => panic!("the expiring token's link ends: {other:?}"),
    }
    let (_c, _ctl, late) = page_attempt(&relay, &brief).await;
    assert!(late.is_err(), "an expired token opens nothing");

    // The audit trail: added, revoked, attached, ended, refused; never a token or key.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let audit = audit_lines(state.path());
    assert!(has_event(&audit, "token_added", "laptop", &[]), "{audit:?}");
    assert!(has_event(&audit, "token_revoked", "laptop", &[]), "{audit:?}");
    assert!(has_event(&audit, "attach", "laptop", &[("link", "webtransport")]), "{audit:?}");
    assert!(has_event(&audit, "detach", "laptop", &[("link", "websocket")]), "{audit:?}");
    assert!(has_event(&audit, "attach", "brief", &[]), "{audit:?}");
    assert!(has_event(&audit, "upload", "laptop", &[("link", "webtransport")]), "{audit:?}");
    assert!(audit.iter().any(|l| l["event"] == "refused"), "{audit:?}");
    assert!(
        has_event(&audit, "attach", "laptop", &[("agent", "named-tokens-test/1")]),
        "the browser is named: {audit:?}"
    );
    let text = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    for secret in [&owner, &laptop, &brief, &ready.key.clone().unwrap()] {
        assert!(!text.contains(secret.as_str()), "a secret in the audit trail");
        assert!(!text.contains(secret.rsplit('.').next().unwrap()), "a secret in the audit trail");
    }
    assert!(!text.contains("laptop-42") && !text.contains("echo"), "no typed text or screen");
    let mode = std::fs::metadata(state.path().join("audit.log")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let printed = std::process::Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["audit", "--since", "1h", "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.contains("token_revoked"), "tern-relay audit prints it: {printed}");
    relay.stop().await;
}

/// A viewer's terminal: the relay's `screen` updates applied as the page writes them.
struct ViewerTerm(tern::terminal::Emulator);

impl ViewerTerm {
    fn new() -> Self {
        ViewerTerm(tern::terminal::Emulator::new(tern::terminal::Size { cols: 1, rows: 1 }))
    }
    /// Applies `m` when it is a screen update; true when it was.
    fn apply(&mut self, m: &ServerMessage) -> bool {
        let ServerMessage::Screen { cols, rows, full, data } = m else { return false };
        if *full {
            self.0 =
                tern::terminal::Emulator::new(tern::terminal::Size { cols: *cols, rows: *rows });
        }
        self.0.feed(data);
        true
    }
    fn contains(&self, s: &str) -> bool {
        tern::terminal::screen_text(self.0.framebuffer()).rows.join("\n").contains(s)
    }
}

/// A read-only token (any transport) asking for a new session: refused, with the reason.
fn refused_new_session(m: Option<ServerMessage>) {
    match m {
        Some(ServerMessage::Error { code: ErrorCode::BadRequest, message }) => {
            assert!(message.contains("read-only") && message.contains("not start"), "{message}")
        }
        other => panic!("a read-only link cannot start a session: {other:?}"),
    }
}

#[tokio::test]
async fn a_read_only_token_watches_but_cannot_start_type_resize_paste_seed_answer_or_download() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let owner = test_token("owner");
    let relay = TestRelay::start(spawn_config(state.path(), &owner)).await;
    let viewer = add_token(state.path(), &["viewer", "--read-only"]);
    let list = token_cli(state.path(), &["list"]);
    assert!(list.contains("viewer") && list.contains("read-only"), "{list}");
    let marker = state.path().join("typed-by-a-read-only-link");

    // A read-only token cannot start a session, on either transport: the hello is refused (and
    // no mosh-server is started for it).
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn, spawn_hello(Some(&viewer), None)).await;
    refused_new_session(Some(reply));
    let (mut ws, mut lines) = ws_open(&relay, &viewer, None).await;
    refused_new_session(ws_control(&mut ws, &mut lines, Duration::from_secs(20)).await);
    assert!(recorded_pids(state.path()).is_empty(), "no session was started for it");

    // The owner's session, driven by the owner's page.
    let conn = connect(&relay, None).await.unwrap();
    let (control, reply) = hello(&conn, spawn_hello(Some(&owner), None)).await;
    let owner_ready = expect_ready(reply);
    let key = owner_ready.key.clone().unwrap();
    let mut driver = MoshOverRelay::page(conn, control, &owner_ready, 80, 24);
    let id = owner_ready.session.clone();

    // The read-only token watches it over WebTransport: no key, the screen as `screen` lines.
    let conn = connect(&relay, None).await.unwrap();
    let (mut control, reply) = hello(&conn, spawn_hello(Some(&viewer), Some(&id))).await;
    let ready = expect_ready(reply);
    assert!(ready.view && ready.key.is_none() && ready.point.is_none(), "a viewer holds no key");
    let mut term = ViewerTerm::new();
    driver.type_bytes(b"echo viewer-sees-$((6*7))\n");
    let started = Instant::now();
    let seen = async {
        loop {
            tokio::select! {
                m = control.try_next(Duration::from_secs(20)) => {
                    let m = m.expect("screen updates come");
                    if term.apply(&m) && term.contains("viewer-sees-42") {
                        return;
                    }
                }
                _ = driver.run_until(Duration::from_millis(50), |_| false) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), seen).await.expect("the viewer sees the typing");
    println!("the viewer saw the owner's typing {:?} after it was typed", started.elapsed());

    // The attack: a viewer that somehow knows the session's key sends authentic mosh input
    // (it types a command that would leave a file) and a resize.
    let mut forged = page_session(&owner_ready, 80, 24);
    forged.raise_next_seq(1 << 40);
    forged.handle_input(
        tern::time::Instant::from_micros(1000),
        format!("touch {}\n", marker.display()).as_bytes(),
    );
    forged.handle_resize(tern::time::Instant::from_micros(2000), 120, 40);
    while let Some(d) = forged.poll_transmit() {
        let _ = conn.send_datagram(&d);
    }
    let mut viewer_control = control;
    assert!(
        wt_until(&mut viewer_control, Duration::from_secs(10), refused("input")).await.is_some()
    );
    let seed = ClientMessage::Seed { point: CarriedPoint::from_text("not-a-point") };
    viewer_control.send.write_all(&seed.to_line()).await.unwrap();
    assert!(
        wt_until(&mut viewer_control, Duration::from_secs(10), refused("seed")).await.is_some()
    );
    let answer = ClientMessage::Answer {
        id: "0".repeat(32),
        answer: tern::relay_proto::OfferAnswer::Dismissed,
    };
    viewer_control.send.write_all(&answer.to_line()).await.unwrap();
    assert!(
        wt_until(&mut viewer_control, Duration::from_secs(10), refused("answer")).await.is_some()
    );
    // A paste and a download: each stream answered with the refusal.
    let (_s, mut recv) = open_upload(&conn, &"ab".repeat(32), 10).await;
    let reply = read_line(&mut recv).await;
    assert!(reply.contains("error") && reply.contains("read-only"), "{reply}");
    let (mut send, mut recv) = conn.open_bi().await.unwrap().await.unwrap();
    let request = DownloadRequest { download: "0".repeat(32), from: 0 };
    send.write_all(&tern::relay_proto::encode_line(&request)).await.unwrap();
    let reply = read_line(&mut recv).await;
    assert!(reply.contains("error") && reply.contains("read-only"), "{reply}");

    // The WebSocket: it watches, and the same attacks are refused.
    let (mut ws, mut lines) = ws_open(&relay, &viewer, Some(&id)).await;
    match ws_control(&mut ws, &mut lines, Duration::from_secs(20)).await {
        Some(ServerMessage::Ready(r)) => assert!(r.view && r.key.is_none()),
        other => panic!("expected a viewer's ready, got {other:?}"),
    }
    let mut ws_term = ViewerTerm::new();
    let m = ws_until(&mut ws, &mut lines, Duration::from_secs(10), |m| {
        matches!(m, ServerMessage::Screen { .. })
    })
    .await;
    assert!(
        ws_term.apply(&m.unwrap()) && ws_term.contains("viewer-sees-42"),
        "the first paint shows the screen"
    );
    let mut forged = page_session(&owner_ready, 80, 24);
    forged.raise_next_seq(1 << 41);
    forged.handle_input(
        tern::time::Instant::from_micros(1000),
        format!("touch {}\n", marker.display()).as_bytes(),
    );
    while let Some(d) = forged.poll_transmit() {
        ws_send(&mut ws, Frame::Datagram(&d)).await;
    }
    assert!(
        ws_until(&mut ws, &mut lines, Duration::from_secs(10), refused("input")).await.is_some()
    );
    ws_send(&mut ws, Frame::Control(&seed.to_line())).await;
    assert!(
        ws_until(&mut ws, &mut lines, Duration::from_secs(10), refused("seed")).await.is_some()
    );
    ws_send(&mut ws, Frame::Open(4)).await;
    let header = serde_json::json!({"hash": "cd".repeat(32), "size": 10, "mime": "text/plain"});
    ws_send(&mut ws, Frame::Data(4, format!("{header}\n").as_bytes())).await;
    let mut stream_reply = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !stream_reply.contains('\n') {
        let Ok(Some(Ok(Message::Binary(b)))) = tokio::time::timeout_at(deadline, ws.next()).await
        else {
            panic!("no answer on the WebSocket's upload stream: {stream_reply:?}")
        };
        if let Ok(Frame::Data(4, d)) = Frame::decode(&b) {
            stream_reply.push_str(&String::from_utf8_lossy(d));
        }
    }
    assert!(stream_reply.contains("read-only"), "{stream_reply}");

    // Nothing they sent reached the shell: the command never ran, the size never changed.
    driver.run_until(Duration::from_secs(3), |_| false).await;
    assert!(!marker.exists(), "a read-only link's typing ran in the shell");
    let size = driver.session.server_state().framebuffer().size();
    assert_eq!((size.cols, size.rows), (80, 24), "a viewer resized the session");

    // Each refusal is logged in the audit trail, per transport; no secret is.
    let audit = audit_lines(state.path());
    for (kind, link) in [
        ("new-session", "webtransport"),
        ("new-session", "websocket"),
        ("input", "webtransport"),
        ("seed", "webtransport"),
        ("answer", "webtransport"),
        ("paste", "webtransport"),
        ("download", "webtransport"),
        ("input", "websocket"),
        ("seed", "websocket"),
        ("paste", "websocket"),
    ] {
        assert!(
            has_event(&audit, "refused", "viewer", &[("kind", kind), ("link", link)]),
            "{kind} over {link} audited: {audit:?}"
        );
    }
    assert!(has_event(&audit, "viewer_joined", "viewer", &[("kind", "read-only")]), "{audit:?}");
    let text = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    for secret in [&owner, &viewer, &key] {
        assert!(!text.contains(secret.as_str()), "a secret in the audit trail");
    }
    assert!(!text.contains("touch") && !text.contains("viewer-sees"), "content in the audit trail");
    assert!(logs().contains("read-only link's request refused"), "the refusal is logged");

    // Reading stays open to it: the session list (the relay's copy) over the API.
    assert_eq!(page_api(&relay, &viewer, tern::relay_proto::SESSIONS_PATH).await.unwrap(), 200);

    // The shell ends: so does the viewer's link, saying so.
    driver.type_bytes(b"exit\n");
    let over = viewer_until(&mut driver, &mut viewer_control, Duration::from_secs(20), |m| {
        matches!(m, ServerMessage::Ended { code: ErrorCode::SessionEnded, .. })
    })
    .await;
    assert!(over.is_some(), "the viewer is told the session ended");
    relay.stop().await;
}

async fn read_line(recv: &mut wtransport::RecvStream) -> String {
    let mut reader = tern_relay::control::LineReader::new(recv);
    let line = tokio::time::timeout(Duration::from_secs(10), reader.next_line())
        .await
        .expect("an answer within 10 s")
        .expect("a line");
    String::from_utf8_lossy(&line).into_owned()
}

/// The owner's WebTransport page driving a new session: its mosh client and `ready`.
async fn owner_session(
    relay: &TestRelay,
    owner: &str,
) -> (MoshOverRelay<tern::terminal::Complete>, Ready) {
    let conn = connect(relay, None).await.unwrap();
    let (control, reply) = hello(&conn, spawn_hello(Some(owner), None)).await;
    let ready = expect_ready(reply);
    let mut mosh = MoshOverRelay::page(conn, control, &ready, 80, 24);
    assert!(mosh.run_until(Duration::from_secs(15), |s| s.has_heard_server()).await);
    (mosh, ready)
}

/// The token in a viewer URL (`#token=T&view=ID`).
fn url_token(url: &str) -> String {
    url.split("#token=").nth(1).unwrap().split('&').next().unwrap().to_string()
}

/// Runs the driver while waiting for the viewer's control stream to show `pick`.
async fn viewer_until(
    driver: &mut MoshOverRelay<tern::terminal::Complete>,
    control: &mut Control,
    wait: Duration,
    mut pick: impl FnMut(&ServerMessage) -> bool,
) -> Option<ServerMessage> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        tokio::select! {
            m = control.try_next(left) => {
                let m = m?;
                if pick(&m) {
                    return Some(m);
                }
            }
            _ = driver.run_until(Duration::from_millis(20), |_| false) => {}
        }
    }
}

#[tokio::test]
async fn a_share_link_watches_its_session_only_and_ends_when_revoked_or_expired_on_both_transports()
{
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let owner = test_token("owner");
    let relay = TestRelay::start(spawn_config(state.path(), &owner)).await;
    let (mut a, a_ready) = owner_session(&relay, &owner).await;
    let (mut b, b_ready) = owner_session(&relay, &owner).await;
    let (id_a, id_b) = (a_ready.session.clone(), b_ready.session.clone());

    // `tern share` in session A's shell prints the viewer's URL.
    let out = state.path().join("share-url");
    a.type_bytes(format!("tern share --expires 1h > {}\n", out.display()).as_bytes());
    let deadline = Instant::now() + Duration::from_secs(20);
    let url = loop {
        a.run_until(Duration::from_millis(100), |_| false).await;
        if let Ok(u) = std::fs::read_to_string(&out)
            && u.contains("#token=")
        {
            break u.trim().to_string();
        }
        assert!(Instant::now() < deadline, "tern share printed no URL: {:?}", a.screen_text());
    };
    assert!(url.ends_with(&format!("&view={id_a}")), "{url}");
    let share = url_token(&url);

    // Bound to A: it cannot watch B, nor start a session, on either transport.
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) =
        hello(&conn, Hello { view: true, ..spawn_hello(Some(&share), Some(&id_b)) }).await;
    assert!(
        matches!(&reply, ServerMessage::Error { code: ErrorCode::NotYourSession, message } if message.contains("another session")),
        "{reply:?}"
    );
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn, spawn_hello(Some(&share), None)).await;
    refused_new_session(Some(reply));
    let (mut ws, mut lines) = ws_open(&relay, &share, Some(&id_b)).await;
    let m = ws_control(&mut ws, &mut lines, Duration::from_secs(20)).await;
    assert!(
        matches!(m, Some(ServerMessage::Error { code: ErrorCode::NotYourSession, .. })),
        "{m:?}"
    );
    let (mut ws, mut lines) = ws_open(&relay, &share, None).await;
    refused_new_session(ws_control(&mut ws, &mut lines, Duration::from_secs(20)).await);

    // It watches A over WebTransport and the WebSocket; the owner's page hears how many watch.
    let conn = connect(&relay, None).await.unwrap();
    let (mut viewer, reply) =
        hello(&conn, Hello { view: true, ..spawn_hello(Some(&share), Some(&id_a)) }).await;
    assert!(expect_ready(reply).view);
    let (mut ws, mut lines) = ws_open(&relay, &share, Some(&id_a)).await;
    assert!(matches!(
        ws_control(&mut ws, &mut lines, Duration::from_secs(20)).await,
        Some(ServerMessage::Ready(r)) if r.view
    ));
    let count = wt_until(&mut a.control, Duration::from_secs(10), |m| {
        matches!(m, ServerMessage::Viewers { count: 2 })
    })
    .await;
    assert!(count.is_some(), "the owner's page is told two watch");
    let mut term = ViewerTerm::new();
    let mut ws_term = ViewerTerm::new();
    a.type_bytes(b"echo shared-$((20+3))\n");
    let typed = Instant::now();
    let seen = viewer_until(&mut a, &mut viewer, Duration::from_secs(20), |m| {
        term.apply(m) && term.contains("shared-23")
    })
    .await;
    assert!(seen.is_some(), "the WebTransport viewer sees the owner's typing");
    println!("share viewer lag (WebTransport): {:?}", typed.elapsed());
    let m = ws_until(&mut ws, &mut lines, Duration::from_secs(20), |m| {
        ws_term.apply(m) && ws_term.contains("shared-23")
    })
    .await;
    assert!(m.is_some(), "the WebSocket viewer sees the owner's typing");
    // B's screen never reaches A's viewer.
    b.type_bytes(b"echo only-in-b\n");
    b.run_until(Duration::from_secs(2), |_| false).await;
    assert!(b.screen_text().contains("only-in-b"), "B ran it");
    assert!(!term.contains("only-in-b"));

    // The history: not allowed for this share.
    let request = tern::relay_proto::encode(&tern::relay_proto::HistoryRequest {
        session: id_a.clone(),
        before: None,
        count: 10,
    });
    let (status, body) =
        http_post(relay.addr(), tern::relay_proto::HISTORY_PATH, Some(&share), &request).await;
    assert_eq!(status, 403, "a share without --allow-history reads no history");
    assert!(body.contains("did not share the session's history"), "{body}");

    // A viewer cannot share (the API), the owner can, and ends every share: viewers are closed
    // within a second on both transports, told that sharing ended.
    let end = tern::relay_proto::encode(&tern::relay_proto::ShareRequest {
        session: id_a.clone(),
        end: true,
        ..Default::default()
    });
    let (status, _) =
        http_post(relay.addr(), tern::relay_proto::SHARE_PATH, Some(&share), &end).await;
    assert_eq!(status, 403, "a viewer cannot share or end sharing");
    let (status, body) =
        http_post(relay.addr(), tern::relay_proto::SHARE_PATH, Some(&owner), &end).await;
    assert_eq!(status, 200, "{body}");
    let ended_at = Instant::now();
    let sharing_ended = |m: &ServerMessage| matches!(m, ServerMessage::Ended { code: ErrorCode::BadToken, message } if message.contains("ended sharing"));
    assert!(wt_until(&mut viewer, Duration::from_secs(1), sharing_ended).await.is_some());
    assert!(ws_until(&mut ws, &mut lines, Duration::from_secs(1), sharing_ended).await.is_some());
    println!("viewers closed {:?} after sharing ended", ended_at.elapsed());
    let count = wt_until(&mut a.control, Duration::from_secs(5), |m| {
        matches!(m, ServerMessage::Viewers { count: 0 })
    })
    .await;
    assert!(count.is_some(), "the owner's page is told nobody watches");

    // A share made by the owner's page (the API), with the history and a short life: it reads
    // the history, and its viewer is closed when it expires.
    let make = tern::relay_proto::encode(&tern::relay_proto::ShareRequest {
        session: id_a.clone(),
        expires: Some(2),
        allow_history: true,
        end: false,
    });
    let (status, body) =
        http_post(relay.addr(), tern::relay_proto::SHARE_PATH, Some(&owner), &make).await;
    assert_eq!(status, 200, "{body}");
    let made: tern::relay_proto::ShareReply = tern::relay_proto::decode(body.as_bytes()).unwrap();
    let brief = url_token(made.url.as_deref().unwrap());
    let (status, _) =
        http_post(relay.addr(), tern::relay_proto::HISTORY_PATH, Some(&brief), &request).await;
    assert_eq!(status, 200, "a share with the history may read it");
    let conn = connect(&relay, None).await.unwrap();
    let (mut viewer, reply) =
        hello(&conn, Hello { view: true, ..spawn_hello(Some(&brief), Some(&id_a)) }).await;
    assert!(expect_ready(reply).view);
    let expired = wt_until(
        &mut viewer,
        Duration::from_secs(8),
        |m| matches!(m, ServerMessage::Ended { message, .. } if message.contains("expired")),
    )
    .await;
    assert!(expired.is_some(), "an expired share's viewer is closed");

    // The audit trail: made, ended, joined, left; no token, no screen.
    let audit = audit_lines(state.path());
    assert!(has_event(&audit, "share_created", "tern share", &[("session", &id_a)]), "{audit:?}");
    assert!(has_event(&audit, "share_created", "owner", &[("kind", "with-history")]), "{audit:?}");
    assert!(has_event(&audit, "share_ended", "owner", &[("session", &id_a)]), "{audit:?}");
    assert!(
        audit.iter().any(|l| l["event"] == "viewer_joined"
            && l["link"] == "websocket"
            && l["kind"] == "share"),
        "{audit:?}"
    );
    assert!(
        audit.iter().any(|l| l["event"] == "viewer_left" && l["link"] == "webtransport"),
        "{audit:?}"
    );
    let text = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    for secret in [&owner, &share, &brief] {
        assert!(!text.contains(secret.as_str()), "a token in the audit trail");
    }
    assert!(!text.contains("shared-23"), "screen content in the audit trail");
    drop(b);
    relay.stop().await;
}
