//! What the shell sends to the browser (`tern send FILE`, `tern open URL`): the relay offers it
//! on the control stream, the page answers there, and a file's bytes come on a stream of their
//! own that the page opens and can reopen where it left off.
//!
//! ```text
//!  relay ─ offer {id, kind: file, name, size, sha256} ─▶ page        (control stream)
//!  page ══ opens a stream: DownloadRequest {download: id, from: N} ══▶ relay
//!  page ◀─ DownloadStart {size, from: N}  |  DownloadError {error, message}   (one line)
//!  page ◀─ raw bytes N..size                          (paced by the relay, like an upload)
//!  page ─ DownloadAck {acked, page_time_us} … ─▶ relay (AckPolicy: at most one per 5 ms)
//!  page ─ answer {id, answer: saved | failed, message} ─▶ relay   (control stream)
//!
//!  relay ─ offer {id, kind: url, url} ─▶ page;  the person allows it or not
//!  page ─ answer {id, answer: opened | dismissed} ─▶ relay
//! ```
//!
//! A relay restart or a lost link costs nothing downloaded: the relay keeps its offers in the
//! state directory and offers again to every page that attaches; the page asks from what it has.

use super::json::{DecodeError, Fields, ObjectWriter};
use super::line::Message;

/// Longest request line on a download stream, newline included.
pub const MAX_REQUEST: usize = 1024;
/// Longest URL `tern open` accepts (browsers take more; a shell's URL is rarely longer).
pub const MAX_URL: usize = 8192;
/// Longest file name offered (longer ones are shortened, keeping the extension).
pub const MAX_NAME: usize = 255;

/// Relay → page on the control stream: something from the shell for the browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// Unique within the relay (random hex): what answers and download streams name.
    pub id: String,
    pub what: Offered,
}

/// What an [`Offer`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offered {
    /// A file to download: its name (no directories), size and SHA-256 (lowercase hex).
    File { name: String, size: u64, sha256: String },
    /// A web page to open in a new tab, once the person allows it.
    Url { url: String },
}

/// Page → relay on the control stream: what became of an offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferAnswer {
    /// The file was downloaded, its SHA-256 checked, and handed to the browser to save.
    Saved,
    /// The person allowed the URL; it opened in a new tab.
    Opened,
    /// The person said no (or closed the prompt).
    Dismissed,
    /// It could not be done; `message` says why, for the shell.
    Failed { message: String },
}

impl OfferAnswer {
    fn as_str(&self) -> &'static str {
        match self {
            OfferAnswer::Saved => "saved",
            OfferAnswer::Opened => "opened",
            OfferAnswer::Dismissed => "dismissed",
            OfferAnswer::Failed { .. } => "failed",
        }
    }
}

/// The first line of a stream the page opens: an upload's header, or a download's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamRequest {
    Upload(super::UploadHeader),
    Download(DownloadRequest),
    /// A picture the recorder lifted (docs/IMAGES.md), paced as a download.
    Image(super::ImageRequest),
}

impl Message for StreamRequest {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        match self {
            StreamRequest::Upload(h) => h.write(w),
            StreamRequest::Download(d) => d.write(w),
            StreamRequest::Image(i) => i.write(w),
        }
    }

    /// A line with `download` is a download's request; anything else an upload's header (the
    /// form uploads had before downloads existed).
    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        if f.get("download").is_some() {
            DownloadRequest::read(f).map(StreamRequest::Download)
        } else if f.get("image").is_some() {
            super::ImageRequest::read(f).map(StreamRequest::Image)
        } else {
            super::UploadHeader::read(f).map(StreamRequest::Upload)
        }
    }
}

/// Page → relay, the first line of a download stream: send offer `download` from byte `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadRequest {
    pub download: String,
    pub from: u64,
}

/// Relay → page, the one line before a download's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownloadReply {
    /// Bytes `from..size` follow, raw, to the end of the stream.
    Start { size: u64, from: u64 },
    /// Refused; nothing follows. `gone`: the offer no longer exists (do not ask again).
    Error { message: String, gone: bool },
}

/// Page → relay on a download stream: bytes held, and when the last of them was read on the
/// page's clock (the relay's pacer measures the rate from these, as the page's does for uploads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownloadAck {
    pub acked: u64,
    pub page_time_us: u64,
}

