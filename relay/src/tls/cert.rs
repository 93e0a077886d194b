//! The relay's certificate, for the page (HTTPS) and WebTransport alike, from one of three sources:
//!
//! * **self-signed** (default): a short-lived certificate that rotates. Chromium accepts a
//!   self-signed certificate through `serverCertificateHashes` only if it is ECDSA P-256 and valid
//!   for at most 14 days, so the relay makes one valid for 13 days and switches to a fresh one
//!   every `rotate` (11 days by default). The next certificate is made and its hash published
//!   `ahead` of the switch, so a page that fetched the hash list shortly before the switch already
//!   knows the new one.
//! * **files** (`--tls-cert/--tls-key`): read again whenever their contents change (a certbot
//!   renewal), see [`CertManager::reload_files`]; a pair that does not load (half written, key not
//!   matching) is logged and the current certificate stays.
//! * **ACME** (`--acme`, [`super::acme`]): obtained and renewed from a CA and installed with
//!   [`CertManager::install`]; until the first one arrives a self-signed placeholder serves.
//!
//! With `--tls-self-signed` the page's HTTPS has a certificate of its own, apart from the
//! rotating WebTransport ones: the person accepts it in the browser once, so it must outlive
//! restarts. It is kept in the state directory ([`PAGE_CERT_FILE`], key and certificate in one
//! PEM file, 0600), valid [`PAGE_VALIDITY`], reused while it names the listen address and has
//! more than [`PAGE_RENEW_BEFORE`] left, else replaced (with a log line saying why). The page pins
//! WebTransport by hash, so those stay short-lived and rotate as above. Without a state directory
//! (bridge mode without `--state-dir`) the page's HTTPS uses the WebTransport certificate, as it
//! always did.
//!
//! Live connections are unaffected by a switch: TLS and QUIC check the certificate only during
//! the handshake. The page's HTTPS acceptor asks [`CertManager::current`] at every handshake
//! ([`CertManager::tls_acceptor`]); WebTransport gets each new identity through wtransport's
//! `Endpoint::reload_config` (the caller's job: every method that switches returns the identity).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use sha2::Digest;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::sign::CertifiedKey;
use wtransport::Identity;

/// Validity of each self-signed certificate (Chromium's limit is 14 days).
pub const VALIDITY: Duration = Duration::from_secs(13 * 24 * 3600);
/// Back-dating of `notBefore`, for clients whose clock is a little behind.
pub const BACKDATE: Duration = Duration::from_secs(3600);
/// Validity of the page's own self-signed certificate (`--tls-self-signed`). The 398-day cap of
/// browsers applies to publicly trusted certificates only, not to one the person accepted.
pub const PAGE_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// The page's certificate is replaced when less than this is left of it.
pub const PAGE_RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);
/// Where the page's certificate lives, under the state directory.
pub const PAGE_CERT_FILE: &str = "tls/self-signed.pem";
/// The ALPN protocol of ACME's TLS-ALPN-01 challenge (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// One certificate with its hash and what the relay needs to know of it.
#[derive(Debug)]
pub struct CertInfo {
    identity: Identity,
    /// SHA-256 of the DER leaf certificate.
    pub hash: [u8; 32],
    /// When the relay made it (or loaded it).
    pub made: Instant,
    /// Made by the relay itself: browsers reach it only through its hash.
    pub self_signed: bool,
    /// The leaf's validity, when it could be read.
    pub not_before: Option<SystemTime>,
    pub not_after: Option<SystemTime>,
    /// The leaf's DNS names (subject alternative names).
    pub dns_names: Vec<String>,
    /// The leaf's IP addresses (subject alternative names).
    pub ip_addresses: Vec<std::net::IpAddr>,
    /// The same chain and key for the page's HTTPS (rustls).
    certified: Arc<CertifiedKey>,
}

