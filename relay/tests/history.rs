//! Spawn mode keeps every line a program printed (issue 14): the shell runs under
//! `tern-relay record`, and the page reads and searches the history over the relay's API.

mod support;

use std::time::Duration;

use support::*;
use tern::relay_proto::{
    HISTORY_PATH, HISTORY_SEARCH_PATH, HistoryPage, HistoryRequest, HistorySearch,
    HistorySearchResult, decode, encode,
};
use tern::terminal::Complete;
use tern::terminal::plain;

async fn session(relay: &TestRelay, token: &str) -> (MoshOverRelay<Complete>, Ready) {
    let conn = connect(relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, spawn_hello(Some(token), None)).await;
    let ready = expect_ready(reply);
    let key = ready.key.clone().expect("spawn mode hands out the key");
    let mut mosh = MoshOverRelay::with_screen(conn, control, &key);
    // Typed before the shell's prompt, a line is echoed before the prompt and its output follows
    // the prompt on the same row: wait for the prompt.
    let prompt = |s: &tern::session::ClientSession<Complete>| {
        screen_of(s).lines().any(|l| l.trim_end().ends_with(['#', '$']))
    };
    assert!(mosh.run_until(Duration::from_secs(10), prompt).await, "no prompt");
    (mosh, ready)
}

/// Runs `command` and waits until `marker` is on the screen.
async fn run(mosh: &mut MoshOverRelay<Complete>, command: &str, marker: &str, wait: Duration) {
    mosh.type_bytes(command.as_bytes());
    let found = mosh.run_until(wait, |s| screen_of(s).contains(marker)).await;
    assert!(found, "{marker:?} never appeared after {command:?}; screen:\n{}", mosh.screen_text());
}

fn screen_of(s: &tern::session::ClientSession<Complete>) -> String {
    tern::terminal::screen_text(s.server_state().framebuffer()).rows.join("\n")
}

async fn page(relay: &TestRelay, session: &str, before: Option<u64>, count: u32) -> HistoryPage {
    let req = HistoryRequest { session: session.into(), before, count };
    let (status, body) =
        http_post(relay.addr(), HISTORY_PATH, Some(&relay.token()), &encode(&req)).await;
    assert_eq!(status, 200, "{body}");
    decode(body.as_bytes()).expect("a history page")
}

/// The whole history, oldest first, read page by page from the newest as a page scrolls.
async fn whole_history(relay: &TestRelay, session: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut before = None;
    loop {
        let p = page(relay, session, before, 2000).await;
        let mut got = p.lines;
        got.extend(lines);
        lines = got;
        if p.start <= p.first {
            return lines;
        }
        before = Some(p.start);
    }
}

async fn search(relay: &TestRelay, session: &str, pattern: &str, regex: bool) -> (u16, String) {
    let s = HistorySearch {
        session: session.into(),
        pattern: pattern.into(),
        case_sensitive: false,
        regex,
    };
    http_post(relay.addr(), HISTORY_SEARCH_PATH, Some(&relay.token()), &encode(&s)).await
}

#[tokio::test]
async fn every_line_of_a_fast_flood_is_kept_in_order_and_found_by_search() {
    let token = test_token("history");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = session(&relay, &token).await;
    run(&mut mosh, "seq 1 100000; echo flood-$((40+2))\n", "flood-42", Duration::from_secs(60))
        .await;

    // History plus what is still on the screen: every number once, in order.
    let history: Vec<String> =
        whole_history(&relay, &ready.session).await.iter().map(|l| plain(l)).collect();
    let screen = mosh.screen_text();
    let numbers: Vec<u64> = history
        .iter()
        .map(String::as_str)
        .chain(screen.lines())
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let want: Vec<u64> = (1..=100_000).collect();
    assert!(numbers == want, "{} numbers, first gap near {:?}", numbers.len(), {
        numbers.iter().zip(&want).position(|(a, b)| a != b)
    });
    assert!(history.len() > 99_970, "only {} lines in the history", history.len());
    assert!(history.iter().any(|l| l.ends_with("seq 1 100000; echo flood-$((40+2))")));

    // A line 50,000 lines back, found at its number; a regex; a bad regex.
    let (status, body) = search(&relay, &ready.session, "^50000$", true).await;
    assert_eq!(status, 200, "{body}");
    let found: HistorySearchResult = decode(body.as_bytes()).unwrap();
    assert_eq!(found.total_hits, 1, "{found:?}");
    let hit = found.hits[0];
    let at = page(&relay, &ready.session, Some(hit.line + 1), 1).await;
    assert_eq!(plain(&at.lines[0]), "50000");
    let (status, body) = search(&relay, &ready.session, "9999", false).await;
    let many: HistorySearchResult = decode(body.as_bytes()).unwrap();
    // 9999, 19999, ..., 89999; 99990 and above are still on the 24-row screen.
    assert_eq!(many.total_hits, 9, "{status} {many:?}");
    let (status, body) = search(&relay, &ready.session, "([a-", true).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("bad_pattern"), "{body}");
}

