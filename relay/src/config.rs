//! Typed relay configuration: command line flags with environment variable fallbacks.
//!
//! Only the top of the relay reads a [`Config`] (`Relay::new`, `main`): it hands each part of the
//! relay the plain settings that part takes (`Config::session_settings`,
//! [`Config::paste_limits`], [`Config::ssh_settings`], ...), so no part below depends on the
//! command line. The flags' value types live with their users and are re-exported here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::Parser;

use crate::http::HttpSettings;
pub use crate::http::{BasePath, UnderBase};
use crate::paste::PasteLimits;
use crate::security::AllowedOrigin;
pub use crate::session::AllowRule;
use crate::session::{SessionSettings, TargetSettings};
pub use crate::spawn::PortRange;
use crate::spawn::SpawnSpec;
use crate::spawn::ssh::{SshHost, SshSettings};
use crate::tls::acme::AcmeSettings;

/// How the relay finds the mosh-server of a browser session (spawn or bridge); the page sees it
/// in `/api/info` and names it in its hello, so it is the protocol's type.
pub use tern::relay_proto::Mode;

/// Default listen address: loopback only, so nothing is exposed without an explicit choice.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7480";

/// Let's Encrypt's production ACME directory, `--acme-directory`'s default.
pub const LETS_ENCRYPT_PRODUCTION: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// Largest WebTransport datagram Chromium carries (`transport.datagrams.maxDatagramSize`).
pub const CHROMIUM_MAX_DATAGRAM: usize = 1211;

/// tern-relay: serves the Tern page and bridges WebTransport datagrams to mosh-server over UDP.
///
/// Spawn mode (default) starts `mosh-server new` for the relay's own user on request.
/// Bridge mode (`--bridge --allow HOST:PORTS`) forwards to mosh-servers started elsewhere.
/// `--session-idle-timeout`'s default: a week.
pub const SESSION_IDLE_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "tern-relay",
    version = crate::version::VERSION,
    about,
    after_help = "Named tokens (one per device or person; revocable; read-only or expiring):\n  \
        tern-relay token add NAME [--read-only] [--expires 7d]   prints the token and URL once\n  \
        tern-relay token list                                   name, kind, created, last used, expiry\n  \
        tern-relay token revoke NAME                            a running relay closes its links at once\n\
        The audit trail (who attached, from where, refusals; never keystrokes or screens):\n  \
        tern-relay audit [--since 2h|UNIX-SECONDS]\n\
        Both take --state-dir (the relay's); --token / TERN_RELAY_TOKEN stays the owner's."
)]
pub struct Config {
    /// Address for HTTP (TCP) and WebTransport (UDP), both on the same port number.
    /// Port 0 picks a free port. `unix:PATH`: HTTP only (the page, the API, the WebSocket
    /// fallback) on a Unix socket at PATH (0600, in a directory only this user can enter), for
    /// `ssh -L 7480:PATH host`: no port on the server for another user to take.
    #[arg(long, env = "TERN_RELAY_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: ListenAddr,

    /// Access token (random if not given). Prefer the environment variable: argv is visible
    /// to other users in `ps`.
    #[arg(long, env = "TERN_RELAY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// A file holding the access token (one line): read at start, or made with a new random
    /// token (mode 0600) when it does not exist, so the URL stays the same across restarts.
    /// What the systemd units use. A file other users can read is refused.
    #[arg(long, env = "TERN_RELAY_TOKEN_FILE", value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,

    /// Start even with a token under 16 characters (`TERN_RELAY_TOKEN`, `--token-file`), which is
    /// refused otherwise; the relay warns at start. For throwaway tests only.
    #[arg(long, env = "TERN_RELAY_ALLOW_WEAK_TOKEN", value_parser = clap::builder::FalseyValueParser::new())]
    pub allow_weak_token: bool,

    /// Directory for the records of spawned mosh-servers (created 0700, files 0600).
    /// Default: $XDG_STATE_HOME/tern-relay or ~/.local/state/tern-relay.
    #[arg(long, env = "TERN_RELAY_STATE_DIR")]
    pub state_dir: Option<PathBuf>,

    /// Directory where pasted files land (created 0700, files 0600). Default in spawn mode:
    /// $XDG_CACHE_HOME/tern/pastes or ~/.cache/tern/pastes; bridge mode has no paste directory
    /// unless this is given (the shell may be on another machine).
    #[arg(long, env = "TERN_RELAY_PASTE_DIR")]
    pub paste_dir: Option<PathBuf>,

