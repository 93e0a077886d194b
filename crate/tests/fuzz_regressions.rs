//! Inputs the fuzz targets (fuzz/, docs/FUZZING.md) found to break the core, each kept as a
//! named test once fixed. The fuzz target that found it is named in each test's comment.

use tern::session::{ClientSession, SessionConfig};
use tern::terminal::{Complete, Emulator, Framebuffer, Renderer};
use tern::time::Instant;
use tern::wire::Key;

fn key() -> Key {
    "WLThFE98+opDlEMyexqWsA".parse().expect("valid key")
}

/// transport_session: keys typed after `shutdown` (before the server acknowledged it) asked the
/// predictor for the state after the shutdown state, `u64::MAX + 1`: an overflow panic in a
/// debug build, a prediction for state 0 in a release one.
#[test]
fn typing_after_shutdown_does_not_overflow_the_state_number() {
    let mut now = Instant::from_millis(1_000);
    let mut client: ClientSession<Complete> =
        ClientSession::new(SessionConfig::new(key(), 80, 24), now);
    client.shutdown(now);
    for _ in 0..3 {
        while client.poll_transmit().is_some() {}
        now = Instant::from_millis(now.as_millis() + 300);
        client.handle_timeout(now);
    }
    client.handle_input(now, b"typed after quitting");
    while client.poll_transmit().is_some() {}
    assert!(!client.is_closed(), "the server has not acknowledged the shutdown");
}

/// resume_point: a point (from sessionStorage, or a relay's `ready.point`) naming a screen of
/// 8224 x 26988 cells was rebuilt as asked: gigabytes allocated before anything was checked.
/// Its size must be one a Resize could have made (`MAX_CELLS`).
#[test]
fn a_resume_point_with_a_huge_screen_is_refused_not_allocated() {
    use tern::session::ResumeError;
    let start = Instant::from_millis(1_000);
    let client: ClientSession<Complete> =
        ClientSession::new(SessionConfig::new(key(), 80, 24), start);
    let mut point = client.resume_point();
    (point.screen_cols, point.screen_rows) = (8224, 26988);
    let decoded = tern::session::ResumePoint::decode(&point.encode()).expect("well formed");
    assert!(matches!(decoded.server_state(), Err(ResumeError::Invalid("screen", _))));
    let resumed =
        ClientSession::<Complete>::resume(SessionConfig::new(key(), 80, 24), &decoded, start);
    assert!(resumed.is_err(), "refused");
    // The largest screen a Resize allows still resumes.
    (point.screen_cols, point.screen_rows) = (4096, 512);
    assert!(point.server_state().is_ok());
}

/// render_roundtrip: a title set with `OSC ;` and 255 characters keeps all 255 (mosh keeps an
/// OSC's first 256 characters, less the `;`), but every renderer sends titles as `OSC 0;`, which
/// keeps 254. mosh-client loses the same last character: kept as mosh does, and pinned here so a
/// change of either rule is a decision.
#[test]
fn a_255_character_title_loses_its_last_character_on_the_way_as_in_mosh() {
    use tern::terminal::Size;
    let title: String = "t".repeat(300);
    let mut server = Emulator::new(Size { cols: 20, rows: 4 });
    server.feed(format!("\x1b];{title}\x07").as_bytes());
    assert_eq!(server.framebuffer().title().chars().count(), 255);
    let mut client = Emulator::new(Size { cols: 20, rows: 4 });
    client.feed(&Renderer::new().render(None, server.framebuffer()));
    assert_eq!(client.framebuffer().title().chars().count(), 254);
    assert!(server.framebuffer().title().starts_with(client.framebuffer().title()));
}

/// render_roundtrip (10-minute run): the same rule when a later OSC changed one of the two names.
/// `OSC ;` + 255 characters sets the icon name and the title; `OSC 2;` then sets the title alone,
/// so the renderers send `OSC 1;` for the icon name, which keeps 254 of its 255 characters. Both
/// renderers, full paint and update: mosh-client loses the same character.
#[test]
fn a_255_character_icon_name_beside_another_title_loses_its_last_character_as_in_mosh() {
    use tern::terminal::Size;
    let size = Size { cols: 20, rows: 4 };
    let name: String = "i".repeat(300);
    let mut before = Emulator::new(size);
    before.feed(b"\x1b]0;short\x07");
    let mut server = Emulator::with_framebuffer(before.framebuffer().clone());
    server.feed(format!("\x1b];{name}\x07\x1b]2;\x07").as_bytes());
    let want = server.framebuffer();
    assert_eq!((want.icon_name().chars().count(), want.title()), (255, ""));
    for renderer in [Renderer::new(), Renderer::in_place()] {
        let mut painted = Emulator::new(size);
        painted.feed(&renderer.render(None, want));
        let mut updated = Emulator::new(size);
        updated.feed(&renderer.render(None, before.framebuffer()));
        updated.feed(&renderer.render(Some(before.framebuffer()), want));
        for client in [painted.framebuffer(), updated.framebuffer()] {
            assert_eq!(client.icon_name().chars().count(), 254);
            assert!(want.icon_name().starts_with(client.icon_name()));
            assert_eq!(client.title(), "");
        }
    }
}

/// What a terminal shows after `renderer` painted `fa` on it (checked) and then drew `fb`.
fn painted_then_updated(renderer: Renderer, fa: &Framebuffer, fb: &Framebuffer) -> Framebuffer {
    let mut terminal = Emulator::new(fa.size());
    terminal.feed(&renderer.render(None, fa));
    assert_eq!(terminal.framebuffer().looks_like(fa), Ok(()));
    terminal.feed(&renderer.render(Some(fa), fb));
    terminal.framebuffer().clone()
}

