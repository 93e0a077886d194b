//! How exactly the link emulator keeps its promises on this machine: lateness of releases past
//! the configured delay, and delivered rate against the configured rate. Numbers, not a test.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use tern_tests::linkemu::{DirectionConfig, LinkConfig, LinkEmulator};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> anyhow::Result<()> {
    let server = UdpSocket::bind("127.0.0.1:0")?;
    server.set_read_timeout(Some(Duration::from_secs(5)))?;
    let client = UdpSocket::bind("127.0.0.1:0")?;

    // 1. Release lateness: 10 ms one-way delay, one datagram every 2 ms.
    let delay = Duration::from_millis(10);
    let mut config = LinkConfig::new("127.0.0.1:0".parse()?, server.local_addr()?);
    config.up = DirectionConfig { delay, ..Default::default() };
    config.seed = Some(1);
    let emu = LinkEmulator::start(config)?;
    let n = 500u32;
    let t0 = Instant::now();
    let sender = {
        let client = client.try_clone()?;
        let to = emu.local_addr();
        std::thread::spawn(move || -> std::io::Result<()> {
            for i in 0..n {
                let due = t0 + Duration::from_millis(2) * i;
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                let sent_ns = (Instant::now() - t0).as_nanos() as u64;
                let mut msg = [0u8; 12];
                msg[..4].copy_from_slice(&i.to_be_bytes());
                msg[4..].copy_from_slice(&sent_ns.to_be_bytes());
                client.send_to(&msg, to)?;
            }
            Ok(())
        })
    };
    let mut late = Vec::with_capacity(n as usize);
    let mut buf = [0u8; 64];
    for _ in 0..n {
        let len = server.recv(&mut buf)?;
        let arrived = Instant::now() - t0;
        anyhow::ensure!(len == 12, "unexpected datagram");
        let sent = Duration::from_nanos(u64::from_be_bytes(buf[4..12].try_into()?));
        late.push(arrived.saturating_sub(sent + delay));
    }
    sender.join().expect("sender thread")?;
    late.sort();
    println!(
        "release lateness past {delay:?} ({n} datagrams): p50 {:?} p90 {:?} p99 {:?} max {:?}",
        percentile(&late, 0.5),
        percentile(&late, 0.9),
        percentile(&late, 0.99),
        late[late.len() - 1]
    );
    drop(emu);

    // 2. Rate: 1000-byte wire packets at 20 Mbit/s, sent as fast as the queue drains.
    let rate = 20_000_000u64;
    let mut config = LinkConfig::new("127.0.0.1:0".parse()?, server.local_addr()?);
    config.up = DirectionConfig { rate_bps: Some(rate), ..Default::default() };
    let emu = LinkEmulator::start(config)?;
    let count = 2_000u32;
    let payload = [0u8; 972];
    // Send from another thread: the server must read while the link delivers, or its socket
    // buffer overflows and the numbers measure the kernel, not the emulator.
    let sender = {
        let client = client.try_clone()?;
        let to = emu.local_addr();
        std::thread::spawn(move || -> std::io::Result<()> {
            for i in 0..count {
                client.send_to(&payload, to)?;
                if i % 20 == 19 {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
            Ok(())
        })
    };
    let mut first = None;
    let mut last = Instant::now();
    let mut got = 0u32;
    server.set_read_timeout(Some(Duration::from_millis(500)))?;
    while got < count && server.recv(&mut buf).is_ok() {
        got += 1;
        last = Instant::now();
        first.get_or_insert(last);
    }
    sender.join().expect("sender thread")?;
    let span = last - first.unwrap_or(last);
    let measured = f64::from(got.saturating_sub(1)) * 8_000.0 / span.as_secs_f64();
    println!(
        "rate: configured {:.1} Mbit/s, delivered {:.2} Mbit/s on the wire (ratio {:.3}); \
         {got}/{count} datagrams arrived; emulator {:?}",
        rate as f64 / 1e6,
        measured / 1e6,
        measured / rate as f64,
        emu.stats().up
    );
    Ok(())
}