    /// Largest single paste (bytes; suffixes k, M, G or KiB, MiB, GiB).
    #[arg(long, env = "TERN_RELAY_PASTE_MAX_SIZE", default_value = "64MiB")]
    pub paste_max_size: ByteSize,

    /// Largest total of the paste directory.
    #[arg(long, env = "TERN_RELAY_PASTE_QUOTA", default_value = "1GiB")]
    pub paste_quota: ByteSize,

    /// Pastes older than this many hours are removed (checked at start and before each upload).
    #[arg(long, env = "TERN_RELAY_PASTE_MAX_AGE_HOURS", default_value_t = 168)]
    pub paste_max_age_hours: u64,

    /// Seconds an upload stream may send nothing before it is cut (what it sent stays to resume
    /// from) and its share of `--paste-quota`, reserved when it was admitted, is freed.
    #[arg(long, env = "TERN_RELAY_PASTE_IDLE_TIMEOUT", default_value_t = 30)]
    pub paste_idle_timeout_secs: u64,

    /// Bridge mode: the browser names a mosh-server (host, port, key stays in the browser).
    #[arg(long, env = "TERN_RELAY_BRIDGE")]
    pub bridge: bool,

    /// Bridge targets the browser may name, `HOST:PORT` or `HOST:LOW-HIGH` (repeatable).
    #[arg(long = "allow", env = "TERN_RELAY_ALLOW", value_delimiter = ',')]
    pub allow: Vec<AllowRule>,

    /// mosh-server program to start in spawn mode.
    #[arg(long, env = "TERN_RELAY_MOSH_SERVER", default_value = "mosh-server")]
    pub mosh_server_command: PathBuf,

    /// UDP ports mosh-server may bind, `LOW:HIGH`.
    #[arg(long, env = "TERN_RELAY_MOSH_PORTS", default_value = "60001:60999")]
    pub mosh_port_range: PortRange,

    /// Locale assignment passed as `-l` to mosh-server (it needs a UTF-8 locale).
    #[arg(long, env = "TERN_RELAY_MOSH_LOCALE", default_value = "LANG=C.UTF-8")]
    pub mosh_locale: String,

    /// Seconds to wait for `MOSH CONNECT` from mosh-server.
    #[arg(long, env = "TERN_RELAY_SPAWN_TIMEOUT", default_value_t = 10)]
    pub spawn_timeout_secs: u64,

    /// End a spawned session after this many seconds with no page attached (leaving or reloading
    /// the page does not end the shell; `exit` and the page's "End session" do). 0: never. The
    /// default is a week: a laptop closed over a weekend finds its shell.
    #[arg(long = "session-idle-timeout", env = "TERN_RELAY_SESSION_IDLE_TIMEOUT", default_value_t = SESSION_IDLE_TIMEOUT_SECS)]
    pub session_idle_timeout_secs: u64,

    /// Lines of each spawned session's history (every line its programs printed on the main
    /// screen, kept by `tern-relay record` between mosh-server and the shell, for the page's
    /// scrollback and search). 0: no recorder and no history beyond what a page saw.
    #[arg(long, env = "TERN_RELAY_HISTORY_LINES", default_value_t = 100_000)]
    pub history_lines: usize,

    /// Bytes per history file: a file rotates at --history-lines lines or at this size,
    /// whichever comes first, so a session's history takes at most twice this on disk (a line
    /// is at most 64 KiB and its cut mark).
    #[arg(long, env = "TERN_RELAY_HISTORY_BYTES", default_value = "32MiB")]
    pub history_bytes: ByteSize,

    /// Record each spawned session's output (never its keystrokes) as an asciicast v2 file in
    /// the state directory, for `tern-relay export SESSION`; removed with the session. Needs the
    /// recorder (--history-lines above 0).
    #[arg(long, env = "TERN_RELAY_RECORD_SESSIONS")]
    pub record_sessions: bool,

    /// Most bytes of one session's recording: past it the recording stops with a last marker
    /// event (and an audit line).
    #[arg(long, env = "TERN_RELAY_RECORD_BYTES", default_value = "64MiB")]
    pub record_bytes: ByteSize,

    /// Largest file `tern send` offers to the browser, in bytes (the page holds a download in
    /// memory until its SHA-256 is checked and it is saved).
    #[arg(long, env = "TERN_RELAY_SEND_LIMIT", default_value_t = 512 << 20)]
    pub send_limit: u64,

