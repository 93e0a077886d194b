//! Issue 32, finding 4: the token must not reach logs. The real binary, as a service manager runs
//! it (stdout a pipe, not a terminal) with `RUST_LOG=trace`: a WebTransport session and a
//! WebSocket session are opened and something is typed; neither the token (plain or in hex, as
//! tungstenite prints frames), nor a mosh key, nor the typed text appears anywhere in stdout or
//! stderr, and the URL is in a 0600 file in the state directory instead.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use support::*;
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{ClientMessage, LineBuffer, ServerMessage, WEBSOCKET_PATH, decode};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// Reads a pipe to its end on a thread of its own (a full pipe would stall the relay).
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = r.read_to_end(&mut all);
        all
    })
}

fn lower_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A spawn session over the WebSocket fallback, as the page opens it; returns the key `ready`
/// carried.
async fn websocket_session(port: u16, token: &str) -> String {
    let mut request =
        format!("ws://127.0.0.1:{port}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://127.0.0.1:{port}")).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(request, tcp).await.expect("upgrade");
    let hello = ClientMessage::Hello(spawn_hello(Some(token), None));
    ws.send(Message::Binary(Frame::Control(&hello.to_line()).encode().into())).await.unwrap();
    let mut lines = LineBuffer::new(64 * 1024);
    loop {
        if let Some(line) = lines.next_line().unwrap() {
            match decode::<ServerMessage>(&line).expect("a control line") {
                ServerMessage::Ready(r) => return r.key.expect("spawn mode hands out the key"),
                other => panic!("{other:?}"),
            }
        }
        let next = tokio::time::timeout(Duration::from_secs(20), ws.next()).await;
        match next.expect("ready within 20 s").expect("open").expect("a frame") {
            Message::Binary(b) => {
                if let Ok(Frame::Control(c)) = Frame::decode(&b) {
                    lines.push(c);
                }
            }
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

#[tokio::test]
async fn at_trace_level_no_token_key_or_typed_text_reaches_stdout_or_stderr() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let token = test_token("logs");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .args(["--", "/bin/sh"])
        .env("TERN_RELAY_TOKEN", &token)
        .env("RUST_LOG", "trace")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let stderr = drain(child.stderr.take().unwrap());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let stdout = drain(stdout);
    let url_file = state.path().join("url");
    // The old relay printed the URL here; this one names the file.
    let url = match first.trim().strip_prefix("Open ") {
        Some(u) if u.contains("#token=") => u.to_string(),
        _ => std::fs::read_to_string(&url_file).expect("the URL file").trim().to_string(),
    };
    let port: u16 = url.split(':').nth(2).unwrap().split('/').next().unwrap().parse().unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();

    // WebTransport: a session, something typed.
    let (status, body) = http_get(addr, "/api/info", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let hashes = info_cert_digests(&body);
    let conn = connect_with_hashes(addr, hashes, None).await.unwrap();
    let (control, reply) = hello(&conn, spawn_hello(Some(&token), None)).await;
    let ready = expect_ready(reply);
    let key = ready.key.clone().unwrap();
    let mut mosh = MoshOverRelay::new(conn, control, &key, 1200);
    let typed = "typed-words-no-log-should-hold";
    mosh.type_bytes(format!("echo {typed}-$((40+2))\n").as_bytes());
    let seen = format!("{typed}-42");
    assert!(
        mosh.run_until(Duration::from_secs(10), |s| s.server_state().contains(seen.as_bytes()))
            .await
    );

    // The WebSocket fallback: the token in the upgrade and the hello, the key in `ready`.
    let ws_key = websocket_session(port, &token).await;

    let status = Command::new("kill").args(["-INT", "--", &format!("-{}", child.id())]).status();
    assert!(status.unwrap().success());
    let exit = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    assert!(exit.success(), "{exit:?}");
    let out = format!("{first}{}", String::from_utf8_lossy(&stdout.join().unwrap()));
    let err = String::from_utf8_lossy(&stderr.join().unwrap()).into_owned();
    println!("stdout: {out}");
    println!("stderr: {} bytes, {} lines", err.len(), err.lines().count());
    assert!(err.contains("tern-relay serving"), "the log was written: {err}");
    let all = format!("{out}{err}");
    let mut leaks = Vec::new();
    for (secret, what) in [
        (token.clone(), "token"),
        (lower_hex(token.as_bytes()), "token in hex"),
        (lower_hex(token.as_bytes()).to_uppercase(), "token in HEX"),
        (key.clone(), "mosh key (WebTransport)"),
        (ws_key.clone(), "mosh key (WebSocket)"),
        (typed.to_string(), "typed text"),
        (lower_hex(typed.as_bytes()), "typed text in hex"),
    ] {
        for (i, _) in all.match_indices(&secret).take(2) {
            let around =
                &all.as_bytes()[i.saturating_sub(150)..(i + secret.len() + 30).min(all.len())];
            leaks.push(format!("the {what}: {:?}", String::from_utf8_lossy(around)));
        }
    }
    assert!(leaks.is_empty(), "secrets in stdout/stderr:\n{}", leaks.join("\n"));
    // The URL is in the state directory, readable only by the relay's user, and stdout says so.
    assert!(out.contains(&url_file.display().to_string()), "{out}");
    let mode = std::fs::metadata(&url_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(std::fs::read_to_string(&url_file).unwrap().trim(), url);
    assert!(url.ends_with(&format!("/#token={token}")), "{url}");
}
