//! The warm spare (spawn mode): a mosh-server started ahead that a new session takes. It must be
//! indistinguishable from a fresh spawn (environment, size, working directory, a shell that ran
//! nothing before the page came), never listed or recorded as a session, replaced after use,
//! ended when the relay stops, and off with `--no-spare`. The relay starts its shell ahead (it is
//! the spare's first client) unless `--no-spare-prestart`; the page continues from there at its
//! own size. Real relay, real mosh-server, real
//! bash; the spare is found the way a person would find it, in /proc.

mod support;

use std::path::Path;
use std::time::Duration;

use support::*;

/// The shell: bash, interactive, no rc files and no history file, so that `HISTCMD` counts the
/// commands this session ran.
fn spare_config(state: &Path, token: &str) -> tern_relay::config::Config {
    let mut c = spawn_config(state, token);
    c.mosh_command = ["/usr/bin/env", "HISTFILE=/dev/null", "bash", "--norc", "--noprofile", "-i"]
        .map(String::from)
        .to_vec();
    c
}

fn require_bash() {
    assert!(Path::new("/usr/bin/env").exists(), "/usr/bin/env is missing: this test needs it");
    let bash = std::process::Command::new("bash").arg("-c").arg("true").status();
    assert!(bash.is_ok_and(|s| s.success()), "bash is not installed: this test needs it");
}

/// Clock ticks since boot, now (the unit of /proc/PID/stat's start time).
fn ticks_now() -> u64 {
    let uptime = std::fs::read_to_string("/proc/uptime").expect("Linux /proc");
    let secs: f64 = uptime.split_whitespace().next().unwrap().parse().unwrap();
    (secs * ticks_per_second() as f64) as u64
}

fn ticks_per_second() -> u64 {
    let out = std::process::Command::new("getconf").arg("CLK_TCK").output().expect("getconf");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("CLK_TCK")
}

/// A process's start time in clock ticks since boot.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Fields after the command: state is field 3, starttime field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().to_owned()))
        .is_some_and(|r| !r.starts_with('Z') && !r.starts_with('X'))
}

/// The detached mosh-servers (not their forked children) serving this state directory.
fn mosh_servers_of(state: &Path) -> Vec<u32> {
    let needle = state.join("sessions").to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let args: Vec<String> =
            cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let is_server = args.first().is_some_and(|a| a.ends_with("mosh-server"));
        if is_server && args.iter().any(|a| a == &needle) && alive(pid) {
            found.push(pid);
        }
    }
    // mosh-server's child waits for the first client with the same command line: keep parents.
    // And not the undetached `mosh-server new` the relay (this process) is running: it forks the
    // daemon and exits.
    let ppid = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
    };
    let me = std::process::id();
    found
        .iter()
        .copied()
        .filter(|p| ppid(*p).is_none_or(|pp| !found.contains(&pp) && pp != me))
        .collect()
}

