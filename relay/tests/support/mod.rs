//! Test support: the real relay in-process, a native WebTransport client, a mosh client session
//! driven over the relay's datagrams, a tiny HTTP client, and captured logs.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine;
use sha2::{Digest, Sha256};
use tern::session::{ClientSession, HostLog, ResumePoint, ServerState, SessionConfig};
use tern::terminal::Complete;
use tern::time::Instant as CoreInstant;
use tern_relay::config::Config;
use tern_relay::control::{ClientMessage, Hello, LineReader, ServerMessage};
use tern_relay::framing::Joiner;
use tern_relay::{Mode, Relay};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wtransport::tls::Sha256Digest;
use wtransport::{ClientConfig, Connection, Endpoint, RecvStream, SendStream};

// ---------------------------------------------------------------- logs

static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

#[derive(Clone)]
struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs (once per test binary) a subscriber that captures everything the relay's real log
/// filter lets through, at debug level for every crate.
pub fn capture_logs() {
    LOGS.get_or_init(|| {
        use tracing_subscriber::prelude::*;
        let buf = Arc::new(Mutex::new(Vec::new()));
        let w = LogWriter(Arc::clone(&buf));
        // SAFETY-free: set before any relay starts; tests want debug from every crate.
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(move || w.clone())
            .with_filter(tern_relay::logging::filter("debug"));
        tracing_subscriber::registry().with(layer).init();
        buf
    });
}

/// Everything logged so far by any test in this binary.
pub fn logs() -> String {
    LOGS.get().map(|b| String::from_utf8_lossy(&b.lock().unwrap()).into_owned()).unwrap_or_default()
}

/// Fails when a secret shows up in the captured logs.
pub fn assert_not_logged(secret: &str, what: &str) {
    let logs = logs();
    assert!(!logs.is_empty(), "no logs captured at all");
    assert!(!logs.contains(secret), "the {what} appears in the log output");
}

// ---------------------------------------------------------------- relay

/// The real relay on a free port, shut down when dropped.
pub struct TestRelay {
    pub relay: Arc<Relay>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestRelay {
    pub async fn start(config: Config) -> TestRelay {
        capture_logs();
        let relay = Arc::new(Relay::new(config).await.expect("relay starts"));
        let r = Arc::clone(&relay);
        let task = tokio::spawn(async move { r.run().await });
        TestRelay { relay, task: Some(task) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.relay.local_addr()
    }

    pub fn token(&self) -> String {
        self.relay.token().expose().to_string()
    }

    /// Stops the relay and waits until it has let go of its sockets.
    pub async fn stop(mut self) {
        self.relay.shutdown();
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), t)
                .await
                .expect("relay stops within 10 s")
                .unwrap();
        }
    }
}

impl Drop for TestRelay {
    fn drop(&mut self) {
        self.relay.shutdown();
    }
}

/// Spawn-mode config on a free loopback port, a private state dir, `/bin/sh` as the shell.
pub fn spawn_config(state: &Path, token: &str) -> Config {
    require_mosh_server();
    let mut c = Config::with_listen("127.0.0.1:0".parse().unwrap());
    c.token = Some(token.to_string());
    c.state_dir = Some(state.to_path_buf());
    c.mosh_command = vec!["/bin/sh".into()];
    c.recorder = Some(env!("CARGO_BIN_EXE_tern-relay").into());
    c
}

pub fn bridge_config(token: &str, allow: &[&str]) -> Config {
    let mut c = Config::with_listen("127.0.0.1:0".parse().unwrap());
    c.token = Some(token.to_string());
    c.bridge = true;
    c.allow = allow.iter().map(|a| a.parse().unwrap()).collect();
    c
}

/// Tests that need mosh-server fail loudly without it rather than skip.
pub fn require_mosh_server() {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("mosh-server").is_file()))
        .unwrap_or(false);
    assert!(found, "mosh-server is not installed (apt-get install -y mosh): this test needs it");
}

