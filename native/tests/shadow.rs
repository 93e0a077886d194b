//! A relay's shadow of a real mosh-server 1.4 session (`tern::session::Shadow`): fed every
//! datagram a forwarder passes, both ways, it lets a client with nothing saved take the session
//! over with its current screen, keys typed by the first client up to the switch arriving once.
//!
//! Fails, loudly, when mosh-server is not installed: `npm test` installs it.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tern::session::{ResumePoint, SessionConfig, Shadow};
use tern::terminal::Complete;
use tern::time::Instant;
use tern_native::{MoshServer, NativeClient};

mod support;
use support::{start_sh_server, text, wait_for};

/// A UDP forwarder between one client and the server that shows every datagram to a shadow, as
/// tern-relay does.
struct Forwarder {
    addr: SocketAddr,
    shadow: Arc<Mutex<Shadow>>,
    stop: Arc<AtomicBool>,
}

impl Forwarder {
    fn start(server: &MoshServer) -> Forwarder {
        let started = std::time::Instant::now();
        let now = move || Instant::from_micros(started.elapsed().as_micros() as u64);
        let shadow = Arc::new(Mutex::new(Shadow::new(&server.key, now())));
        let front = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let back = UdpSocket::bind("127.0.0.1:0").expect("bind");
        back.connect(("127.0.0.1", server.port)).expect("connect");
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
        }
        let addr = front.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let (front2, back2) = (front.try_clone().expect("clone"), back.try_clone().expect("clone"));
        let (shadow1, shadow2, stop1, stop2, client2) =
            (shadow.clone(), shadow.clone(), stop.clone(), stop.clone(), client.clone());
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !stop1.load(Ordering::Relaxed) {
                if let Ok((n, from)) = front.recv_from(&mut buf) {
                    *client.lock().unwrap() = Some(from);
                    shadow1.lock().unwrap().client_datagram(now(), &buf[..n]);
                    let _ = back.send(&buf[..n]);
                }
            }
        });
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !stop2.load(Ordering::Relaxed) {
                if let Ok(n) = back2.recv(&mut buf) {
                    shadow2.lock().unwrap().server_datagram(now(), &buf[..n]);
                    if let Some(to) = *client2.lock().unwrap() {
                        let _ = front2.send_to(&buf[..n], to);
                    }
                }
            }
        });
        Forwarder { addr, shadow, stop }
    }

    fn point(&self) -> ResumePoint {
        let point = self.shadow.lock().unwrap().resume_point().expect("a point");
        ResumePoint::decode(&point.encode()).expect("round trip")
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_client_with_nothing_saved_takes_over_from_the_shadow_with_the_screen_and_the_keys_in_flight() {
    let server = start_sh_server();
    let forwarder = Forwarder::start(&server);
    let config = |cols| SessionConfig::new(server.key.clone(), cols, 24);
    let mut first: NativeClient<Complete> =
        NativeClient::connect(forwarder.addr, config(80)).expect("udp");
    assert!(wait_for(&mut first, "$"), "no prompt");
    first.type_bytes(b"echo marker-$$\r").expect("udp");
    assert!(wait_for(&mut first, "marker-"), "{}", text(&first));
    first.run_for(Duration::from_millis(300)).expect("udp");
    let shown = text(&first);
    // Keys on their way at the moment of the switch: sent, maybe not acknowledged.
    first.type_bytes(b"echo one-").expect("udp");
    first.run_for(Duration::from_millis(30)).expect("udp");
    first.type_bytes(b"two-$$").expect("udp");
    first.run_for(Duration::from_millis(5)).expect("udp");
    let first_seq = first.session().resume_point().next_seq;
    drop(first);
    thread::sleep(Duration::from_millis(100));

    let point = forwarder.point();
    assert!(point.next_seq >= first_seq, "above every sequence number the first client used");
    let mut second = NativeClient::resume(forwarder.addr, config(80), &point).expect("resume");
    let restored = text(&second);
    assert!(
        restored.starts_with(shown.trim_end()) || restored.contains("marker-"),
        "the screen as the first client left it, before the server answered:\n{restored}"
    );
    second.type_bytes(b"\r").expect("udp");
    let pid: String = {
        let line = shown.lines().find(|l| l.starts_with("marker-")).expect("marker line");
        line["marker-".len()..].to_string()
    };
    assert!(
        wait_for(&mut second, &format!("one-two-{pid}")),
        "the keys in flight arrived once and in order, in the same shell: {}",
        text(&second)
    );
    let c = second.session().counters();
    assert_eq!(c.dropped_unknown_base + c.apply_failures + c.auth_failures, 0, "{c:?}");
    assert_eq!(forwarder.shadow.lock().unwrap().unreadable, 0);
    assert!(server.is_alive(), "mosh-server did not trip over the takeover");

    // And again, from the shadow that followed the second client.
    drop(second);
    thread::sleep(Duration::from_millis(100));
    let point = forwarder.point();
    let mut third = NativeClient::resume(forwarder.addr, config(70), &point).expect("resume");
    third.type_bytes(b"echo third-$$\r").expect("udp");
    assert!(wait_for(&mut third, &format!("third-{pid}")), "{}", text(&third));
    assert_eq!(third.session().server_state().framebuffer().size().cols, 70);
}

#[test]
fn a_shadow_restored_from_its_save_follows_on_and_a_page_seed_repairs_a_stale_one() {
    let server = start_sh_server();
    let forwarder = Forwarder::start(&server);
    let mut first: NativeClient<Complete> =
        NativeClient::connect(forwarder.addr, SessionConfig::new(server.key.clone(), 80, 24))
            .expect("udp");
    assert!(wait_for(&mut first, "$"), "no prompt");
    // A save, then more output the save does not have (a relay killed before its next save).
    let stale = forwarder.point();
    first.type_bytes(b"echo later\r").expect("udp");
    assert!(wait_for(&mut first, "later\n$"), "{}", text(&first));
    first.run_for(Duration::from_millis(200)).expect("udp");
    let mut restored = Shadow::from_point(&server.key, &stale, Instant::ZERO).expect("restore");
    // The page that reconnects seeds it with what it holds, which is newer: adopted.
    let page = first.session().resume_point();
    assert!(restored.seed(&server.key, &page, Instant::ZERO), "a newer point is adopted");
    assert!(!restored.seed(&server.key, &stale, Instant::ZERO), "an older one is not");
    let point = restored.resume_point().expect("point");
    assert_eq!(point.server_num, page.server_num);
    assert!(point.next_seq >= page.next_seq);
}
