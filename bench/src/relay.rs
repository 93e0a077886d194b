//! The relay's cost (the suite's `relay` part): what tern-relay adds to a datagram's round trip,
//! and how many datagrams a second it forwards, measured against a UDP echo peer on loopback
//! ([`tern_tests::udp_echo`]) with an in-process relay in bridge mode and wtransport's client (the
//! browser's side, natively): a [`Bridge`].
//!
//! The example `relay_latency` (bench/examples) prints the same round trips and more.
//! Added latency = median round trip via the relay - median direct round trip.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use base64::Engine;
use tern_relay::config::Config;
use tern_relay::control::{ClientMessage, Hello, LineReader, ServerMessage};
use tern_relay::framing::Joiner;
use tern_relay::{Mode, Relay};
use tern_tests::udp_echo;
use tokio::net::UdpSocket;
use wtransport::endpoint::endpoint_side;
use wtransport::tls::Sha256Digest;
use wtransport::{ClientConfig, Connection, Endpoint, SendStream};

use crate::report::Report;
use crate::stats::{median, ms, quantile};
use crate::{Options, progress};

#[derive(Debug, Clone, Default)]
pub struct RelayRun {
    /// Round trips in ms: direct and via the relay, 100-byte datagrams.
    pub direct: Vec<f64>,
    pub relayed: Vec<f64>,
    /// Via the relay with mosh's largest (1252-byte) datagram as the reply, split in two parts.
    pub relayed_large: Vec<f64>,
    /// Relay → client (the screen-update direction), datagrams/s and the share that arrived.
    pub down_rate: f64,
    pub down_delivered: f64,
    /// Client → relay → UDP, datagrams/s and the share that arrived.
    pub up_rate: f64,
    pub up_delivered: f64,
}

impl RelayRun {
    /// Median added round-trip time, ms.
    pub fn added_p50(&self) -> Option<f64> {
        Some(median(&self.relayed)? - median(&self.direct)?)
    }

    pub fn relayed_p99(&self) -> Option<f64> {
        quantile(&self.relayed, 0.99)
    }
}

/// Runs `rounds` sequential round trips per path and a burst of `burst` datagrams each way.
pub fn run(rounds: usize, burst: u32) -> anyhow::Result<RelayRun> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio")?;
    runtime.block_on(measure(rounds, burst))
}

/// An in-process relay in bridge mode that may reach one UDP peer, and a WebTransport session
/// through it to that peer: wtransport's client, the browser's side natively.
pub struct Bridge {
    pub relay: Arc<Relay>,
    server: tokio::task::JoinHandle<()>,
    /// The client's endpoint and the session's control stream: the session ends when either is
    /// dropped.
    _endpoint: Endpoint<endpoint_side::Client>,
    _control: SendStream,
    pub conn: Connection,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge").field("relay", &self.relay).finish_non_exhaustive()
    }
}

impl Bridge {
    /// Starts the relay (without its per-session rate limit: forwarding is what is measured) and
    /// opens the session to `peer`.
    pub async fn start(peer: SocketAddr) -> anyhow::Result<Bridge> {
        let mut config = Config::with_listen("127.0.0.1:0".parse()?);
        config.bridge = true;
        config.allow =
            vec![format!("127.0.0.1:{}", peer.port()).parse().map_err(|e: String| anyhow!(e))?];
        config.datagram_rate = 10_000_000;
        config.datagram_burst = 1_000_000;
        let relay = Arc::new(Relay::new(config).await?);
        let r = Arc::clone(&relay);
        let server = tokio::spawn(async move { r.run().await });
        match connect(&relay, peer).await {
            Ok((client, control, conn)) => {
                Ok(Bridge { relay, server, _endpoint: client, _control: control, conn })
            }
            Err(e) => {
                relay.shutdown();
                let _ = server.await;
                Err(e)
            }
        }
    }

    /// Shuts the relay down and waits for it.
    pub async fn stop(self) {
        self.relay.shutdown();
        let _ = self.server.await;
    }
}

/// A WebTransport session through `relay` to `peer`, once the relay said `ready`: the endpoint it
/// lives on, its control stream and the session.
async fn connect(
    relay: &Relay,
    peer: SocketAddr,
) -> anyhow::Result<(Endpoint<endpoint_side::Client>, SendStream, Connection)> {
    let hashes = relay
        .cert_hashes()
        .iter()
        .map(|h| {
            let b = base64::engine::general_purpose::STANDARD.decode(h)?;
            let b: [u8; 32] = b.try_into().map_err(|_| anyhow!("hash length"))?;
            Ok(Sha256Digest::new(b))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let client = Endpoint::client(
        ClientConfig::builder().with_bind_default().with_server_certificate_hashes(hashes).build(),
    )?;
    let conn =
        client.connect(format!("https://127.0.0.1:{}/wt", relay.local_addr().port())).await?;
    let (mut send, recv) = conn.open_bi().await?.await?;
    let hello = ClientMessage::Hello(Hello {
        token: Some(relay.token().expose().to_string()),
        mode: Some(Mode::Bridge),
        host: Some("127.0.0.1".into()),
        port: Some(peer.port()),
        ..Hello::default()
    });
    send.write_all(&hello.to_line()).await?;
    let reply = LineReader::new(recv).next_line().await?;
    let reply: ServerMessage = tern::relay_proto::decode(&reply)?;
    if !matches!(reply, ServerMessage::Ready(_)) {
        return Err(anyhow!("relay refused the bridge: {reply:?}"));
    }
    Ok((client, send, conn))
}

/// `rounds` sequential round trips of `payload` straight to the echo peer, ms each.
pub async fn direct_rtts(
    echo: SocketAddr,
    payload: &[u8],
    rounds: usize,
) -> anyhow::Result<Vec<f64>> {
    let sock = UdpSocket::bind("127.0.0.1:0").await?;
    sock.connect(echo).await?;
    let mut buf = vec![0u8; 4096];
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        sock.send(payload).await?;
        sock.recv(&mut buf).await?;
        out.push(ms(t.elapsed()));
    }
    Ok(out)
}

/// `rounds` sequential round trips of `payload` through the relay, ms each: until the whole
/// answer (every framed part of it) is back.
pub async fn relay_rtts(
    conn: &Connection,
    payload: &[u8],
    rounds: usize,
) -> anyhow::Result<Vec<f64>> {
    let mut joiner = Joiner::new();
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        conn.send_datagram(payload)?;
        loop {
            let d = conn.receive_datagram().await?;
            if joiner.push(&d).map_err(|e| anyhow!("{e:?}"))?.is_some() {
                break;
            }
        }
        out.push(ms(t.elapsed()));
    }
    Ok(out)
}

