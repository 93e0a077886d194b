//! Tern's screens against the stock mosh-client's, workload by workload.
//!
//! Each workload script (`tests/mosh-client-harness/workloads/*.script`, the probe's language) runs
//! against fresh, identically started mosh-servers: through the stock mosh-client in tmux (the
//! reference), through Tern's probe directly, through Tern's probe across the link emulator at
//! 200 ms RTT with 5 % loss each way, and through Tern's probe to a mosh-server whose shell runs
//! under spawn mode's history recorder (`tern-relay record`, which must change nothing). The text
//! screens and cursors must be identical.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tern_native::probe::{ProbeOptions, ProbeResult, run_probe};
use tern_native::script::{Action, parse_script};
use tern_tests::linkemu::{DirectionConfig, LinkConfig, LinkEmulator};
use tern_tests::mosh_client::{
    Capture, TempDir, TmuxMoshClient, start_reference_server, start_wrapped_server,
};

const WORKLOADS: [&str; 8] = ["wrap", "seq", "colours", "unicode", "title", "vi", "bs", "resize"];
const COLS: u16 = 80;
const ROWS: u16 = 24;

fn script(workload: &str) -> Vec<Action> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "mosh-client-harness",
        "workloads",
        &format!("{workload}.script"),
    ]
    .iter()
    .collect();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_script(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn reference(workload: &str, actions: &[Action]) -> Capture {
    let home = TempDir::new("ref-home");
    let server = start_reference_server(&home.0);
    let client = TmuxMoshClient::start(server.port, &server.key.to_base64(), COLS, ROWS);
    client.run(actions).unwrap_or_else(|e| panic!("{workload}: {e}"));
    let capture = client.capture();
    drop(client);
    server.kill();
    capture
}

/// How the probe reaches its mosh-server.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Direct,
    Lossy,
    /// Direct, the shell under the history recorder.
    Recorded,
}

fn probe(workload: &str, actions: &[Action], path: Path) -> (Capture, ProbeResult) {
    let home = TempDir::new("probe-home");
    let history = TempDir::new("probe-history");
    let server = if path == Path::Recorded {
        let wrapper: Vec<String> = vec![
            env!("CARGO_BIN_EXE_tern-record").into(),
            "--history-dir".into(),
            history.0.display().to_string(),
            "--session".into(),
            "0123456789abcdef".into(),
            "--".into(),
        ];
        start_wrapped_server(&home.0, &wrapper)
    } else {
        start_reference_server(&home.0)
    };
    let lossy = path == Path::Lossy;
    let direct: SocketAddr = ([127, 0, 0, 1], server.port).into();
    let emulator = lossy.then(|| {
        let path = DirectionConfig {
            delay: Duration::from_millis(100),
            loss: 0.05,
            ..DirectionConfig::default()
        };
        let mut link = LinkConfig::new("127.0.0.1:0".parse().expect("literal"), direct);
        link.up = path.clone();
        link.down = path;
        LinkEmulator::start(link).expect("link emulator")
    });
    let options = ProbeOptions {
        cols: COLS,
        rows: ROWS,
        seed: 7,
        ..ProbeOptions::new(
            emulator.as_ref().map_or(direct, LinkEmulator::local_addr),
            server.key.clone(),
        )
    };
    let seed = emulator.as_ref().map(LinkEmulator::seed);
    let result = run_probe(&options, actions)
        .unwrap_or_else(|e| panic!("{workload} (link seed {seed:?}): {e}"));
    server.kill();
    let screen = &result.screen;
    let capture = Capture {
        rows: screen.rows.clone(),
        cursor: (screen.cursor.row, screen.cursor.col),
        title: result.title.clone(),
    };
    (capture, result)
}

/// Rows that differ, as a readable report; empty when the screens are identical.
fn differences(expected: &Capture, got: &Capture) -> String {
    let mut report = String::new();
    let rows = expected.rows.len().max(got.rows.len());
    for row in 0..rows {
        let (e, g) = (expected.rows.get(row), got.rows.get(row));
        let (e, g) = (e.map_or("", String::as_str), g.map_or("", String::as_str));
        if e != g {
            report.push_str(&format!(
                "  row {row:2}: mosh-client {e:?}\n          tern        {g:?}\n"
            ));
        }
    }
    if expected.cursor != got.cursor {
        report.push_str(&format!(
            "  cursor: mosh-client {:?}, tern {:?}\n",
            expected.cursor, got.cursor
        ));
    }
    if expected.title != got.title && !expected.title.is_empty() {
        report.push_str(&format!(
            "  title: mosh-client {:?}, tern {:?}\n",
            expected.title, got.title
        ));
    }
    report
}

#[test]
fn tern_draws_the_same_screens_as_mosh_client_directly_and_over_a_lossy_link() {
    // Workloads run in parallel: each has its own servers, tmux socket and ports, and mostly waits.
    let results: Vec<(String, String, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = WORKLOADS
            .iter()
            .map(|&workload| {
                scope.spawn(move || {
                    let actions = script(workload);
                    let expected = reference(workload, &actions);
                    let (direct, direct_result) = probe(workload, &actions, Path::Direct);
                    let (lossy, lossy_result) = probe(workload, &actions, Path::Lossy);
                    let (recorded, _) = probe(workload, &actions, Path::Recorded);
                    let mut report = String::new();
                    let d = differences(&expected, &direct);
                    if !d.is_empty() {
                        report.push_str(&format!("{workload}, direct:\n{d}"));
                    }
                    let l = differences(&expected, &lossy);
                    if !l.is_empty() {
                        report.push_str(&format!("{workload}, 200 ms RTT 5 % loss:\n{l}"));
                    }
                    let r = differences(&expected, &recorded);
                    if !r.is_empty() {
                        report.push_str(&format!("{workload}, shell under the recorder:\n{r}"));
                    }
                    for (path, result) in [("direct", &direct_result), ("lossy", &lossy_result)] {
                        if result.counters.dropped_unknown_base != 0 {
                            report.push_str(&format!("{workload}, {path}: {:?}\n", result.counters));
                        }
                    }
                    let older = lossy_result.counters.applied_to_older_base;
                    println!(
                        "{workload}: direct {} instructions ({} on an older base); lossy {} ({older} on an older base, srtt {:?})",
                        direct_result.counters.applied,
                        direct_result.counters.applied_to_older_base,
                        lossy_result.counters.applied,
                        lossy_result.srtt,
                    );
                    (workload.to_owned(), report, older)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("workload thread")).collect()
    });
    let failures: Vec<&String> =
        results.iter().map(|(_, report, _)| report).filter(|r| !r.is_empty()).collect();
    assert!(
        failures.is_empty(),
        "screens differ:\n{}",
        failures.iter().map(|s| s.as_str()).collect::<String>()
    );
    let older: u64 = results.iter().map(|(_, _, n)| n).sum();
    println!(
        "over the lossy link, {older} instructions were applied to a base older than the newest state (a stop-and-wait client drops these)"
    );
}
