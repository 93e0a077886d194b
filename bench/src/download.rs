//! `tern send FILE` in the shell (the suite's `download` part): `download-bench.mjs` through
//! [`browser::download`], a file sent to the page over a rate-limited link while keys are typed;
//! the paste's link and measures ([`crate::paste`]) with the roles swapped.

use crate::browser;
use crate::paste::{echo_above_idle_row, echo_details, link_label};
use crate::report::Report;
use crate::{Options, progress};

/// The download targets: `tern send` within 10 % of the link's limit, typing during it at most
/// 20 ms slower than idle.
const DOWNLOAD_RATIO: f64 = 1.10;
const DOWNLOAD_ECHO_ABOVE_IDLE_MS: f64 = 20.0;

/// The suite's `download` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
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
    let link = link_label(run.size, &run.rate, run.rtt_ms, &run.queue);
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
    echo_above_idle_row(
        report,
        "echo during a tern send download minus idle echo, median",
        (&run.echo_during_ms, &run.echo_idle_ms),
        DOWNLOAD_ECHO_ABOVE_IDLE_MS,
    );
    let g = "download";
    report.detail(g, "file size", run.size as f64, "B");
    report.detail(
        g,
        "download time (first byte at the page → the browser's download)",
        run.download_ms,
        "ms",
    );
    report.detail(g, "link limit (size × 8 / rate)", run.limit_ms, "ms");
    report.detail(
        g,
        "offer seen by the page → the browser's download",
        run.offer_to_saved_ms,
        "ms",
    );
    report.detail(g, "offer → first byte", run.offer_to_first_byte_ms, "ms");
    report.detail(g, "first byte → last byte", run.receive_ms, "ms");
    report.detail(g, "last byte → the browser's download (SHA-256, save)", run.verify_ms, "ms");
    let echo = (&run.echo_idle_ms, &run.echo_during_ms);
    echo_details(report, g, "download", echo, run.srtt_idle_ms);
    let page = &run.page;
    report.detail_if(g, "mosh SRTT during the download median", page.mosh_srtt_median_ms, "ms");
    let rate = page.rate_median_bps.map(|b| b / 1e6);
    report.detail_if(g, "page's shown rate median", rate, "Mbit/s");
    let goodput = page.goodput_median_bps.map(|b| b / 1e6);
    report.detail_if(g, "goodput per second median", goodput, "Mbit/s");
    let gap = page.max_read_gap_ms;
    report.detail_if(g, "longest pause between the page's reads", gap, "ms");
}
