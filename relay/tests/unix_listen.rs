//! `--listen unix:PATH` (issue 32, finding 1's tunnel layout): the relay's HTTP side on a Unix
//! socket in a 0700 directory, for `ssh -L 7480:PATH host`, so no port is left on the server for
//! another local user to take while the relay is down. The real binary: the directory and socket
//! modes, no TCP or UDP socket of the relay's own, `/api/info` saying there is no WebTransport,
//! a WebSocket session over the socket with the `Host` a browser sends through the tunnel, the
//! socket gone after it stops, and a directory others can enter refused.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use support::*;
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{ClientMessage, LineBuffer, ServerMessage, WEBSOCKET_PATH, decode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// What a browser sends through `ssh -L 7480:PATH`: its own address bar's host.
const TUNNEL_HOST: &str = "localhost:7480";

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Inodes of the sockets process `pid` holds.
fn socket_inodes(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect()
}

/// The rows of /proc/PID/net/{tcp,tcp6,udp,udp6} of the sockets the process holds that others
/// could reach: a listening TCP socket, an unconnected UDP one. (The relay's own UDP socket to a
/// mosh-server is connected to it: it takes datagrams from that address only.)
fn listening_sockets_of(pid: u32) -> Vec<String> {
    let mine = socket_inodes(pid);
    let mut found = Vec::new();
    for table in ["tcp", "tcp6", "udp", "udp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for row in text.lines().skip(1) {
            let f: Vec<&str> = row.split_whitespace().collect();
            let (remote, st, inode) = (f[2], f[3], f[9]);
            let open = match table {
                "tcp" | "tcp6" => st == "0A",
                _ => remote.ends_with(":0000"),
            };
            if open && mine.iter().any(|m| m == inode) {
                found.push(format!("{table}: {row}"));
            }
        }
    }
    found
}

async fn get_info(socket: &Path, token: &str) -> (u16, String) {
    let mut s = UnixStream::connect(socket).await.unwrap();
    let req = format!(
        "GET /api/info HTTP/1.1\r\nHost: {TUNNEL_HOST}\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut resp)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string()))
}

#[tokio::test]
async fn the_relay_serves_on_a_private_unix_socket_and_opens_no_port() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let run = tempfile::tempdir().unwrap();
    let dir = run.path().join("tern");
    let socket = dir.join("tern.sock");
    let token = test_token("unix");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .arg("--listen")
        .arg(format!("unix:{}", socket.display()))
        .arg("--state-dir")
        .arg(state.path())
        .args(["--print-url", "--", "/bin/sh"])
        .env("TERN_RELAY_TOKEN", &token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with("Open http://127.0.0.1:7480/#token="), "{first}");
    assert_eq!(mode(&dir), 0o700, "the directory is made 0700");
    assert_eq!(mode(&socket), 0o600);

    let (status, body) = get_info(&socket, &token).await;
    assert_eq!(status, 200, "{body}");
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(info["port"], 0, "no WebTransport: {body}");
    assert_eq!(info["webtransport_path"], "", "{body}");
    assert_eq!(info["cert_hashes"], serde_json::json!([]), "{body}");

    // A session over the WebSocket, through the socket, as the page opens it through a tunnel.
    let mut request = format!("ws://{TUNNEL_HOST}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{TUNNEL_HOST}")).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    let unix = UnixStream::connect(&socket).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(request, unix).await.expect("upgrade");
    let hello = ClientMessage::Hello(spawn_hello(Some(&token), None));
    ws.send(Message::Binary(Frame::Control(&hello.to_line()).encode().into())).await.unwrap();
    ws.send(Message::Binary(Frame::Control(&ClientMessage::Ping.to_line()).encode().into()))
        .await
        .unwrap();
    let mut lines = LineBuffer::new(64 * 1024);
    let mut got = Vec::new();
    while got.len() < 2 {
        if let Some(line) = lines.next_line().unwrap() {
            got.push(decode::<ServerMessage>(&line).expect("a control line"));
            continue;
        }
        let next = tokio::time::timeout(Duration::from_secs(20), ws.next()).await;
        if let Message::Binary(b) = next.expect("an answer").expect("open").expect("a frame") {
            if let Ok(Frame::Control(c)) = Frame::decode(&b) {
                lines.push(c);
            }
        }
    }
    assert!(matches!(&got[0], ServerMessage::Ready(r) if r.key.is_some()), "{got:?}");
    assert_eq!(got[1], ServerMessage::Pong);

    // No TCP or UDP port of the relay's: nothing on the server to squat.
    let held = listening_sockets_of(child.id());
    assert!(held.is_empty(), "the relay listens on inet sockets: {held:#?}");
    assert!(!socket_inodes(child.id()).is_empty(), "it holds its Unix socket");

    drop(ws);
    let kill = Command::new("kill").args(["-INT", "--", &format!("-{}", child.id())]).status();
    assert!(kill.unwrap().success());
    let exit = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(!socket.exists(), "the socket is removed when the relay stops");
}

#[test]
fn a_socket_directory_others_can_enter_is_refused() {
    let run = tempfile::tempdir().unwrap();
    let open = run.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .arg("--listen")
        .arg(format!("unix:{}", open.join("tern.sock").display()))
        .args(["--bridge", "--allow", "127.0.0.1:1", "--print-url"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mode 0700"), "{stderr}");
    assert!(!open.join("tern.sock").exists());
}
