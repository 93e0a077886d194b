//! Starting `mosh-server new` for the relay's user: the relay's settings mapped onto tern-native's
//! one mosh-server starter, run off the async threads.
//!
//! The starter (`tern_native::MoshServer::start`) reads the `MOSH CONNECT` line with a timeout,
//! captures stderr for error messages, puts mosh-server in its own process group (a Ctrl-C or
//! SIGTERM aimed at the relay never reaches a user's shell) and validates port and key strictly.

use std::net::Ipv4Addr;
use std::time::Duration;

use tern_native::{MoshServer, MoshServerOptions, ServerPort, StartError};

use crate::config::PortRange;

/// Environment variables the user's shell must not inherit from the relay.
const SECRET_ENV: &[&str] = &["TERN_RELAY_TOKEN"];

/// What to run and how long to wait for it.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: std::path::PathBuf,
    pub locale: String,
    pub ports: PortRange,
    /// Command for mosh-server to run instead of the login shell (after `--`).
    pub command: Vec<String>,
    pub timeout: Duration,
    /// mosh-server ends itself after this long without a new client state (no page attached:
    /// an attached page sends one at least every 3 s). `None`: it runs until its shell exits.
    pub idle_timeout: Option<Duration>,
}

/// A mosh-server that printed its connect line.
#[derive(Clone, PartialEq, Eq)]
pub struct Spawned {
    pub port: u16,
    /// The session key as mosh-server printed it (22 characters). A secret: never logged.
    pub key: String,
    /// pid of the detached daemon, from the parent's stderr line.
    pub pid: Option<u32>,
}

impl std::fmt::Debug for Spawned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawned")
            .field("port", &self.port)
            .field("key", &"<redacted>")
            .field("pid", &self.pid)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// mosh-server did not start, or printed no usable `MOSH CONNECT` line (the message says
    /// which, with its stderr).
    #[error(transparent)]
    Server(#[from] StartError),
    /// The blocking task running the starter panicked or was cancelled (runtime shutting down).
    #[error("the mosh-server start task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The starter's options for `spec`: `-l LOCALE -i 127.0.0.1 -p LOW:HIGH [-- command...]`, without
/// the relay's secrets in the environment.
///
/// `-i 127.0.0.1`: the relay reaches mosh-server over loopback, so its UDP port need not be
/// open to the network (mosh-server falls back to the wildcard address if that bind fails).
pub fn options(spec: &SpawnSpec) -> MoshServerOptions {
    MoshServerOptions {
        program: spec.program.clone(),
        locales: vec![spec.locale.clone()],
        bind: Some(Ipv4Addr::LOCALHOST.into()),
        port: Some(ServerPort::Range { low: spec.ports.low, high: spec.ports.high }),
        command: spec.command.clone(),
        env_remove: SECRET_ENV.iter().map(|name| (*name).to_owned()).collect(),
        // mosh-server's own idle shutdown (MOSH-PROTOCOL.md, environment): it works across relay
        // restarts, and the relay only has to prune records of servers that are gone.
        env: spec
            .idle_timeout
            .map(|t| ("MOSH_SERVER_NETWORK_TMOUT".to_owned(), t.as_secs().max(1).to_string()))
            .into_iter()
            .collect(),
        timeout: spec.timeout,
        ..MoshServerOptions::default()
    }
}

/// The argument list mosh-server gets for `spec`.
pub fn arguments(spec: &SpawnSpec) -> Vec<String> {
    options(spec).arguments()
}

/// Starts mosh-server and waits for its connect line (and for its parent process to exit).
pub async fn spawn_mosh_server(spec: &SpawnSpec) -> Result<Spawned, SpawnError> {
    let options = options(spec);
    let server = tokio::task::spawn_blocking(move || MoshServer::start(&options)).await??;
    Ok(Spawned { port: server.port, key: server.key.to_base64(), pid: server.pid })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(program: &str) -> SpawnSpec {
        SpawnSpec {
            program: program.into(),
            locale: "LANG=C.UTF-8".into(),
            ports: PortRange { low: 60001, high: 60999 },
            command: vec!["/bin/sh".into()],
            timeout: Duration::from_secs(5),
            idle_timeout: Some(Duration::from_secs(600)),
        }
    }

    #[test]
    fn the_idle_timeout_goes_to_mosh_server_as_its_network_timeout() {
        assert_eq!(
            options(&spec("mosh-server")).env,
            [("MOSH_SERVER_NETWORK_TMOUT".to_owned(), "600".to_owned())]
        );
        let never = SpawnSpec { idle_timeout: None, ..spec("mosh-server") };
        assert!(options(&never).env.is_empty());
    }

    #[test]
    fn arguments_follow_mosh_syntax() {
        assert_eq!(
            arguments(&spec("mosh-server")).join(" "),
            "new -l LANG=C.UTF-8 -i 127.0.0.1 -p 60001:60999 -- /bin/sh"
        );
    }

    #[test]
    fn the_relay_token_is_kept_from_the_shell() {
        assert_eq!(options(&spec("mosh-server")).env_remove, ["TERN_RELAY_TOKEN"]);
    }

    #[test]
    fn spawned_debug_redacts_the_key() {
        let spawned = Spawned { port: 60001, key: "PWSoCIVurTVBGXAj873xNg".into(), pid: Some(7) };
        let shown = format!("{spawned:?}");
        assert!(!shown.contains("PWSoCIVurTVBGXAj873xNg"), "{shown}");
        assert!(shown.contains("60001"), "{shown}");
    }

    #[tokio::test]
    async fn a_missing_program_and_a_silent_one_give_clear_errors() {
        let e = spawn_mosh_server(&spec("/nonexistent/mosh-server")).await.unwrap_err();
        assert!(matches!(e, SpawnError::Server(StartError::Start { .. })), "{e}");
        assert!(e.to_string().contains("/nonexistent/mosh-server"), "{e}");
        // `false` ignores its arguments and exits 1 without output.
        let e = spawn_mosh_server(&spec("false")).await.unwrap_err();
        assert!(e.to_string().contains("without a MOSH CONNECT"), "{e}");
    }
}
