//! `tern-relay record` is invisible (issue 14): the same keys typed into `bash -i` directly and
//! into `bash -i` under the recorder give the same screen, in a real terminal (tmux): resizes
//! (also one while the recorder starts), Ctrl-C, job control, a program reading the terminal's
//! size, a program asking the terminal (cursor position report), the alternate screen, vi, TERM,
//! the tty and its settings (iutf8: a program in cooked mode erases a whole UTF-8 character).
//! Each workload runs twice, in a fresh tmux server each time, with the same keys and the same
//! waits (for what the screen shows or for the foreground job, not for a fixed time); the
//! screens (with colours and tmux's scrollback), the cursor and the terminal's modes must be
//! equal, and a failure shows both. The recorded run's history must hold what scrolled off the
//! main screen, and nothing of the alternate screen.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const SESSION: &str = "0123456789abcdef";
/// How long one wait for the screen may take before the test fails.
const WAIT: Duration = Duration::from_secs(10);

/// A tmux server of its own (its socket in a temporary directory), with one session `t` of one
/// pane; killed when dropped (also when the test panics), its socket then removed.
struct Tmux {
    socket: std::path::PathBuf,
    /// What the run is, for messages.
    label: &'static str,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start(label: &'static str, command: &[OsString]) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let tmux = Tmux { socket: dir.path().join("tmux"), label, _dir: dir };
        let mut args: Vec<OsString> = ["-f", "/dev/null", "new-session", "-d", "-s", "t"]
            .into_iter()
            .chain(["-x", "80", "-y", "24", "-e", "PS1=$ ", "-e", "HISTFILE=", "--"])
            .map(OsString::from)
            .collect();
        args.extend(command.iter().cloned());
        tmux.tmux(&args);
        tmux
    }

    /// Runs a tmux command on this server; its output.
    fn tmux<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            // The test may itself run inside tmux: this is a server of its own.
            .env_remove("TMUX")
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "{}: tmux {:?}: {}",
            self.label,
            args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The visible screen as text, without attributes.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    /// Everything tmux has of the pane: its scrollback and the screen, with colours and
    /// attributes (`-e`).
    fn capture(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-e", "-S", "-", "-t", "t"])
    }

    /// The cursor and the modes a program can set on the terminal.
    fn state(&self) -> String {
        self.tmux(&[
            "display-message",
            "-p",
            "-t",
            "t",
            "cursor #{cursor_x},#{cursor_y} size #{pane_width}x#{pane_height} \
             alternate #{alternate_on} cursor_flag #{cursor_flag} insert #{insert_flag} \
             keypad_cursor #{keypad_cursor_flag} keypad #{keypad_flag} wrap #{wrap_flag} \
             mouse #{mouse_any_flag} scroll_region #{scroll_region_upper},#{scroll_region_lower}",
        ])
    }

    /// Waits until `ready`; after `WAIT`, the error says what did not come.
    fn wait(&self, what: impl FnOnce() -> String, ready: impl Fn() -> bool) -> Result<(), String> {
        let deadline = Instant::now() + WAIT;
        while !ready() {
            if Instant::now() > deadline {
                return Err(format!("{} after {WAIT:?}", what()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Waits until the visible screen satisfies `ready`.
    fn wait_for_screen(&self, what: &str, ready: impl Fn(&str) -> bool) -> Result<(), String> {
        self.wait(|| format!("no {what} on the screen"), || ready(&self.screen()))
    }

    /// Waits until a process named `comm` under the pane's process is the foreground process
    /// group of its terminal (so that a key like C-c or C-z reaches it, not the shell).
    fn wait_foreground(&self, comm: &str) -> Result<(), String> {
        let pane: u32 = self
            .tmux(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("a pane pid");
        self.wait(|| format!("{comm} never the foreground job"), || foreground_under(pane, comm))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .env_remove("TMUX")
            .output();
    }
}

/// Whether a running process named `comm`, a descendant of `ancestor`, leads the foreground
/// process group of its terminal (from /proc/PID/stat: state, ppid, pgrp, tpgid).
fn foreground_under(ancestor: u32, comm: &str) -> bool {
    struct Stat {
        comm: String,
        stopped: bool,
        ppid: u32,
        pgrp: i64,
        tpgid: i64,
    }
    let mut procs = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid pgrp session tty_nr tpgid ..."; comm may hold spaces and ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.len() < 6 {
            continue;
        }
        let parse = |i: usize| fields[i].parse::<i64>().unwrap_or(-1);
        procs.insert(
            pid,
            Stat {
                comm: stat[open + 1..close].to_string(),
                stopped: fields[0] == "T",
                ppid: u32::try_from(parse(1)).unwrap_or(0),
                pgrp: parse(2),
                tpgid: parse(5),
            },
        );
    }
    procs.iter().any(|(&pid, p)| {
        if p.comm != comm || p.stopped || p.pgrp != p.tpgid || i64::from(pid) != p.pgrp {
            return false;
        }
        let mut up = p.ppid;
        for _ in 0..64 {
            if up == ancestor {
                return true;
            }
            match procs.get(&up) {
                Some(parent) if parent.ppid != up => up = parent.ppid,
                _ => return false,
            }
        }
        false
    })
}

/// A screen between rules, so that its trailing blank lines and spaces show.
fn framed(screen: &str) -> String {
    let mut out = String::from(
        "┌────────────────────────────────────────────────────────────────────────────────\n",
    );
    for line in screen.lines() {
        out.push('│');
        out.push_str(&line.replace('\x1b', "␛"));
        out.push('\n');
    }
    out.push_str(
        "└────────────────────────────────────────────────────────────────────────────────",
    );
    out
}

/// The last non-blank line of a screen.
fn last_line(screen: &str) -> &str {
    screen.trim_end().rsplit('\n').next().unwrap_or("")
}

/// One thing a workload does, the same in both runs.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    /// Types a line (literally) and Enter.
    Line(&'a str),
    /// Types text literally, without Enter.
    Text(&'a str),
    /// Presses keys (tmux key names: C-c, C-z, Escape, Enter).
    Keys(&'a [&'a str]),
    /// Waits until the screen shows `text` at least `n` times and the shell's prompt (`$`) on its
    /// last line: the command ran and the shell waits for the next.
    Prompt(&'a str, usize),
    /// Waits until the screen shows `text` (a full-screen program's output).
    Shows(&'a str),
    /// Waits until a process of this name is the terminal's foreground job.
    Foreground(&'a str),
    /// Resizes the window (the pane's pty), waits until tmux has it, then gives the shell
    /// `SETTLE` to take in its SIGWINCH.
    Resize(u16, u16),
    /// Takes a capture now, compared with the other run's.
    Snapshot(&'a str),
}

/// After a resize: time for the SIGWINCH to reach the shell (through the recorder, too) before
/// the next keys come. The same in both runs.
const SETTLE: Duration = Duration::from_millis(300);

/// What a run ended with: the named captures (snapshots, then "final"), and for the recorded run
/// its history directory.
struct Run {
    captures: Vec<(String, String)>,
    history: Option<tempfile::TempDir>,
}

/// The first thing a workload waits for: the shell's first prompt.
const FIRST_PROMPT: Step = Step::Prompt("", 0);

/// Runs `steps` in a fresh tmux: `bash -i` directly, or under `tern-relay record`.
fn run(recorded: bool, steps: &[Step]) -> Run {
    let bash: Vec<OsString> =
        ["bash", "--norc", "--noprofile", "-i"].into_iter().map(OsString::from).collect();
    let (label, command, history) = if recorded {
        let dir = tempfile::tempdir().unwrap();
        let mut command: Vec<OsString> = vec![
            env!("CARGO_BIN_EXE_tern-relay").into(),
            "record".into(),
            "--history-dir".into(),
            dir.path().into(),
            "--session".into(),
            SESSION.into(),
            "--".into(),
        ];
        command.extend(bash);
        ("recorded", command, Some(dir))
    } else {
        ("direct", bash, None)
    };
    let tmux = Tmux::start(label, &command);
    let mut captures = Vec::new();
    // A wait that times out ends the run: its screen then is the run's last capture, shown next
    // to the other run's.
    let mut waited = Ok(());
    for step in steps {
        if waited.is_err() {
            break;
        }
        waited = match *step {
            Step::Line(text) => {
                tmux.tmux(&["send-keys", "-t", "t", "-l", text]);
                tmux.tmux(&["send-keys", "-t", "t", "Enter"]);
                Ok(())
            }
            Step::Text(text) => {
                tmux.tmux(&["send-keys", "-t", "t", "-l", text]);
                Ok(())
            }
            Step::Keys(keys) => {
                let mut args = vec!["send-keys", "-t", "t"];
                args.extend(keys);
                tmux.tmux(&args);
                Ok(())
            }
            Step::Prompt(text, n) => tmux
                .wait_for_screen(&format!("{text:?} ×{n} then a prompt"), |s| {
                    s.matches(text).count() >= n && last_line(s) == "$"
                }),
            Step::Shows(text) => tmux.wait_for_screen(&format!("{text:?}"), |s| s.contains(text)),
            Step::Foreground(comm) => tmux.wait_foreground(comm),
            Step::Resize(cols, rows) => {
                let (x, y) = (cols.to_string(), rows.to_string());
                tmux.tmux(&["resize-window", "-t", "t", "-x", &x, "-y", &y]);
                let want = format!("{cols}x{rows}");
                let size = ["display-message", "-p", "-t", "t", "#{pane_width}x#{pane_height}"];
                let resized =
                    tmux.wait(|| format!("never {want}"), || tmux.tmux(&size).trim() == want);
                std::thread::sleep(SETTLE);
                resized
            }
            Step::Snapshot(name) => {
                captures.push((name.to_string(), tmux.capture() + &tmux.state()));
                Ok(())
            }
        };
    }
    let last = match waited {
        Ok(()) => "final".to_string(),
        Err(e) => format!("{label} run stopped: {e}"),
    };
    captures.push((last, tmux.capture() + &tmux.state()));
    Run { captures, history }
}

/// Runs `steps` from the shell's first prompt on, directly and under the recorder; asserts every
/// capture is the same (and that both runs went through all the steps), showing both screens
/// when not. Returns both runs.
fn same_with_and_without_the_recorder(steps: &[Step]) -> (Run, Run) {
    same_from_the_start(&[&[FIRST_PROMPT], steps].concat())
}

/// As `same_with_and_without_the_recorder`, with the steps starting as soon as tmux has started
/// the command.
fn same_from_the_start(steps: &[Step]) -> (Run, Run) {
    let direct = run(false, steps);
    let recorded = run(true, steps);
    for ((dname, d), (rname, r)) in direct.captures.iter().zip(&recorded.captures) {
        assert!(
            dname == rname && d == r,
            "{dname} / {rname}: the screens differ\nwithout the recorder:\n{}\n\
             with the recorder:\n{}\nfirst differing line: {}",
            framed(d),
            framed(r),
            d.lines().zip(r.lines()).position(|(a, b)| a != b).map_or_else(
                || if d == r { "none".to_string() } else { "(one is longer)".to_string() },
                |i| (i + 1).to_string()
            )
        );
    }
    (direct, recorded)
}

/// The recorded run's history, oldest line first, as plain text.
fn history(dir: &Path) -> Vec<String> {
    let history = tern_relay::history::read_page(dir, SESSION, None, usize::MAX).unwrap();
    history.lines.iter().map(|l| tern::terminal::plain(l)).collect()
}

#[test]
fn resizes_reach_the_shell_and_programs_the_same() {
    same_with_and_without_the_recorder(&[
        Step::Line("stty size"),
        Step::Prompt("\n24 80\n", 1),
        Step::Resize(100, 30),
        Step::Line("stty size"),
        Step::Prompt("\n30 100\n", 1),
        Step::Line("tput cols; tput lines"),
        Step::Prompt("\n100\n30\n", 1),
        Step::Resize(60, 20),
        Step::Line("stty size; tput cols; tput lines"),
        Step::Prompt("\n20 60\n60\n20\n", 1),
    ]);
}

#[test]
fn a_resize_as_the_shell_starts_reaches_it() {
    // The window is resized right after tmux started the command: under the recorder, while it
    // is still starting (between reading the outer size and listening for SIGWINCH). A race, so
    // a few tries.
    for _ in 0..4 {
        same_from_the_start(&[
            Step::Resize(100, 30),
            FIRST_PROMPT,
            Step::Line("stty size; echo end-$((6*7))"),
            Step::Prompt("\nend-42\n", 1),
        ]);
    }
}

#[test]
fn ctrl_c_interrupts_the_foreground_program_the_same() {
    same_with_and_without_the_recorder(&[
        Step::Line("sleep 30"),
        Step::Foreground("sleep"),
        Step::Keys(&["C-c"]),
        Step::Prompt("^C", 1),
        Step::Line("echo after"),
        Step::Prompt("\nafter\n", 1),
    ]);
}

#[test]
fn job_control_stops_lists_and_resumes_the_same() {
    same_with_and_without_the_recorder(&[
        Step::Line("sleep 30"),
        Step::Foreground("sleep"),
        Step::Keys(&["C-z"]),
        Step::Prompt("Stopped", 1),
        Step::Line("jobs"),
        Step::Prompt("Stopped", 2),
        Step::Line("fg"),
        Step::Foreground("sleep"),
        Step::Keys(&["C-c"]),
        Step::Prompt("^C", 1),
        Step::Line("echo done"),
        Step::Prompt("\ndone\n", 1),
    ]);
}

#[test]
fn a_program_reads_the_same_terminal_size_before_and_after_a_resize() {
    let python = "python3 -c 'import os; print(os.get_terminal_size())'";
    same_with_and_without_the_recorder(&[
        Step::Line(python),
        Step::Prompt("os.terminal_size(columns=80, lines=24)", 1),
        Step::Resize(100, 30),
        Step::Line(python),
        Step::Prompt("os.terminal_size(columns=100, lines=30)", 1),
    ]);
}

#[test]
fn the_alternate_screen_and_vi_look_the_same() {
    let dir = tempfile::tempdir().unwrap();
    // The same file name in both runs (it is on vi's screen); vi never writes it.
    let vi = format!("vi -u NONE -N -n {}", dir.path().join("notes.txt").display());
    let (_, recorded) = same_with_and_without_the_recorder(&[
        Step::Line(
            "printf 'before\\n'; tput smcup; printf 'in alt\\n'; sleep 0.3; tput rmcup; echo back",
        ),
        Step::Prompt("\nback\n", 1),
        Step::Line(&vi),
        Step::Shows("\n~"),
        Step::Keys(&["i"]),
        Step::Text("typed in vi"),
        Step::Keys(&["Enter"]),
        Step::Text("a second line"),
        Step::Shows("a second line"),
        Step::Snapshot("in vi"),
        Step::Keys(&["Escape"]),
        Step::Text(":q!"),
        Step::Keys(&["Enter"]),
        Step::Prompt("notes.txt", 1),
        Step::Line("echo out-of-vi"),
        Step::Prompt("\nout-of-vi\n", 1),
    ]);
    // Nothing scrolled off the main screen; nothing of the alternate one is history.
    let lines = history(recorded.history.as_ref().unwrap().path());
    assert!(
        !lines.iter().any(|l| l.contains("in alt") || l.contains("typed in vi")),
        "the alternate screen is not history: {lines:?}"
    );
}

#[test]
fn term_and_tty_are_the_same_and_scrolled_off_lines_are_history() {
    let (_, recorded) = same_with_and_without_the_recorder(&[
        Step::Line("echo $TERM; tty | sed 's/[0-9]//g'; stty -a | head -1"),
        Step::Prompt("\n/dev/pts/\nspeed ", 1),
        Step::Line("tput smcup; seq 1001 1200; tput rmcup"),
        Step::Prompt("tput rmcup", 1),
        Step::Line("seq 1 200"),
        Step::Prompt("\n200\n", 1),
    ]);
    let dir = recorded.history.as_ref().unwrap().path();
    let screen = &recorded.captures.last().unwrap().1;
    // tmux's capture (scrollback and screen) ends with the 24 rows of the screen, then the
    // state line.
    let rows: Vec<&str> = screen.lines().collect();
    let visible = &rows[rows.len() - 1 - 24..rows.len() - 1];
    let on_screen: Vec<u32> = visible.iter().filter_map(|l| l.trim().parse().ok()).collect();
    assert!(!on_screen.is_empty() && *on_screen.last().unwrap() == 200, "{visible:?}");
    // The numbers above the screen's are all in the history, in order, once: the history is
    // written just after the output, so it may lag a moment behind the screen.
    let first_visible = on_screen[0];
    let deadline = Instant::now() + WAIT;
    let numbers = loop {
        let lines = history(dir);
        let numbers: Vec<u32> = lines.iter().filter_map(|l| l.trim().parse().ok()).collect();
        if numbers.last() == Some(&(first_visible - 1)) || Instant::now() > deadline {
            break numbers;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let expected: Vec<u32> = (1..first_visible).collect();
    assert_eq!(numbers, expected, "the lines that scrolled off, and no alternate screen's");
    let lines = history(dir);
    assert!(lines.iter().any(|l| l.starts_with("$ echo $TERM")), "the prompt lines too: {lines:?}");
}

#[test]
fn the_shells_terminal_has_the_same_settings() {
    // The line discipline's settings (iutf8, erase, ...): what a program in cooked mode (cat,
    // read) gets.
    same_with_and_without_the_recorder(&[
        Step::Line("stty -a; echo end-$((6*7))"),
        Step::Prompt("\nend-42\n", 1),
    ]);
}

#[test]
fn a_program_in_cooked_mode_erases_a_whole_utf8_character() {
    // `read` without readline: the pty's line discipline edits the line. Typed: é (two bytes in
    // UTF-8), Backspace, x. With iutf8 (tmux and mosh-server set it) Backspace erases the whole
    // character and the line is "x"; without it, only its last byte. The keys wait for the
    // `ready` line: bash puts the terminal back in cooked mode only when it runs the command, and
    // keys that came before (a CI run typed them faster than bash started) skip the line editing.
    same_with_and_without_the_recorder(&[
        Step::Line(
            "echo rea''dy; read line; printf '%s' \"$line\" | od -An -tx1; echo end-$((6*7))",
        ),
        Step::Shows("\nready\n"),
        Step::Text("é"),
        Step::Keys(&["BSpace"]),
        Step::Text("x"),
        Step::Keys(&["Enter"]),
        Step::Prompt("\nend-42\n", 1),
    ]);
}

#[test]
fn a_program_asking_the_terminal_gets_its_answer() {
    // A query (the cursor position report, ESC [ 6 n) goes out to the terminal, its answer comes
    // back as input: through the recorder both ways. Echo is off before the query goes out: with
    // `read -s` alone, whether the tty echoes the answer depends on whether it arrives before or
    // after `read` turns echo off, a race that a fresh-clone CI run lost on one side only.
    same_with_and_without_the_recorder(&[
        Step::Line(
            "stty -echo; printf '\\033[6n'; IFS= read -r -d R pos; stty echo; echo \"at ${pos#*[}\"; echo end-$((6*7))",
        ),
        Step::Prompt("\nend-42\n", 1),
    ]);
}