async fn measure(rounds: usize, burst: u32) -> anyhow::Result<RelayRun> {
    let received = Arc::new(AtomicU64::new(0));
    let echo = udp_echo::spawn(Arc::clone(&received)).await?;
    let bridge = Bridge::start(echo).await?;
    let result = measure_with(&bridge.conn, echo, &received, rounds, burst).await;
    bridge.stop().await;
    result
}

async fn measure_with(
    conn: &Connection,
    echo: SocketAddr,
    received: &AtomicU64,
    rounds: usize,
    burst: u32,
) -> anyhow::Result<RelayRun> {
    let small = [1u8; 100];
    let warm = (rounds / 10).max(20);
    direct_rtts(echo, &small, warm).await?;
    relay_rtts(conn, &small, warm).await?;
    let mut run = RelayRun {
        direct: direct_rtts(echo, &small, rounds).await?,
        relayed: relay_rtts(conn, &small, rounds).await?,
        relayed_large: relay_rtts(conn, b"blast:1:1252", rounds).await?,
        ..RelayRun::default()
    };

    // Relay → client burst of 1000-byte datagrams; the clock stops at the last arrival.
    let t = Instant::now();
    conn.send_datagram(format!("blast:{burst}:1000").as_bytes())?;
    let mut got = 0u32;
    let mut last = t;
    while let Ok(Ok(_)) =
        tokio::time::timeout(Duration::from_millis(300), conn.receive_datagram()).await
    {
        got += 1;
        last = Instant::now();
    }
    run.down_rate = f64::from(got) / (last - t).as_secs_f64().max(1e-6);
    run.down_delivered = f64::from(got) / f64::from(burst);

    // Client → relay → UDP burst.
    let before = received.load(Ordering::Relaxed);
    let t = Instant::now();
    let mut sent = 0u32;
    for i in 0..burst {
        if conn.send_datagram([9u8; 1]).is_ok() {
            sent += 1;
        }
        if i % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    // Poll finely so the end time is accurate; 300 ms without a new arrival ends the burst.
    let mut count = received.load(Ordering::Relaxed);
    let mut last = Instant::now();
    let mut idle = 0;
    while idle < 30 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let now = received.load(Ordering::Relaxed);
        if now == count {
            idle += 1;
        } else {
            (count, last, idle) = (now, Instant::now(), 0);
        }
    }
    let arrived = count - before;
    run.up_rate = arrived as f64 / (last - t).as_secs_f64().max(1e-6);
    run.up_delivered = arrived as f64 / f64::from(sent.max(1));
    Ok(run)
}

// The suite's `relay` part.

/// Project targets for the relay (the suite's specification names none): its cost must vanish
/// next to the smallest echo (about 10 ms at RTT 0) and its rate must dwarf a session's (a frame
/// every 20 ms, 50 datagrams/s, a few hundred during a paste).
const RELAY_ADDED_MS: f64 = 1.0;
const RELAY_RATE: f64 = 5000.0;

/// The suite's `relay` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    progress("relay: round trips and bursts");
    let run = match run(options.relay_rounds, options.relay_burst) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("relay failed: {e:#}"));
            return;
        }
    };
    if let Some(added) = run.added_p50() {
        report.row(
            "relay added round-trip latency, median, 100 B",
            added,
            "ms",
            format!("≤ {RELAY_ADDED_MS} ms (project target: under 10 % of the RTT-0 echo)"),
            added <= RELAY_ADDED_MS,
        );
    }
    for (name, rate) in [
        ("relay forwarding rate, relay → browser, 1000 B", run.down_rate),
        ("relay forwarding rate, browser → relay → UDP, 1 B", run.up_rate),
    ] {
        report.row(
            name,
            rate,
            "datagrams/s",
            format!("≥ {RELAY_RATE} (project target: 100x a 50 frames/s session)"),
            rate >= RELAY_RATE,
        );
    }
    let g = "relay";
    report.detail_if(g, "direct UDP round trip median, 100 B", median(&run.direct), "ms");
    report.detail_if(g, "via relay round trip median, 100 B", median(&run.relayed), "ms");
    report.detail_if(g, "via relay round trip p99, 100 B", run.relayed_p99(), "ms");
    report.detail_if(
        g,
        "via relay round trip median, 1252 B reply (2 framed parts)",
        median(&run.relayed_large),
        "ms",
    );
    let large_p99 = quantile(&run.relayed_large, 0.99);
    report.detail_if(g, "via relay round trip p99, 1252 B reply", large_p99, "ms");
    report.detail(g, "burst relay → browser: share delivered", run.down_delivered * 100.0, "%");
    report.detail(g, "burst browser → relay: share delivered", run.up_delivered * 100.0, "%");
}
