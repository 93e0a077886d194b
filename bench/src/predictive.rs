//! Predictive local echo: how soon each keystroke of a typing trace is displayed, how often a
//! display is wrong, and whether a password ever shows, for Tern and the stock mosh-client side
//! by side (docs/BENCHMARKS.md, "Predictive echo").
//!
//! * **Trace.** [`trace`]: shell commands with typos fixed by Backspace, arrows, Ctrl-A/Ctrl-E,
//!   vim insert and normal mode, a right prompt, a password prompt; one key per input event at a
//!   typist's pace (seeded gaps of 60-200 ms, now and then 300-900 ms), waiting for each
//!   command's output and pausing to read it (`tern_tests::typing`).
//! * **Reference.** The trace once more with Tern at RTT 0, prediction off, letting the screen
//!   settle after every key: `S_k` is the screen after key `k`. A key's *target* is what changed
//!   from `S_(k-1)` to `S_k`: for a printable key whose cell changed, the glyph in that cell
//!   ("the glyph in the expected cell"); for a printable key that leaves its cell blank (a space
//!   at the end of a line), the cursor one cell on and its row, whatever other rows do (vim's
//!   ruler: a letter's target leaves it out too); otherwise every changed cell and the cursor;
//!   if only the cursor moved, the cursor and its row; if nothing changed (a password
//!   character), none.
//! * **Runs.** Each client on a fresh server behind the link emulator. Tern is `tern-probe`'s
//!   engine ([`run_probe`] with a timeline): key time = just before the bytes are handed to the
//!   session, display = the display frame after every event, server = its newest server screen,
//!   all on its monotonic clock. mosh-client runs in tmux: key time = when the `send-keys` command
//!   is written to a control-mode client, display = its `%output` notifications replayed into a
//!   terminal (each notification's read time), server = the tapped datagrams decrypted and
//!   applied as mosh-client applies them (hand-over time).
//! * **Key to display.** Key `k` is displayed at the first display state, at or after the key,
//!   that satisfies its target while the client's server screen does not (a prediction), or at
//!   the client's echo: the moment its server screen first reached `S_k` (or a later reference
//!   screen), if the display satisfies the target then (or within 50 ms, the redraw). A key with
//!   no target, or whose target never showed on its own (a later key changed the cell first), is
//!   counted as not displayed.
//! * **Wrong display.** A cell showing a non-blank glyph that the client's server screen does not
//!   show there is a predicted display. It is wrong if, while it was shown, neither the server
//!   screen nor any application state it stood for showed that glyph in that cell: the
//!   reference screens from the one the server screen had reached when it appeared to the one
//!   after the last key typed before it went (so a right prediction that the user's next key
//!   replaced, before the server's frame showed it, is not wrong). It is charged to the newest
//!   key typed before it appeared. States shorter than 2 ms (a terminal write read in two
//!   pieces) are ignored.
//! * **Secret.** Display states with any of the password's characters, which the trace types
//!   nowhere else and no program prints.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tern::predict::{PredictConfig, PredictCounters, PredictMode};
use tern::session::SessionConfig;
use tern::terminal::{Complete, Emulator, ScreenText, Size, screen_text};
use tern::wire::Key;
use tern_native::NativeClient;
use tern_native::probe::{ProbeOptions, run_probe};
use tern_native::script::Action;
use tern_tests::linkemu::{Dir, DirectionConfig, TapRecord};
use tern_tests::mosh_client::{
    Capture, TempDir, TmuxControl, TmuxMoshClient, start_reference_server_with,
};
use tern_tests::typing::{SECRET, TraceBuilder, is_secret_char, key_count, typing_env};

use crate::decode::{Diff, decode};
use crate::link::{COLS, Link, ROWS};
use crate::report::Report;
use crate::stats::{median, ms, p95};
use crate::{Options, progress};

/// "Displayed immediately": within this long of the key.
pub const IMMEDIATE_MS: f64 = 5.0;
/// After the echo reached the client, its redraw must come within this long.
const REDRAW_MS: f64 = 50.0;
/// Display states shorter than this are a write read in pieces, not something a person sees.
const TRANSIENT_MS: f64 = 2.0;
/// The reference run: the screen has settled when nothing changed for this long.
const QUIET: Duration = Duration::from_millis(100);
const SETTLE_LIMIT: Duration = Duration::from_secs(5);
/// How far ahead of the last matched reference screen a server screen is looked up.
const LOOKAHEAD: usize = 80;

/// The typing trace and its parts (name, range of key indices). `quick`: the shell lines with
/// typos and arrows and the password only.
pub fn trace(quick: bool, seed: u64) -> (Vec<Action>, Vec<(&'static str, Range<usize>)>) {
    let mut t = TraceBuilder::new(seed);
    let mut parts = Vec::new();
    let mut part = |t: &TraceBuilder, name: &'static str, start: usize| {
        parts.push((name, start..key_count(&t.build())));
    };
    // Shell, typos fixed with Backspace, arrows, Ctrl-A / Ctrl-E.
    t.command("echo hwllo{BS}{BS}{BS}{BS}ello world");
    t.command("echo one three{Left}{Left}{Left}{Left}{Left}two {C-e} four");
    if !quick {
        t.command("ls -a");
        t.command("ech abc{C-a}{Right}{Right}{Right}o{C-e} def");
        t.command("echo $((17*3)) apples");
    }
    part(&t, "shell", 0);
    if !quick {
        // vim: insert mode, normal-mode moves and edits, write and quit (`:x`: `:wq` has a q,
        // which is a password letter).
        let start = key_count(&t.build());
        t.keys("vim notes.md{Enter}").wait("[New]");
        t.keys("ithe cat sat on the mat{Enter}a second line{Esc}");
        t.keys("k0wdwAs, really{Esc}");
        t.keys(":x{Enter}").wait_prompt();
        t.command("cat notes.md");
        part(&t, "vim", start);
    }
    // A password prompt (echo off): none of it may ever show.
    let start = key_count(&t.build());
    t.keys("signin{Enter}").wait("Password:");
    t.keys(SECRET);
    t.pause(400);
    t.keys("{Enter}").wait(&format!("got {} chars", SECRET.chars().count())).wait_prompt();
    t.command("echo after");
    part(&t, "password", start);
    if !quick {
        // A right prompt (last: it stays): typing pushes it in an insert-mode prediction.
        let start = key_count(&t.build());
        t.keys("PS1=$RP{Enter}").wait_prompt();
        t.command("echo left right");
        t.command("echo up{BS}{BS}down");
        part(&t, "right prompt", start);
    }
    (t.build(), parts)
}

