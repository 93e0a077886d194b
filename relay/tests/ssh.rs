//! Sessions on ssh hosts (`--ssh-host`) against a real sshd on loopback and the real mosh-server:
//! the relay starts mosh-server over ssh and bridges to it, a paste lands on the host, a relay
//! restart resumes the session, and each usual ssh failure gets its own message at once. The
//! recorder runs there (copied once, hash checked), its history, pictures and signals come back
//! over the follow channel, and where it cannot run `ready` says which features are off and why.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;
use tern::relay_proto::PageSignal;
use tern_relay::config::Config;
use tern_relay::control::{Hello, ServerMessage};

const CLIENT_MTU: usize = 1200;

/// Two sshds of tests/ssh-fixture.sh (a key login, a password-only one), stopped on drop.
struct Sshd {
    dir: tempfile::TempDir,
    port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/ssh-fixture.sh")
}

impl Sshd {
    fn start() -> Sshd {
        assert!(
            Path::new("/usr/sbin/sshd").is_file(),
            "sshd is not installed (apt-get install -y openssh-server): this test needs it"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let ports = [port, free_port(), free_port()].map(|p| p.to_string());
        let status = Command::new("bash")
            .arg(fixture())
            .arg("start")
            .arg(dir.path())
            .args(&ports)
            .status()
            .unwrap();
        assert!(status.success(), "tests/ssh-fixture.sh failed");
        Sshd { dir, port }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A spawn-mode relay with the fixture's hosts; pastes for them land in `host-pastes`.
    fn relay_config(&self, state: &Path, token: &str) -> Config {
        let mut c = spawn_config(state, token);
        c.ssh_host = ["good", "needs-password", "wrong-key", "down"]
            .iter()
            .map(|h| h.parse().unwrap())
            .collect();
        c.ssh_config = Some(self.path("ssh_config"));
        c.ssh_paste_dir = self.path("host-pastes").to_string_lossy().into_owned();
        c.ssh_recorder_dir = self.path("host-tern").to_string_lossy().into_owned();
        c.paste_dir = Some(self.path("relay-pastes"));
        c
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(fixture()).arg("stop").arg(self.dir.path()).status();
    }
}

/// Ends the host's mosh-server however the test ends (the host is this machine).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if Path::new(&format!("/proc/{}", self.0)).exists() {
            kill_pid(self.0);
        }
    }
}

fn host_hello(token: &str, host: &str) -> Hello {
    Hello { ssh_host: Some(host.into()), ..spawn_hello(Some(token), None) }
}

