//! Starting the real `mosh-server new` and reading its `MOSH CONNECT` line (MOSH-PROTOCOL.md 1).
//!
//! The one starter: the tests, the benchmarks, `tern-probe`'s tests and tern-relay (through
//! `spawn_blocking`) all use it. mosh-server prints `MOSH CONNECT <port> <key>` on stdout, then
//! forks: the parent prints `[mosh-server detached, pid = N]` on stderr and exits, the daemon
//! closes its stdio and serves (1.2). The daemon exits by itself 60 s after start if no client
//! speaks (1.6).
//!
//! The program is started in a process group of its own, so a Ctrl-C or SIGTERM aimed at the
//! caller's group (a relay, a test runner) never reaches a user's shell. Its stdout and stderr are
//! read on two helper threads that report over one channel, which gives the wait for the connect
//! line a deadline without async.

use std::io::{BufRead, BufReader, Read};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tern::wire::{ConnectLineError, Key, parse_connect_line};

/// How long [`MoshServerOptions::default`] waits for `MOSH CONNECT`; mosh-server prints it within
/// milliseconds, so this only matters for a program that hangs.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(10);

/// Cap on captured stderr (the latest bytes are kept): enough for mosh's diagnostics and the pid
/// line, bounded against a chatty program.
const STDERR_CAP: usize = 8 * 1024;

/// Cap on stdout read while looking for the connect line (mosh-server prints one short line).
const STDOUT_CAP: u64 = 64 * 1024;

/// How long to wait for the undetached parent to print the daemon's pid and exit, after it printed
/// the connect line or closed stdout.
const AFTER_CONNECT_WAIT: Duration = Duration::from_secs(2);

/// How long to wait for the rest of stderr after killing a parent that timed out; a grandchild may
/// hold the pipe open, so this is short.
const AFTER_KILL_WAIT: Duration = Duration::from_millis(200);

/// How often to look whether the parent exited.
const EXIT_POLL: Duration = Duration::from_millis(10);

/// The local address mosh-server binds first (it falls back to the wildcard address if that fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Bind {
    /// No option: the wildcard address.
    #[default]
    Any,
    /// `-i IP`.
    Ip(IpAddr),
    /// `-s`: the address the ssh connection that started it arrived on (`$SSH_CONNECTION`), as
    /// `mosh` asks for; only meaningful [`via`](MoshServerOptions::via) ssh.
    SshConnection,
}

/// The port (`-p`) to ask mosh-server for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerPort {
    /// `-p PORT`; 0 lets the operating system choose.
    Exact(u16),
    /// `-p LOW:HIGH`: the first free port in the inclusive range; needs `1 <= low <= high`.
    Range { low: u16, high: u16 },
}

impl std::fmt::Display for ServerPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerPort::Exact(port) => write!(f, "{port}"),
            ServerPort::Range { low, high } => write!(f, "{low}:{high}"),
        }
    }
}

/// How to start a mosh-server.
///
/// The defaults run `mosh-server new -l LANG=C.UTF-8` from PATH with the caller's environment, the
/// login shell, mosh's own port range and any local address.
#[derive(Clone, Debug)]
pub struct MoshServerOptions {
    /// The program (default `mosh-server`, found on PATH).
    pub program: PathBuf,
    /// Locale assignments passed with `-l` (mosh-server refuses to run without a UTF-8 locale).
    pub locales: Vec<String>,
    /// The local address to bind first.
    pub bind: Bind,
    /// `-p`; `None` lets mosh-server use its default range (60001..60999).
    pub port: Option<ServerPort>,
    /// The command to run instead of the login shell (after `--`).
    pub command: Vec<String>,
    /// Start from an empty environment (plus `env`), for runs that must be reproducible.
    pub clear_env: bool,
    /// Variables taken out of the inherited environment (secrets the shell must not see).
    pub env_remove: Vec<String>,
    /// Extra environment for the server and the shell it starts (applied last).
    pub env: Vec<(String, String)>,
    /// How long to wait for the `MOSH CONNECT` line before killing the program.
    pub timeout: Duration,
    /// Start mosh-server through this program and its arguments, on another machine
    /// (`ssh -T HOST --`): mosh-server's command line follows them as one shell-quoted string,
    /// with `env` as assignments in front of it, the way the remote shell reads it (`env`,
    /// `env_remove` and `clear_env` shape the local program's environment too). Empty: run
    /// `program` here.
    pub via: Vec<String>,
}

