//! Sessions on other hosts, started over ssh the way `mosh user@host` starts them.
//!
//! The relay runs `ssh HOST -- mosh-server new -s ...` as its own user, with that user's ssh
//! configuration, keys and agent, never asking anything (`BatchMode=yes`): a host that wants a
//! password or a host-key confirmation fails at once with a message that says which. It reads
//! `MOSH CONNECT` through tern-native's one starter, and then bridges to the host's UDP port like
//! any spawned session (it knows the key, so the relay's copy, resume and nonce bounds work as in
//! spawn mode). Pasted files for such a session are copied to the host over ssh, into its own
//! paste directory, named and checked by their SHA-256 as on the relay.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tern_native::{Bind, MoshServer, StartError, shell_quote};
use tokio::io::AsyncWriteExt;

use super::{SpawnSpec, Spawned};
pub use crate::state::RemoteRecorder;

/// How long ssh may take to connect before it gives up (`ConnectTimeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a check on the host (`kill -0`, `ssh -G`) may take in all.
const QUICK_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a paste may take to reach the host, beyond the connection (64 MiB at ~1 MB/s).
const COPY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a host's shared connection outlives its last command (`ControlPersist`): the next
/// start, check or paste within it skips ssh's login (~240 ms on the loopback test host).
const CONNECTION_KEPT: Duration = Duration::from_secs(60);
/// The longest control socket path the relay uses: a Unix socket's name holds about 107 bytes,
/// and ssh adds a suffix of its own to the name while it sets the socket up.
const MAX_CONTROL_PATH: usize = 90;

/// A host the page may start sessions on: a name ssh understands (`devbox`, `me@devbox`, an
/// address), never an option (`-oProxyCommand=...`) or anything a shell or ssh would read more
/// into.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SshHost(String);

impl FromStr for SshHost {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let ok = |c: char| c.is_ascii_alphanumeric() || "._-@:%".contains(c);
        if s.is_empty() || s.len() > 255 || s.starts_with('-') || !s.chars().all(ok) {
            return Err(format!(
                "bad ssh host {s:?}: want a name from ssh's configuration or [user@]host (letters, \
                 digits, . _ - @ : %; not starting with -)"
            ));
        }
        Ok(SshHost(s.to_owned()))
    }
}

impl SshHost {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SshHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the `--ssh-*` flags asked for.
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// `--ssh-host`.
    pub hosts: Vec<SshHost>,
    /// `--ssh-hosts-file`: more hosts, one a line (`#` starts a comment).
    pub hosts_file: Option<PathBuf>,
    /// `--ssh-program`.
    pub program: PathBuf,
    /// `--ssh-config`.
    pub config_file: Option<PathBuf>,
    /// `--ssh-mosh-server`.
    pub mosh_server: String,
    /// `--ssh-paste-dir`.
    pub paste_dir: String,
    /// `--ssh-recorder-dir` (empty: no recorder on hosts).
    pub recorder_dir: String,
    /// Whether a host's commands share one connection (off: `--ssh-no-shared-connections`).
    pub share_connections: bool,
}

/// The hosts of `--ssh-host` and `--ssh-hosts-file`, and how to reach them.
#[derive(Debug, Clone)]
pub struct SshHosts {
    hosts: Vec<SshHost>,
    /// The ssh client (`--ssh-program`, default `ssh` from PATH).
    program: PathBuf,
    /// `-F FILE` (`--ssh-config`); the relay user's own configuration when `None`.
    config_file: Option<PathBuf>,
    /// mosh-server on the host (`--ssh-mosh-server`).
    mosh_server: String,
    /// Where pastes land on the host; relative paths are under the remote user's home.
    paste_dir: String,
    /// Where the recorder and its files go on the host (empty: nowhere).
    recorder_dir: String,
    /// Where each host's shared connection has its socket (`None`: every command logs in anew).
    connections: Option<Arc<SharedConnections>>,
}

