//! The page's own connection code (`tern::relay_client`, the same functions the browser runs)
//! against the real relay: info, version and mode checks, hello, the answer, resume, refusals.
//! Page and relay share every message type, so a field one of them renamed would not compile
//! here; this test also catches a change of meaning.

mod support;

use std::time::Duration;

use support::*;
use tern::relay_client::{self, ConnectError, FailCode, Target, Verifier};
use tern::relay_proto::{CHALLENGE_PATH, ClientMessage, INFO_PATH, Mode, PROTOCOL_VERSION};

/// One attempt as the page makes it: greet, the relay's challenge checked by `relay_client`'s
/// verifier, the hello built by `target` with the page's proof, the answer read by
/// `relay_client`.
async fn attempt(
    relay: &TestRelay,
    target: &Target,
    mode: Mode,
    resume: Option<&str>,
) -> (Control, Result<tern::relay_proto::control::Ready, ConnectError>) {
    let conn = connect(relay, None).await.expect("WebTransport connects");
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let verifier = Verifier::new(random32());
    send.write_all(&verifier.greet(&target.token).to_line()).await.unwrap();
    let mut control = Control { send, reader: tern_relay::control::LineReader::new(recv) };
    let mut next_line = async || {
        tokio::time::timeout(Duration::from_secs(20), control.reader.next_line())
            .await
            .expect("an answer")
            .ok()
    };
    let challenge = next_line().await;
    let proof = match verifier.control_answer(&target.token, challenge.as_deref()) {
        Ok(proof) => proof,
        Err(e) => return (control, Err(e)),
    };
    let mut hello = target.hello(mode, resume, None, 1211);
    hello.proof = Some(proof);
    control.send.write_all(&ClientMessage::Hello(hello).to_line()).await.unwrap();
    let line = tokio::time::timeout(Duration::from_secs(20), control.reader.next_line())
        .await
        .expect("an answer")
        .ok();
    // The connection must outlive the session for `resume` to find it alive.
    std::mem::forget(conn);
    (control, relay_client::answer(line.as_deref()))
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).unwrap();
    b
}

/// An API request as the page makes it: a challenge, the relay's proof checked, the request
/// with the page's proof. `Err`: the verifier's verdict on the challenge.
async fn api_get(
    relay: &TestRelay,
    token: &str,
    route: &str,
) -> Result<(u16, String, String), ConnectError> {
    let verifier = Verifier::new(random32());
    let request = tern::relay_proto::encode(&verifier.request(token));
    let (status, body) = http_post(relay.addr(), CHALLENGE_PATH, None, &request).await;
    let authorization = verifier.http_answer(token, status, body.as_bytes())?;
    let (status, body) = http_get_authorized(relay.addr(), route, &authorization).await;
    Ok((status, authorization, body))
}

#[tokio::test]
async fn the_pages_connection_code_works_against_a_real_relay() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let token = test_token("page");
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let target = Target { token: token.clone(), bridge: None };

    let (status, authorization, body) =
        api_get(&relay, &token, INFO_PATH).await.expect("the relay proves it knows the token");
    let info =
        relay_client::info_response(status, body.as_bytes()).expect("the page reads /api/info");
    // A challenge is spent by one request: the same authorization again is refused.
    let (status, _) = http_get_authorized(relay.addr(), INFO_PATH, &authorization).await;
    assert_eq!(status, 401);
    assert_eq!(info.protocol, PROTOCOL_VERSION);
    relay_client::check_info(&info, &target).expect("this page can use this relay");

    let (_control, ready) = attempt(&relay, &target, info.mode, None).await;
    let ready = ready.expect("ready");
    assert!(!ready.resumed);
    // `ready` carries the same info: a page whose hello left before /api/info answered reads it.
    assert_eq!(ready.info.as_deref(), Some(&info), "ready's info is /api/info's");
    let (_key, key_text) = target.session_key(&ready).expect("a valid mosh key");
    assert_eq!(key_text.len(), 22);

    // A reconnect names the session: the relay attaches the same mosh-server.
    let (_control2, again) = attempt(&relay, &target, info.mode, Some(&ready.session)).await;
    let again = again.expect("ready again");
    assert!(again.resumed);
    assert_eq!((again.session, again.port), (ready.session.clone(), ready.port));

    // Refusals read as the page must act on them. A page with another token cannot verify
    // the relay (its proof is over the relay's token), so it sends nothing more.
    let wrong = Target { token: "not-the-token-of-this-relay".into(), bridge: None };
    let not_verified = |r: Result<(), ConnectError>| {
        matches!(r, Err(ConnectError::Fatal { code: FailCode::RelayNotVerified, .. }))
    };
    let refused = api_get(&relay, &wrong.token, INFO_PATH).await.map(|_| ());
    assert!(not_verified(refused.clone()), "{refused:?}");
    let (_c, refused) = attempt(&relay, &wrong, info.mode, None).await;
    let refused = refused.map(|_| ());
    assert!(not_verified(refused.clone()), "{refused:?}");
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