impl Default for MoshServerOptions {
    fn default() -> Self {
        MoshServerOptions {
            program: PathBuf::from("mosh-server"),
            locales: vec!["LANG=C.UTF-8".to_owned()],
            bind: Bind::Any,
            port: None,
            command: Vec::new(),
            clear_env: false,
            env_remove: Vec::new(),
            env: Vec::new(),
            timeout: DEFAULT_START_TIMEOUT,
            via: Vec::new(),
        }
    }
}

impl MoshServerOptions {
    /// The process to start: arguments, environment, piped stdout and stderr, and a process
    /// group of its own (a Ctrl-C aimed at the caller's group must not reach a user's shell).
    fn command(&self) -> Command {
        let mut command = match self.via.split_first() {
            None => {
                let mut command = Command::new(&self.program);
                command.args(self.arguments());
                command
            }
            Some((launcher, launcher_args)) => {
                let mut command = Command::new(launcher);
                command.args(launcher_args).arg(self.remote_command_line());
                command
            }
        };
        if self.clear_env {
            command.env_clear();
        }
        for name in &self.env_remove {
            command.env_remove(name);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command
    }

    /// The argument list: `new [-l LOCALE]... [-i IP] [-p PORT|LOW:HIGH] [-- command...]`.
    ///
    /// `new` must come first for mosh-server to accept options (MOSH-PROTOCOL.md 1.1).
    pub fn arguments(&self) -> Vec<String> {
        let mut args = vec!["new".to_owned()];
        for locale in &self.locales {
            args.extend(["-l".to_owned(), locale.clone()]);
        }
        match self.bind {
            Bind::Any => {}
            Bind::Ip(ip) => args.extend(["-i".to_owned(), ip.to_string()]),
            Bind::SshConnection => args.push("-s".to_owned()),
        }
        if let Some(port) = self.port {
            args.extend(["-p".to_owned(), port.to_string()]);
        }
        if !self.command.is_empty() {
            args.push("--".to_owned());
            args.extend(self.command.iter().cloned());
        }
        args
    }

    /// The line a remote shell runs for [`via`](Self::via): `NAME=VALUE... PROGRAM ARGS...`, every
    /// word quoted for a POSIX shell.
    pub fn remote_command_line(&self) -> String {
        let assignments = self.env.iter().map(|(k, v)| format!("{k}={}", shell_quote(v)));
        let program = std::iter::once(shell_quote(&self.program.to_string_lossy()));
        let args = self.arguments().into_iter().map(|a| shell_quote(&a));
        assignments.chain(program).chain(args).collect::<Vec<_>>().join(" ")
    }
}

/// `word` as a POSIX shell reads it back unchanged: as is when it is made of characters no shell
/// treats specially, else in single quotes (a `'` inside written `'\''`).
pub fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Why mosh-server could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error("cannot start {} (is the Debian package `mosh` installed?): {source}", program.display())]
    Start {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("bad mosh-server port range {low}:{high}: need 1 <= LOW <= HIGH")]
    InvalidPorts { low: u16, high: u16 },
    #[error("mosh-server printed no MOSH CONNECT line within {timeout:?}; stderr: {stderr}")]
    Timeout { timeout: Duration, stderr: String },
    #[error("mosh-server exited ({status}) without a MOSH CONNECT line; stderr: {stderr}")]
    NoConnectLine { status: String, stderr: String },
    #[error("mosh-server printed a malformed MOSH CONNECT line ({reason}); stderr: {stderr}")]
    BadConnectLine { reason: ConnectLineError, stderr: String },
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

/// What the helper threads report.
enum Event {
    /// One stdout line, newline included.
    Line(Vec<u8>),
    StdoutClosed,
    /// More stderr was captured.
    Stderr,
    StderrClosed,
}

/// What the wait for the connect line ended with.
enum Outcome {
    /// A `MOSH CONNECT` line, parsed.
    Line(Result<(u16, Key), ConnectLineError>),
    StdoutClosed,
    TimedOut,
}

