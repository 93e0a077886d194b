//! `--acme DOMAIN`: a certificate from an ACME CA (Let's Encrypt by default), obtained with the
//! `instant-acme` client and renewed when a third of its lifetime is left (30 days of Let's
//! Encrypt's 90; a short-lived certificate renews just as early in proportion).
//!
//! The challenge is TLS-ALPN-01 (RFC 8737), answered on the relay's own TCP port: the CA opens a
//! TLS connection to DOMAIN:443 offering only the ALPN protocol `acme-tls/1`, and the page's
//! HTTPS acceptor ([`super::cert::CertManager::tls_acceptor`]) answers that one with a certificate
//! carrying the challenge's digest. So the person opens TCP 443 to the relay's port (and the UDP
//! port for WebTransport) and nothing else; HTTP-01 would need port 80 as well.
//!
//! The account key and the certificate with its key live in `<state-dir>/acme/` (0700, files
//! 0600), so a restart reuses both instead of asking the CA again. Until the first certificate
//! arrives a self-signed placeholder serves.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, anyhow, bail};
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, OrderStatus, RetryPolicy,
};
use sha2::Digest;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::PrivateKeyDer;
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;
use wtransport::Identity;

use super::cert::{CertInfo, CertManager};

/// First wait after a failed attempt; doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// Re-check at least this often: a suspended machine's timers may sleep through the due time.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// What `--acme*` asked for.
#[derive(Debug, Clone)]
pub struct AcmeSettings {
    pub domains: Vec<String>,
    pub email: Option<String>,
    pub directory: String,
    pub ca_root: Option<PathBuf>,
    /// `<state-dir>/acme`.
    pub dir: PathBuf,
}

impl AcmeSettings {
    /// The settings for `domains` (at least one; names are compared in lower case), kept under
    /// `state_dir`; a name that is not a domain is refused.
    pub fn new(
        domains: &[String],
        email: Option<String>,
        directory: String,
        ca_root: Option<PathBuf>,
        state_dir: &Path,
    ) -> Result<AcmeSettings, String> {
        let domains: Vec<String> = domains.iter().map(|d| d.trim().to_ascii_lowercase()).collect();
        if let Some(bad) = domains.iter().find(|d| !valid_domain(d)) {
            return Err(format!("--acme {bad:?} is not a domain name"));
        }
        if domains.is_empty() {
            return Err("--acme needs a domain".into());
        }
        Ok(AcmeSettings { domains, email, directory, ca_root, dir: state_dir.join("acme") })
    }

    /// The certificate chain (PEM) for these domains.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.join(format!("{}.crt.pem", self.domains[0]))
    }

    /// Its private key (PEM).
    pub fn key_path(&self) -> PathBuf {
        self.dir.join(format!("{}.key.pem", self.domains[0]))
    }

    /// The account's credentials for this directory (an account belongs to one CA).
    pub fn account_path(&self) -> PathBuf {
        let digest: [u8; 32] = sha2::Sha256::digest(self.directory.as_bytes()).into();
        let hex = tern::relay_proto::Sha256(digest).to_string();
        self.dir.join(format!("account-{}.json", &hex[..12]))
    }
}

fn valid_domain(d: &str) -> bool {
    !d.is_empty()
        && d.len() <= 253
        && d.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// The certificate of an earlier run, if it is there, names every domain and has not expired.
pub async fn load_cached(s: &AcmeSettings) -> Option<Identity> {
    let (cert, key) = (s.cert_path(), s.key_path());
    if !cert.exists() || !key.exists() {
        return None;
    }
    let identity = match Identity::load_pemfiles(&cert, &key).await {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!("cannot read the cached ACME certificate {}: {e}", cert.display());
            return None;
        }
    };
    let info = CertInfo::new(identity.clone_identity(), false, std::time::Instant::now()).ok()?;
    let unexpired = info.not_after.is_some_and(|t| t > SystemTime::now());
    (unexpired && info.covers(&s.domains)).then_some(identity)
}

/// How long until `current` should be replaced: now for a placeholder, a certificate that does
/// not name every domain or one whose validity is unknown; else when a third of its lifetime is
/// left.
pub fn renewal_due_in(current: &CertInfo, domains: &[String], now: SystemTime) -> Duration {
    if current.self_signed || !current.covers(domains) {
        return Duration::ZERO;
    }
    let (Some(nb), Some(na)) = (current.not_before, current.not_after) else {
        return Duration::ZERO;
    };
    let lifetime = na.duration_since(nb).unwrap_or_default();
    let renew_at = na - lifetime / 3;
    renew_at.duration_since(now).unwrap_or_default()
}

