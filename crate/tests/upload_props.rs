//! Properties of the upload pacer under random links, ack clumping and hostile relays.

mod upload_support;

use std::time::Duration;

use proptest::prelude::*;
use tern::time::Instant;
use tern::transfer::{
    AckInfo, MAX_CHUNK, MIN_CHUNK, Upload, UploadConfig, UploadError, UploadState,
};
use upload_support::{Clump, Link, RelayClock, run};

fn clump() -> impl Strategy<Value = Clump> {
    prop_oneof![
        Just(Clump::None),
        (1u64..400).prop_map(|ms| Clump::Batched { every: Duration::from_millis(ms) }),
        (1u64..400).prop_map(|ms| Clump::Irregular { max: Duration::from_millis(ms) }),
    ]
}

fn link() -> impl Strategy<Value = Link> {
    (
        50_000u64..12_500_000,
        0u64..400,
        clump(),
        prop_oneof![Just(RelayClock::Exact), Just(RelayClock::Millis)],
        any::<u64>(),
    )
        .prop_map(|(rate, rtt_ms, clump, relay_clock, seed)| Link {
            rate,
            one_way: Duration::from_micros(rtt_ms * 500),
            queue: Duration::from_secs(1),
            clump,
            relay_clock,
            seed,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over any link and clumping: every send keeps in flight within the window, the window keeps
    /// its stated bounds, every byte is sent exactly once, and the upload finishes.
    #[test]
    fn in_flight_never_exceeds_the_cap(
        link in link(),
        total in 0u64..3_000_000,
        resume_permille in 0u64..=1000,
        chunk_size in MIN_CHUNK..=MAX_CHUNK,
    ) {
        let resume_from = total * resume_permille / 1000;
        let upload = Upload::new(UploadConfig { total, resume_from, chunk_size }, Instant::ZERO)
            .expect("valid config");
        let r = run(link, upload, Duration::ZERO, Duration::from_secs(600), |_, _| {});
        prop_assert_eq!(r.window_violations, 0);
        prop_assert!(r.bound_violations.is_empty(), "{:?}", r.bound_violations.first());
        prop_assert!(r.max_fill <= 1.0);
        prop_assert_eq!(r.bytes_sent, total - resume_from);
        prop_assert_eq!(r.final_state, Some(UploadState::Done));
    }

    /// A relay that acks anything at any time with any timestamp: no panic; an error exactly when
    /// the ack claims unsent bytes; in flight within the window after every send; the acked count
    /// never goes backwards.
    #[test]
    fn hostile_acks_never_panic_or_break_the_cap(
        total in 1u64..2_000_000,
        events in prop::collection::vec(
            (0u64..300_000, any::<bool>(), any::<u64>(), any::<u64>(), 0u8..4), 1..200),
    ) {
        let mut u = Upload::new(UploadConfig::new(total, 0), Instant::ZERO).unwrap();
        let mut now = Instant::ZERO;
        let mut acked = 0;
        for (step_us, timeout, a, relay, kind) in events {
            now = now + Duration::from_micros(step_us);
            while u.poll_chunk(now).is_some() {
                let p = u.progress(now);
                prop_assert!(p.in_flight <= p.window, "{} > {}", p.in_flight, p.window);
            }
            if timeout {
                u.handle_timeout(now);
            }
            let sent = u.progress(now).sent;
            // Mostly plausible acks (within what was sent), sometimes anything at all.
            let acked_bytes = match kind {
                0 => a,
                _ => a % (sent + 1),
            };
            let relay_time = Duration::from_micros(relay % (1 << 50));
            let before = u.state();
            let result = u.handle_ack(now, AckInfo { acked_bytes, relay_time });
            if before.is_terminal() {
                prop_assert_eq!(result, Ok(()));
            } else if acked_bytes > sent {
                prop_assert_eq!(result, Err(UploadError::AckBeyondSent { acked: acked_bytes, sent }));
            } else {
                prop_assert_eq!(result, Ok(()));
            }
            let p = u.progress(now);
            prop_assert!(p.acked >= acked);
            acked = p.acked;
            prop_assert!(p.acked <= p.sent && p.sent <= p.total);
            prop_assert!((0.0..=100.0).contains(&p.percent));
            let _ = u.poll_timeout();
        }
    }
}
