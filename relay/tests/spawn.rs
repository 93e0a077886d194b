//! Spawn mode with the real mosh-server, driven end to end by tern's own mosh client session.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use support::*;

/// Mosh client datagrams must fit the browser's limit: the relay forwards them unframed.
const CLIENT_MTU: usize = 1200;

async fn spawned_session(relay: &TestRelay, token: &str) -> (MoshOverRelay, Ready) {
    let conn = connect(relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, spawn_hello(Some(token), None)).await;
    let ready = expect_ready(reply);
    let key = ready.key.clone().expect("spawn mode hands out the key");
    (MoshOverRelay::new(conn, control, &key, CLIENT_MTU), ready)
}

#[tokio::test]
async fn spawned_mosh_server_answers_typing_through_the_relay() {
    let token = test_token("spawn");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = spawned_session(&relay, &token).await;
    assert!((60001..=60999).contains(&ready.port));
    assert!(!ready.resumed);

    // The first server datagram arrives once the client's first packet went through.
    assert!(
        mosh.run_until(Duration::from_secs(10), |s| s.has_heard_server()).await,
        "no datagram from mosh-server through the relay"
    );
    // Garbage through the bridge: the relay knows the key and forwards only authentic datagrams.
    for n in 0..50usize {
        let junk: Vec<u8> = (0..(n * 37) % 1100 + 1).map(|i| (i ^ n) as u8).collect();
        let _ = mosh.conn.send_datagram(&junk);
    }
    mosh.type_bytes(b"echo tern-$((6*7))\n");
    assert!(
        mosh.run_until(Duration::from_secs(10), |s| s.server_state().contains(b"tern-42")).await,
        "typed command's output never came back; screen: {:?}",
        mosh.screen_text()
    );

    // The record is private and lists what a restarted relay needs.
    let dir = state.path().join("sessions");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(state.path()), 0o700);
    let file = dir.join(format!("{}.json", ready.session));
    assert_eq!(mode(&file), 0o600);
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(record["port"], ready.port);
    assert_eq!(record["key"], ready.key.clone().unwrap());
    assert!(record["pid"].as_u64().is_some());
    assert!(record["created"].as_u64().is_some());

    // The API lists the session without its key.
    let (status, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert_eq!(status, 200);
    assert!(body.contains(&ready.session));
    assert!(!body.contains(ready.key.as_deref().unwrap()));

    relay.stop().await;
    assert_not_logged(&token, "token");
    assert_not_logged(ready.key.as_deref().unwrap(), "mosh key");
    assert_not_logged("tern-42", "screen text");
}

#[tokio::test]
async fn a_full_repaint_larger_than_the_browser_limit_arrives_whole() {
    let token = test_token("repaint");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = spawned_session(&relay, &token).await;
    assert!(ready.max_datagram_size <= 1211);
    assert!(mosh.run_until(Duration::from_secs(10), |s| s.has_heard_server()).await);
    mosh.resize(200, 60);
    // Fill the big screen with text that compresses badly, so frames exceed one datagram.
    mosh.type_bytes(b"i=0; while [ $i -lt 700 ]; do printf '%x%o ' $((i*7919)) $((i*104729)); i=$((i+1)); done; echo; echo done-$((3*5))\n");
    assert!(
        mosh.run_until(Duration::from_secs(20), |s| s.server_state().contains(b"done-15")).await,
        "output never completed"
    );
    assert!(mosh.split_datagrams > 0, "no server datagram needed splitting");
    assert!(mosh.largest > 1211, "largest joined datagram was only {}", mosh.largest);
    relay.stop().await;
    assert_not_logged(&token, "token");
}

