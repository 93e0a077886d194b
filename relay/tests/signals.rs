//! Issue 34 item 3: what the recorder hands the relay (clipboard writes, notifications and links
//! that mosh-server drops) reaches the session's page on its control stream; a read-only link
//! gets the links (text it shows) but never the clipboard or a notification. The requests are
//! written to the relay's socket as the recorder writes them (relay/tests/record_signals.rs
//! checks the recorder's side).

mod support;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use support::*;
use tern::relay_proto::{PageSignal, ServerMessage};

/// One request on the relay's socket, as `tern-relay record` sends it.
fn to_socket(state: &Path, request: serde_json::Value) {
    let mut s = std::os::unix::net::UnixStream::connect(state.join("tern.sock")).unwrap();
    s.write_all(format!("{request}\n").as_bytes()).unwrap();
}

/// The control messages up to (and with) the first link; panics when none comes.
async fn until_link(control: &mut Control) -> Vec<ServerMessage> {
    let mut seen = Vec::new();
    loop {
        let Some(m) = control.try_next(Duration::from_secs(10)).await else {
            panic!("no link came: {seen:?}");
        };
        let link = matches!(m, ServerMessage::Signal(PageSignal::Link { .. }));
        seen.push(m);
        if link {
            return seen;
        }
    }
}

fn signals(seen: &[ServerMessage]) -> Vec<&PageSignal> {
    seen.iter()
        .filter_map(|m| if let ServerMessage::Signal(s) = m { Some(s) } else { None })
        .collect()
}

#[tokio::test]
async fn the_owner_gets_clipboard_notifications_and_links_and_a_read_only_link_only_links() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let owner = test_token("owner");
    let relay = TestRelay::start(spawn_config(state.path(), &owner)).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["token", "add", "viewer", "--read-only", "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let viewer = out.lines().find_map(|l| l.split("shown this once: ").nth(1)).unwrap().trim();

    let send_all = |session: &str| {
        to_socket(
            state.path(),
            serde_json::json!({"clipboard": {"session": session, "text": "copied"}}),
        );
        to_socket(
            state.path(),
            serde_json::json!({"notify": {"session": session, "title": "Agent", "body": "waiting"}}),
        );
        to_socket(
            state.path(),
            serde_json::json!({"link": {"session": session, "url": "https://example.com/", "text": "docs", "col": 3}}),
        );
    };
    let link = PageSignal::Link { url: "https://example.com/".into(), text: "docs".into(), col: 3 };

    // The owner: all three, in order.
    let conn = connect(&relay, None).await.unwrap();
    let (mut control, reply) = hello(&conn, spawn_hello(Some(&owner), None)).await;
    let ready = expect_ready(reply);
    send_all(&ready.session);
    let seen = until_link(&mut control).await;
    assert_eq!(
        signals(&seen),
        [
            &PageSignal::Clipboard { text: "copied".into() },
            &PageSignal::Notify { title: "Agent".into(), body: "waiting".into() },
            &link,
        ]
    );

    // A read-only link watches the owner's session: the link printed before, then of all three
    // printed again only the link (it came after the others: they were not held back).
    let conn = connect(&relay, None).await.unwrap();
    let (mut control, reply) = hello(&conn, spawn_hello(Some(viewer), Some(&ready.session))).await;
    let ready = expect_ready(reply);
    assert!(ready.view, "a read-only link watches");
    let seen = until_link(&mut control).await;
    assert_eq!(signals(&seen), [&link], "the links printed before: {seen:?}");
    send_all(&ready.session);
    let seen = until_link(&mut control).await;
    assert_eq!(signals(&seen), [&link], "{seen:?}");

    // A page attaching later gets the session's links printed before.
    let conn = connect(&relay, None).await.unwrap();
    let (mut control, reply) = hello(&conn, spawn_hello(Some(&owner), Some(&ready.session))).await;
    expect_ready(reply);
    let seen = until_link(&mut control).await;
    assert_eq!(signals(&seen), [&link], "{seen:?}");
}
