//! The TUN link (linkemu's reflecting NAT) carrying the kernel's own TCP, UDP and ICMP.
//!
//! Each test needs a network namespace of its own (the link adds a device, an address and a
//! route), so the test re-runs itself under `unshare -n` (`unshare -rn` when not root) with only
//! that test selected, and passes when that run passes and says it ran. Missing `unshare`, user or
//! network namespaces, or `/dev/net/tun` fail the test with the reason: nothing here skips.
//!
//! Timing asserts are lower bounds or loose ballparks: the machine is shared and noisy.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tern_tests::linkemu::tun::{TunConfig, TunLink, internet_checksum};
use tern_tests::linkemu::{Dir, DirectionConfig};
use tern_tests::tools::require_program;

/// Set in the re-run inside the namespace.
const INNER: &str = "TERN_TUN_LINK_INNER";
/// Printed by the re-run when the selected test's body finished.
const RAN: &str = "tun-link test body finished:";
/// Long enough for a loaded machine; tests finish far sooner when all is well.
const PATIENCE: Duration = Duration::from_secs(60);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Runs `body` in a network namespace of its own: directly when this process is the re-run,
/// otherwise by re-running this test binary under `unshare` with only `test` selected.
fn in_own_namespace(test: &str, body: impl FnOnce()) {
    if std::env::var_os(INNER).is_some() {
        body();
        println!("{RAN} {test}");
        return;
    }
    let unshare = require_program("unshare");
    let exe = std::env::current_exe().expect("the test binary's path");
    // As root a network namespace alone will do; otherwise a user namespace maps us to root in it.
    let flags = if effective_uid_is_root() { "-n" } else { "-rn" };
    let out = Command::new(unshare)
        .args([flags, "--"])
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(INNER, "1")
        .stdin(Stdio::null())
        .output()
        .expect("running unshare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(
        out.status.success(),
        "`unshare {flags}` re-run of {test} failed ({}); this test needs network namespaces and \
         /dev/net/tun (as root, or with unprivileged user namespaces): see its output above",
        out.status
    );
    assert!(
        stdout.contains(&format!("{RAN} {test}")),
        "the re-run under unshare did not run {test}'s body"
    );
}

fn effective_uid_is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    // "Uid:\treal\teffective\tsaved\tfs"
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).expect("a Uid line");
    uid_line.split_whitespace().nth(2) == Some("0")
}

fn link(spec: &str) -> TunLink {
    let dir: DirectionConfig = spec.parse().unwrap();
    let config = TunConfig { up: dir.clone(), down: dir, seed: Some(0x7e57), ..Default::default() };
    TunLink::start(config).expect("starting the TUN link (is /dev/net/tun there?)")
}

fn far(link: &TunLink, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(link.reflection().far, port))
}

/// A TCP server on 0.0.0.0 that echoes each connection's bytes until the client's end, then
/// closes; serves `connections` connections one after another.
fn tcp_echo_server(connections: usize) -> (u16, JoinHandle<()>) {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        for _ in 0..connections {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_nodelay(true).unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = conn.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                conn.write_all(&buf[..n]).unwrap();
            }
            conn.shutdown(Shutdown::Write).unwrap();
        }
    });
    (port, thread)
}

