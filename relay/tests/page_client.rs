//! The page's own connection code (`tern::relay_client`, the same functions the browser runs)
//! against the real relay: info, version and mode checks, hello, the answer, resume, refusals.
//! Page and relay share every message type, so a field one of them renamed would not compile
//! here; this test also catches a change of meaning.

mod support;

use std::time::Duration;

use support::*;
use tern::relay_client::{self, ConnectError, FailCode, Target};
use tern::relay_proto::{ClientMessage, INFO_PATH, Mode, PROTOCOL_VERSION};

/// One attempt as the page makes it: hello built by `target`, answer read by `relay_client`.
async fn attempt(
    relay: &TestRelay,
    target: &Target,
    mode: Mode,
    resume: Option<&str>,
) -> (Control, Result<tern::relay_proto::control::Ready, ConnectError>) {
    let conn = connect(relay, None).await.expect("WebTransport connects");
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let hello = ClientMessage::Hello(target.hello(mode, resume, None, 1211));
    send.write_all(&hello.to_line()).await.unwrap();
    let mut control = Control { send, reader: tern_relay::control::LineReader::new(recv) };
    let line = tokio::time::timeout(Duration::from_secs(20), control.reader.next_line())
        .await
        .expect("an answer")
        .ok();
    // The connection must outlive the session for `resume` to find it alive.
    std::mem::forget(conn);
    (control, relay_client::answer(line.as_deref()))
}

#[tokio::test]
async fn the_pages_connection_code_works_against_a_real_relay() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let token = test_token("page");
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let target = Target { token: token.clone(), bridge: None };

    let (status, body) = http_get(relay.addr(), INFO_PATH, Some(&token)).await;
    let info =
        relay_client::info_response(status, body.as_bytes()).expect("the page reads /api/info");
    assert_eq!(info.protocol, PROTOCOL_VERSION);
    relay_client::check_info(&info, &target).expect("this page can use this relay");

    let (_control, ready) = attempt(&relay, &target, info.mode, None).await;
    let ready = ready.expect("ready");
    assert!(!ready.resumed);
    let (_key, key_text) = target.session_key(&ready).expect("a valid mosh key");
    assert_eq!(key_text.len(), 22);

    // A reconnect names the session: the relay attaches the same mosh-server.
    let (_control2, again) = attempt(&relay, &target, info.mode, Some(&ready.session)).await;
    let again = again.expect("ready again");
    assert!(again.resumed);
    assert_eq!((again.session, again.port), (ready.session.clone(), ready.port));

    // Refusals read as the page must act on them.
    let wrong = Target { token: "not-the-token".into(), bridge: None };
    let (status, body) = http_get(relay.addr(), INFO_PATH, Some(&wrong.token)).await;
    assert!(matches!(
        relay_client::info_response(status, body.as_bytes()),
        Err(ConnectError::Fatal { code: FailCode::BadToken, .. })
    ));
    let (_c, refused) = attempt(&relay, &wrong, info.mode, None).await;
    assert!(
        matches!(refused, Err(ConnectError::Fatal { code: FailCode::BadToken, .. })),
        "{refused:?}"
    );
    let (_c, gone) = attempt(&relay, &target, info.mode, Some(&"0".repeat(32))).await;
    assert!(matches!(gone, Err(ConnectError::Ended(_))), "{gone:?}");
    let bridge_page = Target {
        token: token.clone(),
        bridge: Some(("127.0.0.1".into(), 60001, key_text.clone())),
    };
    let (_c, wrong_mode) = attempt(&relay, &bridge_page, Mode::Bridge, None).await;
    assert!(
        matches!(
            wrong_mode,
            Err(ConnectError::Fatal {
                code: FailCode::Refused(tern::relay_proto::ErrorCode::WrongMode),
                ..
            })
        ),
        "{wrong_mode:?}"
    );
    relay.stop().await;
}
