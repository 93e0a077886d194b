//! What every session task shares: the session layer's settings, the token and its limiter, the
//! stores of sessions, pastes and offers, and the slots that bound what browsers can hold.

use std::sync::Arc;
use std::time::Duration;

use tern::relay_proto::control::MAX_MESSAGE;
use tern::relay_proto::framing::FRAMING_VERSION;
use tern::relay_proto::{
    Mode, PROTOCOL_VERSION, PasteInfo, RelayInfo, RelayLimits, WEBTRANSPORT_PATH,
};
use tokio::sync::{Mutex, Semaphore};

use super::slots::HandshakeSlots;
use tokio_util::sync::CancellationToken;

use super::target::TargetSettings;
use crate::auth::{AuthLimiter, Token};
use crate::paste::PasteStore;
use crate::registry::Registry;
use crate::security::AllowedOrigin;
use crate::send::Offers;
use crate::spawn::ssh::SshHosts;
use crate::state::StateStore;
use crate::tls::cert::CertManager;

/// The session layer's settings, made from the relay's configuration by the top of the relay.
#[derive(Debug, Clone)]
pub(crate) struct SessionSettings {
    /// Spawn or bridge (`--bridge`).
    pub mode: Mode,
    /// `--handshake-timeout-secs`: each step from a connection attempt to its hello.
    pub handshake_timeout: Duration,
    /// `--max-sessions`: browser sessions at once.
    pub max_sessions: usize,
    /// `--allow-origin`: page origins allowed besides the relay's own.
    pub allow_origin: Vec<AllowedOrigin>,
    /// The `Host` names answered (DNS rebinding): loopback names, `--allow-host`, the
    /// certificate's names.
    pub host_policy: crate::security::HostPolicy,
    /// `--max-datagram-size`: the relay's cap on relay→browser datagrams.
    pub max_datagram_size: usize,
    /// `--datagram-rate` and `--datagram-burst`: each session's token bucket for browser→server
    /// datagrams.
    pub datagram_rate: u32,
    pub datagram_burst: u32,
    /// `--idle-timeout-secs`: a session whose browser sent no datagram this long is closed.
    pub idle_timeout: Duration,
    /// Where sessions' datagrams go.
    pub targets: TargetSettings,
    /// `--trust-proxy` with `--identity-header`: a WebTransport CONNECT through such a proxy
    /// names its person as an HTTP request does.
    pub front_door: crate::security::FrontDoor,
}

/// What every session task shares.
#[derive(Debug)]
pub(crate) struct SessionContext {
    pub settings: SessionSettings,
    pub token: Token,
    /// Named tokens (`tern-relay token`), read again when their file changes.
    pub tokens: Arc<crate::tokens::TokenStore>,
    /// The audit trail (`audit.log` in the state directory).
    pub audit: Arc<crate::audit::Audit>,
    pub auth: AuthLimiter,
    /// Spawn mode only.
    pub state: Option<Arc<StateStore>>,
    /// Who drives each mosh-server, nonce bounds, the relay's copies of sessions.
    pub registry: Registry,
    /// The paste directory; `None` in bridge mode without `--paste-dir`.
    pub pastes: Option<Arc<PasteStore>>,
    /// What shells sent to their browsers (`tern send`, `tern open`), by session.
    pub offers: Arc<Offers>,
    /// The hosts of `--ssh-host` (spawn mode): sessions started there over ssh.
    pub ssh: Option<Arc<SshHosts>>,
    /// `--max-sessions`: held from an admitted hello to the session's end.
    pub sessions: Arc<Semaphore>,
    /// `--max-handshakes`, `--max-authenticated-handshakes`, `--max-handshakes-per-source`:
    /// held from a QUIC connection attempt or a WebSocket upgrade until its hello is admitted or
    /// refused.
    pub handshakes: Arc<HandshakeSlots>,
    /// The warm spare mosh-server (spawn mode, unless `--no-spare`).
    pub spare: super::Spare,
    /// The certificates WebTransport shows, whose hashes the relay's info names.
    pub certs: Arc<CertManager>,
    /// The UDP port WebTransport listens on (the relay's port); 0 when it has none
    /// (`--listen unix:PATH`).
    pub webtransport_port: u16,
    /// Serializes spawns so `--max-spawned` holds.
    pub spawn_lock: Mutex<()>,
    pub shutdown: CancellationToken,
}

