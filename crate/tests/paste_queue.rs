//! The paste queue and the upload-stream client, natively: the input order around a paste, cancel,
//! repeat pastes, resume after a broken stream, and giving up.

use std::time::Duration;

use tern::paste::{
    GIVE_UP, JobOutcome, KeyAction, PasteQueue, PasteState, RESULT_SHOWN, RETRY_PAUSE,
};
use tern::relay_proto::{UploadErrorCode, UploadReply};
use tern::time::Instant;

const T0: Instant = Instant::from_millis(1_000);

fn at(ms: u64) -> Instant {
    T0 + Duration::from_millis(ms)
}

fn hash(n: u8) -> [u8; 32] {
    [n; 32]
}

/// Types `bytes` as the driver does: sent at once when the queue says so.
fn type_keys(q: &mut PasteQueue, now: Instant, bytes: &[u8], wire: &mut Vec<u8>) {
    if q.key(now, bytes) == KeyAction::Send {
        wire.extend_from_slice(bytes);
    }
}

/// Runs the active job to completion on a perfect link: have 0, every chunk acked, path.
fn upload_all(q: &mut PasteQueue, now: Instant, path: &str) {
    let job = q.active().expect("an active job");
    assert!(job.wants_stream(now, true));
    let header = job.stream_opened(now);
    assert_eq!(header.size, job.total());
    job.handle_reply(now, UploadReply::Have { have: 0, path: None });
    let mut t = now;
    let mut relay_us = 0;
    while job.outcome().is_none() {
        let mut sent = 0;
        while let Some(r) = job.poll_chunk(t) {
            sent = r.end;
        }
        t = t + Duration::from_millis(5);
        relay_us += 5_000;
        if sent > 0 {
            job.handle_reply(t, UploadReply::Ack { acked: sent, relay_time_us: relay_us });
        }
        if sent == job.total() {
            job.handle_reply(t, UploadReply::Path { path: path.into() });
        }
        job.handle_timeout(t);
        assert!(t < now + Duration::from_secs(60), "the upload finishes");
    }
}

#[test]
fn keys_typed_during_an_upload_land_after_the_path_in_order() {
    let mut q = PasteQueue::new();
    let mut wire = Vec::new();
    type_keys(&mut q, at(0), b"ls ", &mut wire);
    let id = q.begin();
    type_keys(&mut q, at(1), b"; echo ", &mut wire);
    assert_eq!(q.progress(at(1)).unwrap().state, PasteState::Reading);
    q.hashed(id, hash(1), 100_000, "image/png");
    type_keys(&mut q, at(2), b"held", &mut wire);
    type_keys(&mut q, at(3), b"-42\r", &mut wire);
    assert_eq!(wire, b"ls ", "nothing typed after the paste leaves before its path");
    assert!(q.release(false).is_empty(), "the upload has not finished");
    assert!(q.start_next(at(4)).is_some());
    upload_all(&mut q, at(4), "/p/one.png");
    assert_eq!(q.finish_active(at(500)), Some(JobOutcome::Done("/p/one.png".into())));
    wire.extend(q.release(false));
    assert_eq!(String::from_utf8(wire).unwrap(), "ls /p/one.png ; echo held-42\r");
    assert!(!q.busy());
    let c = q.counters();
    assert_eq!((c.pastes, c.uploads, c.completed, c.paths_typed), (1, 1, 1, 1));
    assert_eq!(c.held_keys, 7 + 4 + 4);
    assert_eq!(c.bytes_sent, 100_000);
    // Keys typed now go straight out.
    assert_eq!(q.key(at(600), b"x"), KeyAction::Send);
}

#[test]
fn the_path_is_bracketed_when_the_remote_asked_for_it() {
    let mut q = PasteQueue::new();
    let id = q.begin();
    q.hashed(id, hash(2), 10, "");
    q.start_next(at(0));
    let job = q.active().unwrap();
    job.stream_opened(at(0));
    job.handle_reply(at(1), UploadReply::Have { have: 10, path: Some("/p/my pic.png".into()) });
    q.finish_active(at(1));
    assert_eq!(q.release(true), b"\x1b[200~'/p/my pic.png'\x1b[201~ ");
}

