//! Keystroke echo latency (the suite's first rows): single printable keys typed at the shell
//! prompt, one at a time, each drawn by the shell's line editor, timed from the key to its echo.
//!
//! Both clients are timed at the protocol level by the same tap on the link emulator, decrypted
//! with the session key (see [`crate::decode`]):
//!
//! ```text
//!  key ──key-to-wire──> up datagram carrying it reaches the link (client side)
//!      ──network up───> handed to mosh-server (server side)
//!      ──server turn──> first server datagram whose HostBytes draw the key leaves mosh-server
//!      ──network down─> handed to the client  = protocol-level key-to-echo
//! ```
//!
//! The key's time is, for Tern, just before `handle_input` (in-process); for mosh-client, just
//! before the `send-keys` command is written to a tmux control-mode client (so it includes tmux
//! writing the key to mosh-client's terminal, well under a millisecond; the command's round trip is
//! reported as a detail). Tern is also timed in-process, key to the screen model showing the key
//! ("key-to-screen"): the protocol-level time plus Tern's own receive and apply.
//!
//! Keys come at a typist's pace, a random 150-400 ms apart whatever the RTT, so at high RTT several
//! are in flight at once and each meets the client's send timers at a random phase, as a user's
//! keys do (spacing keys wider than an echo would hide mosh-client's frame-interval hold, which is
//! what users feel at 500 ms). Each key is a distinct letter, so its datagram and its echo are
//! told apart from its neighbours'. The first keys of a session only warm up the RTT estimates of
//! both ends and are not counted.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tern_tests::linkemu::Dir;

use crate::decode::{WireEvent, decode};
use crate::link::{self, Link, PROMPT, close_tern, connect_mosh, connect_tern};
use crate::report::Report;
use crate::stats::{median, ms, p95};
use crate::{Options, browser, progress};

/// Distinct keys, so each echo can be told apart; the prompt line stays within 80 columns.
const KEYS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// How a client's keys are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoClient {
    Tern,
    MoshClient,
}

impl EchoClient {
    pub fn label(self) -> &'static str {
        match self {
            EchoClient::Tern => "tern-probe",
            EchoClient::MoshClient => "mosh-client",
        }
    }
}

/// One key's timing, in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeySample {
    pub key_to_wire: f64,
    pub network_up: f64,
    pub server_turn: f64,
    pub network_down: f64,
    /// Key to the echo datagram handed to the client (the sum of the four above).
    pub key_to_echo: f64,
    /// Tern only: key to the screen model showing it.
    pub key_to_screen: Option<f64>,
}

/// The samples of one client at one RTT.
#[derive(Debug, Clone, Default)]
pub struct EchoRun {
    pub samples: Vec<KeySample>,
    /// Keys typed and counted whose echo could not be found.
    pub missing: usize,
    /// mosh-client only: round trips of the tmux `send-keys` commands, ms.
    pub tmux_command: Vec<f64>,
}

/// A key as typed: its byte and when.
#[derive(Debug, Clone, Copy)]
struct Typed {
    byte: u8,
    at: Instant,
    screen: Option<Instant>,
}

/// The pauses before each of `n` keys: a typist's pace, 150-400 ms, the same for every client
/// given the same seed (the browser's run gets them too: mosh-server's frame pacing makes the
/// echo depend on when keys come, so clients compared side by side type at the same moments).
pub fn typing_gaps(seed: u64, n: usize) -> Vec<Duration> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| Duration::from_millis(rng.random_range(150..400))).collect()
}

/// Measures `keys` keystrokes (after `warmup` uncounted ones) of one client at one RTT.
pub fn run(
    client: EchoClient,
    rtt: Duration,
    warmup: usize,
    keys: usize,
    seed: u64,
) -> anyhow::Result<EchoRun> {
    if warmup + keys > KEYS.len() {
        bail!("at most {} keys per session", KEYS.len());
    }
    let link = Link::start(rtt / 2, seed)?;
    let gaps = typing_gaps(seed, warmup + keys);
    // After the last key, time for its echo.
    let tail = rtt * 2 + Duration::from_secs(1);
    let mut run = EchoRun::default();
    let typed = match client {
        EchoClient::Tern => type_tern(&link, &gaps, tail)?,
        EchoClient::MoshClient => type_mosh(&link, &gaps, tail, &mut run.tmux_command)?,
    };
    let events = decode(&link.server.key, &link.tap.take());
    for t in &typed[warmup..] {
        match time_key(&events, t) {
            Some(sample) => run.samples.push(sample),
            None => run.missing += 1,
        }
    }
    Ok(run)
}