/// The refusal's code and message.
fn refusal(m: ServerMessage) -> (String, String) {
    match m {
        ServerMessage::Error { code, message } => (code.as_str().to_owned(), message),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// The remote mosh-server's pid, from the relay's record of the session.
fn remote_pid(state: &Path, session: &str) -> u32 {
    let file = state.join("sessions").join(format!("{session}.json"));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    assert_eq!(record["remote"]["host"], "good");
    assert_eq!(record["remote"]["ip"], "127.0.0.1");
    assert!(record["pid"].is_null(), "not a process of this machine's: {record}");
    record["remote"]["pid"].as_u64().expect("the host's pid is recorded") as u32
}

#[tokio::test]
async fn a_session_on_an_ssh_host_types_pastes_and_survives_a_relay_restart() {
    let sshd = Sshd::start();
    let token = test_token("ssh");
    let state = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(sshd.relay_config(state.path(), &token)).await;

    // The page's list offers the hosts.
    let (status, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#""ssh_hosts":["down","good","needs-password","wrong-key"]"#), "{body}");

    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, host_hello(&token, "good")).await;
    let ready = expect_ready(reply);
    let key = ready.key.clone().expect("the relay started it and knows the key");
    let mut mosh = MoshOverRelay::new(conn, control, &key, CLIENT_MTU);
    assert!(mosh.run_until(Duration::from_secs(15), |s| s.has_heard_server()).await);
    mosh.type_bytes(b"echo \"via-ssh[$SSH_CONNECTION]\"\n");
    // SSH_CONNECTION: "client-ip client-port server-ip server-port", the server's being sshd's.
    let want = format!(" 127.0.0.1 {}]", sshd.port);
    assert!(
        mosh.run_until(Duration::from_secs(10), |s| s
            .server_state()
            .contains(b"via-ssh[127.0.0.1 ")
            && s.server_state().contains(want.as_bytes()))
            .await,
        "the shell did not come over ssh: {:?}",
        mosh.screen_text()
    );
    let pid = remote_pid(state.path(), &ready.session);
    let _cleanup = KillOnDrop(pid);
    let (_, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert!(body.contains(r#""host":"good""#), "{body}");

    // A paste lands on the host, under its paste directory, byte for byte, and its path there
    // is what the page types; a repeat sends nothing and gets the same path.
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\n"
        .iter()
        .copied()
        .chain((0..300_000u32).map(|i| (i * 7) as u8))
        .collect();
    let hash = hex(&png);
    let (mut send, mut recv) = open_upload(&mosh.conn, &hash, png.len()).await;
    let first = lines_until(&mut recv, |v| v.get("have").is_some()).await;
    assert_eq!(first.last().unwrap()["have"], 0);
    send.write_all(&png).await.unwrap();
    let lines =
        lines_until(&mut recv, |v| v.get("path").is_some() || v.get("error").is_some()).await;
    let last = lines.last().unwrap();
    let host_path =
        last["path"].as_str().unwrap_or_else(|| panic!("no path: {lines:?}")).to_owned();
    assert_eq!(host_path, sshd.path("host-pastes").join(format!("{hash}.png")).to_string_lossy());
    assert_eq!(std::fs::read(&host_path).unwrap(), png, "the host's copy is byte-identical");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&host_path).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let (_send, mut recv) = open_upload(&mosh.conn, &hash, png.len()).await;
    let repeat = lines_until(&mut recv, |v| v.get("path").is_some()).await;
    assert_eq!(repeat.last().unwrap()["path"], host_path.as_str(), "{repeat:?}");

    // A restarted relay resumes it on the host, from its record.
    relay.stop().await;
    let relay = TestRelay::start(sshd.relay_config(state.path(), &token)).await;
    let conn = connect(&relay, None).await.expect("connects again");
    let (control, reply) = hello(&conn, spawn_hello(Some(&token), Some(&ready.session))).await;
    let again = expect_ready(reply);
    assert!(again.resumed);
    mosh.reattach(conn, control, again.seq_floor);
    mosh.type_bytes(b"echo back-$((40+2))\n");
    assert!(
        mosh.run_until(Duration::from_secs(10), |s| s.server_state().contains(b"back-42")).await,
        "no echo after the restart: {:?}",
        mosh.screen_text()
    );

    // Once its mosh-server is gone on the host, resuming says so (the host was asked).
    kill_pid(pid);
    let gone = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() && gone.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let conn = connect(&relay, None).await.expect("connects");
    let (_control, reply) = hello(&conn, spawn_hello(Some(&token), Some(&ready.session))).await;
    let (code, message) = refusal(reply);
    assert_eq!(code, "session_ended", "{message}");
    assert!(message.contains("on good is gone"), "{message}");
    relay.stop().await;
    assert_not_logged(&key, "mosh key");
}

#[tokio::test]
async fn each_usual_ssh_failure_is_explained_at_once() {
    let sshd = Sshd::start();
    let token = test_token("ssh-fail");
    let state = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(sshd.relay_config(state.path(), &token)).await;
    for (host, says) in [
        ("needs-password", "wants a password or a key"),
        ("wrong-key", "has changed"),
        ("down", "cannot be reached over ssh"),
        ("elsewhere", "not one of this relay's --ssh-host hosts"),
    ] {
        let started = Instant::now();
        let conn = connect(&relay, None).await.expect("connects");
        let (_control, reply) = hello(&conn, host_hello(&token, host)).await;
        let (code, message) = refusal(reply);
        let expected = if host == "elsewhere" { "target_not_allowed" } else { "spawn_failed" };
        assert_eq!(code, expected, "{host}: {message}");
        assert!(message.contains(says), "{host}: {message}");
        // Nothing waits for a person to answer a prompt: loopback failures come back at once.
        assert!(started.elapsed() < Duration::from_secs(10), "{host} took {:?}", started.elapsed());
    }
    // None of them left a session behind.
    let (_, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert!(body.starts_with(r#"{"sessions":[]"#), "{body}");
    relay.stop().await;
}

/// The attack on shared connections (`ControlMaster`): `good` and `wrong-key` are one address,
/// port and user, but `wrong-key`'s known host key is another. Once a session on `good` has opened
/// the shared connection, a start on `wrong-key` must still check its own host key and be refused,
/// not ride on the connection `good` verified. With sockets keyed by address (ssh's `%C` alone) the
/// second start got `ready`: a session on a host whose key had changed.
#[tokio::test]
async fn a_shared_connection_never_carries_another_host_name() {
    let sshd = Sshd::start();
    let token = test_token("ssh-shared");
    let state = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(sshd.relay_config(state.path(), &token)).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (_control, reply) = hello(&conn, host_hello(&token, "good")).await;
    let ready = expect_ready(reply);
    let _cleanup = KillOnDrop(host_pid(state.path(), &ready.session));
    let conn = connect(&relay, None).await.expect("connects");
    let (_control, reply) = hello(&conn, host_hello(&token, "wrong-key")).await;
    let (code, message) = refusal(reply);
    assert_eq!(code, "spawn_failed", "wrong-key: {message}");
    assert!(message.contains("has changed"), "wrong-key: {message}");
    relay.stop().await;
}

#[test]
fn a_host_name_that_is_an_option_is_refused_at_start() {
    use clap::Parser;
    let e = Config::try_parse_from(["tern-relay", "--ssh-host=-oProxyCommand=sh"]).unwrap_err();
    assert!(e.to_string().contains("ssh"), "{e}");
    assert!(Config::try_parse_from(["tern-relay", "--ssh-host", "devbox,me@build"]).is_ok());
}

/// A session on an ssh host whose mosh-server ended (its shell exited, its idle timeout) while
/// no page came back: the relay asks the host and drops the record, so `/api/sessions` does not
/// list it forever and it no longer counts against `--max-spawned`.
#[tokio::test]
async fn a_gone_server_on_an_ssh_host_is_pruned_without_a_resume() {
    let sshd = Sshd::start();
    let token = test_token("ssh-prune");
    let state = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(sshd.relay_config(state.path(), &token)).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (_control, reply) = hello(&conn, host_hello(&token, "good")).await;
    let ready = expect_ready(reply);
    let pid = remote_pid(state.path(), &ready.session);
    let _cleanup = KillOnDrop(pid);
    let (_, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert!(body.contains(&ready.session), "{body}");
    drop(conn);

    kill_pid(pid);
    // The relay asks the hosts every minute.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut listed = true;
    while listed && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (_, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
        listed = body.contains(&ready.session);
    }
    assert!(!listed, "the record of a server gone on the host is still listed");
    let record = state.path().join("sessions").join(format!("{}.json", ready.session));
    assert!(!record.exists(), "its record file is removed");
    assert!(logs().contains("pruning record of a mosh-server on an ssh host that is gone"));
    relay.stop().await;
}

/// `--max-spawned 1` and two pages asking for a server on an ssh host at the same moment: the
/// start over ssh takes a while, and both checked the limit before either was recorded. Starts
/// take the spawn lock as local ones do: one is admitted, the other refused.
#[tokio::test]
async fn ssh_starts_at_once_stay_within_max_spawned() {
    let sshd = Sshd::start();
    let token = test_token("ssh-lock");
    let state = tempfile::tempdir().unwrap();
    let mut config = sshd.relay_config(state.path(), &token);
    config.max_spawned = 1;
    let relay = TestRelay::start(config).await;
    let (a, b) = tokio::join!(connect(&relay, None), connect(&relay, None));
    let (a, b) = (a.expect("connects"), b.expect("connects"));
    let ((_ca, ra), (_cb, rb)) =
        tokio::join!(hello(&a, host_hello(&token, "good")), hello(&b, host_hello(&token, "good")));
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for reply in [ra, rb] {
        match reply {
            ServerMessage::Ready(r) => admitted.push(r.session.clone()),
            other => refused.push(refusal(other)),
        }
    }
    let _cleanup: Vec<KillOnDrop> =
        admitted.iter().map(|s| KillOnDrop(remote_pid(state.path(), s))).collect();
    assert_eq!(admitted.len(), 1, "exactly one start within --max-spawned 1: {refused:?}");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0, "too_many_sessions", "{refused:?}");
    relay.stop().await;
}

/// The host's mosh-server pid from the relay's record, whatever the host.
fn host_pid(state: &Path, session: &str) -> u32 {
    let file = state.join("sessions").join(format!("{session}.json"));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    record["remote"]["pid"].as_u64().expect("the host's pid is recorded") as u32
}

/// A session on an ssh host has no recorder (no history, pictures or OSC signals): `ready` says
/// which features are off and why, from what the host says it is (`other-arch`'s `uname` says
/// aarch64: tests/ssh-fixture.sh), on the first `ready` and on a resume after a relay restart alike; the
/// session works all the same.
#[tokio::test]
async fn a_host_without_the_recorder_gets_which_features_are_off_and_why() {
    let sshd = Sshd::start();
    let token = test_token("ssh-off");
    let state = tempfile::tempdir().unwrap();
    let config = || {
        let mut c = sshd.relay_config(state.path(), &token);
        c.ssh_host.push("other-arch".parse().unwrap());
        c.ssh_program = sshd.path("ssh-other-arch");
        c
    };
    let relay = TestRelay::start(config()).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, host_hello(&token, "other-arch")).await;
    let ready = expect_ready(reply);
    let _cleanup = KillOnDrop(host_pid(state.path(), &ready.session));
    let off = ready.off.clone().expect("the features that are off are named");
    assert_eq!(off.host, "other-arch");
    assert_eq!(off.features, ["history", "pictures", "signals"]);
    let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
    assert_eq!(off.why, format!("its machine is linux aarch64, this relay is {os} {arch}"));
    assert!(off.sentence().starts_with("History, pictures and signals are off on other-arch: "));
    let mut mosh = MoshOverRelay::new(conn, control, ready.key.as_deref().unwrap(), CLIENT_MTU);
    mosh.type_bytes(b"echo works-$((6*7))\n");
    assert!(
        mosh.run_until(Duration::from_secs(15), |s| s.server_state().contains(b"works-42")).await,
        "the session works without the recorder: {:?}",
        mosh.screen_text()
    );

    // Nothing was copied to a host of another machine.
    assert!(!sshd.path("host-tern/bin").exists(), "no recorder copied to other-arch");

    // A restarted relay says it again on resume, from the session's record.
    relay.stop().await;
    let relay = TestRelay::start(config()).await;
    let conn = connect(&relay, None).await.expect("connects again");
    let (_control, reply) = hello(&conn, spawn_hello(Some(&token), Some(&ready.session))).await;
    let again = expect_ready(reply);
    assert!(again.resumed);
    assert_eq!(again.off, Some(off));
    relay.stop().await;
}

/// The files of the relay's copy of the recorder on the host (`host-tern/bin/<hash>/`).
fn host_recorders(sshd: &Sshd) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(sshd.path("host-tern/bin")) else { return Vec::new() };
    dirs.flatten().map(|d| d.path().join("tern-relay")).filter(|p| p.exists()).collect()
}

fn sha256_file(path: &Path) -> String {
    use sha2::Digest;
    hex_of(&sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The whole history of `session` as plain text, from the relay's history API.
async fn history_text(relay: &TestRelay, session: &str) -> Vec<String> {
    use tern::relay_proto::{HISTORY_PATH, HistoryPage, HistoryRequest, decode, encode};
    let req = HistoryRequest { session: session.into(), before: None, count: 2000 };
    let (status, body) =
        http_post(relay.addr(), HISTORY_PATH, Some(&relay.token()), &encode(&req)).await;
    assert_eq!(status, 200, "{body}");
    let page: HistoryPage = decode(body.as_bytes()).expect("a history page");
    page.lines.iter().map(|l| tern::terminal::plain(l)).collect()
}

/// Waits until the relay's history of `session` holds `want` (its last line), up to 20 s.
async fn history_until(
    relay: &TestRelay,
    mosh: &mut MoshOverRelay<tern::terminal::Complete>,
    session: &str,
    want: &str,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = history_text(relay, session).await;
        if lines.iter().any(|l| l == want) || Instant::now() > deadline {
            return lines;
        }
        mosh.run_until(Duration::from_millis(200), |_| false).await;
    }
}

/// The pid of the follower on the host for `session` (`tern-relay record-follow ... --session
/// ID`): the host is this machine.
fn follower_pid(session: &str) -> Option<u32> {
    std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
        let c = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let c = String::from_utf8_lossy(&c);
        let mut argv = c.split('\0');
        let is = argv.next()?.ends_with("tern-relay")
            && argv.next()? == "record-follow"
            && c.contains(&format!("\0--session\0{session}\0"));
        is.then_some(pid)
    })
}

/// A session on a host of the relay's machine gets the recorder: the relay's executable is
/// copied there once (checked by hash; a tampered copy is replaced on the next start), the
/// lines typed there reach the relay's history API, a SIXEL printed there is a picture the relay
/// serves, and a follow channel killed mid-session comes back without losing or doubling a line.
#[tokio::test]
async fn a_session_on_an_ssh_host_has_the_recorder_history_and_pictures() {
    let sshd = Sshd::start();
    let token = test_token("ssh-recorder");
    let state = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(sshd.relay_config(state.path(), &token)).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, host_hello(&token, "good")).await;
    let ready = expect_ready(reply);
    let _cleanup = KillOnDrop(host_pid(state.path(), &ready.session));
    assert_eq!(ready.off, None, "nothing is off on a host of the relay's machine");
    let copies = host_recorders(&sshd);
    assert_eq!(copies.len(), 1, "one copy of the recorder: {copies:?}");
    let relay_bin = Path::new(env!("CARGO_BIN_EXE_tern-relay"));
    let hash = sha256_file(relay_bin);
    assert_eq!(sha256_file(&copies[0]), hash, "the relay's own executable");
    assert!(copies[0].parent().unwrap().ends_with(&hash[..16]), "{copies:?}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&copies[0]).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o700);
    let copied_at = std::fs::metadata(&copies[0]).unwrap().modified().unwrap();

    let mut mosh = MoshOverRelay::with_screen(conn, control, ready.key.as_deref().unwrap());
    assert!(mosh.run_until(Duration::from_secs(15), |s| s.has_heard_server()).await);
    // The history holds the lines that scrolled off the screen: 30 more push the last one off.
    mosh.type_bytes(b"seq -f 'host-line-%g' 1 80; seq -f 'pad-%g' 1 30\n");
    let lines = history_until(&relay, &mut mosh, &ready.session, "host-line-80").await;
    assert!(
        lines.iter().any(|l| l == "host-line-1"),
        "the host's lines in the relay's history: {lines:?}"
    );
    assert!(lines.iter().any(|l| l == "host-line-80"), "{lines:?}");

    // A SIXEL printed on the host: lifted there, served by the relay as a PNG.
    mosh.type_bytes(
        b"printf 'pic:\\033Pq\"1;1;30;30#1;2;100;0;0#1!30~-!30~-!30~-!30~-!30~\\033\\\\done\\n'\n",
    );
    let ask = tern::relay_proto::encode(&tern::relay_proto::ImageRequest {
        session: ready.session.clone(),
        image: 1,
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, body) = loop {
        let (status, body) =
            http_post(relay.addr(), tern::relay_proto::IMAGE_PATH, Some(&token), &ask).await;
        if status == 200 || Instant::now() > deadline {
            break (status, body);
        }
        mosh.run_until(Duration::from_millis(200), |_| false).await;
    };
    assert_eq!(status, 200, "the picture printed on the host: {body}");
    assert!(body.contains("IHDR\0\0\0\x1e\0\0\0\x1e"), "a 30 × 30 PNG");

    // `tern show` of a PNG on the host (the copy's `tern`, beside it): a picture the relay
    // serves, image 2.
    let png = tern::images::convert::png(&tern::images::convert::Rgba {
        width: 20,
        height: 10,
        pixels: [200u8, 40, 40, 255].repeat(200),
    });
    let png_path = sshd.path("chart.png");
    std::fs::write(&png_path, &png).unwrap();
    let tern = copies[0].with_file_name("tern");
    mosh.type_bytes(format!("{} show {}\n", tern.display(), png_path.display()).as_bytes());
    let ask = tern::relay_proto::encode(&tern::relay_proto::ImageRequest {
        session: ready.session.clone(),
        image: 2,
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, body) = loop {
        let (status, body) =
            http_post(relay.addr(), tern::relay_proto::IMAGE_PATH, Some(&token), &ask).await;
        if status == 200 || Instant::now() > deadline {
            break (status, body);
        }
        mosh.run_until(Duration::from_millis(200), |_| false).await;
    };
    assert_eq!(status, 200, "the picture `tern show` showed on the host: {body}");
    let (head, _) = body.split_once('\n').expect("a header line");
    let info: tern::relay_proto::ImageInfo = tern::relay_proto::decode(head.as_bytes()).unwrap();
    assert_eq!((info.width, info.height, info.mime.as_str()), (20, 10, "image/png"));

    // An OSC 9 notification printed on the host (mosh-server drops it) reaches the page over
    // the same channel.
    mosh.type_bytes(b"printf '\\033]9;Build finished on the host\\007\\n'\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    let notified = loop {
        mosh.run_until(Duration::from_millis(100), |_| false).await;
        match mosh.control.try_next(Duration::from_millis(200)).await {
            Some(ServerMessage::Signal(PageSignal::Notify { title, body }))
                if format!("{title} {body}").contains("Build finished on the host") =>
            {
                break true;
            }
            Some(other) => seen.push(other),
            None if Instant::now() > deadline => break false,
            None => {}
        }
    };
    assert!(notified, "no notification from the host: {seen:?}");

    // The follow channel dies mid-session (its process on the host is killed); lines printed
    // meanwhile arrive once the relay started it again, each once.
    let pid = follower_pid(&ready.session).expect("the follower runs on the host");
    kill_pid(pid);
    mosh.type_bytes(b"seq -f 'after-drop-%g' 1 50; seq -f 'pad2-%g' 1 30\n");
    let lines = history_until(&relay, &mut mosh, &ready.session, "after-drop-50").await;
    for n in 1..=50 {
        let want = format!("after-drop-{n}");
        assert_eq!(lines.iter().filter(|l| **l == want).count(), 1, "{want} once: {lines:?}");
    }
    for n in 1..=80 {
        let want = format!("host-line-{n}");
        assert_eq!(lines.iter().filter(|l| **l == want).count(), 1, "{want} once");
    }
    assert_ne!(follower_pid(&ready.session), Some(pid), "a new follower");

    // A second session reuses the copy (its hash checked, not copied again); a tampered copy is
    // replaced on the next start.
    let conn = connect(&relay, None).await.expect("connects");
    let (_control, reply) = hello(&conn, host_hello(&token, "good")).await;
    let second = expect_ready(reply);
    let _cleanup2 = KillOnDrop(host_pid(state.path(), &second.session));
    assert_eq!(second.off, None);
    assert_eq!(host_recorders(&sshd), copies);
    assert_eq!(std::fs::metadata(&copies[0]).unwrap().modified().unwrap(), copied_at, "reused");
    // (Replaced by another file: the running copy cannot be written to.)
    let evil = copies[0].with_file_name("evil");
    std::fs::write(&evil, b"#!/bin/sh\necho tampered\n").unwrap();
    std::fs::rename(&evil, &copies[0]).unwrap();
    let conn = connect(&relay, None).await.expect("connects");
    let (_control, reply) = hello(&conn, host_hello(&token, "good")).await;
    let third = expect_ready(reply);
    let _cleanup3 = KillOnDrop(host_pid(state.path(), &third.session));
    assert_eq!(third.off, None);
    assert_eq!(sha256_file(&copies[0]), hash, "the tampered copy was replaced");

    // A restarted relay follows the first session again (from its record): what is printed
    // after the restart arrives, and every earlier line is still there once.
    relay.stop().await;
    let relay = TestRelay::start(sshd.relay_config(state.path(), &token)).await;
    let conn = connect(&relay, None).await.expect("connects again");
    let (control, reply) = hello(&conn, spawn_hello(Some(&token), Some(&ready.session))).await;
    let again = expect_ready(reply);
    assert_eq!(again.off, None);
    mosh.reattach(conn, control, again.seq_floor);
    mosh.type_bytes(b"seq -f 'after-restart-%g' 1 10; seq -f 'pad3-%g' 1 30\n");
    let lines = history_until(&relay, &mut mosh, &ready.session, "after-restart-10").await;
    for want in ["host-line-1", "after-drop-50", "after-restart-1", "after-restart-10"] {
        assert_eq!(lines.iter().filter(|l| *l == want).count(), 1, "{want} once: {lines:?}");
    }
    relay.stop().await;
}

/// A recorder directory others may write to on the host is refused (nothing copied there); the
/// session starts without the recorder and `ready` says why.
#[tokio::test]
async fn a_shared_recorder_directory_on_the_host_is_refused_and_said() {
    use std::os::unix::fs::PermissionsExt;
    let sshd = Sshd::start();
    let token = test_token("ssh-shared-dir");
    let state = tempfile::tempdir().unwrap();
    let shared = sshd.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mut config = sshd.relay_config(state.path(), &token);
    config.ssh_recorder_dir = shared.to_string_lossy().into_owned();
    let relay = TestRelay::start(config).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (_control, reply) = hello(&conn, host_hello(&token, "good")).await;
    let ready = expect_ready(reply);
    let _cleanup = KillOnDrop(host_pid(state.path(), &ready.session));
    let off = ready.off.expect("the recorder is off");
    assert!(off.why.contains("writable by other users"), "{}", off.why);
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0, "nothing made in it");
    relay.stop().await;
}

/// A host whose follow channel sends garbage (a line naming a file outside the session's, one
/// that is not JSON, megabytes without a newline: tests/ssh-fixture.sh `ssh-bad-follow`): the
/// relay refuses each, writes nothing, keeps trying (with a pause) and keeps serving; the session
/// works.
#[tokio::test]
async fn a_follow_channel_that_sends_garbage_never_harms_the_relay() {
    let sshd = Sshd::start();
    let token = test_token("ssh-garbage");
    let state = tempfile::tempdir().unwrap();
    let mut config = sshd.relay_config(state.path(), &token);
    config.ssh_program = sshd.path("ssh-bad-follow");
    let relay = TestRelay::start(config).await;
    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, host_hello(&token, "good")).await;
    let ready = expect_ready(reply);
    let _cleanup = KillOnDrop(host_pid(state.path(), &ready.session));
    let mut mosh = MoshOverRelay::new(conn, control, ready.key.as_deref().unwrap(), CLIENT_MTU);
    mosh.type_bytes(b"echo still-$((40+2))\n");
    assert!(
        mosh.run_until(Duration::from_secs(15), |s| s.server_state().contains(b"still-42")).await,
        "the session works: {:?}",
        mosh.screen_text()
    );
    // Each kind of garbage in turn (a pause of 1 s, then 2 s, between channels).
    let refused = ["not one of the session's files", "not JSON", "a line over the limit"];
    let deadline = Instant::now() + Duration::from_secs(30);
    while !refused.iter().all(|r| logs().contains(r)) && Instant::now() < deadline {
        mosh.run_until(Duration::from_millis(200), |_| false).await;
    }
    for r in refused {
        assert!(logs().contains(r), "refused: {r}");
    }
    // Nothing was written outside the state directory's sessions.
    for dir in [state.path().to_path_buf(), state.path().join("sessions")] {
        assert!(!dir.join("escape").exists() && !dir.parent().unwrap().join("escape").exists());
    }
    let (status, _) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert_eq!(status, 200, "the relay serves on");
    relay.stop().await;
}

/// Not a check: how long a start on a host takes with the recorder (its uname, its copy's check)
/// and without (`--ssh-recorder-dir ""`), each the first on a new relay (its first login to the
/// host) and the next on the same relay (over the host's shared connection), and with shared
/// connections off; side by side in one run. Prints medians.
/// `cargo test -p tern-relay --test ssh start_times -- --ignored --nocapture`
#[tokio::test]
#[ignore]
async fn start_times_with_and_without_the_recorder() {
    let sshd = Sshd::start();
    let token = test_token("ssh-bench");
    let kinds = [
        ("with the recorder", true, true),
        ("without", false, true),
        ("with the recorder, shared connections off", true, false),
    ];
    let mut times: Vec<[Vec<Duration>; 2]> = kinds.iter().map(|_| Default::default()).collect();
    for round in 0..6 {
        for (k, (_, recorder, shared)) in kinds.iter().enumerate() {
            let state = tempfile::tempdir().unwrap();
            let mut config = sshd.relay_config(state.path(), &token);
            if !recorder {
                config.ssh_recorder_dir = String::new();
            }
            config.ssh_no_shared_connections = !shared;
            let relay = TestRelay::start(config).await;
            let mut cleanup = Vec::new();
            for slot in times[k].iter_mut() {
                // The one before has started its recorder and the channel that follows it (on
                // this two-core machine they would otherwise compete with the start measured).
                tokio::time::sleep(Duration::from_millis(700)).await;
                let conn = connect(&relay, None).await.expect("connects");
                let started = Instant::now();
                let (_control, reply) = hello(&conn, host_hello(&token, "good")).await;
                let took = started.elapsed();
                let ready = expect_ready(reply);
                cleanup.push(KillOnDrop(host_pid(state.path(), &ready.session)));
                // The first round copies the recorder: not counted.
                if round > 0 {
                    slot.push(took);
                }
            }
            relay.stop().await;
        }
    }
    for ((name, ..), t) in kinds.iter().zip(times.iter_mut()) {
        for (which, t) in ["first on a relay", "next on the same relay"].iter().zip(t.iter_mut()) {
            t.sort();
            println!("start on a host {name}, {which}: median {:?} of {:?}", t[t.len() / 2], t);
        }
    }
}
