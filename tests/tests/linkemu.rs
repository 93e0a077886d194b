//! The link emulator over real UDP sockets on 127.0.0.1. Timing asserts are lower bounds or loose
//! ballparks only: the machine is shared and noisy, and a late packet is never the emulator's
//! promise to break.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tern_tests::linkemu::{Dir, DirectionConfig, LinkConfig, LinkEmulator, LinkStats, bind_udp};

/// Long enough for a loaded machine; tests finish far sooner when all is well.
const PATIENCE: Duration = Duration::from_secs(20);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[derive(Debug, Clone)]
struct Arrival {
    at: Instant,
    from: SocketAddr,
    data: Vec<u8>,
}

/// A UDP server on 127.0.0.1 that logs every datagram and optionally echoes it back.
struct Server {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Arrival>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(echo: bool) -> Self {
        // Large buffers: a burst of the test's datagrams must not overflow the kernel's queue
        // while this thread waits for a core (a loaded CI run lost 150 of 1600 that way).
        let socket = bind_udp("127.0.0.1:0".parse().unwrap()).unwrap();
        socket.set_read_timeout(Some(ms(20))).unwrap();
        let addr = socket.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (Arc::clone(&log), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 65_535];
            while !s.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let at = Instant::now();
                if echo {
                    let _ = socket.send_to(&buf[..n], from);
                }
                l.lock().unwrap().push(Arrival { at, from, data: buf[..n].to_vec() });
            }
        });
        Self { addr, log, stop, thread: Some(thread) }
    }

    fn arrivals(&self) -> Vec<Arrival> {
        self.log.lock().unwrap().clone()
    }

    fn count(&self) -> usize {
        self.log.lock().unwrap().len()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn client() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(PATIENCE)).unwrap();
    socket
}

fn emulator(server: &Server, up: DirectionConfig, down: DirectionConfig) -> LinkEmulator {
    let mut config = LinkConfig::new("127.0.0.1:0".parse().unwrap(), server.addr);
    config.up = up;
    config.down = down;
    config.seed = Some(0x7e57);
    LinkEmulator::start(config).unwrap()
}

fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(ms(5));
    }
    done()
}

/// Waits until every datagram the emulator took in has been forwarded or dropped.
fn settle(emu: &LinkEmulator, up_expected: u64) -> LinkStats {
    assert!(
        wait_until(|| {
            let s = emu.stats().up;
            s.received >= up_expected
                && s.forwarded + s.dropped_loss + s.dropped_queue >= s.received + s.duplicated
        }),
        "emulator did not settle: {:?}",
        emu.stats()
    );
    emu.stats()
}

/// Sends `n` datagrams of `len` bytes, sequence-numbered, pausing briefly every `burst` datagrams
/// so the emulator's socket buffer (capped by the kernel) never overflows.
fn send_numbered(
    socket: &UdpSocket,
    to: SocketAddr,
    n: u32,
    len: usize,
    burst: u32,
    pause: Duration,
) {
    let mut payload = vec![0u8; len.max(4)];
    for i in 0..n {
        payload[..4].copy_from_slice(&i.to_be_bytes());
        socket.send_to(&payload, to).unwrap();
        if (i + 1) % burst == 0 {
            std::thread::sleep(pause);
        }
    }
}

fn seq(a: &Arrival) -> u32 {
    u32::from_be_bytes(a.data[..4].try_into().unwrap())
}

