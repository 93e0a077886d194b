//! The page's side of talking to tern-relay, sans-IO: what to say, how to read the answers, when to
//! retry, and what to tell the person. The browser package performs the requests; the relay's
//! tests run this same code against a real relay, so page and relay cannot drift apart.
//!
//! ```text
//!  fragment_params(location.hash): the printed URL's token, host, port and key (`+` kept)
//!  GET /api/info ─▶ info_response(status, body) ─▶ RelayInfo | ConnectError
//!  check_info(info, target) ─▶ the relay is one this page can use (version, mode)
//!  Verifier: greet / POST /api/challenge ─▶ the relay proves the token ─▶ the page's proof
//!  Target::hello(..) ─▶ Hello (+ proof) ─▶ [control stream] ─▶ ServerMessage ─▶ answer() ─▶ Ready | ConnectError
//!  Target::session_key(ready) ─▶ the mosh key (the relay's in spawn mode, the page's in bridge mode)
//!  Backoff: pauses between attempts; Status: what the page shows
//!  StorageSeal: what the tab keeps, sealed under a key derived from the token
//!  SavedSession: what the tab keeps so a reload continues the shell (session id, key, ResumePoint)
//!  takeover(local, ready): continue from the tab's point or the relay's copy of the session
//! ```

mod address;
mod backoff;
mod connect;
mod liveness;
mod saved;
mod sealed;
mod status;
mod takeover;
mod verify;

pub use address::{fragment_params, key_text, page_dir, route_under_page};
pub use backoff::{BACKOFF_FIRST, BACKOFF_MAX, Backoff, STABLE_LINK};
pub use connect::{
    ConnectError, ControlEvent, Target, answer, check_info, control_after_ready, history_response,
    info_response, parse_mosh_connect, sessions_response, webtransport_patience,
};
pub use liveness::{LINK_DEADLINE, LinkCheck, Liveness, PING_AFTER};
pub use saved::SavedSession;
pub use sealed::StorageSeal;
pub use status::{FailCode, Status};
pub use takeover::{Takeover, decode_point, describe_takeover, encode_point, takeover};
pub use verify::{API_ATTEMPTS, NOT_VERIFIED, Verifier};
