//! `--identity-header` with `--trust-proxy` (issue 35, item 2): behind Debian's nginx doing basic
//! auth and setting `X-Forwarded-User`, the person needs no token (the API and a WebSocket
//! session), and the audit trail names them; the same header sent straight to the relay (a
//! spoof) is ignored, refused as a missing token, logged and audited. Fails, never skips,
//! without nginx.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use support::*;
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{ClientMessage, ErrorCode, LineBuffer, ServerMessage, decode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

fn nginx_binary() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"].iter().map(PathBuf::from).find(|p| p.is_file()).expect(
        "nginx is not installed (apt-get install -y nginx, or scripts/setup.sh): \
         this test needs it",
    )
}

/// nginx in the foreground with a private prefix; stopped when dropped.
struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// Basic auth for alice, the identity passed on in `X-Forwarded-User`, connecting to the relay
    /// from 127.0.0.2 (the one trusted proxy address; the test itself connects from 127.0.0.1).
    fn start(relay: SocketAddr) -> Nginx {
        let bin = nginx_binary();
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let d = dir.path().display();
        let conf = format!(
            r#"worker_processes 1;
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            auth_basic "tern";
            auth_basic_user_file {d}/htpasswd;
            proxy_pass http://{relay};
            proxy_bind 127.0.0.2;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-User $remote_user;
            proxy_read_timeout 1h;
            proxy_buffering off;
        }}
    }}
}}
"#
        );
        std::fs::write(dir.path().join("htpasswd"), "alice:{PLAIN}wonderland\n").unwrap();
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(bin)
            .args(["-p", &dir.path().display().to_string(), "-e", "stderr", "-c"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let n = Nginx { child, dir, port };
        let end = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", n.port)).is_err() {
            assert!(Instant::now() < end, "nginx did not listen:\n{}", n.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        n
    }

    fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

/// A GET with the given headers: the status.
async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> u16 {
    get_from(addr, &format!("http://{addr}"), path, headers).await
}

/// [`get`] from a page of `origin`.
async fn get_from(addr: SocketAddr, origin: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let mut req =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: {origin}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{text}"))
}

/// A WebSocket session with no token: upgrade (with `headers`), hello, the first answer.
async fn tokenless_session(addr: SocketAddr, headers: &[(&str, &str)]) -> ServerMessage {
    let mut request = format!("ws://{addr}/ws").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{addr}")).unwrap());
    h.insert("sec-websocket-protocol", HeaderValue::from_static("tern"));
    for (k, v) in headers {
        let name: tokio_tungstenite::tungstenite::http::HeaderName = k.parse().unwrap();
        h.insert(name, HeaderValue::from_str(v).unwrap());
    }
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(request, tcp).await.expect("upgrade");
    let hello = ClientMessage::Hello(spawn_hello(None, None));
    ws.send(Message::Binary(Frame::Control(&hello.to_line()).encode().into())).await.unwrap();
    let mut lines = LineBuffer::new(64 * 1024);
    loop {
        if let Some(line) = lines.next_line().unwrap() {
            return decode(&line).unwrap();
        }
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("an answer within 20 s")
            .expect("socket open")
            .unwrap();
        if let Message::Binary(b) = msg {
            if let Ok(Frame::Control(c)) = Frame::decode(&b) {
                lines.push(c);
            }
        }
    }
}

#[tokio::test]
async fn a_trusted_front_door_names_the_person_and_a_spoofed_header_is_ignored() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let token = test_token("idh");
    let mut config = spawn_config(state.path(), &token);
    config.trust_proxy = vec!["127.0.0.2".parse().unwrap()];
    config.identity_header = Some("X-Forwarded-User".into());
    let relay = TestRelay::start(config).await;
    let nginx = Nginx::start(relay.addr());
    let proxy = nginx.addr();
    let alice = [("Authorization", "Basic YWxpY2U6d29uZGVybGFuZA==")]; // alice:wonderland

    // Through the front door: no token, and the person is who nginx says (a header of the
    // client's own is replaced by nginx's).
    assert_eq!(get(proxy, "/api/info", &[]).await, 401, "nginx asks for a login");
    assert_eq!(get(proxy, "/api/info", &alice).await, 200, "{}", nginx.log());
    let with_own = [alice[0], ("X-Forwarded-User", "mallory")];
    assert_eq!(get(proxy, "/api/info", &with_own).await, 200);
    match tokenless_session(proxy, &with_own).await {
        ServerMessage::Ready(r) => assert!(r.key.is_some()),
        other => panic!("a session for alice: {other:?}\n{}", nginx.log()),
    }

    // Straight to the relay, the same header: ignored; without a token, refused.
    let spoof = [("X-Forwarded-User", "alice")];
    assert_eq!(get(relay.addr(), "/api/info", &spoof).await, 401);
    match tokenless_session(relay.addr(), &spoof).await {
        ServerMessage::Error { code: ErrorCode::BadToken, .. } => {}
        other => panic!("a spoofed identity opens nothing: {other:?}"),
    }

    // A foreign page riding the browser: refused and audited too.
    assert_eq!(get_from(relay.addr(), "https://evil.example", "/api/info", &[]).await, 403);

    tokio::time::sleep(Duration::from_millis(200)).await;
    let audit = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    let attach = audit.lines().find(|l| l.contains("\"event\":\"attach\"")).expect(&audit);
    assert!(attach.contains("\"who\":\"proxy:alice\""), "{audit}");
    assert!(!audit.contains("mallory"), "the client's own header never counts: {audit}");
    assert!(audit.contains("not a trusted proxy"), "the spoof is audited: {audit}");
    assert!(audit.contains("a foreign Origin"), "a foreign Origin is audited: {audit}");
    assert!(logs().contains("not a trusted proxy ignored"), "and logged");
    relay.stop().await;
}
