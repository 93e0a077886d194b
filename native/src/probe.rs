//! The probe's engine: run a script against a mosh-server and report the final screen.
//!
//! `tern-probe` is this plus argument parsing and printing; tests and the benchmark call it
//! in-process.
//!
//! The probe is a client like the page: after every event it handles (a key, a datagram, a timer)
//! it builds the display frame (the server's screen with the predictions that may be shown), so
//! the predictor's counters (`drawn`, `wrong_drawn`) mean what they mean in the browser. With
//! [`ProbeOptions::timeline`] it also records, on its monotonic clock, every key it handed to the
//! session and every change of the display frame and of the server's screen: what a benchmark
//! needs to time, per key, when the display first showed its effect.

use std::net::SocketAddr;
use std::time::Duration;

use super::NativeClient;
use super::script::Action;
use tern::predict::{PredictConfig, PredictCounters};
use tern::session::{ClientSession, SessionConfig};
use tern::terminal::{Complete, ScreenText, screen_text};
use tern::time::Instant;
use tern::transport::Counters;
use tern::wire::{Key, StateNum};

/// After the script: wait this long at most for every typed key to be acknowledged, then let the
/// screen settle for [`SETTLE`] so the final frame is the server's answer to all of it (and every
/// prediction has been judged: the echo ack comes 50 ms after the echo, a frame later).
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
const SETTLE: Duration = Duration::from_millis(300);

/// Where and how the probe connects.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    pub server: SocketAddr,
    pub key: Key,
    pub cols: u16,
    pub rows: u16,
    pub stop_and_wait: bool,
    pub seed: u64,
    /// Predictive local echo (adaptive by default, as mosh-client).
    pub predict: PredictConfig,
    /// Record the [`Timeline`] (keys, display and server screens over time).
    pub timeline: bool,
    /// The predictor's rules before issue 36 (the benchmark's side-by-side rows).
    pub predict_before_36: bool,
}

impl ProbeOptions {
    /// 80x24, no stop-and-wait, seed 0, adaptive prediction, no timeline.
    pub fn new(server: SocketAddr, key: Key) -> ProbeOptions {
        ProbeOptions {
            server,
            key,
            cols: 80,
            rows: 24,
            stop_and_wait: false,
            seed: 0,
            predict: PredictConfig::default(),
            timeline: false,
            predict_before_36: false,
        }
    }
}

/// What the probe saw at the end.
#[derive(Clone, Debug)]
pub struct ProbeResult {
    /// The server's screen.
    pub screen: ScreenText,
    /// The display frame: the server's screen with the predictions still shown (none once every
    /// prediction has been judged, which the settling time is meant to ensure).
    pub display: ScreenText,
    pub title: String,
    pub counters: Counters,
    pub srtt: Duration,
    pub send_interval: Duration,
    pub predict: PredictConfig,
    pub predict_counters: PredictCounters,
    /// Only with [`ProbeOptions::timeline`].
    pub timeline: Option<Timeline>,
}

/// What happened when, on the client's monotonic clock (zero when the session started).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// Each `type` action: when its bytes were handed to the session (one input event).
    pub keys: Vec<TimedKey>,
    /// The display frame, each time it changed (the first entry is the first frame).
    pub display: Vec<Snapshot>,
    /// The server's screen, each time a new server state changed it.
    pub server: Vec<Snapshot>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedKey {
    pub at: Instant,
    pub bytes: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub at: Instant,
    pub screen: ScreenText,
}

