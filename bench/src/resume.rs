//! Reloading a page with a running shell (the suite's `resume` part): `resume-bench.mjs` through
//! [`browser::resume`], how soon the reloaded page shows its saved screen and is live again.

use crate::browser;
use crate::report::Report;
use crate::stats::median;
use crate::{Options, progress};

/// A reloaded page draws its saved screen within this of its script starting...
const RESUME_OLD_SCREEN_MS: f64 = 300.0;
/// ...and is live within one RTT and this of its new link's `ready`.
const RESUME_LIVE_SLACK_MS: f64 = 300.0;

/// The suite's `resume` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
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
                format!(
                    "≤ {target:.0} ms (1 RTT + {RESUME_LIVE_SLACK_MS:.0}) after the new link's \
                     ready"
                ),
                m <= target,
            );
        }
        let label = format!("RTT {rtt_ms} ms");
        for (what, v) in [
            ("navigation → old screen", &run.nav_to_old_ms),
            ("first request to the relay → live", &run.live_from_request_ms),
            ("navigation → live", &run.nav_to_live_ms),
        ] {
            report.median_p95("resume", &format!("{label}: {what}"), v, "ms");
        }
        report.detail("resume", format!("{label}: reloads"), run.old_screen_ms.len() as f64, "");
    }
}
