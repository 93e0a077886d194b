//! Where an admitted session's datagrams go: a mosh-server the relay spawns, a spawned one it
//! resumes, or an allowlisted one the browser names (bridge mode); and the UDP socket to it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use tern::relay_proto::Mode;
use tokio::net::UdpSocket;

use super::SessionContext;
use super::handshake::Refusal;
use crate::control::{ErrorCode, Hello};
use crate::ids::{new_session_id, valid_id};
use crate::spawn::ssh::SshHost;
use crate::spawn::{PortRange, Recorder, SpawnSpec, Spawned, spawn_mosh_server};
use crate::state::{RemoteServer, SessionRecord, StateStore};
use crate::tokens::Who;

/// What the targets of sessions are made from: the relay's configuration as the top of the relay
/// hands it over.
#[derive(Debug, Clone)]
pub(crate) struct TargetSettings {
    /// Bridge mode: the mosh-servers a page may name (`--allow`).
    pub allow: Vec<AllowRule>,
    /// `--max-spawned`: mosh-servers alive at once (ssh hosts' included).
    pub max_spawned: usize,
    /// What every spawned mosh-server gets; each spawn adds its recorder and shell environment.
    pub spawn: SpawnSpec,
    /// `--history-lines`: each session's history (0: no recorder).
    pub history_lines: usize,
    /// `--history-bytes`: bytes per history file.
    pub history_bytes: u64,
    /// `--record-sessions` (with `--record-bytes`): each session's recording cap, if recorded.
    pub record_bytes: Option<u64>,
    /// `--recorder`: the tern-relay to run as the recorder (`None`: this executable).
    pub recorder: Option<PathBuf>,
    /// The state directory, where `tern send`'s socket and the `tern` link live.
    pub state_dir: Option<PathBuf>,
}

/// One bridge allowlist entry: a host (IP literal or name, compared case-insensitively) and ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    pub host: String,
    pub ports: PortRange,
}

impl AllowRule {
    pub fn allows(&self, host: &str, port: u16) -> bool {
        normalize_host(host).eq_ignore_ascii_case(&self.host) && self.ports.contains(port)
    }
}

/// Strips the brackets of an IPv6 literal so `[::1]` and `::1` compare equal.
fn normalize_host(host: &str) -> &str {
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

impl FromStr for AllowRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // The port part follows the last ':' so that `[::1]:60001-60010` works.
        let (host, ports) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("bad allow rule {s:?}: want HOST:PORT or HOST:LOW-HIGH"))?;
        let host = normalize_host(host);
        if host.is_empty() {
            return Err(format!("bad allow rule {s:?}: empty host"));
        }
        let ports: PortRange = ports.parse()?;
        Ok(AllowRule { host: host.to_string(), ports })
    }
}

/// Where a session's datagrams go, and what to tell the browser. No `Debug`: it holds the key.
pub(super) struct Target {
    pub session: String,
    pub addr: SocketAddr,
    pub port: u16,
    /// Spawn mode only (the relay started the server); never logged.
    pub key: Option<String>,
    /// A spawned mosh-server's pid, watched while bridged.
    pub pid: Option<u32>,
    pub resumed: bool,
    /// Spawn mode: the session's record (for the registry).
    pub record: Option<SessionRecord>,
    /// The `--ssh-host` the mosh-server runs on (pastes are copied there); `None`: this machine.
    pub ssh_host: Option<SshHost>,
    /// A warm spare whose shell the relay released: the socket it sent from (the session
    /// forwards on it) and the point its client stopped at (the page continues from there).
    pub prestarted: Option<super::spare::Released>,
    /// What the session lacks and why (an ssh host without the recorder): the page is told.
    pub off: Option<tern::relay_proto::FeaturesOff>,
}

impl Target {
    /// A spawned mosh-server: on loopback, or on its ssh host.
    fn spawned(record: SessionRecord, resumed: bool) -> Self {
        let ip = record.remote.as_ref().map_or(IpAddr::from([127, 0, 0, 1]), |r| r.ip);
        Target {
            session: record.id.clone(),
            addr: SocketAddr::new(ip, record.port),
            port: record.port,
            key: Some(record.key.clone()),
            // Only this machine's processes can be watched.
            pid: record.pid,
            resumed,
            ssh_host: record.remote.as_ref().and_then(|r| r.host.parse().ok()),
            off: record.remote.as_ref().and_then(|r| {
                let why = r.recorder_off.as_deref()?;
                Some(crate::spawn::ssh_recorder::features_off(&r.host, why))
            }),
            record: Some(record),
            prestarted: None,
        }
    }
}

