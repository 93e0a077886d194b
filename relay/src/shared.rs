//! The state every task of the relay shares (configuration, token, certificates, stores).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::auth::{AuthLimiter, Token};
use crate::cert::CertManager;
use crate::config::Config;
use crate::paste::PasteStore;
use crate::registry::Registry;
use crate::ssh::SshHosts;
use crate::state::StateStore;

/// State every task of the relay shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Config,
    pub token: Token,
    pub auth: AuthLimiter,
    pub certs: Arc<CertManager>,
    /// Spawn mode only.
    pub state: Option<StateStore>,
    /// Who drives each mosh-server, nonce bounds, the relay's copies of sessions.
    pub registry: Registry,
    /// The paste directory; `None` in bridge mode without `--paste-dir`.
    pub pastes: Option<Arc<PasteStore>>,
    /// What shells sent to their browsers (`tern send`, `tern open`), by session.
    pub offers: Arc<crate::send::Offers>,
    /// The hosts of `--ssh-host` (spawn mode): sessions started there over ssh.
    pub ssh: Option<Arc<SshHosts>>,
    pub port: u16,
    /// `--max-sessions`: held from an admitted hello to the session's end.
    pub sessions: Arc<tokio::sync::Semaphore>,
    /// `--max-handshakes`: held from a QUIC connection attempt or a WebSocket upgrade until its
    /// hello is admitted or refused.
    pub handshakes: Arc<tokio::sync::Semaphore>,
    /// `--max-http-connections`: held by each TCP connection until it closes or is upgraded.
    pub http_connections: Arc<tokio::sync::Semaphore>,
    /// Serializes spawns so `max_spawned` holds.
    pub spawn_lock: tokio::sync::Mutex<()>,
    pub shutdown: CancellationToken,
    /// HTTPS for the page, when configured (see [`CertManager::tls_acceptor`]).
    pub https: Option<Https>,
}

impl Shared {
    /// The acceptor for the next HTTPS connection; `None` when the page is served in clear.
    /// It asks the certificate manager for the current certificate at every handshake.
    pub fn https_acceptor(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.https.as_ref().map(|h| h.0.clone())
    }
}

/// The page's TLS acceptor.
pub(crate) struct Https(pub tokio_rustls::TlsAcceptor);

impl std::fmt::Debug for Https {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Https")
    }
}
