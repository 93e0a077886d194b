//! A thousand sessions on one relay (the suite's `sessions` part): the release tern-relay (the
//! debug one in quick mode) as its own process in bridge mode, `sessions` native clients (three in four over WebTransport, one in
//! four over the WebSocket fallback), each bridged to its own UDP peer that plays the mosh-server:
//! every keystroke datagram is answered by a screen-sized datagram. Measured: the relay's memory
//! per idle session (its RSS before and after, divided), its CPU per session while every session
//! types at a person's pace, the keystroke → echo round trip through the relay against the same
//! round trip straight to a peer at the same time (the added latency, p50 and p99), and what
//! happens to the session past `--max-sessions` (a clear refusal, the relay alive, its neighbours
//! working).
//!
//! The peers are not mosh-servers: the relay in bridge mode never looks inside a datagram, so what
//! it does per keystroke is the same, and a thousand real shells do not fit on the machine beside
//! a thousand clients. The clients run in this process, on the same two cores as the relay.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{
    ClientMessage, Hello, LineBuffer, Mode, RelayInfo, ServerMessage, WEBSOCKET_PATH, decode,
};
use tern_relay::control::LineReader;
use tern_relay::framing::Joiner;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use wtransport::tls::Sha256Digest;
use wtransport::{ClientConfig, Endpoint};

use crate::report::Report;
use crate::stats::{median, quantile};
use crate::{Options, progress};

/// A keystroke datagram's size (mosh's carry a key, acks and the OCB tag: about this).
const KEY_BYTES: usize = 100;
/// The answer's size: a screen diff for an echoed character and the prompt around it.
const SCREEN_BYTES: usize = 300;
/// Sessions opened at once (below `--max-handshakes`' 64).
const OPEN_AT_ONCE: usize = 32;
/// WebTransport connections per client endpoint (one UDP socket each).
const CONNECTIONS_PER_ENDPOINT: usize = 50;
/// The final check's typing: every session must get an answer within a few of these.
const CHECK_INTERVAL: Duration = Duration::from_millis(200);
/// Direct probes typing beside the sessions: the round trip without the relay, same moment.
const DIRECT_PROBES: usize = 20;

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct SessionsRun {
    pub sessions: usize,
    pub held: usize,
    pub websocket_sessions: usize,
    /// Relay RSS before the sessions and with them all open and idle, KiB.
    pub rss_before_kib: f64,
    pub rss_idle_kib: f64,
    /// Relay CPU while idle (keep-alives only) and while typing, in % of one core.
    pub cpu_idle_percent: f64,
    pub cpu_typing_percent: f64,
    /// Keystroke → echo round trips, ms: through the relay (both transports, then each) and
    /// direct.
    pub relayed: Vec<f64>,
    pub relayed_webtransport: Vec<f64>,
    pub relayed_websocket: Vec<f64>,
    pub direct: Vec<f64>,
    /// Keystrokes sent through the relay in the window, and how many got no echo.
    pub keys: u64,
    pub lost: u64,
    /// The session past the limit: refused with `too_many_sessions` over both transports, the
    /// message it got, and whether the relay and its sessions were fine afterwards.
    pub refused_both: bool,
    pub refusal: String,
    pub relay_alive_after: bool,
    pub neighbours_ok_after: usize,
    pub open_seconds: f64,
    pub typing_seconds: f64,
}

impl SessionsRun {
    pub fn memory_per_session_kib(&self) -> f64 {
        (self.rss_idle_kib - self.rss_before_kib) / self.held.max(1) as f64
    }
    pub fn cpu_per_session_percent(&self) -> f64 {
        self.cpu_typing_percent / self.held.max(1) as f64
    }
    pub fn added(&self, q: f64) -> Option<f64> {
        Some(quantile(&self.relayed, q)? - quantile(&self.direct, q)?)
    }
    pub fn added_p50(&self) -> Option<f64> {
        Some(median(&self.relayed)? - median(&self.direct)?)
    }
}

/// Runs `sessions` sessions against a relay limited to that many, typing `keys_per_second` each
/// for `typing` after a warm-up.
pub fn run(
    relay_bin: &str,
    sessions: usize,
    keys_per_second: f64,
    typing: Duration,
) -> anyhow::Result<SessionsRun> {
    raise_fd_limit(sessions)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio")?;
    runtime.block_on(measure(relay_bin, sessions, keys_per_second, typing))
}