/// Someone floods `/api/challenge` (it is public) to push the page's outstanding challenge out of
/// the relay's bounded table between the page's challenge and its request. The relay then refuses
/// the page's proof; having verified the relay, the page knows that means a lost challenge, not a
/// wrong token, and asks again (`Verifier::challenge_was_lost`), so the flood cannot make the page
/// stop with "wrong token".
#[tokio::test]
async fn a_challenge_pushed_out_by_a_flood_is_asked_again_not_taken_for_a_wrong_token() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let token = test_token("flood");
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let verifier = Verifier::new(random32());
    let request = tern::relay_proto::encode(&verifier.request(&token));
    let (status, body) = http_post(relay.addr(), CHALLENGE_PATH, None, &request).await;
    let authorization = verifier.http_answer(&token, status, body.as_bytes()).expect("verified");
    // The flood: as many challenges as the relay keeps, each from a fresh nonce, 64 at a time.
    let addr = relay.addr();
    for _ in 0..64 {
        let batch = futures_util::future::join_all((0..64).map(|_| {
            let request = tern::relay_proto::encode(&Verifier::new(random32()).request(&token));
            async move { http_post(addr, CHALLENGE_PATH, None, &request).await.0 }
        }))
        .await;
        assert!(batch.iter().all(|s| *s == 200), "{batch:?}");
    }
    let (status, _) = http_get_authorized(relay.addr(), INFO_PATH, &authorization).await;
    assert_eq!(status, 401, "the page's challenge was pushed out");
    assert!(Verifier::challenge_was_lost(status), "the page asks again");
    let (status, _, body) = api_get(&relay, &token, INFO_PATH).await.expect("verified again");
    assert_eq!(status, 200, "{body}");
    relay.stop().await;
}

