//! Unit tests of mosh's emulator semantics (MOSH-PROTOCOL.md 8.3, 8.4), one tricky rule each.

use tern::terminal::{
    Attrs, Color, Complete, Emulator, MouseEncoding, MouseReporting, Notification, Pos, Renderer,
    Size, overlay_notification, screen_text,
};

fn emu(cols: u16, rows: u16, bytes: &str) -> Emulator {
    let mut e = Emulator::new(Size { cols, rows });
    e.feed(bytes.as_bytes());
    e
}

fn text(e: &Emulator) -> Vec<String> {
    screen_text(e.framebuffer()).rows
}

fn cursor(e: &Emulator) -> (u16, u16) {
    let Pos { row, col } = e.framebuffer().cursor();
    (row, col)
}

fn cell(e: &Emulator, row: u16, col: u16) -> tern::terminal::Cell {
    *e.framebuffer().cell(Pos { row, col }).expect("cell")
}

#[test]
fn deferred_wrap_keeps_cursor_on_last_column_until_the_next_print() {
    let e = emu(5, 3, "abcde");
    assert_eq!(cursor(&e), (0, 4));
    assert!(e.framebuffer().wrap_pending());
    assert!(!e.framebuffer().row(0).unwrap().is_wrapped());
    let mut e = e;
    e.feed(b"f");
    assert_eq!(text(&e), ["abcde", "f", ""]);
    assert!(e.framebuffer().row(0).unwrap().is_wrapped());
    assert_eq!(cursor(&e), (1, 1));
}

#[test]
fn cr_and_cursor_moves_cancel_the_pending_wrap_but_sgr_does_not() {
    let e = emu(5, 3, "abcde\x1b[1mf");
    assert_eq!(text(&e), ["abcde", "f", ""]);
    let e = emu(5, 3, "abcde\rX");
    assert_eq!(text(&e), ["Xbcde", "", ""]);
    let e = emu(5, 3, "abcde\x1b[1;5HX");
    assert_eq!(text(&e), ["abcdX", "", ""]);
}

#[test]
fn backspace_from_pending_wrap_counts_from_the_last_column() {
    // MOSH-PROTOCOL.md 8.4: mosh-client (and xterm) land on width - 2; we match mosh-client.
    let e = emu(80, 24, &format!("\x1b[24;1H{}\x08\x08\x08", "0".repeat(80)));
    assert_eq!(cursor(&e), (23, 76));
    let e = emu(10, 2, "0123456789\x08");
    assert_eq!(cursor(&e), (0, 8));
}

#[test]
fn erase_keeps_only_the_background_colour() {
    let e = emu(10, 2, "\x1b[1;4;31;42mabcdef\x1b[1;3H\x1b[K");
    let erased = cell(&e, 0, 5);
    assert!(erased.is_empty());
    assert_eq!(erased.renditions.bg, Color::Palette(2));
    assert_eq!(erased.renditions.fg, Color::Default);
    assert!(erased.renditions.attrs.is_empty());
    let kept = cell(&e, 0, 1);
    assert!(kept.renditions.attrs.contains(Attrs::BOLD | Attrs::UNDERLINE));
    // ECH and ED too; explicit spaces keep the whole pen.
    let e = emu(10, 2, "\x1b[7;44mabcdef\x1b[1;2H\x1b[2X \x1b[2;1H\x1b[J");
    assert!(
        cell(&e, 0, 1).text() == " " && cell(&e, 0, 1).renditions.attrs.contains(Attrs::INVERSE)
    );
    assert!(cell(&e, 0, 2).is_empty() && cell(&e, 0, 2).renditions.attrs.is_empty());
    assert_eq!(cell(&e, 1, 9).renditions.bg, Color::Palette(4));
    assert_eq!(text(&e)[0], "a  def");
}

#[test]
fn scrolled_in_lines_take_the_current_background() {
    let e = emu(4, 2, "a\r\nb\x1b[45m\n");
    assert_eq!(text(&e), ["b", ""]);
    assert_eq!(cell(&e, 1, 3).renditions.bg, Color::Palette(5));
}