/// Each session costs this process about four descriptors (peer socket, client socket share,
/// WebSocket TCP, slack) and the relay two; ask for the hard limit if the soft one is short.
fn raise_fd_limit(sessions: usize) -> anyhow::Result<()> {
    let need = (sessions * 4 + 1024) as u64;
    let out = Command::new("sh").args(["-c", "ulimit -n"]).output()?;
    let soft: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    if soft < need {
        bail!(
            "ulimit -n is {soft}; {sessions} sessions need about {need} descriptors (raise it with ulimit -n)"
        );
    }
    Ok(())
}

/// The release relay as a child process: bridge mode to any loopback port.
struct RelayProcess {
    child: Child,
    port: u16,
    token: String,
}

impl RelayProcess {
    fn start(bin: &str, max_sessions: usize) -> anyhow::Result<RelayProcess> {
        let mut token = [0u8; 18];
        getrandom::fill(&mut token).map_err(|e| anyhow!("random: {e}"))?;
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token);
        let mut child = Command::new(bin)
            .args(["--listen", "127.0.0.1:0", "--bridge", "--allow", "127.0.0.1:1024-65535"])
            .args(["--max-sessions", &max_sessions.to_string()])
            // Every session here comes from 127.0.0.1, and they start at once: the per-source cap
            // on handshakes (a defence against one source holding every slot) would refuse all
            // but 8 of them. Clients of a real relay come from many addresses.
            .args(["--max-handshakes-per-source", &max_sessions.to_string()])
            .arg("--print-url")
            .env("TERN_RELAY_TOKEN", &token)
            .env("RUST_LOG", "warn")
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {bin}"))?;
        let mut out = child.stdout.take().context("relay stdout")?;
        let mut text = String::new();
        let mut buf = [0u8; 512];
        let deadline = Instant::now() + Duration::from_secs(30);
        use std::io::Read;
        let port = loop {
            let n = out.read(&mut buf)?;
            if n == 0 || Instant::now() > deadline {
                bail!("the relay printed no URL: {text}");
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            let port = text
                .split("http://127.0.0.1:")
                .nth(1)
                .and_then(|rest| rest.split('/').next())
                .and_then(|p| p.parse::<u16>().ok());
            if let Some(p) = port {
                break p;
            }
        };
        // Keep reading its stdout so it never blocks on a full pipe.
        std::thread::spawn(move || while matches!(out.read(&mut buf), Ok(n) if n > 0) {});
        Ok(RelayProcess { child, port, token })
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Resident set size, KiB (`VmRSS`).
    fn rss_kib(&self) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("VmRSS")?;
        Ok(line.split_whitespace().nth(1).context("VmRSS value")?.parse()?)
    }

    /// User + system CPU time so far, seconds.
    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat.rsplit_once(')').context("stat")?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
        Ok(ticks / clock_ticks_per_second())
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// `GET /api/info` with the token.
async fn relay_info(relay: &RelayProcess) -> anyhow::Result<RelayInfo> {
    let addr = relay.addr();
    let mut s = TcpStream::connect(addr).await?;
    let req = format!(
        "GET /api/info HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        relay.token
    );
    s.write_all(req.as_bytes()).await?;
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut resp)).await??;
    let text = String::from_utf8_lossy(&resp);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).context("no body")?;
    decode::<RelayInfo>(body.trim().as_bytes()).map_err(|e| anyhow!("/api/info: {e:?}"))
}

/// A UDP peer playing one session's mosh-server: each datagram is answered with a screen-sized
/// one that starts with the first 16 bytes it got (the keystroke's id and send time).
async fn peer() -> anyhow::Result<SocketAddr> {
    let sock = UdpSocket::bind("127.0.0.1:0").await?;
    let addr = sock.local_addr()?;
    tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        let mut reply = vec![b'.'; SCREEN_BYTES];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let head = n.min(16);
            reply[..head].copy_from_slice(&buf[..head]);
            let _ = sock.send_to(&reply, from).await;
        }
    });
    Ok(addr)
}

/// The clock every keystroke's send time is measured on.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn micros(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
    fn key(&self, session: u32) -> Vec<u8> {
        let mut k = vec![b'k'; KEY_BYTES];
        k[..4].copy_from_slice(&session.to_le_bytes());
        k[8..16].copy_from_slice(&self.micros().to_le_bytes());
        k
    }
    /// The round trip of an answer, ms; `None` if it is not a keystroke's answer.
    fn round_trip(&self, answer: &[u8]) -> Option<f64> {
        let sent = u64::from_le_bytes(answer.get(8..16)?.try_into().ok()?);
        Some(self.micros().checked_sub(sent)? as f64 / 1000.0)
    }
}

