//! Tern's benchmark suite (`npm run bench`): Tern against the stock mosh-client and a
//! stop-and-wait client, side by side on emulated links, in one run.
//!
//! Scenarios: keystroke echo latency ([`echo`], and Tern in the browser through [`browser`]),
//! continuous screen updates ([`frames`]), the relay's cost ([`relay`]), pasting a picture
//! ([`browser::paste`]), predictive local echo on a typing trace ([`predictive`]), page load against
//! the page before issue 15 ([`page_load`]). Each produces target rows (`bench/results.json`: `{name, value, unit,
//! target, met}`) and details without targets. [`report`] renders them into the generated
//! section of `docs/BENCHMARKS.md`. `--quick` runs every scenario briefly, for `npm test` (the
//! harness must not silently break; timings are not asserted there).

#![forbid(unsafe_code)]

pub mod browser;
pub mod chaos;
pub mod core_frame;
pub mod decode;
pub mod echo;
pub mod frame_cost;
pub mod frames;
pub mod install;
pub mod link;
pub mod machine;
pub mod page_load;
pub mod predictive;
pub mod relay;
pub mod report;
pub mod sessions;
pub mod stats;

use std::time::{Duration, Instant};

use echo::{EchoClient, EchoRun};
use frames::{FrameClient, FrameRun};
use predictive::{Client, KeyClass, LinkSetting, Metrics};
use report::Report;
use stats::{median, p95};

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
    Sessions,
    Install,
}

impl Part {
    pub const ALL: [Part; 13] = [
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
        Part::Sessions,
        Part::Install,
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
            "sessions" => Some(Part::Sessions),
            "install" => Some(Part::Install),
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
    pub paste: browser::PasteSetup,
    /// `tern send FILE` in the shell: the file and the link (the paste's, roles swapped).
    pub download: browser::PasteSetup,
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
    /// The full run: every RTT and delay of the issue, the browser and the 13.4 MB paste: about 6
    /// minutes of measuring on the project machine.
    pub fn full() -> Options {
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
            // The "Paste a picture" scenario (docs/BENCHMARKS.md, "Paste").
            paste: browser::PasteSetup {
                size: 13_400_000,
                rate: "9mbit",
                rtt_ms: 80,
                queue: "1s",
                keys: 40,
            },
            // Issue 15's download: the same file size and link as the paste.
            download: browser::PasteSetup {
                size: 13_400_000,
                rate: "9mbit",
                rtt_ms: 80,
                queue: "1s",
                keys: 40,
            },
            predict_links: vec![
                LinkSetting::rtt(60),
                LinkSetting::rtt(200),
                LinkSetting::rtt(500),
                LinkSetting { rtt_ms: 200, jitter_ms: 20, loss: 0.01 },
            ],
            predict_quick_trace: false,
            resume_rtts_ms: vec![0, 200],
            resume_reloads: 7,
            // Issue 16's "Load": a thousand sessions, each typing like a quick typist.
            sessions: 1000,
            session_keys_per_second: 4.0,
            session_typing: Duration::from_secs(20),
        }
    }

    /// A few seconds per scenario: proves the harness works, measures nothing worth quoting.
    pub fn quick() -> Options {
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
            // About a second of upload: long enough for a few keys to be timed during it.
            paste: browser::PasteSetup {
                size: 1_000_000,
                rate: "8mbit",
                rtt_ms: 20,
                queue: "200ms",
                keys: 4,
            },
            download: browser::PasteSetup {
                size: 1_000_000,
                rate: "8mbit",
                rtt_ms: 20,
                queue: "200ms",
                keys: 4,
            },
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
        match part {
            Part::Echo => echo_rows(options, &mut report),
            Part::Frames => frame_rows(options, &mut report),
            Part::Relay => relay_rows(options, &mut report),
            Part::Paste => paste_rows(options, &mut report),
            Part::Download => download_rows(options, &mut report),
            Part::Predict => predict_rows(options, &mut report),
            Part::Resume => resume_rows(options, &mut report),
            Part::History => history_rows(options, &mut report),
            Part::Core => core_rows(options, &mut report),
            Part::Cost => cost_rows(options, &mut report),
            Part::Load => page_load::rows(options.quick, &mut report),
            Part::Sessions => sessions_rows(options, &mut report),
            Part::Install => install_rows(options, &mut report),
        }
    }
    report.machine.load_after = machine::load();
    report.machine.duration_s = started.elapsed().as_secs_f64();
    report
}

/// The echo target for one RTT: the highest allowed ratio of Tern's median to mosh-client's.
fn echo_ratio_target(rtt_ms: u64) -> f64 {
    if rtt_ms >= 500 { 0.85 } else { 1.0 }
}

/// A key must leave within this long (p95), at every RTT.
const KEY_TO_WIRE_P95_MS: f64 = 2.0;

fn echo_rows(options: &Options, report: &mut Report) {
    for (i, &rtt_ms) in options.echo_rtts_ms.iter().enumerate() {
        let rtt = Duration::from_millis(rtt_ms);
        let mut runs: Vec<(EchoClient, EchoRun)> = Vec::new();
        for client in [EchoClient::Tern, EchoClient::MoshClient] {
            progress(&format!("echo: {} at RTT {rtt_ms} ms", client.label()));
            let seed = 0xEC40 + i as u64;
            match echo::run(client, rtt, options.echo_warmup, options.echo_keys, seed) {
                Ok(run) => {
                    if run.missing > 0 {
                        report.problems.push(format!(
                            "echo, {}, RTT {rtt_ms} ms: {} of {} keys without a matched echo",
                            client.label(),
                            run.missing,
                            options.echo_keys
                        ));
                    }
                    echo_details(report, client, rtt_ms, &run);
                    runs.push((client, run));
                }
                Err(e) => report
                    .problems
                    .push(format!("echo, {}, RTT {rtt_ms} ms failed: {e:#}", client.label())),
            }
        }
        let find = |c| runs.iter().find(|(k, _)| *k == c).map(|(_, r)| r);
        let (tern, mosh) = (find(EchoClient::Tern), find(EchoClient::MoshClient));
        if let Some(tern) = tern {
            let wire: Vec<f64> = tern.samples.iter().map(|s| s.key_to_wire).collect();
            if let Some(p) = p95(&wire) {
                report.row(
                    format!("key-to-wire p95, tern-probe, RTT {rtt_ms} ms"),
                    p,
                    "ms",
                    format!("≤ {KEY_TO_WIRE_P95_MS} ms"),
                    p <= KEY_TO_WIRE_P95_MS,
                );
            }
        }
        if let (Some(tern), Some(mosh)) = (tern, mosh) {
            let screen: Vec<f64> = tern.samples.iter().filter_map(|s| s.key_to_screen).collect();
            let reference: Vec<f64> = mosh.samples.iter().map(|s| s.key_to_echo).collect();
            if let (Some(t), Some(m)) = (median(&screen), median(&reference)) {
                let ratio = t / m;
                let target = echo_ratio_target(rtt_ms);
                report.row(
                    format!("key-to-echo median, tern-probe / mosh-client, RTT {rtt_ms} ms"),
                    ratio,
                    "x",
                    format!("≤ {target:.2} ({t:.1} / {m:.1} ms)"),
                    ratio <= target,
                );
            }
        }
        if options.echo_browser {
            let seed = 0xEC40 + i as u64;
            let webtransport = browser_echo_rows(options, report, rtt_ms, seed, mosh);
            if options.fallback_rtts_ms.contains(&rtt_ms) {
                fallback_rows(options, report, rtt_ms, seed, webtransport.as_ref());
                lossy_fallback_details(options, report, rtt_ms, seed);
            }
        }
    }
}

