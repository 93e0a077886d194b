//! Known answers from real mosh 1.4.0 sessions (MOSH-PROTOCOL.md 11.2): the server's HostBytes
//! applied through our `Complete`, compared with what the stock mosh-client drew.

use std::collections::HashMap;

use tern::terminal::{Complete, Emulator, Pos, Renderer, Size, screen_text};
use tern::wire::{HostEvent, StateNum};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/terminal");

/// Server-to-client instructions of a captured session: (old_num, new_num, events).
// Tests are drivers, not core: reading the captured fixtures is the test's I/O.
#[allow(clippy::disallowed_methods)]
fn server_instructions(name: &str) -> Vec<(u64, u64, Vec<HostEvent>)> {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{name}")).expect("fixture");
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        if v["dir"] != "s2c" {
            continue;
        }
        let Some(fields) = v.get("fields") else {
            continue;
        };
        let old = fields["old_num"].as_u64().expect("old_num");
        let new = fields["new_num"].as_u64().expect("new_num");
        let mut events = Vec::new();
        for item in fields["diff"].as_array().expect("diff") {
            if let Some(s) = item.get("hostbytes") {
                events.push(HostEvent::Bytes(s.as_str().expect("hostbytes").as_bytes().to_vec()));
            } else if let Some(n) = item.get("echoack") {
                events.push(HostEvent::EchoAck(StateNum(n.as_u64().expect("echoack"))));
            } else if let Some(r) = item.get("resize") {
                let cols = r[0].as_u64().expect("w") as u16;
                let rows = r[1].as_u64().expect("h") as u16;
                events.push(HostEvent::Resize { cols, rows });
            }
        }
        out.push((old, new, events));
    }
    out
}

/// Applies every instruction to its base state, as mosh-client does; returns all states.
fn replay(name: &str, cols: u16, rows: u16) -> HashMap<u64, Complete> {
    let mut states = HashMap::new();
    states.insert(0, Complete::new(cols, rows));
    for (old, new, events) in server_instructions(name) {
        let Some(base) = states.get(&old) else {
            continue;
        };
        if states.contains_key(&new) {
            continue;
        }
        let mut next = base.clone();
        next.apply_events(&events).expect("apply");
        states.insert(new, next);
    }
    states
}

#[test]
// Tests are drivers, not core: reading the captured fixture is the test's I/O.
#[allow(clippy::disallowed_methods)]
fn real_session_matches_what_mosh_client_drew() {
    let states = replay("real-session.jsonl", 80, 24);
    let last = &states[&u64::MAX];
    assert_eq!(last.framebuffer().size(), Size { cols: 100, rows: 30 });

    // The stock client's own output: 80x24 until its second full repaint, then 100x30; cut
    // before its closing sequence (`ESC[?1l ESC[0m ESC[?25h`).
    let drawn = std::fs::read(format!("{FIXTURES}/client-screen.bin")).expect("fixture");
    let repaint = b"\x1b[r\x1b[0m\x1b[H\x1b[2J";
    let starts: Vec<usize> = drawn
        .windows(repaint.len())
        .enumerate()
        .filter(|(_, w)| *w == repaint)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 2);
    let closing = b"\x1b[?1l\x1b[0m\x1b[?25h";
    let close = drawn.windows(closing.len()).position(|w| w == closing).expect("close");
    let mut terminal = Emulator::new(Size { cols: 80, rows: 24 });
    terminal.feed(&drawn[..starts[1]]);
    terminal.resize(Size { cols: 100, rows: 30 });
    terminal.feed(&drawn[starts[1]..close]);

    let ours = screen_text(last.framebuffer());
    let theirs = screen_text(terminal.framebuffer());
    assert_eq!(ours, theirs, "ours:\n{ours}\nmosh-client:\n{theirs}");
    assert_eq!(ours.rows[1], "$ echo hello");
    assert_eq!(
        ours.rows[4],
        "bin                  etc   lib64       old_root         root  sys  work"
    );
    assert_eq!(ours.rows[8], "$ exit");
    assert_eq!(ours.cursor, Pos { row: 9, col: 0 });
}

#[test]
fn backspace_after_full_last_row_lands_where_mosh_client_puts_it() {
    // `clear; printf '\033[24;1H%080d\033[24;78H'`: mosh-server writes 80 zeros on the last row
    // and then three BS, believing the cursor is in "column 81" (MOSH-PROTOCOL.md 8.4).
    let states = replay("bs-test.jsonl", 80, 24);
    let after_printf = screen_text(states[&3].framebuffer());
    assert_eq!(after_printf.rows[23], "0".repeat(80));
    // mosh-client (and xterm) count BS from the last column: 0-based column 76, not 77.
    assert_eq!(after_printf.cursor, Pos { row: 23, col: 76 });

    // Then the shell's `exit` scrolls the screen and is drawn with absolute moves.
    let end = screen_text(states[&u64::MAX].framebuffer());
    assert_eq!(end.rows[21], format!("{}exi", "0".repeat(77)));
    assert_eq!(end.rows[22], "t");
    assert_eq!(end.rows[23], "$");
    assert!(states[&5].framebuffer().row(21).expect("row").is_wrapped());
    assert_eq!(states[&u64::MAX].echo_ack(), StateNum(3));
}

#[test]
fn resize_first_session_repaints_at_the_servers_size() {
    let states = replay("resize-first.jsonl", 80, 24);
    let one = states[&1].framebuffer();
    assert_eq!(one.size(), Size { cols: 100, rows: 30 });
    let end = screen_text(states[&u64::MAX].framebuffer());
    assert_eq!(&end.rows[1..4], ["$ echo hi", "hi", "$ exit"]);
}

#[test]
fn large_output_session_fills_the_screen() {
    // `head -c 3000 /dev/urandom | base64`: 76-column lines, then the scroll shortcut on exit.
    let states = replay("frag-session.jsonl", 80, 24);
    let end = screen_text(states[&u64::MAX].framebuffer());
    assert!(end.rows[..20].iter().all(|r| r.len() == 76 || r.starts_with('$')), "{end}");
    assert_eq!(end.rows[22], "$ exit");
}

#[test]
fn renderer_repaints_every_golden_state_exactly() {
    for name in ["real-session.jsonl", "bs-test.jsonl", "resize-first.jsonl", "frag-session.jsonl"]
    {
        for (num, state) in replay(name, 80, 24) {
            let fb = state.framebuffer();
            let bytes = Renderer::new().render(None, fb);
            let mut fresh = Emulator::new(fb.size());
            fresh.feed(&bytes);
            if let Err(e) = fresh.framebuffer().looks_like(fb) {
                panic!("{name} state {num}: {e}");
            }
        }
    }
}