#[tokio::test]
async fn relay_restart_keeps_the_shell_and_keys_typed_meanwhile() {
    let token = test_token("restart");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = spawned_session(&relay, &token).await;
    mosh.type_bytes(b"echo pid-$$-x\n");
    assert!(
        mosh.run_until(Duration::from_secs(10), |s| s.server_state().contains(b"-x")
            && number_after(&String::from_utf8_lossy(s.server_state().bytes()), "pid-").is_some())
            .await,
        "no pid; screen: {:?}",
        mosh.screen_text()
    );
    let pid_before = number_after(&mosh.screen_text(), "pid-").unwrap();

    // The relay goes away mid-session.
    relay.stop().await;
    // Typed while it is down: the session keeps these until the server acknowledges them.
    mosh.type_bytes(b"echo again-$$-y\n");
    mosh.run_until(Duration::from_millis(500), |_| false).await;

    // A new relay on the same state dir; the client reconnects and resumes by session id.
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let conn = connect(&relay, None).await.expect("reconnects");
    let (control, reply) = hello(&conn, spawn_hello(Some(&token), Some(&ready.session))).await;
    let resumed = expect_ready(reply);
    assert!(resumed.resumed);
    assert_eq!(resumed.port, ready.port);
    assert_eq!(resumed.key, ready.key);
    assert!(resumed.seq_floor > 0, "above what the first relay forwarded");
    mosh.reattach(conn, control, resumed.seq_floor);
    assert!(
        mosh.run_until(Duration::from_secs(15), |s| {
            number_after(&String::from_utf8_lossy(s.server_state().bytes()), "again-").is_some()
        })
        .await,
        "keys typed while the relay was down never arrived; screen: {:?}",
        mosh.screen_text()
    );
    let pid_after = number_after(&mosh.screen_text(), "again-").unwrap();
    assert_eq!(pid_before, pid_after, "a different shell answered");
    relay.stop().await;
    assert_not_logged(&token, "token");
}

#[tokio::test]
async fn another_device_resumes_from_the_relays_copy_and_the_first_page_is_told() {
    let token = test_token("device");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut first, ready) = spawned_session(&relay, &token).await;
    first.type_bytes(b"echo marker-$$-m\n");
    assert!(
        first
            .run_until(Duration::from_secs(10), |s| {
                number_after(&String::from_utf8_lossy(s.server_state().bytes()), "marker-")
                    .is_some()
            })
            .await,
        "no marker: {:?}",
        first.screen_text()
    );
    let pid = number_after(&first.screen_text(), "marker-").unwrap();
    // Keys on their way when the other device takes over: they must arrive once.
    first.type_bytes(b"echo one-");
    first.run_until(Duration::from_millis(50), |_| false).await;

    // The list shows it, attached, with its size.
    let (status, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert_eq!(status, 200);
    let list: tern::relay_proto::SessionList = tern::relay_proto::decode(body.as_bytes()).unwrap();
    let listed = list.sessions.iter().find(|s| s.id == ready.session).expect("listed");
    assert!(listed.attached, "{listed:?}");
    assert_eq!((listed.cols, listed.rows), (80, 24));

    // Another device: nothing saved, the session id from the list.
    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, spawn_hello(Some(&token), Some(&ready.session))).await;
    let taken = expect_ready(reply);
    let point = taken.point.clone().expect("the relay's copy");
    let point = point.into_point().expect("a valid point");
    assert!(taken.seq_floor > 0 && point.next_seq == taken.seq_floor);
    let key = taken.key.clone().unwrap();
    let mut second = MoshOverRelay::resume(conn, control, &key, &point);
    assert!(
        second.screen_text().contains(&format!("marker-{pid}-m")),
        "the screen shows before the server answers: {}",
        second.screen_text()
    );
    // The first page is told, and what it sends now is not forwarded.
    let told = tokio::time::timeout(Duration::from_secs(5), first.control.next()).await;
    assert_eq!(told.expect("told in time"), tern_relay::control::ServerMessage::Moved);
    first.type_bytes(b"lost-");
    second.type_bytes(b"two-$$\n");
    assert!(
        second
            .run_until(Duration::from_secs(10), |s| {
                tern::terminal::screen_text(s.server_state().framebuffer())
                    .rows
                    .iter()
                    .any(|r| r == &format!("one-two-{pid}"))
            })
            .await,
        "keys in flight at the switch arrived once, in order, in the same shell: {}",
        second.screen_text()
    );
    relay.stop().await;
}