/// A random-looking token unique to a test, so each test can look for its own in the logs.
pub fn test_token(name: &str) -> String {
    let mut b = [0u8; 18];
    getrandom::fill(&mut b).unwrap();
    format!("{name}-{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

// ---------------------------------------------------------------- WebTransport client

/// Connects to the relay's WebTransport endpoint, trusting its self-signed cert by hash.
/// `query_token` goes into the URL as `?token=`.
pub async fn connect(
    relay: &TestRelay,
    query_token: Option<&str>,
) -> Result<Connection, wtransport::error::ConnectingError> {
    connect_with_hashes(relay.addr(), cert_digests(relay), query_token).await
}

/// The relay's self-signed certificate hashes, as a WebTransport client pins them.
pub fn cert_digests(relay: &TestRelay) -> Vec<Sha256Digest> {
    relay
        .relay
        .cert_hashes()
        .iter()
        .map(|h| {
            let b: [u8; 32] =
                base64::engine::general_purpose::STANDARD.decode(h).unwrap().try_into().unwrap();
            Sha256Digest::new(b)
        })
        .collect()
}

/// The certificate hashes an `/api/info` body names, as a WebTransport client pins them (a
/// relay run as a separate process, whose `TestRelay` the test does not hold).
pub fn info_cert_digests(info_body: &str) -> Vec<Sha256Digest> {
    let info: serde_json::Value = serde_json::from_str(info_body).expect("/api/info is JSON");
    info["cert_hashes"]
        .as_array()
        .expect("cert_hashes")
        .iter()
        .map(|h| {
            let b: [u8; 32] = base64::engine::general_purpose::STANDARD
                .decode(h.as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap();
            Sha256Digest::new(b)
        })
        .collect()
}

pub async fn connect_with_hashes(
    addr: SocketAddr,
    hashes: Vec<Sha256Digest>,
    query_token: Option<&str>,
) -> Result<Connection, wtransport::error::ConnectingError> {
    let query = query_token.map(|t| format!("token={t}"));
    connect_to(addr, hashes, query.as_deref()).await
}

/// A WebTransport to `relay` whose CONNECT has `query` after its path, as the page asks for a
/// pushed challenge (`/wt?greet=…`).
pub async fn connect_with_query(
    relay: &TestRelay,
    query: &str,
) -> Result<Connection, wtransport::error::ConnectingError> {
    connect_to(relay.addr(), cert_digests(relay), Some(query)).await
}

/// A WebTransport to `/wt` at `addr` (pinning `hashes`), with `query` after the path.
async fn connect_to(
    addr: SocketAddr,
    hashes: Vec<Sha256Digest>,
    query: Option<&str>,
) -> Result<Connection, wtransport::error::ConnectingError> {
    let config = ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes(hashes)
        .keep_alive_interval(Some(Duration::from_secs(2)))
        .build();
    let endpoint = Endpoint::client(config).unwrap();
    let url = match query {
        Some(q) => format!("https://127.0.0.1:{}/wt?{q}", addr.port()),
        None => format!("https://127.0.0.1:{}/wt", addr.port()),
    };
    endpoint.connect(url).await
}

/// The control stream after its first reply.
pub struct Control {
    pub send: SendStream,
    pub reader: LineReader<RecvStream>,
}

impl Control {
    /// The next message if one arrives within `wait` (the reader is cancel-safe).
    pub async fn try_next(&mut self, wait: Duration) -> Option<ServerMessage> {
        match tokio::time::timeout(wait, self.reader.next_line()).await {
            Ok(Ok(line)) => Some(tern::relay_proto::decode(&line).expect("relay sends valid JSON")),
            _ => None,
        }
    }

    pub async fn next(&mut self) -> ServerMessage {
        let line = tokio::time::timeout(Duration::from_secs(20), self.reader.next_line())
            .await
            .expect("control reply within 20 s")
            .expect("control line");
        tern::relay_proto::decode(&line).expect("relay sends valid JSON")
    }
}

/// Opens the control stream, sends `hello`, returns the first reply.
pub async fn hello(conn: &Connection, hello: Hello) -> (Control, ServerMessage) {
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let line = ClientMessage::Hello(hello).to_line();
    send.write_all(&line).await.unwrap();
    let mut c = Control { send, reader: LineReader::new(recv) };
    let reply = c.next().await;
    (c, reply)
}

pub fn spawn_hello(token: Option<&str>, resume: Option<&str>) -> Hello {
    Hello {
        token: token.map(str::to_string),
        mode: Some(Mode::Spawn),
        resume: resume.map(str::to_string),
        ..Hello::default()
    }
}

pub fn bridge_hello(token: &str, host: &str, port: u16) -> Hello {
    Hello {
        token: Some(token.to_string()),
        mode: Some(Mode::Bridge),
        host: Some(host.to_string()),
        port: Some(port),
        ..Hello::default()
    }
}

/// The `ready` reply's fields, as the protocol defines them.
pub use tern_relay::control::Ready;

pub fn expect_ready(m: ServerMessage) -> Ready {
    match m {
        ServerMessage::Ready(ready) => ready,
        other => panic!("expected ready, got {other:?}"),
    }
}

pub fn expect_error(m: ServerMessage) -> String {
    match m {
        ServerMessage::Error { code, .. } => code.as_str().to_string(),
        other => panic!("expected error, got {other:?}"),
    }
}

/// Receives one relay datagram and joins it; `None` while parts are missing.
pub async fn recv_joined(conn: &Connection, joiner: &mut Joiner) -> Option<Vec<u8>> {
    let d = tokio::time::timeout(Duration::from_secs(10), conn.receive_datagram())
        .await
        .expect("datagram within 10 s")
        .expect("connection alive");
    joiner.push(&d).expect("relay frames correctly")
}

// ---------------------------------------------------------------- mosh over the relay

/// A tern `ClientSession` whose datagrams travel over a relay WebTransport connection.
pub struct MoshOverRelay<S: ServerState = HostLog> {
    pub session: ClientSession<S>,
    pub conn: Connection,
    pub joiner: Joiner,
    origin: std::time::Instant,
    /// Largest joined server datagram seen and how many arrived in parts.
    pub largest: usize,
    pub split_datagrams: u64,
    pub control: Control,
}

impl MoshOverRelay<HostLog> {
    pub fn new(conn: Connection, control: Control, key: &str, mtu: usize) -> Self {
        let key = key.parse().expect("relay hands out a valid key");
        let mut config = SessionConfig::new(key, 80, 24);
        config.mtu = mtu;
        config.seed = 7;
        MoshOverRelay::with_session(conn, control, ClientSession::new(config, CoreInstant::ZERO))
    }

    /// A new client whose terminal is `cols`×`rows` from its first datagram on (a page's size).
    pub fn sized(conn: Connection, control: Control, key: &str, cols: u16, rows: u16) -> Self {
        let key = key.parse().expect("relay hands out a valid key");
        let mut config = SessionConfig::new(key, cols, rows);
        config.mtu = 1200;
        MoshOverRelay::with_session(conn, control, ClientSession::new(config, CoreInstant::ZERO))
    }

    pub fn screen_contains(&self, s: &str) -> bool {
        self.session.server_state().contains(s.as_bytes())
    }

    pub fn screen_text(&self) -> String {
        String::from_utf8_lossy(self.session.server_state().bytes()).into_owned()
    }
}

impl MoshOverRelay<Complete> {
    /// A new client keeping the whole screen (rows, not a host byte log).
    pub fn with_screen(conn: Connection, control: Control, key: &str) -> Self {
        let key = key.parse().expect("relay hands out a valid key");
        let mut config = SessionConfig::new(key, 80, 24);
        config.mtu = 1200;
        MoshOverRelay::with_session(conn, control, ClientSession::new(config, CoreInstant::ZERO))
    }

    /// A client that takes a session over from `point` (a page with nothing saved, given the
    /// relay's copy in `ready.point`).
    pub fn resume(conn: Connection, control: Control, key: &str, point: &ResumePoint) -> Self {
        let key = key.parse().expect("relay hands out a valid key");
        let mut config = SessionConfig::new(key, 80, 24);
        config.mtu = 1200;
        let session =
            ClientSession::resume(config, point, CoreInstant::ZERO).expect("the point applies");
        MoshOverRelay::with_session(conn, control, session)
    }

    /// The screen as text, rows joined by newlines.
    pub fn screen_text(&self) -> String {
        tern::terminal::screen_text(self.session.server_state().framebuffer()).rows.join("\n")
    }

    /// A new session's client at `cols`×`rows`, as the page starts one on `ready`: from the
    /// relay's point when it gives one (a warm spare whose shell the relay started), numbering
    /// datagrams from the floor; a fresh client otherwise.
    pub fn page(conn: Connection, control: Control, ready: &Ready, cols: u16, rows: u16) -> Self {
        MoshOverRelay::with_session(conn, control, page_session(ready, cols, rows))
    }
}

/// The mosh client a page starts on `ready` at `cols`×`rows` (any transport): from the relay's
/// point when it gives one (a warm spare whose shell the relay started), numbering datagrams from
/// the floor; a fresh client otherwise. A fresh client on a pre-started spare would send states
/// the server already has (ignored as duplicates).
pub fn page_session(ready: &Ready, cols: u16, rows: u16) -> ClientSession<Complete> {
    let key = ready.key.as_deref().expect("spawn mode hands out the key");
    let key = key.parse().expect("relay hands out a valid key");
    let mut config = SessionConfig::new(key, cols, rows);
    config.mtu = 1200;
    let point = ready.point.as_ref().and_then(|p| p.point());
    let mut session = match point {
        Some(point) => {
            ClientSession::resume(config, point, CoreInstant::ZERO).expect("the point applies")
        }
        None => ClientSession::new(config, CoreInstant::ZERO),
    };
    session.raise_next_seq(ready.seq_floor);
    session
}

impl<S: ServerState> MoshOverRelay<S> {
    fn with_session(conn: Connection, control: Control, session: ClientSession<S>) -> Self {
        let mut m = MoshOverRelay {
            session,
            conn,
            joiner: Joiner::new(),
            origin: std::time::Instant::now(),
            largest: 0,
            split_datagrams: 0,
            control,
        };
        m.flush();
        m
    }

    pub fn now(&self) -> CoreInstant {
        CoreInstant::from_micros(self.origin.elapsed().as_micros() as u64)
    }

    /// Sends what the session wants sent; errors (a dead connection) are ignored like a lossy link.
    pub fn flush(&mut self) {
        while let Some(d) = self.session.poll_transmit() {
            let _ = self.conn.send_datagram(&d);
        }
        while self.session.poll_event().is_some() {}
    }

    pub fn type_bytes(&mut self, bytes: &[u8]) {
        let now = self.now();
        self.session.handle_input(now, bytes);
        self.flush();
    }

    pub fn resize(&mut self, cols: u16, rows: u16) {
        let now = self.now();
        self.session.handle_resize(now, cols, rows);
        self.flush();
    }

    /// Moves to a new relay connection (a reconnecting browser), numbering datagrams from the
    /// `ready`'s `seq_floor` on, as the page does (the relay forwards nothing below it).
    pub fn reattach(&mut self, conn: Connection, control: Control, seq_floor: u64) {
        self.conn = conn;
        self.control = control;
        self.joiner = Joiner::new();
        self.session.raise_next_seq(seq_floor);
        self.session.link_up(self.now());
        self.flush();
    }

    /// Runs the session until `done` holds or `timeout` passes; returns whether it held.
    pub async fn run_until(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&ClientSession<S>) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done(&self.session) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            let now = self.now();
            let timer = self
                .session
                .poll_timeout()
                .map(|at| at.saturating_duration_since(now))
                .unwrap_or(Duration::from_millis(100))
                .max(Duration::from_micros(200));
            tokio::select! {
                d = self.conn.receive_datagram() => {
                    match d {
                        Ok(d) => {
                            if d.first() != Some(&0) {
                                // A part: count each split datagram once, at its first part.
                                if d.get(1).map(|b| b >> 4) == Some(0) {
                                    self.split_datagrams += 1;
                                }
                            }
                            if let Ok(Some(whole)) = self.joiner.push(&d) {
                                self.largest = self.largest.max(whole.len());
                                let now = self.now();
                                self.session.handle_datagram(now, &whole);
                            }
                        }
                        // The relay went away: keep the session ticking like a client on a dead link.
                        Err(_) => tokio::time::sleep(timer.min(Duration::from_millis(50))).await,
                    }
                }
                _ = tokio::time::sleep(timer) => {
                    let now = self.now();
                    self.session.handle_timeout(now);
                }
                _ = tokio::time::sleep_until(deadline) => {}
            }
            self.flush();
        }
    }
}

/// Finds `prefix` followed by digits in the host bytes and returns the digits.
pub fn number_after(text: &str, prefix: &str) -> Option<String> {
    text.match_indices(prefix).find_map(|(i, _)| {
        let digits: String =
            text[i + prefix.len()..].chars().take_while(char::is_ascii_digit).collect();
        (!digits.is_empty()).then_some(digits)
    })
}

/// Ends a mosh-server this test spawned (by its recorded pid).
pub fn kill_pid(pid: u32) {
    let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
}

/// pids of the mosh-servers recorded in a state directory.
pub fn recorded_pids(state: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(state.join("sessions")) else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .filter_map(|v| v["pid"].as_u64())
        .map(|p| p as u32)
        .collect()
}

/// Kills every mosh-server recorded in a state dir when dropped (tests leave no shells behind).
pub struct KillRecorded<'a>(pub &'a Path);