/// Sends `data` through the echo server at `to` and returns what came back and how long it took.
fn echo_over_tcp(to: SocketAddr, data: &[u8]) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut conn = TcpStream::connect_timeout(&to, PATIENCE).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut writer = conn.try_clone().unwrap();
    let out = data.to_vec();
    let write = std::thread::spawn(move || {
        writer.write_all(&out).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::with_capacity(data.len());
    conn.read_to_end(&mut back).unwrap();
    write.join().unwrap();
    (back, started.elapsed())
}

fn pseudo_random(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn tcp_megabyte_arrives_intact_through_five_percent_loss() {
    in_own_namespace("tcp_megabyte_arrives_intact_through_five_percent_loss", || {
        let link = link("delay=5ms");
        let (port, server) = tcp_echo_server(2);
        let data = pseudo_random(1 << 20);

        let (back, clean) = echo_over_tcp(far(&link, port), &data);
        assert!(
            back == data,
            "the echo at 0% loss differs ({} of {} bytes)",
            back.len(),
            data.len()
        );
        let clean_stats = link.stats();
        assert_eq!(clean_stats.up.dropped_loss + clean_stats.down.dropped_loss, 0);

        for dir in [Dir::Up, Dir::Down] {
            link.set_config(dir, "delay=5ms,loss=5%".parse().unwrap()).unwrap();
        }
        let (back, lossy) = echo_over_tcp(far(&link, port), &data);
        assert!(
            back == data,
            "the echo at 5% loss differs ({} of {} bytes)",
            back.len(),
            data.len()
        );
        server.join().unwrap();

        let s = link.stats();
        let lost = s.up.dropped_loss + s.down.dropped_loss;
        let carried =
            s.up.received + s.down.received - clean_stats.up.received - clean_stats.down.received;
        println!(
            "1 MiB echoed over TCP, 5 ms each way: {clean:?} at 0% loss, {lossy:?} at 5% loss \
             ({lost} of {carried} packets dropped); unreflected {}",
            s.unreflected
        );
        // 5% of well over a thousand packets: the kernel must have retransmitted.
        assert!(lost > 20, "the link dropped only {lost} of {carried} packets");
        assert!(lossy > clean, "loss should cost time: {lossy:?} vs {clean:?}");
    });
}

#[test]
fn tcp_round_trip_is_twice_the_one_way_delay() {
    in_own_namespace("tcp_round_trip_is_twice_the_one_way_delay", || {
        let link = link("delay=25ms");
        let (port, server) = tcp_echo_server(1);
        let started = Instant::now();
        let mut conn = TcpStream::connect_timeout(&far(&link, port), PATIENCE).unwrap();
        let connect = started.elapsed();
        conn.set_nodelay(true).unwrap();
        conn.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut rtts = Vec::new();
        for i in 0..20u8 {
            let sent = Instant::now();
            conn.write_all(&[i]).unwrap();
            let mut b = [0u8; 1];
            conn.read_exact(&mut b).unwrap();
            rtts.push(sent.elapsed());
            assert_eq!(b[0], i);
        }
        drop(conn);
        server.join().unwrap();
        rtts.sort();
        let (min, median, max) = (rtts[0], rtts[rtts.len() / 2], rtts[rtts.len() - 1]);
        println!(
            "TCP over 25 ms each way: connect {connect:?}, RTT min {min:?} median {median:?} max {max:?}"
        );
        assert!(connect >= ms(50), "connect took {connect:?}, less than one emulated RTT");
        assert!(min >= ms(50), "an echo came back in {min:?}, less than 2 x 25 ms");
        assert!(median < ms(80), "median RTT {median:?} is far above 50 ms");
    });
}

#[test]
fn udp_datagrams_echo_through_the_link() {
    in_own_namespace("udp_datagrams_echo_through_the_link", || {
        let link = link("delay=25ms");
        let server = UdpSocket::bind("0.0.0.0:0").unwrap();
        let port = server.local_addr().unwrap().port();
        server.set_read_timeout(Some(PATIENCE)).unwrap();
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 65_535];
            let mut peers = Vec::new();
            for _ in 0..2 {
                let (n, from) = server.recv_from(&mut buf).unwrap();
                server.send_to(&buf[..n], from).unwrap();
                peers.push(from);
            }
            peers
        });
        let client = UdpSocket::bind("0.0.0.0:0").unwrap();
        client.set_read_timeout(Some(PATIENCE)).unwrap();
        let to = far(&link, port);
        // A small datagram, then one that the 1500-byte MTU splits into fragments.
        for data in [b"keystroke".to_vec(), pseudo_random(4000)] {
            let sent = Instant::now();
            client.send_to(&data, to).unwrap();
            let mut buf = [0u8; 65_535];
            let (n, from) = client.recv_from(&mut buf).unwrap();
            let rtt = sent.elapsed();
            println!("UDP echo of {} bytes over 25 ms each way: {rtt:?}", data.len());
            assert_eq!(from, to, "the echo must come from the far address");
            assert!(buf[..n] == data[..], "the echo of {} bytes differs", data.len());
            assert!(rtt >= ms(50), "echo in {rtt:?}, less than 2 x 25 ms");
        }
        let client_port = client.local_addr().unwrap().port();
        let mirror = SocketAddr::V4(SocketAddrV4::new(link.reflection().mirror, client_port));
        assert_eq!(echo.join().unwrap(), [mirror, mirror], "the server sees clients at the mirror");
    });
}

