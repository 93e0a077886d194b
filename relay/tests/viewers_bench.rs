//! Benchmark (ignored by default; prints numbers, asserts nothing about speed): N viewers on one
//! session. The owner's page is a native mosh client over WebTransport typing into a real
//! mosh-server's shell; N viewers watch over the WebSocket (as a browser that fell back, each its
//! own TCP connection and task, reading `screen` lines). Measured, in the same run:
//!
//! - the owner's key-to-echo round trip with no viewer, then with N (the added cost of viewers);
//! - each viewer's lag behind the owner: when its first `screen` line after a key arrives, minus
//!   when the owner's client had the echo (median and p95 over all viewers and keys);
//! - the process's memory per viewer (RSS after the viewers joined minus before, divided by N).
//!   The relay runs in this process with the clients, so this counts a viewer's client side
//!   (its WebSocket and buffers) too: an upper bound for the relay's share.
//!
//! `cargo test -p tern-relay --test viewers_bench -- --ignored --nocapture` (`TERN_VIEWERS=50`,
//! `TERN_KEYS=60`).

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use support::*;
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{ClientMessage, Hello, LineBuffer, ServerMessage, WEBSOCKET_PATH, decode};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn rss_kib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0.0)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// One viewer over the WebSocket: every `screen` line's arrival time, until the test ends.
async fn viewer(
    addr: std::net::SocketAddr,
    token: String,
    session: String,
    arrivals: Arc<Mutex<Vec<Instant>>>,
    ready: tokio::sync::mpsc::Sender<()>,
) {
    let mut request = format!("ws://{addr}{WEBSOCKET_PATH}").into_client_request().unwrap();
    let h = request.headers_mut();
    h.insert("origin", HeaderValue::from_str(&format!("http://{addr}")).unwrap());
    let protocols = format!("tern, tern-token.{token}");
    h.insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(request, tcp).await.expect("upgrade");
    let hello =
        ClientMessage::Hello(Hello { view: true, ..spawn_hello(Some(&token), Some(&session)) });
    ws.send(Message::Binary(Frame::Control(&hello.to_line()).encode().into())).await.unwrap();
    let mut lines = LineBuffer::new(1 << 22);
    let mut told = false;
    while let Some(Ok(m)) = ws.next().await {
        let Message::Binary(b) = m else { continue };
        if let Ok(Frame::Control(c)) = Frame::decode(&b) {
            lines.push(c);
        }
        while let Ok(Some(line)) = lines.next_line() {
            match decode::<ServerMessage>(&line) {
                Ok(ServerMessage::Screen { .. }) => {
                    arrivals.lock().unwrap().push(Instant::now());
                    if !told {
                        told = true;
                        let _ = ready.send(()).await;
                    }
                }
                Ok(m @ (ServerMessage::Ended { .. } | ServerMessage::Error { .. })) => {
                    panic!("a viewer was refused: {m:?}")
                }
                _ => {}
            }
        }
    }
}