/// Tern in the browser at one RTT, against the mosh-client run of the same RTT (same run, same
/// link settings; the browser's emulator sits between the page and tern-relay, so the RTT is on
/// the browser's path and relay → mosh-server is loopback).
fn browser_echo_rows(
    options: &Options,
    report: &mut Report,
    rtt_ms: u64,
    seed: u64,
    mosh: Option<&EchoRun>,
) -> Option<browser::EchoRun> {
    progress(&format!("echo: Tern in the browser at RTT {rtt_ms} ms"));
    let transport = browser::Transport::WebTransport;
    let (warmup, keys) = (options.echo_warmup, options.echo_keys);
    let run = match browser::echo(transport, rtt_ms, None, warmup, keys, seed) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("echo, browser, RTT {rtt_ms} ms failed: {e:#}"));
            return None;
        }
    };
    if run.missing > 0 {
        report.problems.push(format!(
            "echo, browser, RTT {rtt_ms} ms: {} of {} keys without an echo on the screen",
            run.missing, options.echo_keys
        ));
    }
    let (screen, send) = (run.screen(), run.send());
    if let Some(p) = p95(&send) {
        report.row(
            format!("key-to-wire p95, browser (key → datagram written), RTT {rtt_ms} ms"),
            p,
            "ms",
            format!("≤ {KEY_TO_WIRE_P95_MS} ms"),
            p <= KEY_TO_WIRE_P95_MS,
        );
    }
    if let Some(mosh) = mosh {
        let reference: Vec<f64> = mosh.samples.iter().map(|s| s.key_to_echo).collect();
        if let (Some(t), Some(m)) = (median(&screen), median(&reference)) {
            let ratio = t / m;
            let target = echo_ratio_target(rtt_ms);
            report.row(
                format!("key-to-echo median, browser / mosh-client, RTT {rtt_ms} ms"),
                ratio,
                "x",
                format!("≤ {target:.2} ({t:.1} / {m:.1} ms)"),
                ratio <= target,
            );
        }
    }
    let label = format!("browser, RTT {rtt_ms} ms");
    let mut both = |what: &str, v: &[f64]| {
        if let (Some(m), Some(p)) = (median(v), p95(v)) {
            report.detail("echo, browser", format!("{label}: {what} median"), m, "ms");
            report.detail("echo, browser", format!("{label}: {what} p95"), p, "ms");
        }
    };
    both("key-to-screen (key to xterm.js → frame with the letter written to xterm.js)", &screen);
    both("key-to-wire (key → datagram handed to WebTransport)", &send);
    both("the page's echo statistic (docs/BROWSER.md)", &run.core_echo_ms);
    // The tap cannot open the page's QUIC packets, so the rest is not split further: server turn,
    // relay, Chromium's QUIC both ways and the page's receive and apply, together.
    let rest: Vec<f64> = run
        .screen_ms
        .iter()
        .zip(&run.send_ms)
        .filter_map(|(s, w)| Some((*s)? - (*w)? - rtt_ms as f64))
        .collect();
    if let Some(m) = median(&rest) {
        report.detail(
            "echo, browser",
            format!("{label}: rest (key-to-screen − key-to-wire − network {rtt_ms} ms) median"),
            m,
            "ms",
        );
    }
    report.detail("echo, browser", format!("{label}: network (up + down)"), rtt_ms as f64, "ms");
    report.detail(
        "echo, browser",
        format!("{label}: mosh SRTT (the page's core)"),
        run.srtt_ms,
        "ms",
    );
    report.detail(
        "echo, browser",
        format!("{label}: dropped for unknown base"),
        run.dropped_unknown_base,
        "",
    );
    report.detail("echo, browser", format!("{label}: keys timed"), screen.len() as f64, "");
    if let Some(h) = &run.hops {
        for (what, v) in [
            ("hop: key → datagram written", &h.key_to_write),
            ("hop: written → tern-relay got it (Chromium's QUIC, RTT/2, wtransport)", &h.up),
            ("hop: tern-relay → mosh-server → tern-relay (the server's turn)", &h.server),
            (
                "hop: tern-relay sent the echo → the page read it (wtransport, RTT/2, Chromium)",
                &h.down,
            ),
            ("hop: read → frame written to xterm.js", &h.read_to_screen),
        ] {
            if let Some(m) = median(v) {
                report.detail("echo, browser", format!("{label}: {what} median"), m, "ms");
            }
        }
    }
    Some(run)
}

/// The WebSocket fallback may cost this much over WebTransport on a clean link (median echo).
const FALLBACK_ECHO_RATIO: f64 = 1.05;
/// Page load to the first screen with UDP silently blocked, minus the same with UDP open.
const FALLBACK_START_PENALTY_MS: f64 = 1500.0;

/// Both transports on a lossy link (TCP's retransmissions hold back everything behind a lost
/// segment; WebTransport's datagrams do not wait): reported, no target.
fn lossy_fallback_details(options: &Options, report: &mut Report, rtt_ms: u64, seed: u64) {
    let loss = options.fallback_loss_percent;
    let (warmup, keys) = (options.echo_warmup, options.echo_keys);
    let group = "echo, browser, lossy link";
    let mut medians = Vec::new();
    for transport in [browser::Transport::WebTransport, browser::Transport::WebSocket] {
        let what = format!("{}, RTT {rtt_ms} ms, {loss} % loss", transport.as_str());
        progress(&format!("echo: Tern in the browser over {what}"));
        match browser::echo(transport, rtt_ms, Some(loss), warmup, keys, seed) {
            Ok(run) => {
                if run.missing > 0 {
                    report.problems.push(format!(
                        "echo, browser, {what}: {} of {keys} keys without an echo",
                        run.missing
                    ));
                }
                let screen = run.screen();
                if let (Some(m), Some(p)) = (median(&screen), p95(&screen)) {
                    report.detail(group, format!("{what}: key-to-screen median"), m, "ms");
                    report.detail(group, format!("{what}: key-to-screen p95"), p, "ms");
                    medians.push(m);
                }
            }
            Err(e) => report.problems.push(format!("echo, browser, {what} failed: {e:#}")),
        }
    }
    if let [wt, ws] = medians[..] {
        let name =
            format!("RTT {rtt_ms} ms, {loss} % loss: key-to-echo median, WebSocket / WebTransport");
        report.detail(group, name, ws / wt, "x");
    }
}

