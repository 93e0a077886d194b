//! Predictive local echo never changes what finally shows: Tern with prediction on ends every
//! workload on the same screen as the stock mosh-client with prediction on.
//!
//! Each workload (below, typed key by key at a typist's pace by `tern_tests::typing`) runs against
//! fresh, identically started mosh-servers (`typing_env`: prompt `[N] tern$ `, a password prompt,
//! an upper-casing program, vim without vimrc), every client behind the link emulator at 100 ms
//! RTT, so keys are predicted, drawn and judged while the echo is on its way:
//!
//! * the reference: mosh-client in tmux with `MOSH_PREDICTION_DISPLAY=adaptive` (what
//!   `mosh --predict=adaptive` sets);
//! * Tern's probe with `--predict adaptive` and with `--predict always`.
//!
//! After every workload the server screens and cursors must be identical to mosh-client's, and
//! Tern's display frame (server screen plus whatever predictions are still shown) must equal its
//! server screen: every prediction has been judged and none is left on the screen. In the password
//! workload Tern's display must never have shown a character of the password, at any moment (its
//! timeline records every display frame).

use std::net::SocketAddr;
use std::time::Duration;

use tern::predict::{PredictConfig, PredictMode};
use tern_native::probe::{ProbeOptions, ProbeResult, run_probe};
use tern_native::script::Action;
use tern_tests::linkemu::{DirectionConfig, LinkConfig, LinkEmulator};
use tern_tests::mosh_client::{Capture, TempDir, TmuxMoshClient, start_reference_server_with};
use tern_tests::typing::{SECRET, TraceBuilder, is_secret_char, typing_env};

const COLS: u16 = 80;
const ROWS: u16 = 24;
/// Each way: 100 ms RTT.
const DELAY: Duration = Duration::from_millis(50);

fn workload(name: &str) -> Vec<Action> {
    let mut t = TraceBuilder::new(0x5C4E + name.len() as u64);
    match name {
        // Typos fixed with Backspace (DEL), arrows, Ctrl-A / Ctrl-E, a word typed mid-line.
        "shell" => {
            t.command("echo hwllo{BS}{BS}{BS}{BS}ello world");
            t.command("echo one three{Left}{Left}{Left}{Left}{Left}two {C-e} four");
            t.command("ech abc{C-a}{Right}{Right}{Right}o{C-e} def");
            t.command("echo abcdef{Left}{Left}{BS}{BS}{Right}X");
        }
        // A program that echoes every key in upper case: every prediction of it is wrong.
        "upper" => {
            t.keys("shout{Enter}").pause(800);
            t.keys("hello there{Enter}one more line{BS}{BS}{BS}{BS}word.").wait_prompt();
            t.command("echo back");
        }
        // vim: insert mode, Esc, normal-mode moves and edits (not predictable), write, quit.
        "vim" => {
            t.keys("vim notes.md{Enter}").wait("[New]");
            t.keys("ithe cat sat on the mat{Enter}a second line{Esc}");
            t.keys("k0wdwAs, really{Esc}");
            t.keys("jxx$iEND{Esc}");
            t.keys(":x{Enter}").wait_prompt();
            t.command("cat notes.md");
        }
        // A password prompt with echo off: typed slowly after the prompt, and in one burst.
        "password" => {
            t.keys("signin{Enter}").wait("Password:");
            t.keys(SECRET).pause(400);
            t.keys("{Enter}").wait(&format!("got {} chars", SECRET.len())).wait_prompt();
            t.keys("signin{Enter}").wait("Password:");
            t.burst(SECRET).pause(400);
            t.keys("{Enter}").wait_prompt();
            t.command("echo done");
        }
        other => panic!("no workload {other}"),
    }
    t.build()
}

const WORKLOADS: [&str; 4] = ["shell", "upper", "vim", "password"];

fn link_to(server_port: u16) -> LinkEmulator {
    let direct: SocketAddr = ([127, 0, 0, 1], server_port).into();
    let mut link = LinkConfig::new("127.0.0.1:0".parse().expect("literal"), direct);
    let each_way = DirectionConfig { delay: DELAY, ..DirectionConfig::default() };
    link.up = each_way.clone();
    link.down = each_way;
    LinkEmulator::start(link).expect("link emulator")
}

