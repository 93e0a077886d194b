//! The relay's HTTP API bodies: `GET /api/info`, `GET /api/sessions`, and the error body of both.

use super::control::Mode;
use super::json::{DecodeError, Fields, ObjectWriter};
use super::line::Message;

/// `GET /api/info`: what the page needs to open WebTransport, and the relay's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayInfo {
    /// The relay's package version (for people; the page compares `protocol`).
    pub version: String,
    /// The commit the relay was built from (a short hash, or `unknown`; for people, with
    /// `version`). Empty from a relay older than the field.
    pub commit: String,
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
    /// Lines of history the relay keeps per spawned session (`history`); 0 when it keeps none
    /// (bridge mode, `--history-lines 0`): the page then scrolls only what it saw.
    pub history_lines: u64,
}

impl RelayInfo {
    /// Whether the relay serves WebTransport at all: not when it listens on a Unix socket
    /// (`--listen unix:PATH`, reached through `ssh -L`, TCP only), which it says with port 0 and
    /// no path. The page then goes straight to the WebSocket.
    pub fn has_webtransport(&self) -> bool {
        self.port != 0 && !self.webtransport_path.is_empty()
    }

    /// Which relay this is, for people (the page's settings panel): `tern-relay 0.1.0
    /// (1a2b3c4d5e6f)`, without the parentheses from a relay that does not say its commit.
    pub fn relay_build(&self) -> String {
        match self.commit.as_str() {
            "" => format!("tern-relay {}", self.version),
            commit => format!("tern-relay {} ({commit})", self.version),
        }
    }

    /// The certificate hashes as raw bytes (what `WebTransportHash.value` wants); hashes that
    /// are not base64 are skipped.
    pub fn cert_hash_bytes(&self) -> Vec<Vec<u8>> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        self.cert_hashes.iter().filter_map(|h| b64.decode(h).ok()).collect()
    }
}

/// The relay's limits, as `/api/info` reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayLimits {
    pub max_sessions: usize,
    pub max_spawned: usize,
    pub datagram_rate: u32,
    pub datagram_burst: u32,
    pub idle_timeout_secs: u64,
    pub max_control_message: usize,
}

/// Whether pasted files can be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasteInfo {
    pub available: bool,
    pub max_size: Option<u64>,
    /// Why not, when not available.
    pub reason: Option<String>,
}

/// `GET /api/sessions`: spawned mosh-servers still alive, without their keys, and where a new
/// one may be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
    /// The hosts a new session may be started on over ssh (`--ssh-host`), besides the relay's
    /// own machine.
    pub ssh_hosts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    pub port: u16,
    /// Unix seconds.
    pub created: u64,
    /// Unix seconds of the last datagram from a page (`created` when none came yet).
    pub last_active: u64,
    /// The screen's size and the title the program set, as the relay's copy of the session has
    /// them (0x0 and empty when it has none, e.g. after a relay restart before any page came).
    pub cols: u16,
    pub rows: u16,
    pub title: String,
    /// Whether a page drives it right now (resuming it elsewhere moves it away from that page).
    pub attached: bool,
    /// The `ssh_hosts` name it runs on; empty for the relay's own machine.
    pub host: String,
}

/// The body of every API error (401, 404, 405, 429).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// `bad_token`, `rate_limited`, `bad_request`, `not_found`.
    pub error: String,
    pub message: String,
    pub retry_after_secs: Option<u64>,
}

impl Message for RelayInfo {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        let l = &self.limits;
        w.str("version", &self.version)
            .str("commit", &self.commit)
            .u64("protocol", self.protocol.into())
            .str("mode", self.mode.as_str())
            .u64("port", self.port.into())
            .str("webtransport_path", &self.webtransport_path)
            .strings("cert_hashes", &self.cert_hashes)
            .str("cert_hash_algorithm", &self.cert_hash_algorithm)
            .bool("cert_self_signed", self.cert_self_signed)
            .u64("framing", self.framing.into())
            .u64("max_datagram_size", self.max_datagram_size as u64)
            .object("limits", |w| {
                w.u64("max_sessions", l.max_sessions as u64)
                    .u64("max_spawned", l.max_spawned as u64)
                    .u64("datagram_rate", l.datagram_rate.into())
                    .u64("datagram_burst", l.datagram_burst.into())
                    .u64("idle_timeout_secs", l.idle_timeout_secs)
                    .u64("max_control_message", l.max_control_message as u64);
            })
            .object("paste", |w| {
                w.bool("available", self.paste.available)
                    .opt_u64("max_size", self.paste.max_size)
                    .opt_str("reason", self.paste.reason.as_deref());
            })
            .strings("bridge_allow", &self.bridge_allow)
            .u64("history_lines", self.history_lines);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        let l = f.object("limits")?;
        let p = f.object("paste")?;
        let mode = f.str("mode")?;
        Ok(RelayInfo {
            version: f.str("version")?,
            // Optional: a relay from before the field still connects.
            commit: f.opt_str("commit")?.unwrap_or_default(),
            protocol: f.int("protocol")?,
            mode: Mode::parse(&mode).ok_or(DecodeError::data("unknown value", "mode"))?,
            port: f.int("port")?,
            webtransport_path: f.str("webtransport_path")?,
            cert_hashes: f.strings("cert_hashes")?,
            cert_hash_algorithm: f.str("cert_hash_algorithm")?,
            cert_self_signed: f.bool("cert_self_signed")?,
            framing: f.int("framing")?,
            max_datagram_size: f.int("max_datagram_size")?,
            limits: RelayLimits {
                max_sessions: l.int("max_sessions")?,
                max_spawned: l.int("max_spawned")?,
                datagram_rate: l.int("datagram_rate")?,
                datagram_burst: l.int("datagram_burst")?,
                idle_timeout_secs: l.u64("idle_timeout_secs")?,
                max_control_message: l.int("max_control_message")?,
            },
            paste: PasteInfo {
                available: p.bool("available")?,
                max_size: p.opt_u64("max_size")?,
                reason: p.opt_str("reason")?,
            },
            bridge_allow: f.strings("bridge_allow")?,
            history_lines: f.u64("history_lines")?,
        })
    }
}