fn type_tern(link: &Link, gaps: &[Duration], tail: Duration) -> anyhow::Result<Vec<Typed>> {
    let mut client = connect_tern(link, false)?;
    // The prompt line once key i is drawn (later keys may be drawn in the same frame).
    let lines: Vec<String> = (1..=gaps.len())
        .map(|n| format!("{PROMPT}{}", String::from_utf8_lossy(&KEYS[..n])))
        .collect();
    let mut typed: Vec<Typed> = Vec::new();
    let mut last_state = None;
    for (i, (&byte, &gap)) in KEYS.iter().zip(gaps).enumerate() {
        let at = Instant::now();
        client.type_bytes(&[byte]).context("udp")?;
        typed.push(Typed { byte, at, screen: None });
        let until = if i + 1 == gaps.len() { tail } else { gap };
        // Keep the session running until the next key is due, noting when each echo is drawn.
        client
            .run_until(until.saturating_sub(at.elapsed()), |s| {
                if last_state == Some(s.server_state_num()) {
                    return false;
                }
                last_state = Some(s.server_state_num());
                let now = Instant::now();
                let screen = link::rows(s);
                for (key, line) in typed.iter_mut().zip(&lines) {
                    if key.screen.is_none() && screen.iter().any(|r| r.starts_with(line.as_str())) {
                        key.screen = Some(now);
                    }
                }
                false
            })
            .context("udp")?;
    }
    close_tern(client);
    Ok(typed)
}

fn type_mosh(
    link: &Link,
    gaps: &[Duration],
    tail: Duration,
    tmux: &mut Vec<f64>,
) -> anyhow::Result<Vec<Typed>> {
    let client = connect_mosh(link)?;
    let mut control = client.control().context("tmux control mode")?;
    let mut typed = Vec::new();
    for (&byte, &gap) in KEYS.iter().zip(gaps) {
        let (at, done) = control.send_keys(&[byte]).context("tmux send-keys")?;
        tmux.push(ms(done - at));
        typed.push(Typed { byte, at, screen: None });
        std::thread::sleep(gap.saturating_sub(at.elapsed()));
    }
    std::thread::sleep(tail);
    drop(control);
    drop(client);
    Ok(typed)
}

/// Finds a key's datagram and its echo on the tap and splits the time between them.
fn time_key(events: &[WireEvent], key: &Typed) -> Option<KeySample> {
    let up =
        events.iter().find(|e| e.dir == Dir::Up && e.arrived >= key.at && e.has_key(key.byte))?;
    let up_released = up.released?;
    let echo = events.iter().find(|e| {
        e.dir == Dir::Down
            && e.arrived >= up_released
            && e.drawn_text().contains(char::from(key.byte))
    })?;
    let echo_released = echo.released?;
    Some(KeySample {
        key_to_wire: ms(up.arrived - key.at),
        network_up: ms(up_released - up.arrived),
        server_turn: ms(echo.arrived - up_released),
        network_down: ms(echo_released - echo.arrived),
        key_to_echo: ms(echo_released - key.at),
        key_to_screen: key.screen.map(|s| ms(s - key.at)),
    })
}

// The suite's `echo` part: tern-probe and mosh-client at each RTT, then Tern in the browser, over
// WebTransport and (at some RTTs) over the WebSocket fallback.

/// The echo target for one RTT: the highest allowed ratio of Tern's median to mosh-client's.
fn echo_ratio_target(rtt_ms: u64) -> f64 {
    if rtt_ms >= 500 { 0.85 } else { 1.0 }
}

/// A key must leave within this long (p95), at every RTT.
const KEY_TO_WIRE_P95_MS: f64 = 2.0;

/// The WebSocket fallback may cost this much over WebTransport on a clean link (median echo).
const FALLBACK_ECHO_RATIO: f64 = 1.05;
/// Page load to the first screen with UDP silently blocked, minus the same with UDP open.
const FALLBACK_START_PENALTY_MS: f64 = 1500.0;

