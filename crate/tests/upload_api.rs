//! The upload's bookkeeping and contract: resume, repeat pastes, odd and wrong acks, cancel, stall.

mod upload_support;

use std::time::Duration;

use tern::time::Instant;
use tern::transfer::{
    AckInfo, FailReason, MAX_CHUNK, MIN_CHUNK, Recall, RecentUploads, STALL_TIMEOUT, Upload,
    UploadConfig, UploadError, UploadState,
};
use upload_support::{Clump, Link, RelayClock, run, upload};

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn ack(acked_bytes: u64, relay_ms: u64) -> AckInfo {
    AckInfo { acked_bytes, relay_time: Duration::from_millis(relay_ms) }
}

/// Everything `poll_chunk` hands out at `now`.
fn drain(u: &mut Upload, now: Instant) -> Vec<std::ops::Range<u64>> {
    std::iter::from_fn(|| u.poll_chunk(now)).collect()
}

#[test]
fn resume_from_a_prefix_sends_only_the_rest() {
    let link = Link::mbit(9.0, 80, Clump::Batched { every: Duration::from_millis(100) });
    let mut first = None;
    let r =
        run(link, upload(1_000_000, 600_000), Duration::ZERO, Duration::from_secs(60), |_, u| {
            first.get_or_insert(u.progress(Instant::ZERO).sent);
        });
    assert_eq!(r.final_state, Some(UploadState::Done));
    assert_eq!(r.bytes_sent, 400_000, "only the 400 kB the relay lacked");
    assert!(first.is_some_and(|s| s > 600_000), "the first chunk starts at the relay's count");

    let mut u = upload(1_000_000, 600_000);
    let chunks = drain(&mut u, ms(0));
    assert_eq!(chunks[0].start, 600_000);
    assert_eq!(u.resumed_from(), 600_000);
    let p = u.progress(ms(0));
    assert_eq!((p.acked, p.percent), (600_000, 60.0));
}

#[test]
fn a_repeat_paste_the_relay_has_sends_nothing() {
    let mut u = upload(5_000_000, 5_000_000);
    assert_eq!(u.state(), UploadState::Done);
    assert_eq!(u.poll_chunk(ms(0)), None);
    assert_eq!(u.poll_timeout(), None);
    assert_eq!(u.progress(ms(0)).percent, 100.0);
    // An empty paste is the same.
    assert_eq!(upload(0, 0).state(), UploadState::Done);
}

#[test]
fn chunks_are_contiguous_bounded_ranges_and_start_small() {
    let mut u = upload(1_000_000, 0);
    let chunks = drain(&mut u, ms(0));
    assert!(!chunks.is_empty());
    for pair in chunks.windows(2) {
        assert_eq!(pair[0].end, pair[1].start);
    }
    assert!(chunks.iter().all(|c| c.end - c.start <= MAX_CHUNK && c.end > c.start));
    let p = u.progress(ms(0));
    assert_eq!(p.state, UploadState::Probing);
    assert_eq!(p.in_flight, 2 * MAX_CHUNK, "a conservative start: two 32 KiB chunks' worth");
    assert_eq!(p.rate, None);
    assert_eq!(p.time_left, None);
}

/// With the link's round trip as a hint, the first window is not one burst: a chunk leaves, the
/// next when the pacer's clock lets it, the whole window spread over about that round trip.
#[test]
fn a_round_trip_hint_spreads_the_first_window_over_it() {
    let mut u = upload(1_000_000, 0).rtt_hint(Duration::from_millis(80));
    let at_once = drain(&mut u, ms(0));
    assert!(at_once.len() <= 2, "{} chunks at once", at_once.len());
    // The driver: chunks whenever the pacer's timer says.
    let mut sent_by = |t: u64| {
        while let Some(at) = u.poll_timeout().filter(|at| *at <= ms(t)) {
            drain(&mut u, at);
        }
        u.progress(ms(t)).sent
    };
    let (early, later) = (sent_by(20), sent_by(85));
    assert!(early < MAX_CHUNK, "{early} bytes within 20 ms of an 80 ms round trip");
    assert_eq!(later, 2 * MAX_CHUNK, "the window is out within about the round trip");
    // Without the hint, the same window leaves at once; a zero hint is none.
    let mut plain = upload(1_000_000, 0).rtt_hint(Duration::ZERO);
    drain(&mut plain, ms(0));
    assert_eq!(plain.progress(ms(0)).sent, 2 * MAX_CHUNK);
}