impl Message for SessionList {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.objects("sessions", &self.sessions, |w, s| {
            w.str("id", &s.id)
                .u64("port", s.port.into())
                .u64("created", s.created)
                .u64("last_active", s.last_active)
                .u64("cols", s.cols.into())
                .u64("rows", s.rows.into())
                .str("title", &s.title)
                .bool("attached", s.attached)
                .str("host", &s.host);
        })
        .strings("ssh_hosts", &self.ssh_hosts);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        let sessions = f
            .array("sessions")?
            .iter()
            .map(|v| {
                let s = Fields::of(v, "sessions")?;
                Ok(SessionSummary {
                    id: s.str("id")?,
                    port: s.int("port")?,
                    created: s.u64("created")?,
                    last_active: s.u64("last_active")?,
                    cols: s.int("cols")?,
                    rows: s.int("rows")?,
                    title: s.str("title")?,
                    attached: s.bool("attached")?,
                    host: s.str("host")?,
                })
            })
            .collect::<Result<_, DecodeError>>()?;
        Ok(SessionList { sessions, ssh_hosts: f.strings("ssh_hosts")? })
    }
}

impl Message for ApiError {
    fn write(&self, w: &mut ObjectWriter<'_>) {
        w.str("error", &self.error)
            .str("message", &self.message)
            .opt_u64("retry_after_secs", self.retry_after_secs);
    }

    fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
        Ok(ApiError {
            error: f.str("error")?,
            message: f.str("message")?,
            retry_after_secs: f.opt_u64("retry_after_secs")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay_proto::{decode, encode};

    fn info() -> RelayInfo {
        RelayInfo {
            version: "0.1.0".into(),
            commit: "1a2b3c4d5e6f".into(),
            protocol: 5,
            mode: Mode::Bridge,
            port: 7480,
            webtransport_path: "/wt".into(),
            cert_hashes: Vec::new(),
            cert_hash_algorithm: "sha-256".into(),
            cert_self_signed: false,
            framing: 1,
            max_datagram_size: 1211,
            limits: RelayLimits {
                max_sessions: 1,
                max_spawned: 1,
                datagram_rate: 1,
                datagram_burst: 1,
                idle_timeout_secs: 1,
                max_control_message: 4096,
            },
            paste: PasteInfo { available: false, max_size: None, reason: None },
            bridge_allow: Vec::new(),
            history_lines: 0,
        }
    }

    #[test]
    fn a_relay_on_a_unix_socket_offers_no_webtransport() {
        let mut i = info();
        assert!(i.has_webtransport());
        i.port = 0;
        i.webtransport_path.clear();
        assert!(!i.has_webtransport());
    }

    #[test]
    fn the_commit_travels_and_an_older_relay_without_it_still_decodes() {
        let info = info();
        let line = String::from_utf8(encode(&info)).unwrap();
        assert!(line.starts_with(r#"{"version":"0.1.0","commit":"1a2b3c4d5e6f","#), "{line}");
        assert_eq!(decode::<RelayInfo>(line.as_bytes()).unwrap(), info);
        assert_eq!(info.relay_build(), "tern-relay 0.1.0 (1a2b3c4d5e6f)");
        let older = line.replace(r#""commit":"1a2b3c4d5e6f","#, "");
        let older = decode::<RelayInfo>(older.as_bytes()).unwrap();
        assert_eq!(older.commit, "");
        assert_eq!(older.relay_build(), "tern-relay 0.1.0");
    }
}