/// The owner types one character and waits for its echo: the round trip, ms.
async fn key_to_echo(
    owner: &mut MoshOverRelay<tern::terminal::Complete>,
    key: u8,
    count: usize,
) -> f64 {
    let t = Instant::now();
    owner.type_bytes(&[key]);
    let shown = owner
        .run_until(Duration::from_secs(5), |s| {
            let text = tern::terminal::screen_text(s.server_state().framebuffer()).rows.join("\n");
            text.matches(key as char).count() >= count
        })
        .await;
    assert!(shown, "the echo came");
    t.elapsed().as_secs_f64() * 1e3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: prints numbers (cargo test ... -- --ignored --nocapture)"]
async fn viewers_bench() {
    let n = env_or("TERN_VIEWERS", 50);
    let keys = env_or("TERN_KEYS", 60);
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let owner_token = test_token("owner");
    // Each viewer's link counts against --max-sessions (16 by default) like any browser session.
    let mut config = spawn_config(state.path(), &owner_token);
    config.max_sessions = n + 8;
    let relay = TestRelay::start(config).await;
    let conn = connect(&relay, None).await.unwrap();
    let (control, reply) = hello(&conn, spawn_hello(Some(&owner_token), None)).await;
    let ready = expect_ready(reply);
    let mut owner = MoshOverRelay::page(conn, control, &ready, 80, 24);
    assert!(owner.run_until(Duration::from_secs(15), |s| s.has_heard_server()).await);
    owner.run_until(Duration::from_millis(500), |_| false).await;

    // Without viewers: the owner's round trips (a fresh character per phase, so counts rise).
    let mut alone = Vec::new();
    for i in 0..keys {
        alone.push(key_to_echo(&mut owner, b'a', i + 1).await);
    }

    // N viewers join.
    let rss_before = rss_kib();
    let (tx, mut rx) = tokio::sync::mpsc::channel(n);
    let mut all = Vec::new();
    let mut tasks = Vec::new();
    // One at a time (each until its first paint): a burst of connects would meet the relay's
    // handshake caps, which are not what is measured here.
    for _ in 0..n {
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        all.push(Arc::clone(&arrivals));
        tasks.push(tokio::spawn(viewer(
            relay.addr(),
            owner_token.clone(),
            ready.session.clone(),
            arrivals,
            tx.clone(),
        )));
        tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.expect("the viewer painted");
    }
    owner.run_until(Duration::from_millis(500), |_| false).await;
    let rss_after = rss_kib();

    // With viewers: the owner's round trips, and each viewer's first screen after each key.
    let mut watched = Vec::new();
    let mut lags = Vec::new();
    for i in 0..keys {
        let t = Instant::now();
        let rtt = key_to_echo(&mut owner, b'b', i + 1).await;
        let echoed = t + Duration::from_secs_f64(rtt / 1e3);
        watched.push(rtt);
        // Every viewer's update for this key (they are coalesced, at most every 25 ms).
        owner.run_until(Duration::from_millis(60), |_| false).await;
        for a in &all {
            if let Some(at) = a.lock().unwrap().iter().find(|at| **at >= t) {
                lags.push(at.saturating_duration_since(echoed).as_secs_f64() * 1e3);
            }
        }
    }
    for t in tasks {
        t.abort();
    }
    let sort = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let (alone, watched, lags) = (sort(alone), sort(watched), sort(lags));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "viewers bench: {n} WebSocket viewers on one session, {keys} keys per phase; loadavg {}",
        load.trim()
    );
    println!(
        "owner key-to-echo p50: {:.2} ms alone, {:.2} ms with {n} viewers (added {:.2} ms); p95 {:.2} / {:.2} ms",
        quantile(&alone, 0.5),
        quantile(&watched, 0.5),
        quantile(&watched, 0.5) - quantile(&alone, 0.5),
        quantile(&alone, 0.95),
        quantile(&watched, 0.95),
    );
    println!(
        "viewer lag behind the owner's echo: median {:.2} ms, p95 {:.2} ms, max {:.2} ms ({} samples)",
        quantile(&lags, 0.5),
        quantile(&lags, 0.95),
        lags.last().copied().unwrap_or(f64::NAN),
        lags.len()
    );
    println!(
        "process RSS: {:.0} KiB before the viewers, {:.0} KiB with them: {:.1} KiB per viewer (relay and client side)",
        rss_before,
        rss_after,
        (rss_after - rss_before) / n as f64
    );
    // For tern-bench's `viewers` part (bench/src/viewers.rs): the same numbers, one JSON line.
    println!(
        "viewers-json {}",
        serde_json::json!({
            "viewers": n,
            "keys": keys,
            "ownerAloneP50Ms": quantile(&alone, 0.5),
            "ownerWatchedP50Ms": quantile(&watched, 0.5),
            "lagMedianMs": quantile(&lags, 0.5),
            "lagP95Ms": quantile(&lags, 0.95),
            "lagSamples": lags.len(),
            "kibPerViewer": (rss_after - rss_before) / n as f64,
        })
    );
    relay.stop().await;
}
