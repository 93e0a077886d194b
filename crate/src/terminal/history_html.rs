//! One scrollback line as HTML for a page's history view: its colours and attributes as spans,
//! search matches as `<mark>`.
//!
//! The line is what [`HistoryLines`](super::HistoryLines) produces: text with SGR sequences. The
//! output, for the page to insert as a line's inner HTML:
//!
//! - text in the default pen is bare; other text is in `<span class=".." style="..">` runs;
//! - palette colours 0..15 are classes `f0`..`f15` (foreground) and `b0`..`b15` (background), so
//!   the page's theme decides them; palette 16..255 (xterm's 6x6x6 cube and grey ramp) and RGB
//!   colours are inline `color:#rrggbb` / `background-color:#rrggbb`;
//! - attributes are classes: `bo` bold, `dm` dim, `it` italic, `ul` underline, `bl` blink, `st`
//!   strikethrough, `hid` invisible, `inv` inverse. An inverse run carries its colours swapped (the
//!   background's as `f..`, the foreground's as `b..`); `inv` is for the page to swap the default
//!   colours, so its CSS rule must come before the colour classes;
//! - a mark is `<mark>` (`<mark class="current">` for the current one), and spans are split at its
//!   edges so that the tags nest.
//!
//! Any input gives well-nested HTML whose text is exactly [`plain`](super::plain)`(line)`: other
//! escape sequences are dropped as `plain` drops them, and unknown SGR parameters are ignored.

use std::fmt::Write;

use super::cell::Color;

/// `line` as HTML. `marks` are char ranges `[start, end)` of [`plain`](super::plain)`(line)` to
/// wrap in `<mark>`, in order and not overlapping, as
/// [`SearchQuery::find`](super::SearchQuery::find) returns them (others do no harm: a range that
/// overlaps an earlier one is cut to what follows it, one inside an earlier one is dropped).
/// `current` is the index in `marks` of the one to give class `current`.
pub fn line_html(line: &str, marks: &[(usize, usize)], current: Option<usize>) -> String {
    let mut w = Writer::new(line.len(), marks, current);
    let mut pen = Pen::default();
    let mut chars = line.chars();
    // The same walk as `plain`, so that mark offsets and the text agree.
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            w.put(c, pen);
            continue;
        }
        // ESC and the character after it are dropped; a CSI runs to its final byte.
        if chars.next() != Some('[') {
            continue;
        }
        let rest = chars.as_str();
        let Some((at, end)) = rest.char_indices().find(|&(_, c)| ('\x40'..='\x7e').contains(&c))
        else {
            break;
        };
        if end == 'm' {
            pen.apply_sgr(&rest[..at]);
        }
        chars = rest[at + 1..].chars();
    }
    w.finish()
}

/// The image markers (docs/IMAGES.md, `images::marker`) in a history line: (character offset in
/// the line without its escapes, as [`plain`](super::plain) counts, image id), left to right.
pub fn line_image_markers(line: &str) -> Vec<(usize, u64)> {
    let mut pen = Pen::default();
    let mut chars = line.chars();
    // (offset, char, foreground) of each character, as `line_html` walks them.
    let mut cells: Vec<(char, Color)> = Vec::new();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            cells.push((c, pen.fg));
            continue;
        }
        if chars.next() != Some('[') {
            continue;
        }
        let rest = chars.as_str();
        let Some((at, end)) = rest.char_indices().find(|&(_, c)| ('\x40'..='\x7e').contains(&c))
        else {
            break;
        };
        if end == 'm' {
            pen.apply_sgr(&rest[..at]);
        }
        chars = rest[at + 1..].chars();
    }
    let (mr, mg, mb) = crate::images::marker::MAGIC;
    let mut found = Vec::new();
    for (i, pair) in cells.windows(2).enumerate() {
        if let [(' ', Color::Rgb(r, g, b)), (' ', Color::Rgb(x, y, z))] = pair
            && (*r, *g, *b) == (mr, mg, mb)
        {
            let id = u64::from(*x) << 16 | u64::from(*y) << 8 | u64::from(*z);
            if id != 0 {
                found.push((i, id));
            }
        }
    }
    found
}

