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
        let long = format!(
            "{{\"type\":\"clipboard\",\"text\":\"{}\"}}",
            "x".repeat(MAX_CLIPBOARD_TEXT + 1)
        );
        assert!(decode::<ServerMessage>(long.as_bytes()).is_err());
    }
}
