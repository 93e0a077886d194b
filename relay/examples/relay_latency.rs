//! Benchmark: what the relay adds to a datagram's round trip, and how many datagrams/s it forwards.
//!
//! Runs a UDP echo server on loopback, then measures sequential round trips of a 100-byte and a
//! 1252-byte datagram (a) directly over UDP and (b) through an in-process relay in bridge mode
//! with a native WebTransport client, and finally a burst in each direction. Prints numbers only;
//! it asserts nothing. `cargo run --release -p tern-relay --example relay_latency [ROUNDS]`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use tern_relay::config::Config;
use tern_relay::control::{ClientMessage, Hello, LineReader, ServerMessage};
use tern_relay::framing::Joiner;
use tern_relay::{Mode, Relay};
use tokio::net::UdpSocket;
use wtransport::tls::Sha256Digest;
use wtransport::{ClientConfig, Connection, Endpoint};

/// Echo server; `blast:N:LEN` answers with N datagrams of LEN bytes as fast as it can.
/// Counts every datagram it receives in `received`.
async fn echo_server(received: Arc<AtomicU64>) -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else { return };
            received.fetch_add(1, Ordering::Relaxed);
            let msg = &buf[..n];
            if let Some(rest) = std::str::from_utf8(msg).ok().and_then(|s| s.strip_prefix("blast:"))
            {
                let (count, len) = rest.split_once(':').unwrap();
                let payload = vec![7u8; len.parse().unwrap()];
                for _ in 0..count.parse::<u32>().unwrap() {
                    let _ = sock.send_to(&payload, from).await;
                }
            } else if n > 1 {
                let _ = sock.send_to(msg, from).await;
            }
        }
    });
    addr
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(name: &str, mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let (p50, p99) = (percentile(&samples, 0.50), percentile(&samples, 0.99));
    println!(
        "{name:<34} n={:<6} p50={:>8.1} us  p99={:>8.1} us",
        samples.len(),
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6
    );
    (p50, p99)
}

async fn direct_rtts(echo: SocketAddr, payload: &[u8], rounds: usize) -> Vec<Duration> {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.connect(echo).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        sock.send(payload).await.unwrap();
        sock.recv(&mut buf).await.unwrap();
        out.push(t.elapsed());
    }
    out
}

async fn relay_rtts(conn: &Connection, payload: &[u8], rounds: usize) -> Vec<Duration> {
    let mut joiner = Joiner::new();
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        conn.send_datagram(payload).unwrap();
        loop {
            let d = conn.receive_datagram().await.unwrap();
            if joiner.push(&d).unwrap().is_some() {
                break;
            }
        }
        out.push(t.elapsed());
    }
    out
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let received = Arc::new(AtomicU64::new(0));
    let echo = echo_server(Arc::clone(&received)).await;

    let mut config = Config::with_listen("127.0.0.1:0".parse().unwrap());
    config.bridge = true;
    config.allow = vec![format!("127.0.0.1:{}", echo.port()).parse().unwrap()];
    // The benchmark measures forwarding, not the per-session rate limit.
    config.datagram_rate = 10_000_000;
    config.datagram_burst = 1_000_000;
    let relay = Arc::new(Relay::new(config).await.unwrap());
    let r = Arc::clone(&relay);
    let server = tokio::spawn(async move { r.run().await });

    let hashes: Vec<Sha256Digest> = relay
        .cert_hashes()
        .iter()
        .map(|h| {
            let b = base64::engine::general_purpose::STANDARD.decode(h).unwrap();
            Sha256Digest::new(b.try_into().unwrap())
        })
        .collect();
    let client = Endpoint::client(
        ClientConfig::builder().with_bind_default().with_server_certificate_hashes(hashes).build(),
    )
    .unwrap();
    let conn = client
        .connect(format!("https://127.0.0.1:{}/wt", relay.local_addr().port()))
        .await
        .unwrap();
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let hello = ClientMessage::Hello(Hello {
        token: Some(relay.token().expose().to_string()),
        mode: Some(Mode::Bridge),
        host: Some("127.0.0.1".into()),
        port: Some(echo.port()),
        ..Hello::default()
    });
    send.write_all(&hello.to_line()).await.unwrap();
    let reply: ServerMessage =
        tern::relay_proto::decode(&LineReader::new(recv).next_line().await.unwrap()).unwrap();
    assert!(matches!(reply, ServerMessage::Ready(_)), "{reply:?}");

    println!("round trips through a UDP echo server on loopback ({rounds} each, sequential):");
    let small = [1u8; 100];
    // mosh-server's largest datagram: 1252 bytes, which the relay splits in two framed parts.
    let large: &[u8] = b"blast:1:1252";
    // Warm up both paths.
    direct_rtts(echo, &small, 200).await;
    relay_rtts(&conn, &small, 200).await;
    let (d100, _) = report("direct UDP, 100 B", direct_rtts(echo, &small, rounds).await);
    let (r100, r100_99) = report("via relay, 100 B", relay_rtts(&conn, &small, rounds).await);
    let (d1252, _) = report("direct UDP, 1252 B reply", direct_rtts(echo, large, rounds).await);
    let (r1252, r1252_99) =
        report("via relay, 1252 B reply (2 parts)", relay_rtts(&conn, large, rounds).await);
    println!(
        "relay path adds (p50 round trip, incl. the client's QUIC stack): {:.1} us at 100 B, {:.1} us at 1252 B; p99 via relay {:.1} / {:.1} us",
        r100.saturating_sub(d100).as_secs_f64() * 1e6,
        r1252.saturating_sub(d1252).as_secs_f64() * 1e6,
        r100_99.as_secs_f64() * 1e6,
        r1252_99.as_secs_f64() * 1e6,
    );

    // Server → browser burst (the direction that carries screen updates).
    let n = 50_000u32;
    let t = Instant::now();
    conn.send_datagram(format!("blast:{n}:1000").as_bytes()).unwrap();
    let mut got = 0u32;
    while let Ok(Ok(_)) =
        tokio::time::timeout(Duration::from_millis(300), conn.receive_datagram()).await
    {
        got += 1;
    }
    let elapsed = t.elapsed().saturating_sub(Duration::from_millis(300));
    println!(
        "server->browser: {got}/{n} datagrams of 1000 B arrived, {:.0} datagrams/s",
        f64::from(got) / elapsed.as_secs_f64()
    );

    // Browser → server burst.
    let before = received.load(Ordering::Relaxed);
    let t = Instant::now();
    let payload = [9u8; 1];
    let mut sent = 0u32;
    for i in 0..n {
        if conn.send_datagram(payload).is_ok() {
            sent += 1;
        }
        if i % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let mut last = received.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = received.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        last = now;
    }
    let elapsed = t.elapsed().saturating_sub(Duration::from_millis(200));
    let arrived = last - before;
    println!(
        "browser->server: {arrived}/{sent} datagrams arrived, {:.0} datagrams/s",
        arrived as f64 / elapsed.as_secs_f64()
    );

    relay.shutdown();
    let _ = server.await;
}