impl Drop for KillRecorded<'_> {
    fn drop(&mut self) {
        for pid in recorded_pids(self.0) {
            kill_pid(pid);
        }
    }
}

// ---------------------------------------------------------------- HTTP

/// `GET path` over plain HTTP/1.1; returns status and body.
pub async fn http_get(addr: SocketAddr, path: &str, bearer: Option<&str>) -> (u16, String) {
    let (status, _, body) = http_get_with_head(addr, path, bearer).await;
    (status, body)
}

/// `GET path` over plain HTTP/1.1; returns status, the head (lowercased) and the body.
pub async fn http_get_with_head(
    addr: SocketAddr,
    path: &str,
    bearer: Option<&str>,
) -> (u16, String, String) {
    get_with(addr, path, bearer.map(|t| format!("Bearer {t}")).as_deref()).await
}

/// `GET path` with an `Authorization` value (the page's `Tern R.PROOF`); status and body.
pub async fn http_get_authorized(
    addr: SocketAddr,
    path: &str,
    authorization: &str,
) -> (u16, String) {
    let (status, _, body) = get_with(addr, path, Some(authorization)).await;
    (status, body)
}

/// `GET path` with `authorization` as the header's value, if any; status, head (lowercased), body.
async fn get_with(
    addr: SocketAddr,
    path: &str,
    authorization: Option<&str>,
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut resp)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, head.to_lowercase(), body.to_string())
}

