//! What the page shows about the connection: one enum, formatted by the page.

use crate::relay_proto::ErrorCode;

/// Why connecting cannot succeed without the person doing something.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FailCode {
    /// The token is missing or wrong.
    BadToken,
    /// Too many wrong tokens from this address.
    RateLimited,
    /// The browser has no WebTransport.
    NoWebTransport,
    /// The page and the relay are different builds: reload.
    VersionMismatch,
    /// A bridge-mode relay, and the address names no mosh-server.
    BridgeNeedsTarget,
    /// The relay sent no session key, or a malformed one.
    BadKey,
    /// What answered at the relay's address did not prove it knows the token (nothing was sent).
    RelayNotVerified,
    /// The relay refused for another reason.
    Refused(ErrorCode),
}

impl FailCode {
    /// The wire-style name (`bad_token`, …), for tests and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            FailCode::BadToken => "bad_token",
            FailCode::RateLimited => "rate_limited",
            FailCode::NoWebTransport => "no_webtransport",
            FailCode::VersionMismatch => "version_mismatch",
            FailCode::BridgeNeedsTarget => "bridge_needs_target",
            FailCode::BadKey => "bad_key",
            FailCode::RelayNotVerified => "relay_not_verified",
            FailCode::Refused(code) => code.as_str(),
        }
    }

    /// The relay's refusal as a failure; the codes the page knows by name get theirs.
    pub fn from_refusal(code: ErrorCode) -> FailCode {
        match code {
            ErrorCode::BadToken => FailCode::BadToken,
            ErrorCode::RateLimited => FailCode::RateLimited,
            ErrorCode::VersionMismatch => FailCode::VersionMismatch,
            other => FailCode::Refused(other),
        }
    }
}

/// Where the connection stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Connecting,
    /// A new session is live.
    Connected,
    /// The session continues on a new connection (after a reconnect or a relay restart).
    Resumed,
    /// The link is gone; the page is trying again.
    Reconnecting,
    /// The shell exited or the session was closed: over for good.
    Ended,
    /// Another page took the session over; this one waits to be asked to take it back.
    Moved,
    /// Bridge mode: the mosh-server has had a client, and this tab saved nothing to continue it.
    CannotResume,
    /// Retrying cannot help.
    Failed(FailCode),
}

impl Status {
    /// No more reconnects (until the person asks, for `Moved`).
    pub fn is_final(self) -> bool {
        matches!(self, Status::Ended | Status::Failed(_) | Status::Moved | Status::CannotResume)
    }

    /// The session's phase as `stats().phase` names it (coarser than the status: a resumed and
    /// a new session are both live).
    pub fn phase(self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Connected | Status::Resumed => "live",
            Status::Reconnecting => "reconnecting",
            Status::Ended => "ended",
            Status::Moved => "moved",
            Status::CannotResume => "cannot_resume",
            Status::Failed(_) => "failed",
        }
    }
}