/// The suite's `echo` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    for (i, &rtt_ms) in options.echo_rtts_ms.iter().enumerate() {
        let rtt = Duration::from_millis(rtt_ms);
        let seed = 0xEC40 + i as u64;
        let mut runs: Vec<(EchoClient, EchoRun)> = Vec::new();
        for client in [EchoClient::Tern, EchoClient::MoshClient] {
            progress(&format!("echo: {} at RTT {rtt_ms} ms", client.label()));
            match run(client, rtt, options.echo_warmup, options.echo_keys, seed) {
                Ok(run) => {
                    if run.missing > 0 {
                        report.problems.push(format!(
                            "echo, {}, RTT {rtt_ms} ms: {} of {} keys without a matched echo",
                            client.label(),
                            run.missing,
                            options.echo_keys
                        ));
                    }
                    details(report, client, rtt_ms, &run);
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
            key_to_wire_row(report, format!("key-to-wire p95, tern-probe, RTT {rtt_ms} ms"), &wire);
        }
        if let (Some(tern), Some(mosh)) = (tern, mosh) {
            let screen: Vec<f64> = tern.samples.iter().filter_map(|s| s.key_to_screen).collect();
            let name = format!("key-to-echo median, tern-probe / mosh-client, RTT {rtt_ms} ms");
            against_mosh_client(report, name, &screen, mosh, rtt_ms);
        }
        if options.echo_browser {
            let webtransport = browser_rows(options, report, rtt_ms, seed, mosh);
            if options.fallback_rtts_ms.contains(&rtt_ms) {
                fallback_rows(options, report, rtt_ms, seed, webtransport.as_ref());
                lossy_fallback_details(options, report, rtt_ms, seed);
            }
        }
    }
}

/// The key-to-wire row: the p95 of `samples` within [`KEY_TO_WIRE_P95_MS`].
fn key_to_wire_row(report: &mut Report, name: String, samples: &[f64]) {
    if let Some(p) = p95(samples) {
        let target = format!("≤ {KEY_TO_WIRE_P95_MS} ms");
        report.row(name, p, "ms", target, p <= KEY_TO_WIRE_P95_MS);
    }
}

/// The ratio row of Tern's median echo (`screen`) to mosh-client's protocol-level one at the same
/// RTT.
fn against_mosh_client(
    report: &mut Report,
    name: String,
    screen: &[f64],
    mosh: &EchoRun,
    rtt_ms: u64,
) {
    let reference: Vec<f64> = mosh.samples.iter().map(|s| s.key_to_echo).collect();
    if let (Some(t), Some(m)) = (median(screen), median(&reference)) {
        report.ratio_row(name, t, m, echo_ratio_target(rtt_ms));
    }
}

fn details(report: &mut Report, client: EchoClient, rtt_ms: u64, run: &EchoRun) {
    let label = client.label();
    let col = |f: fn(&KeySample) -> f64| run.samples.iter().map(f).collect::<Vec<f64>>();
    let mut both = |what: &str, v: &[f64]| {
        report.median_p95("echo", &format!("{label}, RTT {rtt_ms} ms: {what}"), v, "ms");
    };
    if client == EchoClient::Tern {
        let screen: Vec<f64> = run.samples.iter().filter_map(|s| s.key_to_screen).collect();
        both("key-to-screen (in-process)", &screen);
    }
    both("key-to-echo (protocol level)", &col(|s| s.key_to_echo));
    both("key-to-wire", &col(|s| s.key_to_wire));
    both("server turn", &col(|s| s.server_turn));
    let network: Vec<f64> = run.samples.iter().map(|s| s.network_up + s.network_down).collect();
    report.detail_if(
        "echo",
        &format!("{label}, RTT {rtt_ms} ms: network (up + down) median"),
        median(&network),
        "ms",
    );
    report.detail_if(
        "echo",
        &format!("{label}, RTT {rtt_ms} ms: tmux send-keys command round trip median"),
        median(&run.tmux_command),
        "ms",
    );
    report.detail(
        "echo",
        format!("{label}, RTT {rtt_ms} ms: keys timed"),
        run.samples.len() as f64,
        "",
    );
}

/// One run of `echo-bench.mjs` over `(transport, RTT, loss)`. A failure, and keys without an echo
/// (`unseen`: where), are problems named `echo, WHAT`.
fn browser_echo(
    options: &Options,
    report: &mut Report,
    (transport, rtt_ms, loss): (browser::Transport, u64, Option<f64>),
    seed: u64,
    what: &str,
    unseen: &str,
) -> Option<browser::EchoRun> {
    let keys = options.echo_keys;
    let api = browser::DatagramApi::Chromium;
    match browser::echo(transport, api, rtt_ms, loss, options.echo_warmup, keys, seed) {
        Ok(run) => {
            if run.missing > 0 {
                report.problems.push(format!(
                    "echo, {what}: {} of {keys} keys without an echo{unseen}",
                    run.missing
                ));
            }
            Some(run)
        }
        Err(e) => {
            report.problems.push(format!("echo, {what} failed: {e:#}"));
            None
        }
    }
}