/// render_roundtrip: a soft-wrapped last row scrolled up by line feeds after the margins were
/// reset. No output can set the terminal's last row's wrap flag (printing past its end scrolls),
/// so a terminal painted from the frame has it clear; mosh's renderer (`Renderer::new`, its
/// choices byte for byte) keeps the flag it believes, so once the row scrolls up the terminal's
/// row 10 is unwrapped where the frame's is wrapped, as on mosh-client's screen. The page's
/// renderer (`Renderer::in_place`) forgets that belief and redraws the row: it must match exactly.
/// Minimized by `cargo fuzz tmin`; the fuzz target allows mosh's renderer exactly this.
#[test]
fn a_wrapped_last_row_scrolled_up_keeps_its_wrap_flag_through_the_pages_renderer() {
    let a: &[u8] = b"\xff\x00\x1b[5;10r\x1b'\xec\x81[K\x1b[24;1H00000000000000000000000000000000;1;ic23;1H\n\n)\x1b[0";
    let b: &[u8] = b"r\x1b[10;1H\n\n\n\x1br\x1b[\x12";
    let mut server = Complete::new(40, 12);
    server.feed_host_bytes(a);
    let fa = server.framebuffer().clone();
    server.feed_host_bytes(b);
    let fb = server.framebuffer().clone();
    assert!(fb.row(10).unwrap().is_wrapped(), "the case needs a wrapped row 10");
    let on_terminal = |renderer| painted_then_updated(renderer, &fa, &fb);
    assert_eq!(on_terminal(Renderer::in_place()).looks_like(&fb), Ok(()));
    assert_eq!(on_terminal(Renderer::new()).wrap_flags_differing(&fb), Ok(vec![10]));
}

/// A render_roundtrip input played as the target plays it: the server's states after A and
/// after A + B (the header: columns, rows, the split of A and B, then three bytes for a resize
/// these cases do not need). Both cases need A to leave the last row wrapped.
fn states_after_a_wrapped_last_row(input: &[u8]) -> (Complete, Complete) {
    let (cols, rows) = (u16::from(input[0] % 120) + 1, u16::from(input[1] % 40) + 1);
    let split = usize::from(u16::from_le_bytes([input[2], input[3]]));
    let bytes = &input[7..];
    let (a, b) = bytes.split_at(split % (bytes.len() + 1));
    let mut server_a = Complete::new(cols, rows);
    server_a.feed_host_bytes(a);
    let last = usize::from(rows) - 1;
    let wrapped = server_a.framebuffer().row(last).is_some_and(|r| r.is_wrapped());
    assert!(wrapped, "the case needs a wrapped last row");
    let mut server_b = server_a.clone();
    server_b.feed_host_bytes(b);
    (server_a, server_b)
}

/// render_roundtrip (an 8-minute run, 2026-12-03): the same belief of mosh's renderer as above,
/// reached through mosh's state diff (`Complete::diff_events` draws with `Renderer::new`), so a
/// client that applies mosh-server's diffs keeps it too: after a frame whose last row was
/// wrapped (margins set, reverse and forward index, line feeds), the client's row 0 is unwrapped
/// where the server's is wrapped, and nothing else differs. mosh-client applies the same bytes.
/// The page's renderer, drawing the same two frames, matches exactly. The input is the fuzzer's,
/// kept in the corpus; the target allows mosh's state diff exactly this.
#[test]
fn a_state_diff_after_a_wrapped_last_row_differs_only_in_a_wrap_flag_above_it_as_in_mosh() {
    let input =
        include_bytes!("../../fuzz/corpus/render_roundtrip/regression-state-diff-wrap-flag");
    let (server_a, server_b) = states_after_a_wrapped_last_row(input);
    let (fa, fb) = (server_a.framebuffer(), server_b.framebuffer());

    let blank = Complete::new(fa.size().cols, fa.size().rows);
    let mut client = blank.clone();
    client.apply_events(&server_a.diff_events(&blank)).expect("diff from blank applies");
    assert_eq!(client.framebuffer().looks_like(fa), Ok(()));
    client.apply_events(&server_b.diff_events(&server_a)).expect("diff applies");
    assert_eq!(client.framebuffer().wrap_flags_differing(fb), Ok(vec![0]));

    assert_eq!(painted_then_updated(Renderer::in_place(), fa, fb).looks_like(fb), Ok(()));
}

/// render_roundtrip (the 10-minute run after the case above, a mutation of its input): the same
/// belief through mosh's renderer itself, landing on row 0 rather than just above the last row,
/// while the frame's last row is wrapped too (a flag no terminal can have, never compared). The
/// page's renderer matches the frame exactly.
#[test]
fn mosh_renderers_scrolled_wrap_flag_can_land_on_row_0_and_the_pages_renderer_stays_exact() {
    let input =
        include_bytes!("../../fuzz/corpus/render_roundtrip/regression-scrolled-wrap-flag-row-0");
    let (server_a, server_b) = states_after_a_wrapped_last_row(input);
    let (fa, fb) = (server_a.framebuffer().clone(), server_b.framebuffer().clone());
    let last = usize::from(fa.size().rows) - 1;
    let on_terminal = |renderer| painted_then_updated(renderer, &fa, &fb);
    assert_eq!(on_terminal(Renderer::in_place()).looks_like(&fb), Ok(()));
    assert_eq!(on_terminal(Renderer::new()).wrap_flags_differing(&fb), Ok(vec![0, last]));
}