impl CertInfo {
    /// Checks that the key fits the certificate and reads the leaf. Refusing here matters:
    /// wtransport panics on a key that does not match its certificate.
    pub fn new(identity: Identity, self_signed: bool, made: Instant) -> Result<Self, CertError> {
        let chain = identity.certificate_chain().as_slice();
        let Some(leaf) = chain.first() else {
            return Err(CertError::Load("no certificate in the chain".into()));
        };
        let hash = *leaf.hash().as_ref();
        let certified = Arc::new(certified_key(&identity)?);
        let facts = leaf_facts(leaf.der());
        Ok(CertInfo {
            identity,
            hash,
            made,
            self_signed,
            not_before: facts.not_before,
            not_after: facts.not_after,
            dns_names: facts.dns_names,
            ip_addresses: facts.ip_addresses,
            certified,
        })
    }

    /// The SHA-256 fingerprint as browsers show it: `AA:BB:...` (32 pairs).
    pub fn fingerprint(&self) -> String {
        fingerprint_of(&self.hash)
    }

    pub fn identity(&self) -> Identity {
        self.identity.clone_identity()
    }

    pub fn hash_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.hash)
    }

    /// Whether the leaf names every one of `names` (exactly; no wildcards needed here): an IP
    /// address among its IP addresses, anything else among its DNS names.
    pub fn covers(&self, names: &[String]) -> bool {
        self.missing(names).is_none()
    }

    /// The first of `names` the leaf does not name.
    fn missing<'a>(&self, names: &'a [String]) -> Option<&'a str> {
        names
            .iter()
            .find(|d| match d.parse::<std::net::IpAddr>() {
                Ok(ip) => !self.ip_addresses.contains(&ip),
                Err(_) => !self.dns_names.iter().any(|n| n.eq_ignore_ascii_case(d)),
            })
            .map(String::as_str)
    }
}

/// `AA:BB:...`: a SHA-256 as browsers show a certificate's fingerprint.
pub fn fingerprint_of(hash: &[u8; 32]) -> String {
    hash.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// The rustls form of a wtransport identity. wtransport keeps the key's DER without saying
/// which encoding it is (PKCS#8, SEC1 or PKCS#1, whatever the PEM file held), so each is tried
/// and the one whose public key matches the certificate's wins.
fn certified_key(identity: &Identity) -> Result<CertifiedKey, CertError> {
    let chain: Vec<CertificateDer<'static>> = identity
        .certificate_chain()
        .as_slice()
        .iter()
        .map(|c| CertificateDer::from(c.der().to_vec()))
        .collect();
    let der = identity.private_key().secret_der();
    let provider = rustls::crypto::ring::default_provider();
    let mut last = String::from("unsupported private key");
    for key in [
        PrivateKeyDer::Pkcs8(der.to_vec().into()),
        PrivateKeyDer::Sec1(der.to_vec().into()),
        PrivateKeyDer::Pkcs1(der.to_vec().into()),
    ] {
        let Ok(signing) = provider.key_provider.load_private_key(key) else { continue };
        let ck = CertifiedKey::new(chain.clone(), signing);
        match ck.keys_match() {
            Ok(()) => return Ok(ck),
            Err(e) => last = format!("the key does not match the certificate ({e})"),
        }
    }
    Err(CertError::Load(last))
}

/// What the relay reads from a leaf certificate.
#[derive(Debug, Default)]
struct LeafFacts {
    not_before: Option<SystemTime>,
    not_after: Option<SystemTime>,
    dns_names: Vec<String>,
    ip_addresses: Vec<std::net::IpAddr>,
}

/// notBefore, notAfter, DNS names and IP addresses of a DER certificate (`None`/empty when
/// unreadable).
fn leaf_facts(der: &[u8]) -> LeafFacts {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return LeafFacts::default();
    };
    let at =
        |t: i64| u64::try_from(t).ok().map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s));
    let v = cert.validity();
    let mut facts = LeafFacts {
        not_before: at(v.not_before.timestamp()),
        not_after: at(v.not_after.timestamp()),
        ..LeafFacts::default()
    };
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) => facts.dns_names.push(d.to_string()),
                GeneralName::IPAddress(bytes) => {
                    if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                        facts.ip_addresses.push(v4.into());
                    } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                        facts.ip_addresses.push(v6.into());
                    }
                }
                _ => {}
            }
        }
    }
    facts
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot make a self-signed certificate: {0}")]
    SelfSigned(String),
    #[error("cannot load --tls-cert/--tls-key: {0}")]
    Load(String),
    #[error(
        "certificate rotation every {rotate:?} plus {ahead:?} ahead exceeds the {VALIDITY:?} validity"
    )]
    Schedule { rotate: Duration, ahead: Duration },
    #[error(
        "cannot keep the page's certificate in {path}: {cause}; pass --state-dir DIR to use \
         another directory"
    )]
    PageFile { path: PathBuf, cause: std::io::Error },
}

