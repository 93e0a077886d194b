//! Starting `mosh-server new` for the relay's user: the relay's settings mapped onto tern-native's
//! one mosh-server starter, run off the async threads.
//!
//! The starter (`tern_native::MoshServer::start`) reads the `MOSH CONNECT` line with a timeout,
//! captures stderr for error messages, puts mosh-server in its own process group (a Ctrl-C or
//! SIGTERM aimed at the relay never reaches a user's shell) and validates port and key strictly.
//! [`ssh`] starts it on other hosts the same way.

pub mod ssh;
pub mod ssh_follow;
pub mod ssh_recorder;

use std::net::Ipv4Addr;
use std::str::FromStr;
use std::time::Duration;

use tern_native::{Bind, MoshServer, MoshServerOptions, ServerPort, StartError};

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
    /// Run the shell under `tern-relay record`, keeping the session's history.
    pub recorder: Option<Recorder>,
    /// More environment for the shell (how `tern send` finds its relay).
    pub shell_env: Vec<(String, String)>,
}

/// An inclusive UDP port range, written `LOW:HIGH` (mosh's `-p` syntax) or `LOW-HIGH`: the ports
/// a spawned mosh-server may bind (`--mosh-port-range`), or a bridge target's (`--allow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub low: u16,
    pub high: u16,
}

impl PortRange {
    pub fn contains(&self, port: u16) -> bool {
        (self.low..=self.high).contains(&port)
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.low, self.high)
    }
}

impl FromStr for PortRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (low, high) = match s.split_once([':', '-']) {
            Some((l, h)) => (l, h),
            None => (s, s),
        };
        let parse = |p: &str| p.trim().parse::<u16>().map_err(|e| format!("bad port {p:?}: {e}"));
        let (low, high) = (parse(low)?, parse(high)?);
        if low == 0 || low > high {
            return Err(format!("bad port range {s:?}: need 1 <= LOW <= HIGH"));
        }
        Ok(PortRange { low, high })
    }
}

/// Where `tern-relay record` keeps a session's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorder {
    /// This relay's own executable (it is also the recorder).
    pub program: std::path::PathBuf,
    pub history_dir: std::path::PathBuf,
    pub session: String,
    pub max_lines: usize,
    /// Bytes per history file.
    pub max_bytes: u64,
    /// `--record-sessions`: the recording's cap in bytes (`None`: not recorded).
    pub cast_bytes: Option<u64>,
}

impl Recorder {
    /// mosh-server's command: the recorder, then `command` (the login shell when empty).
    fn wrap(&self, command: &[String]) -> Vec<String> {
        let mut argv = vec![
            self.program.to_string_lossy().into_owned(),
            "record".into(),
            "--history-dir".into(),
            self.history_dir.to_string_lossy().into_owned(),
            "--session".into(),
            self.session.clone(),
            "--history-lines".into(),
            self.max_lines.to_string(),
            "--history-bytes".into(),
            self.max_bytes.to_string(),
        ];
        if let Some(cap) = self.cast_bytes {
            argv.extend(["--cast-bytes".into(), cap.to_string()]);
        }
        if command.is_empty() {
            argv.push("--login".into());
        } else {
            argv.push("--".into());
            argv.extend(command.iter().cloned());
        }
        argv
    }
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
        bind: Bind::Ip(Ipv4Addr::LOCALHOST.into()),
        port: Some(ServerPort::Range { low: spec.ports.low, high: spec.ports.high }),
        command: match &spec.recorder {
            Some(r) => r.wrap(&spec.command),
            None => spec.command.clone(),
        },
        env_remove: SECRET_ENV.iter().map(|name| (*name).to_owned()).collect(),
        // mosh-server's own idle shutdown (MOSH-PROTOCOL.md, environment): it works across relay
        // restarts, and the relay only has to prune records of servers that are gone.
        env: spec
            .idle_timeout
            .map(|t| ("MOSH_SERVER_NETWORK_TMOUT".to_owned(), t.as_secs().max(1).to_string()))
            .into_iter()
            .chain(spec.shell_env.iter().cloned())
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

/// Where `program` would be run from: a name without `/` is looked up on `path` (the relay's
/// `PATH`, as `Command` does), anything else is taken as a path. `Err` says where it looked, for
/// the message that names the fix.
pub fn find_program(
    program: &std::path::Path,
    path: Option<&std::ffi::OsStr>,
) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_os_str().is_empty() {
        return Err("an empty name".into());
    }
    if program.to_string_lossy().contains('/') {
        return match std::fs::metadata(program) {
            Ok(_) if runnable(program) => Ok(program.to_path_buf()),
            Ok(_) => Err(format!("`{}`: not an executable file", program.display())),
            Err(e) => Err(format!("`{}`: {e}", program.display())),
        };
    }
    let dirs = path.unwrap_or_default();
    std::env::split_paths(dirs)
        // An empty PATH entry is the working directory, as for the shell.
        .map(|dir| if dir.as_os_str().is_empty() { ".".into() } else { dir })
        .map(|dir| dir.join(program))
        .find(|candidate| runnable(candidate))
        .ok_or_else(|| format!("`{}` on PATH={}", program.display(), dirs.to_string_lossy()))
}

