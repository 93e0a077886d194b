//! `--acme` against pebble, the ACME test server (Debian's `pebble`, installed by
//! scripts/setup.sh), on loopback. Pebble validates TLS-ALPN-01 for real: its `tlsPort` is the
//! relay's port and `localhost` resolves to loopback, so the relay's own answer on its TCP port is
//! what gets the certificate issued (no PEBBLE_VA_ALWAYS_VALID). Pebble issues certificates valid
//! for 24 s here (`certificateValidityPeriod`), so the renewal at a third of the lifetime left
//! comes after 16 s. The test fails, never skips, without pebble.

mod support;
mod tls_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;
use tern_relay::Config;
use tls_support::*;

/// Seconds each pebble certificate is valid.
const VALIDITY_SECS: u64 = 24;

fn pebble_binary() -> PathBuf {
    let found = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("pebble")).find(|p| p.is_file()));
    found.expect(
        "pebble is not installed (apt-get install -y pebble, or scripts/setup.sh): \
         the ACME test needs it",
    )
}

/// A running pebble; killed when dropped.
struct Pebble {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    mgmt: u16,
    /// The test CA that signed pebble's own HTTPS certificate.
    https_ca: TestCa,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Pebble {
    /// Starts pebble on loopback, validating TLS-ALPN-01 on `tls_port`.
    fn start(tls_port: u16) -> Pebble {
        let bin = pebble_binary();
        let dir = tempfile::tempdir().unwrap();
        let https_ca = TestCa::new("pebble HTTPS test CA");
        let (cert, key) = https_ca.leaf(&["localhost", "127.0.0.1"], "pebble");
        std::fs::write(dir.path().join("cert.pem"), cert).unwrap();
        std::fs::write(dir.path().join("key.pem"), key).unwrap();
        let (port, mgmt) = (free_tcp_port(), free_tcp_port());
        let config = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{port}"),
            "managementListenAddress": format!("127.0.0.1:{mgmt}"),
            "certificate": dir.path().join("cert.pem"),
            "privateKey": dir.path().join("key.pem"),
            "httpPort": free_tcp_port(),
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "certificateValidityPeriod": VALIDITY_SECS,
        }});
        let path = dir.path().join("pebble.json");
        std::fs::write(&path, config.to_string()).unwrap();
        let log = std::fs::File::create(dir.path().join("pebble.log")).unwrap();
        let child = Command::new(bin)
            .arg("-config")
            .arg(&path)
            .env("PEBBLE_VA_NOSLEEP", "1")
            // Pebble rejects 5% of nonces by default to exercise clients' retries; the relay's
            // client retries them, but a second rejection in a row would cost a 30 s backoff.
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            // Every order validates anew (no reuse of the first authorization for the renewal).
            .env("PEBBLE_AUTHZREUSE", "0")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("pebble starts");
        let p = Pebble { child, dir, port, mgmt, https_ca };
        let end = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", p.mgmt)).is_err()
            || std::net::TcpStream::connect(("127.0.0.1", p.port)).is_err()
        {
            assert!(Instant::now() < end, "pebble did not listen:\n{}", p.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        p
    }

    fn directory(&self) -> String {
        format!("https://localhost:{}/dir", self.port)
    }

    fn ca_file(&self) -> PathBuf {
        let p = self.dir.path().join("https-ca.pem");
        std::fs::write(&p, &self.https_ca.pem).unwrap();
        p
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pebble.log")).unwrap_or_default()
    }

    /// Pebble's issuing root (made anew at each start), from its management endpoint.
    async fn root(&self) -> String {
        let addr = ([127, 0, 0, 1], self.mgmt).into();
        let (status, body) =
            https_get(addr, "localhost", self.https_ca.roots(), "/roots/0", None).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("BEGIN CERTIFICATE"), "{body}");
        body
    }
}

fn acme_config(state: &Path, directory: String, ca: PathBuf, token: &str) -> Config {
    let mut c = bridge_config(token, &["127.0.0.1:1-2"]);
    c.state_dir = Some(state.to_path_buf());
    c.acme = vec!["localhost".into()];
    c.acme_email = Some("ops@example.com".into());
    c.acme_directory = directory;
    c.acme_ca_root = Some(ca);
    c
}

/// The leaf the relay serves for `localhost`, verified against pebble's root.
async fn leaf(addr: std::net::SocketAddr, root: &str) -> Option<Vec<u8>> {
    served_leaf(addr, "localhost", roots_from_pem(root)).await.ok()
}