impl MoshServer {
    /// Starts mosh-server and waits up to `options.timeout` for its connect line, then briefly for
    /// the parent to print the daemon's pid and exit. (One function over 60 lines: the three
    /// outcomes share the child, its pipes and the captured stderr.)
    ///
    /// On a timeout only the undetached parent is killed: without a connect line there is no
    /// daemon yet. This blocks the calling thread; async callers use `spawn_blocking`.
    pub fn start(options: &MoshServerOptions) -> Result<MoshServer, StartError> {
        if let Some(ServerPort::Range { low, high }) = options.port
            && (low == 0 || low > high)
        {
            return Err(StartError::InvalidPorts { low, high });
        }
        let mut command = options.command();
        let deadline = Instant::now() + options.timeout;
        let mut child = command
            .spawn()
            .map_err(|source| StartError::Start { program: options.program.clone(), source })?;
        let (events, rx) = mpsc::channel();
        let captured = Arc::new(Mutex::new(Vec::new()));
        // Both were set to `Stdio::piped()` above, so the handles are there.
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let stdout_events = events.clone();
        std::thread::spawn(move || read_stdout(stdout, &stdout_events));
        let sink = Arc::clone(&captured);
        std::thread::spawn(move || read_stderr(stderr, &sink, &events));
        let stderr_text = || tail(&String::from_utf8_lossy(&lock(&captured)));

        match wait_for_connect_line(&rx, deadline) {
            Outcome::TimedOut => {
                let _ = child.kill();
                let _ = child.wait();
                drain_stderr(&rx, Instant::now() + AFTER_KILL_WAIT, || false);
                Err(StartError::Timeout { timeout: options.timeout, stderr: stderr_text() })
            }
            Outcome::StdoutClosed => {
                // Its status and stderr say why; mosh-server exits 1 right after its diagnostic.
                let wait_until = Instant::now() + AFTER_CONNECT_WAIT;
                let status = match wait_exit(&mut child, wait_until) {
                    Some(status) => status.to_string(),
                    None => {
                        // Of no use without a connect line, and ours to stop: it never detached.
                        let _ = child.kill();
                        let _ = child.wait();
                        "still running; killed".to_owned()
                    }
                };
                drain_stderr(&rx, wait_until, || false);
                Err(StartError::NoConnectLine { status, stderr: stderr_text() })
            }
            Outcome::Line(parsed) => {
                // The parent prints the daemon's pid on stderr, then exits. A program that keeps
                // stderr open only costs the pid.
                let wait_until = Instant::now() + AFTER_CONNECT_WAIT;
                let has_pid = || parse_detached_pid(&String::from_utf8_lossy(&lock(&captured)));
                drain_stderr(&rx, wait_until, || has_pid().is_some());
                if wait_exit(&mut child, wait_until).is_none() {
                    // Still running (not mosh-server as we know it): reap it whenever it ends.
                    std::thread::spawn(move || child.wait());
                }
                let pid = has_pid();
                match parsed {
                    Ok((port, key)) => Ok(MoshServer { port, key, pid }),
                    Err(reason) => {
                        // Nobody can use a daemon whose key we could not read.
                        if let Some(pid) = pid {
                            kill_pid(pid);
                        }
                        Err(StartError::BadConnectLine { reason, stderr: stderr_text() })
                    }
                }
            }
        }
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
        if let Some(pid) = self.pid {
            kill_pid(pid);
        }
    }
}

/// Reads stdout events until a connect line (or a malformed one), stdout's end, or `deadline`.
fn wait_for_connect_line(rx: &Receiver<Event>, deadline: Instant) -> Outcome {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Outcome::TimedOut;
        }
        match rx.recv_timeout(left) {
            Ok(Event::Line(line)) => match parse_connect_line(&String::from_utf8_lossy(&line)) {
                // mosh-server prints a blank line first when stdin is a tty; others may chat.
                Err(ConnectLineError::NotConnectLine) => {}
                parsed => return Outcome::Line(parsed),
            },
            Ok(Event::Stderr | Event::StderrClosed) => {}
            // Disconnected: both readers ended, so stdout's end was already reported.
            Ok(Event::StdoutClosed) | Err(RecvTimeoutError::Disconnected) => {
                return Outcome::StdoutClosed;
            }
            Err(RecvTimeoutError::Timeout) => return Outcome::TimedOut,
        }
    }
}

/// Waits until stderr closes, `done()` holds, or `deadline` passes.
fn drain_stderr(rx: &Receiver<Event>, deadline: Instant, done: impl Fn() -> bool) {
    while !done() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Event::StderrClosed) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Polls for the child's exit until `deadline`.
fn wait_exit(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(EXIT_POLL),
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Sends stdout line by line, up to [`STDOUT_CAP`] bytes. Stops when the starter stopped
/// listening, which closes the pipe: a late writer gets EPIPE (mosh ignores SIGPIPE) instead of
/// blocking on a full pipe.
fn read_stdout(stdout: ChildStdout, events: &Sender<Event>) {
    let mut reader = BufReader::new(stdout.take(STDOUT_CAP));
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if events.send(Event::Line(line)).is_err() {
                    return;
                }
            }
        }
    }
    let _ = events.send(Event::StdoutClosed);
}

