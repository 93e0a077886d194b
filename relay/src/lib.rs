//! tern-relay: serves Tern's page and bridges browser WebTransport datagrams to mosh-server's UDP.
//!
//! ```text
//!  browser ──HTTP(S)/TCP :P──▶ http     page assets (public), /api/* (Bearer token)
//!  browser ──WebTransport/UDP :P──▶ session (one task each)
//!             control stream: hello(token) ▶ ready(session, port[, key]) | error(code)
//!             datagrams ◀──▶ one connected UDP socket ◀──▶ mosh-server
//!                            (server→browser framed by `framing`; browser→server as is)
//! ```
//!
//! Spawn mode starts `mosh-server new` itself (recorded in the state directory so a restarted
//! relay re-attaches); bridge mode forwards to an allowlisted host:port named by the browser.
//!
//! What it does not do: look inside mosh datagrams (they are opaque, and in bridge mode the
//! relay has no key), stop a user's mosh-server when the relay stops, or serve anything
//! session-related without the token.
//!
//! Use: [`Relay::new`] binds, [`Relay::run`] serves until [`Relay::shutdown`].
//!
//! The layers point one way (relay/tests/layers.rs checks it), top first: this file and
//! [`config`], the only readers of the command line; `http`; `session` (accept, handshake,
//! target, the datagram bridge, and the dispatch of every further stream); [`send`] and
//! [`paste`] (what those streams carry); `link` (the browser's link, WebTransport or
//! WebSocket, and its stream halves); then `registry`, [`state`], [`history`], [`spawn`],
//! [`tls`] and the leaves. Each part takes plain settings that [`Config`] makes for it.

#![forbid(unsafe_code)]

pub mod admin;
pub mod assets;
pub mod audit;
pub mod auth;
mod bridge_floors;
pub mod challenge;
pub mod command;
pub mod config;
pub mod control;
pub mod floor;
/// The relay→browser datagram framing; the codec is the core's, shared with the wasm client.
pub use tern::relay_proto::framing;
pub mod history;
mod http;
mod ids;
pub mod limits;
mod link;
pub mod logging;
pub mod paste;
pub mod qr;
mod registry;
pub mod security;
pub mod send;
mod session;
pub mod share;
pub mod spawn;
pub mod state;
pub mod tls;
pub mod tokens;
pub mod unix_listen;
pub mod url_file;
mod version;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use wtransport::endpoint::endpoint_side::Server;
use wtransport::{Endpoint, Identity, ServerConfig};

pub use auth::Token;
pub use config::{Config, Mode};
/// The protocol's version and the WebTransport endpoint's path (`/wt`), as `tern::relay_proto`
/// defines them.
pub use tern::relay_proto::{PROTOCOL_VERSION, WEBTRANSPORT_PATH};
pub use version::{COMMIT, VERSION};

use auth::AuthLimiter;
use http::{HttpContext, Https};
use send::socket::CommandSocket;
use session::SessionContext;
use spawn::ssh::SshHosts;
use state::StateStore;
use tls::acme::{self, AcmeSettings};
use tls::cert::{self, CertManager};

/// QUIC keep-alive: keeps NAT bindings and the connection up while the tab is idle.
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// A QUIC connection silent this long is gone (the browser also sends keep-alives).
const QUIC_IDLE: Duration = Duration::from_secs(30);
/// quinn's initial congestion window (its default is 10 datagrams, 12,000 bytes). The relay's
/// bulk sender, a `tern send` download, is paced by `tern::transfer::Upload`, which starts with
/// 64 KiB in flight and doubles per round trip from the page's acks; under quinn's default the
/// download's first ~3 round trips were held to quinn's own slow start from 12 kB instead (the
/// download benchmark: ~200 ms of the link idle in the first second, 1.7 % of the transfer).
/// A little above the pacer's start, so the pacer's window is what binds; mosh's datagrams and
/// the HTTP/3 control traffic are small.
const QUIC_INITIAL_WINDOW: u64 = 96 * 1024;
/// Length of the relay's QUIC connection IDs (quinn's default is 8). Every packet the browser
/// sends carries one: with Chromium's ~1,200-byte datagrams 4 bytes less is 0.3 % of a paste's
/// link time. 2^32 random IDs are plenty for one relay's connections; they still let a connection
/// move to a new address.
const QUIC_CID_LEN: usize = 4;

