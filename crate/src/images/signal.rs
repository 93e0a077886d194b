//! OSC sequences mosh-server 1.4 drops or cuts, lifted by the same scanner as the images
//! ([`super::Lifter`]) so the recorder can hand them to the relay (docs/IMAGES.md, "Clipboard
//! and notifications").
//!
//! Facts from mosh 1.4.0 (`src/terminal/terminaldispatcher.cc`, `terminalfunctions.cc`):
//! - an OSC string is kept up to 16384 characters (`MAXIMUM_CLIPBOARD_SIZE`), the rest of it is
//!   dropped (so a longer `52;c;…` reaches mosh-client cut, as broken base64);
//! - OSC 52 is taken only when the string begins exactly `52;c;`: any other selector (`p`, `s`,
//!   `pc`, `0`, none) is ignored;
//! - OSC 0, 1 and 2 set the title; every other OSC is ignored (9 and 777 notifications, 8
//!   hyperlinks).
//!
//! So: `52;c;…` of at most 16384 characters goes on to mosh-server as it came (mosh-client users
//! keep it, and the page gets it from mosh as before); any other OSC 52 write, and a longer one,
//! is taken out and becomes a [`Signal::Clipboard`]. `9;TEXT` (not ConEmu's `9;N;…` commands)
//! and `777;notify;TITLE;BODY` are taken out and become a [`Signal::Notify`]. OSC 8 hyperlinks
//! (`8;PARAMS;URL` opens one, `8;;` closes it) are taken out and become [`Signal::Link`]: the
//! recorder reads the link's text off its own screen between the two.

use super::iterm::decode_base64;
use crate::relay_proto::signal::linkable_url;
use crate::terminal::{Framebuffer, Pos};

/// Characters of an OSC string mosh-server 1.4 keeps.
pub const MOSH_OSC_LIMIT: usize = 16 * 1024;
/// Most bytes of an OSC sequence the lifter keeps for a signal (a clipboard write's base64); a
/// longer one is dropped. Its text (at most
/// [`MAX_CLIPBOARD_TEXT`](crate::relay_proto::signal::MAX_CLIPBOARD_TEXT)) stays within the control
/// stream's line limit however it is escaped.
pub const MAX_SIGNAL_BYTES: usize = 700 * 1024;
/// Most characters of a notification's title and body (the rest is cut, with `…`).
pub const MAX_TITLE_CHARS: usize = 128;
pub const MAX_BODY_CHARS: usize = 512;

/// What a lifted OSC sequence asks of the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// OSC 52: put `text` on the clipboard (`selector` as the program wrote it: `c`, `p`, `s`,
    /// `pc`, … or empty).
    Clipboard { selector: String, text: String },
    /// OSC 9 (`title` empty) or OSC 777 `notify`.
    Notify { title: String, body: String },
    /// OSC 8: a hyperlink begins (`Some(url)`, a URL the page may open:
    /// [`linkable_url`](crate::relay_proto::signal::linkable_url)) or ends (`None`; also for a
    /// URL not allowed, so its text stays plain).
    Link { url: Option<String> },
}

/// The OSC prefixes the lifter reads as signals.
pub(super) const OSC_SIGNAL: [&[u8]; 4] = [b"52;", b"9;", b"777;notify;", b"8;"];

/// What becomes of a whole OSC string (without introducer and terminator) that began with one
/// of [`OSC_SIGNAL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// To mosh-server as it came (it handles it, or ignores it harmlessly).
    Pass,
    /// Taken out: for the relay.
    Signal(Signal),
    /// Taken out and nothing done (a query, bad base64, a selector no terminal has).
    Drop,
}

/// Decides one OSC string; `over`: it was longer than [`MAX_SIGNAL_BYTES`] (only its start is
/// in `osc`).
pub(super) fn decide(osc: &[u8], over: bool) -> Outcome {
    if let Some(rest) = osc.strip_prefix(b"52;") {
        return clipboard(osc, rest, over);
    }
    if over {
        return Outcome::Drop;
    }
    if let Some(rest) = osc.strip_prefix(b"8;") {
        // `8;PARAMS;URL`: the URL is after the second `;` (it may hold `;` itself).
        let url = rest.iter().position(|&b| b == b';').map(|i| &rest[i + 1..]).unwrap_or(b"");
        let url = std::str::from_utf8(url).ok().filter(|u| linkable_url(u));
        return Outcome::Signal(Signal::Link { url: url.map(str::to_owned) });
    }
    if let Some(text) = osc.strip_prefix(b"9;") {
        // ConEmu's OSC 9 commands (`9;4;1;50` a progress bar, …) are not notifications.
        let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && matches!(text.get(digits), None | Some(b';')) {
            return Outcome::Pass;
        }
        return notify(b"", text);
    }
    if let Some(rest) = osc.strip_prefix(b"777;notify;") {
        let (title, body) = match rest.iter().position(|&b| b == b';') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &b""[..]),
        };
        return notify(title, body);
    }
    Outcome::Pass
}

