//! Starting `mosh-server new` for the relay's user and reading its `MOSH CONNECT` line.
//!
//! mosh-server prints `MOSH CONNECT <port> <key>` on stdout, then forks: the parent prints
//! `[mosh-server detached, pid = N]` on stderr and exits, the daemon child closes its stdio and
//! serves (MOSH-PROTOCOL.md 1.2). It exits by itself 60 s after start if no client speaks (1.6).
//! The child is started in its own process group so a Ctrl-C or SIGTERM aimed at the relay's
//! group never reaches a user's shell.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

use crate::config::PortRange;

/// What to run and how long to wait for it.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: PathBuf,
    pub locale: String,
    pub ports: PortRange,
    /// Command for mosh-server to run instead of the login shell (after `--`).
    pub command: Vec<String>,
    pub timeout: Duration,
}

/// A mosh-server that printed its connect line.
#[derive(Clone, PartialEq, Eq)]
pub struct Spawned {
    pub port: u16,
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
pub enum SpawnError {
    #[error("cannot start {program}: {source}")]
    Start {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("mosh-server printed no MOSH CONNECT line within {timeout:?}; stderr: {stderr}")]
    Timeout { timeout: Duration, stderr: String },
    #[error("mosh-server exited ({status}) without a MOSH CONNECT line; stderr: {stderr}")]
    NoConnectLine { status: String, stderr: String },
}

/// Cap on captured stderr: enough for mosh's diagnostics, bounded against a chatty program.
const STDERR_CAP: usize = 8 * 1024;

/// How long to wait for the undetached parent to exit after it printed the connect line.
const AFTER_CONNECT_WAIT: Duration = Duration::from_secs(2);

/// Builds the argument list: `new -l LOCALE -i 127.0.0.1 -p LOW:HIGH [-- command...]`.
///
/// `-i 127.0.0.1`: the relay reaches mosh-server over loopback, so its UDP port need not be
/// open to the network (mosh-server falls back to the wildcard address if that bind fails).
pub fn arguments(spec: &SpawnSpec) -> Vec<String> {
    let mut args = vec![
        "new".to_string(),
        "-l".into(),
        spec.locale.clone(),
        "-i".into(),
        "127.0.0.1".into(),
        "-p".into(),
        spec.ports.to_string(),
    ];
    if !spec.command.is_empty() {
        args.push("--".into());
        args.extend(spec.command.iter().cloned());
    }
    args
}

/// Starts mosh-server and waits for its connect line (and for its parent process to exit).
pub async fn spawn_mosh_server(spec: &SpawnSpec) -> Result<Spawned, SpawnError> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(arguments(spec))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // The shell must not inherit the relay's secret.
        .env_remove("TERN_RELAY_TOKEN")
        .process_group(0)
        .kill_on_drop(false);
    let mut child = cmd.spawn().map_err(|source| SpawnError::Start {
        program: spec.program.display().to_string(),
        source,
    })?;
    let stdout = child.stdout.take().expect("stdout was piped");
    let mut stderr = child.stderr.take().expect("stderr was piped");

    // Shared so that a timeout can still report what mosh-server said so far.
    let captured = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&captured);
    let stderr_done = tokio::spawn(async move {
        let mut chunk = [0u8; 1024];
        loop {
            match stderr.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut buf = sink.lock().unwrap_or_else(|e| e.into_inner());
                    let room = STDERR_CAP.saturating_sub(buf.len());
                    buf.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        }
    });
    let stderr_text = || {
        String::from_utf8_lossy(&captured.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    };

    let read_connect = async {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(found) = parse_connect_line(&line) {
                return Some(found);
            }
        }
        None
    };

    let found = match tokio::time::timeout(spec.timeout, read_connect).await {
        Ok(found) => found,
        Err(_elapsed) => {
            // Only the undetached parent is ours to stop; no connect line means no daemon yet.
            let _ = child.start_kill();
            return Err(SpawnError::Timeout {
                timeout: spec.timeout,
                stderr: tail(&stderr_text()),
            });
        }
    };
    // The parent exits right after forking the daemon and prints the daemon's pid on stderr.
    // Wait for both briefly; a program that keeps stderr open only costs us the pid.
    let status = tokio::time::timeout(AFTER_CONNECT_WAIT, child.wait()).await;
    let _ = tokio::time::timeout(AFTER_CONNECT_WAIT, stderr_done).await;
    let stderr = stderr_text();
    match found {
        Some((port, key)) => Ok(Spawned { port, key, pid: parse_detached_pid(&stderr) }),
        None => Err(SpawnError::NoConnectLine {
            status: match status {
                Ok(Ok(s)) => s.to_string(),
                Ok(Err(e)) => format!("wait failed: {e}"),
                Err(_) => "still running".into(),
            },
            stderr: tail(&stderr),
        }),
    }
}

