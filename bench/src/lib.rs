//! Tern's benchmark suite (`npm run bench`): Tern against the stock mosh-client and a
//! stop-and-wait client, side by side on emulated links, in one run.
//!
//! Scenarios: keystroke echo latency ([`echo`], and Tern in the browser through [`browser`]),
//! continuous screen updates ([`frames`]), the relay's cost ([`relay`]), pasting a picture
//! ([`paste`]), `tern send` ([`download`]) and `tern show` ([`show`]), viewers of one session ([`viewers`]), predictive local echo on a typing trace
//! ([`predictive`]), reloads ([`resume`]), scrollback and search ([`history`]), the page's cost
//! per frame ([`frame_cost`]) and the core's ([`core_frame`]), page load against the page before
//! the settings panel, clipboard and downloads ([`page_load`]), Safari's WebTransport datagram API
//! against Chromium's ([`safari`]), a thousand sessions
//! ([`sessions`]), installing ([`install`]) and the chaos run ([`chaos`]). Each scenario's module
//! owns its targets and builds its rows with its `rows` function: target rows
//! (`bench/results.json`: `{name, value, unit, target, met}`) and details without targets.
//! [`report`] renders them into the generated section of `docs/BENCHMARKS.md`. `--quick` runs
//! every scenario briefly, for `npm test` (the harness must not silently break; timings are not
//! asserted there).

#![forbid(unsafe_code)]

pub mod browser;
pub mod chaos;
pub mod core_frame;
pub mod decode;
pub mod download;
pub mod echo;
pub mod frame_cost;
pub mod frames;
pub mod history;
pub mod install;
pub mod link;
pub mod machine;
pub mod page_bytes;
pub mod page_load;
pub mod paste;
pub mod predictive;
pub mod relay;
pub mod report;
pub mod resume;
pub mod safari;
pub mod sessions;
pub mod show;
pub mod stats;
pub mod viewers;

use std::time::{Duration, Instant};

use predictive::LinkSetting;
use report::Report;

/// The scenarios, selectable with `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Echo,
    Frames,
    Relay,
    Paste,
    Download,
    Predict,
    Resume,
    History,
    Cost,
    Core,
    Load,
    Bytes,
    Sessions,
    Install,
    Safari,
    Show,
    Viewers,
}

impl Part {
    pub const ALL: [Part; 17] = [
        Part::Echo,
        Part::Frames,
        Part::Relay,
        Part::Paste,
        Part::Download,
        Part::Predict,
        Part::Resume,
        Part::History,
        Part::Cost,
        Part::Core,
        Part::Load,
        Part::Bytes,
        Part::Sessions,
        Part::Install,
        Part::Safari,
        Part::Show,
        Part::Viewers,
    ];

    pub fn parse(name: &str) -> Option<Part> {
        match name {
            "echo" => Some(Part::Echo),
            "frames" => Some(Part::Frames),
            "relay" => Some(Part::Relay),
            "paste" => Some(Part::Paste),
            "download" => Some(Part::Download),
            "predict" => Some(Part::Predict),
            "resume" => Some(Part::Resume),
            "history" => Some(Part::History),
            "core" => Some(Part::Core),
            "cost" => Some(Part::Cost),
            "load" => Some(Part::Load),
            "bytes" => Some(Part::Bytes),
            "sessions" => Some(Part::Sessions),
            "install" => Some(Part::Install),
            "safari" => Some(Part::Safari),
            "show" => Some(Part::Show),
            "viewers" => Some(Part::Viewers),
            _ => None,
        }
    }
}

/// How much to measure.
#[derive(Debug, Clone)]
pub struct Options {
    pub quick: bool,
    pub parts: Vec<Part>,
    /// Round-trip times of the echo scenario.
    pub echo_rtts_ms: Vec<u64>,
    pub echo_warmup: usize,
    pub echo_keys: usize,
    /// One-way delays of the continuous-output scenario.
    pub frame_delays_ms: Vec<u64>,
    /// Lines the counter prints (one every 10 ms or so).
    pub frame_lines: u32,
    pub frame_warmup: Duration,
    pub relay_rounds: usize,
    pub relay_burst: u32,
    /// Also time Tern in the browser in the echo scenario (needs node and Chromium).
    pub echo_browser: bool,
    /// RTTs (among `echo_rtts_ms`) where the browser is also timed over the WebSocket fallback,
    /// on a clean link and with this loss (both transports, through linkemu's TUN link).
    pub fallback_rtts_ms: Vec<u64>,
    pub fallback_loss_percent: f64,
    /// The RTT where the browser's echo is timed with Safari's datagram API beside Chromium's,
    /// and how many rounds of both (the `safari` part).
    pub safari_rtt_ms: u64,
    pub safari_rounds: usize,
    pub paste: browser::PasteSetup,
    /// `tern send FILE` in the shell: the file and the link (the paste's, roles swapped).
    pub download: browser::PasteSetup,
    /// `tern show FILE` in the shell: the picture, the link, and the pictures scrolled past.
    pub show: browser::ShowSetup,
    /// Viewers watching one session, and the keys its owner types in each phase.
    pub viewers: usize,
    pub viewer_keys: usize,
    /// Links of the predictive-echo scenario, and whether it types the short trace.
    pub predict_links: Vec<LinkSetting>,
    pub predict_quick_trace: bool,
    /// RTTs of the reload scenario, and reloads at each.
    pub resume_rtts_ms: Vec<u64>,
    pub resume_reloads: usize,
    /// Sessions on one relay (its `--max-sessions`), the keys a second each types, and how long
    /// their typing is measured.
    pub sessions: usize,
    pub session_keys_per_second: f64,
    pub session_typing: Duration,
}

