//! TLS test support: a test CA and leaf certificates made with rcgen at test time (never
//! committed keys), a verifying TLS client (the served chain, an HTTPS GET), and a WebTransport
//! client that verifies the relay's certificate against given roots instead of pinning a hash.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};

/// A certificate authority for tests.
pub struct TestCa {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let (nb, na) = validity(Duration::from_secs(30 * 24 * 3600));
        params.not_before = nb;
        params.not_after = na;
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa { pem: cert.pem(), issuer: Issuer::new(params, key) }
    }

    /// A leaf for `names` (DNS names or IP addresses): (chain PEM, key PEM in PKCS#8).
    pub fn leaf(&self, names: &[&str], cn: &str) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let (nb, na) = validity(Duration::from_secs(7 * 24 * 3600));
        params.not_before = nb;
        params.not_after = na;
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    pub fn roots(&self) -> rustls::RootCertStore {
        roots_from_pem(&self.pem)
    }
}

fn validity(len: Duration) -> (time::OffsetDateTime, time::OffsetDateTime) {
    let nb = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
    (nb, nb + len)
}

pub fn roots_from_pem(pem: &str) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    assert!(!roots.is_empty(), "no certificate in the PEM");
    roots
}

fn client_config(roots: rustls::RootCertStore) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(c)
}

/// A verified TLS connection to `addr` for `name` (SNI and the name checked).
pub async fn tls_connect(
    addr: SocketAddr,
    name: &str,
    roots: rustls::RootCertStore,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let connector = tokio_rustls::TlsConnector::from(client_config(roots));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let server = ServerName::try_from(name.to_string()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), connector.connect(server, tcp))
        .await
        .map_err(|_| std::io::Error::other("TLS handshake timed out"))?
}

/// The leaf certificate (DER) the server at `addr` presents for `name`, verified against `roots`.
pub async fn served_leaf(
    addr: SocketAddr,
    name: &str,
    roots: rustls::RootCertStore,
) -> std::io::Result<Vec<u8>> {
    let tls = tls_connect(addr, name, roots).await?;
    let chain = tls.get_ref().1.peer_certificates().unwrap_or_default();
    Ok(chain.first().map(|c| c.to_vec()).unwrap_or_default())
}

/// `GET path` over verified HTTPS; status and body.
pub async fn https_get(
    addr: SocketAddr,
    name: &str,
    roots: rustls::RootCertStore,
    path: &str,
    bearer: Option<&str>,
) -> (u16, String) {
    let mut s = tls_connect(addr, name, roots).await.expect("TLS handshake");
    let auth = bearer.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {name}\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    // A server may close without close_notify; what was read counts.
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut resp)).await;
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// Issuer CN, DNS names and serial of a DER certificate.
pub fn leaf_summary(der: &[u8]) -> (String, Vec<String>, String) {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, cert) = X509Certificate::from_der(der).expect("a certificate");
    let issuer = cert.issuer().to_string();
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some(d.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    (issuer, names, cert.raw_serial_as_string())
}

/// WebTransport to the relay at `addr` as `name`, verifying its certificate against `roots`
/// (what a browser does with a CA's certificate: no hash pinning).
pub async fn wt_connect_verified(
    addr: SocketAddr,
    name: &str,
    roots: rustls::RootCertStore,
) -> Result<wtransport::Connection, wtransport::error::ConnectingError> {
    let tls = wtransport::tls::client::build_default_tls_config(Arc::new(roots), None);
    let config = wtransport::ClientConfig::builder()
        .with_bind_default()
        .with_custom_tls(tls)
        .keep_alive_interval(Some(Duration::from_secs(2)))
        .dns_resolver(Loopback)
        .build();
    let endpoint = wtransport::Endpoint::client(config).unwrap();
    // The name is checked against the certificate; it resolves to loopback (`Loopback`).
    let url = format!("https://{name}:{}/wt", addr.port());
    endpoint.connect(url).await
}

/// Resolves every name to 127.0.0.1 (the tests' relay listens there).
#[derive(Debug)]
struct Loopback;

impl wtransport::config::DnsResolver for Loopback {
    fn resolve(&self, host: &str) -> std::pin::Pin<Box<dyn wtransport::config::DnsLookupFuture>> {
        let port = host.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok());
        Box::pin(async move { Ok(port.map(|p| SocketAddr::from(([127, 0, 0, 1], p)))) })
    }
}

/// A port free on loopback TCP now (for servers that need their port before they start).
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