/// The browser over the WebSocket fallback (UDP dropped) at one RTT, against the WebTransport run
/// of the same RTT and seed: echo, and how much longer the page took to show the first screen.
fn fallback_rows(
    options: &Options,
    report: &mut Report,
    rtt_ms: u64,
    seed: u64,
    webtransport: Option<&browser::EchoRun>,
) {
    progress(&format!("echo: Tern in the browser over the WebSocket fallback at RTT {rtt_ms} ms"));
    let transport = browser::Transport::WebSocket;
    let (warmup, keys) = (options.echo_warmup, options.echo_keys);
    let run = match browser::echo(transport, rtt_ms, None, warmup, keys, seed) {
        Ok(run) => run,
        Err(e) => {
            report
                .problems
                .push(format!("echo, WebSocket fallback, RTT {rtt_ms} ms failed: {e:#}"));
            return;
        }
    };
    if run.missing > 0 {
        report.problems.push(format!(
            "echo, WebSocket fallback, RTT {rtt_ms} ms: {} of {} keys without an echo",
            run.missing, options.echo_keys
        ));
    }
    let label = format!("WebSocket fallback, RTT {rtt_ms} ms");
    let screen = run.screen();
    if let (Some(m), Some(p)) = (median(&screen), p95(&screen)) {
        report.detail("echo, browser", format!("{label}: key-to-screen median"), m, "ms");
        report.detail("echo, browser", format!("{label}: key-to-screen p95"), p, "ms");
    }
    if let Some(ms) = run.first_frame_ms {
        report.detail("echo, browser", format!("{label}: page load to first screen"), ms, "ms");
    }
    let Some(wt) = webtransport else { return };
    if let Some(ms) = wt.first_frame_ms {
        let name = format!("WebTransport, RTT {rtt_ms} ms: page load to first screen");
        report.detail("echo, browser", name, ms, "ms");
    }
    if let (Some(ws), Some(wt)) = (median(&screen), median(&wt.screen())) {
        let ratio = ws / wt;
        report.row(
            format!("key-to-echo median, WebSocket fallback / WebTransport, RTT {rtt_ms} ms"),
            ratio,
            "x",
            format!("≤ {FALLBACK_ECHO_RATIO:.2} ({ws:.1} / {wt:.1} ms)"),
            ratio <= FALLBACK_ECHO_RATIO,
        );
    }
    if let (Some(ws), Some(wt)) = (run.first_frame_ms, wt.first_frame_ms) {
        let penalty = ws - wt;
        report.row(
            format!("page load to first screen, UDP blocked − UDP open, RTT {rtt_ms} ms"),
            penalty,
            "ms",
            format!("≤ {FALLBACK_START_PENALTY_MS:.0} ms ({ws:.0} − {wt:.0} ms)"),
            penalty <= FALLBACK_START_PENALTY_MS,
        );
    }
}

fn echo_details(report: &mut Report, client: EchoClient, rtt_ms: u64, run: &EchoRun) {
    let label = client.label();
    let col = |f: fn(&echo::KeySample) -> f64| run.samples.iter().map(f).collect::<Vec<f64>>();
    let mut both = |what: &str, v: &[f64]| {
        if let (Some(m), Some(p)) = (median(v), p95(v)) {
            report.detail("echo", format!("{label}, RTT {rtt_ms} ms: {what} median"), m, "ms");
            report.detail("echo", format!("{label}, RTT {rtt_ms} ms: {what} p95"), p, "ms");
        }
    };
    if client == EchoClient::Tern {
        let screen: Vec<f64> = run.samples.iter().filter_map(|s| s.key_to_screen).collect();
        both("key-to-screen (in-process)", &screen);
    }
    both("key-to-echo (protocol level)", &col(|s| s.key_to_echo));
    both("key-to-wire", &col(|s| s.key_to_wire));
    both("server turn", &col(|s| s.server_turn));
    let network: Vec<f64> = run.samples.iter().map(|s| s.network_up + s.network_down).collect();
    if let Some(m) = median(&network) {
        report.detail(
            "echo",
            format!("{label}, RTT {rtt_ms} ms: network (up + down) median"),
            m,
            "ms",
        );
    }
    if let Some(m) = median(&run.tmux_command) {
        report.detail(
            "echo",
            format!("{label}, RTT {rtt_ms} ms: tmux send-keys command round trip median"),
            m,
            "ms",
        );
    }
    report.detail(
        "echo",
        format!("{label}, RTT {rtt_ms} ms: keys timed"),
        run.samples.len() as f64,
        "",
    );
}

fn frame_rows(options: &Options, report: &mut Report) {
    for (i, &delay_ms) in options.frame_delays_ms.iter().enumerate() {
        let delay = Duration::from_millis(delay_ms);
        let mut runs: Vec<(FrameClient, FrameRun)> = Vec::new();
        for client in [FrameClient::Tern, FrameClient::TernStopAndWait, FrameClient::MoshClient] {
            progress(&format!("frames: {} at one-way delay {delay_ms} ms", client.label()));
            let seed = 0xF4A0 + i as u64;
            match frames::run(client, delay, options.frame_lines, options.frame_warmup, seed) {
                Ok(run) => {
                    frame_details(report, client, delay_ms, &run);
                    runs.push((client, run));
                }
                Err(e) => report.problems.push(format!(
                    "frames, {}, one-way {delay_ms} ms failed: {e:#}",
                    client.label()
                )),
            }
        }
        let find = |c| runs.iter().find(|(k, _)| *k == c).map(|(_, r)| r);
        if let Some(tern) = find(FrameClient::Tern)
            && let Some(fraction) = tern.applied_fraction()
        {
            let met =
                tern.applied_on_arrival == tern.instructions && tern.dropped_unknown_base == 0;
            report.row(
                format!(
                    "server instructions applied on arrival, tern-probe, one-way {delay_ms} ms"
                ),
                fraction * 100.0,
                "%",
                format!("100 %, dropped_unknown_base = 0 (is {})", tern.dropped_unknown_base),
                met,
            );
        }
        if let (Some(tern), Some(mosh)) = (find(FrameClient::Tern), find(FrameClient::MoshClient))
            && let (Some(t), Some(m)) = (median(&tern.intervals), median(&mosh.intervals))
        {
            let ratio = t / m;
            report.row(
                format!("frame interval median, tern-probe / mosh-client, one-way {delay_ms} ms"),
                ratio,
                "x",
                format!("≤ 1.05 ({t:.1} / {m:.1} ms)"),
                ratio <= 1.05,
            );
        }
    }
}