#[derive(Debug)]
struct Certs {
    current: Arc<CertInfo>,
    next: Option<Arc<CertInfo>>,
}

/// Where the certificates come from.
#[derive(Debug)]
enum Source {
    /// Made here, rotating every `rotate`, the next one published `ahead`.
    SelfSigned { rotate: Duration, ahead: Duration },
    /// The user's PEM files; `seen` is the SHA-256 of the contents last tried (loaded or not).
    Files { cert: PathBuf, key: PathBuf, seen: Mutex<[u8; 32]> },
    /// Installed by the ACME task.
    Acme,
}

/// The page's own HTTPS certificate (`--tls-self-signed` with a state directory).
#[derive(Debug)]
struct PageCert {
    file: PathBuf,
    current: RwLock<Arc<CertInfo>>,
}

/// Owns the current (and upcoming) certificate.
#[derive(Debug)]
pub struct CertManager {
    certs: RwLock<Certs>,
    /// The page's HTTPS certificate when it is not the WebTransport one.
    page: Option<PageCert>,
    source: Source,
    /// Names for self-signed certificates.
    sans: Vec<String>,
    /// TLS-ALPN-01 answers by domain (lower case), while an ACME order is being validated.
    challenges: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

/// Makes a self-signed ECDSA P-256 identity valid from an hour ago for [`VALIDITY`].
pub fn self_signed(sans: &[String]) -> Result<Identity, CertError> {
    let not_before = time::OffsetDateTime::now_utc() - BACKDATE;
    let not_after = not_before + VALIDITY;
    Identity::self_signed_builder()
        .subject_alt_names(sans)
        .validity_period(not_before, not_after)
        .build()
        .map_err(|e| CertError::SelfSigned(e.to_string()))
}

fn self_signed_info(sans: &[String], made: Instant) -> Result<CertInfo, CertError> {
    CertInfo::new(self_signed(sans)?, true, made)
}

impl CertManager {
    fn with(current: CertInfo, source: Source, sans: Vec<String>) -> Self {
        CertManager {
            certs: RwLock::new(Certs { current: Arc::new(current), next: None }),
            page: None,
            source,
            sans,
            challenges: Mutex::new(HashMap::new()),
        }
    }

    /// Self-signed certificates rotating every `rotate`, the next one published `ahead` of time.
    pub fn self_signed(
        sans: Vec<String>,
        rotate: Duration,
        ahead: Duration,
    ) -> Result<Self, CertError> {
        if rotate + ahead + BACKDATE > VALIDITY || ahead >= rotate {
            return Err(CertError::Schedule { rotate, ahead });
        }
        let current = self_signed_info(&sans, Instant::now())?;
        Ok(Self::with(current, Source::SelfSigned { rotate, ahead }, sans))
    }

    /// A user-supplied certificate chain and key (PEM files), watched with
    /// [`CertManager::reload_files`].
    pub async fn load(cert: &Path, key: &Path) -> Result<Self, CertError> {
        let seen = fingerprint(cert, key).await.map_err(CertError::Load)?;
        let info = load_files(cert, key).await?;
        let source = Source::Files {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            seen: Mutex::new(seen),
        };
        Ok(Self::with(info, source, Vec::new()))
    }