#[test]
fn an_ack_for_unsent_bytes_is_a_peer_error() {
    let mut u = upload(1_000_000, 0);
    let sent = drain(&mut u, ms(0)).last().unwrap().end;
    let err = u.handle_ack(ms(50), ack(sent + 1, 1000)).unwrap_err();
    assert_eq!(err, UploadError::AckBeyondSent { acked: sent + 1, sent });
    assert!(err.to_string().contains("only"), "{err}");
    assert_eq!(u.state(), UploadState::Failed { reason: FailReason::Peer(err) });
    assert_eq!(u.poll_chunk(ms(60)), None, "a failed upload sends nothing");
    // Later acks are ignored, not errors and not panics.
    assert_eq!(u.handle_ack(ms(70), ack(u64::MAX, 0)), Ok(()));
}

#[test]
fn duplicate_and_stale_acks_change_nothing() {
    let mut u = upload(1_000_000, 0);
    drain(&mut u, ms(0));
    u.handle_ack(ms(50), ack(8192, 1000)).unwrap();
    drain(&mut u, ms(50));
    u.handle_ack(ms(60), ack(16384, 1010)).unwrap();
    let before = format!("{u:?}");
    for stale in [ack(16384, 1010), ack(16384, 5000), ack(8192, 1020), ack(0, 0)] {
        u.handle_ack(ms(70), stale).unwrap();
        assert_eq!(format!("{u:?}"), before, "{stale:?} changed the upload");
    }
    assert_eq!(u.progress(ms(70)).acked, 16384, "acks never go backwards");
}

#[test]
fn relay_clock_steps_and_repeats_are_tolerated() {
    for clock in [RelayClock::Millis, RelayClock::Exact] {
        let link = Link { relay_clock: clock, ..Link::mbit(50.0, 10, Clump::None) };
        let r = run(link, upload(3_000_000, 0), Duration::ZERO, Duration::from_secs(60), |_, _| {});
        assert_eq!(r.final_state, Some(UploadState::Done), "{clock:?}");
    }
    // A relay whose clock steps back mid-upload, and one whose clock never moves.
    for step in [true, false] {
        let mut u = upload(2_000_000, 0);
        let mut now = 0;
        let mut relay = 1_000_000;
        while !u.state().is_terminal() && now < 100_000 {
            let sent = drain(&mut u, ms(now)).last().map(|r| r.end);
            now += 10;
            if step && now == 500 {
                relay = 3; // the relay restarted its clock
            } else if step {
                relay += 10;
            }
            if let Some(end) = sent.or(Some(u.progress(ms(now)).sent)) {
                u.handle_ack(ms(now), ack(end, relay)).unwrap();
            }
        }
        assert_eq!(u.state(), UploadState::Done, "step {step}");
    }
}

#[test]
fn cancel_stops_sending() {
    let mut u = upload(1_000_000, 0);
    let sent = drain(&mut u, ms(0)).last().unwrap().end;
    u.cancel();
    assert_eq!(u.state(), UploadState::Cancelled);
    u.handle_ack(ms(50), ack(sent, 1000)).unwrap();
    assert_eq!(u.poll_chunk(ms(50)), None);
    assert_eq!(u.poll_timeout(), None, "no timers after cancel");
    u.cancel();
    assert_eq!(u.state(), UploadState::Cancelled);
}

