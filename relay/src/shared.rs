//! The state every task of the relay shares (configuration, token, certificates, stores), and
//! the page's TLS acceptor derived from it.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use wtransport::Identity;

use crate::auth::{AuthLimiter, Token};
use crate::cert::CertManager;
use crate::config::Config;
use crate::paste::PasteStore;
use crate::state::StateStore;

/// State every task of the relay shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Config,
    pub token: Token,
    pub auth: AuthLimiter,
    pub certs: CertManager,
    /// Spawn mode only.
    pub state: Option<StateStore>,
    /// The paste directory; `None` in bridge mode without `--paste-dir`.
    pub pastes: Option<Arc<PasteStore>>,
    pub port: u16,
    pub sessions: Arc<tokio::sync::Semaphore>,
    /// Serializes spawns so `max_spawned` holds.
    pub spawn_lock: tokio::sync::Mutex<()>,
    pub shutdown: CancellationToken,
    /// HTTPS for the page, when configured.
    pub https: Option<HttpsMode>,
}

#[derive(Clone)]
pub(crate) enum HttpsMode {
    /// The user's certificate: one acceptor for ever.
    Fixed(tokio_rustls::TlsAcceptor),
    /// Follow the rotating self-signed WebTransport certificate.
    SelfSigned,
}

impl std::fmt::Debug for HttpsMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HttpsMode::Fixed(_) => "Fixed",
            HttpsMode::SelfSigned => "SelfSigned",
        })
    }
}

impl Shared {
    /// The acceptor for the next HTTPS connection; `None` when the page is served in clear.
    pub fn https_acceptor(&self) -> Option<tokio_rustls::TlsAcceptor> {
        match self.https.as_ref()? {
            HttpsMode::Fixed(a) => Some(a.clone()),
            HttpsMode::SelfSigned => tls_acceptor(&self.certs.current().identity()).ok(),
        }
    }
}

/// A rustls acceptor for the page from a wtransport identity.
pub(crate) fn tls_acceptor(
    identity: &Identity,
) -> Result<tokio_rustls::TlsAcceptor, tokio_rustls::rustls::Error> {
    use tokio_rustls::rustls;
    let certs = identity
        .certificate_chain()
        .as_slice()
        .iter()
        .map(|c| rustls::pki_types::CertificateDer::from(c.der().to_vec()))
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(
        identity.private_key().secret_der().to_vec().into(),
    );
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