    /// ACME: `cached` is a certificate from an earlier run (if still valid), else a self-signed
    /// placeholder for `sans` serves until [`CertManager::install`] brings the CA's.
    pub fn acme(cached: Option<Identity>, sans: Vec<String>) -> Result<Self, CertError> {
        let current = match cached.map(|id| CertInfo::new(id, false, Instant::now())) {
            Some(Ok(info)) => info,
            Some(Err(e)) => {
                tracing::warn!(
                    "the cached ACME certificate does not load ({e}); getting a new one"
                );
                self_signed_info(&sans, Instant::now())?
            }
            None => self_signed_info(&sans, Instant::now())?,
        };
        Ok(Self::with(current, Source::Acme, sans))
    }

    /// Gives the page's HTTPS a certificate of its own, kept in `file` (under the state
    /// directory, whose `tls/` the caller made private): the one there when it is still good
    /// for the names of this certificate manager and `now`, else a new one written there.
    pub fn with_page_cert(mut self, file: &Path, now: SystemTime) -> Result<Self, CertError> {
        // The kept certificate, or why a new one is made (`None`: there was none yet).
        let kept = match load_page_cert(file) {
            Ok(Some(info)) => match page_cert_problem(&info, &self.sans, now) {
                None => Ok(info),
                Some(why) => Err(Some(why)),
            },
            Ok(None) => Err(None),
            Err(why) => Err(Some(why)),
        };
        let info = match kept {
            Ok(info) => {
                tracing::info!(
                    file = %file.display(),
                    fingerprint = %info.fingerprint(),
                    "the page's certificate: the one kept from an earlier start"
                );
                info
            }
            Err(why) => {
                let info = make_page_cert(file, &self.sans, now)?;
                match why {
                    Some(why) => tracing::warn!(
                        file = %file.display(),
                        fingerprint = %info.fingerprint(),
                        "the page's certificate is new ({why}): browsers ask to accept it again"
                    ),
                    None => tracing::info!(
                        file = %file.display(),
                        fingerprint = %info.fingerprint(),
                        "made the page's certificate, kept for the next starts"
                    ),
                }
                info
            }
        };
        self.page =
            Some(PageCert { file: file.to_path_buf(), current: RwLock::new(Arc::new(info)) });
        Ok(self)
    }

    /// Replaces the page's own certificate when less than [`PAGE_RENEW_BEFORE`] is left of it
    /// (a relay that runs for a year); new HTTPS handshakes get the new one.
    pub fn renew_page_cert(&self, now: SystemTime) -> Result<(), CertError> {
        let Some(page) = &self.page else { return Ok(()) };
        let old = Arc::clone(&page.current.read().unwrap_or_else(|e| e.into_inner()));
        let Some(why) = page_cert_problem(&old, &self.sans, now) else { return Ok(()) };
        let info = make_page_cert(&page.file, &self.sans, now)?;
        tracing::warn!(
            file = %page.file.display(),
            fingerprint = %info.fingerprint(),
            "the page's certificate is new ({why}): browsers ask to accept it again"
        );
        *page.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(info);
        Ok(())
    }

    /// The certificate the page's HTTPS serves: its own when it has one, else the current one.
    pub fn page(&self) -> Arc<CertInfo> {
        match &self.page {
            Some(p) => Arc::clone(&p.current.read().unwrap_or_else(|e| e.into_inner())),
            None => self.current(),
        }
    }

    /// Whether the page's HTTPS has a certificate of its own, kept across restarts.
    pub fn page_cert_kept(&self) -> bool {
        self.page.is_some()
    }

    pub fn current(&self) -> Arc<CertInfo> {
        Arc::clone(&self.read().current)
    }

    /// Hashes the page should pass to `serverCertificateHashes`: current first, then the next
    /// one. None for a CA's certificate, which browsers verify the ordinary way.
    pub fn hashes(&self) -> Vec<String> {
        let c = self.read();
        if !c.current.self_signed {
            return Vec::new();
        }
        std::iter::once(&c.current).chain(c.next.as_ref()).map(|i| i.hash_base64()).collect()
    }

    /// Whether the current certificate is the relay's own (reachable only by its hash).
    pub fn is_self_signed(&self) -> bool {
        self.read().current.self_signed
    }

