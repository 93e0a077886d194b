//! Continuous screen updates (the suite's second rows): the shell prints a counter every 10 ms for
//! a while; how often does the client show a new frame, and how many of the server's instructions
//! could it apply the moment they arrived?
//!
//! * Tern and Tern `--stop-and-wait` are timed in-process: a frame is a new newest server state
//!   whose screen differs from the one before (what a driver would redraw). Applied on arrival is
//!   `(applied - parked) / (applied + refused_older_base + dropped_unknown_base + lost_base + stale
//!   + quenched + apply_failures)` from the transport counters over the command's run.
//! * The stock mosh-client is timed at the protocol level by the decrypting tap: a frame is a
//!   server instruction handed to the client that makes a new newest state and carries HostBytes;
//!   an instruction is applicable on arrival when its base state was handed to the client earlier
//!   (mosh-client keeps every state it received until the server's throwaway number retires it,
//!   so this is what it can apply; MOSH-PROTOCOL.md 6.5).
//!
//! Intervals are counted in a window that starts once the output runs and both ends' RTT
//! estimates have settled (command sent + RTT + a warm-up) and ends at the frame showing the end
//! marker.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tern::transport::Counters;
use tern::wire::StateNum;
use tern_tests::linkemu::Dir;

use crate::decode::{WireEvent, decode};
use crate::link::{self, Link, close_tern, connect_mosh, connect_tern};
use crate::report::Report;
use crate::stats::{median, ms};
use crate::{Options, progress};

/// Printed when the counter is done. Typed as `E%sD` and `ND`, so the command line never shows it.
const END_MARKER: &str = "ENDD";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameClient {
    Tern,
    TernStopAndWait,
    MoshClient,
}

impl FrameClient {
    pub fn label(self) -> &'static str {
        match self {
            FrameClient::Tern => "tern-probe",
            FrameClient::TernStopAndWait => "tern-probe --stop-and-wait",
            FrameClient::MoshClient => "mosh-client",
        }
    }
}

/// What one client showed during one run.
#[derive(Debug, Clone, Default)]
pub struct FrameRun {
    /// Intervals between consecutive frames inside the window, ms.
    pub intervals: Vec<f64>,
    /// Server instructions applied on arrival / all server instructions (see the module doc).
    pub applied_on_arrival: u64,
    pub instructions: u64,
    /// Tern only: instructions dropped for a base it had thrown away (must be 0).
    pub dropped_unknown_base: u64,
    /// Tern stop-and-wait only: instructions refused for an older base.
    pub refused_older_base: u64,
}

impl FrameRun {
    pub fn applied_fraction(&self) -> Option<f64> {
        (self.instructions > 0).then(|| self.applied_on_arrival as f64 / self.instructions as f64)
    }
}

/// The command: `count` lines, one every 10 ms, then the end marker.
fn command(count: u32) -> String {
    format!("for i in $(seq 1 {count}); do echo $i; sleep 0.01; done; printf 'E%sD\\n' ND\r")
}