#[test]
fn wide_character_in_the_last_column_wraps_early_without_marking() {
    let e = emu(5, 3, "abcd日");
    assert_eq!(text(&e), ["abcd", "日", ""]);
    assert!(!e.framebuffer().row(0).unwrap().is_wrapped());
    assert!(cell(&e, 1, 0).is_wide());
    assert_eq!(cursor(&e), (1, 2));
    // A wide character blanks the cell to its right.
    let e = emu(5, 1, "abc\x1b[1;2H日");
    assert_eq!(text(&e), ["a日"]);
    assert!(cell(&e, 0, 2).is_empty());
}

#[test]
fn combining_marks_join_the_previous_cell_or_start_a_fallback_cell() {
    let e = emu(10, 2, "e\u{301}x");
    assert_eq!(cell(&e, 0, 0).text(), "e\u{301}");
    assert_eq!(cursor(&e), (0, 2));
    // After a cursor move the mark lands on the cell under the cursor; on an empty one it is a
    // fallback cell (drawn after U+00A0) and the cursor advances.
    let e = emu(10, 2, "\x1b[1;5H\u{301}");
    assert!(cell(&e, 0, 4).is_fallback());
    assert_eq!(cursor(&e), (0, 5));
    let mut bytes = Vec::new();
    cell(&e, 0, 4).write_grapheme(&mut bytes);
    assert_eq!(bytes, "\u{a0}\u{301}".as_bytes());
    // At most 32 bytes per cell.
    let e = emu(10, 2, &format!("a{}", "\u{301}".repeat(40)));
    assert!(cell(&e, 0, 0).text().len() <= 34);
    assert_eq!(cursor(&e), (0, 1));
}

#[test]
fn scroll_region_scrolls_only_inside() {
    let e = emu(3, 5, "1\r\n2\r\n3\r\n4\r\n5\x1b[2;4r\x1b[4;1H\n\n");
    assert_eq!(text(&e), ["1", "4", "", "", "5"]);
    // Outside the region LF at the bottom does not scroll.
    let e = emu(3, 5, "1\x1b[1;3r\x1b[5;1H\n\nx");
    assert_eq!(text(&e), ["1", "", "", "", "x"]);
    // Invalid regions (bottom <= top) are ignored; DECSTBM homes the cursor; RI at the top
    // margin scrolls the region down.
    let e = emu(3, 3, "a\r\nb\x1b[3;2r\x1b[2;2r");
    assert_eq!((e.framebuffer().scroll_region(), cursor(&e)), ((0, 2), (1, 1)));
    let e = emu(3, 3, "a\r\nb\x1b[2;3r\x1b[2;1H\x1bMx");
    assert_eq!(text(&e), ["a", "x", "b"]);
    assert_eq!(e.framebuffer().scroll_region(), (1, 2));
}

#[test]
fn insert_delete_lines_and_characters() {
    let e = emu(5, 4, "a\r\nb\r\nc\r\nd\x1b[2;3H\x1b[L");
    assert_eq!(text(&e), ["a", "", "b", "c"]);
    assert_eq!(cursor(&e), (1, 0));
    let e = emu(5, 4, "a\r\nb\r\nc\r\nd\x1b[2;1H\x1b[2M");
    assert_eq!(text(&e), ["a", "d", "", ""]);
    let e = emu(6, 1, "abcdef\x1b[1;2H\x1b[2@");
    assert_eq!(text(&e), ["a  bcd"]);
    let e = emu(6, 1, "abcdef\x1b[1;2H\x1b[2P");
    assert_eq!(text(&e), ["adef"]);
    // SU (`S`) moves text up, SD (`T`) down.
    let e = emu(2, 3, "a\r\nb\r\nc\x1b[S");
    assert_eq!(text(&e), ["b", "c", ""]);
    let e = emu(2, 3, "a\r\nb\r\nc\x1b[T");
    assert_eq!(text(&e), ["", "a", "b"]);
}

