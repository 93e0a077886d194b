//! The page client's ordering rules, each a scenario: the client against a simulated relay and
//! a Rust SSP server on a simulated clock. Each test names the rule it keeps; the closing
//! comment of each says how it was broken on purpose to see it fail.

use std::collections::HashMap;
use std::time::Duration;

use tern::page::{Effect, LinkId, LinkUp, NonceBounds, PageClient, Timer};
use tern::relay_client::{SavedSession, Status, Target};
use tern::relay_proto::ClientMessage;
use tern::relay_proto::Mode;
use tern::relay_proto::control::Ready;
use tern::relay_proto::framing::{FRAMING_VERSION, Splitter};
use tern::session::ServerState;
use tern::terminal::{Complete, Size};
use tern::time::Instant;
use tern::transport::{Transport, TransportConfig, UserStream};
use tern::wire::Key;

const KEY: &str = "WLThFE98+opDlEMyexqWsA";
const MTU: usize = 1200;
/// One way through the simulated link (page ↔ relay ↔ server).
const DELAY: Duration = Duration::from_millis(15);
/// An animation frame comes this long after it is asked for.
const FRAME: Duration = Duration::from_millis(16);

/// The page client, a relay that forwards as asked, and mosh's server side.
struct World {
    now: Instant,
    client: PageClient,
    server: Transport<Complete, UserStream>,
    splitter: Splitter,
    /// Datagrams on their way: when, towards the server or not, the bytes.
    in_flight: Vec<(Instant, bool, Vec<u8>)>,
    frame_at: Option<Instant>,
    /// Every effect the client asked for, in order, with when.
    log: Vec<(Instant, Effect)>,
    /// The tab's storage: nonce bounds per key, the saved session.
    kept: HashMap<String, NonceBounds>,
    saved: Option<SavedSession>,
    /// Connect effects waiting for the test to bring a link up.
    connects: u32,
    link: Option<LinkId>,
    /// Wakes of the page's one timer, with the timers that had run out.
    wakes: Vec<(Instant, Vec<Timer>)>,
    /// The path went dead: nothing reaches the page any more.
    dead_path: bool,
    /// Links closed at the client's word, whose end the driver reports next.
    closed: Vec<LinkId>,
}

fn key() -> Key {
    KEY.parse().expect("valid key")
}

fn ready(resumed: bool, seq_floor: u64) -> Ready {
    Ready {
        session: "s1".into(),
        mode: Mode::Spawn,
        port: 4433,
        key: Some(KEY.into()),
        max_datagram_size: MTU,
        framing: FRAMING_VERSION,
        resumed,
        seq_floor,
        point: None,
        view: false,
        owner: None,
        off: None,
        info: None,
    }
}

impl World {
    fn new() -> World {
        let now = Instant::from_millis(5_000_000);
        let target = Target { token: "token".into(), bridge: None };
        let server = Transport::new(
            &TransportConfig::server(MTU, 7),
            &key(),
            Complete::blank(80, 24),
            UserStream::default(),
            now,
        );
        World {
            now,
            client: PageClient::new(target, Size { cols: 80, rows: 24 }, 42),
            server,
            splitter: Splitter::new(),
            in_flight: Vec::new(),
            frame_at: None,
            log: Vec::new(),
            kept: HashMap::new(),
            saved: None,
            connects: 0,
            link: None,
            wakes: Vec::new(),
            dead_path: false,
            closed: Vec::new(),
        }
    }

    /// Does what the client asked, in order, as the browser driver does.
    fn drain(&mut self) {
        while let Some(effect) = self.client.poll_effect() {
            match &effect {
                Effect::Connect => self.connects += 1,
                Effect::Datagram(d) => self.in_flight.push((self.now + DELAY, true, d.clone())),
                Effect::CloseLink => {
                    // The driver closes the link; its datagrams end, and it says so.
                    if let Some(id) = self.link.take() {
                        self.closed.push(id);
                    }
                }
                Effect::ReserveNonces { key_text, seq, fragment_id } => {
                    let bounds = NonceBounds { seq: *seq, fragment_id: *fragment_id };
                    self.kept.insert(key_text.clone(), bounds);
                }
                Effect::SaveSession(saved) => self.saved = Some(saved.clone()),
                Effect::RequestFrame => {
                    self.frame_at.get_or_insert(self.now + FRAME);
                }
                _ => {}
            }
            self.log.push((self.now, effect));
        }
        for id in std::mem::take(&mut self.closed) {
            self.client.link_lost(self.now, id);
            self.drain();
        }
        while let Some(d) = self.server.poll_transmit() {
            let mut framed = Vec::new();
            self.splitter.split(&d, MTU, &mut framed).expect("fits");
            for f in framed {
                self.in_flight.push((self.now + DELAY, false, f));
            }
        }
    }