/// Where round trips go: recorded only inside the measuring window.
#[derive(Default)]
struct Samples {
    recording: bool,
    rtts: Vec<f64>,
    /// The same round trips by transport (WebTransport, WebSocket).
    by_transport: [Vec<f64>; 2],
    keys: u64,
}

/// One open session's two directions.
enum Link {
    WebTransport(wtransport::Connection, Box<dyn std::any::Any + Send>),
    WebSocket(Box<tokio_tungstenite::WebSocketStream<TcpStream>>),
}

fn hello(token: &str, target: SocketAddr) -> Hello {
    Hello {
        token: Some(token.to_string()),
        mode: Some(Mode::Bridge),
        host: Some("127.0.0.1".into()),
        port: Some(target.port()),
        ..Hello::default()
    }
}

/// Opens one WebTransport session; `Err` carries the relay's refusal.
async fn open_webtransport(
    endpoint: &Endpoint<wtransport::endpoint::endpoint_side::Client>,
    relay: SocketAddr,
    token: &str,
    target: SocketAddr,
) -> anyhow::Result<Result<Link, String>> {
    let conn = endpoint.connect(format!("https://127.0.0.1:{}/wt", relay.port())).await?;
    let (mut send, recv) = conn.open_bi().await?.await?;
    send.write_all(&ClientMessage::Hello(hello(token, target)).to_line()).await?;
    let mut reader = LineReader::new(recv);
    let line = tokio::time::timeout(Duration::from_secs(30), reader.next_line()).await??;
    match decode::<ServerMessage>(&line).map_err(|e| anyhow!("{e:?}"))? {
        ServerMessage::Ready(_) => Ok(Ok(Link::WebTransport(conn, Box::new((send, reader))))),
        ServerMessage::Error { code, message } => Ok(Err(format!("{}: {message}", code.as_str()))),
        other => bail!("unexpected {other:?}"),
    }
}

/// Opens one WebSocket session; `Err` carries the relay's refusal.
async fn open_websocket(
    relay: SocketAddr,
    token: &str,
    target: SocketAddr,
) -> anyhow::Result<Result<Link, String>> {
    let mut request = format!("ws://{relay}{WEBSOCKET_PATH}").into_client_request()?;
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{relay}"))?);
    h.insert(
        "sec-websocket-protocol",
        HeaderValue::from_str(&format!("tern, tern-token.{token}"))?,
    );
    let tcp = TcpStream::connect(relay).await?;
    // As a browser does.
    tcp.set_nodelay(true)?;
    let (mut ws, _) = tokio_tungstenite::client_async(request, tcp).await?;
    let line = ClientMessage::Hello(hello(token, target)).to_line();
    ws.send(Message::Binary(Frame::Control(&line).encode().into())).await?;
    let mut lines = LineBuffer::new(4096);
    let reply = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(line) = lines.next_line().map_err(|e| anyhow!("{e:?}"))? {
                return decode::<ServerMessage>(&line).map_err(|e| anyhow!("{e:?}"));
            }
            let Some(msg) = ws.next().await else { bail!("closed before a reply") };
            if let Message::Binary(b) = msg? {
                if let Ok(Frame::Control(c)) = Frame::decode(&b) {
                    lines.push(c);
                }
            }
        }
    })
    .await??;
    match reply {
        ServerMessage::Ready(_) => Ok(Ok(Link::WebSocket(Box::new(ws)))),
        ServerMessage::Error { code, message } => Ok(Err(format!("{}: {message}", code.as_str()))),
        other => bail!("unexpected {other:?}"),
    }
}