#[test]
fn escape_cancels_every_paste_and_releases_the_held_keys() {
    let mut q = PasteQueue::new();
    let mut wire = Vec::new();
    let a = q.begin();
    q.hashed(a, hash(3), 5_000_000, "image/png");
    let b = q.begin();
    type_keys(&mut q, at(1), b"after-", &mut wire);
    q.hashed(b, hash(4), 5_000_000, "image/png");
    type_keys(&mut q, at(2), b"6", &mut wire);
    q.start_next(at(3));
    let job = q.active().unwrap();
    job.stream_opened(at(3));
    job.handle_reply(at(4), UploadReply::Have { have: 0, path: None });
    assert!(job.poll_chunk(at(4)).is_some());
    assert_eq!(q.progress(at(5)).unwrap().queued, 1);
    assert_eq!(q.key(at(10), b"\x1b"), KeyAction::CancelledPastes, "Escape cancels");
    assert!(q.active().is_none(), "the active upload is gone: its stream must be aborted");
    wire.extend(q.release(false));
    assert_eq!(wire, b"after-6");
    assert!(!q.busy());
    assert_eq!(q.counters().cancelled, 1);
    assert_eq!(q.line(at(11)).as_deref(), Some("Paste cancelled."));
    assert_eq!(q.line(at(10) + RESULT_SHOWN + Duration::from_millis(1)), None);
    // Escape with nothing under way is an ordinary key.
    assert_eq!(q.key(at(20), b"\x1b"), KeyAction::Send);
    // The cancelled content uploads again when pasted again (nothing was remembered).
    let c = q.begin();
    q.hashed(c, hash(3), 5_000_000, "image/png");
    assert_eq!(q.start_next(at(30)), Some(hash(3)));
}

#[test]
fn a_repeat_paste_sends_nothing_and_types_the_same_path() {
    let mut q = PasteQueue::new();
    let a = q.begin();
    q.hashed(a, hash(5), 50_000, "image/png");
    q.start_next(at(0));
    upload_all(&mut q, at(0), "/p/five.png");
    q.finish_active(at(300));
    assert_eq!(q.release(false), b"/p/five.png ");
    let sent = q.counters().bytes_sent;
    let b = q.begin();
    q.hashed(b, hash(5), 50_000, "image/png");
    assert_eq!(q.start_next(at(400)), None, "nothing to upload");
    assert_eq!(q.release(false), b"/p/five.png ");
    assert_eq!(q.counters().bytes_sent, sent);
    assert_eq!(q.counters().uploads, 1);
}

#[test]
fn the_same_picture_pasted_twice_quickly_uploads_once() {
    let mut q = PasteQueue::new();
    let a = q.begin();
    let b = q.begin();
    q.hashed(a, hash(6), 20_000, "");
    q.hashed(b, hash(6), 20_000, "");
    assert!(q.start_next(at(0)).is_some());
    upload_all(&mut q, at(0), "/p/six.png");
    q.finish_active(at(200));
    assert_eq!(q.start_next(at(200)), None);
    assert_eq!(q.release(false), b"/p/six.png /p/six.png ");
}

