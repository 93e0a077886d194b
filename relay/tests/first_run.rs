//! A first run that goes wrong explains itself: no mosh-server, a port in use, a state
//! directory that cannot be used; and what a person checks: the version and commit, and the
//! fingerprint of the self-signed certificate they accept, the same across restarts.

mod support;

use std::sync::Arc;

use base64::Engine;
use sha2::{Digest, Sha256};
use tern_relay::{Relay, RelayError};
use tokio::io::AsyncWriteExt;
use tokio_rustls::rustls;

use support::*;

/// The text of the error `Relay::new` refuses `config` with.
async fn refusal(config: tern_relay::Config) -> (RelayError, String) {
    let e = Relay::new(config).await.expect_err("the relay must refuse to start");
    let text = e.to_string();
    (e, text)
}

#[tokio::test]
async fn spawn_mode_without_mosh_server_refuses_to_start_and_says_how_to_install_it() {
    let state = tempfile::tempdir().unwrap();
    let mut config = spawn_config(state.path(), &test_token("nomosh"));
    config.mosh_server_command = "tern-test-no-such-mosh-server".into();
    // The port is taken: the check comes before binding, so that is not what is said.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    config.listen = taken.local_addr().unwrap().into();
    let (e, text) = refusal(config.clone()).await;
    assert!(matches!(e, RelayError::MoshServerMissing { .. }), "{text}");
    assert!(
        text.starts_with(
            "mosh-server not found (looked for `tern-test-no-such-mosh-server` on PATH="
        ),
        "{text}"
    );
    for fix in [
        "`sudo apt install mosh` (Debian/Ubuntu)",
        "`sudo dnf install mosh` (Fedora)",
        "`brew install mosh` (macOS)",
        "--mosh-server-command PATH",
    ] {
        assert!(text.contains(fix), "{fix} missing from: {text}");
    }
    // A path that is not there is named as such.
    config.mosh_server_command = "/nonexistent/mosh-server".into();
    let (_, text) = refusal(config.clone()).await;
    assert!(text.contains("looked for `/nonexistent/mosh-server`: "), "{text}");

    // Bridge mode starts no mosh-server: it does not care.
    let mut bridge = bridge_config(&test_token("nomosh-bridge"), &["127.0.0.1:1"]);
    bridge.mosh_server_command = "tern-test-no-such-mosh-server".into();
    TestRelay::start(bridge).await.stop().await;
    // With --ssh-host hosts the relay is still useful (their mosh-server is theirs): it starts.
    let mut ssh = spawn_config(state.path(), &test_token("nomosh-ssh"));
    ssh.mosh_server_command = "tern-test-no-such-mosh-server".into();
    ssh.ssh_host = vec!["devbox".parse().unwrap()];
    TestRelay::start(ssh).await.stop().await;
    assert!(logs().contains("mosh-server not found"), "the missing program is logged");
}

#[tokio::test]
async fn a_port_in_use_names_the_likely_cause() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let mut config = bridge_config(&test_token("inuse"), &["127.0.0.1:1"]);
    config.listen = addr.into();
    let (e, text) = refusal(config.clone()).await;
    assert!(matches!(e, RelayError::Bind { .. }), "{text}");
    assert!(text.contains(&format!("TCP {addr}")), "{text}");
    assert!(text.contains(&format!("{addr} is in use: another tern-relay")), "{text}");
    assert!(text.contains("`systemctl --user status tern-relay`"), "{text}");
    assert!(text.contains("--listen 127.0.0.1:PORT (0 picks a free one)"), "{text}");
    drop(taken);

    // UDP (WebTransport) taken on that port, TCP free: said the same way, naming UDP.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    config.listen = udp.local_addr().unwrap().into();
    if std::net::TcpListener::bind(udp.local_addr().unwrap()).is_ok() {
        let (_, text) = refusal(config).await;
        assert!(text.contains(&format!("UDP {}", udp.local_addr().unwrap())), "{text}");
        assert!(text.contains("is in use: another tern-relay"), "{text}");
    }
}