/// The page's nonce in its CONNECT (`/wt?greet=…`): the relay's challenge comes on the first
/// unidirectional stream with the session, and the hello answers it at once (one round trip
/// less). A proof that does not hold, or one made for another link's push, is refused as a wrong
/// token; a page that greets instead (a named token's) still gets a challenge of its own.
#[tokio::test]
async fn a_pushed_challenge_lets_the_hello_leave_at_once_and_serves_no_other_link() {
    use tern::relay_proto::proof::{ProofNonce, pushed_challenge_query};
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let token = test_token("pushed");
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let target = Target { token: token.clone(), bridge: None };
    let within = |what: &'static str| {
        move |r: Result<_, tokio::time::error::Elapsed>| r.unwrap_or_else(|_| panic!("{what}"))
    };

    /// A link that asked for a pushed challenge: its connection, its nonce, the pushed line, and
    /// its control stream.
    async fn pushed_link(
        relay: &TestRelay,
    ) -> (wtransport::Connection, [u8; 32], Option<Vec<u8>>, Control) {
        let nonce = random32();
        let query = pushed_challenge_query(&ProofNonce(nonce));
        let conn = connect_with_query(relay, &query).await.expect("WebTransport connects");
        let uni = tokio::time::timeout(Duration::from_secs(20), conn.accept_uni())
            .await
            .expect("the relay pushes a stream with the session")
            .unwrap();
        let mut pushed = tern_relay::control::LineReader::new(uni);
        let line = tokio::time::timeout(Duration::from_secs(20), pushed.next_line())
            .await
            .expect("its first line")
            .ok();
        let (send, recv) = conn.open_bi().await.unwrap().await.unwrap();
        let control = Control { send, reader: tern_relay::control::LineReader::new(recv) };
        (conn, nonce, line, control)
    }

    // The page's way: the pushed challenge proves the token, the hello carries the proof.
    let (conn, nonce, pushed, mut control) = pushed_link(&relay).await;
    let verifier = Verifier::new(nonce);
    assert!(verifier.pushed_challenge_holds(&token, pushed.as_deref()), "{pushed:?}");
    let mut hello = target.hello(Mode::Spawn, None, None, 1211);
    hello.proof = Some(verifier.control_answer(&token, pushed.as_deref()).unwrap());
    control.send.write_all(&ClientMessage::Hello(hello.clone()).to_line()).await.unwrap();
    let answer = within("an answer")(
        tokio::time::timeout(Duration::from_secs(20), control.reader.next_line()).await,
    )
    .ok();
    let ready = relay_client::answer(answer.as_deref()).expect("ready without a greet");
    assert!(!ready.resumed);

    // That hello's proof on another link (whose push has another relay nonce): refused.
    let (_other, _, _, mut replayed) = pushed_link(&relay).await;
    replayed.send.write_all(&ClientMessage::Hello(hello.clone()).to_line()).await.unwrap();
    let line = within("a refusal")(
        tokio::time::timeout(Duration::from_secs(20), replayed.reader.next_line()).await,
    )
    .ok();
    match relay_client::answer(line.as_deref()) {
        Err(ConnectError::Fatal { code: FailCode::BadToken, .. }) => {}
        other => panic!("a replayed proof must be refused as a wrong token: {other:?}"),
    }

    // A proof made with a guessed token over the right nonces: refused the same way.
    let (_guess, guesser, pushed, mut guessing) = pushed_link(&relay).await;
    assert!(
        !Verifier::new(guesser).pushed_challenge_holds("a-guess-at-the-token", pushed.as_deref())
    );
    let relay_nonce = match tern::relay_proto::decode(pushed.as_deref().unwrap()).unwrap() {
        tern::relay_proto::ServerMessage::Challenge(c) => c.0.nonce,
        other => panic!("{other:?}"),
    };
    let guessed = tern::relay_proto::proof::prove(
        "a-guess-at-the-token",
        tern::relay_proto::proof::Prover::Page,
        &ProofNonce(guesser),
        &relay_nonce,
    );
    let mut bad = target.hello(Mode::Spawn, None, None, 1211);
    bad.proof = Some(tern::relay_proto::control::ProofText(guessed));
    guessing.send.write_all(&ClientMessage::Hello(bad).to_line()).await.unwrap();
    let line = within("a refusal")(
        tokio::time::timeout(Duration::from_secs(20), guessing.reader.next_line()).await,
    )
    .ok();
    assert!(
        matches!(
            relay_client::answer(line.as_deref()),
            Err(ConnectError::Fatal { code: FailCode::BadToken, .. })
        ),
        "{line:?}"
    );

    // A page that greets despite the push gets a challenge of its own, and its session.
    let (_greeter, greeter, _, mut greeting) = pushed_link(&relay).await;
    let greeter = Verifier::new(greeter);
    greeting.send.write_all(&greeter.greet(&token).to_line()).await.unwrap();
    let challenge = within("a challenge")(
        tokio::time::timeout(Duration::from_secs(20), greeting.reader.next_line()).await,
    )
    .ok();
    let mut hello = target.hello(Mode::Spawn, Some(&ready.session), None, 1211);
    hello.proof = Some(greeter.control_answer(&token, challenge.as_deref()).unwrap());
    greeting.send.write_all(&ClientMessage::Hello(hello).to_line()).await.unwrap();
    let line = within("an answer")(
        tokio::time::timeout(Duration::from_secs(20), greeting.reader.next_line()).await,
    )
    .ok();
    let again = relay_client::answer(line.as_deref()).expect("ready after a greet");
    assert_eq!(again.session, ready.session);
    std::mem::forget(conn);
    relay.stop().await;
}