/// Captures the last [`STDERR_CAP`] bytes of stderr and drains the rest, so the program never
/// blocks on a full pipe while the starter waits; stops when the starter stopped listening.
fn read_stderr(mut stderr: ChildStderr, captured: &Mutex<Vec<u8>>, events: &Sender<Event>) {
    let mut chunk = [0u8; 1024];
    loop {
        match stderr.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                {
                    let mut buf = lock(captured);
                    buf.extend_from_slice(&chunk[..n]);
                    let excess = buf.len().saturating_sub(STDERR_CAP);
                    buf.drain(..excess);
                }
                if events.send(Event::Stderr).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = events.send(Event::StderrClosed);
}

/// A poisoned lock only means a reader thread panicked; the bytes it captured are still good.
fn lock(captured: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    captured.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The last 500 characters of stderr, on one line, for an error message.
fn tail(text: &str) -> String {
    let text = text.trim();
    let start = text.char_indices().rev().nth(499).map_or(0, |(i, _)| i);
    let one_line = text[start..].replace('\n', " | ");
    if one_line.is_empty() { "(empty)".to_owned() } else { one_line }
}

/// Parses `MOSH CONNECT <port> <key>` strictly: a port from 1 to 65535 in digits, a key that is a
/// valid mosh key (22 base64 characters, MOSH-PROTOCOL.md 1.3), nothing after it. Surrounding
/// Finds `N` in the parent's `[mosh-server detached, pid = N]` on stderr.
fn parse_detached_pid(stderr: &str) -> Option<u32> {
    const MARK: &str = "detached, pid = ";
    let start = stderr.find(MARK)? + MARK.len();
    let digits: String = stderr[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn kill_pid(pid: u32) {
    if process_alive(pid) {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
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
    fn parses_the_detached_pid() {
        let stderr = "\nmosh-server (mosh 1.4.0) [build mosh 1.4.0]\nCopyright...\n\n[mosh-server detached, pid = 15752]\n";
        assert_eq!(parse_detached_pid(stderr), Some(15752));
        assert_eq!(parse_detached_pid("[mosh-server detached, pid = ]"), None);
        assert_eq!(parse_detached_pid("nothing"), None);
    }

    #[test]
    fn stderr_tails_are_short_and_on_one_line() {
        assert_eq!(tail("  \n"), "(empty)");
        assert_eq!(tail("a\nb\n"), "a | b");
        let long = "é".repeat(2000);
        assert_eq!(tail(&long).chars().count(), 500);
    }

    #[test]
    fn arguments_follow_mosh_syntax() {
        let options = MoshServerOptions {
            bind: Bind::Ip([127, 0, 0, 1].into()),
            port: Some(ServerPort::Range { low: 60001, high: 60999 }),
            command: vec!["/bin/sh".into(), "-l".into()],
            ..MoshServerOptions::default()
        };
        assert_eq!(
            options.arguments().join(" "),
            "new -l LANG=C.UTF-8 -i 127.0.0.1 -p 60001:60999 -- /bin/sh -l"
        );
        let options = MoshServerOptions {
            locales: vec![],
            port: Some(ServerPort::Exact(0)),
            ..MoshServerOptions::default()
        };
        assert_eq!(options.arguments().join(" "), "new -p 0");
        assert_eq!(MoshServerOptions::default().arguments().join(" "), "new -l LANG=C.UTF-8");
    }

    #[test]
    fn a_remote_command_line_quotes_every_word_for_the_remote_shell() {
        let options = MoshServerOptions {
            bind: Bind::SshConnection,
            command: vec!["sh".into(), "-c".into(), "echo 'hi' $HOME".into()],
            env: vec![("MOSH_SERVER_NETWORK_TMOUT".into(), "600".into())],
            via: vec!["ssh".into(), "-T".into(), "devbox".into(), "--".into()],
            ..MoshServerOptions::default()
        };
        assert_eq!(
            options.remote_command_line(),
            r#"MOSH_SERVER_NETWORK_TMOUT=600 mosh-server new -l LANG=C.UTF-8 -s -- sh -c 'echo '\''hi'\'' $HOME'"#
        );
        let cmd = options.command();
        assert_eq!(cmd.get_program(), "ssh");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[..3], ["-T", "devbox", "--"]);
        assert_eq!(args[3], options.remote_command_line());
        assert_eq!(shell_quote(""), "''");
    }
}