#[tokio::test]
async fn resuming_a_session_that_is_gone_says_so() {
    let token = test_token("gone");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = spawned_session(&relay, &token).await;
    assert!(mosh.run_until(Duration::from_secs(10), |s| s.has_heard_server()).await);
    // The shell exits: mosh-server shuts down and the relay tells the browser.
    mosh.type_bytes(b"exit\n");
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(m) = mosh.control.try_next(Duration::from_millis(10)).await {
                return m;
            }
            mosh.run_until(Duration::from_millis(200), |_| false).await;
        }
    })
    .await
    .expect("relay reports the end");
    match ended {
        tern_relay::control::ServerMessage::Ended { code, .. } => {
            assert_eq!(code.as_str(), "session_ended")
        }
        other => panic!("expected ended, got {other:?}"),
    }
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn, spawn_hello(Some(&token), Some(&ready.session))).await;
    assert_eq!(expect_error(reply), "session_ended");
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn, spawn_hello(Some(&token), Some("../../etc/passwd"))).await;
    assert_eq!(expect_error(reply), "unknown_session");
    relay.stop().await;
}

#[tokio::test]
async fn spawn_failures_are_reported_with_their_cause() {
    let token = test_token("fail");
    let state = tempfile::tempdir().unwrap();
    // A program that is missing altogether stops the relay at start (tests/first_run.rs); one
    // that runs and fails reaches the browser with its own words.
    let fake = state.path().join("failing-mosh-server");
    std::fs::write(&fake, "#!/bin/sh\necho 'mosh-server: cannot frobnicate' >&2\nexit 3\n")
        .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut config = spawn_config(state.path(), &token);
    config.mosh_server_command = fake;
    let relay = TestRelay::start(config).await;
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn, spawn_hello(Some(&token), None)).await;
    match reply {
        tern_relay::control::ServerMessage::Error { code, message } => {
            assert_eq!(code.as_str(), "spawn_failed");
            assert!(message.contains("cannot frobnicate"), "{message}");
        }
        other => panic!("expected error, got {other:?}"),
    }
    relay.stop().await;

    // A locale mosh-server cannot use: its own diagnostic reaches the browser.
    let mut config = spawn_config(state.path(), &token);
    config.mosh_locale = "LANG=xx_XX.NOPE".into();
    let relay = TestRelay::start(config).await;
    let conn = connect(&relay, None).await.unwrap();
    let (_c, reply) = hello(&conn, spawn_hello(Some(&token), None)).await;
    // With a UTF-8 locale already in the environment mosh-server may still start; both outcomes
    // must be clean: a ready with a key, or spawn_failed with mosh-server's stderr.
    match reply {
        tern_relay::control::ServerMessage::Error { code, message } => {
            assert_eq!(code.as_str(), "spawn_failed");
            assert!(message.contains("stderr"), "{message}");
        }
        tern_relay::control::ServerMessage::Ready(ready) => {
            assert!(ready.key.is_some());
            for pid in recorded_pids(state.path()) {
                kill_pid(pid);
            }
        }
        other => panic!("unexpected {other:?}"),
    }
    relay.stop().await;
}