/// `POST path` with a JSON body over plain HTTP/1.1; returns status and body.
pub async fn http_post(
    addr: SocketAddr,
    path: &str,
    bearer: Option<&str>,
    body: &[u8],
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = bearer.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut resp)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_string())
}

// --- The paste upload stream (relay_proto::upload), as the page speaks it. ---

/// SHA-256 in hex, as upload headers name files.
pub fn hex(bytes: &[u8]) -> String {
    tern::relay_proto::Sha256(Sha256::digest(bytes).into()).to_string()
}

/// Reads an upload stream's lines until the stream ends (or `stop` says so); returns them parsed.
pub async fn lines_until(
    recv: &mut wtransport::RecvStream,
    stop: impl Fn(&serde_json::Value) -> bool,
) -> Vec<serde_json::Value> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(at) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=at).collect();
            let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
            let done = stop(&v);
            out.push(v);
            if done {
                return out;
            }
        }
        match tokio::time::timeout(Duration::from_secs(10), recv.read(&mut chunk)).await {
            Ok(Ok(Some(n))) => buf.extend_from_slice(&chunk[..n]),
            _ => return out,
        }
    }
}

pub async fn open_upload(
    conn: &wtransport::Connection,
    hash: &str,
    size: usize,
) -> (wtransport::SendStream, wtransport::RecvStream) {
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let header = serde_json::json!({"hash": hash, "size": size, "mime": "image/png"});
    send.write_all(format!("{header}\n").as_bytes()).await.unwrap();
    (send, recv)
}
