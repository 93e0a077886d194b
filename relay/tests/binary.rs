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
        .args(["--listen", "127.0.0.1:0", "--print-url", "--state-dir"])
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
    let hashes = info_cert_digests(&body);
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

#[test]
fn version_names_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_tern-relay")).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim_end(),
        format!("tern-relay {} (commit {})", env!("CARGO_PKG_VERSION"), tern_relay::COMMIT)
    );
}

#[test]
fn a_missing_mosh_server_stops_the_binary_with_the_install_commands() {
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .env("TERN_RELAY_MOSH_SERVER", "tern-test-no-such-mosh-server")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no URL for a relay that did not start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mosh-server not found"), "{stderr}");
    assert!(stderr.contains("`sudo apt install mosh`"), "{stderr}");
}

/// Reads stdout lines of a running relay until `done` says so (or 10 s pass).
fn read_lines(
    stdout: &mut BufReader<std::process::ChildStdout>,
    mut done: impl FnMut(&str) -> bool,
) -> Vec<String> {
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let line = line.trim_end_matches('\n').to_string();
        let stop = done(&line);
        lines.push(line);
        if stop {
            break;
        }
    }
    lines
}

#[tokio::test]
async fn the_fingerprint_and_the_qr_code_follow_the_url_on_stdout() {
    let state = tempfile::tempdir().unwrap();
    let token = test_token("qr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--bridge",
            "--allow",
            "127.0.0.1:1",
            "--tls-self-signed",
            "--print-url",
        ])
        .arg("--state-dir")
        .arg(state.path())
        .env("TERN_RELAY_TOKEN", &token)
        .env("TERN_RELAY_QR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // The QR code's last line is the lower edge of its quiet zone: upper half blocks only.
    let lines = read_lines(&mut stdout, |l| !l.is_empty() && l.chars().all(|c| c == '▀'));
    let _ = child.kill();
    let _ = child.wait();

    let url = lines[0].strip_prefix("Open ").expect("the first line is `Open URL`");
    assert!(url.starts_with("https://127.0.0.1:") && url.ends_with(&format!("#token={token}")));
    let printed = lines[1].strip_prefix("Certificate SHA-256 ").expect("the fingerprint line");
    assert_eq!(printed.len(), 32 * 3 - 1, "{printed}");
    assert!(lines[2].contains("kept in the state directory"), "{}", lines[2]);
    // The fingerprint printed is the certificate's kept in the state directory (which the next
    // start serves: tests/first_run.rs), the one the browser will show.
    let pem = std::fs::read(state.path().join("tls/self-signed.pem")).unwrap();
    let der = {
        use tokio_rustls::rustls::pki_types::{CertificateDer, pem::PemObject};
        CertificateDer::from_pem_slice(&pem).unwrap()
    };
    let hash: [u8; 32] = {
        use sha2::Digest;
        sha2::Sha256::digest(&der).into()
    };
    let expected = hash.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":");
    assert_eq!(printed, expected);

    // A blank line, then the code; a phone reads the URL back from it.
    assert_eq!(lines[3], "");
    let rows = tern_relay::qr::modules(&lines[4..].join("\n"))
        .expect("the QR lines hold only half blocks");
    const SCALE: usize = 4;
    let (w, h) = (rows[0].len() * SCALE, rows.len() * SCALE);
    let mut img =
        rqrr::PreparedImage::prepare_from_bitmap(w, h, |x, y| !rows[y / SCALE][x / SCALE]);
    let grids = img.detect_grids();
    assert_eq!(grids.len(), 1, "{}", lines[4..].join("\n"));
    assert_eq!(grids[0].decode().unwrap().1, url);
}

#[test]
fn no_qr_code_for_a_loopback_url_unless_asked() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["--listen", "127.0.0.1:0", "--bridge", "--allow", "127.0.0.1:1", "--print-url"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    // Serving means everything that goes to stdout at start was printed.
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.contains("tern-relay serving") {
        line.clear();
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("Open http://127.0.0.1:"), "{stdout}");
}

/// Runs `cmd` to its end, or kills it after 10 s (a relay that started instead of refusing): its
/// exit status (`None` when it had to be killed) and stderr.
fn exit_of(cmd: &mut Command) -> (Option<std::process::ExitStatus>, String) {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, reader.join().unwrap())
}

/// A chosen token under 16 characters (`TERN_RELAY_TOKEN=secret`, a token file holding `hunter2`)
/// would fall to guessing: the relay refuses to start and says why, unless told
/// `--allow-weak-token`, and then it says so on stderr.
#[test]
fn a_short_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "hunter2\n").unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let relay = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tern-relay"));
        c.args(["--listen", "127.0.0.1:0", "--bridge", "--allow", "127.0.0.1:1"])
            .env_remove("TERN_RELAY_TOKEN")
            .env_remove("TERN_RELAY_TOKEN_FILE")
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null());
        c
    };
    let by_env = exit_of(relay().env("TERN_RELAY_TOKEN", "secret"));
    let by_file = exit_of(relay().arg("--token-file").arg(&file));
    for (what, (status, stderr)) in [("TERN_RELAY_TOKEN", by_env), ("--token-file", by_file)] {
        assert!(status.is_some(), "{what}: a short token started a relay: {stderr}");
        assert!(!status.unwrap().success(), "{what}: exits with an error: {stderr}");
        assert!(stderr.contains("characters long; at least 16 are needed"), "{what}: {stderr}");
        assert!(stderr.contains("--allow-weak-token"), "{what}: names the override: {stderr}");
    }

    // With the override it starts, warning loudly.
    let mut child = relay()
        .env("TERN_RELAY_TOKEN", "secret")
        .arg("--allow-weak-token")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.contains("tern-relay serving") {
        seen.push_str(&line);
        line.clear();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("tern-relay serving"), "it starts with --allow-weak-token: {seen}");
    assert!(seen.contains("WARNING: the token is only 6 characters long"), "{seen}");
}

/// Two relays on one state directory would drive the same sessions' counters and records over
/// each other: the second refuses to start and names the first one's pid; once the first is
/// gone (killed, so nothing of it let go by itself: the kernel drops its lock) the directory is
/// free again.
#[test]
fn a_second_relay_on_the_same_state_dir_refuses_to_start() {
    require_mosh_server();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let token = test_token("statelock");
    let relay = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tern-relay"));
        c.args(["--listen", "127.0.0.1:0", "--state-dir"])
            .arg(state.path())
            .env("TERN_RELAY_TOKEN", &token)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let serving = |child: &mut std::process::Child| {
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while stderr.read_line(&mut line).unwrap() > 0 {
            if line.contains("tern-relay serving") {
                return true;
            }
            line.clear();
        }
        false
    };
    /// Kills the relay however the test ends.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut first = Killed(relay().spawn().unwrap());
    assert!(serving(&mut first.0), "the first relay starts");

    let (status, stderr) = exit_of(&mut relay());
    assert!(status.is_some(), "a second relay started on the same state dir: {stderr}");
    assert!(!status.unwrap().success(), "it exits with an error: {stderr}");
    assert!(stderr.contains("is in use by another tern-relay"), "{stderr}");
    assert!(stderr.contains(&format!("(pid {})", first.0.id())), "names the first relay: {stderr}");

    drop(first);
    let mut third = Killed(relay().spawn().unwrap());
    assert!(serving(&mut third.0), "the state dir is free once the first relay is gone");
}