fn frame_details(report: &mut Report, client: FrameClient, delay_ms: u64, run: &FrameRun) {
    let label = client.label();
    let at = format!("one-way {delay_ms} ms");
    if let (Some(m), Some(p)) = (median(&run.intervals), p95(&run.intervals)) {
        report.detail("frames", format!("{label}, {at}: frame interval median"), m, "ms");
        report.detail("frames", format!("{label}, {at}: frame interval p95"), p, "ms");
    }
    report.detail(
        "frames",
        format!("{label}, {at}: frames in the window"),
        (run.intervals.len() + 1) as f64,
        "",
    );
    if let Some(f) = run.applied_fraction() {
        let how = if client == FrameClient::MoshClient { " (protocol level)" } else { "" };
        report.detail(
            "frames",
            format!("{label}, {at}: instructions applicable on arrival{how}"),
            f * 100.0,
            "%",
        );
    }
    report.detail(
        "frames",
        format!("{label}, {at}: server instructions"),
        run.instructions as f64,
        "",
    );
    if client == FrameClient::TernStopAndWait {
        report.detail(
            "frames",
            format!("{label}, {at}: refused_older_base"),
            run.refused_older_base as f64,
            "",
        );
    }
}

/// Project targets for the relay (the issue names none): its cost must vanish next to the
/// smallest echo (about 10 ms at RTT 0) and its rate must dwarf a session's (a frame every 20 ms,
/// 50 datagrams/s, a few hundred during a paste).
const RELAY_ADDED_MS: f64 = 1.0;
const RELAY_RATE: f64 = 5000.0;

fn relay_rows(options: &Options, report: &mut Report) {
    progress("relay: round trips and bursts");
    let run = match relay::run(options.relay_rounds, options.relay_burst) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("relay failed: {e:#}"));
            return;
        }
    };
    if let Some(added) = run.added_p50() {
        report.row(
            "relay added round-trip latency, median, 100 B",
            added,
            "ms",
            format!("≤ {RELAY_ADDED_MS} ms (project target: under 10 % of the RTT-0 echo)"),
            added <= RELAY_ADDED_MS,
        );
    }
    report.row(
        "relay forwarding rate, relay → browser, 1000 B",
        run.down_rate,
        "datagrams/s",
        format!("≥ {RELAY_RATE} (project target: 100x a 50 frames/s session)"),
        run.down_rate >= RELAY_RATE,
    );
    report.row(
        "relay forwarding rate, browser → relay → UDP, 1 B",
        run.up_rate,
        "datagrams/s",
        format!("≥ {RELAY_RATE} (project target: 100x a 50 frames/s session)"),
        run.up_rate >= RELAY_RATE,
    );
    let mut d = |name: &str, v: Option<f64>, unit: &str| {
        if let Some(v) = v {
            report.detail("relay", name, v, unit);
        }
    };
    d("direct UDP round trip median, 100 B", median(&run.direct), "ms");
    d("via relay round trip median, 100 B", median(&run.relayed), "ms");
    d("via relay round trip p99, 100 B", run.relayed_p99(), "ms");
    d(
        "via relay round trip median, 1252 B reply (2 framed parts)",
        median(&run.relayed_large),
        "ms",
    );
    d("via relay round trip p99, 1252 B reply", stats::quantile(&run.relayed_large, 0.99), "ms");
    d("burst relay → browser: share delivered", Some(run.down_delivered * 100.0), "%");
    d("burst browser → relay: share delivered", Some(run.up_delivered * 100.0), "%");
}

/// The paste targets: the upload within 5 % of the link's limit, typing during it at
/// most 20 ms slower than idle, nothing sent again for a picture pasted twice.
const PASTE_UPLOAD_RATIO: f64 = 1.05;
const PASTE_ECHO_ABOVE_IDLE_MS: f64 = 20.0;

/// A reloaded page draws its saved screen within this of its script starting...
const RESUME_OLD_SCREEN_MS: f64 = 300.0;
/// ...and is live within one RTT and this of its new link's `ready`.
const RESUME_LIVE_SLACK_MS: f64 = 300.0;

fn resume_rows(options: &Options, report: &mut Report) {
    for &rtt_ms in &options.resume_rtts_ms {
        progress(&format!("resume: {} reloads at RTT {rtt_ms} ms", options.resume_reloads));
        let run = match browser::resume(rtt_ms, options.resume_reloads) {
            Ok(run) => run,
            Err(e) => {
                report.problems.push(format!("resume, RTT {rtt_ms} ms failed: {e:#}"));
                continue;
            }
        };
        if let Some(m) = median(&run.old_screen_ms) {
            report.row(
                format!("reload to the old screen drawn, median, RTT {rtt_ms} ms"),
                m,
                "ms",
                format!("≤ {RESUME_OLD_SCREEN_MS:.0} ms after the page's script started"),
                m <= RESUME_OLD_SCREEN_MS,
            );
        }
        if let Some(m) = median(&run.live_ms) {
            let target = rtt_ms as f64 + RESUME_LIVE_SLACK_MS;
            report.row(
                format!("reload to the first new server state, median, RTT {rtt_ms} ms"),
                m,
                "ms",
                format!("≤ {target:.0} ms (1 RTT + {RESUME_LIVE_SLACK_MS:.0}) after the new link's ready"),
                m <= target,
            );
        }
        let label = format!("RTT {rtt_ms} ms");
        for (what, v) in [
            ("navigation → old screen", &run.nav_to_old_ms),
            ("first request to the relay → live", &run.live_from_request_ms),
            ("navigation → live", &run.nav_to_live_ms),
        ] {
            if let (Some(m), Some(p)) = (median(v), p95(v)) {
                report.detail("resume", format!("{label}: {what} median"), m, "ms");
                report.detail("resume", format!("{label}: {what} p95"), p, "ms");
            }
        }
        report.detail("resume", format!("{label}: reloads"), run.old_screen_ms.len() as f64, "");
    }
}

/// Issue 14's targets: the first history page within this of a wheel turn up...
const HISTORY_FIRST_PAGE_MS: f64 = 100.0;
/// ...a search of the whole history shown within this...
const HISTORY_SEARCH_MS: f64 = 300.0;
/// ...and the recorder adding at most this to a key's echo.
const RECORDER_ECHO_ADDED_US: f64 = 500.0;

