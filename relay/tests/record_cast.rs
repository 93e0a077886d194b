//! Session recordings (issue 35 item 6, `--record-sessions`): the real recorder on a pty of the
//! test's own (as mosh-server runs it), with `--cast-bytes` (what the relay passes for
//! `--record-sessions`). A shell prints coloured text and a UTF-8 character cut across two
//! writes, reads a secret with echo off, runs `less` (resized while it shows) and `vi`; the
//! recording, replayed through the core's emulator, draws the same screen as what reached the
//! pty (mosh-server's side) did, in `vi` and at the end; it is 0600, valid JSON on every line,
//! never holds the secret typed; `tern-relay export` prints it; the cap stops it with a marker
//! and an audit line. `asciinema cat` reads it (skipped, saying so, without asciinema:
//! scripts/setup.sh installs it).

mod pty;

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::termios::tcsetwinsize;
use serde_json::Value;
use tern::terminal::{Emulator, Size};

const SESSION: &str = "0123456789abcdef";
const SECRET: &str = "hunter2-secret-xyzzy";

/// Starts `script` under the recorder (recording, at most `cap` bytes) on an 80 × 24 pty.
fn start(dir: &Path, script: &str, cap: u64) -> (std::process::Child, File) {
    pty::start_recorder(pty::cells(80, 24), |c| {
        c.arg("--history-dir").arg(dir.join("sessions"));
        c.args(["--session", SESSION, "--cast-bytes", &cap.to_string(), "--", "sh", "-c"]);
        c.arg(script).current_dir(dir).env("TERM", "xterm-256color").env("SHELL", "/bin/sh");
    })
}

fn state_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::DirBuilder::new().create(dir.path().join("sessions")).unwrap();
    std::fs::set_permissions(dir.path().join("sessions"), std::fs::Permissions::from_mode(0o700))
        .unwrap();
    dir
}

