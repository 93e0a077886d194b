//! The cost of a frame in the browser (the suite's `cost` part): the page's CPU per frame from
//! `tests/browser/bench/frame-cost-bench.mjs` ([`browser::frame_cost`]), against the stock
//! mosh-client's side, measured here ([`mosh_client`]): the same commands as the script types
//! into Tern's page, typed into mosh-client in tmux at the page's size, each with its own
//! mosh-server on loopback. CPU time of mosh-client and of the tmux server that draws its window,
//! from /proc; frames are the server instructions that drew something, as the decrypting tap saw
//! them reach mosh-client.

use std::time::{Duration, Instant};

use anyhow::Context;
use tern_tests::linkemu::Dir;

use crate::decode::decode;
use crate::link::{Link, connect_mosh_sized};
use crate::report::Report;
use crate::{Options, browser, progress};

/// What mosh-client and tmux spent over a window.
#[derive(Debug, Clone)]
pub struct MoshCost {
    pub seconds: f64,
    pub client_cpu_s: f64,
    pub tmux_cpu_s: f64,
    pub frames: u64,
}

impl MoshCost {
    /// mosh-client's CPU per frame it received, ms.
    pub fn client_ms_per_frame(&self) -> Option<f64> {
        (self.frames > 0).then(|| self.client_cpu_s * 1000.0 / self.frames as f64)
    }
}

/// CPU seconds (user + system) a process has used so far.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        Ok(fields.get(i).context("short stat")?.parse::<f64>()?)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name; clock ticks are
    // 1/100 s on Linux.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// Runs `command` in mosh-client (a `cols` x `rows` window), waits `settle`, then measures for
/// `seconds`.
pub fn mosh_client(
    command: &str,
    cols: u16,
    rows: u16,
    settle: Duration,
    seconds: f64,
    seed: u64,
) -> anyhow::Result<MoshCost> {
    let link = Link::start(Duration::ZERO, seed)?;
    let mosh = connect_mosh_sized(&link, cols, rows)?;
    let client = mosh.client_pid().context("mosh-client's pid")?;
    let tmux = mosh.tmux_server_pid().context("the tmux server's pid")?;
    let mut control = mosh.control().context("tmux control mode")?;
    if !command.is_empty() {
        control.send_keys(format!("{command}\r").as_bytes()).context("tmux")?;
    }
    std::thread::sleep(settle);
    let (c0, t0, from) = (cpu_seconds(client)?, cpu_seconds(tmux)?, Instant::now());
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (c1, t1, to) = (cpu_seconds(client)?, cpu_seconds(tmux)?, Instant::now());
    // Stop the command before the tap is read, so the log stops growing.
    let _ = control.send_keys(b"\x03");
    drop(control);
    drop(mosh);
    let events = decode(&link.server.key, &link.tap.take());
    let frames = events
        .iter()
        .filter(|e| e.dir == Dir::Down && e.draws())
        .filter(|e| e.released.is_some_and(|at| at >= from && at <= to))
        .count() as u64;
    Ok(MoshCost {
        seconds: (to - from).as_secs_f64(),
        client_cpu_s: c1 - c0,
        tmux_cpu_s: t1 - t0,
        frames,
    })
}

// The suite's `cost` part: the page's side (frame-cost-bench.mjs) and mosh-client's, side by
// side.

/// The cost targets: the renderer process's CPU per server frame during the full-screen
/// flood...
const COST_FLOOD_MS_PER_FRAME: f64 = 1.5;
/// ...a hidden tab during the flood (renderer and GPU processes together, % of a core)...
const COST_HIDDEN_PERCENT: f64 = 2.0;
/// ...and a page with nothing happening.
const COST_IDLE_PERCENT: f64 = 3.0;

/// The suite's `cost` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
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
            match mosh_client(
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
            .and_then(MoshCost::client_ms_per_frame)
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
