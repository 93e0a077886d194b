//! Scrollback and search (the suite's `history` part): `history-bench.mjs` through
//! [`browser::history`], a long output read back and searched in the page's history view, and
//! the pty recorder's cost on a key's echo ([`browser::recorder_echo`]).

use crate::browser;
use crate::report::Report;
use crate::stats::{median, p95};
use crate::{Options, progress};

/// The history targets: the first history page within this of a wheel turn up...
const HISTORY_FIRST_PAGE_MS: f64 = 100.0;
/// ...a search of the whole history shown within this...
const HISTORY_SEARCH_MS: f64 = 300.0;
/// ...and the recorder adding at most this to a key's echo.
const RECORDER_ECHO_ADDED_US: f64 = 500.0;
/// ...and its image lifting at most this much more than the recorder without it (issue 34).
const RECORDER_IMAGES_RATIO: f64 = 1.10;
/// Runs of the recorder's echo measurement (an odd number: the row is their median ratio).
const RECORDER_RUNS: usize = 5;
/// ...and recording the session (`--record-sessions`) at most this more than the recorder
/// without it (issue 35: one JSON line written per read).
const RECORDING_ADDED_US: f64 = 50.0;

/// The suite's `history` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let lines = if options.quick { 20_000 } else { 100_000 };
    progress(&format!("history: seq 1 {lines}, scrolling up and searching"));
    let g = "history";
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
            report.detail(g, "disk per 100,000 lines", run.disk_bytes * per_100k / 1e6, "MB");
            report.detail(g, "recorder resident memory", run.recorder_rss_kb / 1024.0, "MiB");
            report.detail(
                g,
                "relay resident memory after the searches",
                run.relay_rss_kb / 1024.0,
                "MiB",
            );
            report.detail(g, "lines kept", run.history_lines as f64, "");
            for (what, v) in [("first page", &run.first_page_ms), ("search", &run.search_ms)] {
                report.detail_if(g, &format!("{what} p95"), p95(v), "ms");
            }
        }
        Err(e) => report.problems.push(format!("history failed: {e:#}")),
    }
    progress("history: key-to-echo through a pty with and without the recorder");
    match recorder_runs(options) {
        Ok((run, ratios, aa_ratios)) => {
            let added = run.recorded_median_us - run.direct_median_us;
            report.row(
                "recorder: added to a key's echo, median (pty, RTT 0)".to_string(),
                added,
                "µs",
                format!("≤ {RECORDER_ECHO_ADDED_US:.0} µs"),
                added <= RECORDER_ECHO_ADDED_US,
            );
            // Issue 34: the recorder lifting images against the recorder without (--no-images),
            // the median of the runs' ratios; the A/A runs (both without) beside it say how far
            // the machine alone moves that ratio.
            let ratio = median(&ratios).unwrap_or(f64::NAN);
            let spread =
                |r: &[f64]| r.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join(", ");
            let aa = if aa_ratios.is_empty() {
                String::new()
            } else {
                format!("; A/A runs: {}", spread(&aa_ratios))
            };
            report.row(
                "recorder: added per key with image lifting / without".to_string(),
                ratio,
                "×",
                format!("≤ {RECORDER_IMAGES_RATIO:.2} (runs: {}{aa})", spread(&ratios)),
                ratio <= RECORDER_IMAGES_RATIO,
            );
            report.detail(
                g,
                "echo with the recorder --no-images, median",
                run.no_images_median_us,
                "µs",
            );
            // Issue 35: recording the session (--record-sessions) against the recorder without.
            if let Some(cast) = run.cast_median_us {
                let added = cast - run.recorded_median_us;
                report.row(
                    "recorder: added per key by --record-sessions, median".to_string(),
                    added,
                    "µs",
                    format!("≤ {RECORDING_ADDED_US:.0} µs"),
                    added <= RECORDING_ADDED_US,
                );
                report.detail(g, "echo with the recorder recording, median", cast, "µs");
            }
            report.detail(g, "echo without the recorder, median", run.direct_median_us, "µs");
            report.detail(g, "echo with the recorder, median", run.recorded_median_us, "µs");
            report.detail(g, "echo without the recorder, p99", run.direct_p99_us, "µs");
            report.detail(g, "echo with the recorder, p99", run.recorded_p99_us, "µs");
        }
        Err(e) => report.problems.push(format!("recorder echo failed: {e:#}")),
    }
}

/// Runs of `recorder_echo` in one part: one in quick mode; otherwise [`RECORDER_RUNS`] of it,
/// with an A/A run (both recorders `--no-images`) between each two. The recorders add a few
/// µs to a key's echo in a release build, and a single run's ratio of two such medians moved
/// from 0.45 to 1.86 on this machine with the same code: the median of several runs, beside what
/// the A/A runs show, is the row. Returns the run with the median lifting ratio, the lifting
/// ratios and the A/A ratios.
fn recorder_runs(options: &Options) -> anyhow::Result<(browser::RecorderEcho, Vec<f64>, Vec<f64>)> {
    let ratio = |r: &browser::RecorderEcho| {
        (r.recorded_median_us - r.direct_median_us)
            / (r.no_images_median_us - r.direct_median_us).max(1.0)
    };
    if options.quick {
        let run = browser::recorder_echo(500, false, false)?;
        let r = ratio(&run);
        return Ok((run, vec![r], Vec::new()));
    }
    let mut runs = Vec::new();
    let mut aa = Vec::new();
    for i in 0..RECORDER_RUNS {
        if i > 0 {
            aa.push(ratio(&browser::recorder_echo(2000, true, true)?));
        }
        runs.push(browser::recorder_echo(2000, true, false)?);
    }
    let mut ratios: Vec<f64> = runs.iter().map(ratio).collect();
    let mid = median(&ratios).unwrap_or(f64::NAN);
    let at = ratios.iter().position(|r| *r == mid).unwrap_or(0);
    let run = runs.swap_remove(at);
    ratios.sort_by(f64::total_cmp);
    Ok((run, ratios, aa))
}
