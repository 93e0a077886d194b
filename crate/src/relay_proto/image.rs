//! An image the recorder lifted (docs/IMAGES.md), asked for by the page when it finds the
//! image's marker in the screen: `POST IMAGE_PATH` with [`ImageRequest`]; the answer is one
//! [`ImageInfo`] line, then the image's bytes in a format a browser draws (the relay converts
//! SIXEL and raw pixels to PNG), to the end of the body. Refusals are an `ApiError` (404
//! `unknown_image`: never stored, evicted by the quota, or dropped).
//!
//! The same request may open a stream of the session's link instead (the first line of a
//! `StreamRequest::Image`): then the bytes are paced as a `tern send` download (the page
//! acknowledges them with `DownloadAck` lines), so a large picture never queues in front of keys.
//!
//! ```text
//!  page ─ POST IMAGE_PATH {session, image} ─▶ relay ─▶ {cols, rows, width, height, mime, name, size}\n BYTES
//!  page ══ stream: {session, image}\n ══▶ relay ─▶ ImageInfo\n BYTES (paced) ◀─ DownloadAck … ─ page
//!                                           (or one ApiError line: {error, message})
//! ```

use super::json::{DecodeError, Fields, ObjectWriter};
use super::line::Message;

/// Route of [`ImageRequest`].
pub const IMAGE_PATH: &str = "/api/image";

/// An [`ImageRequest`]'s `image` that asks for the session's next picture: the relay answers
/// when its recorder stores one (on a stream of the link only), so the bytes are on their way
/// before the picture's marker reaches the page (no round trip after it). The answer's
/// [`ImageInfo::id`] says which it is.
pub const NEXT_IMAGE: u64 = 0;

/// Page → relay: image `image` of session `session` ([`NEXT_IMAGE`]: the next one stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRequest {
    pub session: String,
    pub image: u64,
}

/// Relay → page, the line before the bytes: the cells it takes (the text around it was laid out
/// for them), its pixels, the bytes' MIME type, and the name the program gave, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub cols: u32,
    pub rows: u32,
    pub width: u32,
    pub height: u32,
    pub mime: String,
    pub name: Option<String>,
    /// Bytes that follow.
    pub size: u64,
    /// The picture's id: in the answer to a [`NEXT_IMAGE`] request.
    pub id: Option<u64>,
}

impl Message for ImageRequest {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("session", &self.session).u64("image", self.image);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        f.only(&["session", "image"])?;
        Ok(ImageRequest { session: f.str("session")?, image: f.u64("image")? })
    }
}

impl Message for ImageInfo {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.u64("cols", self.cols.into())
            .u64("rows", self.rows.into())
            .u64("width", self.width.into())
            .u64("height", self.height.into())
            .str("mime", &self.mime)
            .opt_str("name", self.name.as_deref())
            .u64("size", self.size)
            .opt_u64("id", self.id);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        Ok(ImageInfo {
            cols: f.int("cols")?,
            rows: f.int("rows")?,
            width: f.int("width")?,
            height: f.int("height")?,
            mime: f.str("mime")?,
            name: f.opt_str("name")?,
            size: f.u64("size")?,
            id: f.opt_u64("id")?,
        })
    }
}

/// Splits an answer's body into its [`ImageInfo`] and the image's bytes.
pub fn split_answer(body: &[u8]) -> Result<(ImageInfo, &[u8]), String> {
    let nl = body.iter().position(|&b| b == b'\n').ok_or("the image's answer has no header")?;
    let info = super::decode::<ImageInfo>(&body[..nl])
        .map_err(|e| format!("the image's header could not be read: {e}"))?;
    Ok((info, &body[nl + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay_proto::{decode, encode_line};

    #[test]
    fn request_and_answer_round_trip() {
        let r = ImageRequest { session: "ab".into(), image: 7 };
        assert_eq!(decode::<ImageRequest>(&encode_line(&r)).unwrap(), r);
        let info = ImageInfo {
            cols: 3,
            rows: 2,
            width: 30,
            height: 23,
            mime: "image/png".into(),
            name: Some("a.png".into()),
            size: 7,
            id: Some(4),
        };
        let mut body = encode_line(&info);
        body.extend_from_slice(b"\x89PNG\n..");
        let (back, bytes) = split_answer(&body).unwrap();
        assert_eq!((back, bytes), (info, &b"\x89PNG\n.."[..]));
        assert!(split_answer(b"no newline").is_err());
        // On a stream: told from uploads and downloads by its `image` key.
        let line = encode_line(&crate::relay_proto::StreamRequest::Image(r.clone()));
        assert_eq!(
            decode::<crate::relay_proto::StreamRequest>(&line).unwrap(),
            crate::relay_proto::StreamRequest::Image(r)
        );
    }
}