/// Finds or starts the hello's mosh-server for `who` (a new one is theirs; one to resume must be).
pub(super) async fn attach(
    shared: &SessionContext,
    hello: &Hello,
    who: &Who,
) -> Result<Target, Refusal> {
    match shared.settings.mode {
        Mode::Spawn => {
            let state = shared
                .state
                .as_ref()
                .ok_or_else(|| Refusal::new(ErrorCode::Internal, "spawn mode without state"))?;
            match (&hello.resume, &hello.ssh_host) {
                (Some(id), _) => resume(shared, state, id, who).await,
                (None, None) => spawn(shared, state, who).await,
                (None, Some(host)) => spawn_over_ssh(shared, state, host, who).await,
            }
        }
        Mode::Bridge => bridge(shared, hello).await,
    }
}

/// A fresh socket per browser session: mosh-server sees a new source port and roams to it.
pub(super) async fn connect_udp(target: SocketAddr) -> Result<UdpSocket, Refusal> {
    let local: SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let connect = async {
        let udp = UdpSocket::bind(local).await?;
        udp.connect(target).await?;
        Ok::<_, std::io::Error>(udp)
    };
    connect
        .await
        .map_err(|e| Refusal::new(ErrorCode::Internal, format!("cannot open a UDP socket: {e}")))
}

/// Re-attaches to a spawned mosh-server that is still alive, if it is `who`'s (taking it over
/// from another page is a resume too, so the same check covers both).
async fn resume(
    shared: &SessionContext,
    state: &StateStore,
    id: &str,
    who: &Who,
) -> Result<Target, Refusal> {
    if !valid_id(id) {
        return Err(Refusal::new(ErrorCode::UnknownSession, "malformed session id"));
    }
    let gone = |why: &str| Refusal::new(ErrorCode::SessionEnded, why.to_owned());
    let record = state.check_alive(id).ok_or_else(|| {
        gone("that session's mosh-server is gone (its shell exited, or nobody connected within 60 s)")
    })?;
    check_owner(&record, who)?;
    // A server on an ssh host is asked after (this machine's are checked by pid above); a host
    // that cannot answer now keeps the session: mosh sessions outlive their network.
    if let (Some(remote), Some(hosts)) = (&record.remote, &shared.ssh)
        && let (Some(pid), Ok(host)) = (remote.pid, remote.host.parse::<SshHost>())
        && hosts.is_running(&host, pid).await == Some(false)
    {
        state.remove(id);
        return Err(gone(&format!(
            "that session's mosh-server on {host} is gone (its shell exited)"
        )));
    }
    Ok(Target::spawned(record, true))
}

/// Refuses a session that someone else started: only its owner and the relay's owner
/// token may resume or take it over.
fn check_owner(record: &SessionRecord, who: &Who) -> Result<(), Refusal> {
    if who.may_use(record.owner_name()) {
        return Ok(());
    }
    tracing::info!(session = %record.id, who = who.name(), "refused: another identity's session");
    // Audited by the caller (`session::open`), which knows the link's address.
    Err(Refusal::new(ErrorCode::NotYourSession, NOT_YOURS))
}

/// What a caller is told about a session that is not theirs (the page shows it).
pub(crate) const NOT_YOURS: &str =
    "this session was started by someone else: only they and the relay's owner may open it";

/// Refuses a new mosh-server beyond `--max-spawned` (hosts' ones count too).
fn check_spawn_limit(shared: &SessionContext, state: &StateStore) -> Result<(), Refusal> {
    let alive = state.alive().len();
    let max = shared.settings.targets.max_spawned;
    if alive >= max {
        return Err(Refusal::new(
            ErrorCode::TooManySessions,
            format!("{alive} mosh-servers already running (limit {max})"),
        ));
    }
    Ok(())
}

/// What every spawned mosh-server gets, here or on an ssh host.
fn spawn_spec(
    shared: &SessionContext,
    recorder: Option<Recorder>,
    shell_env: Vec<(String, String)>,
) -> SpawnSpec {
    SpawnSpec { recorder, shell_env, ..shared.settings.targets.spawn.clone() }
}