pub fn run(
    client: FrameClient,
    delay: Duration,
    count: u32,
    warmup: Duration,
    seed: u64,
) -> anyhow::Result<FrameRun> {
    let link = Link::start(delay, seed)?;
    // Generous: the counter runs about count x 11 ms; a stop-and-wait client may lag far behind.
    let patience =
        Duration::from_millis(u64::from(count) * 40) + delay * 40 + Duration::from_secs(20);
    let window_start_after = delay * 2 + warmup;
    match client {
        FrameClient::Tern | FrameClient::TernStopAndWait => {
            let mut tern = connect_tern(&link, client == FrameClient::TernStopAndWait)?;
            tern.run_for(Duration::from_millis(300)).context("udp")?;
            let before = tern.session().counters().clone();
            let sent = Instant::now();
            tern.type_bytes(command(count).as_bytes()).context("udp")?;
            let mut frames = Vec::new();
            let mut last_rows: Vec<String> = Vec::new();
            let mut last_state = None;
            let done = tern
                .run_until(patience, |s| {
                    if last_state == Some(s.server_state_num()) {
                        return false;
                    }
                    last_state = Some(s.server_state_num());
                    let now = Instant::now();
                    let screen = link::rows(s);
                    let end = screen.iter().any(|r| r.contains(END_MARKER));
                    if screen != last_rows {
                        frames.push(now);
                        last_rows = screen;
                    }
                    end
                })
                .context("udp")?;
            if !done {
                bail!("{}: no end marker within {patience:?}", client.label());
            }
            let after = tern.session().counters().clone();
            close_tern(tern);
            let end = *frames.last().expect("the end marker is a frame");
            let mut run = counts(&before, &after);
            run.intervals = window_intervals(&frames, sent + window_start_after, end);
            Ok(run)
        }
        FrameClient::MoshClient => {
            let mosh = connect_mosh(&link)?;
            std::thread::sleep(Duration::from_millis(300));
            let mut control = mosh.control().context("tmux control mode")?;
            let (sent, _) = control.send_keys(command(count).as_bytes()).context("tmux")?;
            let deadline = Instant::now() + patience;
            while !mosh.capture().rows.iter().any(|r| r.contains(END_MARKER)) {
                if Instant::now() >= deadline {
                    bail!("mosh-client: no end marker within {patience:?}");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // The capture polls; make sure the tap has everything up to the marker.
            std::thread::sleep(delay + Duration::from_millis(200));
            drop(control);
            drop(mosh);
            let events = decode(&link.server.key, &link.tap.take());
            protocol_level(&events, sent, sent + window_start_after)
                .context("mosh-client: no end marker on the tap")
        }
    }
}

fn counts(before: &Counters, after: &Counters) -> FrameRun {
    let d = |f: fn(&Counters) -> u64| f(after).saturating_sub(f(before));
    let applied = d(|c| c.applied);
    let parked = d(|c| c.parked);
    let refused = d(|c| c.refused_older_base);
    let unknown = d(|c| c.dropped_unknown_base);
    let others = d(|c| c.lost_base) + d(|c| c.stale) + d(|c| c.quenched) + d(|c| c.apply_failures);
    FrameRun {
        intervals: Vec::new(),
        applied_on_arrival: applied.saturating_sub(parked),
        instructions: applied + refused + unknown + others,
        dropped_unknown_base: unknown,
        refused_older_base: refused,
    }
}

/// Intervals between consecutive frames that both lie in `[from, to]`.
fn window_intervals(frames: &[Instant], from: Instant, to: Instant) -> Vec<f64> {
    let inside: Vec<Instant> = frames.iter().copied().filter(|&f| f >= from && f <= to).collect();
    inside.windows(2).map(|w| ms(w[1] - w[0])).collect()
}

/// Frames and applicability of the server's instructions as the client received them.
fn protocol_level(events: &[WireEvent], sent: Instant, from: Instant) -> Option<FrameRun> {
    let mut delivered: HashSet<StateNum> = HashSet::from([StateNum::INITIAL]);
    let mut newest = StateNum::INITIAL;
    let mut frames = Vec::new();
    let mut run = FrameRun::default();
    let mut end = None;
    let mut downs: Vec<&WireEvent> = events.iter().filter(|e| e.dir == Dir::Down).collect();
    downs.sort_by_key(|e| e.released);
    for e in downs {
        let Some(at) = e.released else { continue };
        let i = &e.instruction;
        if at >= sent && end.is_none() && !delivered.contains(&i.new_num) {
            run.instructions += 1;
            if delivered.contains(&i.old_num) {
                run.applied_on_arrival += 1;
            }
        }
        delivered.insert(i.new_num);
        if i.new_num > newest && i.new_num != StateNum::SHUTDOWN {
            newest = i.new_num;
            if e.draws() && end.is_none() {
                frames.push(at);
                if at >= sent && e.drawn_text().contains(END_MARKER) {
                    end = Some(at);
                }
            }
        }
    }
    let end = end?;
    run.intervals = window_intervals(&frames, from, end);
    Some(run)
}

// The suite's `frames` part.

/// Tern's frame interval may be at most this many times mosh-client's (medians).
const FRAME_INTERVAL_RATIO: f64 = 1.05;

/// The suite's `frames` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    for (i, &delay_ms) in options.frame_delays_ms.iter().enumerate() {
        let delay = Duration::from_millis(delay_ms);
        let mut runs: Vec<(FrameClient, FrameRun)> = Vec::new();
        for client in [FrameClient::Tern, FrameClient::TernStopAndWait, FrameClient::MoshClient] {
            progress(&format!("frames: {} at one-way delay {delay_ms} ms", client.label()));
            let seed = 0xF4A0 + i as u64;
            match run(client, delay, options.frame_lines, options.frame_warmup, seed) {
                Ok(run) => {
                    details(report, client, delay_ms, &run);
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
            let name =
                format!("frame interval median, tern-probe / mosh-client, one-way {delay_ms} ms");
            report.ratio_row(name, t, m, FRAME_INTERVAL_RATIO);
        }
    }
}

fn details(report: &mut Report, client: FrameClient, delay_ms: u64, run: &FrameRun) {
    let label = client.label();
    let at = format!("one-way {delay_ms} ms");
    report.median_p95("frames", &format!("{label}, {at}: frame interval"), &run.intervals, "ms");
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