/// One ssh connection per host that its commands share (ssh's `ControlMaster`): a session's start
/// on a host runs three commands there (the recorder's check, mosh-server, the follow channel),
/// and each would otherwise be a login of its own. The sockets live in a private directory of the
/// relay's (mode 0700, a new random name: no other user can plant or reach one), named by the
/// host's place in the relay's list rather than by where it connects, so two names for one
/// address (another user, another host key alias) never share a connection that only one of them
/// verified. The connections are ended with the relay.
#[derive(Debug)]
struct SharedConnections {
    dir: tempfile::TempDir,
    program: PathBuf,
}

impl SharedConnections {
    fn new(program: &Path) -> Result<SharedConnections, String> {
        use std::os::unix::fs::PermissionsExt;
        // Made 0700 from the start (tempfile's default follows the umask: 0755 here).
        let dir = tempfile::Builder::new()
            .prefix("tern-ssh-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|e| format!("cannot make a directory for shared ssh connections: {e}"))?;
        // ssh's %C is 40 hex digits, and the host's index a few more.
        let longest = dir.path().as_os_str().len() + "/h0000-".len() + 40;
        if longest > MAX_CONTROL_PATH {
            return Err(format!(
                "shared ssh connections are off: {} is too long a directory for their sockets",
                dir.path().display()
            ));
        }
        Ok(SharedConnections { dir, program: program.to_owned() })
    }

    /// The `-o` options that make host `index`'s commands share its connection.
    fn options(&self, index: usize) -> [String; 3] {
        [
            "ControlMaster=auto".to_owned(),
            format!("ControlPath={}/h{index}-%C", self.dir.path().display()),
            format!("ControlPersist={}", CONNECTION_KEPT.as_secs()),
        ]
    }
}

impl Drop for SharedConnections {
    /// Ends every shared connection now rather than when `ControlPersist` runs out (each `-O
    /// exit` returns at once).
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else { return };
        for socket in entries.flatten() {
            let _ = std::process::Command::new(&self.program)
                .arg("-S")
                .arg(socket.path())
                .args(["-O", "exit", "tern-relay-ending"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A mosh-server started on a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSpawned {
    pub spawned: Spawned,
    /// The address the relay sends the session's datagrams to (where ssh connected).
    pub ip: IpAddr,
}

impl SshHosts {
    /// The configured hosts; `Ok(None)` when there are none. A hosts file has one name a line
    /// (`#` starts a comment).
    pub fn new(c: SshSettings) -> Result<Option<SshHosts>, String> {
        let mut hosts = c.hosts;
        if let Some(file) = &c.hosts_file {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("--ssh-hosts-file {}: {e}", file.display()))?;
            for line in text.lines() {
                let name = line.split('#').next().unwrap_or("").trim();
                if !name.is_empty() {
                    hosts.push(name.parse().map_err(|e| format!("{}: {e}", file.display()))?);
                }
            }
        }
        hosts.sort();
        hosts.dedup();
        if hosts.is_empty() {
            return Ok(None);
        }
        let connections = if c.share_connections {
            SharedConnections::new(&c.program)
                .inspect_err(|why| tracing::warn!("{why}"))
                .ok()
                .map(Arc::new)
        } else {
            None
        };
        Ok(Some(SshHosts {
            hosts,
            program: c.program,
            config_file: c.config_file,
            mosh_server: c.mosh_server,
            paste_dir: c.paste_dir,
            recorder_dir: c.recorder_dir,
            connections,
        }))
    }

    pub fn names(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.0.clone()).collect()
    }

    /// The configured host called `name` (the page may only name those).
    pub fn find(&self, name: &str) -> Option<&SshHost> {
        self.hosts.iter().find(|h| h.0 == name)
    }

    /// `-F FILE` when `--ssh-config` names one.
    fn config_args(&self) -> Vec<String> {
        match &self.config_file {
            Some(file) => vec!["-F".to_owned(), file.to_string_lossy().into_owned()],
            None => Vec::new(),
        }
    }

    /// `ssh [-F FILE] -T -o BatchMode=yes ... HOST --`: what every command on the host runs
    /// through. No terminal (`-T`), no questions, no forwarding, a bounded connect, keepalives
    /// (so a connection whose network went away ends rather than hangs: it may be the shared one
    /// a long-lived channel rides on), and the host's shared connection.
    fn ssh(&self, host: &SshHost) -> Vec<String> {
        let mut argv = vec![self.program.to_string_lossy().into_owned()];
        argv.extend(self.config_args());
        argv.push("-T".to_owned());
        let shared = match (&self.connections, self.hosts.iter().position(|h| h == host)) {
            (Some(connections), Some(index)) => connections.options(index).to_vec(),
            _ => Vec::new(),
        };
        for option in [
            "BatchMode=yes".to_owned(),
            format!("ConnectTimeout={}", CONNECT_TIMEOUT.as_secs()),
            "ForwardAgent=no".to_owned(),
            "ForwardX11=no".to_owned(),
            "ClearAllForwardings=yes".to_owned(),
            "ServerAliveInterval=15".to_owned(),
            "ServerAliveCountMax=3".to_owned(),
        ]
        .into_iter()
        .chain(shared)
        {
            argv.extend(["-o".to_owned(), option]);
        }
        argv.extend([host.0.clone(), "--".to_owned()]);
        argv
    }

    /// Runs `remote` (a shell command line) on the host with `stdin`; its stdout, or the person's
    /// message for what went wrong.
    async fn run(
        &self,
        host: &SshHost,
        remote: &str,
        stdin: Option<&Path>,
        timeout: Duration,
    ) -> Result<String, String> {
        let argv = self.ssh(host);
        let mut command = tokio::process::Command::new(&argv[0]);
        command.args(&argv[1..]).arg(remote).kill_on_drop(true);
        command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
        if let (Some(path), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let path = path.to_path_buf();
            // The host may answer without reading (it has the file already): a closed pipe is
            // not an error here; the exit status and stdout say how it went.
            tokio::spawn(async move {
                if let Ok(mut file) = tokio::fs::File::open(&path).await {
                    let _ = tokio::io::copy(&mut file, &mut pipe).await;
                }
                let _ = pipe.shutdown().await;
            });
        }
        let output = tokio::time::timeout(timeout, child.wait_with_output())
            .await
            .map_err(|_| format!("{host} did not answer over ssh within {timeout:?}"))?
            .map_err(|e| format!("ssh to {host}: {e}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            Err(explain(host, &output.status.to_string(), &stderr))
        }
    }

    /// The address ssh connects to for `host`, after its configuration (`ssh -G`: `HostName`,
    /// aliases), resolved: where mosh's UDP goes, as `mosh` itself picks it.
    pub async fn address(&self, host: &SshHost) -> Result<IpAddr, String> {
        let mut argv = self.config_args();
        argv.extend(["-G".to_owned(), host.0.clone()]);
        let output = tokio::time::timeout(
            QUICK_TIMEOUT,
            tokio::process::Command::new(&self.program).args(&argv).kill_on_drop(true).output(),
        )
        .await
        .map_err(|_| format!("ssh -G {host} did not finish"))?
        .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("hostname "))
            .map(str::trim)
            .ok_or_else(|| format!("ssh's configuration gives no address for {host}"))?;
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(ip);
        }
        let found = tokio::time::timeout(QUICK_TIMEOUT, tokio::net::lookup_host((name, 0))).await;
        match found {
            Ok(Ok(mut addrs)) => addrs
                .next()
                .map(|a| a.ip())
                .ok_or_else(|| format!("{host} cannot be reached: {name} has no address")),
            _ => Err(format!("{host} cannot be reached: cannot resolve {name}")),
        }
    }

    /// Starts mosh-server on `host` with `spec`'s locale, ports, idle timeout and recorder (the
    /// login shell; the relay's own `-- COMMAND` is for its own machine).
    pub async fn start(&self, host: &SshHost, spec: &SpawnSpec) -> Result<RemoteSpawned, String> {
        let ip = self.address(host).await?;
        let mut options = super::options(&SpawnSpec {
            program: self.mosh_server.clone().into(),
            command: Vec::new(),
            ..spec.clone()
        });
        options.bind = Bind::SshConnection;
        options.via = self.ssh(host);
        options.timeout = spec.timeout + CONNECT_TIMEOUT;
        let started = tokio::task::spawn_blocking(move || MoshServer::start(&options))
            .await
            .map_err(|e| format!("the ssh start task failed: {e}"))?;
        match started {
            Ok(server) => Ok(RemoteSpawned {
                spawned: Spawned {
                    port: server.port,
                    key: server.key.to_base64(),
                    pid: server.pid,
                },
                ip,
            }),
            Err(StartError::NoConnectLine { status, stderr }) => {
                Err(explain(host, &status, &stderr))
            }
            Err(StartError::Timeout { timeout, .. }) => Err(format!(
                "{host} did not start mosh-server within {timeout:?} (ssh still connecting?)"
            )),
            Err(e) => Err(format!("starting mosh-server on {host}: {e}")),
        }
    }

    /// The recorder on `host` for a new session, copied there if needed: this relay's
    /// executable `local` when the host is of its machine (`uname`), once per build, checked by
    /// `sha256sum` there on every start. `Err`: why the session goes without it (the page is
    /// told on `ready`).
    pub async fn prepare_recorder(
        &self,
        host: &SshHost,
        local: Result<&(PathBuf, String), &String>,
    ) -> Result<RemoteRecorder, String> {
        if self.recorder_dir.is_empty() {
            return Err(
                "the relay runs no recorder on ssh hosts (--ssh-recorder-dir is empty)".into()
            );
        }
        let (path, hash) =
            local.map_err(|e| format!("the relay cannot read its own executable ({e})"))?;
        let script = |mode: &str| {
            [
                "sh",
                "-c",
                super::ssh_recorder::INSTALL_RECORDER,
                "tern-install",
                &self.recorder_dir,
                hash,
                "tern-relay",
                mode,
            ]
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
        };
        // First only asked (its machine, the copy's hash): the executable is sent only when the
        // host can run it and lacks it.
        let mut out = self
            .run(host, &script("check"), None, QUICK_TIMEOUT)
            .await
            .map_err(|e| format!("the relay could not check for the recorder there ({e})"))?;
        let machine = out.lines().find_map(|l| l.strip_prefix("machine ")).unwrap_or("");
        if let Some(why) = super::ssh_recorder::machine_mismatch(
            Ok(machine),
            std::env::consts::OS,
            std::env::consts::ARCH,
        ) {
            return Err(why);
        }
        if out.lines().any(|l| l == "need") {
            out = self
                .run(host, &script("install"), Some(path), QUICK_TIMEOUT + COPY_TIMEOUT)
                .await
                .map_err(|e| format!("copying the recorder there failed: {e}"))?;
        }
        let field = |name: &str| out.lines().find_map(|l| l.strip_prefix(name)).map(str::to_owned);
        match (field("have "), field("sessions ")) {
            (Some(program), Some(dir)) => Ok(RemoteRecorder { program, dir }),
            _ => Err("it did not confirm the recorder's copy".to_owned()),
        }
    }

    /// `ssh HOST -- remote` for a long-lived channel (the recorder's files coming back).
    pub fn channel(&self, host: &SshHost, remote: &str) -> tokio::process::Command {
        let argv = self.ssh(host);
        let mut command = tokio::process::Command::new(&argv[0]);
        command.args(&argv[1..]).arg(remote).kill_on_drop(true);
        // Nothing reads its stderr for as long as it runs: a pipe that filled would stop it.
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        command
    }

    /// Whether mosh-server `pid` still runs on `host`: `None` when the host cannot tell now
    /// (unreachable: the session may well be alive, as mosh sessions outlive their network).
    pub async fn is_running(&self, host: &SshHost, pid: u32) -> Option<bool> {
        let remote = format!("if kill -0 {pid} 2>/dev/null; then echo running; else echo gone; fi");
        match self.run(host, &remote, None, QUICK_TIMEOUT).await {
            Ok(out) if out.trim() == "running" => Some(true),
            Ok(out) if out.trim() == "gone" => Some(false),
            _ => None,
        }
    }

    /// Copies the published paste `local` (named `<sha256>.<ext>`) to the host's paste directory,
    /// unless a file of that hash is there already; its path on the host.
    pub async fn deliver(&self, host: &SshHost, local: &Path) -> Result<String, String> {
        let name = local
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| "a paste without a name".to_owned())?;
        let hash = name.split('.').next().unwrap_or_default().to_owned();
        let remote = [
            "sh".to_owned(),
            "-c".to_owned(),
            RECEIVE_PASTE.to_owned(),
            "tern-paste".to_owned(),
            self.paste_dir.clone(),
            name,
            hash,
        ]
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ");
        let out = self.run(host, &remote, Some(local), QUICK_TIMEOUT + COPY_TIMEOUT).await?;
        out.lines()
            .find_map(|l| l.strip_prefix("have "))
            .map(str::to_owned)
            .ok_or_else(|| format!("{host} did not confirm the paste"))
    }
}

/// The host's side of a paste, run by `sh -c` with the paste directory, the file's name and its
/// SHA-256: refuses a directory others may write to (a shared `/tmp`, sticky or not: anyone
/// there could plant the part file's or the paste's name as a symlink to a file of the person's
/// and have the paste written through it), keeps a file of that hash that is there already (and
/// reads nothing), else takes stdin into a part file `mktemp` makes (a new name, created 0600,
/// never an existing one), checks its hash and renames it into place. Prints `have PATH`.
/// POSIX sh and coreutils only (the host has nothing of Tern's).
const RECEIVE_PASTE: &str = r#"set -e
umask 077
case $1 in /*) dir=$1 ;; *) dir=$HOME/$1 ;; esac
mkdir -p "$dir"
case $(ls -ldL "$dir" | cut -c6,9) in
  *w*) echo "the paste directory $dir is writable by other users: refused (chmod go-w it, or pick another --ssh-paste-dir)" >&2; exit 4 ;;
esac
file=$dir/$2
sum() { sha256sum < "$1" | cut -c1-64; }
if [ -f "$file" ] && [ ! -L "$file" ] && [ "$(sum "$file")" = "$3" ]; then
  touch "$file"
else
  part=$(mktemp "$dir/.tern-paste.XXXXXX")
  trap 'rm -f "$part"' EXIT
  cat > "$part"
  if [ "$(sum "$part")" != "$3" ]; then echo "the paste arrived damaged" >&2; exit 3; fi
  mv -f "$part" "$file"
  trap - EXIT
fi
echo "have $file"
"#;

/// What the person is told when ssh or the host refused: which of the usual causes it is, and
/// what to do, with ssh's own last line.
pub fn explain(host: &SshHost, status: &str, stderr: &str) -> String {
    let said = stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('@'))
        .unwrap_or("")
        .to_owned();
    let said_any = |needles: &[&str]| needles.iter().any(|n| stderr.contains(n));
    // The start's stderr may be only its tail: ssh's closing lines are matched too.
    if said_any(&["REMOTE HOST IDENTIFICATION HAS CHANGED", "has changed and you have requested"]) {
        format!(
            "The host key of {host} has changed since the relay's user last connected (a \
             reinstalled host, or someone in between). The relay did not connect. Check the key, \
             then update that user's known_hosts (ssh-keygen -R)."
        )
    } else if said_any(&[
        "Host key verification failed",
        "No ED25519 host key",
        "host key is known",
    ]) {
        format!(
            "The host key of {host} is not known to the relay's user, and the relay never accepts \
             one unasked. Run `ssh {host}` once as that user to check and accept it."
        )
    } else if said_any(&["Permission denied", "Too many authentication failures"]) {
        format!(
            "{host} wants a password or a key the relay's user does not have. The relay logs in \
             without asking (BatchMode): give that user a key for {host} (its ssh-agent or \
             ~/.ssh) and put the public key in the host's authorized_keys. ssh said: {said}"
        )
    } else if said_any(&[
        "Connection refused",
        "Connection timed out",
        "No route to host",
        "Network is unreachable",
        "Could not resolve hostname",
        "Name or service not known",
        "Connection closed by",
        "Connection reset",
    ]) {
        format!("{host} cannot be reached over ssh: {said}")
    } else if said_any(&["mosh-server: command not found", "mosh-server: not found"]) {
        format!("mosh-server is not installed on {host} (Debian: apt install mosh).")
    } else {
        format!(
            "ssh to {host} failed ({status}): {}",
            if said.is_empty() { "no message" } else { &said }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> SshHost {
        s.parse().unwrap()
    }

    /// Runs the host's paste script here with `sh`, as ssh would run it on the host: `dir`,
    /// the paste `bytes` on stdin; its exit success, stdout and stderr.
    fn receive_paste_locally(dir: &Path, bytes: &[u8]) -> (bool, String, String) {
        let hash = crate::spawn::sha256_hex(bytes);
        let name = format!("{hash}.txt");
        let args = [dir.as_os_str(), name.as_ref(), hash.as_ref()];
        crate::spawn::run_host_script(RECEIVE_PASTE, "tern-paste", &args, bytes)
    }

    #[test]
    fn the_paste_script_writes_through_mktemp_and_refuses_a_shared_directory() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let private = home.path().join("pastes");
        let (ok, out, err) = receive_paste_locally(&private, b"hello paste");
        assert!(ok, "{err}");
        let path = out.trim().strip_prefix("have ").expect("`have PATH`").to_owned();
        assert_eq!(std::fs::read(&path).unwrap(), b"hello paste");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the paste is private: {mode:o}");
        let left: Vec<_> = std::fs::read_dir(&private).unwrap().collect();
        assert_eq!(left.len(), 1, "no part file left behind");
        assert!(RECEIVE_PASTE.contains("mktemp \"$dir/"), "the part file's name is mktemp's");
        assert!(!RECEIVE_PASTE.contains(".part.$$"), "no predictable part name");

        // A shared directory, as /tmp is (sticky, world-writable): another user there could have
        // planted the paste's name as a symlink to ~/.bashrc. Refused before anything is written.
        for mode in [0o1777, 0o777, 0o770] {
            let shared = home.path().join(format!("shared-{mode:o}"));
            std::fs::create_dir(&shared).unwrap();
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).unwrap();
            let victim = home.path().join("bashrc");
            std::fs::write(&victim, "mine\n").unwrap();
            let hash_name = {
                use sha2::Digest;
                let h: String =
                    sha2::Sha256::digest(b"evil").iter().map(|b| format!("{b:02x}")).collect();
                format!("{h}.txt")
            };
            std::os::unix::fs::symlink(&victim, shared.join(hash_name)).unwrap();
            let (ok, _, err) = receive_paste_locally(&shared, b"evil");
            assert!(!ok, "{mode:o}: a directory others can write is refused");
            assert!(err.contains("writable by other users"), "{mode:o}: {err}");
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n", "{mode:o}");
        }
    }

    #[test]
    fn host_names_are_names_not_options_or_shell() {
        for ok in ["devbox", "me@devbox.example", "10.0.0.7", "fe80::1%eth0", "a_b-c"] {
            assert!(ok.parse::<SshHost>().is_ok(), "{ok}");
        }
        for bad in ["", "-oProxyCommand=x", "a b", "a;b", "$(x)", "a'b", "host\n"] {
            assert!(bad.parse::<SshHost>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_usual_ssh_failure_gets_its_own_explanation() {
        let h = host("devbox");
        let changed = "@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n\
                       @@@@@@@\nHost key verification failed.\n";
        assert!(explain(&h, "exit status: 255", changed).contains("has changed"));
        let changed_tail = "Host key for devbox has changed and you have requested strict checking.\n\
                            Host key verification failed.\n";
        assert!(explain(&h, "exit status: 255", changed_tail).contains("has changed since"));
        let unknown = "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested \
                       strict checking.\nHost key verification failed.\n";
        assert!(explain(&h, "exit status: 255", unknown).contains("not known"));
        let password = "root@127.0.0.1: Permission denied (password).\n";
        let m = explain(&h, "exit status: 255", password);
        assert!(
            m.contains("password") && m.contains("BatchMode") && m.contains("(password)"),
            "{m}"
        );
        let refused = "ssh: connect to host 127.0.0.1 port 9: Connection refused\n";
        let m = explain(&h, "exit status: 255", refused);
        assert!(m.contains("cannot be reached") && m.contains("port 9"), "{m}");
        let missing = "bash: line 1: mosh-server: command not found\n";
        assert!(explain(&h, "exit status: 127", missing).contains("not installed"));
        assert!(explain(&h, "exit status: 1", "").contains("no message"));
    }

    #[test]
    fn commands_on_the_host_never_ask_and_name_the_host_after_the_options() {
        let hosts = SshHosts {
            hosts: vec![host("devbox")],
            program: "ssh".into(),
            config_file: Some("/etc/tern/ssh_config".into()),
            mosh_server: "mosh-server".into(),
            paste_dir: ".cache/tern/pastes".into(),
            recorder_dir: ".cache/tern".into(),
            connections: None,
        };
        let argv = hosts.ssh(&host("devbox")).join(" ");
        assert!(argv.starts_with("ssh -F /etc/tern/ssh_config -T -o BatchMode=yes"), "{argv}");
        assert!(argv.ends_with(" devbox --"), "{argv}");
        assert!(!argv.contains("Control"), "{argv}");
        assert_eq!(hosts.find("devbox"), Some(&host("devbox")));
        assert_eq!(hosts.find("other"), None);
    }

    #[test]
    fn each_host_name_shares_a_connection_of_its_own_in_a_private_directory() {
        use std::os::unix::fs::PermissionsExt;
        // Two names for one address (as the test fixture's `good` and `wrong-key`): a connection
        // one of them verified must never carry the other's commands.
        let settings = SshSettings {
            hosts: vec![host("devbox"), host("me@devbox")],
            hosts_file: None,
            program: "ssh".into(),
            config_file: None,
            mosh_server: "mosh-server".into(),
            paste_dir: ".cache/tern/pastes".into(),
            recorder_dir: ".cache/tern".into(),
            share_connections: true,
        };
        let hosts = SshHosts::new(settings.clone()).unwrap().unwrap();
        let path_of = |h: &str| {
            let argv = hosts.ssh(&host(h));
            assert!(argv.contains(&"ControlMaster=auto".to_owned()), "{argv:?}");
            assert!(argv.contains(&"ControlPersist=60".to_owned()), "{argv:?}");
            assert!(argv.ends_with(&[h.to_owned(), "--".to_owned()]), "{argv:?}");
            argv.iter().find_map(|a| a.strip_prefix("ControlPath=")).unwrap().to_owned()
        };
        let (one, two) = (path_of("devbox"), path_of("me@devbox"));
        assert_ne!(one, two);
        let dir = Path::new(&one).parent().unwrap().to_owned();
        assert_eq!(Path::new(&two).parent().unwrap(), dir);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "no other user reaches the sockets");
        assert!(one.len() - 2 + 40 <= MAX_CONTROL_PATH, "{one}: %C is 40 digits");
        drop(hosts);
        assert!(!dir.exists(), "the directory goes with the relay");
        // Off with the flag: every command logs in anew.
        let off = SshHosts::new(SshSettings { share_connections: false, ..settings }).unwrap();
        assert!(!off.unwrap().ssh(&host("devbox")).join(" ").contains("Control"));
    }
}