/// One emulated link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSetting {
    pub rtt_ms: u64,
    /// Extra delay per datagram, uniform in [0, jitter] each way (no reordering).
    pub jitter_ms: u64,
    /// Loss each way.
    pub loss: f64,
}

impl LinkSetting {
    pub const fn rtt(rtt_ms: u64) -> LinkSetting {
        LinkSetting { rtt_ms, jitter_ms: 0, loss: 0.0 }
    }

    pub fn label(&self) -> String {
        let mut label = format!("RTT {} ms", self.rtt_ms);
        if self.jitter_ms > 0 {
            label.push_str(&format!(", jitter {} ms", self.jitter_ms));
        }
        if self.loss > 0.0 {
            label.push_str(&format!(", {} % loss", self.loss * 100.0));
        }
        label
    }

    fn each_way(&self) -> DirectionConfig {
        DirectionConfig {
            delay: Duration::from_millis(self.rtt_ms / 2),
            jitter: Duration::from_millis(self.jitter_ms),
            loss: self.loss,
            ..DirectionConfig::default()
        }
    }
}

/// A client in the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `tern-probe --predict adaptive`.
    Tern,
    /// `tern-probe --predict adaptive --predict-overwrite`.
    TernOverwrite,
    /// `tern-probe --predict adaptive` with the predictor's rules before issue 36 (no prompt
    /// that echoed before confirms a new line; shifted cells not rebuilt): the change side by side.
    TernBefore36,
    /// mosh-client, `MOSH_PREDICTION_DISPLAY=adaptive`.
    MoshClient,
}

impl Client {
    pub fn label(self) -> &'static str {
        match self {
            Client::Tern => "tern-probe",
            Client::TernOverwrite => "tern-probe --predict-overwrite",
            Client::TernBefore36 => "tern-probe (rules before issue 36)",
            Client::MoshClient => "mosh-client",
        }
    }
}

/// A screen as text cells: one `char` a column (the trace and its programs print only
/// one-column characters), and the cursor (row, column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Screen {
    rows: Vec<Vec<char>>,
    cursor: (usize, usize),
}

impl Screen {
    pub fn from_text(text: &ScreenText) -> Screen {
        let rows = text
            .rows
            .iter()
            .map(|row| {
                let mut cells: Vec<char> = row.chars().collect();
                cells.resize(usize::from(COLS), ' ');
                cells
            })
            .collect();
        Screen { rows, cursor: (usize::from(text.cursor.row), usize::from(text.cursor.col)) }
    }

    fn of(emulator: &Emulator) -> Screen {
        Screen::from_text(&screen_text(emulator.framebuffer()))
    }

    fn cell(&self, row: usize, col: usize) -> char {
        self.rows.get(row).and_then(|r| r.get(col)).copied().unwrap_or(' ')
    }

    fn contains(&self, text: &str) -> bool {
        self.rows.iter().any(|r| r.iter().collect::<String>().contains(text))
    }

    pub fn text(&self) -> String {
        self.rows
            .iter()
            .map(|r| r.iter().collect::<String>().trim_end().to_owned() + "\n")
            .collect()
    }
}

/// What one client did during one run, on one clock (ms since an origin of the run).
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// Each key and when it was handed to the client.
    pub keys: Vec<(f64, Vec<u8>)>,
    /// The displayed screen, each time it changed.
    pub display: Vec<(f64, Screen)>,
    /// The newest server screen the client holds, each time it changed.
    pub server: Vec<(f64, Screen)>,
    /// Tern only: the predictor's counters at the end.
    pub counters: Option<PredictCounters>,
}

/// The reference screens `S_0 ..= S_n` (see the module documentation).
pub fn reference(actions: &[Action]) -> anyhow::Result<Vec<Screen>> {
    let home = TempDir::new("bench-ref-home");
    let server = start_reference_server_with(&home.0, &typing_env());
    let result = reference_run(&server.key, server.port, actions);
    server.kill();
    result
}

fn reference_run(key: &Key, port: u16, actions: &[Action]) -> anyhow::Result<Vec<Screen>> {
    let mut config = SessionConfig::new(key.clone(), COLS, ROWS);
    config.predict = PredictConfig { mode: PredictMode::Never, overwrite: false };
    let mut client: NativeClient<Complete> =
        NativeClient::connect(([127, 0, 0, 1], port).into(), config).context("udp")?;
    let mut screens = Vec::new();
    let mut typed = false;
    for action in actions {
        match action {
            Action::Type(bytes) => {
                if typed || screens.is_empty() {
                    screens.push(settle(&mut client)?);
                }
                client.type_bytes(bytes).context("udp")?;
                typed = true;
            }
            Action::WaitText { text, timeout } => {
                let seen = client
                    .run_until(*timeout, |s| {
                        screen_text(s.server_state().framebuffer())
                            .rows
                            .iter()
                            .any(|r| r.contains(text.as_str()))
                    })
                    .context("udp")?;
                if !seen {
                    bail!("reference: {text:?} not on the screen");
                }
            }
            Action::Sleep(_) => {}
            Action::Resize { .. } => bail!("the trace does not resize"),
        }
    }
    screens.push(settle(&mut client)?);
    Ok(screens)
}

