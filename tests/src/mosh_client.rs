//! The reference: the stock mosh-client in a detached tmux session, driven by the same scripts as
//! `tern-probe`, and the mosh-server setup both sides share.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tern::native::script::Action;
use tern::native::{MoshServer, MoshServerOptions};

use crate::tools::require_program;

/// A mosh-server for screen comparisons: bash without rc files, prompt `tern$ `, UTF-8, an empty
/// environment and a private HOME, so that every run draws the same screens.
pub fn start_reference_server(home: &Path) -> MoshServer {
    let options = MoshServerOptions {
        program: require_program("mosh-server"),
        command: vec!["/bin/bash".into(), "--norc".into(), "--noprofile".into()],
        env: vec![
            ("HOME".into(), home.display().to_string()),
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("PS1".into(), "tern$ ".into()),
        ],
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
    /// Starts `mosh-client` for `port` with `key` in a tmux window of exactly `cols` x `rows`.
    pub fn start(port: u16, key: &str, cols: u16, rows: u16) -> TmuxMoshClient {
        require_program("tmux");
        let mosh_client = require_program("mosh-client");
        let id =
            format!("tern-ref-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let mut client = TmuxMoshClient { socket: id.clone(), session: id, client_pid: None };
        let command = format!(
            "env TERM=xterm-256color LANG=C.UTF-8 MOSH_KEY={key} MOSH_TITLE_NOPREFIX=1 {} 127.0.0.1 {port}",
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