fn reference(name: &str, actions: &[Action]) -> Capture {
    let home = TempDir::new("predict-ref-home");
    let server = start_reference_server_with(&home.0, &typing_env());
    let emulator = link_to(server.port);
    let port = emulator.local_addr().port();
    let client =
        TmuxMoshClient::start_with(port, &server.key.to_base64(), COLS, ROWS, Some("adaptive"));
    client.run(actions).unwrap_or_else(|e| panic!("{name}: {e}"));
    let capture = client.capture();
    drop(client);
    server.kill();
    capture
}

fn probe(name: &str, actions: &[Action], mode: PredictMode) -> ProbeResult {
    let home = TempDir::new("predict-probe-home");
    let server = start_reference_server_with(&home.0, &typing_env());
    let emulator = link_to(server.port);
    let options = ProbeOptions {
        cols: COLS,
        rows: ROWS,
        seed: 11,
        predict: PredictConfig { mode, overwrite: false },
        timeline: true,
        ..ProbeOptions::new(emulator.local_addr(), server.key.clone())
    };
    let result = run_probe(&options, actions).unwrap_or_else(|e| panic!("{name}: {e}"));
    server.kill();
    result
}

/// Rows (and the cursor) that differ, as a readable report; empty when identical.
fn differences(what: &str, expected: &[String], cursor: (u16, u16), got: &ProbeResult) -> String {
    let mut report = String::new();
    for row in 0..expected.len().max(got.screen.rows.len()) {
        let e = expected.get(row).map_or("", String::as_str);
        let g = got.screen.rows.get(row).map_or("", String::as_str);
        if e != g {
            report.push_str(&format!(
                "  row {row:2}: mosh-client {e:?}\n          tern        {g:?}\n"
            ));
        }
    }
    let got_cursor = (got.screen.cursor.row, got.screen.cursor.col);
    if cursor != got_cursor {
        report.push_str(&format!("  cursor: mosh-client {cursor:?}, tern {got_cursor:?}\n"));
    }
    if !report.is_empty() {
        report.insert_str(0, &format!("{what}:\n"));
    }
    report
}

#[test]
fn predictions_never_change_the_final_screen() {
    let reports: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = WORKLOADS
            .iter()
            .map(|&name| {
                scope.spawn(move || {
                    let actions = workload(name);
                    let expected = reference(name, &actions);
                    let mut report = String::new();
                    for mode in [PredictMode::Adaptive, PredictMode::Always] {
                        let result = probe(name, &actions, mode);
                        let what = format!("{name}, tern-probe --predict {}", mode.as_str());
                        report.push_str(&differences(&what, &expected.rows, expected.cursor, &result));
                        if result.display != result.screen {
                            report.push_str(&format!(
                                "{what}: the display frame at the end is not the server screen:\n{}\n--- server:\n{}\n",
                                result.display.trimmed(),
                                result.screen.trimmed()
                            ));
                        }
                        let timeline = result.timeline.as_ref().expect("timeline recorded");
                        let leaks = timeline
                            .display
                            .iter()
                            .filter(|s| s.screen.rows.iter().any(|r| r.contains(is_secret_char)))
                            .count();
                        if name == "password" && leaks > 0 {
                            report.push_str(&format!(
                                "{what}: {leaks} display frames showed a password character\n"
                            ));
                        }
                        let c = &result.predict_counters;
                        println!(
                            "{what}: {} keys, predictions made {} drawn {} confirmed {} wrong drawn {} epochs killed {} resets {}",
                            timeline.keys.len(),
                            c.made,
                            c.drawn,
                            c.confirmed,
                            c.wrong_drawn,
                            c.epochs_killed,
                            c.resets
                        );
                        // The link is slow enough that typed text is predicted and drawn.
                        if name == "shell" && (c.made == 0 || c.drawn == 0) {
                            report.push_str(&format!("{what}: nothing was predicted and drawn: {c:?}\n"));
                        }
                    }
                    report
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("workload thread")).collect()
    });
    let failures: String = reports.concat();
    assert!(failures.is_empty(), "{failures}");
}