/// Runs until the typed input is acknowledged and the screen stayed the same for [`QUIET`].
fn settle(client: &mut NativeClient<Complete>) -> anyhow::Result<Screen> {
    let started = Instant::now();
    let mut last = None;
    let mut since = Instant::now();
    loop {
        // The loop looks at the session only when something happens: step in short slices.
        client.run_for(Duration::from_millis(10)).context("udp")?;
        let s = client.session();
        let num = s.server_state_num();
        if last != Some(num) {
            last = Some(num);
            since = Instant::now();
        }
        if s.has_heard_server() && s.unacked_input() == 0 && since.elapsed() >= QUIET {
            return Ok(Screen::from_text(&screen_text(s.server_state().framebuffer())));
        }
        if started.elapsed() >= SETTLE_LIMIT {
            bail!("reference: the screen did not settle");
        }
    }
}

/// Tern: `tern-probe`'s engine with a timeline, through `setting` (`before_36`: the predictor's
/// rules before issue 36).
pub fn run_tern(
    setting: &LinkSetting,
    actions: &[Action],
    predict: PredictConfig,
    before_36: bool,
    seed: u64,
) -> anyhow::Result<Recording> {
    let link = Link::start_with(setting.each_way(), seed, &typing_env())?;
    let options = ProbeOptions {
        cols: COLS,
        rows: ROWS,
        seed,
        predict,
        timeline: true,
        predict_before_36: before_36,
        ..ProbeOptions::new(link.addr(), link.server.key.clone())
    };
    let result = run_probe(&options, actions).map_err(anyhow::Error::msg)?;
    let timeline = result.timeline.context("the probe kept no timeline")?;
    let t = |at: tern::time::Instant| at.as_micros() as f64 / 1000.0;
    let snapshots = |list: &[tern_native::probe::Snapshot]| {
        list.iter().map(|s| (t(s.at), Screen::from_text(&s.screen))).collect()
    };
    Ok(Recording {
        keys: timeline.keys.iter().map(|k| (t(k.at), k.bytes.clone())).collect(),
        display: snapshots(&timeline.display),
        server: snapshots(&timeline.server),
        counters: Some(result.predict_counters),
    })
}