    /// The `tern-relay` executable to run as the recorder (default: this one; a relay embedded in
    /// another program, such as a test, names the real binary).
    #[arg(long, env = "TERN_RELAY_RECORDER", hide = true)]
    pub recorder: Option<PathBuf>,

    /// A host the page may start sessions on over ssh, as `mosh HOST` does (repeatable, or comma
    /// separated): the relay runs `ssh HOST -- mosh-server new` as its own user, with that user's
    /// ssh configuration and agent, never asking for a password or a host key.
    #[arg(
        long = "ssh-host",
        env = "TERN_RELAY_SSH_HOST",
        value_delimiter = ',',
        value_name = "HOST"
    )]
    pub ssh_host: Vec<SshHost>,

    /// A file of `--ssh-host` names, one a line (`#` starts a comment).
    #[arg(long, env = "TERN_RELAY_SSH_HOSTS_FILE", value_name = "FILE")]
    pub ssh_hosts_file: Option<PathBuf>,

    /// An ssh configuration file for those hosts (`ssh -F FILE`) instead of the user's own.
    #[arg(long, env = "TERN_RELAY_SSH_CONFIG", value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,

    /// The ssh client to run.
    #[arg(long, env = "TERN_RELAY_SSH_PROGRAM", default_value = "ssh", hide = true)]
    pub ssh_program: PathBuf,

    /// mosh-server on the ssh hosts.
    #[arg(long, env = "TERN_RELAY_SSH_MOSH_SERVER", default_value = "mosh-server")]
    pub ssh_mosh_server: String,

    /// Where pasted files land on an ssh host (relative: under the remote user's home).
    #[arg(long, env = "TERN_RELAY_SSH_PASTE_DIR", default_value = ".cache/tern/pastes")]
    pub ssh_paste_dir: String,

    /// Where the recorder goes on an ssh host (`bin/`, one directory per build) and writes its
    /// sessions' files (`sessions/`); relative: under the remote user's home. Empty: no recorder
    /// on hosts (their sessions have no history or pictures).
    #[arg(long, env = "TERN_RELAY_SSH_RECORDER_DIR", default_value = ".cache/tern")]
    pub ssh_recorder_dir: String,

    /// Log in anew for every command on an ssh host instead of sharing one connection per host
    /// (ssh's ControlMaster, kept 60 s after its last command).
    #[arg(long, env = "TERN_RELAY_SSH_NO_SHARED_CONNECTIONS")]
    pub ssh_no_shared_connections: bool,

    /// PEM certificate chain for HTTPS and WebTransport (instead of the self-signed one).
    #[arg(long, env = "TERN_RELAY_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key for `--tls-cert`.
    #[arg(long, env = "TERN_RELAY_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Serve the page over HTTPS with the relay's self-signed certificate (browsers will warn).
    #[arg(long, env = "TERN_RELAY_TLS_SELF_SIGNED", conflicts_with = "acme")]
    pub tls_self_signed: bool,

    /// Seconds between checks of `--tls-cert`/`--tls-key` for new contents (a renewal by certbot,
    /// say): a changed, valid pair replaces the certificate for new connections without a restart.
    #[arg(long, env = "TERN_RELAY_TLS_RELOAD_SECS", default_value_t = 10)]
    pub tls_reload_secs: u64,

    /// Obtain and renew a certificate for DOMAIN over ACME (TLS-ALPN-01 on this relay's own TCP
    /// port, which the CA reaches as DOMAIN:443). Repeatable, or comma separated, for more names.
    #[arg(
        long = "acme",
        env = "TERN_RELAY_ACME",
        value_delimiter = ',',
        value_name = "DOMAIN",
        conflicts_with = "tls_cert"
    )]
    pub acme: Vec<String>,

    /// Contact address for the ACME account (the CA's expiry and policy mail).
    #[arg(long, env = "TERN_RELAY_ACME_EMAIL", requires = "acme")]
    pub acme_email: Option<String>,

    /// ACME directory URL (default: Let's Encrypt production).
    #[arg(long, env = "TERN_RELAY_ACME_DIRECTORY", default_value = LETS_ENCRYPT_PRODUCTION)]
    pub acme_directory: String,

    /// PEM file of a CA to trust for the ACME directory's own HTTPS, instead of the system's
    /// roots (a test CA such as pebble's).
    #[arg(long, env = "TERN_RELAY_ACME_CA_ROOT", requires = "acme")]
    pub acme_ca_root: Option<PathBuf>,

    /// URL path prefix the page, `/api/*` and `/ws` are served under (`/tern/` behind a reverse
    /// proxy that forwards that sub-path as it is). WebTransport keeps its own path (UDP port).
    #[arg(long, env = "TERN_RELAY_BASE_PATH", default_value = "/")]
    pub base_path: BasePath,

    /// Another page origin (`https://host[:port]`) allowed to open sessions, besides the page's
    /// own as the browser reached it (repeatable): for a proxy that rewrites `Host`.
    #[arg(long = "allow-origin", env = "TERN_RELAY_ALLOW_ORIGIN", value_delimiter = ',')]
    pub allow_origin: Vec<AllowedOrigin>,

    /// Another host name the page and API may be reached by (repeatable). On loopback the relay
    /// answers only to IP addresses, `localhost` names and its certificate's names (a defence
    /// against DNS rebinding): a reverse proxy that passes its own `Host` (`relay.example`)
    /// needs it. Given anywhere else, it turns the same check on there.
    #[arg(long = "allow-host", env = "TERN_RELAY_ALLOW_HOST", value_delimiter = ',')]
    pub allow_host: Vec<String>,

    /// Browser sessions at once.
    #[arg(long, env = "TERN_RELAY_MAX_SESSIONS", default_value_t = 16)]
    pub max_sessions: usize,

    /// Sessions (WebTransport or WebSocket) between their first packet or upgrade and an
    /// admitted hello, at once: past it a QUIC connection attempt is refused at once
    /// (CONNECTION_REFUSED) and a WebSocket upgrade gets 503 `too_many_handshakes`. Bounds what
    /// half-open handshakes can hold; each is also cut after `--handshake-timeout`.
    #[arg(long, env = "TERN_RELAY_MAX_HANDSHAKES", default_value_t = 64)]
    pub max_handshakes: usize,

    /// Of `--max-handshakes` (and of `--max-authenticated-handshakes`), how many one source may
    /// hold at once (an IPv4 address, an IPv6 /64, the forwarded client behind `--trust-proxy`):
    /// one source cannot take every slot.
    #[arg(long, env = "TERN_RELAY_MAX_HANDSHAKES_PER_SOURCE", default_value_t = 8)]
    pub max_handshakes_per_source: usize,

    /// Handshakes at once of WebSocket upgrades whose request already carried the right token:
    /// their own pool, so a flood of unauthenticated handshakes cannot refuse them.
    #[arg(long, env = "TERN_RELAY_MAX_AUTHENTICATED_HANDSHAKES", default_value_t = 64)]
    pub max_authenticated_handshakes: usize,

    /// A reverse proxy's address (repeatable, or comma separated): for a request from it, the
    /// failed-token back-off and the handshake caps count the client it names in
    /// `X-Forwarded-For` (the last entry no trusted proxy added) or `Forwarded: for=`, not the
    /// proxy. From any other peer those headers are ignored.
    #[arg(
        long = "trust-proxy",
        env = "TERN_RELAY_TRUST_PROXY",
        value_delimiter = ',',
        value_name = "ADDR"
    )]
    pub trust_proxy: Vec<std::net::IpAddr>,

    /// With --trust-proxy: a request from a trusted proxy carrying this header (e.g.
    /// X-Forwarded-User, Tailscale-User-Login, set by a front door that authenticated the
    /// person) is that identity and needs no token (the API and the WebSocket: WebTransport does
    /// not pass a proxy). The same header from any other peer is ignored, logged and audited.
    #[arg(long, env = "TERN_RELAY_IDENTITY_HEADER", value_name = "NAME")]
    pub identity_header: Option<String>,

    /// Seconds a session gets to finish its QUIC handshake and CONNECT, open the control
    /// stream and say hello (each step; a WebSocket from its upgrade to its hello).
    #[arg(long, env = "TERN_RELAY_HANDSHAKE_TIMEOUT", default_value_t = 10)]
    pub handshake_timeout_secs: u64,

    /// TCP connections served at once (the page, `/api/*`, WebSocket upgrades until they are
    /// upgraded). At the cap the relay stops accepting and the kernel queues new connections
    /// until one ends, which `--header-timeout` makes soon.
    #[arg(long, env = "TERN_RELAY_MAX_HTTP_CONNECTIONS", default_value_t = 512)]
    pub max_http_connections: usize,

    /// Seconds a TCP connection gets for its TLS handshake, and for each request's headers
    /// (counted from the end of the previous answer on a kept-alive connection): a slowloris
    /// client is cut off after this, however slowly it keeps sending.
    #[arg(long, env = "TERN_RELAY_HEADER_TIMEOUT", default_value_t = 10)]
    pub header_timeout_secs: u64,

    /// mosh-servers spawned and alive at once.
    #[arg(long, env = "TERN_RELAY_MAX_SPAWNED", default_value_t = 32)]
    pub max_spawned: usize,

    /// Spawn mode: keep no warm spare. By default, while pages use the relay (10 minutes after
    /// the last), one mosh-server is started ahead so that a new session need not wait for it;
    /// it is no session (never listed or counted) until a page takes it.
    #[arg(long, env = "TERN_RELAY_NO_SPARE")]
    pub no_spare: bool,

    /// Spawn mode: keep the warm spare's shell waiting for the page. By default the relay is the
    /// spare's first client, so its shell starts and draws its prompt before a page takes it
    /// (the page continues from there at its own size).
    #[arg(long, env = "TERN_RELAY_NO_SPARE_PRESTART")]
    pub no_spare_prestart: bool,

    /// Browser→server datagrams per second per session (token bucket rate); excess is dropped.
    #[arg(long, env = "TERN_RELAY_DATAGRAM_RATE", default_value_t = 1000)]
    pub datagram_rate: u32,

    /// Token bucket depth for `--datagram-rate`.
    #[arg(long, env = "TERN_RELAY_DATAGRAM_BURST", default_value_t = 500)]
    pub datagram_burst: u32,

    /// Close a browser session after this many seconds without a datagram from the browser
    /// (a mosh client sends at least every 3 s).
    #[arg(long, env = "TERN_RELAY_IDLE_TIMEOUT", default_value_t = 300)]
    pub idle_timeout_secs: u64,

    /// Upper bound for relay→browser datagrams, below the connection's own limit.
    #[arg(long, env = "TERN_RELAY_MAX_DATAGRAM", default_value_t = CHROMIUM_MAX_DATAGRAM)]
    pub max_datagram_size: usize,

    /// Print the URL (which holds the access token) on stdout even when stdout is not a
    /// terminal. Without it, a relay whose stdout is a pipe or a journal (a systemd unit) writes
    /// the URL to `url` in the state directory (mode 0600) and prints only where it is. May be
    /// given twice (`npm start` passes it, and a person may too).
    #[arg(long, overrides_with = "print_url")]
    pub print_url: bool,

    /// Print the URL as a QR code too (on stdout, after it), for a phone or tablet. On by
    /// itself when the URL names an address beyond this machine's loopback.
    #[arg(long, env = "TERN_RELAY_QR", value_parser = clap::builder::FalseyValueParser::new())]
    pub qr: bool,

    /// Rotate the self-signed WebTransport certificate after this many seconds (it is valid
    /// 13 days; Chromium accepts at most 14 for `serverCertificateHashes`).
    #[arg(long, env = "TERN_RELAY_CERT_ROTATE", default_value_t = 11 * 24 * 3600, hide = true)]
    pub cert_rotate_secs: u64,

    /// Publish the next certificate's hash this many seconds before switching to it.
    #[arg(long, env = "TERN_RELAY_CERT_AHEAD", default_value_t = 24 * 3600, hide = true)]
    pub cert_publish_ahead_secs: u64,

    /// Extra arguments for mosh-server after its own `--`: the command to run instead of the
    /// login shell.
    #[arg(last = true)]
    pub mosh_command: Vec<String>,
}

