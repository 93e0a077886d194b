//! The mosh-server starter: clear errors from programs that are not mosh-server (missing, silent,
//! hanging, chatty, malformed), and the real mosh-server bound where it was told.
//!
//! The fake servers are small `/bin/sh` scripts; they receive mosh-server's arguments and ignore
//! them. The real-server test fails, loudly, when mosh-server is not installed.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tern::session::{HostLog, SessionConfig};
use tern::wire::ConnectLineError;
use tern_native::{Bind, MoshServer, MoshServerOptions, NativeClient, ServerPort, StartError};

const KEY: &str = "PWSoCIVurTVBGXAj873xNg";

/// A fake mosh-server: `body` as an executable `/bin/sh` script in its own temporary directory.
struct FakeServer {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl FakeServer {
    fn new(body: &str) -> FakeServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("fake-mosh-server");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        FakeServer { _dir: dir, path }
    }

    fn options(&self) -> MoshServerOptions {
        MoshServerOptions { program: self.path.clone(), ..MoshServerOptions::default() }
    }
}

/// Starts, retrying while the script is "busy": another test thread may fork while this one
/// still holds the freshly written script open, and exec refuses a file open for writing.
fn start(options: &MoshServerOptions) -> Result<MoshServer, StartError> {
    const ETXTBSY: i32 = 26;
    let mut tries = 0;
    loop {
        match MoshServer::start(options) {
            Err(StartError::Start { source, .. })
                if source.raw_os_error() == Some(ETXTBSY) && tries < 50 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

#[test]
fn a_missing_program_is_a_start_error_that_names_it() {
    let options = MoshServerOptions {
        program: "/nonexistent/mosh-server".into(),
        ..MoshServerOptions::default()
    };
    let error = start(&options).expect_err("no such program");
    assert!(matches!(error, StartError::Start { .. }), "{error:?}");
    assert!(error.to_string().contains("/nonexistent/mosh-server"), "{error}");
}

#[test]
fn a_silent_program_gives_no_connect_line_with_its_status() {
    // `false` ignores its arguments and exits 1 without output.
    let options = MoshServerOptions { program: "false".into(), ..MoshServerOptions::default() };
    let error = start(&options).expect_err("false prints nothing");
    match &error {
        StartError::NoConnectLine { status, stderr } => {
            assert!(status.contains('1'), "{status}");
            assert_eq!(stderr, "(empty)");
        }
        other => panic!("expected NoConnectLine, got {other:?}"),
    }
    assert!(error.to_string().contains("without a MOSH CONNECT line"), "{error}");
}

#[test]
fn a_program_that_prints_nothing_and_sleeps_times_out_within_the_timeout() {
    let fake = FakeServer::new("echo 'starting up' >&2\nexec sleep 30");
    let options = MoshServerOptions { timeout: Duration::from_millis(500), ..fake.options() };
    let started = Instant::now();
    let error = start(&options).expect_err("sleep prints no connect line");
    let took = started.elapsed();
    match &error {
        StartError::Timeout { timeout, stderr } => {
            assert_eq!(*timeout, Duration::from_millis(500));
            assert!(stderr.contains("starting up"), "{stderr}");
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(took >= Duration::from_millis(500), "gave up early: {took:?}");
    assert!(took < Duration::from_secs(3), "the timeout did not bite: {took:?}");
}

#[test]
fn a_timeout_returns_promptly_even_when_a_grandchild_holds_the_pipes() {
    // Killing the script leaves its `sleep` (short, so it cleans up after itself) holding stdout
    // and stderr; the starter must not wait for their end.
    let fake = FakeServer::new("sleep 3\nexit 0");
    let options = MoshServerOptions { timeout: Duration::from_millis(300), ..fake.options() };
    let started = Instant::now();
    let error = start(&options).expect_err("no connect line");
    assert!(matches!(error, StartError::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[test]
fn a_bad_port_range_is_refused_before_anything_starts() {
    for (low, high) in [(0, 10), (61010, 61000)] {
        let options = MoshServerOptions {
            program: "/nonexistent/mosh-server".into(),
            port: Some(ServerPort::Range { low, high }),
            ..MoshServerOptions::default()
        };
        let error = start(&options).expect_err("bad range");
        assert!(matches!(error, StartError::InvalidPorts { .. }), "{error:?}");
    }
}

#[test]
fn a_connect_line_and_the_detached_pid_are_read() {
    let fake = FakeServer::new(&format!(
        "echo\necho 'MOSH CONNECT 60123 {KEY}'\n\
         echo 'mosh-server (mosh 1.4.0)' >&2\necho '[mosh-server detached, pid = 4242]' >&2"
    ));
    let server = start(&fake.options()).expect("fake server starts");
    assert_eq!(server.port, 60123);
    assert_eq!(server.key.to_base64(), KEY);
    assert_eq!(server.pid, Some(4242));
}

#[test]
fn a_malformed_connect_line_is_refused_without_repeating_the_key() {
    for (line, reason) in [
        (format!("MOSH CONNECT 0 {KEY}"), ConnectLineError::BadPort),
        (format!("MOSH CONNECT 60123 {KEY} extra"), ConnectLineError::TrailingWords),
    ] {
        let fake = FakeServer::new(&format!("echo '{line}'"));
        let error = start(&fake.options()).expect_err(&line);
        match &error {
            StartError::BadConnectLine { reason: got, .. } => assert_eq!(*got, reason),
            other => panic!("expected BadConnectLine, got {other:?}"),
        }
        assert!(!error.to_string().contains(KEY), "{error}");
    }
}

#[test]
fn stderr_is_reported_capped_to_its_latest_words() {
    let fake = FakeServer::new(
        "i=0\nwhile [ $i -lt 3000 ]; do echo \"chatter $i ................................\"; \
         i=$((i+1)); done >&2\necho 'the last words' >&2\nexit 3",
    );
    let error = start(&fake.options()).expect_err("no connect line");
    match &error {
        StartError::NoConnectLine { status, stderr } => {
            assert!(status.contains('3'), "{status}");
            assert!(stderr.ends_with("the last words"), "{stderr}");
            assert!(!stderr.contains("chatter 0 "), "{stderr}");
            assert!(stderr.chars().count() <= 600, "{} characters", stderr.chars().count());
        }
        other => panic!("expected NoConnectLine, got {other:?}"),
    }
}

#[test]
fn the_environment_is_cleared_trimmed_and_extended_as_asked() {
    // Some variable this test process has; the fake server answers only when it is gone.
    let inherited = ["CARGO_MANIFEST_DIR", "HOME", "USER", "LANG", "TERM"]
        .into_iter()
        .find(|name| std::env::var_os(name).is_some())
        .expect("cargo test passes CARGO_MANIFEST_DIR");
    let fake = FakeServer::new(&format!(
        "if [ -z \"${{{inherited}+x}}\" ] && [ \"$TERN_EXTRA\" = yes ]; then \
         echo 'MOSH CONNECT 60123 {KEY}'; else echo \"env: $TERN_EXTRA\" >&2; fi"
    ));
    let with_env =
        MoshServerOptions { env: vec![("TERN_EXTRA".into(), "yes".into())], ..fake.options() };
    let error = start(&with_env).expect_err("the inherited variable is still there");
    assert!(matches!(error, StartError::NoConnectLine { .. }), "{error:?}");

    let removed = MoshServerOptions { env_remove: vec![inherited.into()], ..with_env.clone() };
    assert_eq!(start(&removed).expect("variable removed").port, 60123);
    let cleared = MoshServerOptions { clear_env: true, ..with_env };
    assert_eq!(start(&cleared).expect("environment cleared").port, 60123);
}

#[test]
fn the_real_mosh_server_binds_the_address_and_port_range_it_was_given() {
    // Above Linux's ephemeral range (32768..60999) and mosh's default one (60001..60999).
    let (low, high) = (61000, 61999);
    let options = MoshServerOptions {
        bind: Bind::Ip([127, 0, 0, 1].into()),
        port: Some(ServerPort::Range { low, high }),
        command: vec!["/bin/sh".into()],
        env: vec![("PS1".into(), "$ ".into()), ("ENV".into(), String::new())],
        ..MoshServerOptions::default()
    };
    let server = MoshServer::start(&options)
        .unwrap_or_else(|e| panic!("mosh-server is required for this test: {e}"));
    assert!((low..=high).contains(&server.port), "port {}", server.port);
    assert!(server.is_alive(), "no live daemon (pid {:?})", server.pid);

    // Bound to 127.0.0.1 itself, not the wildcard address.
    let bound = format!("0100007F:{:04X} ", server.port);
    let udp = std::fs::read_to_string("/proc/net/udp").expect("/proc/net/udp");
    assert!(udp.lines().any(|l| l.contains(&bound)), "no {bound} in\n{udp}");

    // And it serves there.
    let addr: SocketAddr = ([127, 0, 0, 1], server.port).into();
    let mut client: NativeClient<HostLog> =
        NativeClient::connect(addr, SessionConfig::new(server.key.clone(), 80, 24)).expect("udp");
    let prompt = client
        .run_until(Duration::from_secs(10), |s| s.server_state().contains(b"$ "))
        .expect("udp");
    server.kill();
    assert!(prompt, "no prompt; last error: {:?}", client.session().last_error());
    assert!(server.wait_gone(Duration::from_secs(5)), "still running after kill");
}
