//! Property tests of the terminal model: the renderer's diff rebuilds the wanted frame in an
//! emulator, emulation does not depend on how input is chunked, and nothing panics on junk.

use proptest::prelude::*;
use tern::terminal::{Complete, Emulator, Framebuffer, Renderer, Size};
use tern::wire::{HostEvent, StateNum};

/// One piece of terminal output, as applications write it.
fn token() -> impl Strategy<Value = Vec<u8>> {
    let text = prop_oneof![
        "[ -~]{1,12}",
        Just("日本語".to_string()),
        Just("e\u{301}".to_string()),
        Just("\u{301}".to_string()),
        Just("😀".to_string()),
        Just("a\u{200d}b".to_string()),
        Just("ＡＢ".to_string()),
        Just("\u{a0}ÿ".to_string()),
    ];
    let n = || 0u16..40;
    prop_oneof![
        4 => text.prop_map(String::into_bytes),
        2 => prop_oneof![Just("\r"), Just("\n"), Just("\r\n"), Just("\x08"), Just("\t"), Just("\x07"),
                          Just("\x1bD"), Just("\x1bM"), Just("\x1bE"), Just("\x1b7"), Just("\x1b8"),
                          Just("\x1bH"), Just("\x1b#8"), Just("\x1bc"), Just("\x1b[!p")]
            .prop_map(|s| s.as_bytes().to_vec()),
        2 => (n(), n()).prop_map(|(r, c)| format!("\x1b[{r};{c}H").into_bytes()),
        2 => (n(), prop::sample::select(vec!['A', 'B', 'C', 'D', 'G', 'd', 'X', 'L', 'M', '@', 'P', 'S', 'T', 'I', 'Z', 'K', 'J', 'g']))
            .prop_map(|(k, f)| format!("\x1b[{k}{f}").into_bytes()),
        1 => (n(), n()).prop_map(|(t, b)| format!("\x1b[{t};{b}r").into_bytes()),
        2 => prop::collection::vec(prop_oneof![0u16..10, 20u16..30, 30u16..50, 90u16..108, Just(38), Just(48), Just(5), Just(2), 0u16..256], 0..6)
            .prop_map(|ps| format!("\x1b[{}m", ps.iter().map(u16::to_string).collect::<Vec<_>>().join(";")).into_bytes()),
        1 => (prop::sample::select(vec![4u16]), any::<bool>())
            .prop_map(|(m, on)| format!("\x1b[{m}{}", if on { 'h' } else { 'l' }).into_bytes()),
        2 => (prop::sample::select(vec![1u16, 5, 6, 25, 1004, 1007, 2004, 9, 1000, 1001, 1002, 1003, 1005, 1006, 1015, 3]), any::<bool>())
            .prop_map(|(m, on)| format!("\x1b[?{m}{}", if on { 'h' } else { 'l' }).into_bytes()),
        1 => (prop::sample::select(vec!["0", "1", "2"]), "[a-z ]{0,10}", prop::sample::select(vec!["\x07", "\x1b\\"]))
            .prop_map(|(c, t, end)| format!("\x1b]{c};{t}{end}").into_bytes()),
        1 => "[A-Za-z0-9+/=]{0,12}".prop_map(|p| format!("\x1b]52;c;{p}\x07").into_bytes()),
    ]
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(token(), 0..60).prop_map(|t| t.concat())
}

fn size() -> impl Strategy<Value = (u16, u16)> {
    (2u16..30, 2u16..12)
}

fn server_state(size: (u16, u16), bytes: &[u8]) -> Complete {
    let mut c = Complete::new(size.0, size.1);
    c.feed_host_bytes(bytes);
    c
}