impl Config {
    /// A configuration with every default, listening on `listen` (tests, embedding).
    pub fn with_listen(listen: SocketAddr) -> Self {
        let mut c = Config::parse_from(["tern-relay"]);
        c.listen = ListenAddr::Tcp(listen);
        c
    }

    pub fn spawn_timeout(&self) -> Duration {
        Duration::from_secs(self.spawn_timeout_secs)
    }

    /// `--session-idle-timeout`, `None` for never.
    pub fn session_idle_timeout(&self) -> Option<Duration> {
        (self.session_idle_timeout_secs > 0)
            .then(|| Duration::from_secs(self.session_idle_timeout_secs))
    }

    pub fn tls_reload_interval(&self) -> Duration {
        Duration::from_secs(self.tls_reload_secs.max(1))
    }

    /// Whether the page is served over HTTPS (a certificate of the user's, ACME's, or the
    /// relay's own self-signed one).
    pub fn https(&self) -> bool {
        self.tls_cert.is_some() || self.tls_self_signed || !self.acme.is_empty()
    }

    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_secs(self.handshake_timeout_secs.max(1))
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.max(1))
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_secs)
    }

    /// Where pastes land: the flag, else (spawn mode only) the user's cache directory.
    pub fn paste_dir(&self) -> Option<PathBuf> {
        if let Some(d) = &self.paste_dir {
            return Some(d.clone());
        }
        if self.bridge {
            return None;
        }
        if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
            return Some(PathBuf::from(x).join("tern/pastes"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tern/pastes"))
    }

    pub fn paste_limits(&self) -> PasteLimits {
        PasteLimits {
            max_size: self.paste_max_size.0,
            quota: self.paste_quota.0,
            max_age: Duration::from_secs(self.paste_max_age_hours.saturating_mul(3600)),
            idle_timeout: Duration::from_secs(self.paste_idle_timeout_secs.max(1)),
        }
    }

    pub fn mode(&self) -> Mode {
        if self.bridge { Mode::Bridge } else { Mode::Spawn }
    }

    /// Whether a warm spare mosh-server is kept (spawn mode without `--no-spare`).
    pub fn spare_enabled(&self) -> bool {
        self.mode() == Mode::Spawn && !self.no_spare
    }

    /// The state directory: the flag, else the XDG state home.
    pub fn state_dir(&self) -> Option<PathBuf> {
        if let Some(d) = &self.state_dir {
            return Some(d.clone());
        }
        if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
            return Some(PathBuf::from(x).join("tern-relay"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/tern-relay"))
    }

    /// What browser sessions work with: handshake limits, the datagram bridge's, and where their
    /// datagrams go.
    pub(crate) fn session_settings(&self) -> SessionSettings {
        SessionSettings {
            mode: self.mode(),
            handshake_timeout: self.handshake_timeout(),
            max_sessions: self.max_sessions,
            allow_origin: self.allow_origin.clone(),
            // The certificate's names join at start, once it is loaded (`Relay::new`).
            host_policy: crate::security::HostPolicy::new(
                self.listen.is_local(),
                &self.allow_host,
                &self.acme,
            ),
            max_datagram_size: self.max_datagram_size,
            datagram_rate: self.datagram_rate,
            datagram_burst: self.datagram_burst,
            idle_timeout: self.idle_timeout(),
            front_door: crate::security::FrontDoor {
                trust_proxy: self.trust_proxy.clone(),
                header: self.identity_header.clone().filter(|h| !h.is_empty()),
            },
            targets: TargetSettings {
                allow: self.allow.clone(),
                max_spawned: self.max_spawned,
                spawn: SpawnSpec {
                    program: self.mosh_server_command.clone(),
                    locale: self.mosh_locale.clone(),
                    ports: self.mosh_port_range,
                    command: self.mosh_command.clone(),
                    timeout: self.spawn_timeout(),
                    idle_timeout: self.session_idle_timeout(),
                    recorder: None,
                    shell_env: Vec::new(),
                },
                history_lines: self.history_lines,
                history_bytes: self.history_bytes.0,
                record_bytes: self.record_sessions.then_some(self.record_bytes.0),
                recorder: self.recorder.clone(),
                state_dir: self.state_dir(),
            },
        }
    }

    /// The HTTP side's own settings.
    pub(crate) fn http_settings(&self) -> HttpSettings {
        HttpSettings {
            base_path: self.base_path.clone(),
            header_timeout: self.header_timeout(),
            trust_proxy: self.trust_proxy.clone(),
        }
    }

    /// The `--ssh-*` flags.
    pub fn ssh_settings(&self) -> SshSettings {
        SshSettings {
            hosts: self.ssh_host.clone(),
            hosts_file: self.ssh_hosts_file.clone(),
            program: self.ssh_program.clone(),
            config_file: self.ssh_config.clone(),
            mosh_server: self.ssh_mosh_server.clone(),
            paste_dir: self.ssh_paste_dir.clone(),
            recorder_dir: self.ssh_recorder_dir.clone(),
            share_connections: !self.ssh_no_shared_connections,
        }
    }

    /// The `--acme*` flags; `None` without `--acme`. ACME keeps its account and certificate in
    /// the state directory, so it needs one.
    pub fn acme_settings(&self) -> Option<Result<AcmeSettings, String>> {
        if self.acme.is_empty() {
            return None;
        }
        let Some(state) = self.state_dir() else {
            return Some(Err("--acme keeps its account and certificate in the state directory: \
                             pass --state-dir (no $HOME or $XDG_STATE_HOME)"
                .into()));
        };
        Some(AcmeSettings::new(
            &self.acme,
            self.acme_email.clone(),
            self.acme_directory.clone(),
            self.acme_ca_root.clone(),
            &state,
        ))
    }
}

/// A byte count: a plain number, or with a suffix k/M/G (powers of 1000) or KiB/MiB/GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| format!("bad size {s:?}: want e.g. 64MiB"))?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "k" | "K" | "kB" | "KB" => 1000,
            "M" | "MB" => 1000 * 1000,
            "G" | "GB" => 1000 * 1000 * 1000,
            "KiB" | "Ki" => 1 << 10,
            "MiB" | "Mi" => 1 << 20,
            "GiB" | "Gi" => 1 << 30,
            u => return Err(format!("bad size unit {u:?} in {s:?}")),
        };
        n.checked_mul(mult).map(ByteSize).ok_or_else(|| format!("size {s:?} too large"))
    }
}