/// Waits until `state`'s mosh-servers are `n` (a killed one takes a moment to go).
async fn wait_for_count(state: &Path, n: usize) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let servers = mosh_servers_of(state);
        if servers.len() == n || tokio::time::Instant::now() >= deadline {
            return servers;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The session id a mosh-server's recorder was given (`--session ID` on its command line).
fn session_of(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args: Vec<String> =
        cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let at = args.iter().position(|a| a == "--session").expect("run under the recorder");
    args[at + 1].clone()
}

/// The spare: a mosh-server of this state directory that no session record names. Waits for it.
async fn wait_for_spare(state: &Path, wait: Duration) -> Option<u32> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let recorded = recorded_pids(state);
        let spare: Vec<u32> =
            mosh_servers_of(state).into_iter().filter(|p| !recorded.contains(p)).collect();
        assert!(spare.len() <= 1, "more than one spare: {spare:?}");
        if let Some(pid) = spare.first() {
            return Some(*pid);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// The bash under a spare's mosh-server (through the recorder), once it runs. Waits for it.
async fn wait_for_shell(server: u32, wait: Duration) -> Option<u32> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let mut parent = std::collections::HashMap::new();
        let mut bash = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            let Some((head, rest)) = stat.rsplit_once(')') else { continue };
            let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            parent.insert(pid, ppid);
            if head.ends_with("(bash") {
                bash.push(pid);
            }
        }
        let under = |mut pid: u32| {
            for _ in 0..8 {
                match parent.get(&pid) {
                    Some(&p) if p == server => return true,
                    Some(&p) if p > 1 => pid = p,
                    _ => return false,
                }
            }
            false
        };
        if let Some(pid) = bash.into_iter().find(|p| under(*p)) {
            return Some(pid);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a new session reports about itself: its mosh-server pid and the files its shell wrote.
struct Report {
    session: String,
    server_pid: u32,
    env: Vec<String>,
    size: String,
    pwd: String,
    histcmd: String,
    shell_pid: u32,
    shell_start: u64,
    hello_at: u64,
}

/// Opens a new session at `cols`×`rows`, has its shell write what it is into `out`, returns it.
async fn new_session(
    relay: &TestRelay,
    state: &Path,
    token: &str,
    out: &Path,
    cols: u16,
    rows: u16,
) -> (MoshOverRelay<tern::terminal::Complete>, Report) {
    let conn = connect(relay, None).await.expect("connects");
    let hello_at = ticks_now();
    let (control, reply) = hello(&conn, spawn_hello(Some(token), None)).await;
    let ready = expect_ready(reply);
    let mut mosh = MoshOverRelay::page(conn, control, &ready, cols, rows);
    let dir = out.join(&ready.session);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    // One line: the first (and only) command this shell runs.
    let line = format!(
        "echo $HISTCMD >{d}/histcmd; env | sort >{d}/env; stty size >{d}/size; pwd >{d}/pwd; \
         echo $$ >{d}/pid; cut -d' ' -f22 /proc/$$/stat >{d}/start; echo report-$((40+2))-done\n"
    );
    assert!(mosh.run_until(Duration::from_secs(10), |s| s.has_heard_server()).await);
    // The page's first state carried its size: the shell has it before anything is typed.
    mosh.type_bytes(line.as_bytes());
    assert!(
        mosh.run_until(Duration::from_secs(15), |s| {
            tern::terminal::screen_text(s.server_state().framebuffer())
                .rows
                .iter()
                .any(|r| r.contains("report-42-done"))
        })
        .await,
        "the shell never ran the report; screen: {:?}",
        mosh.screen_text()
    );
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap().trim().to_owned();
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(state.join("sessions").join(format!("{}.json", ready.session))).unwrap(),
    )
    .unwrap();
    let report = Report {
        session: ready.session.clone(),
        server_pid: record["pid"].as_u64().expect("a local pid") as u32,
        env: read("env").lines().map(String::from).collect(),
        size: read("size"),
        pwd: read("pwd"),
        histcmd: read("histcmd"),
        shell_pid: read("pid").parse().unwrap(),
        shell_start: read("start").parse().unwrap(),
        hello_at,
    };
    (mosh, report)
}

/// The environment without the one variable that names the session.
fn env_but_session(r: &Report) -> Vec<String> {
    let own = format!("TERN_SESSION={}", r.session);
    assert!(r.env.contains(&own), "TERN_SESSION names the session it became: {:?}", r.env);
    r.env.iter().filter(|l| !l.starts_with("TERN_SESSION=")).cloned().collect()
}

#[tokio::test]
async fn a_spare_is_indistinguishable_from_a_fresh_spawn_and_is_no_session() {
    require_bash();
    let token = test_token("spare");
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spare_config(state.path(), &token)).await;
    assert_eq!(wait_for_spare(state.path(), Duration::from_millis(300)).await, None, "no demand");

    // The first session: nobody asked before, so it is a fresh spawn; it asks for a spare.
    let (_a, fresh) = new_session(&relay, state.path(), &token, out.path(), 80, 24).await;
    let spare = wait_for_spare(state.path(), Duration::from_secs(10)).await.expect("a spare");
    assert_ne!(spare, fresh.server_pid);
    let spare_start = start_ticks(spare).unwrap();

    // Not a session: not listed, not recorded (the registry and the limits count records).
    let (status, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let ids: Vec<&str> =
        list["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [fresh.session.as_str()], "only the session, not the spare");
    assert_eq!(recorded_pids(state.path()), [fresh.server_pid]);
    // Its id is chosen (the recorder and TERN_SESSION carry it) but shown nowhere yet.
    let spare_id = session_of(spare);
    assert!(!body.contains(&spare_id));
    assert_not_logged(&spare_id, "unused spare's session id");

    // The relay released the spare's shell (its first client): bash runs before any page asks.
    let shell = wait_for_shell(spare, Duration::from_secs(10)).await.expect("the spare's shell");

    // The second session takes the spare, at another size.
    let (_b, warm) = new_session(&relay, state.path(), &token, out.path(), 101, 37).await;
    assert_eq!(warm.server_pid, spare, "the new session is the spare's mosh-server");
    assert_eq!(warm.session, spare_id, "with the id it was started with");
    assert!(spare_start <= warm.hello_at, "the spare was started before the page asked");
    // Its shell is the one started ahead (after the spare, before the page asked), and it ran
    // nothing but its start files before the page's command (HISTCMD below).
    assert_eq!(warm.shell_pid, shell, "the page's shell is the one the relay released");
    assert!(warm.shell_start >= spare_start, "{} < {spare_start}", warm.shell_start);
    assert!(warm.shell_start <= warm.hello_at, "{} > {}", warm.shell_start, warm.hello_at);
    assert!(fresh.shell_start >= fresh.hello_at);
    assert_eq!((fresh.histcmd.as_str(), warm.histcmd.as_str()), ("1", "1"), "one command each");
    assert_eq!(fresh.size, "24 80");
    assert_eq!(warm.size, "37 101", "the page's size, from the first datagram");
    assert_eq!(warm.pwd, fresh.pwd);
    assert_eq!(env_but_session(&warm), env_but_session(&fresh), "same environment");
    for name in ["PATH=", "TERN_SOCKET=", "TERM=", "LANG="] {
        assert!(fresh.env.iter().any(|l| l.starts_with(name)), "{name} in {:?}", fresh.env);
    }
    assert_ne!(warm.session, fresh.session);
    // Listed now that it is a session.
    let (_, body) = http_get(relay.addr(), "/api/sessions", Some(&token)).await;
    assert!(body.contains(&warm.session));

    // Replaced after use: the third new session takes the next spare.
    let next = wait_for_spare(state.path(), Duration::from_secs(10)).await.expect("next spare");
    assert_ne!(next, spare);
    assert_eq!(wait_for_count(state.path(), 3).await.len(), 3, "two sessions and the next spare");
    // Its shell runs once the relay holds it ready (the process is in /proc a moment before).
    wait_for_shell(next, Duration::from_secs(10)).await.expect("the next spare's shell");
    let (_c, third) = new_session(&relay, state.path(), &token, out.path(), 90, 30).await;
    assert_eq!(third.server_pid, next);
    assert_eq!(third.size, "30 90");
    assert_eq!(third.histcmd, "1");

    // Ended when the relay stops; the sessions are not.
    let last = wait_for_spare(state.path(), Duration::from_secs(10)).await.expect("a spare");
    let last_id = session_of(last);
    relay.stop().await;
    assert_not_logged(&last_id, "unused spare's session id");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive(last) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(last), "the spare's mosh-server {last} outlived the relay");
    for pid in [fresh.server_pid, warm.server_pid, third.server_pid] {
        assert!(alive(pid), "a session's mosh-server {pid} outlives the relay");
    }
    assert_eq!(wait_for_count(state.path(), 3).await.len(), 3, "no spare left, not even its child");
    assert_not_logged(&token, "token");
}

/// `--no-spare-prestart`: the spare's shell waits for the page (it starts after the hello), and
/// the session is as fresh as ever.
#[tokio::test]
async fn without_prestart_the_spares_shell_starts_with_the_page() {
    require_bash();
    let token = test_token("noprestart");
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let mut config = spare_config(state.path(), &token);
    config.no_spare_prestart = true;
    let relay = TestRelay::start(config).await;
    let (status, _) = http_get(relay.addr(), "/api/info", Some(&token)).await;
    assert_eq!(status, 200);
    let spare = wait_for_spare(state.path(), Duration::from_secs(10)).await.expect("a spare");
    assert_eq!(wait_for_shell(spare, Duration::from_millis(500)).await, None, "no shell yet");
    let (_a, warm) = new_session(&relay, state.path(), &token, out.path(), 101, 37).await;
    assert_eq!(warm.server_pid, spare);
    assert!(warm.shell_start >= warm.hello_at, "{} < {}", warm.shell_start, warm.hello_at);
    assert_eq!((warm.size.as_str(), warm.histcmd.as_str()), ("37 101", "1"));
    relay.stop().await;
}

/// A pre-started spare has a client (the relay), so mosh-server's own exit when no client came
/// within 60 s never comes: a relay that dies (SIGKILL) leaves it running, recorded nowhere. The
/// next relay on the state directory ends it.
#[tokio::test]
async fn a_spare_left_by_a_relay_that_died_is_ended_by_the_next() {
    require_bash();
    use std::io::BufRead as _;
    let token = test_token("deadrelay");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["--listen", "127.0.0.1:0", "--print-url", "--state-dir"])
        .arg(state.path())
        .args(["--", "/usr/bin/env", "HISTFILE=/dev/null", "bash", "--norc", "--noprofile", "-i"])
        .env("TERN_RELAY_TOKEN", &token)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("Open ").expect("`Open URL`").to_owned();
    let addr: std::net::SocketAddr =
        url.split("://").nth(1).and_then(|r| r.split(['/', '#']).next()).unwrap().parse().unwrap();
    // Killed however this test ends.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Reap(child);
    let (status, _) = http_get(addr, "/api/info", Some(&token)).await;
    assert_eq!(status, 200);
    // The detached daemon (its parent is init), not the `mosh-server new` that forks it: that
    // one's parent is the relay, not this test process, so `wait_for_spare` may see it first.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let spare = loop {
        let found = wait_for_spare(state.path(), Duration::from_secs(10)).await.expect("a spare");
        if parent_of(found) == Some(1) {
            break found;
        }
        assert!(std::time::Instant::now() < deadline, "no detached spare");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let shell = wait_for_shell(spare, Duration::from_secs(10)).await.expect("its shell");
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(alive(spare) && alive(shell), "the dead relay's spare runs on");

    let relay = TestRelay::start(spare_config(state.path(), &token)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while (alive(spare) || alive(shell)) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(spare), "the left spare's mosh-server {spare} still runs");
    assert!(!alive(shell), "the left spare's shell {shell} still runs");
    relay.stop().await;
}

