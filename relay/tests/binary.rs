//! The tern-relay binary as a user runs it: printed URL, Ctrl-C to its process group, and the
//! shell it started surviving that.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

/// Signals a whole process group, as a terminal's Ctrl-C does.
fn signal_group(pgid: u32, signal: &str) {
    let status = Command::new("kill").args([signal, "--", &format!("-{pgid}")]).status().unwrap();
    assert!(status.success());
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
            .unwrap_or(true)
}

#[tokio::test]
async fn ctrl_c_stops_the_relay_but_not_the_shell() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let token = test_token("binary");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .args(["--", "/bin/sh"])
        .env("TERN_RELAY_TOKEN", &token)
        .env("RUST_LOG", "debug")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, standing in for the terminal's foreground group.
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.starts_with("Open http://127.0.0.1:"), "{line}");
    assert!(line.trim_end().ends_with(&format!("/#token={token}")), "{line}");
    let port: u16 =
        line.split(':').nth(2).unwrap().split('/').next().unwrap().parse().expect("port in URL");

    // Spawn a session through it.
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let (status, body) = http_get(addr, "/api/info", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    let hashes: Vec<wtransport::tls::Sha256Digest> = info["cert_hashes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            use base64::Engine;
            let b: [u8; 32] = base64::engine::general_purpose::STANDARD
                .decode(h.as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap();
            wtransport::tls::Sha256Digest::new(b)
        })
        .collect();
    let conn = connect_with_hashes(addr, hashes, None).await.unwrap();
    let (control, reply) = hello(&conn, spawn_hello(Some(&token), None)).await;
    let ready = expect_ready(reply);
    let mut mosh = MoshOverRelay::new(conn, control, ready.key.as_deref().unwrap(), 1200);
    mosh.type_bytes(b"echo up-$((40+2))\n");
    assert!(mosh.run_until(Duration::from_secs(10), |s| s.server_state().contains(b"up-42")).await);
    let pids = recorded_pids(state.path());
    assert_eq!(pids.len(), 1);

    // Ctrl-C: the relay exits cleanly, mosh-server (and its shell) live on.
    signal_group(pgid, "-INT");
    let status =
        tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    assert!(status.status.success(), "relay exit: {:?}", status.status);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(pid_alive(pids[0]), "mosh-server died with the relay");

    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(stderr.contains("tern-relay stopped"), "{stderr}");
    assert!(!stderr.contains(&token), "token in the log");
    assert!(!stderr.contains(ready.key.as_deref().unwrap()), "key in the log");
}

#[test]
fn refuses_a_public_address_without_tls_with_a_clear_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["--listen", "0.0.0.0:0", "--bridge", "--allow", "127.0.0.1:1"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to listen on 0.0.0.0:0 without TLS"), "{stderr}");
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
}