/// Attribute bits of a [`Pen`], with their classes in the order they are written.
const BOLD: u8 = 1;
const DIM: u8 = 1 << 1;
const ITALIC: u8 = 1 << 2;
const UNDERLINE: u8 = 1 << 3;
const BLINK: u8 = 1 << 4;
const STRIKE: u8 = 1 << 5;
const INVISIBLE: u8 = 1 << 6;
const INVERSE: u8 = 1 << 7;
const CLASSES: [(u8, &str); 8] = [
    (BOLD, "bo"),
    (DIM, "dm"),
    (ITALIC, "it"),
    (UNDERLINE, "ul"),
    (BLINK, "bl"),
    (STRIKE, "st"),
    (INVISIBLE, "hid"),
    (INVERSE, "inv"),
];

/// The style SGR sequences set: more than mosh keeps ([`Renditions`](super::Renditions) has no
/// dim or strikethrough), since a line may come from elsewhere.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Pen {
    fg: Color,
    bg: Color,
    attrs: u8,
}

impl Pen {
    /// Applies the parameters of one `CSI .. m`. Only plain `;`-separated numbers are understood
    /// (what [`Renditions::write_sgr`](super::Renditions::write_sgr) writes, and xterm's common
    /// forms); a sequence with anything else (`:` sub-parameters, private markers) is ignored
    /// whole.
    fn apply_sgr(&mut self, params: &str) {
        if !params.bytes().all(|b| b.is_ascii_digit() || b == b';') {
            return;
        }
        let mut numbers = params.split(';').map(|p| {
            // Empty means 0; huge numbers saturate (they are unknown codes anyway).
            p.bytes().fold(0u32, |n, d| n.saturating_mul(10).saturating_add(u32::from(d - b'0')))
        });
        while let Some(n) = numbers.next() {
            match n {
                0 => *self = Pen::default(),
                1 => self.attrs |= BOLD,
                2 => self.attrs |= DIM,
                3 => self.attrs |= ITALIC,
                4 => self.attrs |= UNDERLINE,
                5 | 6 => self.attrs |= BLINK,
                7 => self.attrs |= INVERSE,
                8 => self.attrs |= INVISIBLE,
                9 => self.attrs |= STRIKE,
                22 => self.attrs &= !(BOLD | DIM),
                23 => self.attrs &= !ITALIC,
                24 => self.attrs &= !UNDERLINE,
                25 => self.attrs &= !BLINK,
                27 => self.attrs &= !INVERSE,
                28 => self.attrs &= !INVISIBLE,
                29 => self.attrs &= !STRIKE,
                30..=37 => self.fg = Color::Palette((n - 30) as u8),
                40..=47 => self.bg = Color::Palette((n - 40) as u8),
                90..=97 => self.fg = Color::Palette((n - 90 + 8) as u8),
                100..=107 => self.bg = Color::Palette((n - 100 + 8) as u8),
                39 => self.fg = Color::Default,
                49 => self.bg = Color::Default,
                38 | 48 => {
                    let Some(color) = extended_color(&mut numbers) else {
                        // Malformed: what follows cannot be told apart from colour values.
                        return;
                    };
                    if n == 38 {
                        self.fg = color;
                    } else {
                        self.bg = color;
                    }
                }
                _ => {}
            }
        }
    }

    /// The opening tag of a run in this pen (not the default pen, which has no span).
    fn write_open(&self, out: &mut String) {
        let (fg, bg) =
            if self.attrs & INVERSE != 0 { (self.bg, self.fg) } else { (self.fg, self.bg) };
        let mut classes = Vec::with_capacity(4);
        let mut style = String::new();
        // Writing into a String cannot fail.
        for (color, class, property) in [(fg, 'f', "color"), (bg, 'b', "background-color")] {
            let (red, green, blue) = match color {
                Color::Default => continue,
                Color::Palette(n) if n < 16 => {
                    classes.push(format!("{class}{n}"));
                    continue;
                }
                Color::Palette(n) => xterm_rgb(n),
                Color::Rgb(r, g, b) => (r, g, b),
            };
            // A CSS colour (#rrggbb), the one hex form that is not a digest.
            let _ = write!(style, "{property}:#{red:02x}{green:02x}{blue:02x};");
        }
        classes.extend(
            CLASSES.iter().filter(|(bit, _)| self.attrs & bit != 0).map(|(_, c)| (*c).to_owned()),
        );
        out.push_str("<span");
        if !classes.is_empty() {
            let _ = write!(out, " class=\"{}\"", classes.join(" "));
        }
        if !style.is_empty() {
            let _ = write!(out, " style=\"{}\"", style.trim_end_matches(';'));
        }
        out.push('>');
    }
}

