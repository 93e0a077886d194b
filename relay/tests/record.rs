//! `tern-relay record`, the pty recorder (issue 14), run as mosh-server would run it: the real
//! binary on a pty of the test's own, the session leader of it. Every line a fast program printed
//! is in the history, in order; output passes through unchanged; the shell sees the outer pty's
//! size and follows its resizes; the recorder exits with the shell's status.

mod pty;

use std::fs::File;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use rustix::termios::{Winsize, tcsetwinsize};

/// Starts the recorder on a fresh pty (as mosh-server's child: session leader, controlling tty).
fn record(dir: &std::path::Path, script: &str) -> (std::process::Child, File) {
    pty::start_recorder(pty::cells(80, 24), |c| {
        c.arg("--history-dir").arg(dir);
        c.args(["--session", "0123456789abcdef", "--history-lines", "200000", "--", "sh", "-c"]);
        c.arg(script);
    })
}

/// Everything the recorder printed until it exited.
fn output(child: &mut std::process::Child, mut master: File) -> (String, i32) {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(60);
    // EIO once the recorder (the last holder of the pty's other side) exits.
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 || Instant::now() > deadline {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    let status = child.wait().unwrap();
    (String::from_utf8_lossy(&out).into_owned(), status.code().unwrap_or(-1))
}

#[test]
fn every_line_of_a_fast_program_is_in_the_history_and_the_output_passes_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, master) = record(dir.path(), "seq 1 100000; stty size; echo $TERM; exit 7");
    let (out, code) = output(&mut child, master);
    assert_eq!(code, 7, "the shell's exit status");
    assert!(out.contains("99999\r\n100000\r\n"), "output passes through");
    assert!(out.contains("24 80\r\n"), "the shell sees the outer size: {}", &out[out.len() - 60..]);
    let history =
        tern_relay::history::read_page(dir.path(), "0123456789abcdef", None, usize::MAX).unwrap();
    let lines: Vec<String> = history.lines.iter().map(|l| tern::terminal::plain(l)).collect();
    // On a 24-row screen the last lines are still on it; everything before them left the top.
    let numbers: Vec<u32> = lines.iter().filter_map(|l| l.parse().ok()).collect();
    assert!(numbers.len() >= 100_000 - 24, "{} lines kept", numbers.len());
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "in order, once");
    assert_eq!(numbers[0], 1);
}

#[test]
fn resizes_of_the_outer_terminal_reach_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, master) = record(dir.path(), "sleep 1; stty size");
    std::thread::sleep(Duration::from_millis(300));
    // What mosh-server does on a Resize: its pty's size changes (SIGWINCH to the recorder).
    tcsetwinsize(&master, Winsize { ws_row: 30, ws_col: 100, ws_xpixel: 0, ws_ypixel: 0 }).unwrap();
    let (out, code) = output(&mut child, master);
    assert_eq!(code, 0);
    assert!(out.contains("30 100"), "{out:?}");
}

#[test]
fn keys_reach_the_shell_as_typed_with_job_control() {
    let dir = tempfile::tempdir().unwrap();
    // An interactive read: the key goes through the recorder's raw outer terminal to the shell's
    // pty, whose line discipline echoes it once.
    let (mut child, mut master) = record(dir.path(), "read line; echo got-$line");
    std::thread::sleep(Duration::from_millis(300));
    master.write_all(b"hello\r").unwrap();
    let (out, code) = output(&mut child, master);
    assert_eq!(code, 0);
    assert_eq!(out.matches("hello").count(), 2, "echoed once, then printed: {out:?}");
    assert!(out.contains("got-hello"), "{out:?}");
}

/// mosh-server resizes its pty and then writes the keys that followed the Resize: a command in
/// those keys must see the new size. The recorder's keys and resizes go through different
/// threads; a resize picked up after the keys it preceded let `tput cols` print the old width
/// (a flaky browser test in CI). Each round resizes and types at once, with no pause between.
#[test]
fn keys_typed_right_after_a_resize_see_the_new_size() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut master) =
        record(dir.path(), "stty -echo; while read line; do stty size; done");
    let mut reader = master.try_clone().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let mut wrong = Vec::new();
    for round in 0..60u16 {
        let (cols, rows) = (40 + round, 10 + round % 7);
        tcsetwinsize(&master, pty::cells(cols, rows)).unwrap();
        master.write_all(b"x\r").unwrap();
        let want = format!("{rows} {cols}\r\n");
        let deadline = Instant::now() + Duration::from_secs(10);
        // Each `stty size` answers one line: read until this round's answer is in.
        loop {
            if let Some(end) = seen.find("\r\n") {
                let line: String = seen.drain(..end + 2).collect();
                if line != want {
                    wrong.push(format!("round {round}: {line:?}, wanted {want:?}"));
                }
                break;
            }
            assert!(Instant::now() < deadline, "no answer in round {round}: {seen:?}");
            let n = reader.read(&mut buf).unwrap();
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    assert!(wrong.is_empty(), "commands saw the size before the last resize: {wrong:#?}");
    drop(master);
    drop(reader);
    let _ = child.kill();
    let _ = child.wait();
}