#[test]
fn delay_is_applied_in_each_direction() {
    let server = Server::start(true);
    let emu = emulator(
        &server,
        DirectionConfig { delay: ms(30), ..Default::default() },
        DirectionConfig { delay: ms(20), ..Default::default() },
    );
    let c = client();
    let mut overshoot = Vec::new();
    for i in 0..10u32 {
        let sent = Instant::now();
        c.send_to(&i.to_be_bytes(), emu.local_addr()).unwrap();
        let mut buf = [0u8; 16];
        let n = c.recv(&mut buf).unwrap();
        let rtt = sent.elapsed();
        assert_eq!(&buf[..n], &i.to_be_bytes());
        assert!(rtt >= ms(50), "round trip {rtt:?} shorter than 30 + 20 ms");
        let arrival = server.arrivals().into_iter().find(|a| seq(a) == i).unwrap();
        let one_way = arrival.at - sent;
        assert!(one_way >= ms(30), "up delay {one_way:?} shorter than 30 ms");
        overshoot.push(rtt - ms(50));
    }
    overshoot.sort();
    // Informational: how late releases are on this machine (no assert; it is noisy).
    eprintln!("round-trip overshoot over 50 ms: median {:?}, max {:?}", overshoot[5], overshoot[9]);
}

#[test]
fn loss_rate_is_near_the_configured_probability() {
    let server = Server::start(false);
    let emu = emulator(
        &server,
        DirectionConfig { loss: 0.2, ..Default::default() },
        DirectionConfig::default(),
    );
    let c = client();
    let n = 2_000;
    send_numbered(&c, emu.local_addr(), n, 64, 50, ms(1));
    let s = settle(&emu, u64::from(n)).up;
    let rate = s.dropped_loss as f64 / s.received as f64;
    // 4 sigma of binomial(2000, 0.2) is 0.036.
    assert!((0.16..=0.24).contains(&rate), "loss rate {rate} ({s:?})");
    assert_eq!(s.forwarded + s.dropped_loss, s.received);
    assert!(wait_until(|| server.count() as u64 == s.forwarded), "server got {}", server.count());
}

#[test]
fn rate_limit_throughput_is_in_the_ballpark() {
    let server = Server::start(false);
    // 972-byte payloads are 1000 bytes on the emulated wire: 4 ms each at 2 Mbit/s.
    let emu = emulator(
        &server,
        DirectionConfig { rate_bps: Some(2_000_000), ..Default::default() },
        DirectionConfig::default(),
    );
    let c = client();
    let n = 150;
    send_numbered(&c, emu.local_addr(), n, 972, 10, ms(1));
    let s = settle(&emu, u64::from(n)).up;
    assert_eq!(s.forwarded, u64::from(n));
    assert!(wait_until(|| server.count() == n as usize));
    let arrivals = server.arrivals();
    let span = arrivals.last().unwrap().at - arrivals[0].at;
    // 149 serializations of 4 ms after the first: at least 596 ms minus scheduling slop.
    assert!(span >= ms(560), "150 kB crossed a 2 Mbit/s link in {span:?}");
    let bps = (u64::from(n) - 1) as f64 * 8_000.0 / span.as_secs_f64();
    assert!(bps >= 500_000.0, "throughput {bps:.0} bit/s is far below the 2 Mbit/s limit");
}

#[test]
fn overfilled_byte_queue_drops_at_the_tail() {
    let server = Server::start(false);
    // 1 Mbit/s: 8 ms per 1000-byte packet; the queue holds 10 of them.
    let emu = emulator(
        &server,
        DirectionConfig {
            rate_bps: Some(1_000_000),
            queue_bytes: Some(10_000),
            ..Default::default()
        },
        DirectionConfig::default(),
    );
    let c = client();
    send_numbered(&c, emu.local_addr(), 100, 972, 25, ms(1));
    let s = settle(&emu, 100).up;
    assert!(s.dropped_queue >= 50, "only {} queue drops: {s:?}", s.dropped_queue);
    assert_eq!(s.forwarded + s.dropped_queue, 100);
    assert!(wait_until(|| server.count() as u64 == s.forwarded));
    // Drop-tail: the first packets got through.
    assert!(server.arrivals().iter().take(10).map(seq).eq(0..10));
}