/// The colour after `38` or `48`: `5;N` or `2;R;G;B`. `None` when malformed or out of range.
fn extended_color(numbers: &mut impl Iterator<Item = u32>) -> Option<Color> {
    let kind = numbers.next()?;
    let mut byte = || numbers.next().and_then(|n| u8::try_from(n).ok());
    match kind {
        5 => byte().map(Color::Palette),
        2 => Some(Color::Rgb(byte()?, byte()?, byte()?)),
        _ => None,
    }
}

/// Palette entries 16..=255 as xterm defines them: a 6x6x6 colour cube, then 24 greys.
fn xterm_rgb(n: u8) -> (u8, u8, u8) {
    if n >= 232 {
        let grey = 8 + 10 * (n - 232);
        return (grey, grey, grey);
    }
    let i = n.saturating_sub(16);
    let level = |v: u8| if v == 0 { 0 } else { 55 + 40 * v };
    (level(i / 36), level(i / 6 % 6), level(i % 6))
}

/// Writes text runs, opening and closing spans and marks as the pen and position change.
struct Writer<'a> {
    out: String,
    /// Chars of plain text written so far.
    pos: usize,
    marks: &'a [(usize, usize)],
    current: Option<usize>,
    /// The mark open or next to open.
    next_mark: usize,
    /// The end of the open mark.
    mark_end: Option<usize>,
    /// The pen of the open span; the default pen has none.
    span: Pen,
}

impl<'a> Writer<'a> {
    fn new(len: usize, marks: &'a [(usize, usize)], current: Option<usize>) -> Self {
        Writer {
            out: String::with_capacity(len + len / 2),
            pos: 0,
            marks,
            current,
            next_mark: 0,
            mark_end: None,
            span: Pen::default(),
        }
    }

    fn put(&mut self, c: char, pen: Pen) {
        self.mark_edges();
        if pen != self.span {
            self.close_span();
            if pen != Pen::default() {
                pen.write_open(&mut self.out);
            }
            self.span = pen;
        }
        match c {
            '&' => self.out.push_str("&amp;"),
            '<' => self.out.push_str("&lt;"),
            '>' => self.out.push_str("&gt;"),
            '"' => self.out.push_str("&quot;"),
            '\'' => self.out.push_str("&#39;"),
            c => self.out.push(c),
        }
        self.pos += 1;
    }

    /// Closes the mark that ends at `pos` and opens the one that starts there.
    fn mark_edges(&mut self) {
        if self.mark_end.is_some_and(|end| end <= self.pos) {
            self.close_span();
            self.out.push_str("</mark>");
            self.mark_end = None;
            self.next_mark += 1;
        }
        if self.mark_end.is_some() {
            return;
        }
        // Skip empty marks and those ending before `pos` (out of order, or inside the last one).
        while let Some(&(start, end)) = self.marks.get(self.next_mark) {
            if end > start && end > self.pos {
                break;
            }
            self.next_mark += 1;
        }
        if let Some(&(start, end)) = self.marks.get(self.next_mark)
            && start <= self.pos
        {
            self.close_span();
            if self.current == Some(self.next_mark) {
                self.out.push_str("<mark class=\"current\">");
            } else {
                self.out.push_str("<mark>");
            }
            self.mark_end = Some(end);
        }
    }

    fn close_span(&mut self) {
        if self.span != Pen::default() {
            self.out.push_str("</span>");
            self.span = Pen::default();
        }
    }