/// Why the relay could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    #[error(
        "refusing to listen on {0} without TLS: a non-loopback address would expose the page and API \
         in clear text; pass --tls-cert/--tls-key, --acme DOMAIN or --tls-self-signed, or listen \
         on 127.0.0.1"
    )]
    InsecureListen(SocketAddr),
    #[error("--bridge needs at least one --allow HOST:PORT-RANGE")]
    BridgeWithoutAllowlist,
    /// A port the relay cannot listen on; the message names the likely cause (another relay, a
    /// port below 1024, an address this machine does not have) and the flag that fixes it.
    #[error("{}", bind_message(.what, .addr, .cause))]
    Bind { what: &'static str, addr: SocketAddr, cause: std::io::Error },
    /// Spawn mode without a mosh-server to start (checked before binding anything).
    #[error(
        "mosh-server not found (looked for {looked}): install mosh: `sudo apt install mosh` \
         (Debian/Ubuntu), `sudo dnf install mosh` (Fedora), `brew install mosh` (macOS); or pass \
         --mosh-server-command PATH"
    )]
    MoshServerMissing { looked: String },
    #[error("no state directory: pass --state-dir (no $HOME or $XDG_STATE_HOME)")]
    NoStateDir,
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error(transparent)]
    Cert(#[from] cert::CertError),
    #[error("cannot make a random token: {0}")]
    Random(String),
    #[error(transparent)]
    TokenFile(#[from] auth::TokenFileError),
    #[error("TLS setup: {0}")]
    Tls(String),
    #[error("{0}")]
    Acme(String),
    #[error("{0}")]
    Ssh(String),
    #[error(transparent)]
    UnixListen(#[from] unix_listen::UnixListenError),
    /// A token a person chose that is too short to stand up to guessing.
    #[error(
        "the token is {0} characters long; at least {MIN_TOKEN_CHARS} are needed (anyone who can \
         reach the relay may guess): set a longer TERN_RELAY_TOKEN or --token-file, drop it for a \
         random one, or pass --allow-weak-token to accept the risk"
    )]
    WeakToken(usize),
}

/// The shortest token the relay starts with unless `--allow-weak-token`: a chosen token is the
/// only secret between the network and a shell, and the lock-out only slows guessing down.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Refuses a token under [`MIN_TOKEN_CHARS`] characters, or with `allow_weak` starts anyway and
/// says so loudly (a warning in the log and a line on stderr, which a person running it sees).
fn check_token_strength(token: &Token, allow_weak: bool) -> Result<(), RelayError> {
    let chars = token.expose().chars().count();
    if chars >= MIN_TOKEN_CHARS {
        return Ok(());
    }
    if !allow_weak {
        return Err(RelayError::WeakToken(chars));
    }
    let warning = format!(
        "WARNING: the token is only {chars} characters long (--allow-weak-token): anyone who can \
         reach this relay may guess it and get a shell"
    );
    tracing::warn!("{warning}");
    eprintln!("tern-relay: {warning}");
    Ok(())
}

/// Spawn mode starts `--mosh-server-command`: a relay that cannot would fail every session, so
/// it refuses to start and says how to install mosh. With `--ssh-host` hosts the relay is still
/// useful (their sessions need mosh-server there, not here): it only warns.
fn check_mosh_server(config: &Config, ssh_hosts: bool) -> Result<(), RelayError> {
    let path = std::env::var_os("PATH");
    match spawn::find_program(&config.mosh_server_command, path.as_deref()) {
        Ok(found) => {
            tracing::debug!(program = %found.display(), "mosh-server found");
            Ok(())
        }
        Err(looked) => {
            let e = RelayError::MoshServerMissing { looked };
            if !ssh_hosts {
                return Err(e);
            }
            tracing::warn!(
                "{e}; sessions on this machine will fail, --ssh-host ones need it there"
            );
            Ok(())
        }
    }
}

/// The message of [`RelayError::Bind`]: what failed, the system's reason, and what to do.
fn bind_message(what: &str, addr: &SocketAddr, cause: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let pick = match addr.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]:PORT"),
        ip => format!("{ip}:PORT"),
    };
    let advice = match cause.kind() {
        ErrorKind::AddrInUse => format!(
            "{addr} is in use: another tern-relay (a systemd service? `systemctl --user status \
             tern-relay`) or another program is listening there; stop it or pick another port with \
             --listen {pick} (0 picks a free one)"
        ),
        ErrorKind::PermissionDenied if addr.port() != 0 && addr.port() < 1024 => format!(
            "ports below 1024 need root or CAP_NET_BIND_SERVICE (`sudo setcap \
             cap_net_bind_service=+ep $(command -v tern-relay)`, or \
             AmbientCapabilities=CAP_NET_BIND_SERVICE in a systemd unit); or pick a port from 1024 \
             up with --listen {pick}"
        ),
        ErrorKind::AddrNotAvailable => format!(
            "{} is not an address of this machine (an interface that is down, a VPN not yet \
             connected?); pick one it has with --listen, or 0.0.0.0 for all",
            addr.ip()
        ),
        _ => return format!("cannot listen on {what} {addr}: {cause}"),
    };
    format!("cannot listen on {what} {addr} ({cause}): {advice}")
}