fn history_rows(options: &Options, report: &mut Report) {
    let lines = if options.quick { 20_000 } else { 100_000 };
    progress(&format!("history: seq 1 {lines}, scrolling up and searching"));
    match browser::history(lines, if options.quick { 2 } else { 7 }, !options.quick) {
        Ok(run) => {
            report.row(
                format!("history complete after seq 1 {lines}"),
                run.completeness,
                "%",
                "100 %".to_string(),
                run.completeness >= 100.0,
            );
            if let Some(m) = median(&run.first_page_ms) {
                report.row(
                    "history: wheel up → first page drawn, median".to_string(),
                    m,
                    "ms",
                    format!("≤ {HISTORY_FIRST_PAGE_MS:.0} ms"),
                    m <= HISTORY_FIRST_PAGE_MS,
                );
            }
            if let Some(m) = median(&run.search_ms) {
                report.row(
                    format!("history: search of {lines} lines → match shown, median"),
                    m,
                    "ms",
                    format!("≤ {HISTORY_SEARCH_MS:.0} ms"),
                    m <= HISTORY_SEARCH_MS,
                );
            }
            let per_100k = 100_000.0 / run.history_lines.max(1) as f64;
            report.detail(
                "history",
                "disk per 100,000 lines",
                run.disk_bytes * per_100k / 1e6,
                "MB",
            );
            report.detail(
                "history",
                "recorder resident memory",
                run.recorder_rss_kb / 1024.0,
                "MiB",
            );
            report.detail(
                "history",
                "relay resident memory after the searches",
                run.relay_rss_kb / 1024.0,
                "MiB",
            );
            report.detail("history", "lines kept", run.history_lines as f64, "");
            for (what, v) in [("first page", &run.first_page_ms), ("search", &run.search_ms)] {
                if let Some(p) = p95(v) {
                    report.detail("history", format!("{what} p95"), p, "ms");
                }
            }
        }
        Err(e) => report.problems.push(format!("history failed: {e:#}")),
    }
    progress("history: key-to-echo through a pty with and without the recorder");
    match browser::recorder_echo(if options.quick { 500 } else { 2000 }, !options.quick) {
        Ok(run) => {
            let added = run.recorded_median_us - run.direct_median_us;
            report.row(
                "recorder: added to a key's echo, median (pty, RTT 0)".to_string(),
                added,
                "µs",
                format!("≤ {RECORDER_ECHO_ADDED_US:.0} µs"),
                added <= RECORDER_ECHO_ADDED_US,
            );
            report.detail(
                "history",
                "echo without the recorder, median",
                run.direct_median_us,
                "µs",
            );
            report.detail(
                "history",
                "echo with the recorder, median",
                run.recorded_median_us,
                "µs",
            );
            report.detail("history", "echo without the recorder, p99", run.direct_p99_us, "µs");
            report.detail("history", "echo with the recorder, p99", run.recorded_p99_us, "µs");
        }
        Err(e) => report.problems.push(format!("recorder echo failed: {e:#}")),
    }
}

fn paste_rows(options: &Options, report: &mut Report) {
    let setup = &options.paste;
    progress(&format!(
        "paste: {} B over {} at RTT {} ms (queue {})",
        setup.size, setup.rate, setup.rtt_ms, setup.queue
    ));
    let run = match browser::paste(setup) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("paste failed: {e:#}"));
            return;
        }
    };
    let link = format!(
        "{:.1} MB over {}, RTT {} ms, queue {}",
        run.size as f64 / 1e6,
        run.rate,
        run.rtt_ms,
        run.queue
    );
    report.row(
        format!("paste upload time / the link's limit ({link})"),
        run.ratio,
        "x",
        format!(
            "≤ {PASTE_UPLOAD_RATIO} ({:.2} / {:.2} s)",
            run.upload_ms / 1e3,
            run.limit_ms / 1e3
        ),
        run.ratio <= PASTE_UPLOAD_RATIO,
    );
    if let (Some(during), Some(idle)) = (run.echo_during_ms.median, run.echo_idle_ms.median) {
        let delta = during - idle;
        report.row(
            "echo during a paste upload minus idle echo, median",
            delta,
            "ms",
            format!("≤ {PASTE_ECHO_ABOVE_IDLE_MS} ms ({during:.1} − {idle:.1} ms)"),
            delta <= PASTE_ECHO_ABOVE_IDLE_MS,
        );
    }
    report.row(
        "bytes sent for a repeated paste",
        run.repeat_bytes_sent,
        "B",
        "0 B".to_string(),
        run.repeat_bytes_sent == 0.0,
    );
    let mut d = |name: &str, v: Option<f64>, unit: &str| {
        if let Some(v) = v {
            report.detail("paste", name, v, unit);
        }
    };
    d("picture size", Some(run.size as f64), "B");
    d("upload time (first byte written → the relay's path)", Some(run.upload_ms), "ms");
    d("link limit (size × 8 / rate)", Some(run.limit_ms), "ms");
    d("echo idle median", run.echo_idle_ms.median, "ms");
    d("echo idle p90", run.echo_idle_ms.p90, "ms");
    d("echo idle, keys timed", Some(run.echo_idle_ms.n as f64), "");
    d("echo during the upload median", run.echo_during_ms.median, "ms");
    d("echo during the upload p90", run.echo_during_ms.p90, "ms");
    d("echo during the upload, keys timed", Some(run.echo_during_ms.n as f64), "");
    d("mosh SRTT idle", run.srtt_idle_ms, "ms");
    d("mosh SRTT during the upload median", run.pacer.mosh_srtt_median_ms, "ms");
    d("pacer rate estimate median", run.pacer.rate_median_bps.map(|b| b / 1e6), "Mbit/s");
    d("pacer window median", run.pacer.window_median_bytes.map(|b| b / 1024.0), "KiB");
    d("pacer in flight median", run.pacer.in_flight_median_bytes.map(|b| b / 1024.0), "KiB");
    d("pacer min RTT", run.pacer.min_rtt_ms, "ms");
}

/// Issue 15's download targets: `tern send` within 10 % of the link's limit, typing during it at
/// most 20 ms slower than idle.
const DOWNLOAD_RATIO: f64 = 1.10;
const DOWNLOAD_ECHO_ABOVE_IDLE_MS: f64 = 20.0;

fn download_rows(options: &Options, report: &mut Report) {
    let setup = &options.download;
    progress(&format!(
        "download: tern send of {} B over {} at RTT {} ms (queue {})",
        setup.size, setup.rate, setup.rtt_ms, setup.queue
    ));
    let run = match browser::download(setup) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("download failed: {e:#}"));
            return;
        }
    };
    let link = format!(
        "{:.1} MB over {}, RTT {} ms, queue {}",
        run.size as f64 / 1e6,
        run.rate,
        run.rtt_ms,
        run.queue
    );
    report.row(
        format!("tern send download time / the link's limit ({link})"),
        run.ratio,
        "x",
        format!(
            "≤ {DOWNLOAD_RATIO:.2} ({:.2} / {:.2} s)",
            run.download_ms / 1e3,
            run.limit_ms / 1e3
        ),
        run.ratio <= DOWNLOAD_RATIO,
    );
    if let (Some(during), Some(idle)) = (run.echo_during_ms.median, run.echo_idle_ms.median) {
        let delta = during - idle;
        report.row(
            "echo during a tern send download minus idle echo, median",
            delta,
            "ms",
            format!("≤ {DOWNLOAD_ECHO_ABOVE_IDLE_MS} ms ({during:.1} − {idle:.1} ms)"),
            delta <= DOWNLOAD_ECHO_ABOVE_IDLE_MS,
        );
    }
    let mut d = |name: &str, v: Option<f64>, unit: &str| {
        if let Some(v) = v {
            report.detail("download", name, v, unit);
        }
    };
    d("file size", Some(run.size as f64), "B");
    d(
        "download time (first byte at the page → the browser's download)",
        Some(run.download_ms),
        "ms",
    );
    d("link limit (size × 8 / rate)", Some(run.limit_ms), "ms");
    d("offer seen by the page → the browser's download", Some(run.offer_to_saved_ms), "ms");
    d("offer → first byte", Some(run.offer_to_first_byte_ms), "ms");
    d("first byte → last byte", Some(run.receive_ms), "ms");
    d("last byte → the browser's download (SHA-256, save)", Some(run.verify_ms), "ms");
    d("echo idle median", run.echo_idle_ms.median, "ms");
    d("echo idle p90", run.echo_idle_ms.p90, "ms");
    d("echo idle, keys timed", Some(run.echo_idle_ms.n as f64), "");
    d("echo during the download median", run.echo_during_ms.median, "ms");
    d("echo during the download p90", run.echo_during_ms.p90, "ms");
    d("echo during the download, keys timed", Some(run.echo_during_ms.n as f64), "");
    d("mosh SRTT idle", run.srtt_idle_ms, "ms");
    d("mosh SRTT during the download median", run.page.mosh_srtt_median_ms, "ms");
    d("page's shown rate median", run.page.rate_median_bps.map(|b| b / 1e6), "Mbit/s");
    d("goodput per second median", run.page.goodput_median_bps.map(|b| b / 1e6), "Mbit/s");
    d("longest pause between the page's reads", run.page.max_read_gap_ms, "ms");
}

