//! Where an admitted session's datagrams go: a mosh-server the relay spawns, a spawned one it
//! resumes, or an allowlisted one the browser names (bridge mode); and the UDP socket to it.

use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::net::UdpSocket;

use super::handshake::Refusal;
use crate::config::{Mode, normalize_host};
use crate::control::{ErrorCode, Hello};
use crate::shared::Shared;
use crate::spawn::{Recorder, SpawnSpec, Spawned, spawn_mosh_server};
use crate::ssh::SshHost;
use crate::state::{RemoteServer, SessionRecord, StateStore, valid_id};

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
            record: Some(record),
        }
    }
}

/// Finds or starts the hello's mosh-server.
pub(super) async fn attach(shared: &Shared, hello: &Hello) -> Result<Target, Refusal> {
    match shared.config.mode() {
        Mode::Spawn => {
            let state = shared
                .state
                .as_ref()
                .ok_or_else(|| Refusal::new(ErrorCode::Internal, "spawn mode without state"))?;
            match (&hello.resume, &hello.ssh_host) {
                (Some(id), _) => resume(shared, state, id).await,
                (None, None) => spawn(shared, state).await,
                (None, Some(host)) => spawn_over_ssh(shared, state, host).await,
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

/// Re-attaches to a spawned mosh-server that is still alive.
async fn resume(shared: &Shared, state: &StateStore, id: &str) -> Result<Target, Refusal> {
    if !valid_id(id) {
        return Err(Refusal::new(ErrorCode::UnknownSession, "malformed session id"));
    }
    let gone = |why: &str| Refusal::new(ErrorCode::SessionEnded, why.to_owned());
    let record = state.check_alive(id).ok_or_else(|| {
        gone("that session's mosh-server is gone (its shell exited, or nobody connected within 60 s)")
    })?;
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

/// Refuses a new mosh-server beyond `--max-spawned` (hosts' ones count too).
fn check_spawn_limit(shared: &Shared, state: &StateStore) -> Result<(), Refusal> {
    let alive = state.alive().len();
    if alive >= shared.config.max_spawned {
        return Err(Refusal::new(
            ErrorCode::TooManySessions,
            format!("{alive} mosh-servers already running (limit {})", shared.config.max_spawned),
        ));
    }
    Ok(())
}

/// What every spawned mosh-server gets, here or on an ssh host.
fn spawn_spec(
    shared: &Shared,
    recorder: Option<Recorder>,
    shell_env: Vec<(String, String)>,
) -> SpawnSpec {
    let c = &shared.config;
    SpawnSpec {
        program: c.mosh_server_command.clone(),
        locale: c.mosh_locale.clone(),
        ports: c.mosh_port_range,
        command: c.mosh_command.clone(),
        timeout: c.spawn_timeout(),
        idle_timeout: c.session_idle_timeout(),
        recorder,
        shell_env,
    }
}

/// Records a started mosh-server for a restarted relay and makes it the session's target.
fn record_spawned(
    state: &StateStore,
    id: String,
    spawned: Spawned,
    remote: Option<RemoteServer>,
) -> Target {
    let record = SessionRecord {
        id,
        port: spawned.port,
        key: spawned.key,
        pid: if remote.is_some() { None } else { spawned.pid },
        created: SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs(),
        seq_reserved: 0,
        remote,
    };
    tracing::info!(session = %record.id, port = record.port, pid = ?spawned.pid, host = ?record.remote.as_ref().map(|r| &r.host), "spawned mosh-server");
    if let Err(e) = state.insert(record.clone()) {
        // The session still works; only a relay restart would lose track of it.
        tracing::error!("cannot record session: {e:#}");
    }
    Target::spawned(record, false)
}

/// Starts a mosh-server on one of the relay's ssh hosts, as `mosh HOST` does.
async fn spawn_over_ssh(
    shared: &Shared,
    state: &StateStore,
    name: &str,
) -> Result<Target, Refusal> {
    let Some((hosts, host)) = shared.ssh.as_ref().and_then(|h| Some((h, h.find(name)?))) else {
        return Err(Refusal::new(
            ErrorCode::TargetNotAllowed,
            format!("{name} is not one of this relay's --ssh-host hosts"),
        ));
    };
    check_spawn_limit(shared, state)?;
    let started =
        hosts.start(host, &spawn_spec(shared, None, Vec::new())).await.map_err(|message| {
            tracing::warn!(%host, "starting mosh-server over ssh failed: {message}");
            Refusal::new(ErrorCode::SpawnFailed, message)
        })?;
    let remote = RemoteServer { host: host.to_string(), ip: started.ip, pid: started.spawned.pid };
    Ok(record_spawned(state, new_session_id(), started.spawned, Some(remote)))
}

/// Starts a mosh-server (within `--max-spawned`) and records it for a restarted relay.
async fn spawn(shared: &Shared, state: &StateStore) -> Result<Target, Refusal> {
    let _guard = shared.spawn_lock.lock().await;
    check_spawn_limit(shared, state)?;
    let c = &shared.config;
    let id = new_session_id();
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
    let shell_env = match c.state_dir() {
        Some(dir) => {
            let bin = program.as_ref().ok().and_then(|relay| crate::send::install(&dir, relay));
            crate::send::shell_env(&dir, &id, bin.as_deref())
        }
        None => Vec::new(),
    };
    let recorder = match (c.history_lines, program) {
        (0, _) => None,
        (max_lines, Ok(program)) => Some(Recorder {
            program,
            history_dir: state.dir().to_path_buf(),
            session: id.clone(),
            max_lines,
        }),
        (_, Err(e)) => {
            tracing::warn!("no history for new sessions: cannot find tern-relay itself: {e}");
            None
        }
    };
    let spawned =
        spawn_mosh_server(&spawn_spec(shared, recorder, shell_env)).await.map_err(|e| {
            tracing::warn!("spawning mosh-server failed: {e:#}");
            Refusal::new(ErrorCode::SpawnFailed, format!("{e:#}"))
        })?;
    Ok(record_spawned(state, id, spawned, None))
}

/// The browser's host and port, if the allowlist has them.
async fn bridge(shared: &Shared, hello: &Hello) -> Result<Target, Refusal> {
    let (Some(host), Some(port)) = (hello.host.as_deref(), hello.port) else {
        return Err(Refusal::new(ErrorCode::BadRequest, "bridge mode needs host and port"));
    };
    let host = normalize_host(host);
    if !shared.config.allow.iter().any(|r| r.allows(host, port)) {
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
    })
}

fn new_session_id() -> String {
    let mut b = [0u8; 16];
    // A session id only names a session; the token guards it. Fall back to time if the OS
    // refuses randomness rather than failing the session.
    if getrandom::fill(&mut b).is_err() {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        b = t.to_be_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}
