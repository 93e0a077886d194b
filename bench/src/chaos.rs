//! The chaos run (`tern-bench --only chaos`): `tests/browser/chaos/chaos.mjs` for a while —
//! relay SIGKILL/SIGTERM restarts, network drops, switches to the WebSocket fallback and back,
//! reloads, pastes and downloads while a typist types — and its totals as rows: every typed byte
//! once and in order, every transfer identical, no nonce reused, every outage on the bar, no panic.
//! A failed run still gives its rows (`met: false`) and its reasons as problems. docs/CHAOS.md.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use serde::Deserialize;

use crate::report::Report;

/// What `chaos.mjs` prints after `chaos totals `.
#[derive(Debug, Clone, Deserialize)]
pub struct Totals {
    pub seed: u64,
    pub seconds: f64,
    pub events: Events,
    pub events_injected: u64,
    /// Relay restarts and drops injected while an upload or a download ran.
    #[serde(default)]
    pub events_during_transfers: u64,
    pub network_down_s: f64,
    pub relay_down_s: f64,
    pub bytes_typed: u64,
    pub bytes_verified: u64,
    pub duplicates: u64,
    pub losses: u64,
    pub uploads: u64,
    pub uploads_verified: u64,
    pub upload_bytes_verified: u64,
    pub downloads: u64,
    pub downloads_verified: u64,
    pub download_bytes_verified: u64,
    pub datagrams_checked: u64,
    pub seq_repeats: u64,
    pub outages: u64,
    pub outages_noticed: u64,
    pub outages_with_bar: u64,
    pub transports_seen: Vec<String>,
    pub panics: u64,
    pub failures: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Events {
    pub relay_sigkill: u64,
    pub relay_sigterm: u64,
    pub network_drop: u64,
    pub to_websocket: u64,
    pub to_webtransport: u64,
    pub reload: u64,
    pub paste: u64,
    pub download: u64,
}

/// The run's totals and, when a check failed, chaos.mjs's list of reasons.
#[derive(Debug)]
pub struct Run {
    pub totals: Totals,
    pub failed: Option<String>,
}

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Runs `chaos.mjs` for `seconds` with `seed` (after building the page). With
/// `TERN_BENCH_CHAOS_TOTALS=FILE` it runs nothing and reads the totals a run of the documented
/// command wrote (`node tests/browser/chaos/chaos.mjs --json-out FILE`), e.g. a longer one.
pub fn run(seconds: u64, seed: u64) -> anyhow::Result<Run> {
    if let Ok(file) = std::env::var("TERN_BENCH_CHAOS_TOTALS") {
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?;
        let totals: Totals =
            serde_json::from_str(text.trim()).with_context(|| format!("parsing {file}"))?;
        let failed = (totals.failures > 0)
            .then(|| format!("{} checks failed in the run that wrote {file}", totals.failures));
        return Ok(Run { totals, failed });
    }
    // The page (scripts/build-wasm.sh) and the debug relay chaos.mjs runs.
    crate::page_load::new_relay(false)?;
    let out = Command::new("node")
        .arg("tests/browser/chaos/chaos.mjs")
        .args(["--seconds", &seconds.to_string(), "--seed", &seed.to_string()])
        .current_dir(root())
        .output()
        .context("running node tests/browser/chaos/chaos.mjs")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("chaos totals ")).with_context(|| {
        format!(
            "chaos.mjs printed no totals ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let totals =
        serde_json::from_str(line).with_context(|| format!("parsing the totals: {line}"))?;
    let failed = (!out.status.success()).then(|| {
        let reasons: Vec<&str> =
            stdout.lines().skip_while(|l| !l.starts_with("chaos FAILED")).take(12).collect();
        reasons.join("\n")
    });
    Ok(Run { totals, failed })
}

/// The run as rows (each a check with its target) and details (what was injected).
pub fn rows(seconds: u64, seed: u64, report: &mut Report) {
    let run = match run(seconds, seed) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("chaos: {e:#}"));
            return;
        }
    };
    if let Some(why) = &run.failed {
        report.problems.push(format!("chaos (seed {seed}) failed:\n{why}"));
    }
    let t = &run.totals;
    let e = &t.events;
    // Named by the run's length in minutes, so a rerun replaces its rows (`--merge`).
    let label = format!("chaos, {:.0} min, seed {}", (t.seconds / 60.0).round(), t.seed);
    report.detail("chaos", format!("{label}: length"), t.seconds, "s");
    let every_kind = [
        e.relay_sigkill,
        e.relay_sigterm,
        e.network_drop,
        e.to_websocket,
        e.reload,
        e.paste,
        e.download,
    ]
    .iter()
    .all(|&n| n > 0);
    report.row(
        format!("{label}: events injected"),
        t.events_injected as f64,
        "",
        "every kind at least once".into(),
        every_kind,
    );
    report.row(
        format!("{label}: bytes typed, verified in order"),
        t.bytes_verified as f64,
        "B",
        format!("= bytes typed ({})", t.bytes_typed),
        t.bytes_typed > 0 && t.bytes_verified == t.bytes_typed,
    );
    for (what, n) in [
        ("typed bytes duplicated", t.duplicates),
        ("typed bytes lost", t.losses),
        ("(direction, sequence number) repeated under the key", t.seq_repeats),
        ("panics", t.panics),
        // Every check chaos.mjs makes, these and the rest (a drop of 10 s or more not shown on
        // the bar, a stuck page, a shell gone): the reasons are under problems.
        ("checks failed", t.failures),
    ] {
        report.row(format!("{label}: {what}"), n as f64, "", "0".into(), n == 0);
    }
    for (what, verified, all) in [
        ("uploads", t.uploads_verified, t.uploads),
        ("downloads", t.downloads_verified, t.downloads),
    ] {
        report.row(
            format!("{label}: {what} byte-identical"),
            verified as f64,
            "",
            format!("= {what} ({all})"),
            all > 0 && verified == all,
        );
    }
    report.row(
        format!("{label}: outages shown on the notification bar"),
        t.outages_with_bar as f64,
        "",
        format!("≥ outages the page noticed ({} of {})", t.outages_noticed, t.outages),
        t.outages_with_bar >= t.outages_noticed,
    );
    for (what, n) in [
        ("relay SIGKILL", e.relay_sigkill),
        ("relay SIGTERM", e.relay_sigterm),
        ("network drops", e.network_drop),
        ("switches to the WebSocket", e.to_websocket),
        ("switches to WebTransport", e.to_webtransport),
        ("reloads", e.reload),
        ("pastes", e.paste),
        ("downloads", e.download),
        ("restarts and drops during a transfer", t.events_during_transfers),
        ("datagrams checked", t.datagrams_checked),
        ("upload bytes verified", t.upload_bytes_verified),
        ("download bytes verified", t.download_bytes_verified),
    ] {
        report.detail("chaos", format!("{label}: {what}"), n as f64, "");
    }
    report.detail("chaos", format!("{label}: network down"), t.network_down_s, "s");
    report.detail("chaos", format!("{label}: relay down"), t.relay_down_s, "s");
    report.detail("chaos", format!("{label}: transports seen"), t.transports_seen.len() as f64, "");
}