/// The last few hundred bytes of stderr, on one line, for an error message.
fn tail(s: &str) -> String {
    let s = s.trim();
    let start = s.char_indices().rev().nth(500).map(|(i, _)| i).unwrap_or(0);
    let t = s[start..].replace('\n', " | ");
    if t.is_empty() { "(empty)".into() } else { t }
}

/// Parses `MOSH CONNECT <port> <key>`; the key is exactly 22 base64 characters (MOSH-PROTOCOL.md 1.3).
pub fn parse_connect_line(line: &str) -> Option<(u16, String)> {
    let rest = line.trim().strip_prefix("MOSH CONNECT ")?;
    let mut words = rest.split_whitespace();
    let port: u16 = words.next()?.parse().ok()?;
    let key = words.next()?;
    let key_ok =
        key.len() == 22 && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'/' || b == b'+');
    if port == 0 || !key_ok || words.next().is_some() {
        return None;
    }
    Some((port, key.to_string()))
}

/// Finds `pid = N` in mosh-server's `[mosh-server detached, pid = N]`.
pub fn parse_detached_pid(stderr: &str) -> Option<u32> {
    let at = stderr.find("detached, pid = ")?;
    let digits: String =
        stderr[at + "detached, pid = ".len()..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_line_parses() {
        assert_eq!(
            parse_connect_line("MOSH CONNECT 60011 PWSoCIVurTVBGXAj873xNg"),
            Some((60011, "PWSoCIVurTVBGXAj873xNg".into()))
        );
        assert_eq!(
            parse_connect_line("\r\nMOSH CONNECT 60011 PWSoCIVurTVBGXAj873xNg\r"),
            Some((60011, "PWSoCIVurTVBGXAj873xNg".into()))
        );
        assert_eq!(parse_connect_line("MOSH CONNECT 0 PWSoCIVurTVBGXAj873xNg"), None);
        assert_eq!(parse_connect_line("MOSH CONNECT 60011 short"), None);
        assert_eq!(parse_connect_line("MOSH CONNECT 70000 PWSoCIVurTVBGXAj873xNg"), None);
        assert_eq!(parse_connect_line("hello"), None);
    }

    #[test]
    fn detached_pid_parses() {
        let e = "\nmosh-server (mosh 1.4.0) [build mosh 1.4.0]\nCopyright...\n\n[mosh-server detached, pid = 12345]\n";
        assert_eq!(parse_detached_pid(e), Some(12345));
        assert_eq!(parse_detached_pid("nothing"), None);
    }

    #[test]
    fn arguments_follow_mosh_syntax() {
        let spec = SpawnSpec {
            program: "mosh-server".into(),
            locale: "LANG=C.UTF-8".into(),
            ports: PortRange { low: 60001, high: 60999 },
            command: vec!["/bin/sh".into()],
            timeout: Duration::from_secs(1),
        };
        assert_eq!(
            arguments(&spec).join(" "),
            "new -l LANG=C.UTF-8 -i 127.0.0.1 -p 60001:60999 -- /bin/sh"
        );
    }

    #[tokio::test]
    async fn a_missing_program_and_a_silent_one_give_clear_errors() {
        let mut spec = SpawnSpec {
            program: "/nonexistent/mosh-server".into(),
            locale: "LANG=C.UTF-8".into(),
            ports: PortRange { low: 60001, high: 60999 },
            command: vec![],
            timeout: Duration::from_secs(5),
        };
        let e = spawn_mosh_server(&spec).await.unwrap_err();
        assert!(matches!(e, SpawnError::Start { .. }), "{e}");
        // `false` ignores its arguments and exits 1 without output.
        spec.program = "false".into();
        let e = spawn_mosh_server(&spec).await.unwrap_err();
        assert!(e.to_string().contains("without a MOSH CONNECT"), "{e}");
    }
}