    fn start(&mut self) {
        self.client.start(self.now);
        self.drain();
    }

    /// The relay answers `ready` on a new link.
    fn link_up(&mut self, ready: &Ready) -> LinkId {
        assert!(self.connects > 0, "the client did not ask to connect");
        self.connects -= 1;
        let kept = self.kept.clone();
        let up = LinkUp { kind: "webtransport", max_datagram_size: MTU, ready };
        let id = self.client.link_up(self.now, up, &|k| kept.get(k).copied()).expect("link used");
        self.link = Some(id);
        self.drain();
        id
    }

    fn link_lost(&mut self) {
        let id = self.link.take().expect("a link");
        self.in_flight.clear();
        self.client.link_lost(self.now, id);
        self.drain();
    }

    fn key(&mut self, bytes: &[u8]) {
        self.client.key(self.now, bytes);
        self.drain();
    }

    /// The shell prints `bytes`.
    fn shell_prints(&mut self, bytes: &[u8]) {
        self.server.update_local(self.now, |c| c.feed_host_bytes(bytes));
        self.drain();
    }

    /// Runs the world until `until`: datagrams arrive, timers and frames run out.
    fn run_until(&mut self, until: Instant) {
        loop {
            let next = [
                self.client.poll_timeout(),
                Some(self.server.poll_timeout(self.now)),
                self.frame_at,
                self.in_flight.iter().map(|(at, ..)| *at).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|at| *at <= until) else {
                self.now = until;
                return;
            };
            self.now = self.now.max(next);
            let now = self.now;
            let (due, later): (Vec<_>, Vec<_>) =
                std::mem::take(&mut self.in_flight).into_iter().partition(|(at, ..)| *at <= now);
            self.in_flight = later;
            for (_, to_server, bytes) in due {
                if to_server {
                    self.server.handle_datagram(now, &bytes);
                } else if self.link.is_some() && !self.dead_path {
                    self.client.datagram(now, &bytes);
                }
                self.drain();
            }
            if self.frame_at.is_some_and(|at| at <= now) {
                self.frame_at = None;
                self.client.animation_frame(now);
                self.drain();
            }
            if self.client.poll_timeout().is_some_and(|at| at <= now) {
                let expired: Vec<Timer> = Timer::ALL
                    .into_iter()
                    .filter(|t| self.client.timers().get(*t).is_some_and(|at| at <= now))
                    .collect();
                self.wakes.push((now, expired));
                self.client.handle_timeout(now);
                self.drain();
            }
            if self.server.poll_timeout(now) <= now {
                self.server.handle_timeout(now);
                self.drain();
            }
        }
    }

    fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// The effects logged since index `from`.
    fn since(&self, from: usize) -> Vec<&Effect> {
        self.log[from..].iter().map(|(_, e)| e).collect()
    }

    /// A page with a live session: started, linked, the server's first screen drawn.
    fn live() -> World {
        let mut w = World::new();
        w.start();
        w.link_up(&ready(false, 0));
        w.run_for(Duration::from_millis(300));
        w.shell_prints(b"$ ");
        w.run_for(Duration::from_millis(300));
        assert_eq!(w.client.status(), Status::Connected);
        assert!(w.client.session().is_some_and(|s| s.has_heard_server()), "the server answered");
        w
    }
}

/// The sequence number a client datagram carries (the nonce's low 63 bits).
fn seq_of(datagram: &[u8]) -> u64 {
    let nonce: [u8; 8] = datagram[..8].try_into().expect("a datagram has a nonce");
    u64::from_be_bytes(nonce) & !(1 << 63)
}

fn position(effects: &[&Effect], what: impl Fn(&Effect) -> bool) -> Option<usize> {
    effects.iter().position(|e| what(e))
}

