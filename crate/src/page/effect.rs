//! What the page client asks its driver to do, in the order it must be done.

use crate::download::FileOffer;
use crate::paste::PasteProgress;
use crate::relay_client::{SavedSession, Status};
use crate::relay_proto::ClientMessage;

/// Names a link the driver opened for the client ([`PageClient::link_up`](super::PageClient)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkId(pub u64);

/// One step on a stream the client asked for (an upload or a download).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamStep {
    /// Write these bytes.
    Write(Vec<u8>),
    /// Finish the writing side and stop reading: the stream did its job.
    Close,
    /// Reset the stream and stop reading.
    Abort,
    /// Stop reading; the writing side stays until `Close` or `Abort`.
    StopReading,
}

/// One thing for the driver to do. Drained with
/// [`PageClient::poll_effect`](super::PageClient::poll_effect) after every input, and done in
/// this order: a nonce reservation comes before the datagrams it covers, a hold's release before
/// the key that ended it.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Reach the relay: `/api/info`, the link, `hello`; then
    /// [`PageClient::info`](super::PageClient::info) and
    /// [`PageClient::link_up`](super::PageClient::link_up), or
    /// [`PageClient::connect_failed`](super::PageClient::connect_failed).
    Connect,
    /// Send this datagram on the current link (never awaited).
    Datagram(Vec<u8>),
    /// Send this control message on the current link.
    Control(ClientMessage),
    /// Close the current link; [`PageClient::link_lost`](super::PageClient::link_lost) follows
    /// when its datagrams end.
    CloseLink,
    /// Keep these nonce bounds for the session key `key_text` (the tab's storage) before
    /// anything that follows leaves: a reload starts above them.
    ReserveNonces {
        key_text: String,
        seq: u64,
        fragment_id: u64,
    },
    /// Keep this for a reload to continue (the tab's storage).
    SaveSession(SavedSession),
    /// Forget what was saved for this session (all saved sessions when `None`).
    ForgetSession(Option<String>),
    /// Write these bytes to the terminal (xterm.js).
    Write(Vec<u8>),
    /// Ask for an animation frame, then call
    /// [`PageClient::animation_frame`](super::PageClient::animation_frame).
    RequestFrame,
    /// The page's hooks.
    Status {
        status: Status,
        message: String,
    },
    SessionId(String),
    /// How the session reaches the relay now: `webtransport` or `websocket`; `fallback`: the
    /// WebSocket stands in for a WebTransport the relay offers (UDP blocked, say), as opposed to a
    /// relay that has none (on a Unix socket behind `ssh -L`).
    LinkKind {
        kind: &'static str,
        fallback: bool,
    },
    Title(String),
    Bell,
    /// The relay refused what this link asked (a read-only token's typing, say): say why.
    Refused(String),
    /// A viewer's link: resize the terminal to `cols` x `rows` and reset it when `full`, then
    /// write `data` (the relay's render of the session's screen; the page never resizes the
    /// session, it scales its terminal to fit).
    ViewerScreen(crate::session::ScreenUpdate),
    /// The owner's link: how many viewers watch this session now.
    Viewers(u32),
    /// A viewer's link is up: whose session it watches (a token's name, `proxy:USER`, `owner`).
    ViewerOf(String),
    /// A program wrote the clipboard (OSC 52): what the page does about it, decided.
    Clipboard(super::RemoteCopy),
    /// A program asked for a notification (OSC 9 / 777, through the recorder): the page shows
    /// it when its setting allows and the tab is hidden.
    Notify {
        title: String,
        body: String,
    },
    /// A program printed `text` at column `col` as a hyperlink to `url` (OSC 8, through the
    /// recorder; the URL is one a page may open): the page makes it a link where its row shows it.
    Link {
        url: String,
        text: String,
        col: u16,
    },
    PasteProgress(Option<PasteProgress>),
    Flooding(bool),
    /// The shell offers a URL to open (`tern open`): the page asks the person.
    OfferUrl {
        id: String,
        url: String,
    },
    /// Open an upload stream for the active paste `serial`, then
    /// [`PageClient::upload_opened`](super::PageClient::upload_opened).
    OpenUpload {
        serial: u32,
    },
    Upload {
        serial: u32,
        step: StreamStep,
    },
    /// Open a download stream and write `request` on it, then
    /// [`PageClient::download_started`](super::PageClient::download_started) with its first
    /// line. `from_start`: the bytes kept so far are void.
    OpenDownload {
        serial: u32,
        request: Vec<u8>,
        from_start: bool,
    },
    Download {
        serial: u32,
        step: StreamStep,
    },
    /// Every byte of `offer` is here: hash what was kept, save it when it matches, then
    /// [`PageClient::download_verified`](super::PageClient::download_verified).
    VerifyDownload(FileOffer),
    /// One line for whoever debugs the page (the browser's console).
    Log(String),
}