/// The relay: bound sockets and shared state. Share it behind an `Arc` to call
/// [`Relay::shutdown`] while [`Relay::run`] runs.
pub struct Relay {
    /// What every browser session shares.
    sessions: Arc<SessionContext>,
    /// What every HTTP connection shares.
    http: Arc<HttpContext>,
    /// The `tern` command's socket (spawn mode).
    commands: Option<Arc<CommandSocket>>,
    /// What keeps the certificate current.
    upkeep: CertUpkeep,
    /// `--tls-self-signed`.
    tls_self_signed: bool,
    /// Where HTTP connections come from (taken by `run`).
    listener: std::sync::Mutex<Option<http::Listener>>,
    /// WebTransport's; none on a Unix socket (`--listen unix:PATH`).
    endpoint: Option<Arc<Endpoint<Server>>>,
    local_addr: SocketAddr,
    /// `--listen unix:PATH`: the socket, removed when the relay stops.
    unix_path: Option<PathBuf>,
    acme: Option<AcmeSettings>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("local_addr", &self.local_addr)
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// Validates the configuration, binds TCP and UDP on the same port, opens the state directory.
    pub async fn new(config: Config) -> Result<Relay, RelayError> {
        match &config.listen {
            config::ListenAddr::Tcp(addr) if !addr.ip().is_loopback() && !config.https() => {
                return Err(RelayError::InsecureListen(*addr));
            }
            config::ListenAddr::Unix(_) if config.https() => {
                return Err(RelayError::Tls(
                    "--listen unix:PATH serves plain HTTP to a tunnel (ssh -L), which carries \
                     it encrypted: drop --tls-cert, --tls-self-signed and --acme"
                        .into(),
                ));
            }
            _ => {}
        }
        if config.bridge && config.allow.is_empty() {
            return Err(RelayError::BridgeWithoutAllowlist);
        }
        let ssh = SshHosts::new(config.ssh_settings()).map_err(RelayError::Ssh)?;
        if config.bridge && ssh.is_some() {
            return Err(RelayError::Ssh(
                "--ssh-host starts sessions as spawn mode does: drop --bridge".into(),
            ));
        }
        if config.mode() == Mode::Spawn {
            check_mosh_server(&config, ssh.is_some())?;
        }
        // The recordings are the recorder's: without it (bridge mode, `--history-lines 0`) there
        // are none, which a person asking for them should hear.
        if config.record_sessions && (config.mode() == Mode::Bridge || config.history_lines == 0) {
            tracing::warn!(
                "--record-sessions records nothing in bridge mode or with --history-lines 0 \
                 (the recordings are made by the history recorder)"
            );
        }
        let token = match (&config.token, &config.token_file) {
            (Some(t), _) if !t.is_empty() => Token::new(t.clone()),
            (_, Some(file)) => Token::load_or_create(file)?,
            _ => Token::random().map_err(|e| RelayError::Random(e.to_string()))?,
        };
        check_token_strength(&token, config.allow_weak_token)?;
        let acme = match config.acme_settings() {
            None => None,
            Some(Ok(s)) => {
                state::ensure_private_dir(&s.dir, state::DirRole::State)?;
                Some(s)
            }
            Some(Err(e)) => return Err(RelayError::Acme(e)),
        };
        // Spawn mode always has a state directory; bridge mode only when given one.
        let state_dir = match config.mode() {
            Mode::Spawn => Some(config.state_dir().ok_or(RelayError::NoStateDir)?),
            Mode::Bridge => config.state_dir.clone(),
        };
        let state = match (config.mode(), &state_dir) {
            (Mode::Spawn, Some(dir)) => Some(Arc::new(StateStore::open(dir)?)),
            _ => None,
        };
        // Bridge mode keeps its sequence floors across restarts in the state directory (the
        // flag's, else the default one); with none at all, in memory and above the clock's floor.
        let bridge_floors = match (config.mode(), config.state_dir()) {
            (Mode::Bridge, Some(dir)) => bridge_floors::BridgeFloors::open(&dir)?,
            (Mode::Bridge, None) => {
                tracing::warn!(
                    "no state directory (no --state-dir, $HOME or $XDG_STATE_HOME): bridge sequence floors are kept in memory, and after a restart only the clock's floor protects them"
                );
                bridge_floors::BridgeFloors::in_memory()
            }
            (Mode::Spawn, _) => bridge_floors::BridgeFloors::in_memory(),
        };
        let certs = Arc::new(match &acme {
            Some(s) => CertManager::acme(acme::load_cached(s).await, s.domains.clone())?,
            None => certificates(&config, state_dir.as_deref()).await?,
        });
        let https = match config.https() {
            true => Some(Https(
                certs.tls_acceptor(acme.is_some()).map_err(|e| RelayError::Tls(e.to_string()))?,
            )),
            false => None,
        };
        let offers = send::Offers::open(state.as_deref().map(StateStore::dir));
        let pastes = match config.paste_dir() {
            Some(dir) => Some(Arc::new(paste::PasteStore::open(&dir, config.paste_limits())?)),
            None => None,
        };
        let (listener, endpoint, local_addr, unix_path) = match &config.listen {
            config::ListenAddr::Tcp(addr) => {
                let (tcp, udp) = bind_pair(*addr)?;
                let local_addr = tcp.local_addr().map_err(|cause| RelayError::Bind {
                    what: "TCP",
                    addr: *addr,
                    cause,
                })?;
                let server_config =
                    server_config(Some(udp), certs.current().identity(), config.max_handshakes)?;
                let endpoint = Endpoint::server(server_config).map_err(|cause| {
                    RelayError::Bind { what: "UDP (WebTransport)", addr: local_addr, cause }
                })?;
                (http::Listener::Tcp(tcp), Some(Arc::new(endpoint)), local_addr, None)
            }
            // HTTP only; the URL names the tunnel's usual local end (docs/DEPLOY.md).
            config::ListenAddr::Unix(path) => {
                let unix = unix_listen::bind(path)?;
                let tunnel_end = SocketAddr::from(([127, 0, 0, 1], 7480));
                (http::Listener::Unix(unix), None, tunnel_end, Some(path.clone()))
            }
        };
        let shutdown = CancellationToken::new();
        // `tern send` and `tern open` reach the relay of their shell's session: spawn mode's.
        let audit = Arc::new(audit::Audit::open(state_dir.as_deref()));
        let commands = match (&state, &state_dir) {
            (Some(state), Some(dir)) => Some(Arc::new(CommandSocket {
                dir: dir.clone(),
                send_limit: config.send_limit,
                state: Arc::clone(state),
                shutdown: shutdown.clone(),
                audit: Arc::clone(&audit),
            })),
            _ => None,
        };
        let mut settings = config.session_settings();
        let cert_names: Vec<String> =
            [certs.current(), certs.page()].iter().flat_map(|c| c.dns_names.clone()).collect();
        settings.host_policy = crate::security::HostPolicy::new(
            config.listen.is_local(),
            &config.allow_host,
            &[config.acme.clone(), cert_names].concat(),
        );
        let tokens = tokens::TokenStore::open(state_dir.clone())
            .map_err(|e| RelayError::Random(format!("named tokens: {e}")))?;
        let sessions = Arc::new(SessionContext {
            settings,
            token,
            tokens: Arc::new(tokens),
            audit,
            auth: AuthLimiter::new(),
            state,
            registry: registry::Registry::with_bridge_floors(bridge_floors),
            pastes,
            offers,
            ssh: ssh.map(Arc::new),
            sessions: Arc::new(tokio::sync::Semaphore::new(config.max_sessions)),
            handshakes: session::HandshakeSlots::new(
                config.max_handshakes,
                config.max_authenticated_handshakes,
                config.max_handshakes_per_source,
            ),
            spare: session::Spare::new(config.spare_enabled(), !config.no_spare_prestart),
            spawn_lock: tokio::sync::Mutex::new(()),
            shutdown: shutdown.clone(),
            certs: Arc::clone(&certs),
            // 0: no WebTransport (a Unix socket), which the relay's info tells the page.
            webtransport_port: if endpoint.is_some() { local_addr.port() } else { 0 },
        });
        let http = Arc::new(HttpContext {
            settings: config.http_settings(),
            sessions: Arc::clone(&sessions),
            connections: Arc::new(tokio::sync::Semaphore::new(config.max_http_connections.max(1))),
            https,
            challenges: Default::default(),
        });
        let upkeep = CertUpkeep {
            certs,
            max_handshakes: config.max_handshakes,
            reload_every: config.tls_reload_interval(),
            shutdown,
        };
        Ok(Relay {
            sessions,
            http,
            commands,
            upkeep,
            tls_self_signed: config.tls_self_signed,
            listener: std::sync::Mutex::new(Some(listener)),
            endpoint,
            local_addr,
            unix_path,
            acme,
        })
    }

