//! The reference: the stock mosh-client in a detached tmux session, driven by the same scripts as
//! `tern-probe`, and the mosh-server setup both sides share.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tern_native::script::Action;
use tern_native::{MoshServer, MoshServerOptions};

use crate::tools::require_program;

/// A mosh-server for screen comparisons: bash without rc files, prompt `tern$ `, UTF-8, an empty
/// environment and a private HOME, so that every run draws the same screens.
pub fn start_reference_server(home: &Path) -> MoshServer {
    start_reference_server_with(home, &[])
}

/// [`start_reference_server`] with more environment (applied last: it may replace `PS1`), such as
/// [`crate::typing::typing_env`]. mosh-server starts the shell in HOME.
pub fn start_reference_server_with(home: &Path, extra_env: &[(String, String)]) -> MoshServer {
    start_server(home, extra_env, &[])
}

/// [`start_reference_server`] with its shell under `wrapper` (the recorder of spawn mode, say:
/// `[tern-record, --history-dir, DIR, --session, ID, --]`).
pub fn start_wrapped_server(home: &Path, wrapper: &[String]) -> MoshServer {
    start_server(home, &[], wrapper)
}

fn start_server(home: &Path, extra_env: &[(String, String)], wrapper: &[String]) -> MoshServer {
    let mut env: Vec<(String, String)> = vec![
        ("HOME".into(), home.display().to_string()),
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("PS1".into(), "tern$ ".into()),
    ];
    env.extend(extra_env.iter().cloned());
    let options = MoshServerOptions {
        program: require_program("mosh-server"),
        command: wrapper
            .iter()
            .cloned()
            .chain(["/bin/bash".into(), "--norc".into(), "--noprofile".into()])
            .collect(),
        env,
        clear_env: true,
        ..MoshServerOptions::default()
    };
    MoshServer::start(&options).unwrap_or_else(|e| panic!("{e}"))
}

/// A screen as a client showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// One string a row, trailing blanks trimmed.
    pub rows: Vec<String>,
    /// (row, col), 0-based.
    pub cursor: (u16, u16),
    pub title: String,
}