#[test]
fn a_failed_paste_drops_its_place_and_releases_the_keys() {
    let mut q = PasteQueue::new();
    let a = q.begin();
    assert_eq!(q.key(at(0), b"k"), KeyAction::Held);
    q.hashed(a, hash(7), 2_000_000_000, "");
    q.start_next(at(1));
    let job = q.active().unwrap();
    job.stream_opened(at(1));
    job.handle_reply(
        at(2),
        UploadReply::Error {
            error: UploadErrorCode::TooLarge,
            message: "2 GB is over the limit".into(),
        },
    );
    assert_eq!(q.finish_active(at(2)), Some(JobOutcome::Failed("2 GB is over the limit".into())));
    assert_eq!(q.release(false), b"k");
    assert_eq!(q.line(at(3)).as_deref(), Some("Paste failed: 2 GB is over the limit"));
    assert_eq!(q.counters().failed, 1);
    // A file that cannot be read fails the same way.
    let b = q.begin();
    assert_eq!(q.key(at(4), b"j"), KeyAction::Held);
    q.read_failed(at(5), b, "cannot read the file");
    assert_eq!(q.release(false), b"j");
    assert_eq!(q.last_error.as_deref(), Some("cannot read the file"));
}

#[test]
fn a_broken_stream_resumes_from_what_the_relay_holds() {
    let mut q = PasteQueue::new();
    let a = q.begin();
    q.hashed(a, hash(8), 200_000, "");
    q.start_next(at(0));
    let job = q.active().unwrap();
    job.stream_opened(at(0));
    job.handle_reply(at(1), UploadReply::Have { have: 0, path: None });
    let mut sent = 0;
    while let Some(r) = job.poll_chunk(at(1)) {
        sent = r.end;
    }
    job.handle_reply(at(20), UploadReply::Ack { acked: sent, relay_time_us: 1 });
    // The relay restarts: the stream dies.
    job.stream_ended(at(30));
    assert_eq!(job.state(), PasteState::Resuming);
    assert!(!job.wants_stream(at(31), true), "a pause before the next attempt");
    assert!(job.wants_stream(at(30) + RETRY_PAUSE, true));
    assert!(!job.wants_stream(at(30) + RETRY_PAUSE, false), "not without a link");
    job.stream_opened(at(30) + RETRY_PAUSE);
    assert_eq!(job.streams, 2);
    job.handle_reply(at(600), UploadReply::Have { have: sent, path: None });
    let first = job.poll_chunk(at(600)).unwrap();
    assert_eq!(first.start, sent, "resumes where the relay's copy ends");
}

#[test]
fn an_upload_gives_up_after_two_minutes_without_progress() {
    let mut q = PasteQueue::new();
    let a = q.begin();
    assert_eq!(q.key(at(0), b"z"), KeyAction::Held);
    q.hashed(a, hash(9), 1000, "");
    q.start_next(at(0));
    let job = q.active().unwrap();
    // The link never comes up.
    assert_eq!(job.poll_timeout(), Some(at(0) + GIVE_UP));
    job.handle_timeout(at(0) + GIVE_UP);
    assert_eq!(
        job.outcome(),
        Some(JobOutcome::Failed("no connection to the relay for two minutes".into()))
    );
    q.finish_active(at(0) + GIVE_UP);
    assert_eq!(q.release(false), b"z", "the held key is not lost");
}

#[test]
fn hold_keys_off_sends_keys_during_an_upload() {
    let mut q = PasteQueue::new();
    q.hold_keys = false;
    let a = q.begin();
    q.hashed(a, hash(10), 1000, "");
    assert_eq!(q.key(at(0), b"x"), KeyAction::Send);
    assert_eq!(q.key(at(0), b"\x1b"), KeyAction::CancelledPastes, "Escape still cancels");
}