/// Records a started mosh-server for a restarted relay and makes it the session's target.
fn record_spawned(
    state: &StateStore,
    id: String,
    spawned: Spawned,
    remote: Option<RemoteServer>,
    seq_reserved: u64,
    who: &Who,
) -> Target {
    let record = SessionRecord {
        id,
        port: spawned.port,
        key: spawned.key,
        pid: if remote.is_some() { None } else { spawned.pid },
        created: SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs(),
        seq_reserved,
        remote,
        owner: Some(who.name().to_owned()),
    };
    tracing::info!(session = %record.id, port = record.port, pid = ?spawned.pid, host = ?record.remote.as_ref().map(|r| &r.host), "spawned mosh-server");
    let started = std::time::Instant::now();
    if let Err(e) = state.insert(record.clone()) {
        // The session still works; only a relay restart would lose track of it.
        tracing::error!("cannot record session: {e:#}");
    }
    tracing::debug!(record_us = started.elapsed().as_micros() as u64, "session recorded");
    Target::spawned(record, false)
}

/// Starts a mosh-server on one of the relay's ssh hosts, as `mosh HOST` does.
async fn spawn_over_ssh(
    shared: &SessionContext,
    state: &StateStore,
    name: &str,
    who: &Who,
) -> Result<Target, Refusal> {
    let Some((hosts, host)) = shared.ssh.as_ref().and_then(|h| Some((h, h.find(name)?))) else {
        return Err(Refusal::new(
            ErrorCode::TargetNotAllowed,
            format!("{name} is not one of this relay's --ssh-host hosts"),
        ));
    };
    // The recorder goes there when the host can run it (this relay's machine), copied once per
    // build; else the session starts without it and the page is told why. Before the spawn lock:
    // a first copy may take a while, and other starts need not wait for it (two copies at once
    // each rename a whole file into place).
    let id = new_session_id();
    let c = &shared.settings.targets;
    let asked = std::time::Instant::now();
    let prepared = if c.history_lines == 0 {
        Err("the relay keeps no history (--history-lines 0)".to_owned())
    } else {
        let local = crate::spawn::ssh_recorder::this_executable(c.recorder.clone()).await;
        hosts.prepare_recorder(host, local).await
    };
    let recorder = prepared.as_ref().ok().map(|r| Recorder {
        program: r.program.clone().into(),
        history_dir: r.dir.clone().into(),
        session: id.clone(),
        max_lines: c.history_lines,
        max_bytes: c.history_bytes,
        cast_bytes: c.record_bytes,
    });
    if let Err(why) = &prepared {
        tracing::info!(%host, "no recorder on the host: {why}");
    }
    tracing::debug!(%host, took_ms = asked.elapsed().as_millis() as u64, "the host's recorder checked");
    // The same lock as a local start: two starts at once would both pass the limit check and
    // both start a server.
    let _guard = shared.spawn_lock.lock().await;
    check_spawn_limit(shared, state)?;
    // The recorder's signals go to the follower's socket there (ssh_follow brings them back).
    let shell_env = match &prepared {
        Ok(r) => vec![
            (
                crate::command::SOCKET_ENV.to_owned(),
                crate::history::follow::socket_of(std::path::Path::new(&r.dir), &id)
                    .to_string_lossy()
                    .into_owned(),
            ),
            (crate::command::SESSION_ENV.to_owned(), id.clone()),
        ],
        Err(_) => Vec::new(),
    };
    let starting = std::time::Instant::now();
    let started =
        hosts.start(host, &spawn_spec(shared, recorder, shell_env)).await.map_err(|message| {
            tracing::warn!(%host, "starting mosh-server over ssh failed: {message}");
            Refusal::new(ErrorCode::SpawnFailed, message)
        })?;
    tracing::debug!(%host, took_ms = starting.elapsed().as_millis() as u64, "mosh-server started over ssh");
    let remote = RemoteServer {
        host: host.to_string(),
        ip: started.ip,
        pid: started.spawned.pid,
        recorder_off: prepared.as_ref().err().cloned(),
        recorder: prepared.ok(),
    };
    let target = record_spawned(state, id, started.spawned, Some(remote), 0, who);
    if let (Some(record), Some(state)) = (&target.record, &shared.state) {
        let bound = crate::history::follow::mirror_bound(c.history_bytes, c.record_bytes);
        crate::spawn::ssh_follow::ensure(
            hosts,
            state,
            &shared.offers,
            record,
            bound,
            &shared.shutdown,
        );
    }
    Ok(target)
}

