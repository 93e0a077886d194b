//! Sharing a session read-only (issue 35): the owner's page asks the relay for a viewer link, or
//! ends every share of its session. The viewers themselves come over the control stream
//! ([`ServerMessage::Screen`](super::ServerMessage::Screen)); the owner's page hears how many
//! watch there too ([`ServerMessage::Viewers`](super::ServerMessage::Viewers)).
//!
//! ```text
//!  page ─ POST SHARE_PATH ShareRequest ─▶ relay ─▶ ShareReply | ApiError
//! ```

use super::json::{DecodeError, Fields, ObjectWriter};
use super::line::Message;

/// Route of [`ShareRequest`].
pub const SHARE_PATH: &str = "/api/share";

/// Share `session` for `expires` seconds (the relay's default, an hour, when absent), with its
/// history or not; or, with `end`, end every share of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareRequest {
    pub session: String,
    pub expires: Option<u64>,
    pub allow_history: bool,
    pub end: bool,
}

/// A share made (`url`, with its token, shown once; `expires`, unix seconds), or how many
/// shares ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareReply {
    pub url: Option<String>,
    pub expires: Option<u64>,
    pub ended: u64,
}

impl Message for ShareRequest {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("session", &self.session)
            .opt_u64("expires", self.expires)
            .bool("allow_history", self.allow_history)
            .bool("end", self.end);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        f.only(&["session", "expires", "allow_history", "end"])?;
        Ok(ShareRequest {
            session: f.str("session")?,
            expires: f.opt_u64("expires")?,
            allow_history: f.opt_bool("allow_history")?,
            end: f.opt_bool("end")?,
        })
    }
}

impl Message for ShareReply {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.opt_str("url", self.url.as_deref())
            .opt_u64("expires", self.expires)
            .u64("ended", self.ended);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        Ok(ShareReply {
            url: f.opt_str("url")?,
            expires: f.opt_u64("expires")?,
            ended: f.u64("ended")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay_proto::{decode, encode};

    #[test]
    fn share_messages_round_trip() {
        let r = ShareRequest {
            session: "ab".into(),
            expires: Some(600),
            allow_history: true,
            end: false,
        };
        assert_eq!(
            String::from_utf8(encode(&r)).unwrap(),
            r#"{"session":"ab","expires":600,"allow_history":true,"end":false}"#
        );
        assert_eq!(decode::<ShareRequest>(&encode(&r)).unwrap(), r);
        let end: ShareRequest = decode(br#"{"session":"ab","end":true}"#).unwrap();
        assert!(end.end && end.expires.is_none());
        assert!(decode::<ShareRequest>(br#"{"session":"ab","forever":true}"#).is_err());
        let a = ShareReply {
            url: Some("https://h/#token=t&view=ab".into()),
            expires: Some(9),
            ended: 0,
        };
        assert_eq!(decode::<ShareReply>(&encode(&a)).unwrap(), a);
    }
}