/// Types on a session until `stop`: a key every `1 / keys_per_second` (jittered), each answer's
/// round trip into `samples`. Returns the session's link when stopped (to keep it open).
async fn type_on(
    link: Link,
    session: u32,
    clock: Clock,
    interval: Duration,
    samples: Arc<Mutex<Samples>>,
    stop: tokio_util::sync::CancellationToken,
) -> Link {
    // Spread the sessions' keys over the interval, as independent typists would.
    let offset = interval.mul_f64(f64::from(session % 997) / 997.0);
    let transport = usize::from(matches!(link, Link::WebSocket(_)));
    let record = |rtt: Option<f64>| {
        if let Some(rtt) = rtt {
            let mut s = samples.lock().unwrap_or_else(|e| e.into_inner());
            if s.recording {
                s.rtts.push(rtt);
                s.by_transport[transport].push(rtt);
            }
        }
    };
    let sent = || {
        let mut s = samples.lock().unwrap_or_else(|e| e.into_inner());
        if s.recording {
            s.keys += 1;
        }
    };
    tokio::time::sleep(offset).await;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    match link {
        Link::WebTransport(conn, keep) => {
            let mut joiner = Joiner::new();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return Link::WebTransport(conn, keep),
                    _ = tick.tick() => {
                        if conn.send_datagram(clock.key(session)).is_ok() { sent(); }
                    }
                    d = conn.receive_datagram() => {
                        let Ok(d) = d else { return Link::WebTransport(conn, keep) };
                        if let Ok(Some(answer)) = joiner.push(&d) {
                            record(clock.round_trip(&answer));
                        }
                    }
                }
            }
        }
        Link::WebSocket(mut ws) => {
            let mut joiner = Joiner::new();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return Link::WebSocket(ws),
                    _ = tick.tick() => {
                        let key = clock.key(session);
                        let frame = Frame::Datagram(&key).encode();
                        if ws.send(Message::Binary(frame.into())).await.is_ok() { sent(); }
                    }
                    m = ws.next() => {
                        let Some(Ok(Message::Binary(b))) = m else {
                            if m.is_none() { return Link::WebSocket(ws) }
                            continue;
                        };
                        if let Ok(Frame::Datagram(d)) = Frame::decode(&b) {
                            if let Ok(Some(answer)) = joiner.push(d) {
                                record(clock.round_trip(&answer));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A probe typing straight to its own peer over UDP: the round trip without the relay.
async fn type_direct(
    clock: Clock,
    interval: Duration,
    samples: Arc<Mutex<Samples>>,
    stop: tokio_util::sync::CancellationToken,
    n: u32,
) -> anyhow::Result<()> {
    let target = peer().await?;
    let sock = UdpSocket::bind("127.0.0.1:0").await?;
    sock.connect(target).await?;
    tokio::time::sleep(interval.mul_f64(f64::from(n) / DIRECT_PROBES as f64)).await;
    let mut tick = tokio::time::interval(interval);
    let mut buf = vec![0u8; 2048];
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tick.tick() => { let _ = sock.send(&clock.key(u32::MAX - n)).await; }
            r = sock.recv(&mut buf) => {
                let n = r?;
                if let Some(rtt) = clock.round_trip(&buf[..n]) {
                    let mut s = samples.lock().unwrap_or_else(|e| e.into_inner());
                    if s.recording { s.rtts.push(rtt); }
                }
            }
        }
    }
}

async fn measure(
    relay_bin: &str,
    sessions: usize,
    keys_per_second: f64,
    typing: Duration,
) -> anyhow::Result<SessionsRun> {
    let mut relay = RelayProcess::start(relay_bin, sessions)?;
    let info = relay_info(&relay).await?;
    let hashes = info
        .cert_hashes
        .iter()
        .map(|h| {
            let b = base64::engine::general_purpose::STANDARD.decode(h)?;
            let b: [u8; 32] = b.try_into().map_err(|_| anyhow!("hash length"))?;
            Ok(Sha256Digest::new(b))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let endpoints = (0..sessions.div_ceil(CONNECTIONS_PER_ENDPOINT) + 1)
        .map(|_| {
            Endpoint::client(
                ClientConfig::builder()
                    .with_bind_default()
                    .with_server_certificate_hashes(hashes.clone())
                    .build(),
            )
            .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut targets = Vec::with_capacity(sessions + 2);
    for _ in 0..sessions + 2 {
        targets.push(peer().await?);
    }
    let mut run = SessionsRun { sessions, ..SessionsRun::default() };
    // The relay has served one request and holds its certificate and page: the baseline.
    tokio::time::sleep(Duration::from_millis(500)).await;
    run.rss_before_kib = relay.rss_kib()?;

    // Open every session, OPEN_AT_ONCE at a time; every fourth over the WebSocket.
    let started = Instant::now();
    let (addr, token) = (relay.addr(), relay.token.clone());
    let mut links = Vec::with_capacity(sessions);
    for (batch_index, batch) in targets[..sessions].chunks(OPEN_AT_ONCE).enumerate() {
        let opening = batch.iter().enumerate().map(|(i, &target)| {
            let n = batch_index * OPEN_AT_ONCE + i;
            let endpoint = Arc::clone(&endpoints[n / CONNECTIONS_PER_ENDPOINT]);
            let token = token.clone();
            tokio::spawn(async move {
                if n % 4 == 3 {
                    open_websocket(addr, &token, target).await
                } else {
                    open_webtransport(&endpoint, addr, &token, target).await
                }
            })
        });
        for (i, opened) in futures_util::future::join_all(opening).await.into_iter().enumerate() {
            let n = batch_index * OPEN_AT_ONCE + i;
            match opened? {
                Ok(Ok(link)) => links.push(link),
                Ok(Err(refusal)) => bail!("session {n} refused below the limit: {refusal}"),
                Err(e) => bail!("session {n}: {e:#}"),
            }
        }
    }
    run.open_seconds = started.elapsed().as_secs_f64();
    run.held = links.len();
    run.websocket_sessions = links.iter().filter(|l| matches!(l, Link::WebSocket(_))).count();
    crate::progress(&format!("sessions: {} open in {:.1} s", run.held, run.open_seconds));

    // Idle: keep-alives only. Memory settles; CPU over a few seconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    run.rss_idle_kib = relay.rss_kib()?;
    let (cpu0, t0) = (relay.cpu_seconds()?, Instant::now());
    tokio::time::sleep(Duration::from_secs(5)).await;
    run.cpu_idle_percent = (relay.cpu_seconds()? - cpu0) / t0.elapsed().as_secs_f64() * 100.0;

    // The session past the limit, over both transports.
    let extra = &endpoints[endpoints.len() - 1];
    let wt = open_webtransport(extra, addr, &token, targets[sessions]).await?;
    let ws = open_websocket(addr, &token, targets[sessions + 1]).await?;
    let refused = |r: &Result<Link, String>| match r {
        Err(e) if e.starts_with("too_many_sessions") => Some(e.clone()),
        _ => None,
    };
    run.refused_both = refused(&wt).is_some() && refused(&ws).is_some();
    run.refusal = refused(&wt).or_else(|| refused(&ws)).unwrap_or_else(|| "not refused".into());
    drop((wt, ws));
    run.relay_alive_after = relay.alive();

    // Everyone types; the direct probes type beside them.
    let clock = Clock(Instant::now());
    let interval = Duration::from_secs_f64(1.0 / keys_per_second);
    let relayed = Arc::new(Mutex::new(Samples::default()));
    let direct = Arc::new(Mutex::new(Samples::default()));
    let stop = tokio_util::sync::CancellationToken::new();
    let typists: Vec<_> = links
        .into_iter()
        .enumerate()
        .map(|(i, link)| {
            let (samples, stop) = (Arc::clone(&relayed), stop.clone());
            tokio::spawn(type_on(link, i as u32, clock, interval, samples, stop))
        })
        .collect();
    let probes: Vec<_> = (0..DIRECT_PROBES as u32)
        .map(|n| {
            let (samples, stop) = (Arc::clone(&direct), stop.clone());
            tokio::spawn(type_direct(clock, interval, samples, stop, n))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let set_recording = |on: bool| {
        for s in [&relayed, &direct] {
            s.lock().unwrap_or_else(|e| e.into_inner()).recording = on;
        }
    };
    set_recording(true);
    let (cpu0, t0) = (relay.cpu_seconds()?, Instant::now());
    tokio::time::sleep(typing).await;
    set_recording(false);
    run.typing_seconds = t0.elapsed().as_secs_f64();
    run.cpu_typing_percent = (relay.cpu_seconds()? - cpu0) / run.typing_seconds * 100.0;
    // Answers to the last keys of the window still count; wait for them before stopping.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    let mut links = Vec::with_capacity(typists.len());
    for t in typists {
        links.push(t.await?);
    }
    for p in probes {
        p.await??;
    }
    {
        let r = relayed.lock().unwrap_or_else(|e| e.into_inner());
        run.relayed = r.rtts.clone();
        [run.relayed_webtransport, run.relayed_websocket] = r.by_transport.clone();
        run.keys = r.keys;
        run.lost = r.keys.saturating_sub(r.rtts.len() as u64);
    }
    run.direct = direct.lock().unwrap_or_else(|e| e.into_inner()).rtts.clone();

    // After all that, the relay is alive and every session still answers.
    run.relay_alive_after &= relay.alive();
    let stop = tokio_util::sync::CancellationToken::new();
    let checks: Vec<_> = links
        .into_iter()
        .enumerate()
        .map(|(i, link)| {
            let samples = Arc::new(Mutex::new(Samples { recording: true, ..Samples::default() }));
            let typing =
                type_on(link, i as u32, clock, CHECK_INTERVAL, Arc::clone(&samples), stop.clone());
            tokio::spawn(async move {
                let link = typing.await;
                let answered = !samples.lock().unwrap_or_else(|e| e.into_inner()).rtts.is_empty();
                drop(link);
                answered
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.cancel();
    for c in checks {
        run.neighbours_ok_after += usize::from(c.await?);
    }
    Ok(run)
}

// The suite's `sessions` part.

/// Added latency p99 at the full session count must stay within this.
const SESSIONS_ADDED_P99_MS: f64 = 2.0;
/// The relay's memory per idle session must stay within this.
const SESSION_MEMORY_KIB: f64 = 256.0;

/// The suite's `sessions` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let n = options.sessions;
    // Quick mode checks the harness, not the numbers: the debug relay `cargo test` built already
    // (a release build of every dependency took ~3 of `npm test`'s minutes).
    let release = !options.quick;
    let build = if release { "release" } else { "debug" };
    progress(&format!("sessions: {n} on one relay ({build} build)"));
    let run = crate::page_load::new_relay(release).and_then(|bin| {
        run(&bin.to_string_lossy(), n, options.session_keys_per_second, options.session_typing)
    });
    let run = match run {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("sessions ({n}) failed: {e:#}"));
            return;
        }
    };
    let held_ok = run.held == n && run.neighbours_ok_after == n && run.relay_alive_after;
    report.row(
        format!("sessions held by one relay (--max-sessions {n}), all answering after the load"),
        run.neighbours_ok_after as f64,
        "sessions",
        format!("= {n} ({} over the WebSocket)", run.websocket_sessions),
        held_ok,
    );
    if let Some(p99) = run.added(0.99) {
        report.row(
            format!("added latency p99, keystroke → echo, {n} sessions typing"),
            p99,
            "ms",
            format!("≤ {SESSIONS_ADDED_P99_MS} ms"),
            p99 <= SESSIONS_ADDED_P99_MS,
        );
    }
    let memory = run.memory_per_session_kib();
    report.row(
        format!("relay memory per idle session ({n} sessions)"),
        memory,
        "KiB",
        format!("≤ {SESSION_MEMORY_KIB} KiB"),
        memory <= SESSION_MEMORY_KIB,
    );
    report.row(
        format!("session {} past --max-sessions {n}: refused, relay alive", n + 1),
        f64::from(u8::from(run.refused_both && run.relay_alive_after)),
        "refused",
        format!("refused over both transports ({})", run.refusal),
        run.refused_both && run.relay_alive_after,
    );
    let g = "sessions";
    if let Some(p50) = run.added_p50() {
        report.detail(g, format!("added latency p50, {n} sessions typing"), p50, "ms");
    }
    let paths = [
        ("through the relay", &run.relayed),
        ("through the relay, WebTransport", &run.relayed_webtransport),
        ("through the relay, WebSocket", &run.relayed_websocket),
        ("direct", &run.direct),
    ];
    for (name, samples) in paths {
        for (q, label) in [(0.5, "p50"), (0.99, "p99")] {
            if let Some(v) = quantile(samples, q) {
                report.detail(g, format!("keystroke → echo {label}, {name}"), v, "ms");
            }
        }
    }
    report.detail(g, "relay CPU per typing session", run.cpu_per_session_percent(), "% of a core");
    report.detail(g, "relay CPU, all sessions typing", run.cpu_typing_percent, "% of a core");
    report.detail(g, "relay CPU, all sessions idle", run.cpu_idle_percent, "% of a core");
    report.detail(g, "relay RSS before the sessions", run.rss_before_kib / 1024.0, "MiB");
    report.detail(g, "relay RSS with every session open", run.rss_idle_kib / 1024.0, "MiB");
    report.detail(g, "keystrokes through the relay in the window", run.keys as f64, "keys");
    report.detail(g, "keystrokes without an echo", run.lost as f64, "keys");
    report.detail(g, "time to open every session", run.open_seconds, "s");
    report.detail(g, "keys a second per session", options.session_keys_per_second, "keys/s");
}