#[test]
fn the_first_stream_sends_content_with_its_header_without_waiting_for_have() {
    let mut q = PasteQueue::new();
    q.eager = true;
    let a = q.begin();
    q.hashed(a, hash(11), 300_000, "image/png");
    q.start_next(at(0));
    let job = q.active().unwrap();
    let header = job.stream_opened(at(0));
    assert!(header.eager, "the header says the content follows");
    let first = job.poll_chunk(at(0)).expect("content right behind the header");
    assert_eq!(first.start, 0);
    // The relay holds nothing: `have` 0 changes nothing, the upload goes on.
    job.handle_reply(at(80), UploadReply::Have { have: 0, path: None });
    assert!(job.stream_open());
    assert_eq!(job.state(), PasteState::Sending);
    let mut sent = first.end;
    while let Some(r) = job.poll_chunk(at(80)) {
        assert_eq!(r.start, sent, "contiguous from where the eager bytes ended");
        sent = r.end;
    }
    job.handle_reply(at(90), UploadReply::Ack { acked: sent, relay_time_us: 10_000 });
    assert_eq!(job.first_byte_at, Some(at(0)));

    // Off (the default): the header waits for `have`.
    let mut q = PasteQueue::new();
    let b = q.begin();
    q.hashed(b, hash(12), 300_000, "");
    q.start_next(at(0));
    let job = q.active().unwrap();
    assert!(!job.stream_opened(at(0)).eager);
    assert_eq!(job.poll_chunk(at(0)), None, "nothing before the relay's answer");
    job.handle_reply(at(80), UploadReply::Have { have: 0, path: None });
    assert_eq!(job.poll_chunk(at(80)).map(|r| r.start), Some(0));
}

#[test]
fn an_eager_stream_that_meets_a_part_resumes_from_it_on_a_new_stream_at_once() {
    let mut q = PasteQueue::new();
    q.eager = true;
    let a = q.begin();
    assert_eq!(q.key(at(0), b"q"), KeyAction::Held);
    q.hashed(a, hash(13), 300_000, "");
    q.start_next(at(0));
    let job = q.active().unwrap();
    assert!(job.stream_opened(at(0)).eager);
    assert!(job.poll_chunk(at(0)).is_some());
    // A part from an earlier page: the relay reads nothing more on this stream.
    job.handle_reply(at(80), UploadReply::Have { have: 120_000, path: None });
    assert!(!job.stream_open(), "the driver stops reading and aborts this stream");
    assert_eq!(job.outcome(), None);
    job.stream_ended(at(81));
    assert!(job.wants_stream(at(81), true), "a new stream at once, no retry pause");
    let header = job.stream_opened(at(81));
    assert!(!header.eager, "a resume waits for the relay's count");
    assert_eq!(job.poll_chunk(at(81)), None);
    job.handle_reply(at(161), UploadReply::Have { have: 120_000, path: None });
    assert_eq!(job.poll_chunk(at(161)).map(|r| r.start), Some(120_000));
    assert_eq!(job.streams, 2);
    assert_eq!(q.release(false), b"", "the key stays held behind the paste");
}

#[test]
fn a_refused_eager_upload_loses_no_key_and_a_known_one_ends_at_once() {
    let mut q = PasteQueue::new();
    q.eager = true;
    let a = q.begin();
    assert_eq!(q.key(at(0), b"k"), KeyAction::Held);
    q.hashed(a, hash(14), 2_000_000_000, "");
    q.start_next(at(1));
    let job = q.active().unwrap();
    assert!(job.stream_opened(at(1)).eager);
    assert!(job.poll_chunk(at(1)).is_some(), "content went out before the relay's answer");
    job.handle_reply(
        at(80),
        UploadReply::Error { error: UploadErrorCode::TooLarge, message: "over the limit".into() },
    );
    assert_eq!(q.finish_active(at(80)), Some(JobOutcome::Failed("over the limit".into())));
    assert_eq!(q.release(false), b"k", "the held key goes out");
    // The relay has it complete (this page forgot): the path, whatever went out eagerly.
    let b = q.begin();
    q.hashed(b, hash(15), 300_000, "");
    q.start_next(at(90));
    let job = q.active().unwrap();
    job.stream_opened(at(90));
    assert!(job.poll_chunk(at(90)).is_some());
    job.handle_reply(at(170), UploadReply::Have { have: 300_000, path: Some("/p/x.png".into()) });
    assert_eq!(q.finish_active(at(170)), Some(JobOutcome::Done("/p/x.png".into())));
    assert_eq!(q.release(false), b"/p/x.png ");
}
