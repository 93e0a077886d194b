//! `--tls-cert/--tls-key` with a CA's certificate: the page (HTTPS) and WebTransport verify it
//! the ordinary way (no hash in `/api/info`), and replacing the files (a certbot renewal) switches
//! new connections to the new certificate without a restart, while a live session stays.
//! Certificates come from CAs made here with rcgen.

mod support;
mod tls_support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::*;
use tern_relay::control::{ClientMessage, ServerMessage};
use tls_support::*;

/// A UDP socket for the bridge to point at (nothing needs to answer for `ready`).
async fn target() -> tokio::net::UdpSocket {
    tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap()
}

fn write(dir: &Path, cert: &str, key: &str) {
    // Key first, then the certificate, each through a rename, as certbot's symlink switch is
    // atomic per file: in between the pair does not match, which the relay must sit out.
    for (name, body) in [("key.pem", key), ("cert.pem", cert)] {
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, body).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }
}

async fn until_served(addr: std::net::SocketAddr, ca: &TestCa, want: &[u8]) {
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(der) = served_leaf(addr, "localhost", ca.roots()).await {
            if der == want {
                return;
            }
        }
        assert!(Instant::now() < end, "the relay did not switch to the new certificate in 15 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn der_of(pem: &str) -> Vec<u8> {
    use tokio_rustls::rustls::pki_types::{CertificateDer, pem::PemObject};
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec()
}

#[tokio::test]
async fn a_ca_certificate_is_verified_normally_and_reloaded_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ca1 = TestCa::new("Tern test CA one");
    let ca2 = TestCa::new("Tern test CA two");
    let (cert_a, key_a) = ca1.leaf(&["localhost", "127.0.0.1"], "relay A");
    write(dir.path(), &cert_a, &key_a);

    let udp = target().await;
    let token = test_token("tls");
    let mut c =
        bridge_config(&token, &[&format!("127.0.0.1:{}", udp.local_addr().unwrap().port())]);
    c.tls_cert = Some(dir.path().join("cert.pem"));
    c.tls_key = Some(dir.path().join("key.pem"));
    c.tls_reload_secs = 1;
    let relay = TestRelay::start(c).await;
    let addr = relay.addr();

    // The page's URL names the certificate's host; HTTPS verifies against the CA.
    assert!(
        relay.relay.page_url().starts_with(&format!("https://localhost:{}/#token=", addr.port())),
        "{}",
        relay.relay.page_url()
    );
    assert_eq!(served_leaf(addr, "localhost", ca1.roots()).await.unwrap(), der_of(&cert_a));
    let (status, body) = https_get(addr, "localhost", ca1.roots(), "/api/info", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(info["cert_self_signed"], false, "{body}");
    assert_eq!(info["cert_hashes"], serde_json::json!([]), "no hash pinning for a CA's cert");
    assert!(relay.relay.cert_hashes().is_empty());

    // WebTransport verifies the same certificate against the CA, and a session runs.
    let live = wt_connect_verified(addr, "localhost", ca1.roots()).await.expect("WebTransport");
    let port = udp.local_addr().unwrap().port();
    let (mut control, reply) = hello(&live, bridge_hello(&token, "127.0.0.1", port)).await;
    expect_ready(reply);
    assert!(
        wt_connect_verified(addr, "localhost", ca2.roots()).await.is_err(),
        "a client trusting another CA must refuse"
    );

    // Renewal: new files from another CA. New connections see them, within a few seconds.
    let (cert_b, key_b) = ca2.leaf(&["localhost", "127.0.0.1"], "relay B");
    write(dir.path(), &cert_b, &key_b);
    until_served(addr, &ca2, &der_of(&cert_b)).await;
    assert!(
        served_leaf(addr, "localhost", ca1.roots()).await.is_err(),
        "the old CA no longer fits"
    );
    let fresh = wt_connect_verified(addr, "localhost", ca2.roots()).await;
    assert!(fresh.is_ok(), "WebTransport serves the new certificate: {:?}", fresh.err());
    assert!(
        wt_connect_verified(addr, "localhost", ca1.roots()).await.is_err(),
        "WebTransport no longer serves the old certificate"
    );
    // The live session, opened under the old certificate, goes on.
    control.send.write_all(&ClientMessage::Ping.to_line()).await.unwrap();
    assert_eq!(control.next().await, ServerMessage::Pong);

    // A half-written pair (certificate without its key) is sat out: B stays.
    let (cert_c, _key_c) = ca1.leaf(&["localhost"], "relay C");
    std::fs::write(dir.path().join("cert.pem"), &cert_c).unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(served_leaf(addr, "localhost", ca2.roots()).await.unwrap(), der_of(&cert_b));
    assert!(wt_connect_verified(addr, "localhost", ca2.roots()).await.is_ok());
    // Garbage too.
    std::fs::write(dir.path().join("cert.pem"), "not a certificate").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(served_leaf(addr, "localhost", ca2.roots()).await.unwrap(), der_of(&cert_b));
    let logs = logs();
    assert!(logs.contains("do not load"), "the refused pair is logged");
    assert!(logs.contains("certificate files changed: new connections get the new certificate"));

    // Then a good pair again.
    let (cert_d, key_d) = ca1.leaf(&["localhost", "127.0.0.1"], "relay D");
    write(dir.path(), &cert_d, &key_d);
    until_served(addr, &ca1, &der_of(&cert_d)).await;

    drop(live);
    relay.stop().await;
}

#[tokio::test]
async fn a_pair_that_does_not_match_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("Tern test CA");
    let (cert, _) = ca.leaf(&["localhost"], "a");
    let (_, other_key) = ca.leaf(&["localhost"], "b");
    std::fs::write(dir.path().join("cert.pem"), cert).unwrap();
    std::fs::write(dir.path().join("key.pem"), other_key).unwrap();
    let mut c = bridge_config(&test_token("mismatch"), &["127.0.0.1:1-2"]);
    c.tls_cert = Some(dir.path().join("cert.pem"));
    c.tls_key = Some(dir.path().join("key.pem"));
    let e = tern_relay::Relay::new(c).await.unwrap_err();
    assert!(e.to_string().contains("does not match"), "{e}");
}