#[test]
fn sgr_forms() {
    let pen = |s: &str| emu(4, 1, s).framebuffer().pen();
    let p = pen("\x1b[1;3;4;5;7;8;31;42m");
    assert_eq!((p.fg, p.bg), (Color::Palette(1), Color::Palette(2)));
    assert!(p.attrs.contains(
        Attrs::BOLD
            | Attrs::ITALIC
            | Attrs::UNDERLINE
            | Attrs::BLINK
            | Attrs::INVERSE
            | Attrs::INVISIBLE
    ));
    assert_eq!(pen("\x1b[91;102m").fg, Color::Palette(9));
    assert_eq!(pen("\x1b[91;102m").bg, Color::Palette(10));
    assert_eq!(pen("\x1b[38;5;0m").fg, Color::Palette(0), "38;5;0 is palette 0, not a reset");
    assert_eq!(pen("\x1b[38;5;200;48;2;1;2;3m").bg, Color::Rgb(1, 2, 3));
    assert_eq!(pen("\x1b[38;5;200m").fg, Color::Palette(200));
    assert_eq!(pen("\x1b[1;31m\x1b[m").fg, Color::Default);
    assert_eq!(pen("\x1b[1;31m\x1b[22;39m").attrs, Attrs::NONE);
    // `38;5` without its argument: 38 is ignored and 5 means blink (mosh's loop).
    assert!(pen("\x1b[38;5m").attrs.contains(Attrs::BLINK));
    // Faint is not kept by mosh 1.4.0; an empty field means 0 (reset).
    assert_eq!(pen("\x1b[2m").attrs, Attrs::NONE);
    assert_eq!(pen("\x1b[1;;4m").attrs, Attrs::UNDERLINE);
    // The renderer's absolute SGR.
    let mut out = Vec::new();
    pen("\x1b[1;4;38;5;3;48;5;100m").write_sgr(&mut out);
    assert_eq!(out, b"\x1b[0;1;4;33;48;5;100m");
    let mut out = Vec::new();
    pen("\x1b[7;38;2;10;20;30;41m").write_sgr(&mut out);
    assert_eq!(out, b"\x1b[0;7;38;2;10;20;30;41m");
}

#[test]
fn tabs_and_cursor_movement() {
    let e = emu(20, 2, "\tx\x1b[3g\x1b[1;5H\x1bH\r\ty\x1b[1;20H\x1b[Z\x1b[Zz");
    // TBC 3 cleared every stop, HTS set one at column 4; CBT finds none left of it: column 0.
    assert_eq!(text(&e)[0], "z   y   x");
    let e = emu(10, 5, "\x1b[3;4H\x1b[A\x1b[2C\x1b[B\x1b[D\x1b[G\x1b[5d\x1b[3`");
    assert_eq!(cursor(&e), (4, 2));
    let e = emu(10, 5, "\x1b[99;99H");
    assert_eq!(cursor(&e), (4, 9));
    let e = emu(10, 5, "\x1b[3;3H\x1b7\x1b[31m\x1b[1;1H\x1b8");
    assert_eq!(cursor(&e), (2, 2));
    assert_eq!(e.framebuffer().pen().fg, Color::Default);
    let e = emu(10, 5, "ab\x1bEc\x1bDd");
    assert_eq!(text(&e)[..3], ["ab", "c", " d"]);
}

