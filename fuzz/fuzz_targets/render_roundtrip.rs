//! The renderer round trip: emulate bytes A, render that frame onto a terminal that knows
//! nothing (a full paint), then render A -> A+B onto the same terminal; the terminal must show
//! what was wanted each time. Both renderers: mosh-server's choices and the page's in-place one.
//! Also mosh's state diff: `Complete::diff_events` from blank -> A and A -> A+B (with a resize)
//! applied to a copy rebuilds the server's state.
//!
//! Input: `cols rows split(u16 LE) resize rcols rrows` then the bytes; A is the first `split %
//! (len + 1)` of them, B the rest.
//!
//! Invariants: no panic; every rendered terminal and rebuilt state `looks_like` the wanted
//! frame (as drawn: mosh's `Complete::compare`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::terminal::{Complete, Emulator, Framebuffer, Renderer};
use tern_fuzz::{Reader, check_framebuffer, size};

fn same(got: &Framebuffer, want: &Framebuffer, what: &str) {
    let Err(e) = got.looks_like(want) else { return };
    if let Some(fixed) = with_mosh_255_character_name(got, want)
        && fixed.looks_like(want).is_ok()
    {
        return;
    }
    panic!("{what}: {e}\ngot {got:?}\nwant {want:?}");
}

/// mosh's one title or icon name that cannot make the trip: only `OSC ;` + 255 characters keeps
/// 255 (the OSC keeps 256, less the `;`), and it sets both names; a renderer re-sends them as
/// `OSC 0;` (both the same) or `OSC 1;` and `OSC 2;` (after a later OSC changed one), each of
/// which keeps 254. mosh-client loses the same last character; the emulator keeps mosh's rule
/// (docs/FUZZING.md). `got` with that name given back the way only the host could, or `None`
/// when neither of `want`'s names has 255 characters.
fn with_mosh_255_character_name(got: &Framebuffer, want: &Framebuffer) -> Option<Framebuffer> {
    let long = |name: &str| name.chars().count() == 255;
    let mut fixed = Emulator::with_framebuffer(got.clone());
    if long(want.icon_name()) {
        fixed.feed(format!("\x1b];{}\x07", want.icon_name()).as_bytes());
        if want.title() != want.icon_name() {
            fixed.feed(format!("\x1b]2;{}\x07", want.title()).as_bytes());
        }
    } else if long(want.title()) {
        fixed.feed(format!("\x1b];{}\x07\x1b]1;{}\x07", want.title(), want.icon_name()).as_bytes());
    } else {
        return None;
    }
    Some(fixed.framebuffer().clone())
}

/// mosh's renderer (`Renderer::new`, also what `Complete::diff_events` draws with) keeps the
/// wrap flag it believes for a last row scrolled up, which the terminal cannot have
/// (crate/tests/fuzz_regressions.rs): after a frame `before` whose last row was wrapped, `got`
/// may differ from `want` in rows' wrap flags, and in nothing else. (Where the belief ends up
/// depends on the scrolls after it: row 0 after margins, reverse and forward index. The last
/// row's own flag is never compared: no output can set it.)
fn mosh_keeps_a_scrolled_wrap_flag(
    before: &Framebuffer,
    got: &Framebuffer,
    want: &Framebuffer,
) -> bool {
    let last_row = usize::from(before.size().rows) - 1;
    before.row(last_row).is_some_and(|r| r.is_wrapped()) && got.wrap_flags_differing(want).is_ok()
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader(data);
    let (cols, rows) = size(r.u8(), r.u8());
    let split = usize::from(r.u16());
    let resize = r.u8() & 1 != 0;
    let (rcols, rrows) = size(r.u8(), r.u8());
    let bytes = r.rest();
    let (a, b) = bytes.split_at(split % (bytes.len() + 1));

    let mut server_a = Complete::new(cols, rows);
    server_a.feed_host_bytes(a);
    let mut server_b = server_a.clone();
    server_b.feed_host_bytes(b);
    let (fa, fb) = (server_a.framebuffer(), server_b.framebuffer());
    check_framebuffer(fa);
    check_framebuffer(fb);

    for (name, renderer) in [("mosh", Renderer::new()), ("in place", Renderer::in_place())] {
        let mut terminal = Emulator::new(fa.size());
        // A full paint does not resend the clipboard: the terminal already had it.
        terminal.feed(format!("\x1b]52;c;{}\x07", fa.clipboard()).as_bytes());
        terminal.feed(&renderer.render(None, fa));
        same(terminal.framebuffer(), fa, &format!("{name}: full paint"));
        terminal.feed(&renderer.render(Some(fa), fb));
        // The page's renderer is held to the frame exactly.
        if name == "mosh" && mosh_keeps_a_scrolled_wrap_flag(fa, terminal.framebuffer(), fb) {
            continue;
        }
        same(terminal.framebuffer(), fb, &format!("{name}: update"));
    }

    let blank = Complete::new(cols, rows);
    let mut client = blank.clone();
    client.apply_events(&server_a.diff_events(&blank)).expect("diff from blank applies");
    same(client.framebuffer(), fa, "state diff blank -> A");
    let mut server_c = server_a.clone();
    if resize {
        server_c.resize(rcols, rrows).expect("a small size");
    }
    server_c.feed_host_bytes(b);
    client.apply_events(&server_c.diff_events(&server_a)).expect("diff applies");
    // mosh's state diff is drawn by mosh's renderer, with the same belief.
    if !mosh_keeps_a_scrolled_wrap_flag(fa, client.framebuffer(), server_c.framebuffer()) {
        same(client.framebuffer(), server_c.framebuffer(), "state diff A -> B");
    }
});