/// Keeps a CA certificate in place: obtains one when none is, renews it when due; `apply` hands
/// each new identity to WebTransport. Failures are logged and retried with backoff (30 s doubling
/// to an hour) while the current certificate keeps serving. Ends at shutdown.
pub async fn run(
    s: AcmeSettings,
    certs: Arc<CertManager>,
    apply: impl Fn(Identity),
    shutdown: CancellationToken,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let wait = renewal_due_in(&certs.current(), &s.domains, SystemTime::now());
        if !wait.is_zero() {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait.min(MAX_SLEEP)) => {}
            }
            continue;
        }
        let (domains, directory) = (&s.domains, &s.directory);
        tracing::info!(?domains, %directory, "ACME: requesting a certificate");
        let attempt = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = obtain(&s, &certs) => r,
        };
        let installed = attempt.and_then(|id| certs.install(id).map_err(anyhow::Error::from));
        match installed {
            Ok(identity) => {
                let c = certs.current();
                tracing::info!(
                    domains = ?s.domains,
                    until = %c.not_after.map(fmt_time).unwrap_or_default(),
                    renew_in_secs = renewal_due_in(&c, &s.domains, SystemTime::now()).as_secs(),
                    "ACME: new certificate in use"
                );
                apply(identity);
                backoff = FIRST_BACKOFF;
            }
            Err(e) => {
                tracing::error!(
                    "ACME: no certificate ({e:#}); trying again in {}s",
                    backoff.as_secs()
                );
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

fn fmt_time(t: SystemTime) -> String {
    time::OffsetDateTime::from(t).to_string()
}

/// One order: account, TLS-ALPN-01 for each domain, finalize, download; saved to the cache.
async fn obtain(s: &AcmeSettings, certs: &CertManager) -> anyhow::Result<Identity> {
    crate::state::ensure_private_dir(&s.dir, crate::state::DirRole::State)?;
    let account = account(s).await?;
    let identifiers: Vec<Identifier> = s.domains.iter().cloned().map(Identifier::Dns).collect();
    let mut order =
        account.new_order(&NewOrder::new(&identifiers)).await.context("creating the order")?;
    let mut answered = Vec::new();
    let result = async {
        {
            let mut authorizations = order.authorizations();
            while let Some(authz) = authorizations.next().await {
                let mut authz = authz.context("reading an authorization")?;
                match authz.status {
                    AuthorizationStatus::Pending => {}
                    AuthorizationStatus::Valid => continue,
                    other => bail!("authorization is {other:?}"),
                }
                let mut challenge = authz
                    .challenge(ChallengeType::TlsAlpn01)
                    .ok_or_else(|| anyhow!("the CA offers no tls-alpn-01 challenge"))?;
                let domain = challenge.identifier().to_string();
                let digest = challenge.key_authorization().digest();
                let answer = challenge_answer(&domain, digest.as_ref())?;
                certs.set_challenge(&domain, Some(answer));
                answered.push(domain);
                challenge.set_ready().await.context("answering the challenge")?;
            }
        }
        let patience = RetryPolicy::new().timeout(Duration::from_secs(120));
        let status = order.poll_ready(&patience).await.context("waiting for validation")?;
        if status != OrderStatus::Ready {
            bail!(
                "the order is {status:?} (the CA could not validate: does TCP 443 of the domain \
                 reach the relay's port?)"
            );
        }
        let key_pem = order.finalize().await.context("finalizing the order")?;
        let chain_pem =
            order.poll_certificate(&patience).await.context("downloading the certificate")?;
        Ok((chain_pem, key_pem))
    }
    .await;
    for d in &answered {
        certs.set_challenge(d, None);
    }
    let (chain_pem, key_pem) = result?;
    // Key first: a crash between the two writes leaves a pair that does not load, which is
    // refused and replaced by a new order, never a certificate with the wrong key in use.
    write_private(&s.key_path(), key_pem.as_bytes())?;
    write_private(&s.cert_path(), chain_pem.as_bytes())?;
    Identity::load_pemfiles(s.cert_path(), s.key_path())
        .await
        .map_err(|e| anyhow!("the CA's certificate does not load: {e}"))
}

/// The account from the cache, else a new one (saved 0600).
async fn account(s: &AcmeSettings) -> anyhow::Result<Account> {
    let builder = || match &s.ca_root {
        Some(root) => Account::builder_with_root(root)
            .with_context(|| format!("--acme-ca-root {}", root.display())),
        None => Account::builder().context("the system's root certificates"),
    };
    let path = s.account_path();
    if let Ok(bytes) = std::fs::read(&path) {
        match serde_json::from_slice::<AccountCredentials>(&bytes) {
            Ok(creds) => {
                return builder()?.from_credentials(creds).await.context("restoring the account");
            }
            Err(e) => tracing::warn!("ignoring {}: {e}", path.display()),
        }
    }
    let contact = s.email.as_ref().map(|e| format!("mailto:{e}"));
    let contacts: Vec<&str> = contact.iter().map(String::as_str).collect();
    let (account, creds) = builder()?
        .create(
            &NewAccount {
                contact: &contacts,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            s.directory.clone(),
            None,
        )
        .await
        .with_context(|| format!("creating an account at {}", s.directory))?;
    write_private(&path, &serde_json::to_vec_pretty(&creds)?)?;
    tracing::info!(account = %account.id(), "ACME: account created");
    Ok(account)
}

/// The TLS-ALPN-01 answer: a self-signed certificate for `domain` carrying the key
/// authorization's SHA-256 in the critical acmeIdentifier extension.
pub fn challenge_answer(domain: &str, digest: &[u8]) -> anyhow::Result<Arc<CertifiedKey>> {
    let mut params = rcgen::CertificateParams::new(vec![domain.to_string()])?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    let provider = rustls::crypto::ring::default_provider();
    let signing =
        provider.key_provider.load_private_key(PrivateKeyDer::Pkcs8(key.serialize_der().into()))?;
    Ok(Arc::new(CertifiedKey::new(vec![cert.der().clone()], signing)))
}

/// Writes a private file (0600) through a temporary name and a rename.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_checked() {
        assert!(valid_domain("relay.example.com"));
        assert!(valid_domain("localhost"));
        for bad in ["", "a..b", "-a.b", "a_b.c", "a b", "*.example.com", "a/b"] {
            assert!(!valid_domain(bad), "{bad}");
        }
    }

    #[test]
    fn renewal_is_due_with_a_third_of_the_lifetime_left() {
        let id = super::super::cert::self_signed(&["a.example".to_string()]).unwrap();
        let mut info = CertInfo::new(id, false, std::time::Instant::now()).unwrap();
        let nb = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        info.not_before = Some(nb);
        info.not_after = Some(nb + Duration::from_secs(90));
        let d = vec!["a.example".to_string()];
        assert_eq!(renewal_due_in(&info, &d, nb), Duration::from_secs(60));
        assert_eq!(renewal_due_in(&info, &d, nb + Duration::from_secs(59)), Duration::from_secs(1));
        assert_eq!(renewal_due_in(&info, &d, nb + Duration::from_secs(61)), Duration::ZERO);
        assert_eq!(renewal_due_in(&info, &["b.example".into()], nb), Duration::ZERO, "other name");
        info.self_signed = true;
        assert_eq!(renewal_due_in(&info, &d, nb), Duration::ZERO, "a placeholder");
    }

    #[test]
    fn settings_paths_live_in_the_state_dir() {
        let settings = |domains: &[&str]| {
            let domains: Vec<String> = domains.iter().map(|d| d.to_string()).collect();
            AcmeSettings::new(
                &domains,
                None,
                "https://ca.example/dir".into(),
                None,
                Path::new("/s"),
            )
        };
        let s = settings(&["Relay.Example.com"]).unwrap();
        assert_eq!(s.cert_path(), Path::new("/s/acme/relay.example.com.crt.pem"));
        assert_eq!(s.key_path(), Path::new("/s/acme/relay.example.com.key.pem"));
        assert!(s.account_path().to_string_lossy().starts_with("/s/acme/account-"));
        assert!(settings(&["bad domain"]).is_err());
        assert!(settings(&[]).is_err(), "cert_path names the first domain");
    }

    #[test]
    fn the_challenge_answer_carries_the_digest() {
        let digest = [7u8; 32];
        let answer = challenge_answer("a.example", &digest).unwrap();
        let der = answer.cert[0].as_ref();
        // id-pe-acmeIdentifier 1.3.6.1.5.5.7.1.31, then the OCTET STRING of the digest.
        let oid = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1f];
        assert!(der.windows(oid.len()).any(|w| w == oid), "acmeIdentifier extension");
        let mut inner = vec![0x04, 0x20];
        inner.extend_from_slice(&digest);
        assert!(der.windows(inner.len()).any(|w| w == inner.as_slice()), "digest");
        // (keys_match would refuse it: webpki rejects the critical acmeIdentifier extension.)
        let spki = answer.key.public_key().expect("the key's SPKI");
        assert!(
            der.windows(spki.len()).any(|w| w == spki.as_ref()),
            "the key is the certificate's"
        );
    }
}