    /// Where HTTP (TCP) and WebTransport (UDP) listen.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn token(&self) -> &Token {
        &self.sessions.token
    }

    pub fn mode(&self) -> Mode {
        self.sessions.settings.mode
    }

    /// The URL to open; the token rides in the fragment, which browsers never send to a server.
    /// The host is the certificate's name when it has one (`--acme`, `--tls-cert`), else the
    /// listen address; the path is `--base-path`.
    pub fn page_url(&self) -> String {
        let https = self.http.https.is_some();
        let scheme = if https { "https" } else { "http" };
        let host = match self.page_host() {
            PageHost::Name(name) => name,
            PageHost::Ip(std::net::IpAddr::V6(v6)) => format!("[{v6}]"),
            PageHost::Ip(ip) => ip.to_string(),
        };
        let port = self.local_addr.port();
        let port = if (https && port == 443) || (!https && port == 80) {
            String::new()
        } else {
            format!(":{port}")
        };
        format!(
            "{scheme}://{host}{port}{}#token={}",
            self.http.settings.base_path,
            self.sessions.token.expose()
        )
    }

    /// The host of [`Relay::page_url`]: the certificate's name when it has one, else the listen
    /// address (loopback for an unspecified one).
    fn page_host(&self) -> PageHost {
        let named = match &self.acme {
            Some(s) => s.domains.first().cloned(),
            None if self.upkeep.certs.watches_files() => {
                self.upkeep.certs.current().dns_names.iter().find(|n| !n.contains('*')).cloned()
            }
            None => None,
        };
        match named {
            Some(name) => PageHost::Name(name),
            None if self.local_addr.ip().is_unspecified() => {
                PageHost::Ip(std::net::Ipv4Addr::LOCALHOST.into())
            }
            None => PageHost::Ip(self.local_addr.ip()),
        }
    }

    /// Whether [`Relay::page_url`] reaches beyond this machine (its host is not loopback): then
    /// another device may open it, and `main` prints it as a QR code too.
    pub fn page_url_is_remote(&self) -> bool {
        self.page_host().is_remote()
    }

    /// With `--tls-self-signed`: the SHA-256 fingerprint (`AA:BB:...`) of the certificate the
    /// page's HTTPS serves, which the person compares with the browser's before accepting it.
    /// `None` for a CA's certificate (`--tls-cert`, `--acme`) and for plain HTTP.
    pub fn tls_fingerprint(&self) -> Option<String> {
        (self.http.https.is_some() && self.tls_self_signed)
            .then(|| self.upkeep.certs.page().fingerprint())
    }

    /// Whether [`Relay::tls_fingerprint`] stays the same across restarts (it is kept in the
    /// state directory) or changes with each start (bridge mode without `--state-dir`).
    pub fn tls_fingerprint_kept(&self) -> bool {
        self.upkeep.certs.page_cert_kept()
    }

    /// Current WebTransport certificate hashes (base64 SHA-256), as `/api/info` serves them.
    pub fn cert_hashes(&self) -> Vec<String> {
        self.upkeep.certs.hashes()
    }

    /// Serves until [`Relay::shutdown`]. Call once.
    pub async fn run(&self) {
        let Some(listener) = self.listener.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            tracing::error!("Relay::run called twice");
            return;
        };
        match &self.unix_path {
            Some(path) => tracing::info!(
                socket = %path.display(), mode = ?self.mode(), "tern-relay serving (HTTP and the \
                 WebSocket on a Unix socket; no WebTransport)"
            ),
            None => {
                tracing::info!(addr = %self.local_addr, mode = ?self.mode(), "tern-relay serving")
            }
        }
        let http = tokio::spawn(http::serve(Arc::clone(&self.http), listener));
        let certs = self.endpoint.as_ref().map(|endpoint| {
            tokio::spawn(maintain_certs(
                self.upkeep.clone(),
                Arc::clone(endpoint),
                self.acme.clone(),
            ))
        });
        let prune = tokio::spawn(prune_sessions(Arc::clone(&self.sessions)));
        // `tern-relay token revoke` in another process: seen within a fraction of a second.
        tokio::spawn(Arc::clone(&self.sessions.tokens).watch(self.sessions.shutdown.clone()));
        let spare = tokio::spawn(session::keep_spare(Arc::clone(&self.sessions)));
        let commands = self.commands.as_ref().map(|socket| {
            tokio::spawn(send::socket::serve(Arc::clone(socket), Arc::clone(&self.sessions.offers)))
        });
        match &self.endpoint {
            Some(endpoint) => {
                session::accept_loop(Arc::clone(&self.sessions), endpoint).await;
                endpoint.close(wtransport::VarInt::from_u32(0), b"relay shutting down");
            }
            None => self.sessions.shutdown.cancelled().await,
        }
        let _ = http.await;
        if let Some(path) = &self.unix_path {
            let _ = std::fs::remove_file(path);
        }
        if let Some(certs) = certs {
            certs.abort();
        }
        prune.abort();
        // The spare is no session: it does not outlive the relay.
        let _ = spare.await;
        if let Some(commands) = commands {
            let _ = commands.await;
        }
        // Sessions outlive the relay: keep the newest copy of each for the next one.
        if let Some(state) = &self.sessions.state {
            self.sessions.registry.save_all(state);
            state.release_lock();
        }
        tracing::info!("tern-relay stopped");
    }

    /// Asks [`Relay::run`] to stop: listeners close, sessions end with `shutting_down`.
    /// mosh-servers keep running.
    pub fn shutdown(&self) {
        self.sessions.shutdown.cancel();
    }

    /// A handle that stops the relay from elsewhere (a signal handler).
    pub fn shutdown_handle(&self) -> CancellationToken {
        self.sessions.shutdown.clone()
    }
}

