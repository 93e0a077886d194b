//! The page-relay protocol, typed once: tern-relay and the browser client both use these types.
//!
//! ```text
//!  page ──POST /api/challenge, then GET /api/info (Tern proof)──▶ relay  proof, info::RelayInfo
//!    (every API request: a challenge first, the relay proving it knows the token; proof.rs)
//!  page ══WebTransport /wt════════════════▶ relay
//!    control stream (first bidi):  greet ▶ challenge; hello(proof) ▶ ready | error;   control
//!                                  ping ▶ pong;  ◀ ended
//!    datagrams: page→relay raw mosh datagrams; relay→page framed                      framing
//!    every further bidi stream: one paste upload, or one download (`tern send`)       upload, offer
//!    control stream after ready: ◀ offer (a file or URL from the shell) ▶ answer     offer
//!                                  ◀ clipboard, notify (OSC mosh drops; owner only)  signal
//!  page ─POST /api/history, /api/history/search (Tern proof)─▶ relay: pages, matches  history
//!  page ══WebSocket /ws (when WebTransport cannot work)══▶ relay: the same, as frames   websocket
//! ```
//!
//! Every message is one line of JSON ([`line`], written and read by hand in [`json`]); a renamed
//! field is a compile error on both sides, because both sides use the same struct.
//! [`PROTOCOL_VERSION`] changes whenever a message changes incompatibly: the page sends it in
//! `hello`, `/api/info` reports the relay's; either side refuses a mismatch with a clear message
//! (a page cached from an older relay must say "reload", not run a broken session). `ready`
//! carries the datagram framing's own version.
//!
//! No I/O here: the relay wraps these in tokio streams, the page in WHATWG streams.

pub mod control;
pub mod framing;
pub mod history;
pub mod image;
pub mod info;
pub mod json;
pub mod line;
pub mod link_hint;
pub mod offer;
pub mod point;
pub mod proof;
pub mod sha256;
pub mod share;
pub mod signal;
pub mod upload;
pub mod websocket;

pub use control::{ClientMessage, ErrorCode, FeaturesOff, Hello, Mode, ServerMessage};
pub use history::{
    HISTORY_PATH, HISTORY_SEARCH_PATH, HistoryPage, HistoryRequest, HistorySearch,
    HistorySearchResult, SearchHit,
};
pub use image::{IMAGE_PATH, ImageInfo, ImageRequest, NEXT_IMAGE};
pub use info::{ApiError, PasteInfo, RelayInfo, RelayLimits, SessionList, SessionSummary};
pub use json::DecodeError;
pub use line::{LineBuffer, LineError, Message, decode, encode, encode_line};
pub use link_hint::{LINK_HINT_TIMING, LinkHint};
pub use offer::{
    DownloadAck, DownloadReply, DownloadRequest, Offer, OfferAnswer, Offered, StreamRequest,
};
pub use point::CarriedPoint;
pub use proof::{CHALLENGE_PATH, Challenge, ChallengeRequest, Proof, ProofNonce, Prover};
pub use sha256::{NotSha256, RunningSha256, Sha256};
pub use share::{SHARE_PATH, ShareReply, ShareRequest};
pub use signal::PageSignal;
pub use upload::{AckPolicy, UploadErrorCode, UploadHeader, UploadReply};

/// Version of the whole page-relay protocol (control messages, info, upload stream, framing).
/// Both ends are built from this crate; a mismatch means a page from another relay build.
pub const PROTOCOL_VERSION: u32 = 8;

/// Path of the WebTransport endpoint (`https://HOST:PORT/wt`).
pub const WEBTRANSPORT_PATH: &str = "/wt";

/// Path of the relay's info route.
pub const INFO_PATH: &str = "/api/info";
/// The running sessions (spawn mode), for a page with nothing saved to choose from.
pub const SESSIONS_PATH: &str = "/api/sessions";

pub use websocket::WEBSOCKET_PATH;