#[test]
fn overfilled_delay_queue_drops_at_the_tail() {
    let server = Server::start(false);
    let emu = emulator(
        &server,
        DirectionConfig {
            rate_bps: Some(1_000_000),
            queue_delay: Some(ms(40)),
            ..Default::default()
        },
        DirectionConfig::default(),
    );
    let c = client();
    send_numbered(&c, emu.local_addr(), 100, 972, 25, ms(1));
    let s = settle(&emu, 100).up;
    assert!(s.dropped_queue >= 50, "only {} queue drops: {s:?}", s.dropped_queue);
    assert_eq!(s.forwarded + s.dropped_queue, 100);
}

#[test]
fn each_client_address_gets_its_own_upstream_flow() {
    let server = Server::start(true);
    let emu = emulator(&server, DirectionConfig::default(), DirectionConfig::default());
    let clients = [client(), client(), client()];
    for (i, c) in clients.iter().enumerate() {
        for round in 0..3u8 {
            c.send_to(&[i as u8, round], emu.local_addr()).unwrap();
            let mut buf = [0u8; 8];
            let n = c.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &[i as u8, round], "client {i} got another flow's reply");
        }
    }
    let flows = emu.flows();
    assert_eq!(flows.len(), 3);
    assert_eq!(emu.stats().flows_opened, 3);
    for (i, c) in clients.iter().enumerate() {
        let addr = c.local_addr().unwrap();
        let flow = flows.iter().find(|f| f.client == addr).expect("flow per client");
        // Every datagram of this client reached the server from this flow's socket only.
        let sources: Vec<_> = server
            .arrivals()
            .into_iter()
            .filter(|a| a.data[0] == i as u8)
            .map(|a| a.from)
            .collect();
        assert_eq!(sources, vec![flow.upstream; 3]);
    }
    let mut ports: Vec<_> = flows.iter().map(|f| f.upstream.port()).collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 3, "flows share an upstream socket");
}

#[test]
fn jitter_keeps_order_when_reordering_is_off() {
    let server = Server::start(false);
    let emu = emulator(
        &server,
        DirectionConfig { delay: ms(5), jitter: ms(20), ..Default::default() },
        DirectionConfig::default(),
    );
    let c = client();
    let n = 300;
    send_numbered(&c, emu.local_addr(), n, 32, 1, Duration::from_micros(300));
    settle(&emu, u64::from(n));
    assert!(wait_until(|| server.count() == n as usize));
    let order: Vec<u32> = server.arrivals().iter().map(seq).collect();
    assert!(order.iter().copied().eq(0..n), "reordered: {order:?}");
}

#[test]
fn jitter_reorders_when_allowed() {
    let server = Server::start(false);
    let emu = emulator(
        &server,
        DirectionConfig { jitter: ms(20), reorder: true, ..Default::default() },
        DirectionConfig::default(),
    );
    let c = client();
    let n = 200;
    send_numbered(&c, emu.local_addr(), n, 32, 1, Duration::from_micros(300));
    settle(&emu, u64::from(n));
    assert!(wait_until(|| server.count() == n as usize));
    let order: Vec<u32> = server.arrivals().iter().map(seq).collect();
    assert!(order.windows(2).any(|w| w[1] < w[0]), "20 ms of jitter reordered nothing");
}

#[test]
fn duplicates_are_counted_and_delivered() {
    let server = Server::start(false);
    let emu = emulator(
        &server,
        DirectionConfig { duplicate: 0.5, ..Default::default() },
        DirectionConfig::default(),
    );
    let c = client();
    let n = 400;
    send_numbered(&c, emu.local_addr(), n, 32, 20, ms(1));
    let s = settle(&emu, u64::from(n)).up;
    assert!((140..=260).contains(&s.duplicated), "{s:?}");
    assert_eq!(s.forwarded, s.received + s.duplicated);
    assert!(wait_until(|| server.count() as u64 == s.forwarded));
}