async fn until_leaf(
    addr: std::net::SocketAddr,
    root: &str,
    not: Option<&[u8]>,
    within: Duration,
    pebble: &Pebble,
) -> Vec<u8> {
    let end = Instant::now() + within;
    loop {
        if let Some(der) = leaf(addr, root).await {
            if Some(der.as_slice()) != not {
                return der;
            }
        }
        assert!(
            Instant::now() < end,
            "no (new) certificate from pebble within {within:?}\nrelay log:\n{}\npebble log:\n{}",
            logs(),
            pebble.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A loopback port free for both TCP and UDP right now.
fn free_port_pair() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_obtains_serves_renews_and_caches_a_certificate() {
    capture_logs();
    let state = tempfile::tempdir().unwrap();
    let token = test_token("acme");

    // Pebble must know the relay's port (its tlsPort) before it starts.
    let port = free_port_pair();
    let pebble = Pebble::start(port);
    let mut config = acme_config(state.path(), pebble.directory(), pebble.ca_file(), &token);
    config.listen = format!("127.0.0.1:{port}").parse().unwrap();
    let relay = TestRelay::start(config.clone()).await;
    let addr = relay.addr();
    assert_eq!(relay.relay.page_url(), format!("https://localhost:{port}/#token={token}"));
    let root = pebble.root().await;

    // Issued: the served leaf verifies against pebble's root, names localhost, and
    // /api/info offers no hashes (browsers verify a CA's certificate themselves).
    let first = until_leaf(addr, &root, None, Duration::from_secs(30), &pebble).await;
    let (issuer, names, serial1) = leaf_summary(&first);
    assert!(issuer.to_lowercase().contains("pebble"), "issuer {issuer}");
    assert_eq!(names, vec!["localhost"]);
    let (status, body) =
        https_get(addr, "localhost", roots_from_pem(&root), "/api/info", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(info["cert_self_signed"], false, "{body}");
    assert_eq!(info["cert_hashes"], serde_json::json!([]));
    // WebTransport gets the same certificate, verified the ordinary way.
    let wt = wt_connect_verified(addr, "localhost", roots_from_pem(&root)).await;
    assert!(wt.is_ok(), "WebTransport with pebble's certificate: {:?}", wt.err());

    // The cache: account and certificate with its key, private.
    let acme_dir = state.path().join("acme");
    assert_eq!(mode(&acme_dir), 0o700);
    let files: Vec<PathBuf> =
        std::fs::read_dir(&acme_dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 3, "{files:?}");
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    assert!(files.iter().any(|f| f.to_string_lossy().contains("account-")));

    // Renewal with a third of the 24 s lifetime left: a new certificate, without a restart.
    let second = until_leaf(addr, &root, Some(&first), Duration::from_secs(40), &pebble).await;
    let (_, names2, serial2) = leaf_summary(&second);
    assert_ne!(serial1, serial2);
    assert_eq!(names2, vec!["localhost"]);
    let wt = wt_connect_verified(addr, "localhost", roots_from_pem(&root)).await;
    assert!(wt.is_ok(), "WebTransport after the renewal: {:?}", wt.err());
    drop(wt);
    relay.stop().await;
    // QUIC drains closed connections for a moment before the endpoint lets go of its port.
    let end = Instant::now() + Duration::from_secs(15);
    while std::net::UdpSocket::bind(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < end, "the stopped relay still holds UDP {port}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A restart serves the cached certificate at once, without asking the CA.
    let orders_before = logs().matches("ACME: requesting a certificate").count();
    let relay = TestRelay::start(config).await;
    assert_eq!(leaf(relay.addr(), &root).await.as_deref(), Some(second.as_slice()));
    assert_eq!(logs().matches("ACME: requesting a certificate").count(), orders_before);
    relay.stop().await;
    assert_eq!(logs().matches("ACME: account created").count(), 1, "the account is reused");
    // The first order was validated over TLS-ALPN-01 on the relay's port. The renewal's may be
    // too, or pebble may reuse the account's authorization that is still valid (it sometimes does,
    // whatever its reuse setting says): its certificate above is new either way.
    let validations = pebble.log().matches("set VALID by completed challenge").count();
    assert!((1..=2).contains(&validations), "{}", pebble.log());
}
