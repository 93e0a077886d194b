//! The suite in `--quick` mode, as `npm test` runs it: every scenario for a few seconds against
//! the real mosh-server, mosh-client (tmux), an in-process relay, and headless Chromium with the
//! real tern-relay (browser echo, paste); the predictive-echo scenario types its short trace
//! (about 40 s). Asserts that the harness works (every row produced, finite, the JSON schema the
//! issue specifies) and never a timing: this build is unoptimized and the machine is shared. A missing Chromium, node or mosh-server is a problem, so it fails here
//! rather than skipping.

use serde_json::Value;
use tern_bench::{Options, report};

#[test]
fn quick_run_produces_every_row_with_the_right_schema() {
    let report = tern_bench::run(&Options::quick());
    assert!(report.problems.is_empty(), "problems: {:#?}", report.problems);

    // Quick mode: one RTT and one delay. Echo: key-to-wire p95 and the ratio, for tern-probe and
    // the browser; frames: applied on arrival and the ratio; relay: added latency and two rates;
    // paste: the three rows of "Paste a picture"; predictive echo: the short typing trace at RTT
    // 200 ms, both clients; the WebSocket fallback's two rows at RTT 50; Safari's datagram API
    // against Chromium's at RTT 50; two reloads at RTT 0.
    let names: Vec<&str> = report.rows.iter().map(|r| r.name.as_str()).collect();
    for expected in [
        "key-to-wire p95, tern-probe, RTT 50 ms",
        "key-to-echo median, tern-probe / mosh-client, RTT 50 ms",
        "key-to-wire p95, browser (key → datagram written), RTT 50 ms",
        "key-to-echo median, browser / mosh-client, RTT 50 ms",
        "server instructions applied on arrival, tern-probe, one-way 25 ms",
        "frame interval median, tern-probe / mosh-client, one-way 25 ms",
        "relay added round-trip latency, median, 100 B",
        "relay forwarding rate, relay → browser, 1000 B",
        "relay forwarding rate, browser → relay → UDP, 1 B",
        "echo during a paste upload minus idle echo, median",
        "bytes sent for a repeated paste",
        "keys displayed within 5 ms, tern-probe (adaptive), RTT 200 ms",
        "keys causing a wrong display, tern-probe (adaptive), RTT 200 ms",
        "password characters displayed, tern-probe (adaptive), RTT 200 ms",
        "key-to-display median, printable keys, tern-probe (adaptive), RTT 200 ms",
        "key-to-echo median, WebSocket fallback / WebTransport, RTT 50 ms",
        "page load to first screen, UDP blocked − UDP open, RTT 50 ms",
        "key-to-echo median, Safari's datagram API / Chromium's, RTT 50 ms",
        "reload to the old screen drawn, median, RTT 0 ms",
        "reload to the first new server state, median, RTT 0 ms",
        "history complete after seq 1 20000",
        "history: wheel up → first page drawn, median",
        "history: search of 20000 lines → match shown, median",
        "recorder: added to a key's echo, median (pty, RTT 0)",
        "hidden tab during the flood, renderer + GPU CPU",
        "idle page, renderer + GPU CPU",
        "echo while a tern show picture comes minus idle echo, median",
        "page memory added by 10 pictures scrolled past (renderer PSS)",
        "5 viewers: added to the owner's key-to-echo, median",
        "5 viewers: lag behind the owner's echo, median (RTT 0)",
    ] {
        assert!(names.contains(&expected), "no row {expected:?} in {names:#?}");
    }
    // Its name carries the page's size and renderer.
    assert!(
        names.iter().any(|n| n.starts_with("renderer CPU per frame, full-screen flood ")),
        "no flood cost row in {names:#?}"
    );
    // Their names carry the link's settings.
    assert!(
        names.iter().any(|n| n.starts_with("paste upload time / the link's limit (")),
        "no upload row in {names:#?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("tern show: picture drawn / the link's limit (")),
        "no tern show row in {names:#?}"
    );

    let rows: Value = serde_json::from_str(&report.results_json()).expect("results.json parses");
    let rows = rows.as_array().expect("results.json is a list");
    assert_eq!(rows.len(), report.rows.len());
    for row in rows {
        let object = row.as_object().expect("each row is an object");
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["met", "name", "target", "unit", "value"], "{row}");
        assert!(row["name"].is_string() && row["unit"].is_string() && row["target"].is_string());
        assert!(row["met"].is_boolean(), "{row}");
        let value = row["value"].as_f64().expect("value is a number");
        assert!(value.is_finite(), "{row}");
    }
    for detail in &report.details {
        assert!(detail.value.is_finite(), "{detail:?}");
    }
    // Every client measured something in each scenario.
    for group_needs in [
        ("echo", "mosh-client, RTT 50 ms: key-to-echo (protocol level) median"),
        ("echo", "tern-probe, RTT 50 ms: key-to-screen (in-process) median"),
        ("frames", "tern-probe --stop-and-wait, one-way 25 ms: frame interval median"),
        ("frames", "mosh-client, one-way 25 ms: frame interval median"),
        (
            "echo, browser",
            "browser, RTT 50 ms: key-to-screen (key to xterm.js → frame with the letter written to xterm.js) median",
        ),
        ("paste", "echo during the upload, keys timed"),
        ("show", "echo during the picture, keys timed"),
        ("cost: flood", "mosh-client CPU per frame"),
        ("cost: flood", "page: emulator apply per frame"),
        ("predictive echo", "tern-probe, RTT 200 ms: keys displayed within 5 ms"),
        ("predictive echo", "mosh-client, RTT 200 ms: keys displayed within 5 ms"),
        ("predictive echo", "mosh-client, RTT 200 ms: password: keys causing a wrong display"),
    ] {
        assert!(
            report.details.iter().any(|d| d.group == group_needs.0 && d.name == group_needs.1),
            "no detail {group_needs:?}"
        );
    }

    // The doc section renders every row and splices into the real document.
    let markdown = report.markdown();
    for name in names {
        assert!(markdown.contains(name), "{name} not in the table");
    }
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/BENCHMARKS.md"))
            .expect("docs/BENCHMARKS.md");
    let spliced = report::splice(&doc, &markdown);
    assert_eq!(spliced.matches(report::END).count(), 1);
    assert!(spliced.contains("## Relay"), "hand-written sections are kept");
}