/// Runs `actions` in a fresh session and returns the final screen, or a message saying what failed.
pub fn run_probe(options: &ProbeOptions, actions: &[Action]) -> Result<ProbeResult, String> {
    let mut config = SessionConfig::new(options.key.clone(), options.cols, options.rows);
    config.stop_and_wait = options.stop_and_wait;
    config.seed = options.seed;
    config.predict = options.predict;
    let mut client: NativeClient<Complete> =
        NativeClient::connect(options.server, config).map_err(|e| format!("udp: {e}"))?;
    if options.predict_before_36 {
        client.session_mut().predictor_mut().set_rules_before_36(true);
    }
    let mut observer = Observer::new(options.timeline);
    let io = |e: std::io::Error| format!("udp: {e}");
    observer.look(&mut client).map_err(io)?;
    for action in actions {
        match action {
            Action::Type(bytes) => {
                let at = client.now();
                client.type_bytes(bytes).map_err(io)?;
                observer.key(at, bytes);
                observer.look(&mut client).map_err(io)?;
            }
            Action::Sleep(duration) => {
                client
                    .run_until_mut(*duration, |s, now| {
                        observer.observe(s, now);
                        false
                    })
                    .map_err(io)?;
            }
            Action::Resize { cols, rows } => {
                client.resize(*cols, *rows).map_err(io)?;
                observer.look(&mut client).map_err(io)?;
            }
            Action::WaitText { text, timeout } => {
                let seen = client
                    .run_until_mut(*timeout, |s, now| {
                        observer.observe(s, now);
                        screen_contains(s, text)
                    })
                    .map_err(io)?;
                if !seen {
                    return Err(format!(
                        "wait-text {text:?}: not on the screen after {} ms{}; screen:\n{}",
                        timeout.as_millis(),
                        closed_note(&client),
                        screen_text(client.session().server_state().framebuffer()).trimmed()
                    ));
                }
            }
        }
        if let Some(reason) = client.closed() {
            return Err(format!("the session ended during the script: {reason:?}"));
        }
    }
    client
        .run_until_mut(DRAIN_LIMIT, |s, now| {
            observer.observe(s, now);
            s.unacked_input() == 0 && s.has_heard_server()
        })
        .map_err(io)?;
    client
        .run_until_mut(SETTLE, |s, now| {
            observer.observe(s, now);
            false
        })
        .map_err(io)?;
    let mut display = None;
    client
        .run_until_mut(Duration::ZERO, |s, now| {
            observer.observe(s, now);
            display = s.display_frame().map(|fb| screen_text(&fb));
            true
        })
        .map_err(io)?;
    let session = client.session();
    if !session.has_heard_server() {
        return Err(format!(
            "nothing received from the server at {} (wrong key or port?){}",
            options.server,
            session.last_error().map(|e| format!("; last error: {e}")).unwrap_or_default()
        ));
    }
    let framebuffer = session.server_state().framebuffer();
    let screen = screen_text(framebuffer);
    Ok(ProbeResult {
        display: display.unwrap_or_else(|| screen.clone()),
        screen,
        title: framebuffer.title().to_owned(),
        counters: session.counters().clone(),
        srtt: session.srtt(),
        send_interval: session.send_interval(),
        predict: session.predictor().config(),
        predict_counters: session.predictor().counters().clone(),
        timeline: observer.record.then_some(observer.timeline),
    })
}

/// Draws the display frame after every event, as a client does, and records the timeline.
struct Observer {
    record: bool,
    timeline: Timeline,
    server_num: Option<StateNum>,
}

impl Observer {
    fn new(record: bool) -> Observer {
        Observer { record, timeline: Timeline::default(), server_num: None }
    }

    fn key(&mut self, at: Instant, bytes: &[u8]) {
        if self.record {
            self.timeline.keys.push(TimedKey { at, bytes: bytes.to_vec() });
        }
    }

    /// Observes the session right now, without waiting for anything.
    fn look(&mut self, client: &mut NativeClient<Complete>) -> std::io::Result<()> {
        client
            .run_until_mut(Duration::ZERO, |s, now| {
                self.observe(s, now);
                true
            })
            .map(|_| ())
    }

    fn observe(&mut self, session: &mut ClientSession<Complete>, now: Instant) {
        let display = session.display_frame();
        if !self.record {
            return;
        }
        let num = session.server_state_num();
        if self.server_num != Some(num) {
            self.server_num = Some(num);
            push_changed(
                &mut self.timeline.server,
                now,
                screen_text(session.server_state().framebuffer()),
            );
        }
        if let Some(fb) = display {
            push_changed(&mut self.timeline.display, now, screen_text(&fb));
        }
    }
}

fn push_changed(snapshots: &mut Vec<Snapshot>, at: Instant, screen: ScreenText) {
    if snapshots.last().is_none_or(|last| last.screen != screen) {
        snapshots.push(Snapshot { at, screen });
    }
}

fn screen_contains(session: &ClientSession<Complete>, text: &str) -> bool {
    screen_text(session.server_state().framebuffer()).rows.iter().any(|row| row.contains(text))
}

fn closed_note(client: &NativeClient<Complete>) -> String {
    if let Some(reason) = client.closed() {
        return format!(" (session ended: {reason:?})");
    }
    if !client.session().has_heard_server() {
        return " (nothing received from the server: wrong key or port?)".into();
    }
    String::new()
}