fn is_hold(ms: u32) -> impl Fn(&Effect) -> bool {
    move |e| matches!(e, Effect::Control(ClientMessage::Hold { ms: m }) if *m == ms)
}

fn is_datagram(e: &Effect) -> bool {
    matches!(e, Effect::Datagram(_))
}

/// A flood makes the page ask the relay to hold the server's datagrams; the key typed into it
/// ends the hold, and the hold's end is sent before the key's datagram, so the relay forwards
/// the key's echo at once instead of holding it. (Broken on purpose: `PageClient::key` asking
/// the hold after `send_input` puts the datagram first, and this fails.)
#[test]
fn a_typed_key_ends_the_relays_hold_before_the_key_leaves() {
    let mut w = World::live();
    let flood_start = w.log.len();
    for i in 0..60 {
        w.shell_prints(format!("line {i} of a long flood of output, scrolling on\r\n").as_bytes());
        w.run_for(Duration::from_millis(20));
    }
    let flood = w.since(flood_start);
    let held = u32::try_from(tern::session::FLOOD_RELAY_HOLD.as_millis()).unwrap();
    assert!(position(&flood, is_hold(held)).is_some(), "the flood asked for a hold: {flood:?}");

    let typed = w.log.len();
    w.key(b"q");
    let after = w.since(typed);
    let release = position(&after, is_hold(0)).expect("typing ends the hold");
    let datagram = position(&after, is_datagram).expect("the key left");
    assert!(release < datagram, "the hold's end goes first: {after:?}");
}

/// Every datagram leaves after a nonce bound above its sequence number was kept: a reload
/// under the same key starts above every number used. Typed keys beyond one reservation make
/// a second one, also before the datagram that needs it. (Broken on purpose: reserving after
/// the datagrams are pushed in `flush` fails the first datagram.)
#[test]
fn the_nonce_bound_is_kept_before_the_datagrams_it_covers() {
    let mut w = World::new();
    w.start();
    w.link_up(&ready(false, 0));
    for _ in 0..1100 {
        w.key(b"x");
        w.run_for(Duration::from_millis(5));
    }
    let mut bound = None;
    let mut reservations = 0;
    let mut datagrams = 0;
    for (_, e) in &w.log {
        match e {
            Effect::ReserveNonces { seq, .. } => {
                bound = Some(*seq);
                reservations += 1;
            }
            Effect::Datagram(d) => {
                datagrams += 1;
                let seq = seq_of(d);
                assert!(
                    bound.is_some_and(|b| seq < b),
                    "datagram {seq} left above bound {bound:?}"
                );
            }
            _ => {}
        }
    }
    assert!(datagrams > 1024, "enough datagrams to pass one reservation ({datagrams})");
    assert!(reservations >= 2, "a second reservation ({reservations})");
}

/// A saved session (what a tab, or a browser's `tern.last`, continues from) records the nonce
/// reservation, not the numbers in use: datagrams up to the reservation may leave after the save,
/// and a page restored from it must start above every one of them, or a nonce repeats under the
/// key (finding 3 of issue 32). (Broken on purpose: saving `session.resume_point()` as it is,
/// the old code, fails the first assertion.)
#[test]
fn a_saved_session_starts_above_every_number_that_may_leave_after_the_save() {
    let mut w = World::live();
    for _ in 0..20 {
        w.key(b"x");
        w.run_for(Duration::from_millis(5));
    }
    w.client.save();
    w.drain();
    let saved = w.saved.clone().expect("saved");
    let kept = w.kept[KEY];
    assert!(
        saved.point.next_seq >= kept.seq && saved.point.next_fragment_id >= kept.fragment_id,
        "saved {} / {}, reserved {kept:?}",
        saved.point.next_seq,
        saved.point.next_fragment_id
    );
    // Every datagram that leaves after the save, until the next reservation, is below it.
    let from = w.log.len();
    for _ in 0..200 {
        w.key(b"y");
        w.run_for(Duration::from_millis(5));
    }
    let mut sent_after = 0;
    for e in w.since(from) {
        match e {
            Effect::ReserveNonces { .. } => break,
            Effect::Datagram(d) => {
                sent_after += 1;
                assert!(seq_of(d) < saved.point.next_seq, "{} left after the save", seq_of(d));
            }
            _ => {}
        }
    }
    assert!(sent_after > 0, "datagrams left after the save");
}