#[test]
fn modes_that_mosh_synchronizes() {
    let e = emu(10, 2, "\x1b[?5h\x1b[?2004h\x1b[?1002h\x1b[?1006h\x1b[?1004h\x1b[?25l\x1b[?1h");
    let fb = e.framebuffer();
    assert!(
        fb.reverse_video() && fb.bracketed_paste() && fb.focus_events() && !fb.cursor_visible()
    );
    assert_eq!(fb.mouse_reporting(), MouseReporting::ButtonEvent);
    assert_eq!(fb.mouse_encoding(), MouseEncoding::Sgr);
    assert!(fb.modes().application_cursor_keys);
    let e = emu(10, 2, "\x1b[?1002h\x1b[?1000l\x1b[?1015h\x1b[?1005l");
    assert_eq!(e.framebuffer().mouse_reporting(), MouseReporting::None);
    assert_eq!(e.framebuffer().mouse_encoding(), MouseEncoding::Default);
    // No alternate screen in mosh: 1049 is ignored.
    let e = emu(10, 2, "abc\x1b[?1049hxyz");
    assert_eq!(text(&e)[0], "abcxyz");
}

#[test]
fn osc_titles_clipboard_and_termination() {
    let e = emu(10, 2, "\x1b]0;hello\x07");
    assert_eq!((e.framebuffer().title(), e.framebuffer().icon_name()), ("hello", "hello"));
    let e = emu(10, 2, "\x1b]1;icon\x1b\\\x1b]2;win\u{9c}");
    assert_eq!((e.framebuffer().title(), e.framebuffer().icon_name()), ("win", "icon"));
    // CAN ends and dispatches the OSC too; `;x` means 0.
    let e = emu(10, 2, "\x1b];t\x18");
    assert_eq!(e.framebuffer().title(), "t");
    let e = emu(10, 2, "\x1b]52;c;aGk=\x07");
    assert_eq!(e.framebuffer().clipboard(), "aGk=");
    // Titles keep 256 characters counted with the "0;" prefix.
    let e = emu(10, 2, &format!("\x1b]0;{}\x07", "x".repeat(400)));
    assert_eq!(e.framebuffer().title().len(), 254);
    // BEL rings (counts); outside an OSC it is not printed.
    let e = emu(10, 2, "a\x07\x07b");
    assert_eq!(e.framebuffer().bell_count(), 2);
    assert_eq!(text(&e)[0], "ab");
}

#[test]
fn invalid_utf8_becomes_replacement_characters() {
    let e = emu(20, 1, "a");
    let mut e = e;
    e.feed(b"\xc3(\xe0\x80\x80\xf4\x90\x80\x80z");
    assert_eq!(text(&e)[0], "a\u{fffd}(\u{fffd}\u{fffd}\u{fffd}z");
}

#[test]
fn queries_get_no_answer_and_unknown_sequences_are_ignored() {
    let e = emu(10, 2, "a\x1b[6n\x1b[c\x1b[>c\x1bP1$r\x1b\\\x1b[?123;456zb\x1b_apc\x1b\\c");
    assert_eq!(text(&e)[0], "abc");
}

#[test]
fn reset_and_decaln() {
    let e = emu(3, 2, "\x1b]0;t\x07\x1b[31mab\x07\x1bc");
    let fb = e.framebuffer();
    assert_eq!(text(&e), ["", ""]);
    assert_eq!((fb.title(), fb.icon_name(), fb.bell_count()), ("", "t", 1));
    let e = emu(3, 2, "\x1b[2;2H\x1b#8");
    assert_eq!(text(&e), ["EEE", "EEE"]);
    assert_eq!(cursor(&e), (1, 1));
}

#[test]
fn resize_keeps_what_fits_and_clears_wrap_flags() {
    let mut c = Complete::new(4, 3);
    c.feed_host_bytes(b"abcdef\x1b[2;2r");
    assert!(c.framebuffer().row(0).unwrap().is_wrapped());
    c.resize(6, 2).unwrap();
    let fb = c.framebuffer();
    assert_eq!(screen_text(fb).rows, ["abcd", "ef"]);
    assert!(!fb.row(0).unwrap().is_wrapped());
    assert_eq!(fb.scroll_region(), (0, 1));
    c.resize(2, 1).unwrap();
    assert_eq!(screen_text(c.framebuffer()).rows, ["ab"]);
    assert_eq!(c.framebuffer().cursor(), Pos { row: 0, col: 1 });
}

