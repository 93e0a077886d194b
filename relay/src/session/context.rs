//! What every session task shares: the session layer's settings, the token and its limiter, the
//! stores of sessions, pastes and offers, and the slots that bound what browsers can hold.

use std::sync::Arc;
use std::time::Duration;

use tern::relay_proto::Mode;
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
    /// Serializes spawns so `--max-spawned` holds.
    pub spawn_lock: Mutex<()>,
    pub shutdown: CancellationToken,
}

impl SessionContext {
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