/// The predictive-echo targets: at least the stock client's share of keys displayed at once
/// (and the paper's 70 % at 200 ms), wrong displays no more often than it and on at most 1 % of
/// keys, never a password character, and printable keys shown in under 5 ms (median) on slow links.
const PREDICT_IMMEDIATE_AT_200: f64 = 0.70;
const PREDICT_WRONG_MAX: f64 = 0.01;
const PREDICT_PRINTABLE_MEDIAN_MS: f64 = 5.0;

fn predict_rows(options: &Options, report: &mut Report) {
    let seed = 0x7E4D;
    let (actions, parts) = predictive::trace(options.predict_quick_trace, seed);
    progress(&format!(
        "predict: reference screens ({} keys at RTT 0, settling after each)",
        tern_tests::typing::key_count(&actions)
    ));
    let reference = match predictive::reference(&actions) {
        Ok(r) => r,
        Err(e) => {
            report.problems.push(format!("predictive echo: reference run failed: {e:#}"));
            return;
        }
    };
    let adaptive = tern::predict::PredictConfig::default();
    let overwrite = tern::predict::PredictConfig { overwrite: true, ..adaptive };
    for (i, setting) in options.predict_links.iter().enumerate() {
        let label = setting.label();
        let plain = setting.jitter_ms == 0 && setting.loss == 0.0;
        let mut runs: Vec<(Client, Metrics)> = Vec::new();
        let mut clients = vec![Client::Tern, Client::MoshClient];
        // Overwrite mode for comparison (details only), where the right prompt matters most.
        if plain && setting.rtt_ms == 200 && !options.predict_quick_trace {
            clients.push(Client::TernOverwrite);
        }
        for client in clients {
            progress(&format!("predict: {} at {label}", client.label()));
            let link_seed = seed + i as u64;
            let recording = match client {
                Client::Tern => predictive::run_tern(setting, &actions, adaptive, link_seed),
                Client::TernOverwrite => {
                    predictive::run_tern(setting, &actions, overwrite, link_seed)
                }
                Client::MoshClient => {
                    predictive::run_mosh(setting, &actions, adaptive.mode, link_seed)
                }
            };
            let metrics =
                recording.and_then(|rec| predictive::analyze(&rec, &reference).map(|m| (rec, m)));
            match metrics {
                Ok((rec, m)) => {
                    if let Some(dir) = std::env::var_os("TERN_BENCH_PREDICT_DUMP") {
                        let file = std::path::Path::new(&dir).join(format!(
                            "{}-{}.log",
                            client.label(),
                            label.replace([' ', ',', '%'], "")
                        ));
                        let _ = std::fs::write(file, predictive::dump(&rec, &m));
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
                    predict_details(report, client, &label, &m, &rec, &parts);
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

fn predict_details(
    report: &mut Report,
    client: Client,
    label: &str,
    m: &Metrics,
    rec: &predictive::Recording,
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
        ] {
            report.detail(GROUP, name(what), v as f64, "");
        }
    }
}

/// Issue 17's targets: the renderer process's CPU per server frame during the full-screen
/// flood...
const COST_FLOOD_MS_PER_FRAME: f64 = 1.5;
/// ...a hidden tab during the flood (renderer and GPU processes together, % of a core)...
const COST_HIDDEN_PERCENT: f64 = 2.0;
/// ...and a page with nothing happening.
const COST_IDLE_PERCENT: f64 = 3.0;

fn cost_rows(options: &Options, report: &mut Report) {
    let seconds = if options.quick { 3 } else { 10 };
    // `flood-unheld`, `hidden-unheld`: the same with the relay told not to hold datagrams, the
    // before of the hold, side by side.
    // `blank`: about:blank in the same browser, the floor under the idle page and the hidden tab.
    let scenarios =
        ["flood", "flood-unheld", "log", "clock", "hidden", "hidden-unheld", "idle", "blank"];
    progress(&format!(
        "cost: the page's CPU per frame, {} scenarios x {seconds} s",
        scenarios.len()
    ));
    let run = match browser::frame_cost(seconds, "auto", &scenarios, !options.quick) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("cost failed: {e:#}"));
            return;
        }
    };
    let percent = |cpu_s: f64, s: &browser::CostScenario| 100.0 * cpu_s / s.seconds;
    let per_frame = |cpu_s: f64, s: &browser::CostScenario| {
        if s.states > 0.0 { cpu_s * 1000.0 / s.states } else { f64::NAN }
    };
    // The stock mosh-client on the same output, at the page's size.
    let mut mosh = std::collections::BTreeMap::new();
    if let Some(flood) = run.scenarios.get("flood") {
        for name in ["flood", "log", "clock"] {
            let command = run.commands.get(name).cloned().unwrap_or_default();
            progress(&format!("cost: mosh-client in tmux, {name}"));
            match frame_cost::mosh_client(
                &command,
                flood.cols,
                flood.rows,
                Duration::from_secs(2),
                seconds as f64,
                17,
            ) {
                Ok(m) => {
                    mosh.insert(name, m);
                }
                Err(e) => report.problems.push(format!("cost: mosh-client {name} failed: {e:#}")),
            }
        }
    }
    if let Some(s) = run.scenarios.get("flood") {
        let ms = per_frame(s.renderer_cpu_s, s);
        let theirs = mosh
            .get("flood")
            .and_then(frame_cost::MoshCost::client_ms_per_frame)
            .map_or("not measured".to_string(), |m| format!("{m:.2} ms"));
        let unheld = run
            .scenarios
            .get("flood-unheld")
            .map(|u| format!("{:.2} ms", per_frame(u.renderer_cpu_s, u)))
            .unwrap_or_else(|| "not measured".to_string());
        report.row(
            format!(
                "renderer CPU per frame, full-screen flood {}x{} ({} renderer)",
                s.cols, s.rows, s.renderer
            ),
            ms,
            "ms",
            format!(
                "≤ {COST_FLOOD_MS_PER_FRAME} ms (mosh-client: {theirs}; datagrams not held by \
                 the relay: {unheld})"
            ),
            ms <= COST_FLOOD_MS_PER_FRAME,
        );
    }
    if let Some(s) = run.scenarios.get("hidden") {
        let p = percent(s.renderer_cpu_s + s.gpu_cpu_s, s);
        let of = |name: &str| {
            run.scenarios
                .get(name)
                .map(|u| format!("{:.1} %", percent(u.renderer_cpu_s + u.gpu_cpu_s, u)))
                .unwrap_or_else(|| "not measured".to_string())
        };
        let (unheld, idle, blank) = (of("hidden-unheld"), of("idle"), of("blank"));
        report.row(
            "hidden tab during the flood, renderer + GPU CPU".to_string(),
            p,
            "% of a core",
            format!(
                "< {COST_HIDDEN_PERCENT} % (datagrams not held by the relay: {unheld}; the idle \
                 page: {idle}; about:blank: {blank})"
            ),
            p < COST_HIDDEN_PERCENT,
        );
    }
    if let Some(s) = run.scenarios.get("idle") {
        let p = percent(s.renderer_cpu_s + s.gpu_cpu_s, s);
        report.row(
            "idle page, renderer + GPU CPU".to_string(),
            p,
            "% of a core",
            format!("< {COST_IDLE_PERCENT} %"),
            p < COST_IDLE_PERCENT,
        );
    }
    for (name, s) in &run.scenarios {
        let group = format!("cost: {name}");
        report.detail(&group, "server states per second", s.states / s.seconds, "/s");
        report.detail(&group, "screen writes to xterm.js per second", s.writes / s.seconds, "/s");
        report.detail(&group, "renderer process CPU", percent(s.renderer_cpu_s, s), "% of a core");
        report.detail(&group, "GPU process CPU", percent(s.gpu_cpu_s, s), "% of a core");
        report.detail(
            &group,
            "browser and utility processes CPU",
            percent(s.browser_cpu_s, s),
            "% of a core",
        );
        if s.states > 0.0 {
            report.detail(&group, "renderer CPU per frame", per_frame(s.renderer_cpu_s, s), "ms");
            report.detail(&group, "GPU CPU per frame", per_frame(s.gpu_cpu_s, s), "ms");
            for (key, label) in [
                ("decryptMs", "page: decrypt per frame"),
                ("inflateMs", "page: reassemble, inflate, decode per frame"),
                ("applyMs", "page: emulator apply per frame"),
                ("diffMs", "page: compose and display diff per frame"),
                ("writeMs", "page: xterm.js write call per frame"),
            ] {
                if let Some(v) = s.page.get(key) {
                    report.detail(&group, label, v / s.states, "ms");
                }
            }
            if let Some(b) = s.page.get("bytesWritten") {
                report.detail(&group, "bytes written to xterm.js per frame", b / s.states, "B");
            }
        }
        if let (Some(profile), Some(states)) = (&s.profile, s.profile_states.filter(|n| *n > 0.0)) {
            for (kind, ms) in profile {
                report.detail(
                    &group,
                    format!("main thread per frame (profiler): {kind}"),
                    ms / states,
                    "ms",
                );
            }
        }
        if let Some(a) = &s.after_shown {
            // What pacing mosh-server to a hidden page's hold costs once someone looks.
            report.detail(
                &group,
                "shown again: server states in the first second",
                a.states_first_second,
                "",
            );
            // Not within the 8 s watched: no row (the summary line says "never").
            if let Some(s) = a.full_pace_after_s {
                report.detail(
                    &group,
                    "shown again: a second of full pace (40 states) from",
                    s,
                    "s",
                );
            }
        }
    }
    for (name, m) in &mosh {
        let group = format!("cost: {name}");
        report.detail(&group, "mosh-client CPU", 100.0 * m.client_cpu_s / m.seconds, "% of a core");
        report.detail(
            &group,
            "tmux server CPU (draws mosh-client's window)",
            100.0 * m.tmux_cpu_s / m.seconds,
            "% of a core",
        );
        report.detail(&group, "mosh-client frames per second", m.frames as f64 / m.seconds, "/s");
        if let Some(ms) = m.client_ms_per_frame() {
            report.detail(&group, "mosh-client CPU per frame", ms, "ms");
        }
    }
    // The renderer choice: the flood with each of xterm.js's renderers, side by side.
    if !options.quick {
        for renderer in ["dom", "webgl"] {
            progress(&format!("cost: the flood with xterm.js's {renderer} renderer"));
            match browser::frame_cost(seconds, renderer, &["flood"], false) {
                Ok(r) => {
                    if let Some(s) = r.scenarios.get("flood") {
                        let group = format!("cost: renderer {renderer}");
                        report.detail(
                            &group,
                            "flood: renderer process CPU",
                            percent(s.renderer_cpu_s, s),
                            "% of a core",
                        );
                        report.detail(
                            &group,
                            "flood: GPU process CPU",
                            percent(s.gpu_cpu_s, s),
                            "% of a core",
                        );
                        report.detail(
                            &group,
                            "flood: renderer CPU per frame",
                            per_frame(s.renderer_cpu_s, s),
                            "ms",
                        );
                        report.detail(
                            &group,
                            "flood: renderer + GPU CPU per frame",
                            per_frame(s.renderer_cpu_s + s.gpu_cpu_s, s),
                            "ms",
                        );
                    }
                }
                Err(e) => {
                    report.problems.push(format!("cost with the {renderer} renderer failed: {e:#}"))
                }
            }
        }
    }
}

/// The core's client cost of a full-screen frame (issue 17): apply the server's diff and render
/// the page's display diff, in-process (`core_frame`).
fn core_rows(options: &Options, report: &mut Report) {
    let (frames, repeats) = if options.quick { (20, 1) } else { (200, 5) };
    progress(&format!("core: {frames} full 200x60 frames, {repeats} times"));
    let run = core_frame::run(frames, repeats);
    if run.mismatches > 0 {
        report.problems.push(format!(
            "core: {} of {} frames applied to a screen other than the server's",
            run.mismatches, run.frames
        ));
    }
    let target = core_frame::TARGET_MS;
    if let Some(m) = median(&run.total_ms) {
        report.row(
            "core: apply + display diff, full 200x60 frame",
            m,
            "ms",
            format!("≤ {target} ms"),
            m <= target,
        );
    }
    let group = "core, full 200x60 frame";
    // The fastest frame: on a shared machine the steadiest figure to compare changes by.
    if let Some(fastest) = run.total_ms.iter().copied().reduce(f64::min) {
        report.detail(group, "client: apply + display diff, fastest frame", fastest, "ms");
    }
    for (what, v) in [
        ("client: apply the server's diff", &run.apply_ms),
        ("client: render for the page (Renderer::in_place)", &run.render_ms),
    ] {
        if let (Some(m), Some(p)) = (median(v), p95(v)) {
            report.detail(group, format!("{what}, median"), m, "ms");
            report.detail(group, format!("{what}, p95"), p, "ms");
        }
    }
    let per_frame = |total: usize| total as f64 / run.frames.max(1) as f64;
    report.detail(group, "server's diff (HostBytes) per frame", per_frame(run.diff_bytes), "B");
    report.detail(
        group,
        "page's render per frame (Renderer::in_place)",
        per_frame(run.in_place_bytes),
        "B",
    );
    report.detail(
        group,
        "the same frames with mosh's choices (Renderer::new: the page's bytes before)",
        per_frame(run.mosh_bytes),
        "B",
    );
    report.detail(group, "frames timed", run.frames as f64, "");
}

/// Added latency p99 at the full session count must stay within this (issue 16).
const SESSIONS_ADDED_P99_MS: f64 = 2.0;
/// The relay's memory per idle session must stay within this (issue 16).
const SESSION_MEMORY_KIB: f64 = 256.0;

fn install_rows(options: &Options, report: &mut Report) {
    use install::{BINARY_TARGET_BYTES, COLD_START_TARGET_MS, INSTALL_TARGET};
    progress("install: npm run dist, then the release in a clean Debian root");
    let run = match install::run(options.quick) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("install failed: {e:#}"));
            return;
        }
    };
    let target_s = INSTALL_TARGET.as_secs_f64();
    match run.install_to_url_ms {
        Some(ms) => report.row(
            format!(
                "install.sh from a local mirror: clean Debian 12 root with mosh → printed URL (median of {})",
                run.install_runs
            ),
            ms / 1000.0,
            "s",
            format!("≤ {target_s} s (building from source: docs/BENCHMARKS.md, \"Installing\")"),
            ms / 1000.0 <= target_s,
        ),
        None => report.pending(
            "install.sh from a local mirror: clean Debian 12 root with mosh → printed URL",
            &format!("≤ {target_s} s"),
            run.install_problem.as_deref().unwrap_or("not measured"),
        ),
    }
    for (target, bytes) in &run.binaries {
        report.row(
            format!("static tern-relay, stripped ({target})"),
            *bytes as f64 / 1e6,
            "MB",
            format!("≤ {} MB", BINARY_TARGET_BYTES / 1_000_000),
            *bytes <= BINARY_TARGET_BYTES,
        );
    }
    if let Some(p50) = stats::quantile(&run.cold_start_ms, 0.5) {
        report.row(
            format!(
                "relay cold start: exec → printed URL (static x86_64, fresh state dir, median of {})",
                run.cold_start_ms.len()
            ),
            p50,
            "ms",
            format!("≤ {COLD_START_TARGET_MS} ms"),
            p50 <= COLD_START_TARGET_MS,
        );
    }
    let g = "install";
    for (arch, bytes) in &run.debs {
        report.detail(g, format!(".deb ({arch})"), *bytes as f64 / 1e6, "MB");
    }
    for (target, bytes) in &run.tarballs {
        report.detail(g, format!("tarball ({target})"), *bytes as f64 / 1e6, "MB");
    }
    if let Some(ms) = run.install_script_ms {
        report.detail(g, "install.sh alone (download, verify, install)", ms, "ms");
    }
    if let Some(ms) = run.relay_start_in_root_ms {
        report.detail(g, "relay start → URL inside the root", ms, "ms");
    }
    if let Some(p95) = stats::quantile(&run.cold_start_ms, 0.95) {
        report.detail(g, "relay cold start p95", p95, "ms");
    }
}

