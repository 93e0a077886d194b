//! What a program printed that mosh-server drops, sent by the relay to the session's owner page on
//! the control stream (`clipboard`, `notify`): the recorder lifts them out of the pty output
//! ([`crate::images::signal`]), docs/IMAGES.md "Clipboard and notifications". Never sent to a
//! read-only link.

use super::json::{DecodeError, Fields, ObjectWriter};

/// Longest clipboard text carried (the recorder's lifter keeps at most
/// [`MAX_SIGNAL_BYTES`](crate::images::signal::MAX_SIGNAL_BYTES) of base64, so less than this
/// ever comes); the line stays under the control stream's limit whatever it holds.
pub const MAX_CLIPBOARD_TEXT: usize = 600 * 1024;

/// A clipboard write or a notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageSignal {
    /// OSC 52 that mosh-server ignores (a selector other than `c`) or cuts (over its 16384
    /// characters): the page applies its clipboard setting, as for mosh's own OSC 52.
    Clipboard { text: String },
    /// OSC 9 or OSC 777 `notify`.
    Notify { title: String, body: String },
    /// OSC 8: `text` (as the screen shows it, from column `col`, 0-based) links to `url`
    /// ([`linkable_url`]). mosh-server drops OSC 8, so the text reaches the page plain; the page
    /// makes each place its row shows `text` at `col` a link.
    Link { url: String, text: String, col: u16 },
}

/// Longest link URL carried.
pub const MAX_LINK_URL: usize = 2048;
/// Longest link text carried (one row of a wide terminal).
pub const MAX_LINK_TEXT: usize = 1024;

/// Whether the page may make `url` a link: `http:`, `https:` or `mailto:`, printable ASCII, at
/// most [`MAX_LINK_URL`] bytes. Never `javascript:`, `data:`, `file:` or anything else a program
/// could use against the page or the machine.
pub fn linkable_url(url: &str) -> bool {
    if url.len() > MAX_LINK_URL || !url.bytes().all(|b| b.is_ascii_graphic()) {
        return false;
    }
    let lower = url.to_ascii_lowercase();
    let rest = ["https://", "http://", "mailto:"].iter().find_map(|s| lower.strip_prefix(s));
    rest.is_some_and(|r| !r.is_empty())
}

impl PageSignal {
    pub fn write_fields(&self, w: &mut ObjectWriter<'_>) {
        match self {
            PageSignal::Clipboard { text } => {
                w.str("type", "clipboard").str("text", text);
            }
            PageSignal::Notify { title, body } => {
                w.str("type", "notify").str("title", title).str("body", body);
            }
            PageSignal::Link { url, text, col } => {
                w.str("type", "link").str("url", url).str("text", text).u64("col", (*col).into());
            }
        }
    }

    /// Reads a `clipboard` or `notify` message (`kind`: its `type`, already read).
    pub fn read_fields(kind: &str, f: &Fields<'_>) -> Result<Self, DecodeError> {
        match kind {
            "clipboard" => {
                let text = f.str("text")?;
                if text.len() > MAX_CLIPBOARD_TEXT {
                    return Err(DecodeError::data("too long", "text"));
                }
                Ok(PageSignal::Clipboard { text })
            }
            "notify" => Ok(PageSignal::Notify { title: f.str("title")?, body: f.str("body")? }),
            "link" => {
                let (url, text) = (f.str("url")?, f.str("text")?);
                if !linkable_url(&url) {
                    return Err(DecodeError::data("not a URL a page may open", "url"));
                }
                if text.is_empty() || text.len() > MAX_LINK_TEXT {
                    return Err(DecodeError::data("empty or too long", "text"));
                }
                Ok(PageSignal::Link { url, text, col: f.int("col")? })
            }
            _ => Err(DecodeError::data("unknown value", "type")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ServerMessage, decode};
    use super::*;

    #[test]
    fn signals_are_one_line_each_and_read_back() {
        let c = ServerMessage::Signal(PageSignal::Clipboard { text: "a\"b\n".into() });
        assert_eq!(c.to_line(), b"{\"type\":\"clipboard\",\"text\":\"a\\\"b\\n\"}\n");
        assert_eq!(decode::<ServerMessage>(&c.to_line()).unwrap(), c);
        let n = ServerMessage::Signal(PageSignal::Notify { title: "T".into(), body: "B".into() });
        assert_eq!(n.to_line(), b"{\"type\":\"notify\",\"title\":\"T\",\"body\":\"B\"}\n");
        assert_eq!(decode::<ServerMessage>(&n.to_line()).unwrap(), n);
        let l = ServerMessage::Signal(PageSignal::Link {
            url: "https://example.com".into(),
            text: "docs".into(),
            col: 4,
        });
        assert_eq!(decode::<ServerMessage>(&l.to_line()).unwrap(), l);
        let js = "{\"type\":\"link\",\"url\":\"javascript:alert(1)\",\"text\":\"x\",\"col\":0}";
        assert!(decode::<ServerMessage>(js.as_bytes()).is_err());
        assert!(linkable_url("HTTPS://EXAMPLE.COM/"));
        assert!(!linkable_url("https://"));
        assert!(!linkable_url("mailto:"));
        assert!(!linkable_url("https://a b"));
        assert!(!linkable_url(" javascript:x"));
        let long = format!(
            "{{\"type\":\"clipboard\",\"text\":\"{}\"}}",
            "x".repeat(MAX_CLIPBOARD_TEXT + 1)
        );
        assert!(decode::<ServerMessage>(long.as_bytes()).is_err());
    }
}