impl SessionContext {
    /// What a page needs to know of this relay: where WebTransport listens and with which
    /// certificate hashes, the mode, the limits. `/api/info` answers it, and every `ready` carries
    /// it, so a page whose hello went out before the info came needs no other round trip.
    pub fn relay_info(&self) -> RelayInfo {
        let c = &self.settings;
        let port = self.webtransport_port;
        RelayInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            commit: crate::version::COMMIT.into(),
            protocol: PROTOCOL_VERSION,
            mode: c.mode,
            // Port 0, no path and no hashes: no WebTransport (`--listen unix:PATH`); the page
            // opens the WebSocket fallback.
            port,
            webtransport_path: if port == 0 { String::new() } else { WEBTRANSPORT_PATH.into() },
            cert_hashes: if port == 0 { Vec::new() } else { self.certs.hashes() },
            cert_hash_algorithm: "sha-256".into(),
            cert_self_signed: self.certs.is_self_signed(),
            framing: FRAMING_VERSION,
            max_datagram_size: c.max_datagram_size,
            limits: RelayLimits {
                max_sessions: c.max_sessions,
                max_spawned: c.targets.max_spawned,
                datagram_rate: c.datagram_rate,
                datagram_burst: c.datagram_burst,
                idle_timeout_secs: c.idle_timeout.as_secs(),
                max_control_message: MAX_MESSAGE,
            },
            paste: match &self.pastes {
                Some(p) => {
                    PasteInfo { available: true, max_size: Some(p.limits().max_size), reason: None }
                }
                None => PasteInfo {
                    available: false,
                    max_size: None,
                    reason: Some("this relay runs in bridge mode without --paste-dir".into()),
                },
            },
            bridge_allow: c
                .targets
                .allow
                .iter()
                .map(|r| format!("{}:{}-{}", r.host, r.ports.low, r.ports.high))
                .collect(),
            history_lines: if self.state.is_some() { c.targets.history_lines as u64 } else { 0 },
        }
    }

    /// Who a proof names (`token_id`: a named token's id; none: the owner) and the HMAC key it
    /// is made under; `None` for an id no live token has (revoked, expired, never made).
    pub fn key_for(&self, token_id: Option<&str>) -> Option<(crate::tokens::Who, Vec<u8>)> {
        use tern::relay_proto::proof;
        let owner = self.token.expose();
        match token_id {
            // An owner who chose a token of the named form proves as the page computes it.
            Some(id) if proof::token_id(owner) == Some(id) => {
                Some((crate::tokens::Who::Owner, proof::proof_key(owner)))
            }
            None => Some((crate::tokens::Who::Owner, proof::proof_key(owner))),
            Some(id) => self.tokens.key(id).map(|(who, key)| (who, key.to_vec())),
        }
    }

    /// A native client's plain token (a hello's, `?token=`, a subprotocol's, `Bearer`): whose it
    /// is, judged as a credential.
    pub fn check_plain(
        &self,
        candidate: Option<&str>,
    ) -> (crate::auth::Credential, Option<crate::tokens::Who>) {
        use crate::auth::Credential;
        match candidate {
            None => (Credential::Absent, None),
            Some(c) if self.token.matches(c) => {
                (Credential::Right, Some(crate::tokens::Who::Owner))
            }
            Some(c) => match self.tokens.check_plain(c) {
                Some(who) => (Credential::Right, Some(who)),
                None => (Credential::Wrong, None),
            },
        }
    }
}