#[test]
fn no_acks_for_the_stall_timeout_fails_as_stalled_and_a_new_upload_resumes() {
    let mut u = upload(1_000_000, 0);
    drain(&mut u, ms(0));
    u.handle_ack(ms(100), ack(40_000, 1000)).unwrap();
    drain(&mut u, ms(100));
    let deadline = u.poll_timeout().expect("data in flight arms the stall timer");
    assert_eq!(deadline, ms(100) + STALL_TIMEOUT);
    u.handle_timeout(deadline - Duration::from_millis(1));
    assert!(!u.state().is_terminal(), "a spurious early timeout is harmless");
    u.handle_timeout(deadline);
    assert_eq!(
        u.state(),
        UploadState::Failed { reason: FailReason::Stalled { since: STALL_TIMEOUT } }
    );
    // The driver reconnects, asks the relay, and resumes from what it has.
    let relay_has = u.progress(deadline).acked;
    let mut again = upload(1_000_000, relay_has);
    assert_eq!(drain(&mut again, deadline)[0].start, 40_000);
}

#[test]
fn impossible_configurations_are_errors() {
    let new = |total, resume_from, chunk_size| {
        Upload::new(UploadConfig { total, resume_from, chunk_size }, Instant::ZERO).map(|_| ())
    };
    assert_eq!(
        new(10, 11, MAX_CHUNK),
        Err(UploadError::ResumeBeyondEnd { resume_from: 11, total: 10 })
    );
    assert_eq!(
        new(10, 0, 0),
        Err(UploadError::ChunkSize { chunk_size: 0, min: MIN_CHUNK, max: MAX_CHUNK })
    );
    assert!(new(10, 0, MIN_CHUNK - 1).is_err());
    assert!(new(10, 0, MAX_CHUNK + 1).is_err());
    assert!(new(10, 0, MIN_CHUNK).is_ok());
}

#[test]
fn progress_reports_rate_time_left_and_finishing() {
    let link = Link::mbit(9.0, 80, Clump::None);
    let mut seen = Vec::new();
    let r = run(link, upload(2_000_000, 0), Duration::ZERO, Duration::from_secs(60), |now, u| {
        seen.push(u.progress(now));
    });
    assert_eq!(r.final_state, Some(UploadState::Done));
    let states: Vec<_> = seen.iter().map(|p| format!("{:?}", p.state)).collect();
    for s in ["Probing", "Sending", "Finishing", "Done"] {
        assert!(states.iter().any(|x| x == s), "never {s}");
    }
    let mid = seen.iter().find(|p| p.acked >= 1_000_000).unwrap();
    let left = mid.time_left.unwrap().as_secs_f64();
    let truth = (2_000_000 - mid.acked) as f64 / link.rate as f64;
    assert!((left - truth).abs() < 0.1 * truth, "time left {left} s, really {truth} s");
    assert!(seen.windows(2).all(|w| w[0].percent <= w[1].percent), "percent never goes back");
}

#[test]
fn ten_pastes_of_one_picture_make_one_upload() {
    let hash = [7u8; 32];
    let mut memory = RecentUploads::new(16);
    let mut uploads = 0;
    for paste in 0..10 {
        match memory.begin(hash) {
            Recall::New => uploads += 1,
            Recall::InProgress => assert!(paste > 0),
            Recall::Uploaded(path) => assert_eq!(path, "/tmp/tern/7.png"),
        }
        if paste == 3 {
            memory.finish(hash, "/tmp/tern/7.png");
        }
    }
    assert_eq!(uploads, 1);
    assert_eq!(memory.recall(&hash), Recall::Uploaded("/tmp/tern/7.png".into()));
}

#[test]
fn the_paste_memory_forgets_the_least_recent_and_failed_uploads() {
    let mut memory = RecentUploads::new(2);
    memory.finish([1; 32], "a");
    memory.finish([2; 32], "b");
    assert_eq!(memory.begin([1; 32]), Recall::Uploaded("a".into())); // 1 is now the most recent
    memory.finish([3; 32], "c");
    assert_eq!(memory.recall(&[2; 32]), Recall::New, "2 was least recently used");
    assert_eq!(memory.recall(&[1; 32]), Recall::Uploaded("a".into()));
    assert_eq!(memory.len(), 2);
    // A failed upload is forgotten so the next paste tries again; a finished one is kept.
    assert_eq!(memory.begin([4; 32]), Recall::New);
    memory.abandon(&[4; 32]);
    assert_eq!(memory.begin([4; 32]), Recall::New);
    memory.abandon(&[3; 32]);
    assert_eq!(memory.recall(&[3; 32]), Recall::Uploaded("c".into()));
}