/// What reached the pty so far, read by a thread of its own.
#[derive(Clone)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Screen {
    fn read(mut master: File) -> (Screen, std::thread::JoinHandle<()>) {
        let out = Screen(Arc::default());
        let o = out.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            // EIO once the recorder (the last holder of the pty's other side) exits.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                o.0.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        (out, reader)
    }

    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until the output from `from` on holds `needle`; returns where it ends.
    fn wait_for(&self, from: usize, needle: &str) -> usize {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = self.bytes();
            let found = out
                .get(from..)
                .and_then(|o| o.windows(needle.len()).position(|w| w == needle.as_bytes()));
            if let Some(i) = found {
                return from + i + needle.len();
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in the output: {:?}",
                String::from_utf8_lossy(&out[from.min(out.len())..])
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the output stops growing (the program waits for a key); returns its length.
    fn settle(&self) -> usize {
        let mut len = self.bytes().len();
        loop {
            std::thread::sleep(Duration::from_millis(150));
            let now = self.bytes().len();
            if now == len {
                return now;
            }
            len = now;
        }
    }
}

/// The recording's events (after the header), every line parsed as JSON.
fn events(cast: &str) -> (Value, Vec<Value>) {
    let mut lines = cast.lines().map(|l| {
        serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"))
    });
    (lines.next().expect("a header"), lines.collect())
}

/// The recording played through the core's emulator.
fn replay(cast: &str) -> Emulator {
    let (header, events) = events(cast);
    let size = |c: u64, r: u64| Size { cols: c as u16, rows: r as u16 };
    let mut e =
        Emulator::new(size(header["width"].as_u64().unwrap(), header["height"].as_u64().unwrap()));
    for ev in events {
        let data = ev[2].as_str().unwrap();
        match ev[1].as_str().unwrap() {
            "o" => e.feed(data.as_bytes()),
            "r" => {
                let (c, r) = data.split_once('x').unwrap();
                e.resize(size(c.parse().unwrap(), r.parse().unwrap()));
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    e
}

/// What reached the pty, with the resize where it came.
fn live(out: &[u8], resized_at: usize) -> Emulator {
    let mut e = Emulator::new(Size { cols: 80, rows: 24 });
    e.feed(&out[..resized_at]);
    e.resize(Size { cols: 100, rows: 30 });
    e.feed(&out[resized_at..]);
    e
}

#[test]
fn a_recording_replays_to_the_screen_the_session_showed_and_holds_no_keystrokes() {
    let dir = state_dir();
    let notes: String =
        (1..=80).map(|i| format!("notes line {i} \x1b[3{}m*\x1b[0m\n", i % 8)).collect();
    std::fs::write(dir.path().join("notes.txt"), notes).unwrap();
    std::fs::write(dir.path().join("poem.txt"), "roses are red\nviolets are blue\n").unwrap();
    let script = r#"
        printf '\033[1;31mred\033[0m \033[30;42mgreen\033[0m h\303\251llo \342\202\254\n'
        printf 'cut: \342\202'; sleep 0.3; printf '\254 end\n'
        seq 1 30
        printf 'SECRET? '; stty -echo; read s; stty echo; printf '\nlen=%s\n' "${#s}"
        less -R notes.txt
        printf 'after less\n'
        vi -u NONE poem.txt
        printf '\033[1mafter vi\033[0m\n'
    "#;
    let (mut child, master) = start(dir.path(), script, 64 << 20);
    let writer = master.try_clone().unwrap();
    let mut keys = writer;
    let (screen, reader) = Screen::read(master);

    let at = screen.wait_for(0, "SECRET? ");
    keys.write_all(format!("{SECRET}\r").as_bytes()).unwrap();
    let at = screen.wait_for(at, &format!("len={}", SECRET.len()));
    screen.wait_for(at, "notes line 23");
    // Resized while less shows: it redraws at 100 × 30.
    let at = screen.settle();
    let resized_at = at;
    tcsetwinsize(&keys, pty::cells(100, 30)).unwrap();
    let at = screen.wait_for(at, "notes line 29");
    keys.write_all(b"q").unwrap();
    let at = screen.wait_for(at, "after less");
    let at = screen.wait_for(at, "violets are blue");
    keys.write_all(b"Ohello from vi\x1b").unwrap();
    let at = screen.wait_for(at, "hello from vi");
    screen.settle();

    // In vi: the recording so far draws the screen the pty shows.
    let cast_path = dir.path().join(format!("sessions/{SESSION}.cast"));
    let cast = std::fs::read_to_string(&cast_path).expect("the session is recorded");
    replay(&cast)
        .framebuffer()
        .looks_like(live(&screen.bytes(), resized_at).framebuffer())
        .expect("the recording replays to the screen in vi");
    assert!(live(&screen.bytes(), resized_at).in_alternate_screen(), "vi is on screen");

    keys.write_all(b":q!\r").unwrap();
    screen.wait_for(at, "after vi");
    assert!(child.wait().unwrap().success());
    drop(keys);
    reader.join().unwrap();
    let out = screen.bytes();

    let cast = std::fs::read_to_string(&cast_path).unwrap();
    let replayed = replay(&cast);
    replayed
        .framebuffer()
        .looks_like(live(&out, resized_at).framebuffer())
        .expect("the recording replays to the final screen");
    let text: String = (0..30)
        .map(|y| {
            let row = replayed.framebuffer().row(y).unwrap();
            row.cells().iter().map(|c| c.text()).collect::<String>() + "\n"
        })
        .collect();
    assert!(text.contains("after vi"), "{text}");

    let (header, evs) = events(&cast);
    assert_eq!(header["version"], 2);
    assert_eq!((header["width"].as_u64(), header["height"].as_u64()), (Some(80), Some(24)));
    assert_eq!(header["env"]["TERM"], "xterm-256color");
    assert!(evs.iter().any(|e| e[1] == "r" && e[2] == "100x30"), "the resize is recorded");
    let all: String = evs.iter().filter(|e| e[1] == "o").map(|e| e[2].as_str().unwrap()).collect();
    assert!(all.contains("cut: € end"), "the cut character is whole");
    assert!(all.contains("héllo €"));
    assert!(!all.contains('\u{fffd}'), "no character was broken");
    assert!(!cast.contains(SECRET), "a key typed with echo off is never recorded");
    assert!(!String::from_utf8_lossy(&out).contains(SECRET), "echo was off");
    let mode = std::fs::metadata(&cast_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let mut times = evs.iter().map(|e| e[0].as_f64().unwrap());
    let mut last = 0.0;
    assert!(times.all(|t| std::mem::replace(&mut last, t) <= t), "times never go back");

    // `tern-relay export SESSION` prints the file as it is.
    let export = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
        .args(["export", "--state-dir"])
        .arg(dir.path())
        .arg(SESSION)
        .output()
        .unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    assert_eq!(export.stdout, cast.as_bytes());

    let exported = dir.path().join("s.cast");
    std::fs::write(&exported, &export.stdout).unwrap();

    // asciinema reads it (`asciinema cat` wants a terminal: script(1) gives it one).
    let has = Command::new("sh").args(["-c", "command -v asciinema"]).output();
    if !has.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "SKIPPED the asciinema check: asciinema is not installed (apt-get install asciinema; \
             scripts/setup.sh installs it)"
        );
        return;
    }
    let played = Command::new("script")
        .arg("-qec")
        .arg(format!("asciinema cat {}", exported.display()))
        .arg("/dev/null")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&played.stdout);
    assert!(played.status.success(), "asciinema cat: {shown}");
    assert!(shown.contains("after vi") && shown.contains("notes line 29"), "{shown}");
}

#[test]
fn the_cap_stops_the_recording_with_a_marker_and_an_audit_line() {
    let dir = state_dir();
    let (mut child, master) = start(dir.path(), "seq 1 5000; printf 'done\\n'", 4096);
    let (screen, reader) = Screen::read(master);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    assert!(String::from_utf8_lossy(&screen.bytes()).contains("done"), "the session went on");
    let cast =
        std::fs::read_to_string(dir.path().join(format!("sessions/{SESSION}.cast"))).unwrap();
    assert!(cast.len() <= 4096, "{} bytes", cast.len());
    let (_, evs) = events(&cast);
    let last = evs.last().unwrap();
    assert_eq!(last[1], "m", "the last event is the marker: {last}");
    assert!(last[2].as_str().unwrap().contains("recording stopped"));
    assert!(!cast.contains("done"), "nothing is recorded past the cap");
    let audit = std::fs::read_to_string(dir.path().join("audit.log")).expect("an audit line");
    let line: Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(line["event"], "recording_stopped");
    assert_eq!(line["session"], SESSION);
}

#[test]
fn export_says_clearly_when_a_session_is_unknown_or_not_recorded() {
    let dir = state_dir();
    std::fs::write(dir.path().join("sessions/00000000aaaaaaaa.json"), "{}").unwrap();
    let export = |id: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_tern-relay"))
            .args(["export", "--state-dir"])
            .arg(dir.path())
            .arg(id)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(export("00000000aaaaaaaa").contains("was not recorded"));
    assert!(export("00000000bbbbbbbb").contains("no session 00000000bbbbbbbb"));
    assert!(export("../etc/passwd").contains("is not a session id"));
}