/// Whether `tern open` may offer `url`: http or https only (no `javascript:`, `file:` or
/// `data:`), printable ASCII without spaces, a host, at most [`MAX_URL`] bytes. The relay checks
/// before offering and the page again before opening.
pub fn openable_url(url: &str) -> Result<(), &'static str> {
    if url.len() > MAX_URL {
        return Err("the URL is too long");
    }
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "the URL has spaces or characters outside printable ASCII (percent-encode them)",
        );
    }
    let lower = url.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("https://").or_else(|| lower.strip_prefix("http://"))
    else {
        return Err("only http:// and https:// URLs can be opened");
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err("the URL has no host");
    }
    Ok(())
}

/// The name a file is offered under: the last path component, control, format and bidi-control
/// characters replaced, at most [`MAX_NAME`] bytes (keeping the extension), never empty or a dot
/// name.
pub fn offered_name(path_name: &str) -> String {
    let base = path_name.rsplit('/').next().unwrap_or("");
    let mut name: String = base
        .chars()
        .map(|c| if c.is_control() || is_invisible_format(c) { '_' } else { c })
        .collect();
    if name.is_empty() || name == "." || name == ".." {
        name = "download".into();
    }
    if name.len() > MAX_NAME {
        let ext = name.rfind('.').map(|i| name[i..].to_owned()).filter(|e| e.len() <= 16);
        let ext = ext.unwrap_or_default();
        let mut cut = MAX_NAME - ext.len();
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name = format!("{}{ext}", &name[..cut]);
    }
    name
}

/// Unicode's format characters (general category Cf) and the line and paragraph separators: they
/// print nothing themselves but change how the text around them shows. A RIGHT-TO-LEFT OVERRIDE
/// makes `invoice\u{202E}fdp.exe` read as `invoiceexe.pdf` in a save dialog and a downloads list;
/// zero-width characters make two names look alike. The list is Unicode 15's Cf, by range.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
    )
}

impl Offer {
    /// The `offer` control message.
    pub fn write_fields(&self, w: &mut ObjectWriter<'_>) {
        w.str("type", "offer").str("id", &self.id);
        match &self.what {
            Offered::File { name, size, sha256 } => {
                w.str("kind", "file").str("name", name).u64("size", *size).str("sha256", sha256);
            }
            Offered::Url { url } => {
                w.str("kind", "url").str("url", url);
            }
        }
    }

    /// Reads the fields of an `offer` control message (its `type` already read).
    pub fn read_fields(f: &Fields<'_>) -> Result<Self, DecodeError> {
        let id = f.str("id")?;
        let what = match f.str("kind")?.as_str() {
            "file" => {
                let sha256 = f.str("sha256")?;
                if !super::Sha256::is_valid(&sha256) {
                    return Err(DecodeError::data("not a SHA-256", "sha256"));
                }
                Offered::File { name: offered_name(&f.str("name")?), size: f.u64("size")?, sha256 }
            }
            "url" => Offered::Url { url: f.str("url")? },
            _ => return Err(DecodeError::data("unknown value", "kind")),
        };
        Ok(Offer { id, what })
    }
}

impl OfferAnswer {
    /// The fields of an `answer` control message after its `type`.
    pub fn write_fields(&self, w: &mut ObjectWriter<'_>) {
        w.str("answer", self.as_str());
        if let OfferAnswer::Failed { message } = self {
            w.str("message", message);
        }
    }

    pub fn read_fields(f: &Fields<'_>) -> Result<Self, DecodeError> {
        Ok(match f.str("answer")?.as_str() {
            "saved" => OfferAnswer::Saved,
            "opened" => OfferAnswer::Opened,
            "dismissed" => OfferAnswer::Dismissed,
            "failed" => OfferAnswer::Failed { message: f.str("message")? },
            _ => return Err(DecodeError::data("unknown value", "answer")),
        })
    }
}

impl Message for DownloadRequest {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("download", &self.download).u64("from", self.from);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        f.only(&["download", "from"])?;
        Ok(DownloadRequest { download: f.str("download")?, from: f.u64("from")? })
    }
}

impl Message for DownloadReply {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        match self {
            DownloadReply::Start { size, from } => {
                w.u64("size", *size).u64("from", *from);
            }
            DownloadReply::Error { message, gone } => {
                w.str("error", message).bool("gone", *gone);
            }
        }
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        if let Some(message) = f.opt_str("error")? {
            let gone = f.get("gone").is_some() && f.bool("gone")?;
            return Ok(DownloadReply::Error { message, gone });
        }
        Ok(DownloadReply::Start { size: f.u64("size")?, from: f.u64("from")? })
    }
}