/// The stock mosh-client running in tmux. Dropping it ends tmux and the client.
#[derive(Debug)]
pub struct TmuxMoshClient {
    socket: String,
    session: String,
    client_pid: Option<u32>,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl TmuxMoshClient {
    /// Starts `mosh-client` for `port` with `key` in a tmux window of exactly `cols` x `rows`,
    /// with mosh-client's default prediction (adaptive).
    pub fn start(port: u16, key: &str, cols: u16, rows: u16) -> TmuxMoshClient {
        TmuxMoshClient::start_with(port, key, cols, rows, None)
    }

    /// [`start`](Self::start) with a prediction mode (`never`, `adaptive`, `always`,
    /// `experimental`): mosh-client reads it from `MOSH_PREDICTION_DISPLAY`, which is how `mosh
    /// --predict=MODE` passes it on.
    pub fn start_with(
        port: u16,
        key: &str,
        cols: u16,
        rows: u16,
        predict: Option<&str>,
    ) -> TmuxMoshClient {
        require_program("tmux");
        let mosh_client = require_program("mosh-client");
        let id =
            format!("tern-ref-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let mut client = TmuxMoshClient { socket: id.clone(), session: id, client_pid: None };
        let predict = predict.map(|m| format!("MOSH_PREDICTION_DISPLAY={m} ")).unwrap_or_default();
        let command = format!(
            "env TERM=xterm-256color LANG=C.UTF-8 MOSH_KEY={key} MOSH_TITLE_NOPREFIX=1 {predict}{} 127.0.0.1 {port}",
            mosh_client.display()
        );
        let (c, r) = (cols.to_string(), rows.to_string());
        client.tmux(&["new-session", "-d", "-s", &client.session, "-x", &c, "-y", &r, &command]);
        client.tmux(&["set-option", "-t", &client.session, "status", "off"]);
        // tmux's default pane title is the host name; start empty so only the client sets it.
        client.tmux(&["select-pane", "-t", &client.session, "-T", ""]);
        client.tmux(&["resize-window", "-t", &client.session, "-x", &c, "-y", &r]);
        let pid = client.tmux(&["display", "-p", "-t", &client.session, "#{pane_pid}"]);
        client.client_pid = pid.trim().parse().ok();
        client
    }

    /// The mosh-client process (the pane's process: `env` execs it).
    pub fn client_pid(&self) -> Option<u32> {
        self.client_pid
    }

    /// The tmux server drawing this client's window.
    pub fn tmux_server_pid(&self) -> Option<u32> {
        self.tmux(&["display", "-p", "-t", &self.session, "#{pid}"]).trim().parse().ok()
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs a probe script through tmux: the same actions, typed as the same bytes.
    pub fn run(&self, actions: &[Action]) -> Result<(), String> {
        for action in actions {
            match action {
                Action::Type(bytes) => {
                    // -H sends exact bytes (escapes and invalid UTF-8 included).
                    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                    let mut args = vec!["send-keys", "-t", &self.session, "-H"];
                    args.extend(hex.iter().map(String::as_str));
                    self.tmux(&args);
                }
                Action::Sleep(duration) => std::thread::sleep(*duration),
                Action::Resize { cols, rows } => {
                    let (c, r) = (cols.to_string(), rows.to_string());
                    self.tmux(&["resize-window", "-t", &self.session, "-x", &c, "-y", &r]);
                }
                Action::WaitText { text, timeout } => {
                    let deadline = Instant::now() + *timeout;
                    while !self.capture().rows.iter().any(|row| row.contains(text.as_str())) {
                        if Instant::now() >= deadline {
                            return Err(format!(
                                "mosh-client: {text:?} not on the screen after {timeout:?}:\n{}",
                                self.capture().rows.join("\n")
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        }
        // Let the last answer arrive, as the probe does.
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    }

    /// A tmux control-mode client attached to this session, for typing with precise timestamps.
    pub fn control(&self) -> std::io::Result<TmuxControl> {
        TmuxControl::attach(&self.socket, &self.session, false)
    }

    /// A control-mode client that also keeps the pane's output (`%output` notifications: what
    /// mosh-client wrote to its terminal, with the time each line was read), for timing what it
    /// displays; see [`TmuxControl::output`].
    pub fn control_with_output(&self) -> std::io::Result<TmuxControl> {
        TmuxControl::attach(&self.socket, &self.session, true)
    }

    pub fn capture(&self) -> Capture {
        let text = self.tmux(&["capture-pane", "-p", "-t", &self.session]);
        let rows = text.lines().map(|line| line.trim_end_matches(' ').to_owned()).collect();
        let cursor = self.tmux(&["display", "-p", "-t", &self.session, "#{cursor_y} #{cursor_x}"]);
        let mut numbers = cursor.split_whitespace().map(|n| n.parse().unwrap_or(u16::MAX));
        let cursor = (numbers.next().unwrap_or(u16::MAX), numbers.next().unwrap_or(u16::MAX));
        let title = self
            .tmux(&["display", "-p", "-t", &self.session, "#{pane_title}"])
            .trim_end()
            .to_owned();
        Capture { rows, cursor, title }
    }
}

impl Drop for TmuxMoshClient {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
        // mosh-client lingers for seconds after its tmux session ends: end it by pid.
        if let Some(pid) = self.client_pid {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// A tmux control-mode client (`tmux -C attach`) of a [`TmuxMoshClient`]'s session.
///
/// `tmux send-keys` as a command starts a tmux process per key (a few milliseconds, varying);
/// a control client keeps one connection open, so a key reaches the pane within the tmux server's
/// command latency. Benchmarks type through this and take the write time as the key's time.
#[derive(Debug)]
pub struct TmuxControl {
    child: Child,
    stdin: Option<ChildStdin>,
    session: String,
    /// One item per command block tmux closed: when the reader saw `%end`/`%error`, and the
    /// block's lines.
    done: mpsc::Receiver<(Instant, Vec<String>)>,
    reader: Option<JoinHandle<()>>,
    /// The pane's output, when kept: one entry per `%output` line, unescaped.
    output: Option<Arc<Mutex<Vec<PaneOutput>>>>,
}

/// Bytes the pane's program wrote, as one `%output` notification delivered them.
#[derive(Clone, Debug)]
pub struct PaneOutput {
    /// When the control client read the notification.
    pub at: Instant,
    pub bytes: Vec<u8>,
}

/// The data of a `%output %PANE DATA` line: tmux writes bytes below 0x20 and the backslash as
/// `\ooo` (octal), everything else as is. `None` for any other line.
pub fn parse_output_line(line: &[u8]) -> Option<Vec<u8>> {
    let rest = line.strip_prefix(b"%output %")?;
    let space = rest.iter().position(|&b| b == b' ')?;
    let data = &rest[space + 1..];
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        let octal = data.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (data[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |n, b| n.wrapping_mul(8).wrapping_add(b - b'0')));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

/// How long to wait for tmux to answer a command.
const CONTROL_PATIENCE: Duration = Duration::from_secs(10);

impl TmuxControl {
    fn attach(socket: &str, session: &str, keep_output: bool) -> std::io::Result<TmuxControl> {
        let mut child = Command::new("tmux")
            .args(["-L", socket, "-f", "/dev/null", "-C", "attach-session", "-t", session])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, done) = mpsc::channel();
        let output = keep_output.then(|| Arc::new(Mutex::new(Vec::new())));
        let sink = output.clone();
        // The pane's output arrives as %output notifications: read them all so tmux never blocks
        // on us, keep them if asked, and pass on the ends of command blocks.
        let reader = std::thread::Builder::new().name("tmux-control".into()).spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = Vec::new();
            let mut block: Option<Vec<String>> = None;
            while stdout.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let at = Instant::now();
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                if block.is_none()
                    && let Some(sink) = &sink
                    && let Some(bytes) = parse_output_line(&line)
                {
                    sink.lock().expect("output lock").push(PaneOutput { at, bytes });
                    line.clear();
                    continue;
                }
                let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                line.clear();
                if text.starts_with("%begin ") {
                    block = Some(Vec::new());
                } else if text.starts_with("%end ") || text.starts_with("%error ") {
                    if tx.send((at, block.take().unwrap_or_default())).is_err() {
                        return;
                    }
                } else if let Some(lines) = block.as_mut() {
                    lines.push(text);
                }
            }
        })?;
        let stdin = child.stdin.take();
        let mut control = TmuxControl {
            child,
            stdin,
            session: session.to_owned(),
            done,
            reader: Some(reader),
            output,
        };
        // Skip whatever blocks attaching produced: wait for the answer to a marker command.
        control.write("display-message -p tern-control-ready")?;
        let deadline = Instant::now() + CONTROL_PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (_, lines) = control.done.recv_timeout(left).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "tmux control mode is silent")
            })?;
            if lines.iter().any(|l| l == "tern-control-ready") {
                return Ok(control);
            }
        }
    }

    fn write(&mut self, command: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().expect("stdin open until drop");
        stdin.write_all(format!("{command}\n").as_bytes())?;
        stdin.flush()
    }

    /// Types exact bytes into the pane. Returns when the command was written to tmux and when
    /// tmux reported it done (by then it has written the bytes to the pane's terminal).
    pub fn send_keys(&mut self, bytes: &[u8]) -> std::io::Result<(Instant, Instant)> {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let command = format!("send-keys -t {} -H {}", self.session, hex.join(" "));
        let written = Instant::now();
        self.write(&command)?;
        let (done, _) = self.done.recv_timeout(CONTROL_PATIENCE).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "tmux did not answer send-keys")
        })?;
        Ok((written, done))
    }

    /// The pane's output read so far (taken: each entry is returned once). Empty unless attached
    /// with [`TmuxMoshClient::control_with_output`].
    pub fn output(&self) -> Vec<PaneOutput> {
        self.output
            .as_ref()
            .map(|o| std::mem::take(&mut *o.lock().expect("output lock")))
            .unwrap_or_default()
    }

    /// The round trip of a command that does nothing: tmux's own command latency.
    pub fn ping(&mut self) -> std::io::Result<Duration> {
        let start = Instant::now();
        self.write("display-message -p x")?;
        let (done, _) = self.done.recv_timeout(CONTROL_PATIENCE).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "tmux did not answer")
        })?;
        Ok(done.saturating_duration_since(start))
    }
}

impl Drop for TmuxControl {
    fn drop(&mut self) {
        // End of input detaches a control client.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// A private, empty directory removed on drop (HOME for a reference server).
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("tern-{label}-{}-{id}", std::process::id()));
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