#[tokio::test]
async fn no_spare_keeps_none() {
    require_bash();
    let token = test_token("nospare");
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let mut config = spare_config(state.path(), &token);
    config.no_spare = true;
    let relay = TestRelay::start(config).await;
    // Demand as a page makes it: the info request, then a session.
    let (status, _) = http_get(relay.addr(), "/api/info", Some(&token)).await;
    assert_eq!(status, 200);
    let (_a, fresh) = new_session(&relay, state.path(), &token, out.path(), 80, 24).await;
    assert_eq!(wait_for_spare(state.path(), Duration::from_secs(2)).await, None);
    assert_eq!(wait_for_count(state.path(), 1).await, [fresh.server_pid]);
    relay.stop().await;
}

/// A spare whose mosh-server died (killed, or its own timeout) is not handed out: that session is
/// a fresh spawn, and a new spare follows.
#[tokio::test]
async fn a_dead_spare_is_not_handed_out() {
    require_bash();
    let token = test_token("deadspare");
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spare_config(state.path(), &token)).await;
    let (status, _) = http_get(relay.addr(), "/api/info", Some(&token)).await;
    assert_eq!(status, 200);
    let spare = wait_for_spare(state.path(), Duration::from_secs(10)).await.expect("a spare");
    kill_pid(spare);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive(spare) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (_a, session) = new_session(&relay, state.path(), &token, out.path(), 80, 24).await;
    assert_ne!(session.server_pid, spare);
    assert_eq!(session.histcmd, "1");
    let next = wait_for_spare(state.path(), Duration::from_secs(10)).await.expect("a new spare");
    assert_ne!(next, spare);
    relay.stop().await;
}