#[tokio::test]
async fn full_screen_programs_stay_out_and_what_came_before_them_stays_in() {
    let token = test_token("history-vi");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = session(&relay, &token).await;
    run(&mut mosh, "seq -f 'before-vi-%g' 1 40\n", "before-vi-40", Duration::from_secs(10)).await;
    // less on the alternate screen, scrolled through its whole file, then quit.
    run(
        &mut mosh,
        "seq -f 'in-less-%g' 1 200 > /tmp/tern-less-$$; less /tmp/tern-less-$$\n",
        "in-less-1",
        Duration::from_secs(10),
    )
    .await;
    run(&mut mosh, " ", "in-less-", Duration::from_secs(5)).await;
    run(&mut mosh, "G", "in-less-200", Duration::from_secs(5)).await;
    mosh.type_bytes(b"q");
    run(
        &mut mosh,
        "rm -f /tmp/tern-less-$$; printf 'after-%s\\n' less\n",
        "after-less",
        Duration::from_secs(10),
    )
    .await;
    // A long line the terminal wraps over three rows comes back as one line, with its colours.
    let long = "x".repeat(200);
    run(
        &mut mosh,
        &format!("printf '\\033[31mred\\033[0m {long}\\n'; seq -f 'push-%g' 1 30\n"),
        "push-30",
        Duration::from_secs(10),
    )
    .await;
    let history = whole_history(&relay, &ready.session).await;
    let text: Vec<String> = history.iter().map(|l| plain(l)).collect();
    let leaked: Vec<&String> = text.iter().filter(|l| l.starts_with("in-less-")).collect();
    assert!(leaked.is_empty(), "less's screen is not history: {leaked:?} in {text:?}");
    for i in 1..=40 {
        assert!(text.contains(&format!("before-vi-{i}")), "before-vi-{i} lost");
    }
    let wrapped: Vec<&String> =
        history.iter().filter(|l| plain(l).starts_with(&format!("red {long}"))).collect();
    assert_eq!(wrapped.len(), 1, "{wrapped:?}");
    assert!(wrapped[0].contains("\x1b[0;31mred\x1b[0m"), "{:?}", wrapped[0]);
}

#[tokio::test]
async fn the_history_survives_a_relay_restart_and_goes_with_the_session() {
    let token = test_token("history-restart");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = session(&relay, &token).await;
    run(&mut mosh, "seq -f 'kept-%g' 1 60\n", "kept-60", Duration::from_secs(10)).await;
    relay.stop().await;

    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let text: Vec<String> =
        whole_history(&relay, &ready.session).await.iter().map(|l| plain(l)).collect();
    assert!(text.contains(&"kept-1".to_string()), "{text:?}");

    // Refusals: no token, wrong method, unknown session, hostile bodies.
    let req = encode(&HistoryRequest { session: ready.session.clone(), before: None, count: 5 });
    assert_eq!(http_post(relay.addr(), HISTORY_PATH, None, &req).await.0, 401);
    assert_eq!(http_get(relay.addr(), HISTORY_PATH, Some(&token)).await.0, 405);
    let other =
        encode(&HistoryRequest { session: "00112233aabbccdd".into(), before: None, count: 5 });
    assert_eq!(http_post(relay.addr(), HISTORY_PATH, Some(&token), &other).await.0, 404);
    let traversal = br#"{"session":"../../etc/passwd","count":5}"#;
    assert_eq!(http_post(relay.addr(), HISTORY_PATH, Some(&token), traversal).await.0, 404);
    assert_eq!(http_post(relay.addr(), HISTORY_PATH, Some(&token), b"{nonsense").await.0, 400);
    let huge = vec![b' '; 64 * 1024];
    assert_eq!(http_post(relay.addr(), HISTORY_PATH, Some(&token), &huge).await.0, 413);

    // The shell exits: the session's history goes with it.
    let conn = connect(&relay, None).await.expect("connects");
    let (control, reply) = hello(&conn, spawn_hello(Some(&token), Some(&ready.session))).await;
    let again = expect_ready(reply);
    mosh.reattach(conn, control, again.seq_floor);
    mosh.type_bytes(b"exit\n");
    let dir = state.path().join("sessions");
    let gone = || {
        !std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains(".history"))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !gone() && std::time::Instant::now() < deadline {
        mosh.run_until(Duration::from_millis(200), |_| false).await;
        let _ = http_get(relay.addr(), tern::relay_proto::SESSIONS_PATH, Some(&token)).await;
    }
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(gone(), "history files left after the session ended: {left:?}");
}

