//! The pictures the recorder lifts, end to end without a browser (docs/IMAGES.md): a real
//! mosh-server keeps the recorder's marker in its screen (the client's copy finds it), and the
//! relay serves the image over `POST /api/image`, a SIXEL as a PNG of its size.

mod support;

use std::time::Duration;

use support::*;
use tern::images::marker;
use tern::relay_proto::{IMAGE_PATH, ImageInfo, ImageRequest, decode, encode};
use tern::terminal::Complete;

fn markers(s: &tern::session::ClientSession<Complete>) -> Vec<(usize, u16, u64)> {
    let fb = s.server_state().framebuffer();
    let mut out = Vec::new();
    for (row, r) in fb.rows().iter().enumerate() {
        out.extend(marker::find(r.cells()).into_iter().map(|(col, id)| (row, col, id)));
    }
    out
}

#[tokio::test]
async fn mosh_server_keeps_the_marker_and_the_relay_serves_the_sixel_as_a_png() {
    let token = test_token("images");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, spawn_hello(Some(&token), None)).await;
    let ready = expect_ready(reply);
    let key = ready.key.clone().expect("spawn mode hands out the key");
    let mut mosh = MoshOverRelay::with_screen(conn, control, &key);
    let prompt = |s: &tern::session::ClientSession<Complete>| {
        tern::terminal::screen_text(s.server_state().framebuffer())
            .rows
            .iter()
            .any(|l| l.trim_end().ends_with(['#', '$']))
    };
    assert!(mosh.run_until(Duration::from_secs(10), prompt).await, "no prompt");

    // A red SIXEL of 30 × 30 pixels after "pic:" (3 × 2 cells of 10 × 20 px; "done" then goes
    // on its last row, a VT340's rule).
    mosh.type_bytes(
        b"printf 'pic:\\033Pq\"1;1;30;30#1;2;100;0;0#1!30~-!30~-!30~-!30~-!30~\\033\\\\done\\n'\n",
    );
    let found = mosh.run_until(Duration::from_secs(10), |s| !markers(s).is_empty()).await;
    assert!(found, "no marker in mosh-server's screen:\n{}", mosh.screen_text());
    let (_, col, id) = markers(&mosh.session)[0];
    assert_eq!((col, id), (4, 1), "right after pic:, image 1");
    // The spaces draw nothing: the text is as the program printed it.
    let text = mosh.screen_text();
    let rows: Vec<&str> = text.lines().map(str::trim_end).collect();
    let at = rows.iter().position(|l| *l == "pic:").unwrap_or_else(|| panic!("{text}"));
    assert_eq!(rows[at + 1], "    done", "{text}");

    let ask = |image: u64| encode(&ImageRequest { session: ready.session.clone(), image });
    let (status, body) = http_post(relay.addr(), IMAGE_PATH, Some(&token), &ask(id)).await;
    assert_eq!(status, 200, "{body}");
    let (head, png) = body.split_once('\n').expect("a header line");
    let info: ImageInfo = decode(head.as_bytes()).unwrap();
    assert_eq!(
        (info.cols, info.rows, info.width, info.height, info.mime.as_str()),
        (3, 2, 30, 30, "image/png")
    );
    assert!(png.contains("PNG") && png.contains("IHDR\0\0\0\x1e\0\0\0\x1e"), "a 30 × 30 PNG");
    // Unknown image, unknown session, no credential, malformed.
    let (status, body) = http_post(relay.addr(), IMAGE_PATH, Some(&token), &ask(99)).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("unknown_image"), "{body}");
    let other = encode(&ImageRequest { session: "00".repeat(16), image: 1 });
    assert_eq!(http_post(relay.addr(), IMAGE_PATH, Some(&token), &other).await.0, 404);
    assert_eq!(http_post(relay.addr(), IMAGE_PATH, None, &ask(id)).await.0, 401);
    assert_eq!(http_post(relay.addr(), IMAGE_PATH, Some(&token), b"{nonsense").await.0, 400);
}

/// A session of `token`'s that printed a 30 × 30 SIXEL (image 1 of its store): its mosh client
/// (kept driving it) and id.
async fn session_with_a_picture(
    relay: &TestRelay,
    token: &str,
) -> (MoshOverRelay<Complete>, String) {
    let conn = connect(relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, spawn_hello(Some(token), None)).await;
    let ready = expect_ready(reply);
    let key = ready.key.clone().expect("spawn mode hands out the key");
    let mut mosh = MoshOverRelay::with_screen(conn, control, &key);
    mosh.type_bytes(
        b"printf 'pic:\\033Pq\"1;1;30;30#1;2;100;0;0#1!30~-!30~-!30~\\033\\\\done\\n'\n",
    );
    let found = mosh.run_until(Duration::from_secs(15), |s| !markers(s).is_empty()).await;
    assert!(found, "no marker in mosh-server's screen:\n{}", mosh.screen_text());
    (mosh, ready.session)
}