/// A link that comes back goes up in one order: the seed (the relay's copy may be older than
/// the page's), the hold the page wants (it is hidden), the session, the status, the link's
/// kind, then the session's datagrams (the keys typed while offline among them). (Broken on
/// purpose: sending the seed after the status fails the first assertion; sending early input
/// before `link_up` of the session drops it offline and fails the last.)
#[test]
fn a_new_link_goes_up_in_order() {
    let mut w = World::live();
    w.client.set_visible(w.now, false);
    w.drain();
    w.link_lost();
    assert_eq!(w.client.status(), Status::Reconnecting);
    w.key(b"typed while offline");
    w.run_for(Duration::from_secs(6));
    assert!(w.connects > 0, "the reconnect timer asked for a new link");
    let from = w.log.len();
    w.link_up(&ready(true, 0));
    let up = w.since(from);
    let seed = position(&up, |e| matches!(e, Effect::Control(ClientMessage::Seed { .. })));
    let hold = position(&up, is_hold(1000));
    let session = position(&up, |e| matches!(e, Effect::SessionId(_)));
    let status = position(&up, |e| matches!(e, Effect::Status { status: Status::Resumed, .. }));
    let kind =
        position(&up, |e| matches!(e, Effect::LinkKind { kind: "webtransport", fallback: false }));
    let datagram = position(&up, is_datagram);
    let order = [seed, hold, session, status, kind, datagram];
    assert!(order.iter().all(Option::is_some), "all of them: {up:?}");
    assert!(order.windows(2).all(|w| w[0] < w[1]), "in order: {order:?} in {up:?}");

    w.run_for(Duration::from_millis(500));
    let typed = w.client.session().map(|s| s.resume_point().input_next);
    assert!(typed.is_some());
    let offline_keys_sent = w.since(from).iter().any(|e| matches!(e, Effect::Datagram(_)));
    assert!(offline_keys_sent);
}

/// A session on an ssh host without the recorder: the `ready` says which features are off and
/// why, and the page has the sentence to show; a later `ready` without it clears it.
#[test]
fn features_off_on_ready_become_the_pages_sentence() {
    let mut w = World::new();
    w.start();
    assert_eq!(w.client.features_off(), None);
    let off = tern::relay_proto::FeaturesOff {
        host: "devbox".into(),
        features: vec!["history".into(), "pictures".into()],
        why: "its machine is linux aarch64, this relay is linux x86_64".into(),
    };
    w.link_up(&Ready { off: Some(off), ..ready(false, 0) });
    assert_eq!(
        w.client.features_off(),
        Some(
            "History and pictures are off on devbox: its machine is linux aarch64, this relay is \
             linux x86_64."
        )
    );
    w.link_lost();
    w.run_for(Duration::from_secs(6));
    w.link_up(&ready(true, 0));
    assert_eq!(w.client.features_off(), None);
}

/// An idle page (the shell prints nothing, mosh's heartbeats come every 3 s) wakes only for
/// what is due: the session's heartbeat, the link's liveness check, one save left waiting after
/// the heartbeat's ack, and the overlay clock only when the notification bar would change. It
/// saves the tab's session at most every two seconds and draws nothing. (Broken on purpose: an
/// overlay clock that always ticks each second fails the overlay count; a save on every flush
/// fails the save count.)
#[test]
fn an_idle_page_wakes_rarely_and_saves_at_most_every_two_seconds() {
    let mut w = World::live();
    w.run_for(Duration::from_secs(5));
    let (from, wakes_from, start) = (w.log.len(), w.wakes.len(), w.now);
    w.run_for(Duration::from_secs(60));
    let minute = w.now.saturating_duration_since(start).as_secs_f64();
    let saves = w.since(from).iter().filter(|e| matches!(e, Effect::SaveSession(_))).count();
    let overlay_wakes =
        w.wakes[wakes_from..].iter().filter(|(_, t)| t.contains(&Timer::Overlay)).count();
    let wakes = w.wakes.len() - wakes_from;
    let draws = w.since(from).iter().filter(|e| matches!(e, Effect::Write(_))).count();
    assert!(saves >= 10, "an idle session is still saved ({saves} in {minute} s)");
    assert!(saves as f64 <= minute / 2.0 + 1.0, "{saves} saves in {minute} s");
    assert!(overlay_wakes as f64 <= minute / 5.0, "{overlay_wakes} overlay wakes in {minute} s");
    // Per heartbeat (3 s): the session's own, the liveness check, the save left waiting.
    assert!(wakes as f64 <= minute / 3.0 * 3.0 + overlay_wakes as f64, "{wakes} wakes");
    assert_eq!(draws, 0, "an idle page draws nothing");
}