/// The pid of the session's recorder (`tern-relay record --history-dir STATE/sessions ...`; not
/// mosh-server, whose command line holds the same words after its `--`).
fn recorder_pid(state: &std::path::Path) -> u32 {
    let dir = state.join("sessions");
    let want = format!("record\0--history-dir\0{}\0", dir.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
            let c = String::from_utf8_lossy(&c);
            let argv0 = c.split('\0').next().unwrap_or("");
            argv0.ends_with("tern-relay") && c[argv0.len() + 1..].starts_with(&want)
        })
        .expect("the session's recorder runs")
}

/// A field of /proc/PID/status in kB (`VmRSS`, `VmHWM`).
fn memory_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// Issue 32, finding 6: output with no newline must not grow the recorder without bound (it
/// would end, with the session, when the OOM killer came). 40 MB of one line: the recorder's
/// memory stays within a few MB of what it was, the shell still answers, and the history holds
/// the line's start with a mark saying how much was cut.
#[tokio::test]
async fn forty_megabytes_without_a_newline_leave_the_recorder_small_and_the_shell_answering() {
    let token = test_token("history-flood");
    let state = tempfile::tempdir().unwrap();
    let _cleanup = KillRecorded(state.path());
    let relay = TestRelay::start(spawn_config(state.path(), &token)).await;
    let (mut mosh, ready) = session(&relay, &token).await;
    run(
        &mut mosh,
        "seq -f 'warm-%g' 1 100; echo warm-$((1+1))\n",
        "warm-2",
        Duration::from_secs(10),
    )
    .await;
    let pid = recorder_pid(state.path());
    let (rss_before, hwm_before) = (memory_kb(pid, "VmRSS"), memory_kb(pid, "VmHWM"));

    run(
        &mut mosh,
        "head -c 40000000 /dev/zero | tr '\\0' a; echo; seq -f 'push-%g' 1 30; \
         echo flood-$((40+2))\n",
        "flood-42",
        Duration::from_secs(600),
    )
    .await;
    run(&mut mosh, "echo ok-$((6*7))\n", "ok-42", Duration::from_secs(20)).await;
    let (rss_after, hwm_after) = (memory_kb(pid, "VmRSS"), memory_kb(pid, "VmHWM"));
    let growth = hwm_after.saturating_sub(rss_before);
    println!(
        "recorder {pid}: VmRSS {rss_before} kB -> {rss_after} kB, VmHWM {hwm_before} kB -> \
         {hwm_after} kB, peak growth {growth} kB"
    );
    assert!(growth <= 8 * 1024, "the recorder grew by {growth} kB for one 40 MB line");

    // The line is in the history: its start, and a mark of what was cut.
    let history = whole_history(&relay, &ready.session).await;
    let long: Vec<&String> = history.iter().filter(|l| l.starts_with("aaaa")).collect();
    let summary: Vec<String> = history
        .iter()
        .rev()
        .take(12)
        .map(|l| format!("{} bytes: {:?}", l.len(), &plain(l).chars().take(50).collect::<String>()))
        .collect();
    assert_eq!(long.len(), 1, "one long line; the newest lines: {summary:#?}");
    let mark = format!("[{} bytes cut]", 40_000_000 - 64 * 1024);
    assert!(long[0].ends_with(&mark), "{:?}", &long[0][long[0].len().saturating_sub(60)..]);
    assert!(long[0].len() < 64 * 1024 + 100, "{} bytes kept", long[0].len());
    let text: Vec<String> = history.iter().map(|l| plain(l)).collect();
    assert!(text.iter().any(|l| l == "push-1"), "the shell's next line is history");
    let (status, body) = search(&relay, &ready.session, "bytes cut", false).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"total_hits\":1"), "{body}");
}
