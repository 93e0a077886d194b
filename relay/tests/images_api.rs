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