/// A tab restored from storage is weighed as it was saved: when the relay's copy saw more
/// input (the closing tab's save was stale), the page continues from the relay's copy and
/// types the keys typed since the load again, so none is dropped.
#[test]
fn a_restored_tab_continues_from_the_relays_newer_copy_with_the_keys_typed_since() {
    let mut w = World::live();
    w.key(b"echo one\r");
    w.run_for(Duration::from_secs(3));
    w.client.save();
    w.drain();
    let stale = w.saved.clone().expect("saved");
    w.key(b"echo two\r");
    w.run_for(Duration::from_secs(1));
    let newer = w.client.session().expect("session").resume_point();
    assert!(newer.input_next > stale.point.input_next);

    // A new tab loads the stale save, and the person types before the relay answers.
    let mut tab = World::new();
    tab.kept = w.kept.clone();
    tab.client.restore(tab.now, Some(stale), &|_| None);
    tab.drain();
    tab.start();
    tab.key(b"ls\r");
    let mut ready = ready(true, 0);
    ready.point = Some(tern::relay_client::encode_point(&newer));
    let from = tab.log.len();
    tab.link_up(&ready);
    let log = tab.since(from);
    assert!(
        log.iter().any(|e| matches!(e, Effect::Log(l) if l.contains("the relay's point"))),
        "{log:?}"
    );
    let point = tab.client.session().expect("session").resume_point();
    assert!(point.input_next > newer.input_next, "the key typed since the load went again");
}

/// A path that goes dead (a relay killed without a goodbye) shows long before QUIC's idle
/// timeout: the silent link is pinged after `PING_AFTER`, closed after `LINK_DEADLINE`, and the
/// page says it reconnects and asks for a new link.
#[test]
fn a_silent_link_is_pinged_then_dropped_and_the_page_reconnects() {
    let mut w = World::live();
    w.dead_path = true;
    let from = w.log.len();
    w.run_for(Duration::from_secs(9));
    let log = w.since(from);
    let ping = position(&log, |e| matches!(e, Effect::Control(ClientMessage::Ping)));
    let close = position(&log, |e| matches!(e, Effect::CloseLink));
    let reconnecting =
        position(&log, |e| matches!(e, Effect::Status { status: Status::Reconnecting, .. }));
    assert!(ping.is_some() && close.is_some() && reconnecting.is_some(), "{log:?}");
    assert!(ping < close && close < reconnecting, "{log:?}");
    assert!(w.connects > 0, "a new attempt was asked for");
}

/// A relay that cannot be verified (something else on its port) stops the page, but the shell
/// runs on: the keys typed while the relay was away are saved at once, and a page that leaves
/// (the person's "Try again" reloads it) saves them too, so the reload types them. (Broken on
/// purpose: `save` skipping every final status, as it did, leaves the save from before the keys,
/// and this fails.)
#[test]
fn a_page_that_could_not_verify_the_relay_keeps_the_keys_typed_for_the_reload() {
    let mut w = World::live();
    w.client.save();
    w.drain();
    let before = w.saved.clone().expect("saved").point.input_next;
    w.link_lost();
    w.key(b"echo typed-while-down");
    w.client.fail(tern::relay_client::FailCode::RelayNotVerified, "not verified");
    w.drain();
    let saved = w.saved.clone().expect("saved");
    assert!(saved.point.input_next > before, "the keys typed are in the save");
    w.key(b" and after");
    w.client.leave();
    w.drain();
    let left = w.saved.clone().expect("saved");
    assert!(left.point.input_next > saved.point.input_next, "and the ones after the failure");
    assert_eq!(w.client.status(), Status::Failed(tern::relay_client::FailCode::RelayNotVerified));
}