/// The host part of the page's URL.
#[derive(Debug)]
enum PageHost {
    /// A certificate's DNS name.
    Name(String),
    Ip(std::net::IpAddr),
}

impl PageHost {
    /// Whether another device could reach it (not this machine's loopback).
    fn is_remote(&self) -> bool {
        match self {
            PageHost::Ip(ip) => !ip.is_loopback(),
            PageHost::Name(name) => !name.eq_ignore_ascii_case("localhost"),
        }
    }
}

/// How often records of mosh-servers that ended (their shell exited, or their idle timeout) are
/// removed, so `/api/sessions` and the state dir do not list them.
const PRUNE_INTERVAL: Duration = Duration::from_secs(15);
/// Servers on ssh hosts are asked every this many [`PRUNE_INTERVAL`]s (from the first, at
/// start): each ask is an ssh login on the host.
const REMOTE_PRUNE_EVERY: u32 = 4;

async fn prune_sessions(sessions: Arc<SessionContext>) {
    let Some(state) = sessions.state.as_ref() else { return };
    let mut tick = tokio::time::interval(PRUNE_INTERVAL);
    let mut ticks: u32 = 0;
    loop {
        tick.tick().await;
        // Listing prunes: a record whose pid is gone is removed with its file.
        let mut alive = state.alive();
        // Servers on ssh hosts are asked there (one quick ssh each, at once); only a host that
        // answers "gone" loses its record: one unreachable now may well still run it.
        let ask_hosts = ticks % REMOTE_PRUNE_EVERY == 0;
        ticks += 1;
        if let (Some(hosts), true) = (&sessions.ssh, ask_hosts) {
            let gone = remote_servers_gone(hosts, &alive).await;
            for id in &gone {
                tracing::info!(session = %id, "pruning record of a mosh-server on an ssh host that is gone");
                state.remove(id);
            }
            alive.retain(|r| !gone.contains(&r.id));
        }
        // The recorders on ssh hosts: their files followed back (again, after a relay restart
        // or a channel that gave up).
        if let Some(hosts) = &sessions.ssh {
            for record in &alive {
                let t = &sessions.settings.targets;
                let bound = history::follow::mirror_bound(t.history_bytes, t.record_bytes);
                let offers = &sessions.offers;
                spawn::ssh_follow::ensure(hosts, state, offers, record, bound, &sessions.shutdown);
            }
        }
        sessions.registry.retain_spawned(&alive);
        sessions.offers.retain(&alive.iter().map(|r| r.id.as_str()).collect::<Vec<_>>());
    }
}

