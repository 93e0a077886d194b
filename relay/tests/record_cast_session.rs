//! `--record-sessions` end to end (issue 35 item 6): a real relay spawns a real mosh-server whose
//! shell runs under the recorder; the shell prints coloured text and runs `less`; `tern-relay
//! export SESSION` prints the recording, which, replayed through the core's emulator, shows the
//! screen the mosh client shows; the recording goes with the session. Without the flag there is
//! none, and export says so.

mod support;

use std::time::Duration;

use support::*;
use tern::terminal::{Complete, Emulator, Size};

async fn session(relay: &TestRelay, token: &str) -> (MoshOverRelay<Complete>, Ready) {
    let conn = connect(relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, spawn_hello(Some(token), None)).await;
    let ready = expect_ready(reply);
    let key = ready.key.clone().expect("spawn mode hands out the key");
    let mut mosh = MoshOverRelay::with_screen(conn, control, &key);
    let prompt = |s: &tern::session::ClientSession<Complete>| {
        screen_of(s).lines().any(|l| l.trim_end().ends_with(['#', '$']))
    };
    assert!(mosh.run_until(Duration::from_secs(10), prompt).await, "no prompt");
    (mosh, ready)
}

async fn run(mosh: &mut MoshOverRelay<Complete>, command: &str, marker: &str) {
    mosh.type_bytes(command.as_bytes());
    let found = mosh.run_until(Duration::from_secs(10), |s| screen_of(s).contains(marker)).await;
    assert!(found, "{marker:?} never appeared after {command:?}; screen:\n{}", mosh.screen_text());
}

fn screen_of(s: &tern::session::ClientSession<Complete>) -> String {
    tern::terminal::screen_text(s.server_state().framebuffer()).rows.join("\n")
}

fn export(state: &std::path::Path, session: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["export", "--state-dir"])
        .arg(state)
        .arg(session)
        .output()
        .unwrap()
}

/// The recording played through the core's emulator.
fn replay(cast: &str) -> Emulator {
    let mut lines = cast.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap());
    let header = lines.next().expect("a header");
    let size = |c: u64, r: u64| Size { cols: c as u16, rows: r as u16 };
    let mut e =
        Emulator::new(size(header["width"].as_u64().unwrap(), header["height"].as_u64().unwrap()));
    for ev in lines {
        let data = ev[2].as_str().unwrap();
        match ev[1].as_str().unwrap() {
            "o" => e.feed(data.as_bytes()),
            "r" => {
                let (c, r) = data.split_once('x').unwrap();
                e.resize(size(c.parse().unwrap(), r.parse().unwrap()));
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    e
}

#[tokio::test]
async fn an_exported_recording_plays_to_the_screen_the_client_shows() {
    let token = test_token("record-cast");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let mut config = spawn_config(state.path(), &token);
    config.record_sessions = true;
    let relay = TestRelay::start(config).await;
    let (mut mosh, ready) = session(&relay, &token).await;
    run(&mut mosh, "printf '\\033[1;32mgreen\\033[0m \\342\\202\\254 %s\\n' done-1\n", "done-1")
        .await;
    run(
        &mut mosh,
        "seq -f 'in-less-%g' 1 200 > /tmp/tern-cast-$$; less /tmp/tern-cast-$$\n",
        "in-less-1",
    )
    .await;
    run(&mut mosh, "G", "in-less-200").await;
    mosh.type_bytes(b"q");
    run(&mut mosh, "rm -f /tmp/tern-cast-$$; printf 'after-%s\\n' less\n", "after-less").await;

    // The screen settles (the shell's prompt is drawn): the recording shows it too.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        mosh.run_until(Duration::from_millis(300), |_| false).await;
        let out = export(state.path(), &ready.session);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let cast = String::from_utf8(out.stdout).unwrap();
        let replayed = replay(&cast);
        let shown = tern::terminal::screen_text(replayed.framebuffer()).rows;
        let live = tern::terminal::screen_text(mosh.session.server_state().framebuffer()).rows;
        if shown == live {
            assert!(cast.contains("green") && cast.contains('€'), "{cast}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the recording replays to\n{}\nbut the client shows\n{}",
            shown.join("\n"),
            live.join("\n")
        );
    }

    // The shell exits: the recording goes with the session.
    let cast = state.path().join(format!("sessions/{}.cast", ready.session));
    let mode = |p: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode(&cast), 0o600);
    assert_eq!(mode(&state.path().join("sessions")), 0o700);
    mosh.type_bytes(b"exit\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cast.exists() && std::time::Instant::now() < deadline {
        mosh.run_until(Duration::from_millis(200), |_| false).await;
        let _ = http_get(relay.addr(), tern::relay_proto::SESSIONS_PATH, Some(&token)).await;
    }
    assert!(!cast.exists(), "the recording is removed with the session");
}

#[tokio::test]
async fn without_the_flag_nothing_is_recorded() {
    let token = test_token("record-cast-off");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = session(&relay, &token).await;
    run(&mut mosh, "printf 'unrecorded-%s\\n' 1\n", "unrecorded-1").await;
    let cast = state.path().join(format!("sessions/{}.cast", ready.session));
    assert!(!cast.exists());
    let out = export(state.path(), &ready.session);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was not recorded"), "{err}");
}