fn clipboard(osc: &[u8], rest: &[u8], over: bool) -> Outcome {
    let Some(semi) = rest.iter().position(|&b| b == b';') else {
        // No data: mosh ignores it too.
        return Outcome::Pass;
    };
    let (selector, data) = (&rest[..semi], &rest[semi + 1..]);
    // Characters, as mosh counts (the UTF-8 is decoded before it is kept).
    let chars = osc.iter().filter(|&&b| b & 0xc0 != 0x80).count();
    if selector == b"c" && !over && chars <= MOSH_OSC_LIMIT {
        return Outcome::Pass;
    }
    let known = |b: &u8| matches!(b, b'c' | b'p' | b'q' | b's' | b'0'..=b'7');
    if over || selector.len() > 16 || !selector.iter().all(known) || data.is_empty() || data == b"?"
    {
        // Too long, a query (never answered: it would hand the clipboard to the program), a
        // clear, or not a selector.
        return Outcome::Drop;
    }
    let Some(bytes) = decode_base64(data) else { return Outcome::Drop };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    // Bytes that are not UTF-8 grow (each a U+FFFD of 3 bytes): bounded again.
    if text.len() > crate::relay_proto::signal::MAX_CLIPBOARD_TEXT {
        return Outcome::Drop;
    }
    Outcome::Signal(Signal::Clipboard {
        selector: String::from_utf8_lossy(selector).into_owned(),
        text,
    })
}

fn notify(title: &[u8], body: &[u8]) -> Outcome {
    let (title, body) = (clean(title, MAX_TITLE_CHARS), clean(body, MAX_BODY_CHARS));
    if title.is_empty() && body.is_empty() {
        return Outcome::Drop;
    }
    Outcome::Signal(Signal::Notify { title, body })
}

/// The text as UTF-8, control characters as spaces, at most `max` characters (then `…`).
fn clean(bytes: &[u8], max: usize) -> String {
    let mut out = String::new();
    for (i, c) in String::from_utf8_lossy(bytes).chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out.trim().to_string()
}

/// Where a hyperlink that begins now starts: the cursor, or `None` when the cursor waits to wrap
/// (its text would begin on the next row, which may scroll: such a link is let go).
pub fn link_start(fb: &Framebuffer) -> Option<Pos> {
    (!fb.wrap_pending()).then(|| fb.cursor())
}

/// The text of a hyperlink that began at `start` ([`link_start`]) and ends at `fb`'s cursor, and its column: the
/// cells of that row between the two (a wide character once). Only a link on one row is kept (a
/// program prints a link as a word or a path; one that wrapped or moved to another row is let
/// go); `None` when nothing is between.
pub fn link_text(fb: &Framebuffer, start: Pos) -> Option<(String, u16)> {
    let end = fb.cursor();
    // After a character in the last column the cursor stays on it, waiting to wrap.
    let end_col = usize::from(end.col) + usize::from(fb.wrap_pending());
    if end.row != start.row || end_col <= usize::from(start.col) {
        return None;
    }
    let row = fb.row(usize::from(start.row))?;
    let mut text = String::new();
    let mut x = usize::from(start.col);
    while x < end_col.min(row.cells().len()) {
        let cell = &row.cells()[x];
        text.push_str(if cell.text().is_empty() { " " } else { cell.text() });
        x += cell.width().max(1);
    }
    let text = text.trim_end().to_string();
    if text.is_empty() || text.len() > crate::relay_proto::signal::MAX_LINK_TEXT {
        return None;
    }
    Some((text, start.col))
}

/// At most [`NotifyLimit::BURST`] notifications at once, then one per
/// [`NotifyLimit::EVERY_MS`]: a program printing OSC 9 in a loop must not flood the desktop.
/// Sans-IO: the caller gives the time in milliseconds.
#[derive(Debug, Clone, Default)]
pub struct NotifyLimit {
    /// Credit in milliseconds: each notification costs [`NotifyLimit::EVERY_MS`].
    credit: u64,
    last_ms: Option<u64>,
}

impl NotifyLimit {
    pub const BURST: u64 = 3;
    pub const EVERY_MS: u64 = 2000;

