//! Safari's WebTransport datagram API against Chromium's, in Chromium (`--only safari`): the page
//! writes its datagrams through `datagrams.createWritable()` where a browser has it (WebKit, Safari
//! 26.4+, has only that) and through the `datagrams.writable` getter otherwise (Chromium). Both
//! shapes are timed in one run, side by side, on the same link and keys: `echo-bench.mjs` with
//! and without `--datagram-api safari` (`tests/browser/lib/safari-shape.mjs` takes Chromium's
//! getter away and adds a `createWritable()` that hands out Chromium's own writable, so the
//! transport is the same and only the page's path to it differs). Rounds alternate the shapes
//! (Chromium, Safari, Chromium, ...) so that a drift of the machine's load falls on both.

use crate::browser::{self, DatagramApi, Transport};
use crate::report::Report;
use crate::stats::median;
use crate::{Options, progress};

/// Safari's shape may cost at most this much over Chromium's (median key-to-echo): the same
/// writer behind one more JavaScript call when the link opens, nothing per datagram.
const SAFARI_ECHO_RATIO: f64 = 1.02;

/// The row and its details into `report`.
pub fn rows(options: &Options, report: &mut Report) {
    let rtt_ms = options.safari_rtt_ms;
    let seed = 0x5AF0;
    let mut screen = [Vec::new(), Vec::new()];
    let mut send = [Vec::new(), Vec::new()];
    for round in 0..options.safari_rounds {
        for (i, api) in [DatagramApi::Chromium, DatagramApi::Safari].into_iter().enumerate() {
            let what =
                format!("{} datagram API, RTT {rtt_ms} ms, round {}", api.as_str(), round + 1);
            progress(&format!("safari: echo with {what}"));
            let (warmup, keys) = (options.echo_warmup, options.echo_keys);
            let run = browser::echo(Transport::WebTransport, api, rtt_ms, None, warmup, keys, seed);
            match run {
                Ok(run) => {
                    if run.missing > 0 {
                        report.problems.push(format!(
                            "safari, {what}: {} of {keys} keys without an echo",
                            run.missing
                        ));
                    }
                    screen[i].extend(run.screen());
                    send[i].extend(run.send());
                }
                Err(e) => report.problems.push(format!("safari, {what} failed: {e:#}")),
            }
        }
    }
    const GROUP: &str = "echo, browser, datagram API";
    for (i, label) in
        ["Chromium's (datagrams.writable)", "Safari's (createWritable())"].into_iter().enumerate()
    {
        let name = format!("{label}, RTT {rtt_ms} ms");
        report.median_p95(GROUP, &format!("{name}: key-to-screen"), &screen[i], "ms");
        report.median_p95(GROUP, &format!("{name}: key-to-wire"), &send[i], "ms");
        report.detail(GROUP, format!("{name}: keys timed"), screen[i].len() as f64, "");
    }
    if let (Some(safari), Some(chromium)) = (median(&screen[1]), median(&screen[0])) {
        let name =
            format!("key-to-echo median, Safari's datagram API / Chromium's, RTT {rtt_ms} ms");
        report.ratio_row(name, safari, chromium, SAFARI_ECHO_RATIO);
    }
}