/// The stock mosh-client in tmux (`MOSH_PREDICTION_DISPLAY=mode`), through `setting`.
pub fn run_mosh(
    setting: &LinkSetting,
    actions: &[Action],
    mode: PredictMode,
    seed: u64,
) -> anyhow::Result<Recording> {
    let link = Link::start_with(setting.each_way(), seed, &typing_env())?;
    let key = link.server.key.to_base64();
    let client =
        TmuxMoshClient::start_with(link.addr().port(), &key, COLS, ROWS, Some(mode.as_str()));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !client.capture().rows.iter().any(|r| r.contains("tern$")) {
        if Instant::now() >= deadline {
            bail!("mosh-client: no prompt within 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut control = client.control_with_output().context("tmux control mode")?;
    let capture = client.capture();
    let origin = Instant::now();
    // What came before the capture is in it.
    control.output();
    let mut emulator = Emulator::new(Size { cols: COLS, rows: ROWS });
    emulator.feed(&redraw(&capture));
    let mut rec = Recording::default();
    rec.display.push((0.0, Screen::of(&emulator)));
    let at = |i: Instant| ms(i.saturating_duration_since(origin));
    for action in actions {
        match action {
            Action::Type(bytes) => {
                let (written, _) = control.send_keys(bytes).context("tmux send-keys")?;
                rec.keys.push((at(written), bytes.clone()));
            }
            Action::Sleep(d) => std::thread::sleep(*d),
            Action::WaitText { text, timeout } => {
                let deadline = Instant::now() + *timeout;
                loop {
                    pump(&control, &mut emulator, &mut rec, origin);
                    if rec.display.last().is_some_and(|(_, s)| s.contains(text)) {
                        break;
                    }
                    if Instant::now() >= deadline {
                        bail!("mosh-client: {text:?} not displayed within {timeout:?}");
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Action::Resize { .. } => bail!("the trace does not resize"),
        }
    }
    // Let the last keys be echoed and judged, as the probe does.
    std::thread::sleep(Duration::from_millis(2 * setting.rtt_ms + 1000));
    pump(&control, &mut emulator, &mut rec, origin);
    drop(control);
    drop(client);
    rec.server = server_screens(&link.server.key, &link.tap.take(), origin);
    Ok(rec)
}

/// Bytes that draw a captured pane on a blank terminal (text only: renditions do not matter here).
fn redraw(capture: &Capture) -> Vec<u8> {
    let mut out = b"\x1b[H\x1b[2J".to_vec();
    for (i, row) in capture.rows.iter().enumerate() {
        out.extend_from_slice(format!("\x1b[{};1H{row}", i + 1).as_bytes());
    }
    let (row, col) = capture.cursor;
    out.extend_from_slice(format!("\x1b[{};{}H", row + 1, col + 1).as_bytes());
    out
}

/// Replays the pane output read so far, one display state per `%output` notification.
fn pump(control: &TmuxControl, emulator: &mut Emulator, rec: &mut Recording, origin: Instant) {
    for out in control.output() {
        emulator.feed(&out.bytes);
        let screen = Screen::of(emulator);
        if rec.display.last().is_none_or(|(_, s)| *s != screen) {
            rec.display.push((ms(out.at.saturating_duration_since(origin)), screen));
        }
    }
}

/// The server screens mosh-client held, from the tap: each server instruction applied to the
/// state it is based on, when it was handed to the client, if it made a newer state.
fn server_screens(key: &Key, records: &[TapRecord], origin: Instant) -> Vec<(f64, Screen)> {
    let mut states: HashMap<u64, Complete> = HashMap::new();
    states.insert(0, Complete::new(COLS, ROWS));
    let mut newest = 0;
    let mut out: Vec<(f64, Screen)> = Vec::new();
    for event in decode(key, records).iter().filter(|e| e.dir == Dir::Down) {
        let (Diff::Host(host), Some(released)) = (&event.diff, event.released) else { continue };
        let instruction = &event.instruction;
        if instruction.new_num.0 <= newest {
            continue;
        }
        let Some(mut next) = states.get(&instruction.old_num.0).cloned() else { continue };
        if next.apply_events(host).is_err() {
            continue;
        }
        newest = instruction.new_num.0;
        let screen = Screen::from_text(&screen_text(next.framebuffer()));
        states.insert(newest, next);
        let throwaway = instruction.throwaway_num.0;
        states.retain(|&n, _| n >= throwaway || n == newest);
        if out.last().is_none_or(|(_, s)| *s != screen) {
            out.push((ms(released.saturating_duration_since(origin)), screen));
        }
    }
    out
}

/// How a key is classed in the details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyClass {
    Printable,
    Backspace,
    Arrow,
    Enter,
    Other,
}

impl KeyClass {
    pub const ALL: [KeyClass; 5] = [
        KeyClass::Printable,
        KeyClass::Backspace,
        KeyClass::Arrow,
        KeyClass::Enter,
        KeyClass::Other,
    ];

    pub fn of(bytes: &[u8]) -> KeyClass {
        match bytes {
            b"\r" => KeyClass::Enter,
            b"\x7f" => KeyClass::Backspace,
            [0x1b, b'[' | b'O', b'A'..=b'D'] => KeyClass::Arrow,
            _ => match std::str::from_utf8(bytes).ok().map(|s| s.chars().collect::<Vec<_>>()) {
                Some(chars) if chars.len() == 1 && !chars[0].is_control() => KeyClass::Printable,
                _ => KeyClass::Other,
            },
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            KeyClass::Printable => "printable",
            KeyClass::Backspace => "Backspace",
            KeyClass::Arrow => "arrows",
            KeyClass::Enter => "Enter",
            KeyClass::Other => "other",
        }
    }
}

/// What a key should make the display show (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
enum Target {
    Glyph { row: usize, col: usize, glyph: char },
    Cells { cells: Vec<(usize, usize, char)>, cursor: (usize, usize) },
    Cursor { cursor: (usize, usize), row: Vec<char> },
    Nothing,
}

impl Target {
    fn of(before: &Screen, after: &Screen, bytes: &[u8]) -> Target {
        let mut cells = Vec::new();
        for (r, (a, b)) in before.rows.iter().zip(&after.rows).enumerate() {
            for (c, (x, y)) in a.iter().zip(b).enumerate() {
                if x != y {
                    cells.push((r, c, *y));
                }
            }
        }
        let (row, col) = before.cursor;
        let printable = KeyClass::of(bytes) == KeyClass::Printable;
        if printable && cells.iter().any(|&(r, c, _)| (r, c) == (row, col)) {
            return Target::Glyph { row, col, glyph: after.cell(row, col) };
        }
        // A printable key that leaves its cell as it was (a space over a blank): its effect is
        // the cursor moving past it on its row, as a letter's is its glyph. Other rows (vim's
        // ruler counting columns) are left out for both.
        let blank = |s: &Screen| s.cell(row, col) == ' ';
        if printable && blank(before) && blank(after) && after.cursor == (row, col + 1) {
            let row = after.rows.get(row).cloned().unwrap_or_default();
            return Target::Cursor { cursor: after.cursor, row };
        }
        if !cells.is_empty() {
            return Target::Cells { cells, cursor: after.cursor };
        }
        if after.cursor != before.cursor {
            let row = after.rows.get(after.cursor.0).cloned().unwrap_or_default();
            return Target::Cursor { cursor: after.cursor, row };
        }
        Target::Nothing
    }

    fn shown(&self, screen: &Screen) -> bool {
        match self {
            Target::Glyph { row, col, glyph } => screen.cell(*row, *col) == *glyph,
            Target::Cells { cells, cursor } => {
                screen.cursor == *cursor && cells.iter().all(|&(r, c, g)| screen.cell(r, c) == g)
            }
            Target::Cursor { cursor, row } => {
                screen.cursor == *cursor && screen.rows.get(cursor.0) == Some(row)
            }
            Target::Nothing => false,
        }
    }
}

/// One client's numbers for one run.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    pub keys: usize,
    /// Key to display, ms, per key (`None`: not displayed, see the module documentation).
    pub latency: Vec<Option<f64>>,
    pub classes: Vec<KeyClass>,
    /// Keys with nothing to show (password characters, a key the program ignored).
    pub no_effect: usize,
    /// Keys with a target that was never displayed on its own.
    pub not_displayed: usize,
    /// Predicted displays (non-blank glyphs shown before the server screen showed them there)
    /// and the wrong ones among them.
    pub predicted_displays: usize,
    pub wrong_displays: usize,
    /// Keys that caused at least one wrong display, and which (indices into the trace's keys).
    pub wrong_keys: usize,
    pub wrong_key_list: Vec<usize>,
    /// Longest a wrong glyph stayed, ms.
    pub wrong_longest_ms: f64,
    /// Each wrong display: (when it appeared, row, column, glyph, how long it stayed).
    pub wrong_list: Vec<(f64, usize, usize, char, f64)>,
    /// Display states showing a character of the password, and server states doing so (the
    /// trace's own check: must be 0).
    pub secret_displayed: usize,
    pub secret_on_server: usize,
    /// Whether the client's last server screen and display equal the reference's last screen.
    pub final_matches: bool,
}

impl Metrics {
    /// Keys displayed within [`IMMEDIATE_MS`] / all keys.
    pub fn immediate_fraction(&self) -> f64 {
        self.immediate_in(None)
    }

    pub fn immediate_in(&self, class: Option<KeyClass>) -> f64 {
        let keys: Vec<&Option<f64>> = self
            .latency
            .iter()
            .zip(&self.classes)
            .filter(|(_, c)| class.is_none_or(|k| **c == k))
            .map(|(l, _)| l)
            .collect();
        if keys.is_empty() {
            return f64::NAN;
        }
        let fast = keys.iter().filter(|l| l.is_some_and(|v| v <= IMMEDIATE_MS)).count();
        fast as f64 / keys.len() as f64
    }

    /// Latencies of the displayed keys (of one class).
    pub fn latencies(&self, class: Option<KeyClass>) -> Vec<f64> {
        self.latency
            .iter()
            .zip(&self.classes)
            .filter(|(_, c)| class.is_none_or(|k| **c == k))
            .filter_map(|(l, _)| *l)
            .collect()
    }

    pub fn median(&self, class: Option<KeyClass>) -> Option<f64> {
        median(&self.latencies(class))
    }

    pub fn p95(&self, class: Option<KeyClass>) -> Option<f64> {
        p95(&self.latencies(class))
    }

    /// Keys causing a wrong display / all keys.
    pub fn wrong_per_key(&self) -> f64 {
        self.wrong_keys as f64 / self.keys.max(1) as f64
    }

    /// Keys of `part` displayed within [`IMMEDIATE_MS`] / keys of `part`.
    pub fn immediate_in_part(&self, part: &Range<usize>) -> f64 {
        let keys =
            &self.latency[part.start.min(self.latency.len())..part.end.min(self.latency.len())];
        let fast = keys.iter().filter(|l| l.is_some_and(|v| v <= IMMEDIATE_MS)).count();
        fast as f64 / keys.len().max(1) as f64
    }

    /// Keys of `part` that caused a wrong display.
    pub fn wrong_keys_in_part(&self, part: &Range<usize>) -> usize {
        self.wrong_key_list.iter().filter(|k| part.contains(k)).count()
    }
}

/// The state of a timeline at `t`: the last entry at or before it (the first if none).
fn at(list: &[(f64, Screen)], t: f64) -> Option<&Screen> {
    let i = list.partition_point(|(ti, _)| *ti <= t);
    list.get(i.saturating_sub(1)).map(|(_, s)| s)
}

/// Scores one recording against the reference.
pub fn analyze(rec: &Recording, reference: &[Screen]) -> anyhow::Result<Metrics> {
    let n = rec.keys.len();
    if reference.len() != n + 1 {
        bail!("{n} keys typed, {} reference screens", reference.len());
    }
    let mut m = Metrics { keys: n, ..Metrics::default() };
    // When the client's server screen first reached each reference screen.
    let mut reached = vec![f64::INFINITY; n + 1];
    // The reference screen the server screen had reached, from each time on.
    let mut progress_at: Vec<(f64, usize)> = vec![(f64::NEG_INFINITY, 0)];
    let mut progress = 0;
    for (t, screen) in &rec.server {
        let end = (progress + LOOKAHEAD).min(n);
        if let Some(j) = (progress..=end).find(|&j| reference[j] == *screen) {
            for r in &mut reached[progress..=j] {
                *r = r.min(*t);
            }
            progress = j;
            progress_at.push((*t, j));
        }
    }
    let echo_at = |k: usize| reached[k..].iter().copied().fold(f64::INFINITY, f64::min);
    for (k, (key_at, bytes)) in rec.keys.iter().enumerate() {
        let class = KeyClass::of(bytes);
        m.classes.push(class);
        let target = Target::of(&reference[k], &reference[k + 1], bytes);
        if target == Target::Nothing {
            m.no_effect += 1;
            m.latency.push(None);
            continue;
        }
        let echo = echo_at(k + 1);
        // Before the echo: the display turning to show it (it did not just before), with a
        // prediction on screen (the display is not the server screen) or right at the key.
        let predicted = rec
            .display
            .iter()
            .enumerate()
            .filter(|(_, (t, _))| *t >= *key_at && *t < echo + REDRAW_MS)
            .find(|&(i, (t, s))| {
                let before = i.checked_sub(1).map(|j| &rec.display[j].1);
                target.shown(s)
                    && !before.is_some_and(|b| target.shown(b))
                    && (at(&rec.server, *t) != Some(s) || *t - key_at <= IMMEDIATE_MS)
            })
            .map(|(_, (t, _))| *t);
        // The echo drawn.
        let echoed = if echo.is_finite() {
            if at(&rec.display, echo).is_some_and(|s| target.shown(s)) {
                Some(echo)
            } else {
                rec.display
                    .iter()
                    .filter(|(t, _)| *t > echo && *t <= echo + REDRAW_MS)
                    .find(|(_, s)| target.shown(s))
                    .map(|(t, _)| *t)
            }
        } else {
            None
        };
        let shown = match (predicted, echoed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if shown.is_none() {
            m.not_displayed += 1;
        }
        m.latency.push(shown.map(|t| (t - key_at).max(0.0)));
    }
    wrong_displays(rec, reference, &progress_at, &mut m);
    m.secret_displayed = rec.display.iter().filter(|(_, s)| has_secret(s)).count();
    m.secret_on_server = rec.server.iter().filter(|(_, s)| has_secret(s)).count();
    let last = reference.last();
    m.final_matches =
        rec.server.last().map(|(_, s)| s) == last && rec.display.last().map(|(_, s)| s) == last;
    Ok(m)
}

/// A readable log of a run (keys with their latency, display and server changes row by row),
/// for `TERN_BENCH_PREDICT_DUMP=DIR`.
pub fn dump(rec: &Recording, m: &Metrics) -> String {
    let mut lines: Vec<(f64, u8, String)> = Vec::new();
    for (i, (t, bytes)) in rec.keys.iter().enumerate() {
        let shown = m.latency.get(i).copied().flatten();
        let shown = shown.map_or("not displayed".to_owned(), |l| format!("shown after {l:.1} ms"));
        lines.push((*t, 0, format!("key {:?}: {shown}", String::from_utf8_lossy(bytes))));
    }
    for &(t, r, c, glyph, stayed) in &m.wrong_list {
        lines.push((t, 3, format!("WRONG {glyph:?} at ({r}, {c}) for {stayed:.1} ms")));
    }
    for (tag, list) in [(1u8, &rec.server), (2u8, &rec.display)] {
        let mut previous: Option<&Screen> = None;
        for (t, screen) in list {
            let name = if tag == 1 { "server " } else { "display" };
            for (r, row) in screen.rows.iter().enumerate() {
                if previous.is_none_or(|p| p.rows.get(r) != Some(row)) {
                    let text: String = row.iter().collect();
                    lines.push((*t, tag, format!("{name} row {r:2}: {}", text.trim_end())));
                }
            }
            if previous.is_none_or(|p| p.cursor != screen.cursor) {
                lines.push((*t, tag, format!("{name} cursor {:?}", screen.cursor)));
            }
            previous = Some(screen);
        }
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    lines.iter().map(|(t, _, text)| format!("{t:10.1} {text}\n")).collect()
}

fn has_secret(screen: &Screen) -> bool {
    screen.rows.iter().flatten().any(|&c| is_secret_char(c))
}

/// One glyph on display in one cell, from `since`.
#[derive(Clone, Copy)]
struct Episode {
    glyph: char,
    since: f64,
    /// The server screen showed this glyph in this cell at some point during the episode.
    on_server: bool,
    predicted: bool,
}

/// Whether `glyph` in that cell is something the application showed (or was about to) while
/// the display showed it: the server screen had it, or a reference screen between the one the
/// server had reached when it appeared and the one after the last key typed before it went.
fn wrong_displays(
    rec: &Recording,
    reference: &[Screen],
    progress_at: &[(f64, usize)],
    m: &mut Metrics,
) {
    let progress = |t: f64| {
        let i = progress_at.partition_point(|(ti, _)| *ti <= t);
        progress_at[i.saturating_sub(1)].1
    };
    let legit = |e: &Episode, (r, c): (usize, usize), until: f64| {
        let from = progress(e.since);
        let to = rec.keys.partition_point(|(t, _)| *t <= until).max(from);
        e.on_server
            || reference[from..=to.min(reference.len() - 1)].iter().any(|s| s.cell(r, c) == e.glyph)
    };
    // Server states first at equal times: a display redrawn from a server state is not a
    // prediction.
    let mut events: Vec<(f64, bool, &Screen)> = rec
        .server
        .iter()
        .map(|(t, s)| (*t, false, s))
        .chain(rec.display.iter().map(|(t, s)| (*t, true, s)))
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let blank =
        Screen { rows: vec![vec![' '; usize::from(COLS)]; usize::from(ROWS)], cursor: (0, 0) };
    let mut server = &blank;
    let mut open: HashMap<(usize, usize), Episode> = HashMap::new();
    let mut wrong_keys = BTreeSet::new();
    let mut close = |e: Episode, (r, c): (usize, usize), until: f64, m: &mut Metrics| {
        if !e.predicted || until - e.since < TRANSIENT_MS {
            return;
        }
        m.predicted_displays += 1;
        if !legit(&e, (r, c), until) {
            m.wrong_displays += 1;
            m.wrong_longest_ms = m.wrong_longest_ms.max(until - e.since);
            m.wrong_list.push((e.since, r, c, e.glyph, until - e.since));
            let key = rec.keys.partition_point(|(t, _)| *t <= e.since);
            if key > 0 {
                wrong_keys.insert(key - 1);
            }
        }
    };
    for (t, is_display, screen) in events {
        if !is_display {
            server = screen;
            for (&(r, c), e) in open.iter_mut() {
                if server.cell(r, c) == e.glyph {
                    e.on_server = true;
                }
            }
            continue;
        }
        for (r, row) in screen.rows.iter().enumerate() {
            for (c, &glyph) in row.iter().enumerate() {
                let current = open.get(&(r, c)).map(|e| e.glyph);
                if current == Some(glyph) || (current.is_none() && glyph == ' ') {
                    continue;
                }
                if let Some(e) = open.remove(&(r, c)) {
                    close(e, (r, c), t, m);
                }
                if glyph != ' ' {
                    let on_server = server.cell(r, c) == glyph;
                    open.insert(
                        (r, c),
                        Episode { glyph, since: t, on_server, predicted: !on_server },
                    );
                }
            }
        }
    }
    let end = rec.display.last().map_or(0.0, |(t, _)| *t) + 1000.0;
    for (cell, e) in open {
        close(e, cell, end, m);
    }
    m.wrong_keys = wrong_keys.len();
    m.wrong_key_list = wrong_keys.into_iter().collect();
}

// The suite's `predict` part.

/// The predictive-echo targets: at least the stock client's share of keys displayed at once
/// (and the paper's 70 % at 200 ms), wrong displays no more often than it and on at most 1 % of
/// keys, never a password character, and printable keys shown in under 5 ms (median) on slow
/// links.
const PREDICT_IMMEDIATE_AT_200: f64 = 0.70;
const PREDICT_WRONG_MAX: f64 = 0.01;
const PREDICT_PRINTABLE_MEDIAN_MS: f64 = 5.0;

/// The suite's `predict` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let seed = 0x7E4D;
    let (actions, parts) = trace(options.predict_quick_trace, seed);
    progress(&format!(
        "predict: reference screens ({} keys at RTT 0, settling after each)",
        key_count(&actions)
    ));
    let reference = match reference(&actions) {
        Ok(r) => r,
        Err(e) => {
            report.problems.push(format!("predictive echo: reference run failed: {e:#}"));
            return;
        }
    };
    let adaptive = PredictConfig::default();
    let overwrite = PredictConfig { overwrite: true, ..adaptive };
    for (i, setting) in options.predict_links.iter().enumerate() {
        let label = setting.label();
        let plain = setting.jitter_ms == 0 && setting.loss == 0.0;
        let mut runs: Vec<(Client, Metrics)> = Vec::new();
        let mut clients = vec![Client::Tern, Client::MoshClient];
        // Overwrite mode for comparison (details only), where the right prompt matters most.
        if plain && setting.rtt_ms == 200 && !options.predict_quick_trace {
            clients.push(Client::TernOverwrite);
        }
        // The predictor before issue 36's rules, where they matter (details only).
        if plain && setting.rtt_ms >= 200 && !options.predict_quick_trace {
            clients.push(Client::TernBefore36);
        }
        for client in clients {
            progress(&format!("predict: {} at {label}", client.label()));
            let link_seed = seed + i as u64;
            let recording = match client {
                Client::Tern => run_tern(setting, &actions, adaptive, false, link_seed),
                Client::TernOverwrite => run_tern(setting, &actions, overwrite, false, link_seed),
                Client::TernBefore36 => run_tern(setting, &actions, adaptive, true, link_seed),
                Client::MoshClient => run_mosh(setting, &actions, adaptive.mode, link_seed),
            };
            let metrics = recording.and_then(|rec| analyze(&rec, &reference).map(|m| (rec, m)));
            match metrics {
                Ok((rec, m)) => {
                    if let Some(dir) = std::env::var_os("TERN_BENCH_PREDICT_DUMP") {
                        let file = std::path::Path::new(&dir).join(format!(
                            "{}-{}.log",
                            client.label(),
                            label.replace([' ', ',', '%'], "")
                        ));
                        let _ = std::fs::write(file, dump(&rec, &m));
                    }
                    if !m.final_matches {
                        report.problems.push(format!(
                            "predictive echo, {}, {label}: the final screen differs from the reference run's",
                            client.label()
                        ));
                    }
                    if m.secret_on_server > 0 {
                        report.problems.push(format!(
                            "predictive echo, {}, {label}: the server showed a password character (the trace is wrong)",
                            client.label()
                        ));
                    }
                    details(report, client, &label, &m, &rec, &parts);
                    runs.push((client, m));
                }
                Err(e) => report
                    .problems
                    .push(format!("predictive echo, {}, {label} failed: {e:#}", client.label())),
            }
        }
        let find = |c| runs.iter().find(|(k, _)| *k == c).map(|(_, m)| m);
        let (Some(tern), Some(mosh)) = (find(Client::Tern), find(Client::MoshClient)) else {
            continue;
        };
        let at_200 = setting.rtt_ms == 200 && setting.jitter_ms == 0 && setting.loss == 0.0;
        let (t, m) = (tern.immediate_fraction(), mosh.immediate_fraction());
        let floor = if at_200 { PREDICT_IMMEDIATE_AT_200 } else { 0.0 };
        report.row(
            format!("keys displayed within 5 ms, tern-probe (adaptive), {label}"),
            t * 100.0,
            "%",
            format!(
                "≥ mosh-client's ({:.1} %){}",
                m * 100.0,
                if at_200 { " and ≥ 70 %" } else { "" }
            ),
            t >= m && t >= floor,
        );
        let (t, m) = (tern.wrong_per_key(), mosh.wrong_per_key());
        report.row(
            format!("keys causing a wrong display, tern-probe (adaptive), {label}"),
            t * 100.0,
            "%",
            format!("≤ mosh-client's ({:.1} %) and ≤ 1 %", m * 100.0),
            t <= m && t <= PREDICT_WRONG_MAX,
        );
        report.row(
            format!("password characters displayed, tern-probe (adaptive), {label}"),
            tern.secret_displayed as f64,
            "",
            format!("0 (mosh-client: {})", mosh.secret_displayed),
            tern.secret_displayed == 0,
        );
        if plain
            && setting.rtt_ms >= 200
            && let Some(t) = tern.median(Some(KeyClass::Printable))
        {
            let m = mosh.median(Some(KeyClass::Printable)).unwrap_or(f64::NAN);
            report.row(
                format!("key-to-display median, printable keys, tern-probe (adaptive), {label}"),
                t,
                "ms",
                format!("< {PREDICT_PRINTABLE_MEDIAN_MS} ms (mosh-client: {m:.1} ms)"),
                t < PREDICT_PRINTABLE_MEDIAN_MS,
            );
        }
    }
}

fn details(
    report: &mut Report,
    client: Client,
    label: &str,
    m: &Metrics,
    rec: &Recording,
    parts: &[(&str, std::ops::Range<usize>)],
) {
    const GROUP: &str = "predictive echo";
    let name = |what: &str| format!("{}, {label}: {what}", client.label());
    report.detail(GROUP, name("keys"), m.keys as f64, "");
    report.detail(GROUP, name("keys displayed within 5 ms"), m.immediate_fraction() * 100.0, "%");
    if let (Some(med), Some(p)) = (m.median(None), m.p95(None)) {
        report.detail(GROUP, name("key-to-display median, all keys displayed"), med, "ms");
        report.detail(GROUP, name("key-to-display p95, all keys displayed"), p, "ms");
    }
    for class in KeyClass::ALL {
        let n = m.classes.iter().filter(|c| **c == class).count();
        if n == 0 {
            continue;
        }
        let what = class.label();
        report.detail(
            GROUP,
            name(&format!("{what} ({n} keys): within 5 ms")),
            m.immediate_in(Some(class)) * 100.0,
            "%",
        );
        if let Some(med) = m.median(Some(class)) {
            report.detail(GROUP, name(&format!("{what}: key-to-display median")), med, "ms");
        }
    }
    for (part, keys) in parts {
        let n = keys.len();
        report.detail(
            GROUP,
            name(&format!("{part} ({n} keys): within 5 ms")),
            m.immediate_in_part(keys) * 100.0,
            "%",
        );
        report.detail(
            GROUP,
            name(&format!("{part}: keys causing a wrong display")),
            m.wrong_keys_in_part(keys) as f64,
            "",
        );
    }
    report.detail(GROUP, name("keys with nothing to display"), m.no_effect as f64, "");
    report.detail(GROUP, name("keys never displayed on their own"), m.not_displayed as f64, "");
    report.detail(GROUP, name("predicted glyphs displayed"), m.predicted_displays as f64, "");
    report.detail(GROUP, name("wrong glyphs displayed"), m.wrong_displays as f64, "");
    report.detail(GROUP, name("keys causing a wrong display"), m.wrong_keys as f64, "");
    report.detail(GROUP, name("longest a wrong glyph stayed"), m.wrong_longest_ms, "ms");
    report.detail(
        GROUP,
        name("display states with a password character"),
        m.secret_displayed as f64,
        "",
    );
    if let Some(c) = &rec.counters {
        for (what, v) in [
            ("predictor: made", c.made),
            ("predictor: drawn", c.drawn),
            ("predictor: confirmed", c.confirmed),
            ("predictor: wrong drawn", c.wrong_drawn),
            ("predictor: epochs killed", c.epochs_killed),
            ("predictor: resets", c.resets),
            ("predictor: epochs confirmed at a known prompt", c.prompt_confirmed),
        ] {
            report.detail(GROUP, name(what), v as f64, "");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(rows: &[&str], cursor: (usize, usize)) -> Screen {
        let mut text: Vec<String> = rows.iter().map(|r| (*r).to_owned()).collect();
        text.resize(usize::from(ROWS), String::new());
        Screen::from_text(&ScreenText {
            rows: text,
            cursor: tern::terminal::Pos { row: cursor.0 as u16, col: cursor.1 as u16 },
        })
    }

    #[test]
    fn targets() {
        let a = screen(&["$ ab"], (0, 4));
        let b = screen(&["$ abc"], (0, 5));
        assert_eq!(Target::of(&a, &b, b"c"), Target::Glyph { row: 0, col: 4, glyph: 'c' });
        let c = screen(&["$ ab"], (0, 3));
        assert!(matches!(Target::of(&a, &c, b"\x1b[D"), Target::Cursor { cursor: (0, 3), .. }));
        assert!(matches!(Target::of(&b, &a, b"\x7f"), Target::Cells { .. }));
        assert_eq!(Target::of(&a, &a, b"x"), Target::Nothing);
        // A space at the end of a line in vim: its cell stays blank, the ruler changes; the key
        // is shown when the cursor moves past it.
        let v0 = screen(&["the", "", "1,4"], (0, 3));
        let v1 = screen(&["the", "", "1,5"], (0, 4));
        assert!(matches!(Target::of(&v0, &v1, b" "), Target::Cursor { cursor: (0, 4), .. }));
    }

    #[test]
    fn a_prediction_is_immediate_and_a_wrong_one_is_counted() {
        let s0 = screen(&["$"], (0, 2));
        let s1 = screen(&["$ a"], (0, 3));
        let s2 = screen(&["$ ab"], (0, 4));
        let rec = Recording {
            keys: vec![(100.0, b"a".to_vec()), (200.0, b"b".to_vec())],
            display: vec![
                (0.0, s0.clone()),
                // Both predicted at b, then a wrong glyph that goes away unconfirmed.
                (201.0, s2.clone()),
                (250.0, screen(&["$ ab   X"], (0, 4))),
                (280.0, s2.clone()),
            ],
            server: vec![(0.0, s0.clone()), (300.0, s1.clone()), (400.0, s2.clone())],
            counters: None,
        };
        let m = analyze(&rec, &[s0, s1, s2]).expect("analyzed");
        assert_eq!(m.latency[0], Some(101.0), "a: shown with b's prediction");
        assert_eq!(m.latency[1], Some(1.0), "b: predicted");
        assert_eq!(m.immediate_fraction(), 0.5);
        assert_eq!(m.predicted_displays, 3);
        assert_eq!(m.wrong_displays, 1);
        assert_eq!(m.wrong_keys, 1);
        assert_eq!(m.secret_displayed, 0);
        assert!(m.final_matches);
    }
}
