//! The upload pacer over a simulated bottleneck with clumped acks: rate estimate, in-flight cap,
//! completion time and the queue a keystroke would wait behind.
//!
//! Run with `--nocapture` to see the table.

mod upload_support;

use std::time::Duration;

use tern::upload::MAX_CHUNK;
use upload_support::{Clump, Link, Run, mean, run, upload};

const SIZE: u64 = 13_400_000;

fn clumps() -> [Clump; 3] {
    [
        Clump::Batched { every: Duration::from_millis(50) },
        Clump::Batched { every: Duration::from_millis(200) },
        Clump::Irregular { max: Duration::from_millis(150) },
    ]
}

/// When the steady-state figures start. The sender learns something once per round trip or per ack
/// clump, whichever is longer, and doubles its rate per lesson from a 64 KiB start: eight lessons
/// cover 64 KiB per round trip up to 50 Mbit/s; slow links need a few chunk times more.
fn warmup(link: &Link) -> Duration {
    8 * link.rtt().max(link.clump.max_extra()) + Duration::from_millis(500)
}

/// A long transfer (at least 12 s of link time), so the start-up is a small part of the total.
fn size(link: &Link) -> u64 {
    SIZE.max(link.rate * 12)
}

fn simulate(link: Link, size: u64) -> Run {
    run(link, upload(size, 0), warmup(&link), Duration::from_secs(3600), |_, _| {})
}

#[test]
fn matrix_rates_rtts_and_clumps() {
    println!(
        "{:>6} {:>5} {:>22} {:>8} {:>8} {:>9} {:>9} {:>9} {:>8}",
        "Mbit/s", "RTT", "clump", "time/x", "rate err", "mean est", "queue", "warm q", "bound"
    );
    let mut failures = Vec::new();
    for mbit in [1.0, 9.0, 50.0] {
        for rtt in [10, 80, 300] {
            for clump in clumps() {
                let link = Link::mbit(mbit, rtt, clump);
                let r = simulate(link, size(&link));
                let ideal = link.serialization(size(&link)).as_secs_f64();
                let ratio = r.finished.map_or(f64::INFINITY, |d| d.as_secs_f64() / ideal);
                let est = mean(&r.rate_samples_warm) / link.rate as f64;
                // Queue a keystroke waits behind: about one round trip plus the two chunks the
                // window floor allows (each chunk is ~20 ms of link time, at least 4 KiB).
                let chunk = (link.rate / 50).clamp(4096, MAX_CHUNK);
                let bound = link.rtt().mul_f64(1.5) + 2 * link.serialization(chunk);
                println!(
                    "{mbit:>6} {rtt:>5} {:>22} {ratio:>8.3} {:>7.1}% {est:>9.3} {:>7.0}ms {:>7.0}ms {:>6.0}ms",
                    format!("{clump:?}").replace("Duration::from_", ""),
                    r.max_rate_error_warm * 100.0,
                    r.max_queue.as_secs_f64() * 1e3,
                    r.max_queue_warm.as_secs_f64() * 1e3,
                    bound.as_secs_f64() * 1e3,
                );
                let case = format!("{mbit} Mbit/s, {rtt} ms, {clump:?}");
                if r.finished.is_none() {
                    failures.push(format!("{case}: did not finish ({:?})", r.final_state));
                }
                if r.window_violations > 0 || !r.bound_violations.is_empty() {
                    failures.push(format!(
                        "{case}: {} window violations, {:?}",
                        r.window_violations,
                        r.bound_violations.first()
                    ));
                }
                if r.max_rate_error_warm > 0.10 {
                    failures.push(format!(
                        "{case}: rate estimate off by {:.1}%",
                        r.max_rate_error_warm * 100.0
                    ));
                }
                if ratio > 1.3 {
                    failures.push(format!("{case}: took {ratio:.2}x the link's time"));
                }
                if r.max_queue_warm > bound {
                    failures.push(format!("{case}: queue {:?} > {bound:?}", r.max_queue_warm));
                }
                if r.queue_overflow > 0 {
                    failures.push(format!("{case}: {} bytes overflowed", r.queue_overflow));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore]
fn trace() {
    let mbit: f64 = std::env::var("MBIT").map_or(50.0, |v| v.parse().unwrap());
    let rtt: u64 = std::env::var("RTT").map_or(10, |v| v.parse().unwrap());
    let every: u64 = std::env::var("CLUMP").map_or(200, |v| v.parse().unwrap());
    let link = Link::mbit(mbit, rtt, Clump::Batched { every: Duration::from_millis(every) });
    let mut last = None;
    let r = run(link, upload(SIZE, 0), warmup(&link), Duration::from_secs(600), |now, u| {
        let p = u.progress(now);
        let key = (p.rate, p.state.clone(), p.acked / 200_000);
        if last.as_ref() != Some(&key) {
            println!(
                "{:>8.1}ms {:?} acked {} inflight {} window {} rate {:?} minrtt {:?} chunk {}",
                now.as_micros() as f64 / 1e3,
                p.state,
                p.acked,
                p.in_flight,
                p.window,
                p.rate,
                p.min_rtt,
                u.chunk_len()
            );
            last = Some(key);
        }
    });
    println!("{:?} {:?}", r.finished, r.max_queue);
}