/// Starts a mosh-server (within `--max-spawned`), or takes the warm spare, and records it for a
/// restarted relay.
async fn spawn(shared: &SessionContext, state: &StateStore, who: &Who) -> Result<Target, Refusal> {
    let _guard = shared.spawn_lock.lock().await;
    check_spawn_limit(shared, state)?;
    // The spare was started as this very spawn would start it, with its id chosen then.
    if let Some(mut warm) = shared.spare.take(state) {
        tracing::debug!(pid = ?warm.spawned.pid, "took the warm spare");
        warm.keep_running();
        // Its shell runs already when the relay released it: the page continues from the relay's
        // client, whose sequence numbers are reserved (the record's bound is above them all).
        let released = warm.release().await;
        let reserved = released.as_ref().map_or(0, |r| r.point.next_seq);
        let super::spare::Warm { id, spawned, .. } = warm;
        let mut target = record_spawned(state, id, spawned, None, reserved, who);
        target.prestarted = released;
        return Ok(target);
    }
    let id = new_session_id();
    let started = std::time::Instant::now();
    let spawned = spawn_mosh_server(&local_spec(shared, state, &id)).await.map_err(|e| {
        tracing::warn!("spawning mosh-server failed: {e:#}");
        Refusal::new(ErrorCode::SpawnFailed, format!("{e:#}"))
    })?;
    tracing::debug!(took_ms = started.elapsed().as_millis() as u64, "mosh-server started");
    Ok(record_spawned(state, id, spawned, None, 0, who))
}

/// What a new session `id` on this machine is started with: the relay's spec, the recorder and
/// the shell's environment for `tern` (both name the session: see `spare` for why the id is
/// chosen before the spawn).
pub(super) fn local_spec(shared: &SessionContext, state: &StateStore, id: &str) -> SpawnSpec {
    let c = &shared.settings.targets;
    // The recorder is this very executable (`tern-relay record`); without it (not found, or
    // `--history-lines 0`) the session still works, with only the scrollback a page saw.
    let program = c.recorder.clone().map_or_else(std::env::current_exe, Ok).and_then(|p| {
        let is_relay = p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("tern-relay"));
        if is_relay {
            Ok(p)
        } else {
            Err(std::io::Error::other(format!("{} is not tern-relay", p.display())))
        }
    });
    // `tern send` and `tern open` for the shell: the command is this executable too.
    let shell_env = match &c.state_dir {
        Some(dir) => {
            let bin = program.as_ref().ok().and_then(|relay| crate::send::install(dir, relay));
            crate::send::shell_env(dir, id, bin.as_deref())
        }
        None => Vec::new(),
    };
    let recorder = match (c.history_lines, program) {
        (0, _) => None,
        (max_lines, Ok(program)) => Some(Recorder {
            program,
            history_dir: state.dir().to_path_buf(),
            session: id.to_owned(),
            max_lines,
            max_bytes: c.history_bytes,
            cast_bytes: c.record_bytes,
        }),
        (_, Err(e)) => {
            tracing::warn!("no history for new sessions: cannot find tern-relay itself: {e}");
            None
        }
    };
    spawn_spec(shared, recorder, shell_env)
}

/// The browser's host and port, if the allowlist has them.
async fn bridge(shared: &SessionContext, hello: &Hello) -> Result<Target, Refusal> {
    let (Some(host), Some(port)) = (hello.host.as_deref(), hello.port) else {
        return Err(Refusal::new(ErrorCode::BadRequest, "bridge mode needs host and port"));
    };
    let host = normalize_host(host);
    if !shared.settings.targets.allow.iter().any(|r| r.allows(host, port)) {
        return Err(Refusal::new(
            ErrorCode::TargetNotAllowed,
            format!("{host}:{port} is not on this relay's --allow list"),
        ));
    }
    let addr = match host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => {
            tokio::net::lookup_host((host, port)).await.ok().and_then(|mut a| a.next()).ok_or_else(
                || Refusal::new(ErrorCode::TargetNotAllowed, format!("cannot resolve {host}")),
            )?
        }
    };
    Ok(Target {
        session: new_session_id(),
        addr,
        port,
        key: None,
        pid: None,
        resumed: false,
        record: None,
        ssh_host: None,
        prestarted: None,
        off: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_rules_parse_and_match() {
        let r: AllowRule = "127.0.0.1:60001-60010".parse().unwrap();
        assert!(r.allows("127.0.0.1", 60001));
        assert!(r.allows("127.0.0.1", 60010));
        assert!(!r.allows("127.0.0.1", 60011));
        assert!(!r.allows("127.0.0.2", 60001));
        let r: AllowRule = "[::1]:5000".parse().unwrap();
        assert!(r.allows("::1", 5000));
        assert!(r.allows("[::1]", 5000));
        let r: AllowRule = "Host.Example:1-2".parse().unwrap();
        assert!(r.allows("host.example", 2));
        assert!("nohost".parse::<AllowRule>().is_err());
        assert!(":5".parse::<AllowRule>().is_err());
        assert!("h:9-3".parse::<AllowRule>().is_err());
    }
}
