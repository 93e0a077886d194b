//! The history's pieces that read untrusted text, without I/O: the recorder's `HistoryLines`
//! (rows scrolled off an emulator into lines with SGR), `plain`, the search (`SearchQuery`, as
//! the relay runs it over its history file), and `line_html` (as the page renders a line).
//! The relay's history files hold such lines; reading them back is line splitting plus these.
//!
//! Input: `cols rows flags plen` then `plen` bytes of search pattern, then the byte stream.
//! The stream is fed to a recording emulator; every line it scrolls off, and every line of the
//! stream itself (a hostile history file), is made plain, searched and rendered as HTML.
//!
//! Invariants: no panic; matches are ordered, non-empty and inside the plain text; the HTML is
//! well nested (span and mark) and its text, unescaped, is exactly the plain text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::terminal::{Emulator, HistoryLines, SearchQuery, Size, line_html, plain};
use tern_fuzz::{Reader, size};

/// The text of `html` (tags dropped, entities unescaped), checking that tags nest.
fn html_text(html: &str) -> String {
    let mut text = String::new();
    let mut open: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            let end = rest.find('>').expect("a tag ends");
            let tag = &rest[1..end];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop().as_deref(), Some(name), "tags nest in {html:?}");
            } else {
                let name = tag.split(' ').next().unwrap_or_default();
                assert!(name == "span" || name == "mark", "tag {name:?}");
                open.push(name.to_owned());
            }
            rest = &rest[end + 1..];
        } else if c == '&' {
            let end = rest.find(';').expect("an entity ends");
            text.push(match &rest[..=end] {
                "&amp;" => '&',
                "&lt;" => '<',
                "&gt;" => '>',
                "&quot;" => '"',
                "&#39;" => '\'',
                other => panic!("entity {other:?}"),
            });
            rest = &rest[end + 1..];
        } else {
            assert!(c != '>', "a bare > in {html:?}");
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    assert!(open.is_empty(), "unclosed {open:?} in {html:?}");
    text
}

fn check_line(line: &str, query: Option<&SearchQuery>) {
    let text = plain(line);
    let chars = text.chars().count();
    let marks = query.map(|q| q.find(&text)).unwrap_or_default();
    let mut last = 0;
    for &(start, end) in &marks {
        assert!(last <= start && start < end && end <= chars, "mark {start}..{end} of {chars}");
        last = end;
    }
    if let Some(q) = query {
        assert_eq!(q.is_match(&text), !marks.is_empty());
    }
    let current = (!marks.is_empty()).then_some(marks.len() / 2);
    assert_eq!(html_text(&line_html(line, &marks, current)), text, "html of {line:?}");
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader(data);
    let (cols, rows) = size(r.u8(), r.u8());
    let flags = r.u8();
    let pattern = String::from_utf8_lossy(r.short()).into_owned();
    let stream = r.rest();
    let query = SearchQuery::new(&pattern, flags & 1 != 0, flags & 2 != 0).ok();

    let mut emulator = Emulator::new(Size { cols, rows });
    emulator.keep_scrolled_off(true);
    let mut history = HistoryLines::new();
    for chunk in stream.chunks(usize::from(flags >> 2) + 1) {
        emulator.feed(chunk);
        for line in history.push_rows(&emulator.take_scrolled_off()) {
            check_line(&line, query.as_ref());
        }
    }
    for line in String::from_utf8_lossy(stream).split('\n') {
        check_line(line, query.as_ref());
    }
});