impl Message for DownloadAck {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.u64("acked", self.acked).u64("page_time_us", self.page_time_us);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        Ok(DownloadAck { acked: f.u64("acked")?, page_time_us: f.u64("page_time_us")? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay_proto::{ClientMessage, ServerMessage, decode, encode_line};

    fn round_trip<M: Message + PartialEq + std::fmt::Debug>(m: M) -> String {
        let line = encode_line(&m);
        assert_eq!(decode::<M>(&line[..line.len() - 1]).unwrap(), m);
        String::from_utf8(line).unwrap()
    }

    #[test]
    fn offers_and_answers_are_control_messages_with_exact_lines() {
        let sha = "ab".repeat(32);
        let file = ServerMessage::Offer(Offer {
            id: "0a1b".into(),
            what: Offered::File { name: "report.pdf".into(), size: 5, sha256: sha.clone() },
        });
        assert_eq!(
            round_trip(file),
            format!(
                "{{\"type\":\"offer\",\"id\":\"0a1b\",\"kind\":\"file\",\"name\":\"report.pdf\",\"size\":5,\"sha256\":\"{sha}\"}}\n"
            )
        );
        let url = ServerMessage::Offer(Offer {
            id: "ff".into(),
            what: Offered::Url { url: "https://example.invalid/".into() },
        });
        assert_eq!(
            round_trip(url),
            "{\"type\":\"offer\",\"id\":\"ff\",\"kind\":\"url\",\"url\":\"https://example.invalid/\"}\n"
        );
        for answer in [
            OfferAnswer::Saved,
            OfferAnswer::Opened,
            OfferAnswer::Dismissed,
            OfferAnswer::Failed { message: "SHA-256 differs".into() },
        ] {
            round_trip(ClientMessage::Answer { id: "ff".into(), answer });
        }
        assert_eq!(
            round_trip(ClientMessage::Answer { id: "ff".into(), answer: OfferAnswer::Saved }),
            "{\"type\":\"answer\",\"id\":\"ff\",\"answer\":\"saved\"}\n"
        );
    }

    #[test]
    fn a_stream_is_a_download_when_it_names_one_and_an_upload_otherwise() {
        let d = StreamRequest::Download(DownloadRequest { download: "0a".into(), from: 7 });
        assert_eq!(round_trip(d), "{\"download\":\"0a\",\"from\":7}\n");
        let u = StreamRequest::Upload(crate::relay_proto::UploadHeader {
            hash: "00".repeat(32),
            size: 3,
            mime: None,
            eager: true,
        });
        round_trip(u);
        assert!(decode::<StreamRequest>(b"{\"download\":\"0a\"}").is_err(), "no from");
        round_trip(DownloadReply::Start { size: 10, from: 4 });
        round_trip(DownloadReply::Error { message: "the file changed".into(), gone: true });
        round_trip(DownloadAck { acked: 4096, page_time_us: 123 });
    }

    #[test]
    fn only_web_urls_with_a_host_can_be_opened() {
        for ok in ["https://example.invalid/", "http://127.0.0.1:8080/x?y#z", "HTTPS://A.B"] {
            assert_eq!(openable_url(ok), Ok(()), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,x",
            "https://",
            "https:///path",
            "https://exa mple.invalid/",
            "https://example.invalid/\u{e9}",
            "ftp://example.invalid/",
        ] {
            assert!(openable_url(bad).is_err(), "{bad}");
        }
        assert!(openable_url(&format!("https://a.b/{}", "x".repeat(MAX_URL))).is_err());
    }

    #[test]
    fn offered_names_are_one_safe_component() {
        assert_eq!(offered_name("/tmp/a/report.pdf"), "report.pdf");
        assert_eq!(offered_name("a\nb\u{7}.txt"), "a_b_.txt");
        assert_eq!(offered_name(".."), "download");
        assert_eq!(offered_name("/"), "download");
        // A right-to-left override would show `invoice\u{202E}fdp.exe` as `invoiceexe.pdf`.
        assert_eq!(offered_name("invoice\u{202E}fdp.exe"), "invoice_fdp.exe");
        for hidden in [
            '\u{200B}',
            '\u{200E}',
            '\u{2066}',
            '\u{2069}',
            '\u{061C}',
            '\u{FEFF}',
            '\u{2028}',
            '\u{E0041}',
            '\u{AD}',
        ] {
            assert_eq!(offered_name(&format!("a{hidden}b")), "a_b", "U+{:04X}", hidden as u32);
        }
        assert_eq!(offered_name("résumé 日本.txt"), "résumé 日本.txt", "visible text stays");
        let long = format!("{}.tar.gz", "é".repeat(300));
        let short = offered_name(&long);
        assert!(short.len() <= MAX_NAME && short.ends_with(".gz"), "{short}");
    }
}