    fn finish(mut self) -> String {
        self.close_span();
        if self.mark_end.is_some() {
            self.out.push_str("</mark>");
        }
        self.out
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn image_markers_are_found_in_a_history_line() {
        use crate::terminal::{Emulator, HistoryLines, Renditions, Size};
        let mut e = Emulator::new(Size { cols: 20, rows: 2 });
        e.keep_scrolled_off(true);
        let mut bytes = b"ab\x1b[31m".to_vec();
        let pen = Renditions { fg: Color::Palette(1), ..Renditions::DEFAULT };
        bytes.extend(crate::images::marker::marker_bytes(0x0a0b0c, pen, 2, 20));
        bytes.extend(b"\x1b[0m\r\n\r\n\r\n");
        e.feed(&bytes);
        let lines = HistoryLines::new().push_rows(&e.take_scrolled_off());
        let line = &lines[0];
        assert_eq!(line_image_markers(line), vec![(2, 0x0a0b0c)]);
        assert!(line_image_markers("plain text").is_empty());
    }

    use super::*;
    use crate::terminal::{Attrs, Emulator, HistoryLines, Renditions, SearchQuery, Size, plain};
    use proptest::prelude::*;

    /// The history lines a terminal keeps after printing `output` (and scrolling it all off).
    fn history_of(output: &str) -> Vec<String> {
        let mut e = Emulator::new(Size { cols: 80, rows: 3 });
        e.keep_scrolled_off(true);
        e.feed(output.as_bytes());
        e.feed(b"\r\n\r\n\r\n");
        HistoryLines::new().push_rows(&e.take_scrolled_off())
    }

    /// The text a browser shows for `html`: tags dropped, entities decoded.
    fn text_of(html: &str) -> String {
        let mut text = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    /// Checks that every closing tag closes the innermost open one, and all are closed.
    fn assert_nested(html: &str) {
        let mut open = Vec::new();
        for tag in html.split('<').skip(1) {
            let name: String =
                tag.chars().take_while(|c| c.is_ascii_alphabetic() || *c == '/').collect();
            match name.strip_prefix('/') {
                Some(closing) => assert_eq!(open.pop().as_deref(), Some(closing), "{html}"),
                None => open.push(name),
            }
        }
        assert!(open.is_empty(), "unclosed {open:?} in {html}");
    }

    #[test]
    fn default_text_is_bare_and_escaped() {
        assert_eq!(
            line_html(r#"<a href='x'>&"</a>"#, &[], None),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        assert_eq!(line_html("", &[], None), "");
    }

    #[test]
    fn colours_from_the_emulator_become_classes_and_inline_styles() {
        let lines = history_of(
            "\x1b[31mred\x1b[0m \x1b[38;5;200mpink\x1b[0m \x1b[38;2;1;2;3mrgb\x1b[0m \
             \x1b[44;97mon blue\x1b[0m \x1b[48;5;240mgrey\x1b[m \x1b[48;5;16mblack\x1b[m",
        );
        assert_eq!(
            line_html(&lines[0], &[], None),
            "<span class=\"f1\">red</span> <span style=\"color:#ff00d7\">pink</span> \
             <span style=\"color:#010203\">rgb</span> <span class=\"f15 b4\">on blue</span> \
             <span style=\"background-color:#585858\">grey</span> \
             <span style=\"background-color:#000000\">black</span>"
        );
    }

    #[test]
    fn attributes_become_classes() {
        let lines = history_of(
            "\x1b[1;3;4mbiu\x1b[22;5mblink\x1b[0m \x1b[8msecret\x1b[0m \x1b[1;2;9mx\x1b[0m",
        );
        // mosh keeps no dim or strikethrough; a line from elsewhere may have them.
        assert_eq!(
            line_html(&lines[0], &[], None),
            "<span class=\"bo it ul\">biu</span><span class=\"it ul bl\">blink</span> \
             <span class=\"hid\">secret</span> <span class=\"bo\">x</span>"
        );
        assert_eq!(line_html("\x1b[2;9mx\x1b[0m", &[], None), "<span class=\"dm st\">x</span>");
    }

    #[test]
    fn inverse_swaps_known_colours_and_leaves_the_defaults_to_the_page() {
        let lines = history_of(
            "\x1b[7mrev\x1b[0m \x1b[7;31mred\x1b[0m \x1b[7;31;42mboth\x1b[0m \
             \x1b[7;38;2;1;2;3mrgb\x1b[0m",
        );
        assert_eq!(
            line_html(&lines[0], &[], None),
            "<span class=\"inv\">rev</span> <span class=\"b1 inv\">red</span> \
             <span class=\"f2 b1 inv\">both</span> \
             <span class=\"inv\" style=\"background-color:#010203\">rgb</span>"
        );
    }

    #[test]
    fn every_pen_mosh_writes_reads_back_as_written() {
        let colors = [Color::Default, Color::Palette(3), Color::Palette(12), Color::Rgb(9, 8, 7)];
        for bits in 0..64 {
            for fg in colors {
                for bg in colors {
                    let r = Renditions { attrs: Attrs::from_bits_truncate(bits), fg, bg };
                    let mut sgr = Vec::new();
                    r.write_sgr(&mut sgr);
                    let mut pen = Pen::default();
                    pen.apply_sgr(std::str::from_utf8(&sgr[2..sgr.len() - 1]).unwrap());
                    let attrs = [
                        (Attrs::BOLD, BOLD),
                        (Attrs::ITALIC, ITALIC),
                        (Attrs::UNDERLINE, UNDERLINE),
                        (Attrs::BLINK, BLINK),
                        (Attrs::INVERSE, INVERSE),
                        (Attrs::INVISIBLE, INVISIBLE),
                    ]
                    .iter()
                    .filter(|(a, _)| r.attrs.contains(*a))
                    .fold(0, |acc, (_, bit)| acc | bit);
                    assert_eq!(pen, Pen { fg, bg, attrs }, "{r:?}");
                }
            }
        }
    }

    #[test]
    fn xterm_palette_cube_and_greys() {
        assert_eq!(xterm_rgb(16), (0, 0, 0));
        assert_eq!(xterm_rgb(21), (0, 0, 255));
        assert_eq!(xterm_rgb(196), (255, 0, 0));
        assert_eq!(xterm_rgb(231), (255, 255, 255));
        assert_eq!(xterm_rgb(232), (8, 8, 8));
        assert_eq!(xterm_rgb(255), (238, 238, 238));
    }

    #[test]
    fn marks_split_styled_runs_so_tags_nest() {
        let line = "\x1b[0;31mabc\x1b[0mdef";
        assert_eq!(
            line_html(line, &[(2, 4)], None),
            "<span class=\"f1\">ab</span><mark><span class=\"f1\">c</span>d</mark>ef"
        );
        assert_eq!(
            line_html(line, &[(0, 1), (1, 2), (4, 6)], Some(1)),
            "<mark><span class=\"f1\">a</span></mark><mark class=\"current\"><span class=\"f1\">b\
             </span></mark><span class=\"f1\">c</span>d<mark>ef</mark>"
        );
    }

    #[test]
    fn odd_marks_never_break_the_html() {
        let line = "\x1b[0;1mab\x1b[0mcd";
        // Past the end, empty, overlapping, out of order.
        for marks in [&[(3, 99)][..], &[(1, 1)], &[(0, 3), (1, 4)], &[(2, 3), (0, 1)], &[(9, 10)]] {
            let html = line_html(line, marks, Some(0));
            assert_eq!(text_of(&html), "abcd", "{marks:?}");
            assert_nested(&html);
        }
        assert_eq!(
            line_html(line, &[(3, 99)], None),
            "<span class=\"bo\">ab</span>c<mark>d</mark>"
        );
        assert_eq!(
            line_html(line, &[(0, 3), (1, 4)], None),
            "<mark><span class=\"bo\">ab</span>c</mark><mark>d</mark>"
        );
    }

    #[test]
    fn search_matches_mark_what_they_matched_in_a_wide_and_accented_line() {
        let lines = history_of("\x1b[32mété\x1b[0m 中文 \x1b[1mÉté\x1b[0m");
        let text = plain(&lines[0]);
        let marks = SearchQuery::new("été", false, false).unwrap().find(&text);
        let html = line_html(&lines[0], &marks, Some(1));
        assert_eq!(
            html,
            "<mark><span class=\"f2\">été</span></mark> 中文 \
             <mark class=\"current\"><span class=\"bo\">Été</span></mark>"
        );
    }

    #[test]
    fn unknown_escapes_are_dropped_not_shown() {
        // As `plain` does: a non-CSI escape drops ESC and one character (`B` of `ESC ( B` stays).
        assert_eq!(line_html("a\x1b[2Jb\x1b[?25lc\x1b[4:3md\x1b(Be\x1b", &[], None), "abcdBe");
        assert_eq!(line_html("a\x1b[38;5mb\x1b[38;2;1;2mc\x1b[38;9;1md", &[], None), "abcd");
        assert_eq!(line_html("a\x1b[999999999999;31mb", &[], None), "a<span class=\"f1\">b</span>");
        assert_eq!(line_html("a\x1b[38;5;300;1mb", &[], None), "ab");
        assert_eq!(line_html("a\x1b[31", &[], None), "a");
    }

    proptest! {
        #[test]
        fn any_line_gives_nested_html_whose_text_is_the_plain_line(
            line in "(\x1b|\\[|[0-9]{1,3}|;|:|m|[<>&\"'a é中]|\\PC){0,40}",
            marks in prop::collection::vec((0usize..30, 0usize..30), 0..5),
            current in prop::option::of(0usize..5),
        ) {
            let html = line_html(&line, &marks, current);
            prop_assert_eq!(text_of(&html), plain(&line));
            assert_nested(&html);
        }
    }
}