impl Options {
    /// The full run: every RTT and delay the suite was specified with, the browser and the
    /// 13.4 MB paste (how long it took is in the generated section of docs/BENCHMARKS.md).
    pub fn full() -> Options {
        // The "Paste a picture" scenario (docs/BENCHMARKS.md, "Paste"); `tern send`'s download
        // has the same file size and link.
        let transfer = browser::PasteSetup {
            size: 13_400_000,
            rate: "9mbit",
            rtt_ms: 80,
            queue: "1s",
            keys: 40,
        };
        Options {
            quick: false,
            parts: Part::ALL.to_vec(),
            echo_rtts_ms: vec![0, 50, 200, 500],
            echo_warmup: 3,
            echo_keys: 25,
            frame_delays_ms: vec![0, 25, 100, 250],
            frame_lines: 800,
            frame_warmup: Duration::from_secs(1),
            relay_rounds: 5000,
            relay_burst: 50_000,
            echo_browser: true,
            fallback_rtts_ms: vec![50, 200],
            fallback_loss_percent: 1.0,
            safari_rtt_ms: 50,
            safari_rounds: 2,
            paste: transfer.clone(),
            download: transfer,
            // Issue 34's rows: a 1 MB picture over a 9 Mbit/s, 80 ms link; 200 scrolled past.
            show: browser::ShowSetup {
                size: 1_000_000,
                rate: "9mbit",
                rtt_ms: 80,
                queue: "1s",
                shows: 5,
                keys: 30,
                many: 200,
            },
            viewers: 50,
            viewer_keys: 60,
            predict_links: vec![
                LinkSetting::rtt(60),
                LinkSetting::rtt(200),
                LinkSetting::rtt(500),
                LinkSetting { rtt_ms: 200, jitter_ms: 20, loss: 0.01 },
            ],
            predict_quick_trace: false,
            resume_rtts_ms: vec![0, 200],
            resume_reloads: 7,
            // "A thousand sessions": each typing like a quick typist.
            sessions: 1000,
            session_keys_per_second: 4.0,
            session_typing: Duration::from_secs(20),
        }
    }

    /// A few seconds per scenario: proves the harness works, measures nothing worth quoting.
    pub fn quick() -> Options {
        // About a second of upload (and of download): long enough for a few keys to be timed
        // during it.
        let transfer = browser::PasteSetup {
            size: 1_000_000,
            rate: "8mbit",
            rtt_ms: 20,
            queue: "200ms",
            keys: 4,
        };
        Options {
            quick: true,
            // Not the install part: it builds the release (scripts/dist.sh, two cross builds),
            // which `npm test`'s dist stage builds and tests on its own; `--quick --only install`
            // still runs it.
            parts: Part::ALL.into_iter().filter(|p| *p != Part::Install).collect(),
            echo_rtts_ms: vec![50],
            echo_warmup: 1,
            echo_keys: 4,
            frame_delays_ms: vec![25],
            frame_lines: 100,
            frame_warmup: Duration::from_millis(200),
            relay_rounds: 200,
            relay_burst: 2000,
            echo_browser: true,
            fallback_rtts_ms: vec![50],
            fallback_loss_percent: 1.0,
            safari_rtt_ms: 50,
            safari_rounds: 1,
            paste: transfer.clone(),
            download: transfer,
            show: browser::ShowSetup {
                size: 200_000,
                rate: "8mbit",
                rtt_ms: 20,
                queue: "200ms",
                shows: 1,
                keys: 4,
                many: 10,
            },
            viewers: 5,
            viewer_keys: 10,
            predict_links: vec![LinkSetting::rtt(200)],
            predict_quick_trace: true,
            resume_rtts_ms: vec![0],
            resume_reloads: 2,
            sessions: 50,
            session_keys_per_second: 4.0,
            session_typing: Duration::from_secs(3),
        }
    }
}

pub(crate) fn progress(msg: &str) {
    eprintln!("[bench] {msg}");
}

/// Runs the selected scenarios and returns everything measured.
pub fn run(options: &Options) -> Report {
    let started = Instant::now();
    let mut report = Report { machine: machine::describe(options.quick), ..Report::default() };
    for part in Part::ALL {
        if !options.parts.contains(&part) {
            continue;
        }
        let part_started = Instant::now();
        match part {
            Part::Echo => echo::rows(options, &mut report),
            Part::Frames => frames::rows(options, &mut report),
            Part::Relay => relay::rows(options, &mut report),
            Part::Paste => paste::rows(options, &mut report),
            Part::Download => download::rows(options, &mut report),
            Part::Predict => predictive::rows(options, &mut report),
            Part::Resume => resume::rows(options, &mut report),
            Part::History => history::rows(options, &mut report),
            Part::Core => core_frame::rows(options, &mut report),
            Part::Cost => frame_cost::rows(options, &mut report),
            Part::Load => {
                page_load::rows(options, &mut report);
                page_load::floor_rows(options, &mut report);
            }
            Part::Bytes => page_bytes::rows(options, &mut report),
            Part::Sessions => sessions::rows(options, &mut report),
            Part::Install => install::rows(options, &mut report),
            Part::Safari => safari::rows(options, &mut report),
            Part::Show => show::rows(options, &mut report),
            Part::Viewers => viewers::rows(options, &mut report),
        }
        // Where a run's time goes (the quick run is a large share of `npm test`).
        progress(&format!("{part:?} took {:.0} s", part_started.elapsed().as_secs_f64()));
    }
    report.machine.load_after = machine::load();
    report.machine.duration_s = started.elapsed().as_secs_f64();
    report
}