#[test]
fn the_flag_is_documented() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .arg("--help")
        .output()
        .expect("tern-relay --help runs");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--no-spare\n"), "{help}");
    assert!(help.contains("--no-spare-prestart"), "{help}");
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).unwrap();
    b
}

/// Benchmark (prints, asserts nothing about speed): the page's way to its first `ready`, stage by
/// stage (the page's own connection code, `tern::relay_client`: a challenge, `/api/info`, the
/// WebTransport connect, greet and challenge on the control stream, the hello with its proof),
/// against a relay with the spare and one with `--no-spare`, side by side in one run, plus the
/// relay's own stages from its debug log. Run with
/// `cargo test -p tern-relay --test spare -- --ignored --nocapture bench`
/// (`TERN_SPARE_BENCH_ROUNDS`, default 10).
#[tokio::test]
#[ignore]
async fn bench_ready_with_and_without_the_spare() {
    use tern::relay_client::{Target, Verifier};
    use tern::relay_proto::{CHALLENGE_PATH, ClientMessage, INFO_PATH, Mode};
    let rounds: usize =
        std::env::var("TERN_SPARE_BENCH_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(10);
    let token = test_token("sparebench");
    let (with_state, without_state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _c1 = KillRecorded(with_state.path());
    let _c2 = KillRecorded(without_state.path());
    let with = TestRelay::start(spawn_config(with_state.path(), &token)).await;
    let mut off = spawn_config(without_state.path(), &token);
    off.no_spare = true;
    let without = TestRelay::start(off).await;
    let target = Target { token: token.clone(), bridge: None };
    const STAGES: usize = 10;
    let mut rows: [Vec<[f64; STAGES]>; 2] = [Vec::new(), Vec::new()];
    let field = |log: &str, name: &str| -> f64 {
        log.rsplit(&format!("{name}="))
            .next()
            .and_then(|r| {
                r.split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok())
            })
            .unwrap_or(0.0)
    };
    let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1000.0;
    // Round 0 warms both relays up (and is not counted).
    for round in 0..=rounds {
        // Who goes first alternates, so neither relay always runs on a machine the other loaded.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let relay = if i == 0 { &with } else { &without };
            let mut row = [0.0; STAGES];
            let start = std::time::Instant::now();
            // The page: a challenge, then /api/info with its proof.
            let verifier = Verifier::new(random32());
            let request = tern::relay_proto::encode(&verifier.request(&token));
            let t = std::time::Instant::now();
            let (status, body) = http_post(relay.addr(), CHALLENGE_PATH, None, &request).await;
            row[0] = ms(t);
            let authorization = verifier.http_answer(&token, status, body.as_bytes()).unwrap();
            let t = std::time::Instant::now();
            let (status, _) = http_get_authorized(relay.addr(), INFO_PATH, &authorization).await;
            assert_eq!(status, 200);
            row[1] = ms(t);
            let t = std::time::Instant::now();
            let conn = connect(relay, None).await.expect("connects");
            row[2] = ms(t);
            let t = std::time::Instant::now();
            let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
            let verifier = Verifier::new(random32());
            send.write_all(&verifier.greet(&token).to_line()).await.unwrap();
            let mut reader = tern_relay::control::LineReader::new(recv);
            let challenge = reader.next_line().await.ok();
            row[3] = ms(t);
            let proof = verifier.control_answer(&target.token, challenge.as_deref()).unwrap();
            let mut hello = target.hello(Mode::Spawn, None, None, 1211);
            hello.proof = Some(proof);
            let logged = logs().len();
            let t = std::time::Instant::now();
            send.write_all(&ClientMessage::Hello(hello).to_line()).await.unwrap();
            let line = reader.next_line().await.ok();
            row[4] = ms(t);
            row[5] = ms(start);
            let ready = tern::relay_client::answer(line.as_deref()).expect("ready");
            let log = logs()[logged..].to_owned();
            let opened = log.lines().find(|l| l.contains("session opened")).unwrap_or_default();
            let started =
                log.lines().find(|l| l.contains("mosh-server started")).unwrap_or_default();
            let recorded = log.lines().find(|l| l.contains("session recorded")).unwrap_or_default();
            row[6] = field(opened, "admit_us") / 1000.0;
            row[7] = field(opened, "attach_us") / 1000.0;
            row[8] = field(started, "took_ms");
            row[9] = field(recorded, "record_us") / 1000.0;
            if round > 0 {
                rows[i].push(row);
            }
            drop((send, reader, conn));
            let state = if i == 0 { with_state.path() } else { without_state.path() };
            let record: serde_json::Value = serde_json::from_slice(
                &std::fs::read(state.join("sessions").join(format!("{}.json", ready.session)))
                    .unwrap(),
            )
            .unwrap();
            kill_pid(record["pid"].as_u64().unwrap() as u32);
        }
        // A person does not open a new session every instant: the spare is back by then (it is
        // started a second after the last was taken).
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let median = |rows: &[[f64; STAGES]], k: usize| {
        let mut v: Vec<f64> = rows.iter().map(|r| r[k]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let names = [
        "POST /api/challenge",
        "GET /api/info",
        "WebTransport connect (QUIC, CONNECT)",
        "control stream: greet -> challenge",
        "hello -> ready",
        "first request -> ready (sum)",
        "  relay: admit (hello read, proof checked)",
        "  relay: attach (spawn or spare, record)",
        "  relay:   mosh-server start (fresh only)",
        "  relay:   session record written",
    ];
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    println!("median of {rounds} rounds, ms             | with spare | --no-spare | ratio");
    for (k, name) in names.iter().enumerate() {
        let (w, wo) = (median(&rows[0], k), median(&rows[1], k));
        let ratio = if wo > 0.0 { format!("{:.2}", w / wo) } else { "-".into() };
        println!("{name:42} | {w:10.2} | {wo:10.2} | {ratio}");
    }
    with.stop().await;
    without.stop().await;
}