#[test]
fn down_direction_is_shaped_independently() {
    let server = Server::start(true);
    let emu = emulator(
        &server,
        DirectionConfig::default(),
        DirectionConfig { loss: 1.0, ..Default::default() },
    );
    let c = client();
    c.set_read_timeout(Some(ms(300))).unwrap();
    send_numbered(&c, emu.local_addr(), 20, 16, 20, ms(1));
    assert!(wait_until(|| emu.stats().down.dropped_loss == 20), "{:?}", emu.stats());
    assert_eq!(server.count(), 20);
    let mut buf = [0u8; 16];
    assert!(c.recv(&mut buf).is_err(), "a reply crossed a link with 100% loss down");
}

#[test]
fn reconfiguration_takes_effect_at_runtime() {
    let server = Server::start(false);
    let emu = emulator(&server, DirectionConfig::default(), DirectionConfig::default());
    let c = client();
    emu.set_config(Dir::Up, DirectionConfig { loss: 1.0, ..Default::default() }).unwrap();
    send_numbered(&c, emu.local_addr(), 30, 16, 30, ms(1));
    settle(&emu, 30);
    assert_eq!(emu.stats().up.dropped_loss, 30);
    emu.set_config(Dir::Up, DirectionConfig::default()).unwrap();
    send_numbered(&c, emu.local_addr(), 30, 16, 30, ms(1));
    settle(&emu, 60);
    assert!(wait_until(|| server.count() == 30));
    assert!(
        emu.set_config(Dir::Down, DirectionConfig { loss: 2.0, ..Default::default() }).is_err()
    );
}

#[test]
fn dropping_the_emulator_frees_its_port() {
    let server = Server::start(false);
    let emu = emulator(&server, DirectionConfig::default(), DirectionConfig::default());
    let addr = emu.local_addr();
    let c = client();
    c.send_to(b"x", addr).unwrap();
    assert!(wait_until(|| server.count() == 1));
    drop(emu);
    UdpSocket::bind(addr).expect("port still held after drop");
}

#[test]
fn tap_sees_each_datagram_with_its_fate_and_times() {
    use tern_tests::linkemu::{Fate, TapLog};
    let server = Server::start(true);
    let emu = emulator(
        &server,
        DirectionConfig { delay: ms(15), ..Default::default() },
        DirectionConfig { delay: ms(5), ..Default::default() },
    );
    let log = TapLog::new();
    emu.set_tap(Some(log.clone()));
    let c = client();
    for i in 0..5u32 {
        c.send_to(&i.to_be_bytes(), emu.local_addr()).unwrap();
        let mut buf = [0u8; 16];
        c.recv(&mut buf).unwrap();
    }
    // Everything lost upward from now on: the tap reports the drops too.
    emu.set_config(Dir::Up, DirectionConfig { loss: 1.0, ..Default::default() }).unwrap();
    c.send_to(b"lost", emu.local_addr()).unwrap();
    assert!(wait_until(|| emu.stats().up.dropped_loss == 1));
    let records = log.take();
    let ups: Vec<_> = records.iter().filter(|r| r.dir == Dir::Up).collect();
    let downs: Vec<_> = records.iter().filter(|r| r.dir == Dir::Down).collect();
    assert_eq!((ups.len(), downs.len()), (6, 5), "{records:?}");
    for (r, delay) in ups[..5].iter().map(|r| (r, ms(15))).chain(downs.iter().map(|r| (r, ms(5)))) {
        let released = r.released().expect("forwarded");
        assert!(released - r.arrived >= delay, "{r:?}");
    }
    assert_eq!(ups[5].fate, Fate::DroppedLoss);
    assert_eq!(&*ups[5].data, b"lost");
    // The server's echo of datagram i leaves after datagram i reached the server.
    for (u, d) in ups.iter().zip(&downs) {
        assert_eq!(u.data, d.data);
        assert!(d.arrived >= u.released().unwrap());
    }
}