fn check(got: &Framebuffer, want: &Framebuffer, what: &str) -> Result<(), TestCaseError> {
    got.looks_like(want)
        .map_err(|e| TestCaseError::fail(format!("{what}: {e}\ngot {got:?}\nwant {want:?}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The server-side diff A -> B, applied by a client holding A (itself built from the diff
    /// blank -> A), rebuilds B: cells, renditions, wrap flags, cursor, pen, modes, titles.
    #[test]
    fn server_diff_rebuilds_the_new_state(sz in size(), a in stream(), b in stream(), resize in prop::option::weighted(0.2, size())) {
        let blank = Complete::new(sz.0, sz.1);
        let server_a = server_state(sz, &a);
        let mut server_b = server_a.clone();
        if let Some((c, r)) = resize {
            server_b.resize(c, r).unwrap();
        }
        server_b.feed_host_bytes(&b);
        server_b.set_echo_ack(StateNum(7));

        let mut client_a = blank.clone();
        client_a.apply_events(&server_a.diff_events(&blank)).unwrap();
        check(client_a.framebuffer(), server_a.framebuffer(), "blank -> A")?;

        let mut client_b = client_a.clone();
        client_b.apply_events(&server_b.diff_events(&server_a)).unwrap();
        check(client_b.framebuffer(), server_b.framebuffer(), "A -> B")?;
        prop_assert_eq!(client_b.echo_ack(), StateNum(7));
        let rang = server_b.framebuffer().bell_count() != server_a.framebuffer().bell_count();
        prop_assert_eq!(rang, client_b.framebuffer().bell_count() != client_a.framebuffer().bell_count());

        // No change, no diff.
        prop_assert!(server_b.diff_events(&server_b.clone()).is_empty());
    }

    /// The client-side use: paint A on an unknown terminal, then render A -> B onto it.
    #[test]
    fn rendering_onto_a_terminal_shows_the_new_frame(sz in size(), a in stream(), b in stream()) {
        let fa = server_state(sz, &a).framebuffer().clone();
        let mut sb = server_state(sz, &a);
        sb.feed_host_bytes(&b);
        let fb = sb.framebuffer().clone();
        let r = Renderer::new();
        let mut terminal = Emulator::new(fa.size());
        // A full paint does not resend the clipboard: say the terminal already had it.
        terminal.feed(format!("\x1b]52;c;{}\x07", fa.clipboard()).as_bytes());
        terminal.feed(&r.render(None, &fa));
        check(terminal.framebuffer(), &fa, "full paint")?;
        terminal.feed(&r.render(Some(&fa), &fb));
        check(terminal.framebuffer(), &fb, "update")?;
    }

    /// The page's renderer (relative SGRs, short moves, scrolling in place) on a terminal that
    /// only it writes to: frame after frame, each from whatever the last one left (pen, cursor,
    /// a pending wrap), the terminal shows the wanted frame; and, unless it scrolled, never more
    /// bytes than mosh's choices for the same frames.
    #[test]
    fn in_place_rendering_shows_every_frame(sz in size(), a in stream(), steps in prop::collection::vec(stream(), 1..4)) {
        let mut server = server_state(sz, &a);
        let mut shown = server.framebuffer().clone();
        let r = Renderer::in_place();
        let mut terminal = Emulator::new(shown.size());
        terminal.feed(format!("\x1b]52;c;{}\x07", shown.clipboard()).as_bytes());
        terminal.feed(&r.render(None, &shown));
        check(terminal.framebuffer(), &shown, "full paint")?;
        for (i, step) in steps.iter().enumerate() {
            server.feed_host_bytes(step);
            let wanted = server.framebuffer().clone();
            let bytes = r.render(Some(&shown), &wanted);
            terminal.feed(&bytes);
            check(terminal.framebuffer(), &wanted, &format!("update {i}"))?;
            // Scrolling inside margins (`CSI n S`) costs more than mosh's line feeds; anything
            // else is at most as long.
            let scrolled = bytes.windows(4).any(|w| w == b"S\x1b[r");
            let mosh = Renderer::new().render(Some(&shown), &wanted);
            prop_assert!(scrolled || bytes.len() <= mosh.len(), "{} bytes, mosh's {}", bytes.len(), mosh.len());
            shown = wanted;
        }
    }

    /// Splitting the byte stream anywhere (inside UTF-8 or escape sequences) changes nothing.
    #[test]
    fn chunking_does_not_matter(sz in size(), bytes in stream(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8)) {
        let whole = server_state(sz, &bytes);
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut pieces = Emulator::new(Size { cols: sz.0, rows: sz.1 });
        let mut at = 0;
        for p in points.into_iter().chain([bytes.len()]) {
            pieces.feed(&bytes[at..p]);
            at = p;
        }
        prop_assert_eq!(pieces.framebuffer(), whole.framebuffer());
        prop_assert_eq!(pieces.framebuffer().scroll_region(), whole.framebuffer().scroll_region());
        prop_assert_eq!(pieces.framebuffer().modes(), whole.framebuffer().modes());
    }

    /// Random bytes, in random sizes, with random resizes: no panic, and the screen stays whole.
    #[test]
    fn junk_never_panics(sz in size(), chunks in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..300), prop::option::of(size())), 0..6)) {
        let mut c = Complete::new(sz.0, sz.1);
        let before = c.clone();
        for (bytes, resize) in &chunks {
            let mut events = vec![HostEvent::Bytes(bytes.clone())];
            if let Some((cols, rows)) = resize {
                events.push(HostEvent::Resize { cols: *cols, rows: *rows });
            }
            c.apply_events(&events).unwrap();
            let fb = c.framebuffer();
            prop_assert_eq!(fb.rows().len(), fb.height());
            prop_assert!(fb.rows().iter().all(|r| r.cells().len() == fb.width()));
            prop_assert!(usize::from(fb.cursor().row) < fb.height() && usize::from(fb.cursor().col) < fb.width());
        }
        // Whatever the junk did, the renderer can express it.
        let mut client = before.clone();
        client.apply_events(&c.diff_events(&before)).unwrap();
        check(client.framebuffer(), c.framebuffer(), "junk")?;
    }
}

#[test]
fn oversized_or_empty_resize_is_refused() {
    let mut c = Complete::new(80, 24);
    assert!(c.apply_events(&[HostEvent::Resize { cols: 0, rows: 24 }]).is_err());
    assert!(c.apply_events(&[HostEvent::Resize { cols: 65535, rows: 65535 }]).is_err());
    assert_eq!(c.framebuffer().size(), Size { cols: 80, rows: 24 });
}