    /// Whether a notification at `now_ms` may go (and takes its turn if so).
    pub fn allow(&mut self, now_ms: u64) -> bool {
        let full = Self::BURST * Self::EVERY_MS;
        self.credit = match self.last_ms {
            None => full,
            Some(last) => self.credit.saturating_add(now_ms.saturating_sub(last)).min(full),
        };
        self.last_ms = Some(now_ms);
        if self.credit >= Self::EVERY_MS {
            self.credit -= Self::EVERY_MS;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn mosh_keeps_short_c_writes_and_gets_them() {
        assert_eq!(decide(format!("52;c;{}", b64("hi")).as_bytes(), false), Outcome::Pass);
        let at_limit = format!("52;c;{}", "A".repeat(MOSH_OSC_LIMIT - 5));
        assert_eq!(decide(at_limit.as_bytes(), false), Outcome::Pass);
    }

    #[test]
    fn other_selectors_and_long_writes_are_signals() {
        for sel in ["p", "s", "pc", "", "0", "cs"] {
            assert_eq!(
                decide(format!("52;{sel};{}", b64("hello")).as_bytes(), false),
                Outcome::Signal(Signal::Clipboard { selector: sel.into(), text: "hello".into() }),
                "{sel}"
            );
        }
        let long = "x".repeat(MOSH_OSC_LIMIT);
        assert_eq!(
            decide(format!("52;c;{}", b64(&long)).as_bytes(), false),
            Outcome::Signal(Signal::Clipboard { selector: "c".into(), text: long })
        );
    }

    #[test]
    fn queries_bad_data_and_oversized_writes_are_dropped() {
        assert_eq!(decide(b"52;p;?", false), Outcome::Drop);
        assert_eq!(decide(b"52;p;", false), Outcome::Drop);
        assert_eq!(decide(b"52;p;!!!!", false), Outcome::Drop);
        assert_eq!(decide(b"52;xyz;aGk=", false), Outcome::Drop);
        assert_eq!(decide(b"52;c;aGk=", true), Outcome::Drop);
        assert_eq!(decide(b"52;c", false), Outcome::Pass);
        // Not UTF-8: each byte a U+FFFD of 3, over the text's limit.
        use base64::Engine;
        let junk = base64::engine::general_purpose::STANDARD.encode(vec![0xffu8; 300 * 1024]);
        assert_eq!(decide(format!("52;p;{junk}").as_bytes(), false), Outcome::Drop);
    }

    #[test]
    fn notifications_are_cleaned_and_conemu_commands_pass() {
        assert_eq!(
            decide(b"9;Build done\x01!", false),
            Outcome::Signal(Signal::Notify { title: "".into(), body: "Build done !".into() })
        );
        assert_eq!(decide(b"9;4;1;50", false), Outcome::Pass);
        assert_eq!(decide(b"9;12", false), Outcome::Pass);
        assert_eq!(
            decide(b"777;notify;Claude;Waiting for you", false),
            Outcome::Signal(Signal::Notify {
                title: "Claude".into(),
                body: "Waiting for you".into()
            })
        );
        assert_eq!(
            decide(b"777;notify;Only a title", false),
            Outcome::Signal(Signal::Notify { title: "Only a title".into(), body: "".into() })
        );
        assert_eq!(decide(b"9;", false), Outcome::Drop);
        let long = "é".repeat(MAX_BODY_CHARS + 10);
        let Outcome::Signal(Signal::Notify { body, .. }) =
            decide(format!("9;{long}").as_bytes(), false)
        else {
            panic!()
        };
        assert_eq!(body.chars().count(), MAX_BODY_CHARS + 1);
        assert!(body.ends_with('…'));
    }

    #[test]
    fn hyperlinks_open_with_a_safe_url_and_close() {
        let link = |u: Option<&str>| Outcome::Signal(Signal::Link { url: u.map(str::to_owned) });
        assert_eq!(
            decide(b"8;;https://example.com/a;b", false),
            link(Some("https://example.com/a;b"))
        );
        assert_eq!(decide(b"8;id=x;mailto:a@b.c", false), link(Some("mailto:a@b.c")));
        assert_eq!(decide(b"8;;", false), link(None));
        assert_eq!(decide(b"8;", false), link(None));
        for bad in
            [&b"8;;javascript:alert(1)"[..], b"8;;file:///etc/passwd", b"8;;data:text/html,x"]
        {
            assert_eq!(decide(bad, false), link(None), "{bad:?}");
        }
    }

    #[test]
    fn a_links_text_is_read_off_the_screen_between_its_start_and_end() {
        use crate::terminal::{Emulator, Size};
        let mut e = Emulator::new(Size { cols: 20, rows: 4 });
        e.feed(b"see \x1b[1m");
        let start = e.framebuffer().cursor();
        e.feed("d\u{e9}\u{4e2d}cs".as_bytes());
        assert_eq!(link_text(e.framebuffer(), start), Some(("d\u{e9}\u{4e2d}cs".into(), 4)));
        // Up to the last column (the cursor waits there to wrap).
        e.feed(b"\r\n");
        e.feed(b"0123456789012345");
        let start = e.framebuffer().cursor();
        e.feed(b"last");
        assert_eq!(link_text(e.framebuffer(), start), Some(("last".into(), 16)));
        // Begun where the cursor waits to wrap: none.
        assert_eq!(link_start(e.framebuffer()), None);
        // Nothing between, or another row: none.
        e.feed(b"\r\n");
        let start = link_start(e.framebuffer()).unwrap();
        assert_eq!(link_text(e.framebuffer(), start), None);
        e.feed(b"\r\nab");
        assert_eq!(link_text(e.framebuffer(), start), None);
    }

    #[test]
    fn notifications_are_limited_to_a_burst_then_a_pace() {
        let mut l = NotifyLimit::default();
        assert!(l.allow(0) && l.allow(1) && l.allow(2));
        assert!(!l.allow(3));
        assert!(!l.allow(1000));
        assert!(l.allow(2003));
        assert!(!l.allow(2004));
        assert!(l.allow(100_000) && l.allow(100_000) && l.allow(100_000));
        assert!(!l.allow(100_000));
    }
}