/// A viewer's page (a share link): its hello asks to watch, its `ready` holds no key, the
/// relay's screen updates become writes for the terminal, its keys and pastes never leave (it
/// says so once), and a share that ended stops it with the relay's words. Broken on purpose
/// (`key` sending while viewing): the test saw a datagram leave.
#[test]
fn a_viewer_page_watches_and_never_sends_input() {
    let mut w = World::new();
    w.client.watch_session("s1");
    assert!(w.client.viewing());
    let hello = w.client.hello(Mode::Spawn, MTU);
    assert!(hello.view && hello.resume.as_deref() == Some("s1"), "{hello:?}");
    w.start();
    let ready =
        Ready { key: None, port: 0, view: true, owner: Some("alice".into()), ..ready(true, 0) };
    w.link_up(&ready);
    assert_eq!(w.client.status(), Status::Resumed);
    assert!(w.log.iter().any(|(_, e)| matches!(e, Effect::ViewerOf(o) if o == "alice")));
    let screen = tern::relay_proto::ServerMessage::Screen {
        cols: 100,
        rows: 30,
        full: true,
        data: b"\x1b[Hhello".to_vec(),
    };
    let mut line = screen.to_line();
    line.pop();
    let link = w.link.unwrap();
    assert!(w.client.control_line(w.now, link, Some(&line)));
    w.drain();
    assert!(w.log.iter().any(|(_, e)| matches!(e, Effect::ViewerScreen(u)
        if u.cols == 100 && u.rows == 30 && u.full && u.data == b"\x1b[Hhello")));

    let before = w.log.len();
    w.key(b"rm -rf /\r");
    w.key(b"x");
    w.client.resized(w.now, Size { cols: 50, rows: 10 });
    w.drain();
    let id = w.client.paste(w.now);
    let _ = id;
    w.drain();
    let after = &w.log[before..];
    assert!(!after.iter().any(|(_, e)| matches!(e, Effect::Datagram(_))), "input left: {after:?}");
    let told = after
        .iter()
        .filter(|(_, e)| matches!(e, Effect::Refused(m) if m.contains("read-only")))
        .count();
    assert_eq!(told, 1, "told once: {after:?}");
    assert!(
        !after.iter().any(|(_, e)| matches!(e, Effect::OpenUpload { .. })),
        "a paste upload began"
    );

    let ended = tern::relay_proto::ServerMessage::Ended {
        code: tern::relay_proto::ErrorCode::BadToken,
        message: "The session's owner ended sharing: this link no longer shows it.".into(),
    };
    let mut line = ended.to_line();
    line.pop();
    assert!(!w.client.control_line(w.now, link, Some(&line)), "the link is done");
    w.drain();
    assert!(matches!(w.client.status(), Status::Failed(_)), "{:?}", w.client.status());
    assert!(w.log.iter().any(
        |(_, e)| matches!(e, Effect::Status { message, .. } if message.contains("ended sharing"))
    ));
    assert!(
        !w.log.iter().any(|(_, e)| matches!(e, Effect::ForgetSession(_) | Effect::SaveSession(_))),
        "a viewer keeps nothing"
    );
}