#[tokio::test]
async fn a_state_directory_it_cannot_use_is_named_with_the_reason() {
    // Under a regular file: refused for root too, unlike permission bits.
    let file = tempfile::NamedTempFile::new().unwrap();
    let state = file.path().join("state");
    let config = spawn_config(&state, &test_token("statedir"));
    let (e, text) = refusal(config).await;
    assert!(matches!(e, RelayError::State(_)), "{text}");
    assert!(text.starts_with(&format!("state directory {}: ", state.display())), "{text}");
    assert!(text.contains("cannot create the directory"), "{text}");
    assert!(text.contains("Not a directory"), "{text}");
    assert!(text.ends_with("pass --state-dir DIR to use another directory"), "{text}");

    // The paste directory says the same with its own flag.
    let ok = tempfile::tempdir().unwrap();
    let mut config = spawn_config(ok.path(), &test_token("pastedir"));
    config.paste_dir = Some(file.path().join("pastes"));
    let (_, text) = refusal(config).await;
    assert!(text.starts_with("paste directory "), "{text}");
    assert!(text.contains("pass --paste-dir DIR"), "{text}");
}

#[tokio::test]
async fn the_api_names_the_version_and_the_commit() {
    let token = test_token("commit");
    let relay = TestRelay::start(bridge_config(&token, &["127.0.0.1:1"])).await;
    let (status, body) = http_get(relay.addr(), "/api/info", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let info: tern::relay_proto::RelayInfo = tern::relay_proto::decode(body.as_bytes()).unwrap();
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(info.commit, tern_relay::COMMIT);
    assert!(
        info.commit == "unknown"
            || (info.commit.len() == 12 && info.commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{}",
        info.commit
    );
    assert_eq!(
        info.relay_build(),
        format!("tern-relay {} ({})", env!("CARGO_PKG_VERSION"), tern_relay::COMMIT)
    );
    relay.stop().await;
}

// ---------------------------------------------------------------- the page's certificate

/// Accepts any certificate and keeps the leaf it was shown (what a person's browser does once
/// they accepted it).
#[derive(Debug, Default)]
struct Recorder(std::sync::Mutex<Option<Vec<u8>>>);

impl rustls::client::danger::ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        *self.0.lock().unwrap() = Some(end_entity.to_vec());
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The SHA-256 of the certificate the relay's HTTPS serves at `addr`.
async fn served_hash(addr: std::net::SocketAddr) -> [u8; 32] {
    let recorder = Arc::new(Recorder::default());
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(Arc::clone(&recorder) as _)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .expect("TLS handshake");
    let _ = tls.shutdown().await;
    let der = recorder.0.lock().unwrap().take().expect("a certificate was shown");
    Sha256::digest(&der).into()
}

fn colons(hash: &[u8; 32]) -> String {
    hash.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

#[tokio::test]
async fn the_self_signed_page_certificate_is_the_same_after_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let start = || {
        let mut c = bridge_config(&test_token("keepcert"), &["127.0.0.1:1"]);
        c.tls_self_signed = true;
        c.state_dir = Some(state.path().to_path_buf());
        TestRelay::start(c)
    };
    let first = start().await;
    let served = served_hash(first.addr()).await;
    let printed = first.relay.tls_fingerprint().expect("a fingerprint to print");
    assert_eq!(printed, colons(&served), "the fingerprint printed is the one served");
    assert!(first.relay.tls_fingerprint_kept());
    // WebTransport keeps its own short-lived, rotating certificate, pinned by hash.
    let wt = base64::engine::general_purpose::STANDARD.decode(&first.relay.cert_hashes()[0]);
    assert_ne!(wt.unwrap(), served.to_vec(), "the page's certificate is not WebTransport's");
    first.stop().await;
    let file = state.path().join("tls/self-signed.pem");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "key and certificate are private");
        let dir = std::fs::metadata(file.parent().unwrap()).unwrap().permissions().mode();
        assert_eq!(dir & 0o777, 0o700);
    }

    let second = start().await;
    assert_eq!(served_hash(second.addr()).await, served, "the same certificate after a restart");
    assert_eq!(second.relay.tls_fingerprint().unwrap(), printed);
    // WebTransport still works with the hashes /api/info lists.
    let conn = connect(&second, None).await.expect("WebTransport by its hash");
    drop(conn);
    second.stop().await;

    // Bridge mode without a state directory: as before, the page gets the WebTransport one.
    let mut c = bridge_config(&test_token("nokeep"), &["127.0.0.1:1"]);
    c.tls_self_signed = true;
    let bare = TestRelay::start(c).await;
    let served = served_hash(bare.addr()).await;
    let wt = base64::engine::general_purpose::STANDARD.decode(&bare.relay.cert_hashes()[0]);
    assert_eq!(wt.unwrap(), served.to_vec());
    assert_eq!(bare.relay.tls_fingerprint().unwrap(), colons(&served));
    assert!(!bare.relay.tls_fingerprint_kept());
    bare.stop().await;
    assert!(logs().contains("bridge mode without --state-dir"), "said in the log");
}
