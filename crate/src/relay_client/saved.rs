//! What a page keeps in its tab's storage so that a reload continues its shell: the relay's
//! session id, the mosh key and a [`ResumePoint`]. Text, because browser storage holds strings.
//!
//! It is written when the page goes away and every few seconds before (a crash loses only what
//! came after the last write; the nonce counters are reserved separately, ahead of use), and
//! removed when the session ends. The key in it is the session's secret: it lives in the tab's
//! `sessionStorage`, which only this origin's pages in this tab can read, as the page itself
//! holds it in memory.

use super::Target;
use crate::relay_proto::CarriedPoint;
use crate::session::ResumePoint;

/// First line of the stored text: the format's name and version.
const HEADER: &str = "tern-resume-1";

/// A session this tab can take over again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedSession {
    pub session_id: String,
    /// The mosh key as text (22 characters of base64). A secret: never logged.
    pub key_text: String,
    pub point: ResumePoint,
}

impl SavedSession {
    /// One line each: header, session id, key, the point in base64.
    pub fn encode(&self) -> String {
        let point = CarriedPoint::text_of(&self.point);
        format!("{HEADER}\n{}\n{}\n{point}", self.session_id, self.key_text)
    }

    /// Reads what [`encode`](Self::encode) wrote; anything else (another version, a hand-edited
    /// value) is `None`, and the page starts a new session.
    pub fn decode(text: &str) -> Option<SavedSession> {
        let mut lines = text.split('\n');
        if lines.next()? != HEADER {
            return None;
        }
        let session_id = lines.next()?.to_string();
        let key_text = lines.next()?.to_string();
        let point = CarriedPoint::from_text(lines.next()?).into_point()?;
        if lines.next().is_some()
            || session_id.is_empty()
            || key_text.parse::<crate::wire::Key>().is_err()
        {
            return None;
        }
        Some(SavedSession { session_id, key_text, point })
    }

    /// Whether this page may resume it: in bridge mode only with the key in the page's address
    /// (another server named there is another session); in spawn mode the relay decides.
    pub fn fits(&self, target: &Target) -> bool {
        match &target.bridge {
            Some((_, _, key)) => *key == self.key_text,
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::StateNum;

    fn saved() -> SavedSession {
        SavedSession {
            session_id: "3f2a9c".into(),
            key_text: "zr0jtuYVKJnfJHP/XOOsbQ".into(),
            point: ResumePoint {
                server_num: StateNum(12),
                screen_cols: 80,
                screen_rows: 24,
                screen: Vec::new(),
                input_acked: StateNum(4),
                input_next: StateNum(9),
                input_pending: Vec::new(),
                next_seq: 300,
                next_fragment_id: 40,
            },
        }
    }

    #[test]
    fn round_trips_and_refuses_anything_else() {
        let s = saved();
        assert_eq!(SavedSession::decode(&s.encode()), Some(s.clone()));
        for bad in [
            "",
            "tern-resume-0\nx\ny\nz",
            &s.encode().replace("zr0j", "!!!!"),
            &format!("{}\nmore", s.encode()),
        ] {
            assert_eq!(SavedSession::decode(bad), None, "{bad:?}");
        }
        let cut = s.encode();
        for at in 0..cut.len() {
            assert_eq!(SavedSession::decode(&cut[..at]), None, "cut at {at}");
        }
    }

    #[test]
    fn a_bridge_page_resumes_only_the_server_its_address_names() {
        let s = saved();
        let spawn = Target { token: "t".into(), bridge: None };
        assert!(s.fits(&spawn));
        let same =
            Target { token: "t".into(), bridge: Some(("h".into(), 60001, s.key_text.clone())) };
        assert!(s.fits(&same));
        let other = Target {
            token: "t".into(),
            bridge: Some(("h".into(), 60001, "PWSoCIVurTVBGXAj873xNg".into())),
        };
        assert!(!s.fits(&other));
    }
}