#[tokio::test]
async fn a_session_no_page_attaches_ends_after_the_idle_timeout_and_its_record_goes() {
    let token = test_token("idle");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let mut config = spawn_config(state.path(), &token);
    // Above the 3 s between an idle client's empty acks, which count as new client states.
    config.session_idle_timeout_secs = 5;
    let relay = TestRelay::start(config).await;
    let (mut mosh, ready) = spawned_session(&relay, &token).await;
    assert!(mosh.run_until(Duration::from_secs(10), |s| s.has_heard_server()).await);
    let pids = recorded_pids(state.path());
    assert_eq!(pids.len(), 1);
    // Attached and typing: longer than the timeout, the session stays (the page's states and
    // empty acks are new client states).
    mosh.run_until(Duration::from_secs(8), |_| false).await;
    mosh.type_bytes(b"echo still-$((40+2))\n");
    assert!(
        mosh.run_until(Duration::from_secs(10), |s| s.server_state().contains(b"still-42")).await,
        "the attached session ended: {:?}",
        mosh.screen_text()
    );
    // The page goes away without quitting (a closed tab): the shell waits for the timeout,
    // then mosh-server ends itself and the relay forgets it.
    drop(mosh);
    // The relay's copy of the session is saved when the page goes (private: it is the session's
    // plaintext).
    let copy = state.path().join("sessions").join(format!("{}.shadow", ready.session));
    let saved = async {
        while !copy.exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), saved).await.expect("the copy is saved");
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let gone = async {
        while pids.iter().any(|&p| std::path::Path::new(&format!("/proc/{p}")).exists()) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), gone)
        .await
        .expect("mosh-server still runs a minute after its idle timeout");
    let (status, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert_eq!(status, 200);
    assert!(!body.contains(&ready.session), "the ended session is still listed: {body}");
    assert!(recorded_pids(state.path()).is_empty(), "its record is still in the state dir");
    let left: Vec<String> = std::fs::read_dir(state.path().join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !left.iter().any(|f| f.starts_with(&ready.session)),
        "the record and the copy are removed: {left:?}"
    );
    // Besides: at most the history (and image store) of the warm spare kept now (its shell runs
    // and drew its prompt; the relay started it ahead), none of the spares replaced meanwhile
    // (every ~4 s here), and no record or copy.
    let spare_ids: std::collections::BTreeSet<&str> =
        left.iter().filter_map(|f| f.split('.').next()).collect();
    assert!(
        spare_ids.len() <= 1
            && left.iter().all(|f| f.ends_with(".history") || f.ends_with(".images")),
        "{left:?}"
    );
    relay.stop().await;
}

/// What a page that asked for datagrams held (as a hidden page does) received: datagrams (joined)
/// and `held` lines.
#[derive(Debug, Default)]
struct Received {
    datagrams: u64,
    batches: u64,
    held: u64,
}

/// Runs `mosh` like a page that reads its control stream too, until `done` holds (or 20 s).
async fn run_reading_held(
    mosh: &mut MoshOverRelay,
    got: &mut Received,
    mut done: impl FnMut(&MoshOverRelay) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done(mosh) {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        let now = mosh.now();
        let timer = mosh
            .session
            .poll_timeout()
            .map_or(Duration::from_millis(100), |at| at.saturating_duration_since(now))
            .max(Duration::from_micros(200));
        tokio::select! {
            d = mosh.conn.receive_datagram() => {
                let d = d.expect("the relay stays");
                if let Ok(Some(whole)) = mosh.joiner.push(&d) {
                    got.datagrams += 1;
                    let now = mosh.now();
                    mosh.session.handle_datagram(now, &whole);
                }
            }
            m = mosh.control.next() => match m {
                tern_relay::control::ServerMessage::Held { datagrams } => {
                    got.batches += 1;
                    got.held += datagrams.len() as u64;
                    for d in datagrams {
                        let now = mosh.now();
                        mosh.session.handle_datagram(now, &d);
                    }
                }
                tern_relay::control::ServerMessage::Pong => {}
                other => panic!("unexpected control message {other:?}"),
            },
            _ = tokio::time::sleep(timer) => {
                let now = mosh.now();
                mosh.session.handle_timeout(now);
            }
        }
        mosh.flush();
    }
    true
}

async fn ask_hold(mosh: &mut MoshOverRelay, ms: u32) {
    let line = tern_relay::control::ClientMessage::Hold { ms }.to_line();
    mosh.control.send.write_all(&line).await.expect("control stream open");
}

