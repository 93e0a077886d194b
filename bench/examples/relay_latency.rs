//! Benchmark: what the relay adds to a datagram's round trip, and how many datagrams/s it forwards.
//!
//! Runs a UDP echo peer on loopback (`tern_tests::udp_echo`), then measures sequential round trips
//! of a 100-byte and a 1252-byte datagram (a) directly over UDP and (b) through an in-process
//! relay in bridge mode with a native WebTransport client (`tern_bench::relay::Bridge`, as the
//! suite's relay rows do), and finally a burst in each direction. Prints numbers only; it asserts
//! nothing. `cargo run --release -p tern-bench --example relay_latency [ROUNDS]`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tern_bench::relay::{Bridge, direct_rtts, relay_rtts};
use tern_tests::udp_echo;

/// The `p`-quantile of sorted samples, the nearest index.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Prints the p50 and p99 of round trips in ms, as µs, and returns them (ms).
fn report(name: &str, mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&samples, 0.50), percentile(&samples, 0.99));
    println!(
        "{name:<34} n={:<6} p50={:>8.1} us  p99={:>8.1} us",
        samples.len(),
        p50 * 1e3,
        p99 * 1e3
    );
    (p50, p99)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let received = Arc::new(AtomicU64::new(0));
    let echo = udp_echo::spawn(Arc::clone(&received)).await?;
    let bridge = Bridge::start(echo).await?;
    let conn = &bridge.conn;

    println!("round trips through a UDP echo server on loopback ({rounds} each, sequential):");
    let small = [1u8; 100];
    // mosh-server's largest datagram: 1252 bytes, which the relay splits in two framed parts.
    let large: &[u8] = b"blast:1:1252";
    // Warm up both paths.
    direct_rtts(echo, &small, 200).await?;
    relay_rtts(conn, &small, 200).await?;
    let (d100, _) = report("direct UDP, 100 B", direct_rtts(echo, &small, rounds).await?);
    let (r100, r100_99) = report("via relay, 100 B", relay_rtts(conn, &small, rounds).await?);
    let (d1252, _) = report("direct UDP, 1252 B reply", direct_rtts(echo, large, rounds).await?);
    let (r1252, r1252_99) =
        report("via relay, 1252 B reply (2 parts)", relay_rtts(conn, large, rounds).await?);
    println!(
        "relay path adds (p50 round trip, incl. the client's QUIC stack): {:.1} us at 100 B, {:.1} us at 1252 B; p99 via relay {:.1} / {:.1} us",
        (r100 - d100).max(0.0) * 1e3,
        (r1252 - d1252).max(0.0) * 1e3,
        r100_99 * 1e3,
        r1252_99 * 1e3,
    );

    // Server → browser burst (the direction that carries screen updates).
    let n = 50_000u32;
    let t = Instant::now();
    conn.send_datagram(format!("blast:{n}:1000").as_bytes())?;
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

    bridge.stop().await;
    Ok(())
}