/// Tern in the browser at one RTT, against the mosh-client run of the same RTT (same run, same
/// link settings; the browser's emulator sits between the page and tern-relay, so the RTT is on
/// the browser's path and relay → mosh-server is loopback).
fn browser_rows(
    options: &Options,
    report: &mut Report,
    rtt_ms: u64,
    seed: u64,
    mosh: Option<&EchoRun>,
) -> Option<browser::EchoRun> {
    progress(&format!("echo: Tern in the browser at RTT {rtt_ms} ms"));
    let transport = browser::Transport::WebTransport;
    let label = format!("browser, RTT {rtt_ms} ms");
    let run =
        browser_echo(options, report, (transport, rtt_ms, None), seed, &label, " on the screen")?;
    let (screen, send) = (run.screen(), run.send());
    let name = format!("key-to-wire p95, browser (key → datagram written), RTT {rtt_ms} ms");
    key_to_wire_row(report, name, &send);
    if let Some(mosh) = mosh {
        let name = format!("key-to-echo median, browser / mosh-client, RTT {rtt_ms} ms");
        against_mosh_client(report, name, &screen, mosh, rtt_ms);
    }
    const GROUP: &str = "echo, browser";
    let mut both = |what: &str, v: &[f64]| {
        report.median_p95(GROUP, &format!("{label}: {what}"), v, "ms");
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
    report.detail_if(
        GROUP,
        &format!("{label}: rest (key-to-screen − key-to-wire − network {rtt_ms} ms) median"),
        median(&rest),
        "ms",
    );
    report.detail(GROUP, format!("{label}: network (up + down)"), rtt_ms as f64, "ms");
    report.detail(GROUP, format!("{label}: mosh SRTT (the page's core)"), run.srtt_ms, "ms");
    report.detail(
        GROUP,
        format!("{label}: dropped for unknown base"),
        run.dropped_unknown_base,
        "",
    );
    report.detail(GROUP, format!("{label}: keys timed"), screen.len() as f64, "");
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
            report.detail_if(GROUP, &format!("{label}: {what} median"), median(v), "ms");
        }
    }
    Some(run)
}

/// Both transports on a lossy link (TCP's retransmissions hold back everything behind a lost
/// segment; WebTransport's datagrams do not wait): reported, no target.
fn lossy_fallback_details(options: &Options, report: &mut Report, rtt_ms: u64, seed: u64) {
    let loss = options.fallback_loss_percent;
    let group = "echo, browser, lossy link";
    let mut medians = Vec::new();
    for transport in [browser::Transport::WebTransport, browser::Transport::WebSocket] {
        let what = format!("{}, RTT {rtt_ms} ms, {loss} % loss", transport.as_str());
        progress(&format!("echo: Tern in the browser over {what}"));
        let link = (transport, rtt_ms, Some(loss));
        if let Some(run) =
            browser_echo(options, report, link, seed, &format!("browser, {what}"), "")
        {
            let name = format!("{what}: key-to-screen");
            medians.extend(report.median_p95(group, &name, &run.screen(), "ms"));
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
    let label = format!("WebSocket fallback, RTT {rtt_ms} ms");
    let Some(run) = browser_echo(options, report, (transport, rtt_ms, None), seed, &label, "")
    else {
        return;
    };
    const GROUP: &str = "echo, browser";
    let screen = run.screen();
    report.median_p95(GROUP, &format!("{label}: key-to-screen"), &screen, "ms");
    let first_screen = format!("{label}: page load to first screen");
    report.detail_if(GROUP, &first_screen, run.first_frame_ms, "ms");
    let Some(wt) = webtransport else { return };
    let name = format!("WebTransport, RTT {rtt_ms} ms: page load to first screen");
    report.detail_if(GROUP, &name, wt.first_frame_ms, "ms");
    if let (Some(ws), Some(wt)) = (median(&screen), median(&wt.screen())) {
        let name =
            format!("key-to-echo median, WebSocket fallback / WebTransport, RTT {rtt_ms} ms");
        report.ratio_row(name, ws, wt, FALLBACK_ECHO_RATIO);
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
