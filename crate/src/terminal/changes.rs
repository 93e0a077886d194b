//! What changed on the server's screen that a driver reports outside the grid: the window title,
//! the bell and OSC 52 clipboard writes.

use base64::Engine;

use super::framebuffer::Framebuffer;

/// The side effects seen since the last [`SideEffects::observe`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The new window title.
    pub title: Option<String>,
    /// The bell rang (once or more).
    pub bell: bool,
    /// Text the remote copied with OSC 52, decoded.
    pub clipboard: Option<String>,
}

/// Remembers what was reported, so each change is reported once.
#[derive(Debug, Default, Clone)]
pub struct SideEffects {
    title: String,
    bell_count: u32,
    clipboard: String,
}

impl SideEffects {
    pub fn new() -> Self {
        Self::default()
    }

    /// Compares `fb` with what was seen before.
    pub fn observe(&mut self, fb: &Framebuffer) -> Changes {
        let mut c = Changes::default();
        if fb.title() != self.title {
            self.title = fb.title().to_string();
            c.title = Some(self.title.clone());
        }
        if fb.bell_count() != self.bell_count {
            self.bell_count = fb.bell_count();
            c.bell = true;
        }
        if fb.clipboard() != self.clipboard {
            self.clipboard = fb.clipboard().to_string();
            c.clipboard = decode_clipboard(&self.clipboard);
        }
        c
    }
}

/// The text of an OSC 52 payload (base64). A query (`?`) or garbage gives `None`; bytes that are
/// not UTF-8 are replaced, as a clipboard holds text.
pub fn decode_clipboard(payload: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(payload.as_bytes()).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::Emulator;

    #[test]
    fn osc52_payloads_decode_and_queries_do_not() {
        assert_eq!(decode_clipboard("aGVsbG8=").as_deref(), Some("hello"));
        assert_eq!(decode_clipboard("?"), None);
        assert_eq!(decode_clipboard("not base64!"), None);
        assert_eq!(decode_clipboard("/w==").as_deref(), Some("\u{fffd}"));
    }

    #[test]
    fn each_change_is_reported_once() {
        let mut e = Emulator::new(crate::terminal::Size { cols: 20, rows: 4 });
        let mut seen = SideEffects::new();
        assert_eq!(seen.observe(e.framebuffer()), Changes::default());
        e.feed(b"\x1b]0;build\x07\x07\x1b]52;c;aGk=\x07");
        let c = seen.observe(e.framebuffer());
        assert_eq!(c.title.as_deref(), Some("build"));
        assert!(c.bell);
        assert_eq!(c.clipboard.as_deref(), Some("hi"));
        assert_eq!(seen.observe(e.framebuffer()), Changes::default());
    }
}