/// A pasted file's upload through a relay at the far end of a 9 Mbit/s bottleneck, 40 ms each
/// way, that acks every chunk as it arrives: whether the pacer was cruising from its start (its
/// state right after the relay's `have`), and the median wait a keystroke sent right behind a
/// chunk would see in the bottleneck's queue.
fn paste_over_a_slow_link(w: &mut World, size: usize, tag: u8) -> (bool, Duration) {
    use std::collections::VecDeque;
    use tern::page::{PastedFile, StreamStep};
    use tern::relay_proto::UploadReply;
    const RATE: u64 = 9_000_000 / 8;
    const ONE_WAY: Duration = Duration::from_millis(40);
    let reply = |w: &mut World, serial: u32, r: UploadReply| {
        let mut line = r.to_line();
        line.pop();
        if !w.client.upload_line(w.now, serial, &line) {
            // The driver stops reading the stream and says so.
            w.client.upload_ended(w.now, serial);
        }
        w.drain();
    };
    let id = w.client.paste(w.now);
    w.drain();
    let file = PastedFile { hash: [tag; 32], bytes: vec![tag; size], mime: "image/png".into() };
    w.client.paste_read(w.now, id, Ok(file));
    w.drain();
    let serial = w
        .log
        .iter()
        .rev()
        .find_map(|(_, e)| match e {
            Effect::OpenUpload { serial } => Some(*serial),
            _ => None,
        })
        .expect("the paste opens an upload stream");
    let mut seen = w.log.len();
    assert!(w.client.upload_opened(w.now, serial, true));
    w.drain();
    reply(w, serial, UploadReply::Have { have: 0, path: None });
    let job = w.client.pastes().active_job().expect("uploading");
    let cruising = job.upload().expect("sending").state() == tern::transfer::UploadState::Sending;

    let (mut header, mut sent, mut link_free) = (true, 0u64, w.now);
    let mut acks: VecDeque<(Instant, u64, Instant)> = VecDeque::new();
    let mut waits = Vec::new();
    let deadline = w.now + Duration::from_secs(60);
    while w.client.pastes().active_job().is_some_and(|j| j.serial == serial) {
        for (at, e) in &w.log[seen..] {
            let Effect::Upload { serial: s, step: StreamStep::Write(bytes) } = e else { continue };
            if *s != serial || std::mem::take(&mut header) {
                continue;
            }
            let len = bytes.len() as u64;
            link_free = link_free.max(*at) + Duration::from_micros(len * 1_000_000 / RATE);
            waits.push(link_free - *at);
            sent += len;
            acks.push_back((link_free + 2 * ONE_WAY, sent, link_free + ONE_WAY));
        }
        seen = w.log.len();
        assert!(w.now < deadline, "the paste did not finish ({sent} bytes sent)");
        match acks.pop_front() {
            Some((at, acked, read_at)) => {
                w.run_until(at);
                let relay_time_us = read_at.as_micros();
                reply(w, serial, UploadReply::Ack { acked, relay_time_us });
                if acked == size as u64 {
                    reply(w, serial, UploadReply::Path { path: format!("/tmp/{tag}.png") });
                }
            }
            None => w.run_for(Duration::from_millis(5)),
        }
    }
    waits.sort();
    (cruising, waits[waits.len() / 2])
}

/// Pictures are pasted in series: the page keeps what its pastes learned of the link
/// (`transfer::LinkMemory`), and the next paste's pacer cruises from that rate at once instead of
/// probing from its small window, so keystrokes wait far less behind it. A new link forgets it.
/// Broken on purpose (no seed given to the job in `drive_pastes`; no forgetting on a new link):
/// the second paste probed; the third cruised at the old link's rate.
#[test]
fn a_second_paste_on_the_link_starts_from_what_the_first_learned() {
    let mut w = World::live();
    let (first_cruising, first) = paste_over_a_slow_link(&mut w, 1_000_000, 1);
    w.run_for(Duration::from_secs(1));
    let (second_cruising, second) = paste_over_a_slow_link(&mut w, 1_000_000, 2);
    println!("median keystroke wait: first paste {first:?}, second {second:?}");
    assert!(!first_cruising, "nothing was learned before the first paste");
    assert!(second_cruising, "the second paste probed from the start");
    assert!(second * 2 < first, "{second:?} vs {first:?}");

    w.link_lost();
    w.run_for(Duration::from_secs(2));
    w.link_up(&ready(true, 0));
    w.run_for(Duration::from_millis(300));
    let (third_cruising, _) = paste_over_a_slow_link(&mut w, 200_000, 3);
    assert!(!third_cruising, "a new link's first paste used the old link's rate");
}

#[test]
fn a_hello_before_the_info_asks_for_the_mode_the_pages_address_implies() {
    let size = Size { cols: 80, rows: 24 };
    let spawn = PageClient::new(Target { token: "token".into(), bridge: None }, size, 1);
    assert_eq!(spawn.mode_before_info(), Mode::Spawn);
    assert_eq!(spawn.hello(spawn.mode_before_info(), 1211).mode, Some(Mode::Spawn));
    let named = ("127.0.0.1".to_string(), 60001, "PWSoCIVurTVBGXAj873xNg".to_string());
    let bridge = PageClient::new(Target { token: "token".into(), bridge: Some(named) }, size, 1);
    assert_eq!(bridge.mode_before_info(), Mode::Bridge);
    let hello = bridge.hello(bridge.mode_before_info(), 1211);
    assert_eq!((hello.mode, hello.port), (Some(Mode::Bridge), Some(60001)));
}
