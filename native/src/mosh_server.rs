//! Starting the real `mosh-server new` and reading its `MOSH CONNECT` line (MOSH-PROTOCOL.md 1).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tern::wire::{Key, KeyError};

/// How to start a mosh-server.
#[derive(Clone, Debug)]
pub struct MoshServerOptions {
    /// The program (default `mosh-server`, found on PATH).
    pub program: PathBuf,
    /// `-p PORT` or `-p LOW:HIGH`; `None` lets mosh-server use its default range.
    pub port: Option<String>,
    /// Locale assignments passed with `-l` (mosh-server refuses to run without a UTF-8 locale).
    pub locales: Vec<String>,
    /// Extra environment for the server and the shell it starts.
    pub env: Vec<(String, String)>,
    /// The command to run instead of the login shell (after `--`).
    pub command: Vec<String>,
    /// Start from an empty environment (plus `env`), for runs that must be reproducible.
    pub clear_env: bool,
}

impl Default for MoshServerOptions {
    fn default() -> Self {
        MoshServerOptions {
            program: PathBuf::from("mosh-server"),
            port: None,
            locales: vec!["LANG=C.UTF-8".to_owned()],
            env: Vec::new(),
            command: Vec::new(),
            clear_env: false,
        }
    }
}

/// Why mosh-server could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error("cannot run {program:?} (is the Debian package `mosh` installed?): {source}")]
    Spawn { program: PathBuf, source: std::io::Error },
    #[error("mosh-server printed no `MOSH CONNECT <port> <key>` line; it said: {output}")]
    NoConnectLine { output: String },
    #[error("mosh-server printed a malformed key: {0}")]
    BadKey(#[from] KeyError),
}

/// A mosh-server that printed `MOSH CONNECT` and detached.
///
/// It runs on its own (daemonized); dropping this value does not stop it. Tests that want it gone
/// call [`MoshServer::kill`].
#[derive(Debug)]
pub struct MoshServer {
    pub port: u16,
    pub key: Key,
    /// The detached server's process id, when it printed one.
    pub pid: Option<u32>,
}

impl MoshServer {
    pub fn start(options: &MoshServerOptions) -> Result<MoshServer, StartError> {
        let mut command = Command::new(&options.program);
        command.arg("new");
        if let Some(port) = &options.port {
            command.args(["-p", port]);
        }
        for locale in &options.locales {
            command.args(["-l", locale]);
        }
        if !options.command.is_empty() {
            command.arg("--").args(&options.command);
        }
        if options.clear_env {
            command.env_clear();
        }
        command.envs(options.env.iter().map(|(k, v)| (k, v)));
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let spawn_error = |source| StartError::Spawn { program: options.program.clone(), source };
        let mut child = command.spawn().map_err(spawn_error)?;
        // The parent prints MOSH CONNECT on stdout and its pid on stderr, then exits; the daemon
        // closes its copies of both, so reading to the end terminates.
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut out) = child.stdout.take() {
            out.read_to_string(&mut stdout).map_err(spawn_error)?;
        }
        if let Some(mut err) = child.stderr.take() {
            err.read_to_string(&mut stderr).map_err(spawn_error)?;
        }
        let _ = child.wait();
        let Some((port, key)) = parse_connect_line(&stdout) else {
            let output = format!("{}{}", stdout.trim(), stderr.trim());
            return Err(StartError::NoConnectLine { output });
        };
        Ok(MoshServer { port, key: key.parse()?, pid: parse_detached_pid(&stderr) })
    }

    /// Whether the server process still exists (and is not a zombie).
    pub fn is_alive(&self) -> bool {
        self.pid.is_some_and(process_alive)
    }

    /// Waits up to `timeout` for the server process to be gone.
    pub fn wait_gone(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.is_alive() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Ends the server (SIGKILL) if it still runs; for tests cleaning up after themselves.
    pub fn kill(&self) {
        if let Some(pid) = self.pid
            && process_alive(pid)
        {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}

/// `MOSH CONNECT <port> <22-char key>` anywhere in the output.
pub fn parse_connect_line(stdout: &str) -> Option<(u16, String)> {
    stdout.lines().find_map(|line| {
        let mut words = line.trim().strip_prefix("MOSH CONNECT ")?.split_whitespace();
        let port = words.next()?.parse().ok()?;
        let key = words.next()?.to_owned();
        Some((port, key))
    })
}

/// `[mosh-server detached, pid = N]` on stderr.
fn parse_detached_pid(stderr: &str) -> Option<u32> {
    let start = stderr.find("detached, pid = ")? + "detached, pid = ".len();
    let digits: String = stderr[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_connect_and_pid_lines() {
        let out = "\r\nMOSH CONNECT 60011 PWSoCIVurTVBGXAj873xNg\n";
        assert_eq!(parse_connect_line(out), Some((60011, "PWSoCIVurTVBGXAj873xNg".to_owned())));
        assert_eq!(parse_connect_line("MOSH CONNECT x y"), None);
        let err = "mosh-server (mosh 1.4.0)\n[mosh-server detached, pid = 15752]\n";
        assert_eq!(parse_detached_pid(err), Some(15752));
    }
}
