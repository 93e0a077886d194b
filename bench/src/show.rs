//! `tern show FILE` in the shell (the suite's `show` part, issue 34): `show-bench.mjs` through
//! [`browser::show`], a picture printed in the shell, lifted by the relay's recorder and drawn on
//! the page over a rate-limited link while keys are typed; then many pictures scrolled past and
//! the page's memory.

use crate::browser;
use crate::paste::{echo_above_idle_row, echo_details, link_label};
use crate::report::Report;
use crate::{Options, progress};

/// The targets: the picture drawn within 10 % of the link's limit (from the page's first sight
/// of it, its marker), typing meanwhile at most 20 ms slower than idle, and the page's memory
/// after the many pictures at most 100 MB above what it was before them.
const SHOW_RATIO: f64 = 1.10;
const SHOW_ECHO_ABOVE_IDLE_MS: f64 = 20.0;
const MANY_MEMORY_MB: f64 = 100.0;

/// The suite's `show` part: rows and details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let setup = &options.show;
    progress(&format!(
        "show: tern show of {} B pictures over {} at RTT {} ms (queue {}), then {} pictures",
        setup.size, setup.rate, setup.rtt_ms, setup.queue, setup.many
    ));
    let run = match browser::show(setup) {
        Ok(run) => run,
        Err(e) => {
            report.problems.push(format!("show failed: {e:#}"));
            return;
        }
    };
    let link = link_label(run.size, &run.rate, run.rtt_ms, &run.queue);
    report.row(
        format!("tern show: picture drawn / the link's limit ({link})"),
        run.ratio,
        "x",
        format!(
            "≤ {SHOW_RATIO:.2} ({:.0} / {:.0} ms, marker on the page → drawn, median of {})",
            run.marker_to_drawn_ms,
            run.limit_ms,
            run.shows.len()
        ),
        run.ratio <= SHOW_RATIO,
    );
    echo_above_idle_row(
        report,
        "echo while a tern show picture comes minus idle echo, median",
        (&run.echo_during_ms, &run.echo_idle_ms),
        SHOW_ECHO_ABOVE_IDLE_MS,
    );
    let many = &run.many;
    let mb = |b: f64| b / 1_048_576.0;
    let grown = mb(many.renderer_pss_after - many.renderer_pss_before);
    report.row(
        format!("page memory added by {} pictures scrolled past (renderer PSS)", many.printed),
        grown,
        "MB",
        format!(
            "≤ {MANY_MEMORY_MB:.0} MB ({:.1} → {:.1} MB)",
            mb(many.renderer_pss_before),
            mb(many.renderer_pss_after)
        ),
        grown <= MANY_MEMORY_MB,
    );
    let g = "show";
    report.detail(g, "picture size", run.size as f64, "B");
    report.detail(g, "link limit (size × 8 / rate)", run.limit_ms, "ms");
    report.detail(g, "Enter → the picture's marker on the page", run.enter_to_marker_ms, "ms");
    report.detail(g, "Enter → drawn", run.enter_to_drawn_ms, "ms");
    report.detail(g, "Enter → drawn / the link's limit", run.ratio_from_enter, "x");
    let echo = (&run.echo_idle_ms, &run.echo_during_ms);
    echo_details(report, g, "picture", echo, None);
    report.detail(g, "pictures printed", many.printed as f64, "");
    report.detail(g, "pictures the page placed", many.placed as f64, "");
    report.detail(g, "pictures held decoded after them", many.decoded_held as f64, "");
    report.detail(g, "browser PSS before them", mb(many.browser_pss_before), "MB");
    report.detail(g, "browser PSS after them", mb(many.browser_pss_after), "MB");
    report.detail_if(g, "JS heap before them", many.js_heap_before.map(mb), "MB");
    report.detail_if(g, "JS heap after them", many.js_heap_after.map(mb), "MB");
}
