//! The relay's HTTP API bodies: `GET /api/info`, `GET /api/sessions`, and the error body of both.

use serde::{Deserialize, Serialize};

use super::control::Mode;

/// `GET /api/info`: what the page needs to open WebTransport, and the relay's limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayInfo {
    /// The relay's package version (for people; the page compares `protocol`).
    pub version: String,
    /// [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION) of the relay.
    pub protocol: u32,
    pub mode: Mode,
    /// The port of both TCP (this page) and UDP (WebTransport).
    pub port: u16,
    pub webtransport_path: String,
    /// Base64 SHA-256 of each WebTransport certificate currently valid (self-signed only).
    pub cert_hashes: Vec<String>,
    pub cert_hash_algorithm: String,
    pub cert_self_signed: bool,
    /// [`FRAMING_VERSION`](super::framing::FRAMING_VERSION) of relay→page datagrams.
    pub framing: u8,
    pub max_datagram_size: usize,
    pub limits: RelayLimits,
    pub paste: PasteInfo,
    /// Bridge mode's allowlist as `HOST:LOW-HIGH`.
    pub bridge_allow: Vec<String>,
}

impl RelayInfo {
    /// The certificate hashes as raw bytes (what `WebTransportHash.value` wants); hashes that
    /// are not base64 are skipped.
    pub fn cert_hash_bytes(&self) -> Vec<Vec<u8>> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        self.cert_hashes.iter().filter_map(|h| b64.decode(h).ok()).collect()
    }
}

/// The relay's limits, as `/api/info` reports them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayLimits {
    pub max_sessions: usize,
    pub max_spawned: usize,
    pub datagram_rate: u32,
    pub datagram_burst: u32,
    pub idle_timeout_secs: u64,
    pub max_control_message: usize,
}

/// Whether pasted files can be stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasteInfo {
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u64>,
    /// Why not, when not available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `GET /api/sessions`: spawned mosh-servers still alive, without their keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub id: String,
    pub port: u16,
    /// Unix seconds.
    pub created: u64,
}

/// The body of every API error (401, 404, 405, 429).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// `bad_token`, `rate_limited`, `bad_request`, `not_found`.
    pub error: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
}