    /// Whether the certificates rotate on the self-signed schedule ([`CertManager::tick`]).
    pub fn rotates(&self) -> bool {
        matches!(self.source, Source::SelfSigned { .. })
    }

    /// Whether the certificate comes from `--tls-cert/--tls-key` ([`CertManager::reload_files`]).
    pub fn watches_files(&self) -> bool {
        matches!(self.source, Source::Files { .. })
    }

    /// Advances the self-signed schedule. Returns the new identity when the current one was
    /// switched, which the caller must hand to the endpoint.
    pub fn tick(&self, now: Instant) -> Result<Option<Identity>, CertError> {
        let Source::SelfSigned { rotate, ahead } = self.source else {
            return Ok(None);
        };
        let age = now.saturating_duration_since(self.read().current.made);
        if age + ahead >= rotate && self.read().next.is_none() {
            let next = Arc::new(self_signed_info(&self.sans, now)?);
            tracing::info!(hash = %next.hash_base64(), "made the next WebTransport certificate");
            self.write().next = Some(next);
        }
        if age >= rotate {
            let mut c = self.write();
            if let Some(next) = c.next.take() {
                tracing::info!(hash = %next.hash_base64(), "switching to the next WebTransport certificate");
                c.current = next;
                return Ok(Some(c.current.identity()));
            }
        }
        Ok(None)
    }

    /// How long until [`CertManager::tick`] has something to do (a bound for the caller's timer).
    pub fn next_tick_in(&self, now: Instant) -> Option<Duration> {
        let Source::SelfSigned { rotate, ahead } = self.source else {
            return None;
        };
        let c = self.read();
        let age = now.saturating_duration_since(c.current.made);
        let due = if c.next.is_none() { rotate - ahead } else { rotate };
        Some(due.saturating_sub(age))
    }

    /// `--tls-cert/--tls-key`: when the files' contents differ from the last ones tried, loads
    /// them and switches to them (returning the identity for the endpoint). A pair that does not
    /// load is logged once and left; the current certificate stays until a good pair appears.
    pub async fn reload_files(&self) -> Option<Identity> {
        let Source::Files { cert, key, seen } = &self.source else {
            return None;
        };
        let now = match fingerprint(cert, key).await {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!("cannot read --tls-cert/--tls-key: {e}");
                return None;
            }
        };
        if now == *seen.lock().unwrap_or_else(|e| e.into_inner()) {
            return None;
        }
        *seen.lock().unwrap_or_else(|e| e.into_inner()) = now;
        match load_files(cert, key).await {
            Ok(info) => {
                tracing::info!(
                    cert = %cert.display(),
                    hash = %info.hash_base64(),
                    "certificate files changed: new connections get the new certificate"
                );
                Some(self.replace(info))
            }
            Err(e) => {
                tracing::warn!(
                    "certificate files changed but do not load ({e}); keeping the current \
                     certificate until they do"
                );
                None
            }
        }
    }

    /// Switches to a certificate from elsewhere (ACME); returns the identity for the endpoint.
    pub fn install(&self, identity: Identity) -> Result<Identity, CertError> {
        let info = CertInfo::new(identity, false, Instant::now())?;
        Ok(self.replace(info))
    }

    fn replace(&self, info: CertInfo) -> Identity {
        let mut c = self.write();
        c.current = Arc::new(info);
        c.next = None;
        c.current.identity()
    }

    /// Sets (or with `None` removes) the TLS-ALPN-01 answer for `domain`.
    pub fn set_challenge(&self, domain: &str, answer: Option<Arc<CertifiedKey>>) {
        let mut map = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        match answer {
            Some(a) => map.insert(domain.to_ascii_lowercase(), a),
            None => map.remove(&domain.to_ascii_lowercase()),
        };
    }