/// The sessions among `records` whose mosh-server runs on an ssh host that says it is gone.
async fn remote_servers_gone(hosts: &SshHosts, records: &[state::SessionRecord]) -> Vec<String> {
    let checks =
        records.iter().filter_map(|r| {
            let remote = r.remote.as_ref()?;
            let (pid, host) = (remote.pid?, remote.host.parse::<spawn::ssh::SshHost>().ok()?);
            Some(async move {
                (hosts.is_running(&host, pid).await == Some(false)).then(|| r.id.clone())
            })
        });
    futures_util::future::join_all(checks).await.into_iter().flatten().collect()
}

/// The user's certificate (watched for changes), or the relay's own rotating self-signed one;
/// with `--tls-self-signed` and a state directory, the page's HTTPS gets a certificate of its
/// own kept there (`cert::PAGE_CERT_FILE`), which the person accepts once.
async fn certificates(
    config: &Config,
    state_dir: Option<&Path>,
) -> Result<CertManager, RelayError> {
    if let (Some(c), Some(k)) = (&config.tls_cert, &config.tls_key) {
        return Ok(CertManager::load(c, k).await?);
    }
    let certs = CertManager::self_signed(
        subject_alt_names(match &config.listen {
            config::ListenAddr::Tcp(addr) => *addr,
            config::ListenAddr::Unix(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
        }),
        Duration::from_secs(config.cert_rotate_secs),
        Duration::from_secs(config.cert_publish_ahead_secs),
    )?;
    if !config.tls_self_signed {
        return Ok(certs);
    }
    let Some(dir) = state_dir else {
        tracing::info!(
            "bridge mode without --state-dir: the page's HTTPS certificate is the WebTransport \
             one, new at every start and every 11 days (pass --state-dir DIR to keep one across \
             restarts)"
        );
        return Ok(certs);
    };
    let file = dir.join(cert::PAGE_CERT_FILE);
    if let Some(tls) = file.parent() {
        state::ensure_private_dir(tls, state::DirRole::State)?;
    }
    Ok(certs.with_page_cert(&file, SystemTime::now())?)
}

/// Names in the self-signed certificate: loopback names plus the listen address.
fn subject_alt_names(listen: SocketAddr) -> Vec<String> {
    let mut sans = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if !listen.ip().is_unspecified() && !listen.ip().is_loopback() {
        sans.push(listen.ip().to_string());
    }
    sans
}

/// wtransport server configuration; `socket` is `None` when only reloading the identity.
/// `max_handshakes` also bounds quinn's queue of connection attempts not yet taken by the
/// accept loop (which itself refuses past `--max-handshakes`).
fn server_config(
    socket: Option<UdpSocket>,
    identity: Identity,
    max_handshakes: usize,
) -> Result<ServerConfig, RelayError> {
    let builder = ServerConfig::builder();
    let builder = match socket {
        Some(s) => builder.with_bind_socket(s),
        // Ignored by `reload_config(.., rebind = false)`.
        None => builder.with_bind_default(0),
    };
    let mut transport = wtransport::config::QuicTransportConfig::default();
    let mut cubic = wtransport::quinn::congestion::CubicConfig::default();
    cubic.initial_window(QUIC_INITIAL_WINDOW);
    transport.congestion_controller_factory(Arc::new(cubic));
    let mut config = builder
        .with_custom_transport(identity, transport)
        .keep_alive_interval(Some(KEEP_ALIVE))
        .max_idle_timeout(Some(QUIC_IDLE))
        .map_err(|e| RelayError::Tls(e.to_string()))?
        .build();
    config.quic_config_mut().max_incoming(max_handshakes.max(1));
    config.quic_endpoint_config_mut().cid_generator(|| Box::new(ShortCids));
    Ok(config)
}

/// The relay's QUIC connection IDs: [`QUIC_CID_LEN`] random bytes (quinn's own random generator
/// is not exported; this is it with a shorter length).
struct ShortCids;

impl wtransport::quinn::ConnectionIdGenerator for ShortCids {
    fn generate_cid(&mut self) -> wtransport::quinn::ConnectionId {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let mut bytes = [0u8; QUIC_CID_LEN];
        // The OS's random source does not fail once the process runs (the relay's token came from
        // it); should it, a counter keeps the IDs distinct, only guessable.
        if getrandom::fill(&mut bytes).is_err() {
            bytes = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_be_bytes();
        }
        wtransport::quinn::ConnectionId::new(&bytes)
    }

    fn cid_len(&self) -> usize {
        QUIC_CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// Binds TCP and UDP on one port number. With port 0, retries until a port is free for both.
fn bind_pair(addr: SocketAddr) -> Result<(TcpListener, UdpSocket), RelayError> {
    let bind_err = |what, cause| RelayError::Bind { what, addr, cause };
    let attempts = if addr.port() == 0 { 20 } else { 1 };
    let mut last = None;
    for _ in 0..attempts {
        let tcp = std::net::TcpListener::bind(addr).map_err(|e| bind_err("TCP", e))?;
        let port = tcp.local_addr().map_err(|e| bind_err("TCP", e))?.port();
        match UdpSocket::bind(SocketAddr::new(addr.ip(), port)) {
            Ok(udp) => {
                tcp.set_nonblocking(true).map_err(|e| bind_err("TCP", e))?;
                let tcp = TcpListener::from_std(tcp).map_err(|e| bind_err("TCP", e))?;
                return Ok((tcp, udp));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(bind_err("UDP", last.unwrap_or_else(|| std::io::Error::other("no free port"))))
}

/// What keeping the certificate current works with.
#[derive(Debug, Clone)]
struct CertUpkeep {
    certs: Arc<CertManager>,
    /// `--max-handshakes`, for each new WebTransport configuration.
    max_handshakes: usize,
    /// `--tls-reload-secs`: how often `--tls-cert/--tls-key` are read again.
    reload_every: Duration,
    shutdown: CancellationToken,
}

/// Keeps the certificate current, by its source: ACME orders and renewals, changed
/// `--tls-cert/--tls-key` files, or the self-signed rotation.
async fn maintain_certs(
    upkeep: CertUpkeep,
    endpoint: Arc<Endpoint<Server>>,
    acme: Option<AcmeSettings>,
) {
    if let Some(settings) = acme {
        let max = upkeep.max_handshakes;
        let apply = |identity| apply_identity(&endpoint, identity, max);
        acme::run(settings, Arc::clone(&upkeep.certs), apply, upkeep.shutdown.clone()).await;
    } else if upkeep.certs.watches_files() {
        watch_files(upkeep, endpoint).await;
    } else {
        rotate_certs(upkeep, endpoint).await;
    }
}

/// Hands a new identity to WebTransport: new connections get it, live ones are untouched.
fn apply_identity(endpoint: &Endpoint<Server>, identity: Identity, max_handshakes: usize) {
    let reloaded = server_config(None, identity, max_handshakes)
        .and_then(|c| endpoint.reload_config(c, false).map_err(|e| RelayError::Tls(e.to_string())));
    if let Err(e) = reloaded {
        tracing::error!("cannot switch the WebTransport certificate: {e:#}");
    }
}

/// `--tls-cert/--tls-key`: re-reads the files every `--tls-reload-secs` and switches to a changed,
/// valid pair (certbot renewals need no restart).
async fn watch_files(upkeep: CertUpkeep, endpoint: Arc<Endpoint<Server>>) {
    let every = upkeep.reload_every;
    loop {
        tokio::select! {
            _ = upkeep.shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Some(identity) = upkeep.certs.reload_files().await {
            apply_identity(&endpoint, identity, upkeep.max_handshakes);
        }
    }
}

/// Switches the endpoint to each new certificate as the schedule says; live connections stay.
async fn rotate_certs(upkeep: CertUpkeep, endpoint: Arc<Endpoint<Server>>) {
    loop {
        let Some(wait) = upkeep.certs.next_tick_in(Instant::now()) else {
            return;
        };
        tokio::select! {
            _ = upkeep.shutdown.cancelled() => return,
            // Re-check at least hourly: a suspended machine's timers may sleep through the due
            // time.
            _ = tokio::time::sleep(wait.clamp(Duration::from_millis(10), Duration::from_secs(3600))) => {}
        }
        if let Err(e) = upkeep.certs.renew_page_cert(SystemTime::now()) {
            tracing::error!("cannot renew the page's certificate: {e:#}");
        }
        match upkeep.certs.tick(Instant::now()) {
            Ok(Some(identity)) => apply_identity(&endpoint, identity, upkeep.max_handshakes),
            Ok(None) => {}
            Err(e) => {
                tracing::error!("cannot make the next certificate: {e:#}");
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_port_it_cannot_listen_on_is_explained() {
        let addr: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let denied = bind_message("TCP", &addr, &Error::from(ErrorKind::PermissionDenied));
        assert!(denied.starts_with("cannot listen on TCP 127.0.0.1:80 ("), "{denied}");
        assert!(denied.contains("ports below 1024 need root or CAP_NET_BIND_SERVICE"), "{denied}");
        assert!(denied.contains("--listen 127.0.0.1:PORT"), "{denied}");
        // Above 1024 a refusal is something else (a security module): no port advice.
        let high: SocketAddr = "127.0.0.1:7480".parse().unwrap();
        let other = bind_message("TCP", &high, &Error::from(ErrorKind::PermissionDenied));
        assert!(!other.contains("1024"), "{other}");
        let v6: SocketAddr = "[fd00::7]:7480".parse().unwrap();
        let in_use = bind_message("UDP", &v6, &Error::from(ErrorKind::AddrInUse));
        assert!(in_use.contains("[fd00::7]:7480 is in use: another tern-relay"), "{in_use}");
        assert!(in_use.contains("--listen [fd00::7]:PORT (0 picks a free one)"), "{in_use}");
        let absent = bind_message("TCP", &v6, &Error::from(ErrorKind::AddrNotAvailable));
        assert!(absent.contains("fd00::7 is not an address of this machine"), "{absent}");
    }

    #[test]
    fn the_qr_code_shows_by_itself_only_for_a_url_another_device_can_open() {
        assert!(!PageHost::Ip([127, 0, 0, 1].into()).is_remote());
        assert!(!PageHost::Ip(std::net::Ipv6Addr::LOCALHOST.into()).is_remote());
        assert!(!PageHost::Name("LocalHost".into()).is_remote());
        assert!(PageHost::Ip([100, 64, 0, 7].into()).is_remote());
        assert!(PageHost::Name("tern.example.com".into()).is_remote());
    }
}