#[test]
fn snapshots_share_unchanged_rows() {
    let mut a = Complete::new(80, 24);
    a.feed_host_bytes(b"hello\r\nworld");
    let mut b = a.clone();
    b.feed_host_bytes(b"!");
    let (ra, rb) = (a.framebuffer().rows(), b.framebuffer().rows());
    assert!(std::sync::Arc::ptr_eq(&ra[0], &rb[0]));
    assert!(!std::sync::Arc::ptr_eq(&ra[1], &rb[1]));
    assert_eq!(screen_text(a.framebuffer()).rows[1], "world");
}

#[test]
fn renderer_uses_mosh_forms() {
    let a = emu(80, 24, "").framebuffer().clone();
    // A changed row: cursor hidden, absolute move, text, CR LF, blank runs by ECH and EL.
    let b = emu(80, 24, "x\x1b[1;10Hy\r\nz").framebuffer().clone();
    let out = Renderer::new().render(Some(&a), &b);
    assert_eq!(String::from_utf8_lossy(&out), "x\x1b[?25l\x1b[1;10Hy\r\nz\x1b[?25h");
    // A full screen scroll with the cursor on the last row: CR and LFs.
    let a = emu(5, 3, "1\r\n2\r\n3").framebuffer().clone();
    let b = emu(5, 3, "1\r\n2\r\n3\r\n4").framebuffer().clone();
    let out = Renderer::new().render(Some(&a), &b);
    assert_eq!(String::from_utf8_lossy(&out), "\x1b[0m\r\n4");
    // The bell, title and mode items.
    let b2 = emu(5, 3, "1\r\n2\r\n3\x07\x1b]0;t\x07\x1b[?2004h\x1b[?1000h\x1b[?1006h")
        .framebuffer()
        .clone();
    let out = Renderer::new().render(Some(&a), &b2);
    assert_eq!(String::from_utf8_lossy(&out), "\x07\x1b]0;t\x07\x1b[?2004h\x1b[?1000h\x1b[?1006h");
}

#[test]
fn notification_bar_texts() {
    use std::time::Duration;
    let s = Duration::from_secs;
    let n = |server: u64, reply: u64, message: Option<&str>| {
        Notification {
            since_server_state: s(server),
            since_reply: s(reply),
            message,
            never_heard: false,
        }
        .text()
    };
    assert_eq!(n(1, 1, None), None);
    assert_eq!(n(7, 1, None).unwrap(), "tern: Last contact 7 seconds ago.");
    assert_eq!(n(1, 11, None).unwrap(), "tern: Last reply 11 seconds ago.");
    assert_eq!(n(125, 200, None).unwrap(), "tern: Last contact 2:05 ago.");
    assert_eq!(n(3725, 0, None).unwrap(), "tern: Last contact 1:02:05 ago.");
    assert_eq!(n(0, 0, Some("Exiting...")).unwrap(), "tern: Exiting...");
    assert_eq!(n(8, 0, Some("Exiting...")).unwrap(), "tern: Exiting... (8 s without contact.)");

    let fb = emu(30, 3, "hello\x1b[1;3H").framebuffer().clone();
    let note = Notification {
        since_server_state: s(9),
        since_reply: s(0),
        message: None,
        never_heard: false,
    };
    let shown = overlay_notification(&fb, &note);
    let row = screen_text(&shown).rows[0].clone();
    assert_eq!(row, "tern: Last contact 9 seconds a");
    let first = shown.cell(Pos { row: 0, col: 0 }).unwrap();
    assert!(first.renditions.attrs.contains(Attrs::BOLD));
    assert_eq!((first.renditions.fg, first.renditions.bg), (Color::Palette(7), Color::Palette(4)));
    assert!(!shown.cursor_visible());
    assert!(fb.cursor_visible());
    // Nothing to say: the frame is unchanged.
    assert_eq!(overlay_notification(&fb, &Notification::default()), fb);
}
