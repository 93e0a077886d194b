//! Bytes on the wire for a first visit and a repeat visit of the page (the suite's `bytes` part,
//! `tests/browser/bench/bytes-bench.mjs`): everything the relay sends the browser over HTTP,
//! as the page is served now (brotli, content-hashed immutable names, the service worker) and, in
//! the same run, as before issue 36 (no compression, everything downloaded again, no worker).
//! The session itself (WebTransport) is not counted. Release relay, as load's (`page_load`);
//! quick mode: the debug relay, one run.

use std::process::Command;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::Options;
use crate::report::Report;
use crate::stats::median;

/// Targets (issue 36), KB (1000 bytes).
pub const FIRST_VISIT_KB: f64 = 350.0;
pub const REPEAT_VISIT_KB: f64 = 20.0;

#[derive(Debug, Deserialize)]
struct Visit {
    first: f64,
    repeat: f64,
    worker: bool,
}

#[derive(Debug, Deserialize)]
struct Runs {
    now: Vec<Visit>,
    before: Vec<Visit>,
}

#[derive(Debug, Deserialize)]
struct Output {
    runs: Runs,
}

fn measure(relay: &std::path::Path, runs: usize) -> anyhow::Result<Runs> {
    let root = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let out = Command::new("node")
        .arg("tests/browser/bench/bytes-bench.mjs")
        .arg("--relay")
        .arg(relay)
        .args(["--runs", &runs.to_string(), "--json"])
        .current_dir(&root)
        .output()
        .context("running node tests/browser/bench/bytes-bench.mjs (is node installed?)")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "bytes-bench.mjs failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let line = stdout.lines().rev().find(|l| l.starts_with('{')).context("no JSON line")?;
    Ok(serde_json::from_str::<Output>(line).context("parsing bytes-bench.mjs's JSON")?.runs)
}

/// The suite's `bytes` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let runs = if options.quick { 1 } else { 3 };
    crate::progress(&format!("bytes: {runs} first and repeat visits, now and as before, in turns"));
    let result =
        crate::page_load::new_relay(!options.quick).and_then(|relay| measure(&relay, runs));
    let runs = match result {
        Ok(r) => r,
        Err(e) => {
            report.problems.push(format!("bytes failed: {e:#}"));
            return;
        }
    };
    let kb = |v: &[Visit], pick: fn(&Visit) -> f64| {
        median(&v.iter().map(pick).collect::<Vec<_>>()).map(|b| b / 1000.0)
    };
    let (Some(first), Some(repeat), Some(first_before), Some(repeat_before)) = (
        kb(&runs.now, |v| v.first),
        kb(&runs.now, |v| v.repeat),
        kb(&runs.before, |v| v.first),
        kb(&runs.before, |v| v.repeat),
    ) else {
        report.problems.push("bytes: no visits measured".into());
        return;
    };
    report.row(
        "bytes transferred, first visit (everything over HTTP, new profile), median",
        first,
        "KB",
        format!("≤ {FIRST_VISIT_KB:.0} (before: {first_before:.0} KB)"),
        first <= FIRST_VISIT_KB,
    );
    report.row(
        "bytes transferred, repeat visit (a new tab, same profile), median",
        repeat,
        "KB",
        format!("≤ {REPEAT_VISIT_KB:.0} (before: {repeat_before:.0} KB)"),
        repeat <= REPEAT_VISIT_KB,
    );
    let group = "bytes: first and repeat visit";
    for (side, visits) in [("now", &runs.now), ("before issue 36", &runs.before)] {
        for (i, v) in visits.iter().enumerate() {
            report.detail(group, format!("{side}: run {}, first visit", i + 1), v.first, "B");
            report.detail(group, format!("{side}: run {}, repeat visit", i + 1), v.repeat, "B");
        }
    }
    if runs.now.iter().any(|v| !v.worker) {
        report.problems.push("bytes: a repeat visit was not served by the service worker".into());
    }
}
