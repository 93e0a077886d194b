//! Viewers on one session (the suite's `viewers` part, issue 35): [`browser::viewers`] runs
//! relay/tests/viewers_bench.rs, an owner typing through a real relay and mosh-server while N
//! read-only viewers watch over the WebSocket, fed from the relay's copy of the screen.

use crate::browser;
use crate::report::Report;
use crate::{Options, progress};

/// The targets: viewers add at most 1 ms to the owner's key-to-echo (median) and see the owner's
/// echo within 100 ms (median) at RTT 0.
const ADDED_ECHO_MS: f64 = 1.0;
const LAG_MEDIAN_MS: f64 = 100.0;

/// The suite's `viewers` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let (n, keys) = (options.viewers, options.viewer_keys);
    progress(&format!("viewers: {n} viewers on one session, {keys} keys per phase"));
    let run = match browser::viewers(n, keys, !options.quick) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("viewers failed: {e:#}"));
            return;
        }
    };
    let added = run.owner_watched_p50_ms - run.owner_alone_p50_ms;
    report.row(
        format!("{} viewers: added to the owner's key-to-echo, median", run.viewers),
        added,
        "ms",
        format!(
            "≤ {ADDED_ECHO_MS} ms ({:.2} with them − {:.2} alone)",
            run.owner_watched_p50_ms, run.owner_alone_p50_ms
        ),
        added <= ADDED_ECHO_MS,
    );
    report.row(
        format!("{} viewers: lag behind the owner's echo, median (RTT 0)", run.viewers),
        run.lag_median_ms,
        "ms",
        format!("≤ {LAG_MEDIAN_MS} ms (p95 {:.1} ms)", run.lag_p95_ms),
        run.lag_median_ms <= LAG_MEDIAN_MS,
    );
    let g = "viewers";
    report.detail(g, "viewers", run.viewers as f64, "");
    report.detail(g, "keys per phase", run.keys as f64, "");
    report.detail(g, "viewer lag p95", run.lag_p95_ms, "ms");
    report.detail(g, "viewer lag samples", run.lag_samples as f64, "");
    report.detail(
        g,
        "memory per viewer (process RSS growth, relay and client side)",
        run.kib_per_viewer,
        "KiB",
    );
}