    /// The page's HTTPS acceptor: every handshake gets the certificate current at that moment
    /// (and an ACME validation connection its challenge answer).
    pub fn tls_acceptor(
        self: &Arc<Self>,
        acme: bool,
    ) -> Result<tokio_rustls::TlsAcceptor, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Resolver(Arc::clone(self))));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        if acme {
            config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
        }
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Certs> {
        self.certs.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Certs> {
        self.certs.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Picks the certificate for each HTTPS handshake.
#[derive(Debug)]
struct Resolver(Arc<CertManager>);

impl rustls::server::ResolvesServerCert for Resolver {
    fn resolve(&self, hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let acme = hello.alpn().is_some_and(|mut p| p.any(|p| p == ACME_TLS_ALPN));
        if acme {
            // RFC 8737: only the challenge answer, never the real certificate, on acme-tls/1.
            let name = hello.server_name()?.to_ascii_lowercase();
            let map = self.0.challenges.lock().unwrap_or_else(|e| e.into_inner());
            return map.get(&name).cloned();
        }
        Some(Arc::clone(&self.0.page().certified))
    }
}

/// The page's certificate kept in `file`: `Ok(None)` when there is none, `Err(why)` when the
/// file is there but cannot serve (unreadable, readable by other users, not a matching pair).
fn load_page_cert(file: &Path) -> Result<Option<CertInfo>, String> {
    use std::os::unix::fs::PermissionsExt;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let meta = match std::fs::metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("the kept one cannot be read: {e}")),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!("the kept one's key could be read by other users (mode {mode:o})"));
    }
    let pem = std::fs::read(file).map_err(|e| format!("the kept one cannot be read: {e}"))?;
    let unusable = |what: &str| format!("the kept one is unusable: {what}");
    let chain = CertificateDer::pem_slice_iter(&pem)
        .map(|c| {
            c.map_err(|e| unusable(&e.to_string())).and_then(|c| {
                wtransport::tls::Certificate::from_der(c.to_vec())
                    .map_err(|e| unusable(&e.to_string()))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if chain.is_empty() {
        return Err(unusable("no certificate in it"));
    }
    let key = match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(PrivateKeyDer::Pkcs8(k)) => k.secret_pkcs8_der().to_vec(),
        Ok(_) => return Err(unusable("its key is not PKCS#8")),
        Err(e) => return Err(unusable(&format!("no key ({e})"))),
    };
    let identity = Identity::new(
        wtransport::tls::CertificateChain::new(chain),
        wtransport::tls::PrivateKey::from_der_pkcs8(key),
    );
    CertInfo::new(identity, true, Instant::now()).map(Some).map_err(|e| unusable(&e.to_string()))
}

/// Why the kept page certificate should not serve (`None`: it should): expiring within
/// [`PAGE_RENEW_BEFORE`], not valid yet, or not naming one of `names` (the listen address
/// changed).
fn page_cert_problem(info: &CertInfo, names: &[String], now: SystemTime) -> Option<String> {
    let (Some(not_before), Some(not_after)) = (info.not_before, info.not_after) else {
        return Some("the kept one's validity cannot be read".into());
    };
    if not_before > now {
        return Some("the kept one is not valid yet: did the clock go back?".into());
    }
    match not_after.duration_since(now) {
        Err(_) => return Some("the kept one expired".into()),
        Ok(left) if left < PAGE_RENEW_BEFORE => {
            return Some(format!("the kept one expires in {} days", left.as_secs() / (24 * 3600)));
        }
        Ok(_) => {}
    }
    info.missing(names)
        .map(|n| format!("the kept one does not name {n}, which the relay listens on"))
}

/// A new page certificate for `names`, valid [`PAGE_VALIDITY`] from an hour before `now`,
/// written to `file` (0600, by a rename: a crash leaves the old file or the new one).
fn make_page_cert(file: &Path, names: &[String], now: SystemTime) -> Result<CertInfo, CertError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let not_before = time::OffsetDateTime::from(now) - BACKDATE;
    let identity = Identity::self_signed_builder()
        .subject_alt_names(names)
        .validity_period(not_before, not_before + PAGE_VALIDITY)
        .build()
        .map_err(|e| CertError::SelfSigned(e.to_string()))?;
    let mut pem = String::new();
    for cert in identity.certificate_chain().as_slice() {
        pem.push_str(&cert.to_pem());
    }
    pem.push_str(&identity.private_key().to_secret_pem());
    let tmp = file.with_extension("pem.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(pem.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)
    };
    write().map_err(|cause| {
        let _ = std::fs::remove_file(&tmp);
        CertError::PageFile { path: file.to_path_buf(), cause }
    })?;
    CertInfo::new(identity, true, Instant::now())
}

/// SHA-256 over both files' contents (what [`CertManager::reload_files`] compares).
async fn fingerprint(cert: &Path, key: &Path) -> Result<[u8; 32], String> {
    let mut h = sha2::Sha256::new();
    for p in [cert, key] {
        let bytes = tokio::fs::read(p).await.map_err(|e| format!("{}: {e}", p.display()))?;
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(h.finalize().into())
}

async fn load_files(cert: &Path, key: &Path) -> Result<CertInfo, CertError> {
    let identity =
        Identity::load_pemfiles(cert, key).await.map_err(|e| CertError::Load(e.to_string()))?;
    CertInfo::new(identity, false, Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_publishes_ahead_then_switches() {
        let m = CertManager::self_signed(
            vec!["localhost".into()],
            Duration::from_secs(100),
            Duration::from_secs(10),
        )
        .unwrap();
        let t0 = m.current().made;
        let first = m.hashes();
        assert_eq!(first.len(), 1);
        assert!(m.tick(t0 + Duration::from_secs(50)).unwrap().is_none());
        assert_eq!(m.hashes(), first);
        assert!(m.tick(t0 + Duration::from_secs(91)).unwrap().is_none());
        let both = m.hashes();
        assert_eq!(both.len(), 2);
        assert_eq!(both[0], first[0]);
        let id = m.tick(t0 + Duration::from_secs(100)).unwrap();
        assert!(id.is_some());
        assert_eq!(m.hashes(), vec![both[1].clone()]);
    }

    #[test]
    fn schedule_must_fit_the_validity() {
        assert!(
            CertManager::self_signed(
                vec!["localhost".into()],
                Duration::from_secs(13 * 24 * 3600),
                Duration::from_secs(60)
            )
            .is_err()
        );
    }

    #[test]
    fn certificate_validity_is_at_most_14_days() {
        let id = self_signed(&["localhost".to_string()]).unwrap();
        let der = id.certificate_chain().as_slice()[0].der().to_vec();
        // Find the two UTCTime values (tag 0x17, length 13) of the validity sequence.
        let times: Vec<String> = der
            .windows(15)
            .filter(|w| w[0] == 0x17 && w[1] == 13)
            .map(|w| String::from_utf8_lossy(&w[2..15]).into_owned())
            .take(2)
            .collect();
        assert_eq!(times.len(), 2, "validity not found");
        let parse = |s: &str| {
            let n = |r: std::ops::Range<usize>| s[r].parse::<u8>().unwrap();
            let date = time::Date::from_calendar_date(
                2000 + i32::from(n(0..2)),
                time::Month::try_from(n(2..4)).unwrap(),
                n(4..6),
            )
            .unwrap();
            date.with_hms(n(6..8), n(8..10), n(10..12)).unwrap()
        };
        let span = parse(&times[1]) - parse(&times[0]);
        assert!(span <= time::Duration::days(14), "{span}");
        assert!(span >= time::Duration::days(12), "{span}");
    }

    #[test]
    fn leaf_facts_are_read() {
        let info =
            self_signed_info(&["localhost".into(), "127.0.0.1".into()], Instant::now()).unwrap();
        assert_eq!(info.dns_names, vec!["localhost"]);
        let (nb, na) = (info.not_before.unwrap(), info.not_after.unwrap());
        let span = na.duration_since(nb).unwrap();
        assert!(span.abs_diff(VALIDITY) < Duration::from_secs(2), "{span:?}");
        assert!(info.covers(&["LOCALHOST".into()]));
        assert!(!info.covers(&["example.com".into()]));
    }

    #[test]
    fn the_page_certificate_is_kept_and_replaced_only_for_a_reason() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("self-signed.pem");
        let names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
        let rotating = |names: &[String]| {
            CertManager::self_signed(
                names.to_vec(),
                Duration::from_secs(100),
                Duration::from_secs(10),
            )
            .unwrap()
        };
        let now = SystemTime::now();
        let first = rotating(&names).with_page_cert(&file, now).unwrap();
        let page = first.page();
        assert_ne!(page.hash, first.current().hash, "the page's is not the WebTransport one");
        assert_eq!(first.hashes(), vec![first.current().hash_base64()], "only WebTransport's");
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        let span = page.not_after.unwrap().duration_since(page.not_before.unwrap()).unwrap();
        assert_eq!(span, PAGE_VALIDITY);
        assert_eq!(page.ip_addresses.len(), 2);
        assert!(page.fingerprint().len() == 95 && page.fingerprint().as_bytes()[2] == b':');

        // The next start serves the same one, even a while later.
        let later = now + Duration::from_secs(200 * 24 * 3600);
        let again = rotating(&names).with_page_cert(&file, later).unwrap();
        assert_eq!(again.page().hash, page.hash);
        assert!(again.renew_page_cert(later).is_ok());
        assert_eq!(again.page().hash, page.hash, "nothing due");

        // Less than 30 days left: a new one, at start or while running.
        let late = now + PAGE_VALIDITY - Duration::from_secs(29 * 24 * 3600);
        again.renew_page_cert(late).unwrap();
        let renewed = again.page().hash;
        assert_ne!(renewed, page.hash);
        assert_eq!(rotating(&names).with_page_cert(&file, late).unwrap().page().hash, renewed);

        // Another listen address: a new one naming it.
        let mut wider = names.clone();
        wider.push("192.0.2.7".into());
        let moved = rotating(&wider).with_page_cert(&file, late).unwrap();
        assert_ne!(moved.page().hash, renewed);
        assert!(moved.page().covers(&wider));
        // Back on loopback: the wider one still names everything asked.
        assert_eq!(
            rotating(&names).with_page_cert(&file, late).unwrap().page().hash,
            moved.page().hash
        );

        // A key others could read is not used.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let exposed = rotating(&names).with_page_cert(&file, late).unwrap();
        assert_ne!(exposed.page().hash, moved.page().hash);
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        // Nor is a damaged file: replaced, not fatal.
        std::fs::write(&file, "garbage").unwrap();
        let repaired = rotating(&names).with_page_cert(&file, late).unwrap();
        assert!(load_page_cert(&file).unwrap().unwrap().hash == repaired.page().hash);

        // Without a page certificate the page is served the WebTransport one.
        let plain = rotating(&names);
        assert_eq!(plain.page().hash, plain.current().hash);
        assert!(!plain.page_cert_kept());
    }

    #[test]
    fn fingerprints_look_like_the_browsers() {
        let mut hash = [0u8; 32];
        hash[0] = 0xAB;
        hash[31] = 0x0F;
        let f = fingerprint_of(&hash);
        assert!(f.starts_with("AB:00:") && f.ends_with(":0F"), "{f}");
    }

    #[test]
    fn a_key_that_does_not_match_is_refused() {
        let a = self_signed(&["localhost".to_string()]).unwrap();
        let b = self_signed(&["localhost".to_string()]).unwrap();
        let mixed = Identity::new(a.certificate_chain().clone(), b.private_key().clone_key());
        let e = CertInfo::new(mixed, false, Instant::now()).unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
    }

    #[test]
    fn a_ca_certificate_publishes_no_hashes() {
        let id = self_signed(&["localhost".to_string()]).unwrap();
        let m = CertManager::acme(None, vec!["localhost".into()]).unwrap();
        assert!(m.is_self_signed(), "the placeholder is self-signed");
        assert_eq!(m.hashes().len(), 1);
        m.install(id).unwrap();
        assert!(!m.is_self_signed());
        assert!(m.hashes().is_empty());
        assert!(m.tick(Instant::now() + VALIDITY).unwrap().is_none(), "no rotation");
    }
}