/// Where the relay listens: a TCP and UDP port, or (`unix:PATH`) a Unix socket for HTTP only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl ListenAddr {
    /// Whether only this machine reaches the relay directly: a loopback address, or a Unix socket
    /// (reached through a tunnel, whose browser end is `localhost`). The `Host` allow-list is
    /// on for these by default.
    pub fn is_local(&self) -> bool {
        match self {
            ListenAddr::Tcp(a) => a.ip().is_loopback(),
            ListenAddr::Unix(_) => true,
        }
    }
}

impl From<SocketAddr> for ListenAddr {
    fn from(addr: SocketAddr) -> Self {
        ListenAddr::Tcp(addr)
    }
}

impl FromStr for ListenAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix("unix:") {
            Some(path) if path.starts_with('/') => Ok(ListenAddr::Unix(path.into())),
            Some(_) => Err("unix:PATH wants an absolute path".into()),
            None => s
                .parse()
                .map(ListenAddr::Tcp)
                .map_err(|e| format!("{e}: want HOST:PORT or unix:PATH")),
        }
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(a) => write!(f, "{a}"),
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_safe() {
        let c = Config::parse_from(["tern-relay"]);
        assert!(matches!(c.listen, ListenAddr::Tcp(a) if a.ip().is_loopback()));
        let unix = Config::parse_from(["tern-relay", "--listen", "unix:/run/user/1000/tern.sock"]);
        assert_eq!(unix.listen, ListenAddr::Unix("/run/user/1000/tern.sock".into()));
        assert!(Config::try_parse_from(["tern-relay", "--listen", "unix:rel.sock"]).is_err());
        assert_eq!(c.mode(), Mode::Spawn);
        assert_eq!(c.mosh_port_range, PortRange { low: 60001, high: 60999 });
        assert_eq!(c.max_datagram_size, 1211);
        assert_eq!(c.paste_max_size, ByteSize(64 << 20));
        assert!(c.paste_dir().is_some(), "spawn mode has a default paste directory");
        let b = Config::parse_from(["tern-relay", "--bridge"]);
        assert_eq!(b.paste_dir(), None, "bridge mode pastes only with --paste-dir");
        assert!(c.trust_proxy.is_empty(), "no forwarded header is believed unless asked");
        assert_eq!((c.max_handshakes, c.max_authenticated_handshakes), (64, 64));
        assert_eq!(c.max_handshakes_per_source, 8);
    }

    #[test]
    fn trusted_proxies_are_addresses() {
        let c = Config::parse_from([
            "tern-relay",
            "--trust-proxy",
            "127.0.0.1,::1",
            "--trust-proxy",
            "10.0.0.2",
        ]);
        let want: Vec<std::net::IpAddr> =
            ["127.0.0.1", "::1", "10.0.0.2"].iter().map(|a| a.parse().unwrap()).collect();
        assert_eq!(c.trust_proxy, want);
        assert_eq!(c.http_settings().trust_proxy, want);
        assert!(Config::try_parse_from(["tern-relay", "--trust-proxy", "proxy.example"]).is_err());
    }

    #[test]
    fn byte_sizes_parse() {
        assert_eq!("123".parse::<ByteSize>(), Ok(ByteSize(123)));
        assert_eq!("64MiB".parse::<ByteSize>(), Ok(ByteSize(64 << 20)));
        assert_eq!("2k".parse::<ByteSize>(), Ok(ByteSize(2000)));
        assert_eq!("1GiB".parse::<ByteSize>(), Ok(ByteSize(1 << 30)));
        assert!("MiB".parse::<ByteSize>().is_err());
        assert!("5 parsecs".parse::<ByteSize>().is_err());
    }

    #[test]
    fn the_base_path_is_the_root_unless_asked() {
        assert!(Config::parse_from(["tern-relay"]).base_path.is_root());
        let c = Config::parse_from(["tern-relay", "--base-path", "/tern"]);
        assert_eq!(c.base_path.as_str(), "/tern/");
        assert!(Config::try_parse_from(["tern-relay", "--base-path", "/a/../b"]).is_err());
    }

    #[test]
    fn each_part_of_the_relay_gets_its_settings_from_the_flags() {
        let c = Config::try_parse_from([
            "tern-relay",
            "--bridge",
            "--allow",
            "127.0.0.1:60001-60010",
            "--handshake-timeout-secs",
            "0",
            "--idle-timeout-secs",
            "42",
            "--session-idle-timeout",
            "0",
            "--mosh-port-range",
            "61000:61010",
            "--header-timeout-secs",
            "7",
            "--ssh-host",
            "devbox,me@build",
            "--",
            "/bin/sh",
        ])
        .unwrap();
        let s = c.session_settings();
        assert_eq!(s.mode, Mode::Bridge);
        assert_eq!(s.handshake_timeout, Duration::from_secs(1), "at least a second");
        assert_eq!(s.idle_timeout, Duration::from_secs(42));
        assert_eq!((s.datagram_rate, s.datagram_burst), (1000, 500));
        assert!(s.targets.allow[0].allows("127.0.0.1", 60005));
        assert_eq!(s.targets.spawn.ports, PortRange { low: 61000, high: 61010 });
        assert_eq!(s.targets.spawn.idle_timeout, None, "0: never");
        assert_eq!(s.targets.spawn.command, vec!["/bin/sh"]);
        assert_eq!(c.http_settings().header_timeout, Duration::from_secs(7));
        let ssh = c.ssh_settings();
        assert_eq!(ssh.hosts.len(), 2);
        assert_eq!(ssh.mosh_server, "mosh-server");
    }

    #[test]
    fn acme_settings_live_in_the_state_dir() {
        let mut c = Config::with_listen("127.0.0.1:0".parse().unwrap());
        c.state_dir = Some("/s".into());
        assert!(c.acme_settings().is_none());
        c.acme = vec!["Relay.Example.com".into()];
        let s = c.acme_settings().unwrap().unwrap();
        assert_eq!(s.domains, vec!["relay.example.com"]);
        assert_eq!(s.dir, std::path::Path::new("/s/acme"));
        c.acme = vec!["bad domain".into()];
        assert!(c.acme_settings().unwrap().is_err());
    }

    #[test]
    fn tls_options_conflict_where_they_must() {
        assert!(
            Config::try_parse_from(["tern-relay", "--acme", "a.example", "--tls-self-signed"])
                .is_err()
        );
        assert!(
            Config::try_parse_from([
                "tern-relay",
                "--acme",
                "a.example",
                "--tls-cert",
                "c",
                "--tls-key",
                "k"
            ])
            .is_err()
        );
        let c = Config::parse_from(["tern-relay", "--acme", "a.example,b.example"]);
        assert_eq!(c.acme, vec!["a.example", "b.example"]);
        assert_eq!(c.acme_directory, LETS_ENCRYPT_PRODUCTION);
        assert!(c.https());
        assert!(!Config::parse_from(["tern-relay"]).https());
    }

    #[test]
    fn qr_is_off_unless_asked() {
        assert!(!Config::parse_from(["tern-relay"]).qr);
        assert!(Config::parse_from(["tern-relay", "--qr"]).qr);
        // TERN_RELAY_QR=1 (or yes, on, true) turns it on: tests/binary.rs runs the binary so.
    }

    #[test]
    fn trailing_args_go_to_mosh_server() {
        let c = Config::parse_from(["tern-relay", "--", "/bin/sh", "-i"]);
        assert_eq!(c.mosh_command, vec!["/bin/sh", "-i"]);
    }
}