#[tokio::test]
async fn a_page_that_asks_gets_the_servers_datagrams_held_and_together_and_each_one_when_it_ends() {
    require_mosh_server();
    let token = test_token("hidden");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, _ready) = spawned_session(&relay, &token).await;
    mosh.control.reader.set_limit(tern_relay::control::MAX_SESSION_MESSAGE);
    assert!(mosh.run_until(Duration::from_secs(10), |s| s.has_heard_server()).await);
    mosh.type_bytes(b"echo ready-$((2*3))\n");
    assert!(
        mosh.run_until(Duration::from_secs(10), |s| s.server_state().contains(b"ready-6")).await
    );

    // Held, as for a hidden page: 3 s of output, 20 lines a second, each its own server state.
    ask_hold(&mut mosh, 1000).await;
    // What was on its way before the relay read the message may still come as datagrams.
    let mut before = Received::default();
    let settle = tokio::time::Instant::now() + Duration::from_millis(300);
    run_reading_held(&mut mosh, &mut before, |_| tokio::time::Instant::now() >= settle).await;
    mosh.type_bytes(
        b"for i in $(seq 1 60); do echo held-$i; sleep 0.05; done; echo held-over-$((6*7))\n",
    );
    let mut hidden = Received::default();
    let over =
        run_reading_held(&mut mosh, &mut hidden, |m| m.screen_contains("held-over-42")).await;
    assert!(over, "the output never arrived while hidden; screen: {:?}", mosh.screen_text());
    assert_eq!(hidden.datagrams, 0, "datagrams sent to a hidden page: {hidden:?}");
    // The relay holds a datagram up to a second: 3 s of output in a few batches, not one each.
    assert!(hidden.batches >= 2, "{hidden:?}");
    assert!(hidden.held >= 3 * hidden.batches, "the batches hold few datagrams: {hidden:?}");
    // No number in 1..=60 extends these (held-9 is not the start of held-90).
    for i in [9, 31, 60] {
        assert!(mosh.screen_contains(&format!("held-{i}")), "held-{i} missing");
    }

    // No hold (shown again): what is held comes at once, then every datagram as it comes.
    ask_hold(&mut mosh, 0).await;
    let mut shown = Received::default();
    mosh.type_bytes(b"echo shown-$((6*7))\n");
    let echoed = run_reading_held(&mut mosh, &mut shown, |m| m.screen_contains("shown-42")).await;
    assert!(echoed, "no echo once shown; screen: {:?}", mosh.screen_text());
    assert!(shown.datagrams > 0, "{shown:?}");
    assert!(shown.batches <= 1, "held after being shown: {shown:?}");
    eprintln!("held: {hidden:?}; then: {shown:?}");
    // The session's last log line counts what was held.
    mosh.conn.close(wtransport::VarInt::from_u32(0), b"done");
    let logged = tokio::time::timeout(Duration::from_secs(10), async {
        while !logs().contains("server datagrams held as the page asked") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    assert!(logged.await.is_ok(), "the session did not log what it held");
    relay.stop().await;
}

/// `tern send` offers a file under its name, which the browser saves and shows. A name with a
/// RIGHT-TO-LEFT OVERRIDE (`invoice\u{202E}fdp.exe` shows as `invoiceexe.pdf`) is offered with
/// the override replaced: checked on the control line as the relay sends it, before any decoding
/// on the page's side.
#[tokio::test]
async fn tern_send_offers_a_name_without_bidi_controls() {
    let token = test_token("send-name");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("invoice\u{202E}fdp.exe"), b"MZ, not a pdf").unwrap();
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, _ready) = spawned_session(&relay, &token).await;
    assert!(mosh.run_until(Duration::from_secs(10), |s| s.has_heard_server()).await);
    // A glob, so the shell (not this test's typing) spells the name.
    mosh.type_bytes(format!("tern send {}/invoice*\n", files.path().display()).as_bytes());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let line = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no offer within 30 s; screen: {:?}",
            mosh.screen_text()
        );
        mosh.run_until(Duration::from_millis(100), |_| false).await;
        let next =
            tokio::time::timeout(Duration::from_millis(50), mosh.control.reader.next_line()).await;
        if let Ok(Ok(line)) = next {
            let line = String::from_utf8(line).unwrap();
            if line.contains(r#""type":"offer""#) {
                break line;
            }
        }
    };
    assert!(line.contains(r#""name":"invoice_fdp.exe""#), "{line}");
    assert!(!line.contains('\u{202E}') && !line.to_lowercase().contains("\\u202e"), "{line}");
}
