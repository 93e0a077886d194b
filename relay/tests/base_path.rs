//! `--base-path /tern/` behind a real reverse proxy: Debian's nginx (installed by
//! scripts/setup.sh), configured as docs/DEPLOY.md says, forwarding `/tern/` as it is to the relay.
//! Through it the page, `/api/info` and the WebSocket (`/tern/ws`, Origin check with the Host the
//! proxy passes on) work; paths outside the base are not served. Fails, never skips, without nginx.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use support::*;
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{ClientMessage, LineBuffer, ServerMessage, decode};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

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
    /// The `location` block is docs/DEPLOY.md's, with the relay's port filled in.
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
        location /tern/ {{
            proxy_pass http://{relay};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_read_timeout 1h;
            proxy_buffering off;
        }}
    }}
}}
"#
        );
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

type Ws = WebSocketStream<TcpStream>;

async fn open_ws(
    addr: SocketAddr,
    path: &str,
    origin: &str,
    token: &str,
    forwarded_proto: Option<&str>,
) -> Result<Ws, WsError> {
    let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(origin).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    if let Some(p) = forwarded_proto {
        h.insert("x-forwarded-proto", HeaderValue::from_str(p).unwrap());
    }
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, _) = tokio_tungstenite::client_async(request, tcp).await?;
    Ok(ws)
}

fn refusal(e: WsError) -> u16 {
    match e {
        WsError::Http(r) => r.status().as_u16(),
        other => panic!("expected an HTTP refusal, got {other}"),
    }
}

/// hello → ready over the WebSocket, then ping → pong.
async fn session(ws: &mut Ws, token: &str, target: u16) {
    let hello = ClientMessage::Hello(bridge_hello(token, "127.0.0.1", target));
    ws.send(Message::Binary(Frame::Control(&hello.to_line()).encode().into())).await.unwrap();
    let mut lines = LineBuffer::new(4096);
    let mut replies = Vec::new();
    while replies.len() < 2 {
        if let Some(line) = lines.next_line().unwrap() {
            let m: ServerMessage = decode(&line).unwrap();
            if replies.is_empty() {
                assert!(matches!(m, ServerMessage::Ready(_)), "{m:?}");
                let ping = ClientMessage::Ping.to_line();
                ws.send(Message::Binary(Frame::Control(&ping).encode().into())).await.unwrap();
            }
            replies.push(m);
            continue;
        }
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s")
            .expect("socket open")
            .unwrap();
        if let Message::Binary(b) = msg {
            if let Ok(Frame::Control(c)) = Frame::decode(&b) {
                lines.push(c);
            }
        }
    }
    assert_eq!(replies[1], ServerMessage::Pong);
}

#[tokio::test]
async fn page_api_and_websocket_work_under_the_base_path_behind_nginx() {
    let token = test_token("base");
    let target = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let tport = target.local_addr().unwrap().port();
    let mut c = bridge_config(&token, &[&format!("127.0.0.1:{tport}")]);
    c.base_path = "/tern".parse().unwrap();
    let relay = TestRelay::start(c).await;
    assert!(
        relay.relay.page_url().ends_with(&format!("/tern/#token={token}")),
        "{}",
        relay.relay.page_url()
    );
    let nginx = Nginx::start(relay.addr());
    let proxy = nginx.addr();

    // The page, under the base.
    let (status, _, body) = http_get_with_head(proxy, "/tern/", None).await;
    if tern_relay::assets::page_present() {
        assert_eq!(status, 200, "{body}\n{}", nginx.log());
        assert!(body.contains("<title>tern</title>"), "{body}");
        // Its files are named relative to the page, so they resolve under the base too.
        let app = body.split(r#"src=""#).nth(1).and_then(|s| s.split('"').next()).unwrap();
        assert!(app.starts_with("app.") && app.ends_with(".js"), "{body}");
        let (status, head, _) = http_get_with_head(proxy, &format!("/tern/{app}"), None).await;
        assert_eq!(status, 200);
        assert!(head.contains("content-type: text/javascript"), "{head}");
    } else {
        assert_eq!(status, 503, "{body}");
    }
    // The base without its slash goes to the base (so relative URLs resolve under it).
    // (nginx answers that itself for a `location /tern/` with proxy_pass; the relay does for
    // proxies that forward `/tern` too.)
    let (status, head, _) = http_get_with_head(proxy, "/tern?x=1", None).await;
    assert_eq!(status, 301, "{head}");
    assert!(head.contains("/tern/?x=1"), "{head}");
    let (status, head, _) = http_get_with_head(relay.addr(), "/tern?x=1", None).await;
    assert_eq!(status, 308, "{head}");
    assert!(head.contains("location: /tern/?x=1"), "{head}");

    // The API, under the base.
    let (status, _, body) = http_get_with_head(proxy, "/tern/api/info", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(info["webtransport_path"], "/wt", "WebTransport keeps its own path");
    let (status, _, _) = http_get_with_head(proxy, "/tern/api/info", None).await;
    assert_eq!(status, 401);
    // Nothing outside the base, even straight at the relay.
    let (status, _, _) = http_get_with_head(relay.addr(), "/api/info", Some(&token)).await;
    assert_eq!(status, 404);
    let (status, _, _) = http_get_with_head(relay.addr(), "/", None).await;
    assert_eq!(status, 404);

    // The WebSocket, under the base, through nginx: the Origin is the proxy's own address,
    // which nginx passes on as Host.
    let origin = format!("http://{proxy}");
    let mut ws =
        open_ws(proxy, "/tern/ws", &origin, &token, None).await.expect("upgrade via nginx");
    session(&mut ws, &token, tport).await;
    let e = open_ws(proxy, "/tern/ws", "http://evil.example", &token, None).await.unwrap_err();
    assert_eq!(refusal(e), 403, "a foreign Origin is still refused behind the proxy");
    let e = open_ws(proxy, "/ws", &origin, &token, None).await.unwrap_err();
    assert_eq!(refusal(e), 404, "the WebSocket lives under the base");

    // A proxy that ends TLS names its scheme in X-Forwarded-Proto: an https Origin then matches
    // (without the header it would not, the relay itself speaking plain HTTP).
    let own = relay.addr();
    let https_origin = format!("https://{own}");
    let e = open_ws(own, "/tern/ws", &https_origin, &token, None).await.unwrap_err();
    assert_eq!(refusal(e), 403);
    let mut ws2 = open_ws(own, "/tern/ws", &https_origin, &token, Some("https")).await.unwrap();
    session(&mut ws2, &token, tport).await;
    let e = open_ws(own, "/tern/ws", "https://evil.example", &token, Some("https")).await;
    assert_eq!(refusal(e.unwrap_err()), 403, "the host must still match");

    drop((ws, ws2));
    relay.stop().await;
}
