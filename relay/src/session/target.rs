//! Where an admitted session's datagrams go: a mosh-server the relay spawns, a spawned one it
//! resumes, or an allowlisted one the browser names (bridge mode); and the UDP socket to it.

use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::net::UdpSocket;

use super::handshake::Refusal;
use crate::config::{Mode, normalize_host};
use crate::control::{ErrorCode, Hello};
use crate::shared::Shared;
use crate::spawn::{Recorder, SpawnSpec, spawn_mosh_server};
use crate::state::{SessionRecord, StateStore, valid_id};

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
}

impl Target {
    /// A spawned mosh-server, which listens on loopback.
    fn spawned(record: SessionRecord, resumed: bool) -> Self {
        Target {
            session: record.id.clone(),
            addr: SocketAddr::from(([127, 0, 0, 1], record.port)),
            port: record.port,
            key: Some(record.key.clone()),
            pid: record.pid,
            resumed,
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
            match &hello.resume {
                Some(id) => resume(state, id),
                None => spawn(shared, state).await,
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
fn resume(state: &StateStore, id: &str) -> Result<Target, Refusal> {
    if !valid_id(id) {
        return Err(Refusal::new(ErrorCode::UnknownSession, "malformed session id"));
    }
    match state.check_alive(id) {
        Some(record) => Ok(Target::spawned(record, true)),
        None => Err(Refusal::new(
            ErrorCode::SessionEnded,
            "that session's mosh-server is gone (its shell exited, or nobody connected within 60 s)",
        )),
    }
}

/// Starts a mosh-server (within `--max-spawned`) and records it for a restarted relay.
async fn spawn(shared: &Shared, state: &StateStore) -> Result<Target, Refusal> {
    let _guard = shared.spawn_lock.lock().await;
    let alive = state.alive().len();
    if alive >= shared.config.max_spawned {
        return Err(Refusal::new(
            ErrorCode::TooManySessions,
            format!("{alive} mosh-servers already running (limit {})", shared.config.max_spawned),
        ));
    }
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
    let spec = SpawnSpec {
        program: c.mosh_server_command.clone(),
        locale: c.mosh_locale.clone(),
        ports: c.mosh_port_range,
        command: c.mosh_command.clone(),
        timeout: c.spawn_timeout(),
        idle_timeout: c.session_idle_timeout(),
        recorder,
    };
    let spawned = spawn_mosh_server(&spec).await.map_err(|e| {
        tracing::warn!("spawning mosh-server failed: {e:#}");
        Refusal::new(ErrorCode::SpawnFailed, format!("{e:#}"))
    })?;
    let record = SessionRecord {
        id,
        port: spawned.port,
        key: spawned.key,
        pid: spawned.pid,
        created: SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs(),
        seq_reserved: 0,
    };
    tracing::info!(session = %record.id, port = record.port, pid = ?record.pid, "spawned mosh-server");
    if let Err(e) = state.insert(record.clone()) {
        // The session still works; only a relay restart would lose track of it.
        tracing::error!("cannot record session: {e:#}");
    }
    Ok(Target::spawned(record, false))
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