/// The first line a stream of `conn` answers a picture request with.
async fn ask_on_a_stream(conn: &wtransport::Connection, session: &str, image: u64) -> String {
    answer(asked(conn, session, image).await).await
}

/// A stream's sending half (kept open until the answer: closing it gives the request up) and
/// the reader of its answer.
type Asked = (wtransport::SendStream, tern_relay::control::LineReader<wtransport::RecvStream>);

/// A picture request sent on a new stream of `conn`: its answer's reader.
async fn asked(conn: &wtransport::Connection, session: &str, image: u64) -> Asked {
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let request = ImageRequest { session: session.into(), image };
    let line = tern::relay_proto::encode_line(&tern::relay_proto::StreamRequest::Image(request));
    send.write_all(&line).await.unwrap();
    (send, tern_relay::control::LineReader::new(recv))
}

async fn answer((_send, mut reader): Asked) -> String {
    let line = tokio::time::timeout(Duration::from_secs(10), reader.next_line())
        .await
        .expect("an answer within 10 s")
        .expect("a line");
    String::from_utf8_lossy(&line).into_owned()
}

/// Runs `tern share ARGS` in `mosh`'s shell: the viewer URL's token.
async fn share(mosh: &mut MoshOverRelay<Complete>, dir: &std::path::Path, args: &str) -> String {
    let out = dir.join(format!("share-{}", args.len()));
    mosh.type_bytes(format!("tern share {args} > {}\n", out.display()).as_bytes());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        mosh.run_until(Duration::from_millis(100), |_| false).await;
        if let Ok(u) = std::fs::read_to_string(&out)
            && u.contains("#token=")
        {
            return u.split("#token=").nth(1).unwrap().split('&').next().unwrap().to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no share: {}", mosh.screen_text());
    }
}

/// Issue 34 item 5: a viewer's link gets its session's pictures only when its share includes the
/// history, over HTTP and on a stream of its link; never another session's.
#[tokio::test]
async fn a_viewer_gets_its_sessions_pictures_only_when_its_share_includes_the_history() {
    require_mosh_server();
    let token = test_token("images");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut a, id_a) = session_with_a_picture(&relay, &token).await;
    let (_b, id_b) = session_with_a_picture(&relay, &token).await;
    let screen_only = share(&mut a, state.path(), "").await;
    let with_history = share(&mut a, state.path(), "--allow-history").await;
    let ask = |session: &str| encode(&ImageRequest { session: session.into(), image: 1 });

    // HTTP: the screen-only share is refused A's picture by its id; the other gets it, never B's.
    let (status, body) = http_post(relay.addr(), IMAGE_PATH, Some(&screen_only), &ask(&id_a)).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("did not share the session's history or pictures"), "{body}");
    let (status, body) =
        http_post(relay.addr(), IMAGE_PATH, Some(&with_history), &ask(&id_a)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("IHDR\0\0\0\x1e\0\0\0\x1e"), "A's 30 × 30 picture");
    let (status, body) =
        http_post(relay.addr(), IMAGE_PATH, Some(&with_history), &ask(&id_b)).await;
    assert_eq!(status, 403, "another session's picture: {body}");

    // On a stream of a viewer's link: the same.
    let watch = |share: String| {
        let (relay, id_a) = (&relay, id_a.clone());
        async move {
            let conn = connect(relay, None).await.unwrap();
            let (control, reply) = hello(
                &conn,
                tern::relay_proto::Hello { view: true, ..spawn_hello(Some(&share), Some(&id_a)) },
            )
            .await;
            assert!(expect_ready(reply).view);
            (conn, control)
        }
    };
    let (conn, _control) = watch(screen_only).await;
    let line = ask_on_a_stream(&conn, &id_a, 1).await;
    assert!(line.contains("not_your_session") && line.contains("pictures"), "{line}");
    let (conn, _control) = watch(with_history).await;
    let info: ImageInfo = decode(ask_on_a_stream(&conn, &id_a, 1).await.as_bytes()).unwrap();
    assert_eq!((info.width, info.height, info.mime.as_str()), (30, 30, "image/png"));
    let line = ask_on_a_stream(&conn, &id_b, 1).await;
    assert!(line.contains("unknown_image"), "another session's picture: {line}");
    // The next picture (the page asks before it is printed): sent, with its id, once stored.
    let waiting = asked(&conn, &id_a, tern::relay_proto::NEXT_IMAGE).await;
    a.type_bytes(b"printf '\\033Pq\"1;1;20;20#1;2;0;100;0#1!20~-!20~-!20~-!20~\\033\\\\\\n'\n");
    let next = tokio::spawn(answer(waiting));
    let line = loop {
        a.run_until(Duration::from_millis(50), |_| false).await;
        if next.is_finished() {
            break next.await.unwrap();
        }
    };
    let info: ImageInfo = decode(line.as_bytes()).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!((info.id, info.width, info.height), (Some(2), 20, 20), "A's second picture");
    let audit = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    assert!(audit.contains("\"kind\":\"image\""), "the refusal is audited: {audit}");
}