/// Tests: runs a host script here with `sh -c`, as ssh runs it on the host (`name` is its `$0`),
/// `stdin` offered on its standard input (a script may refuse without reading it); its exit
/// success, stdout and stderr.
#[cfg(test)]
pub(crate) fn run_host_script(
    script: &str,
    name: &str,
    args: &[&std::ffi::OsStr],
    stdin: &[u8],
) -> (bool, String, String) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("sh")
        .args(["-c", script, name])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// Tests: the SHA-256 of `bytes` in hex, as `sha256sum` prints it.
#[cfg(test)]
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
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
            recorder: None,
            shell_env: Vec::new(),
        }
    }

    #[test]
    fn port_ranges_parse_in_both_spellings() {
        assert_eq!("60001:60999".parse(), Ok(PortRange { low: 60001, high: 60999 }));
        assert_eq!("5-6".parse(), Ok(PortRange { low: 5, high: 6 }));
        assert_eq!("7".parse(), Ok(PortRange { low: 7, high: 7 }));
        assert_eq!(PortRange { low: 5, high: 6 }.to_string(), "5:6");
        for bad in ["0:5", "9:3", "a:b", "1:70000", ""] {
            assert!(bad.parse::<PortRange>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_recorded_session_runs_its_command_or_the_login_shell_under_the_recorder() {
        let recorder = Recorder {
            program: "/usr/bin/tern-relay".into(),
            history_dir: "/state/sessions".into(),
            session: "ab12cd34".into(),
            max_lines: 500,
            max_bytes: 1 << 20,
            cast_bytes: None,
        };
        let with_command = SpawnSpec { recorder: Some(recorder.clone()), ..spec("mosh-server") };
        assert_eq!(
            arguments(&with_command).join(" "),
            "new -l LANG=C.UTF-8 -i 127.0.0.1 -p 60001:60999 -- /usr/bin/tern-relay record \
             --history-dir /state/sessions --session ab12cd34 --history-lines 500 \
             --history-bytes 1048576 -- /bin/sh"
        );
        let login = SpawnSpec { command: Vec::new(), ..with_command };
        assert!(
            arguments(&login)
                .join(" ")
                .ends_with("--history-lines 500 --history-bytes 1048576 --login")
        );
        let recorded = SpawnSpec {
            recorder: Some(Recorder { cast_bytes: Some(4096), ..recorder }),
            ..spec("mosh-server")
        };
        assert!(
            arguments(&recorded)
                .join(" ")
                .ends_with("--history-bytes 1048576 --cast-bytes 4096 -- /bin/sh")
        );
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

    #[test]
    fn the_program_is_found_on_path_or_at_its_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fake-mosh-server");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
        assert_eq!(find_program("fake-mosh-server".as_ref(), Some(&path)), Ok(exe.clone()));
        assert_eq!(find_program(&exe, None), Ok(exe.clone()));
        let e = find_program("no-such-mosh-server".as_ref(), Some(&path)).unwrap_err();
        assert!(e.contains("`no-such-mosh-server` on PATH=/nonexistent:"), "{e}");
        assert!(find_program("fake-mosh-server".as_ref(), None).is_err(), "no PATH, no program");
        let e = find_program("/nonexistent/mosh-server".as_ref(), Some(&path)).unwrap_err();
        assert!(e.contains("/nonexistent/mosh-server"), "{e}");
        // Not executable: found, but not runnable (root included: execve wants an x bit).
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(find_program(&exe, None).unwrap_err().contains("not an executable file"));
        assert!(find_program("fake-mosh-server".as_ref(), Some(&path)).is_err());
        assert!(find_program(dir.path(), None).is_err(), "a directory is not a program");
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
