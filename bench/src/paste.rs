//! Pasting a picture (the suite's `paste` part): `paste-bench.mjs` through [`browser::paste`], a
//! picture uploaded over a rate-limited link while keys are typed, then pasted again.
//!
//! The download ([`crate::download`]) is the same measurement with the roles swapped; the pieces
//! both rows share (the link's label, the echo during the transfer against idle) are here.

use crate::browser::{self, Summary};
use crate::report::Report;
use crate::{Options, progress};

/// The paste targets: the upload within 5 % of the link's limit, typing during it at most 20 ms
/// slower than idle, nothing sent again for a picture pasted twice.
const PASTE_UPLOAD_RATIO: f64 = 1.05;
const PASTE_ECHO_ABOVE_IDLE_MS: f64 = 20.0;

/// The suite's `paste` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
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
    let link = link_label(run.size, &run.rate, run.rtt_ms, &run.queue);
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
    echo_above_idle_row(
        report,
        "echo during a paste upload minus idle echo, median",
        (&run.echo_during_ms, &run.echo_idle_ms),
        PASTE_ECHO_ABOVE_IDLE_MS,
    );
    report.row(
        "bytes sent for a repeated paste",
        run.repeat_bytes_sent,
        "B",
        "0 B".to_string(),
        run.repeat_bytes_sent == 0.0,
    );
    let g = "paste";
    report.detail(g, "picture size", run.size as f64, "B");
    report.detail(g, "upload time (first byte written → the relay's path)", run.upload_ms, "ms");
    report.detail(g, "link limit (size × 8 / rate)", run.limit_ms, "ms");
    echo_details(report, g, "upload", (&run.echo_idle_ms, &run.echo_during_ms), run.srtt_idle_ms);
    let pacer = &run.pacer;
    report.detail_if(g, "mosh SRTT during the upload median", pacer.mosh_srtt_median_ms, "ms");
    let rate = pacer.rate_median_bps.map(|b| b / 1e6);
    report.detail_if(g, "pacer rate estimate median", rate, "Mbit/s");
    let window = pacer.window_median_bytes.map(|b| b / 1024.0);
    report.detail_if(g, "pacer window median", window, "KiB");
    let in_flight = pacer.in_flight_median_bytes.map(|b| b / 1024.0);
    report.detail_if(g, "pacer in flight median", in_flight, "KiB");
    report.detail_if(g, "pacer min RTT", pacer.min_rtt_ms, "ms");
}

/// How a transfer's rows name its link: size, rate, RTT and the bottleneck's queue.
pub(crate) fn link_label(size: u64, rate: &str, rtt_ms: f64, queue: &str) -> String {
    format!("{:.1} MB over {rate}, RTT {rtt_ms} ms, queue {queue}", size as f64 / 1e6)
}

/// The row of the median echo during a transfer minus the idle one, met within `max_ms`.
pub(crate) fn echo_above_idle_row(
    report: &mut Report,
    name: &str,
    (during, idle): (&Summary, &Summary),
    max_ms: f64,
) {
    if let (Some(during), Some(idle)) = (during.median, idle.median) {
        let delta = during - idle;
        report.row(
            name,
            delta,
            "ms",
            format!("≤ {max_ms} ms ({during:.1} − {idle:.1} ms)"),
            delta <= max_ms,
        );
    }
}

/// The details of the echo while idle and during the transfer (`what`: upload, download), and
/// mosh's SRTT while idle.
pub(crate) fn echo_details(
    report: &mut Report,
    group: &str,
    what: &str,
    (idle, during): (&Summary, &Summary),
    srtt_idle_ms: Option<f64>,
) {
    for (when, echo) in [("idle".to_string(), idle), (format!("during the {what}"), during)] {
        report.detail_if(group, &format!("echo {when} median"), echo.median, "ms");
        report.detail_if(group, &format!("echo {when} p90"), echo.p90, "ms");
        report.detail(group, format!("echo {when}, keys timed"), echo.n as f64, "");
    }
    report.detail_if(group, "mosh SRTT idle", srtt_idle_ms, "ms");
}