fn sessions_rows(options: &Options, report: &mut Report) {
    let n = options.sessions;
    progress(&format!("sessions: {n} on one relay (release build)"));
    let run = browser::release_relay().and_then(|bin| {
        sessions::run(&bin, n, options.session_keys_per_second, options.session_typing)
    });
    let run = match run {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("sessions ({n}) failed: {e:#}"));
            return;
        }
    };
    let held_ok = run.held == n && run.neighbours_ok_after == n && run.relay_alive_after;
    report.row(
        format!("sessions held by one relay (--max-sessions {n}), all answering after the load"),
        run.neighbours_ok_after as f64,
        "sessions",
        format!("= {n} ({} over the WebSocket)", run.websocket_sessions),
        held_ok,
    );
    if let Some(p99) = run.added(0.99) {
        report.row(
            format!("added latency p99, keystroke → echo, {n} sessions typing"),
            p99,
            "ms",
            format!("≤ {SESSIONS_ADDED_P99_MS} ms"),
            p99 <= SESSIONS_ADDED_P99_MS,
        );
    }
    let memory = run.memory_per_session_kib();
    report.row(
        format!("relay memory per idle session ({n} sessions)"),
        memory,
        "KiB",
        format!("≤ {SESSION_MEMORY_KIB} KiB"),
        memory <= SESSION_MEMORY_KIB,
    );
    report.row(
        format!("session {} past --max-sessions {n}: refused, relay alive", n + 1),
        f64::from(u8::from(run.refused_both && run.relay_alive_after)),
        "refused",
        format!("refused over both transports ({})", run.refusal),
        run.refused_both && run.relay_alive_after,
    );
    let g = "sessions";
    if let Some(p50) = run.added_p50() {
        report.detail(g, format!("added latency p50, {n} sessions typing"), p50, "ms");
    }
    let paths = [
        ("through the relay", &run.relayed),
        ("through the relay, WebTransport", &run.relayed_webtransport),
        ("through the relay, WebSocket", &run.relayed_websocket),
        ("direct", &run.direct),
    ];
    for (name, samples) in paths {
        for (q, label) in [(0.5, "p50"), (0.99, "p99")] {
            if let Some(v) = stats::quantile(samples, q) {
                report.detail(g, format!("keystroke → echo {label}, {name}"), v, "ms");
            }
        }
    }
    report.detail(g, "relay CPU per typing session", run.cpu_per_session_percent(), "% of a core");
    report.detail(g, "relay CPU, all sessions typing", run.cpu_typing_percent, "% of a core");
    report.detail(g, "relay CPU, all sessions idle", run.cpu_idle_percent, "% of a core");
    report.detail(g, "relay RSS before the sessions", run.rss_before_kib / 1024.0, "MiB");
    report.detail(g, "relay RSS with every session open", run.rss_idle_kib / 1024.0, "MiB");
    report.detail(g, "keystrokes through the relay in the window", run.keys as f64, "keys");
    report.detail(g, "keystrokes without an echo", run.lost as f64, "keys");
    report.detail(g, "time to open every session", run.open_seconds, "s");
    report.detail(g, "keys a second per session", options.session_keys_per_second, "keys/s");
}
