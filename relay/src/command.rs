//! The `tern` command's messages to the relay of its session, over the relay's Unix socket: one
//! JSON line each way per step. Both ends are this crate (`tern` is `tern-relay` under another
//! name), so the types are written once, here.
//!
//! ```text
//!  tern ─ {"send":{"session":S,"path":P}} ─▶ relay     or  {"open":{"session":S,"url":U}}
//!  tern ◀─ {"offered":{"offer":ID,"name":N,"size":B}}      (or {"error":{"message":M}})
//!  tern ◀─ {"answer":{"answer":"saved","message":null}}   (when the page answered)
//!  a relay restart in between: tern reconnects and sends {"wait":{"session":S,"offer":ID}}
//!  the recorder (`tern-relay record`): {"clipboard":{"session":S,"text":T}} or
//!    {"notify":{"session":S,"title":T,"body":B}}, no answer (what mosh-server drops, for the page)
//! ```

use serde::{Deserialize, Serialize};
use tern::relay_proto::OfferAnswer;

/// Longest request line (a path or a URL and a little JSON; a clipboard write from the recorder,
/// at most `tern::relay_proto::signal::MAX_CLIPBOARD_TEXT` bytes, escaped).
pub const MAX_REQUEST: usize = 4 << 20;
/// The socket's name in the state directory.
pub const SOCKET_NAME: &str = "tern.sock";
/// The environment of a session's shell: the socket...
pub const SOCKET_ENV: &str = "TERN_SOCKET";
/// ...and the session it belongs to.
pub const SESSION_ENV: &str = "TERN_SESSION";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Offer this file (an absolute path) to the session's browser.
    Send { session: String, path: String },
    /// Offer this URL to the session's browser, to open once the person allows it.
    Open { session: String, url: String },
    /// From the recorder: a program wrote the clipboard in a way mosh-server drops (OSC 52).
    Clipboard { session: String, text: String },
    /// From the recorder: a program asked for a notification (OSC 9 / 777).
    Notify { session: String, title: String, body: String },
    /// From the recorder: a program printed `text` at column `col` as a hyperlink (OSC 8).
    Link { session: String, url: String, text: String, col: u16 },
    /// From the recorder: it stored picture `id` (the relay hands it to the pages waiting for
    /// the session's next picture, `tern::relay_proto::NEXT_IMAGE`).
    ImageStored { session: String, id: u64 },
    /// Wait for the answer to an offer made before (after the relay restarted).
    Wait { session: String, offer: String },
    /// `tern share`: a read-only viewer link to the session, for `expires` seconds (an hour
    /// when `None`), with the session's history or not.
    Share { session: String, expires: Option<u64>, allow_history: bool },
    /// `tern share --end`: end every share of the session (its viewers are closed).
    Unshare { session: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Offered {
        offer: String,
        name: String,
        size: u64,
    },
    Answer {
        answer: String,
        message: Option<String>,
    },
    Error {
        message: String,
    },
    /// A share made: the viewer's URL (with its token: shown once) and when it expires (unix s).
    Shared {
        url: String,
        expires: u64,
    },
    /// Shares ended: how many.
    Unshared {
        count: usize,
    },
}

impl Reply {
    pub fn answer(a: &OfferAnswer) -> Reply {
        let (answer, message) = match a {
            OfferAnswer::Saved => ("saved", None),
            OfferAnswer::Opened => ("opened", None),
            OfferAnswer::Dismissed => ("dismissed", None),
            OfferAnswer::Failed { message } => ("failed", Some(message.clone())),
        };
        Reply::Answer { answer: answer.into(), message }
    }

    pub fn error(message: impl Into<String>) -> Reply {
        Reply::Error { message: message.into() }
    }
}

/// One message as a line with its newline.
pub fn line<T: Serialize>(m: &T) -> Vec<u8> {
    let mut v = serde_json::to_vec(m).expect("command messages always serialize");
    v.push(b'\n');
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_json_line_each() {
        let r = Request::Send { session: "ab".into(), path: "/tmp/x".into() };
        assert_eq!(line(&r), b"{\"send\":{\"session\":\"ab\",\"path\":\"/tmp/x\"}}\n");
        let back: Request = serde_json::from_slice(&line(&r)).unwrap();
        assert_eq!(back, r);
        let a = Reply::answer(&OfferAnswer::Failed { message: "no".into() });
        assert_eq!(
            String::from_utf8(line(&a)).unwrap(),
            "{\"answer\":{\"answer\":\"failed\",\"message\":\"no\"}}\n"
        );
    }
}