#[test]
fn icmp_echo_is_answered_through_the_link() {
    in_own_namespace("icmp_echo_is_answered_through_the_link", || {
        use socket2::{Domain, Protocol, Socket, Type};
        let link = link("delay=10ms");
        // A raw ICMP socket: root in the namespace (or its user namespace) may open one.
        let mut raw =
            Socket::new(Domain::IPV4, Type::from(libc::SOCK_RAW), Some(Protocol::ICMPV4)).unwrap();
        raw.set_read_timeout(Some(ms(500))).unwrap();
        let mut request = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
        request.extend_from_slice(b"tern ping");
        let sum = internet_checksum(&request);
        request[2..4].copy_from_slice(&sum.to_be_bytes());
        let sent = Instant::now();
        raw.send_to(&request, &far(&link, 0).into()).unwrap();
        // The socket also sees the reflected request arriving; wait for the reply from far.
        let far_ip = link.reflection().far;
        let deadline = Instant::now() + ms(5000);
        let rtt = loop {
            assert!(Instant::now() < deadline, "no echo reply from {far_ip}");
            let mut buf = [0u8; 1500];
            let Ok(n) = raw.read(&mut buf) else { continue };
            let header = usize::from(buf[0] & 0x0f) * 4;
            let from = Ipv4Addr::new(buf[12], buf[13], buf[14], buf[15]);
            if from == far_ip && n > header && buf[header] == 0 {
                assert_eq!(&buf[header + 4..n], &request[4..], "the reply echoes id, seq, data");
                break sent.elapsed();
            }
        };
        println!("ICMP echo over 10 ms each way: {rtt:?}");
        assert!(rtt >= ms(20), "reply in {rtt:?}, less than 2 x 10 ms");
    });
}

#[test]
fn refuses_a_namespace_with_a_network() {
    in_own_namespace("refuses_a_namespace_with_a_network", || {
        // A TAP device that is up stands for an Ethernet card: its namespace reaches a network.
        let ip = |args: &[&str]| {
            let status = Command::new("ip").args(args).status().expect("running ip");
            assert!(status.success(), "ip {args:?} failed");
        };
        ip(&["tuntap", "add", "dev", "eth9", "mode", "tap"]);
        ip(&["link", "set", "eth9", "up"]);
        let err = TunLink::start(TunConfig::default()).expect_err("must refuse with eth9 up");
        assert!(err.to_string().contains("eth9"), "{err}");
        ip(&["link", "del", "eth9"]);
        drop(link(""));
    });
}

#[test]
fn binary_reports_ready_and_exits_when_stdin_closes() {
    in_own_namespace("binary_reports_ready_and_exits_when_stdin_closes", || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_linkemu"))
            .args(["tun", "--dev", "tern7", "--net", "10.78.0.0/24", "--link", "delay=5ms"])
            .arg("--exit-on-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let far_ip = loop {
            line.clear();
            let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
            assert!(n > 0, "linkemu tun ended before it was ready");
            if let Some(rest) = line.strip_prefix("linkemu tun ready far ") {
                break rest.split_whitespace().next().unwrap().parse::<Ipv4Addr>().unwrap();
            }
        };
        assert_eq!(far_ip, Ipv4Addr::new(10, 78, 0, 2));
        let server = UdpSocket::bind("0.0.0.0:0").unwrap();
        let to = SocketAddr::V4(SocketAddrV4::new(far_ip, server.local_addr().unwrap().port()));
        let client = UdpSocket::bind("0.0.0.0:0").unwrap();
        client.send_to(b"through the binary", to).unwrap();
        server.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut buf = [0u8; 64];
        let (n, _) = server.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"through the binary");

        drop(child.stdin.take());
        let deadline = Instant::now() + ms(5000);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "linkemu tun did not exit when its stdin closed");
            std::thread::sleep(ms(20));
        };
        assert!(status.success(), "linkemu tun exited with {status}");
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        assert!(rest.contains("final up: received=1"), "{rest}");
    });
}
