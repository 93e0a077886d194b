//! The upload pacer over a simulated bottleneck with clumped acks: rate estimate, in-flight cap,
//! completion time and the queue a keystroke would wait behind.
//!
//! Run with `--nocapture` to see the table.

mod upload_support;

use std::time::Duration;

use tern::time::Instant;
use tern::transfer::{LinkMemory, UploadState};
use tern::transfer::{MAX_CHUNK, SHORT_CHUNK_LINK_TIME};
use upload_support::{Clump, Link, RelayClock, Run, mean, run, upload};

const SIZE: u64 = 13_400_000;

fn clumps() -> [Clump; 4] {
    [
        Clump::None,
        Clump::Batched { every: Duration::from_millis(50) },
        Clump::Batched { every: Duration::from_millis(200) },
        Clump::Irregular { max: Duration::from_millis(150) },
    ]
}

/// When the steady-state figures start. The sender learns something once per round trip or per ack
/// clump, whichever is longer, and doubles its rate per lesson from a 64 KiB start: twelve lessons
/// cover 64 KiB per round trip up to 50 Mbit/s at 300 ms with room to spare; slow links need a few
/// chunk times more.
fn warmup(link: &Link) -> Duration {
    12 * link.rtt().max(link.clump.max_extra()) + Duration::from_millis(500)
}

/// A long transfer (at least 12 s of link time), so the start-up is a small part of the total.
fn size(link: &Link) -> u64 {
    SIZE.max(link.rate * 12)
}

/// The longest a keystroke may wait behind the picture once warmed up: one and a half round trips,
/// plus the chunks the window is quantised in (the chunk on the link, the floor of two, and the
/// one whose serialization the minimum RTT includes), plus the ack clumping the window has to
/// cover so the link does not idle between clumps (when acks happen to come back early, those
/// bytes sit in the queue instead of being held at the relay).
fn queue_bound(link: &Link) -> Duration {
    let chunk = (link.rate / 50).clamp(4096, MAX_CHUNK);
    link.rtt().mul_f64(1.5) + 3 * link.serialization(chunk) + link.clump.max_extra()
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
                let bound = queue_bound(&link);
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

/// The benchmark figure for docs/UPLOAD.md: 13.4 MB over 9 Mbit/s, 80 ms RTT, a 1 s deep queue.
#[test]
fn benchmark_13_4_mb_over_9_mbit_80_ms() {
    println!("13.4 MB, 9 Mbit/s, 80 ms RTT, 1 s bottleneck queue:");
    for clump in [
        Clump::None,
        Clump::Batched { every: Duration::from_millis(100) },
        Clump::Irregular { max: Duration::from_millis(150) },
    ] {
        let link = Link { queue: Duration::from_secs(1), ..Link::mbit(9.0, 80, clump) };
        let r = simulate(link, SIZE);
        let ideal = link.serialization(SIZE);
        let took = r.finished.expect("finishes");
        let ratio = took.as_secs_f64() / ideal.as_secs_f64();
        println!(
            "  {clump:?}: {:.2} s / {:.2} s = {ratio:.3}; keystroke wait max {:.0} ms, \
             after warm-up {:.0} ms; {} chunks, {} acks",
            took.as_secs_f64(),
            ideal.as_secs_f64(),
            r.max_queue.as_secs_f64() * 1e3,
            r.max_queue_warm.as_secs_f64() * 1e3,
            r.chunks,
            r.acks,
        );
        assert!(ratio < 1.1, "{ratio}");
        assert!(r.max_queue_warm <= queue_bound(&link));
        // Half a second is what the old tool kept queued; never that much, even at the start.
        assert!(r.max_queue < Duration::from_millis(500), "{:?}", r.max_queue);
        assert_eq!(r.bytes_sent, SIZE, "every byte sent exactly once");
    }
}

/// Steady state on the benchmark's link without ack clumping: paced at the estimate, the sender
/// keeps the bottleneck queue short (about the 5 ms target, plus the chunk just sent and the
/// brief probes), not the round trip or so the in-flight cap alone would allow; the cap is rarely
/// what holds the sender back.
#[test]
fn steady_state_queue_stays_short_at_9_mbit_80_ms() {
    let link = Link { queue: Duration::from_secs(1), ..Link::mbit(9.0, 80, Clump::None) };
    let warm = warmup(&link);
    let (mut fill_sum, mut fills) = (0.0, 0u32);
    let r = run(link, upload(SIZE, 0), warm, Duration::from_secs(3600), |now, u| {
        let p = u.progress(now);
        if now.as_micros() >= warm.as_micros() as u64 && p.state == UploadState::Sending {
            fill_sum += p.in_flight as f64 / p.window as f64;
            fills += 1;
        }
    });
    let ideal = link.serialization(SIZE);
    let ratio = r.finished.expect("finishes").as_secs_f64() / ideal.as_secs_f64();
    // The chunk a keystroke lands behind: ~10 ms of the link (`CHUNK_LINK_TIME`).
    let chunk = link.serialization((link.rate / 100).clamp(4096, MAX_CHUNK));
    let bound = Duration::from_millis(20) + chunk;
    let mean_fill = fill_sum / f64::from(fills.max(1));
    println!(
        "steady state: keystroke wait max {:.1} ms (bound {:.1} ms), time {ratio:.3}x, \
         mean in flight / window {mean_fill:.2}",
        r.max_queue_warm.as_secs_f64() * 1e3,
        bound.as_secs_f64() * 1e3
    );
    assert!(r.max_queue_warm <= bound, "{:?} > {bound:?}", r.max_queue_warm);
    assert!(ratio < 1.02, "{ratio}");
    assert!(mean_fill < 0.75, "the in-flight cap binds: mean fill {mean_fill:.2}");
}

#[test]
#[ignore]
// Tests are drivers, not core: the link to trace comes from the environment.
#[allow(clippy::disallowed_methods)]
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
    let mut bucket = 0;
    let mut max = Duration::ZERO;
    for &(t, q) in &r.queue_series {
        let b = t.as_millis() / 500;
        if b != bucket {
            println!("queue {:>6}ms: max {:?}", bucket * 500, max);
            bucket = b;
            max = Duration::ZERO;
        }
        max = max.max(q);
    }
}

/// A receiver that reads and stamps in bursts (the page reading a `tern send` download): its rate
/// samples read high now and then, and the estimate settles above the link (the max filter keeps
/// them). The queue it builds must still go: the pacer's bias follows the standing queue down.
/// The benchmark's target is echo during a download at most 20 ms above idle: the median wait of
/// a keystroke behind the download's data.
#[test]
fn a_receiver_reading_in_bursts_keeps_the_queue_short_at_9_mbit_80_ms() {
    for every in [20u64, 40, 80] {
        let link = Link {
            queue: Duration::from_secs(1),
            relay_clock: RelayClock::Bursty { every: Duration::from_millis(every) },
            ..Link::mbit(9.0, 80, Clump::None)
        };
        let warm = warmup(&link);
        // A download's pacer: the relay's, with short chunks.
        let pacer = upload(SIZE, 0).chunk_time(SHORT_CHUNK_LINK_TIME);
        let r = run(link, pacer, warm, Duration::from_secs(3600), |_, _| {});
        let ratio =
            r.finished.expect("finishes").as_secs_f64() / link.serialization(SIZE).as_secs_f64();
        let mut waits: Vec<f64> = r
            .queue_series
            .iter()
            .filter(|(t, _)| *t >= warm)
            .map(|(_, w)| w.as_secs_f64() * 1e3)
            .collect();
        waits.sort_by(f64::total_cmp);
        let median = waits[waits.len() / 2];
        let est = mean(&r.rate_samples_warm) / link.rate as f64;
        println!(
            "bursts every {every} ms: keystroke wait median {median:.1} ms, max {:.1} ms, time \
             {ratio:.3}x, estimate {est:.3}x the link",
            r.max_queue_warm.as_secs_f64() * 1e3
        );
        // Chromium's reads of a download come a median 1.3 ms apart, p99 42 ms (the download
        // benchmark's DOWNLOAD_READS log): bursts of 20 ms are the model, held to the pacer's
        // targets. Longer steady bursts are shown, with a looser bound on the time: with the
        // relay's real ack coalescing (AckPolicy) the pacer lost up to 13 % at 40 and 80 ms
        // with 10 ms chunks, 3.1 and 6.5 % with the download's 5 ms ones (docs/UPLOAD.md,
        // "Left open", has the older sweep).
        if every <= 20 {
            assert!(ratio < 1.10, "bursts every {every} ms: {ratio}");
            assert!(median <= 20.0, "bursts every {every} ms: median wait {median:.1} ms");
        } else {
            assert!(ratio < 1.15, "bursts every {every} ms: {ratio}");
        }
    }
}

/// The start leaves a queue behind (probing at twice the estimate, then a drain phase that ends
/// on in-flight, which counts the ack delay): the cruise controller must drain what is left
/// within about a second, not keep keystrokes 20-40 ms late for a fifth of a 12 s upload (the
/// paste benchmark before the stronger drain step). The median keystroke wait over 1-3 s against
/// 3-10 s: 14.9/14.9 ms with immediate acks, 17.8/15.0 with acks batched every 50 ms (25.6/15.0
/// before).
#[test]
fn the_queue_the_start_leaves_drains_within_a_second() {
    for (name, link) in [
        ("immediate", Link::mbit(9.0, 80, Clump::None)),
        ("batched 50 ms", Link::mbit(9.0, 80, Clump::Batched { every: Duration::from_millis(50) })),
        (
            "bursty 20 ms",
            Link {
                relay_clock: RelayClock::Bursty { every: Duration::from_millis(20) },
                ..Link::mbit(9.0, 80, Clump::None)
            },
        ),
    ] {
        let link = Link { queue: Duration::from_secs(1), ..link };
        let r = run(link, upload(SIZE, 0), warmup(&link), Duration::from_secs(3600), |_, _| {});
        let median_ms = |from: u64, to: u64| {
            let mut w: Vec<f64> = r
                .queue_series
                .iter()
                .filter(|(t, _)| (from..to).contains(&(t.as_millis() as u64)))
                .map(|(_, w)| w.as_secs_f64() * 1e3)
                .collect();
            w.sort_by(f64::total_cmp);
            w[w.len() / 2]
        };
        let (early, late) = (median_ms(1000, 3000), median_ms(3000, 10_000));
        println!("{name}: median keystroke wait 1-3 s {early:.1} ms, 3-10 s {late:.1} ms");
        // A receiver stamping in bursts reads its queue a burst high; its start is shown, not
        // held to this (55.9 ms at 1-3 s, 80.6 before the stronger step).
        if !matches!(link.relay_clock, RelayClock::Bursty { .. }) {
            assert!(early <= late + 5.0, "{name}: {early:.1} ms at 1-3 s, {late:.1} ms later");
        }
    }
}

/// Short chunks (the download's) shorten what a keystroke waits behind when a chunk enters the
/// bottleneck at once, at the same completion time: the median wait after warm-up, 10 ms chunks
/// against 5 ms ones.
#[test]
fn short_chunks_shorten_the_keystroke_wait() {
    let link = Link { queue: Duration::from_secs(1), ..Link::mbit(9.0, 80, Clump::None) };
    let warm = warmup(&link);
    let median_wait = |u| {
        let r = run(link, u, warm, Duration::from_secs(3600), |_, _| {});
        let mut w: Vec<f64> = r
            .queue_series
            .iter()
            .filter(|(t, _)| *t >= warm)
            .map(|(_, w)| w.as_secs_f64() * 1e3)
            .collect();
        w.sort_by(f64::total_cmp);
        let ratio =
            r.finished.expect("finishes").as_secs_f64() / link.serialization(SIZE).as_secs_f64();
        (w[w.len() / 2], ratio)
    };
    let (long, long_ratio) = median_wait(upload(SIZE, 0));
    let (short, short_ratio) = median_wait(upload(SIZE, 0).chunk_time(SHORT_CHUNK_LINK_TIME));
    println!(
        "median keystroke wait: 10 ms chunks {long:.1} ms ({long_ratio:.3}x), 5 ms chunks \
         {short:.1} ms ({short_ratio:.3}x)"
    );
    assert!(short + 3.0 <= long, "{short:.1} ms vs {long:.1} ms");
    assert!(short_ratio <= long_ratio + 0.01, "{short_ratio} vs {long_ratio}");
}

/// A shorter standing-queue target (`Upload::queue_target`) shortens the keystroke wait by
/// about the difference at the same time, with and without ack clumps: the median wait after
/// warm-up and the time, 5 ms against 2 ms (the page's pastes use 2 ms, `PASTE_QUEUE_TARGET`).
#[test]
fn a_shorter_queue_target_shortens_the_keystroke_wait_by_the_difference() {
    for clump in [
        Clump::None,
        Clump::Batched { every: Duration::from_millis(50) },
        Clump::Batched { every: Duration::from_millis(100) },
        Clump::Irregular { max: Duration::from_millis(150) },
    ] {
        let link = Link { queue: Duration::from_secs(1), ..Link::mbit(9.0, 80, clump) };
        let warm = warmup(&link);
        let median_wait = |u| {
            let r = run(link, u, warm, Duration::from_secs(3600), |_, _| {});
            let mut w: Vec<f64> = r
                .queue_series
                .iter()
                .filter(|(t, _)| *t >= warm)
                .map(|(_, w)| w.as_secs_f64() * 1e3)
                .collect();
            w.sort_by(f64::total_cmp);
            let took = r.finished.expect("finishes").as_secs_f64();
            (w[w.len() / 2], took / link.serialization(SIZE).as_secs_f64())
        };
        let (five, five_ratio) = median_wait(upload(SIZE, 0));
        let (two, two_ratio) = median_wait(upload(SIZE, 0).queue_target(Duration::from_millis(2)));
        println!(
            "{clump:?}: median keystroke wait: 5 ms target {five:.1} ms ({five_ratio:.3}x), \
             2 ms target {two:.1} ms ({two_ratio:.3}x)"
        );
        assert!(two + 1.5 <= five, "{clump:?}: {two:.1} ms vs {five:.1} ms");
        assert!(two_ratio <= five_ratio + 0.01, "{clump:?}: {two_ratio} vs {five_ratio}");
    }
}

/// A screenshot-sized transfer (a paste, a `tern show` picture) is mostly start-up, and before
/// its first estimate the pacer has only its window: sent in one burst, 64 KiB sit in the
/// bottleneck's queue at once (58 ms at 9 Mbit/s) and every keystroke behind them waits. With the
/// link's round trip as a hint the window is spread over it: the same time, keystrokes waiting a
/// few ms (200 KB: median 31.9 → 4.0 ms with immediate acks, 36.4 → 10.9 batched every 50 ms,
/// 29.7 → 9.6 from a receiver stamping in bursts). From about 1 MB the queue probing builds
/// after the first estimate (twice the estimate for three round trips) is most of it, hint or
/// not: median 60 ms at 1 MB; docs/UPLOAD.md "Left open".
#[test]
fn a_round_trip_hint_spreads_the_first_window() {
    for size in [200_000u64, 1_000_000, 3_000_000] {
        for (name, link) in [
            ("immediate", Link::mbit(9.0, 80, Clump::None)),
            (
                "batched 50",
                Link::mbit(9.0, 80, Clump::Batched { every: Duration::from_millis(50) }),
            ),
            (
                "bursty 20",
                Link {
                    relay_clock: RelayClock::Bursty { every: Duration::from_millis(20) },
                    ..Link::mbit(9.0, 80, Clump::None)
                },
            ),
        ] {
            let measure = |pacer| {
                let r = run(link, pacer, Duration::ZERO, Duration::from_secs(600), |_, _| {});
                let ratio = r.finished.expect("finishes").as_secs_f64()
                    / link.serialization(size).as_secs_f64();
                let mut w: Vec<f64> =
                    r.queue_series.iter().map(|(_, w)| w.as_secs_f64() * 1e3).collect();
                w.sort_by(f64::total_cmp);
                (ratio, w[w.len() / 2], w[w.len() - 1])
            };
            let (ratio, median, max) = measure(upload(size, 0));
            let (h_ratio, h_median, h_max) = measure(upload(size, 0).rtt_hint(link.rtt()));
            println!(
                "{size:>8} B {name:>10}: time {ratio:.3}x → {h_ratio:.3}x with the hint, keystroke \
                 wait median {median:.1} → {h_median:.1} ms, max {max:.1} → {h_max:.1} ms"
            );
            assert!(h_ratio <= ratio + 0.01, "{size} {name}: {ratio} → {h_ratio}");
            assert!(h_median <= median + 5.0, "{size} {name}: median {median} → {h_median}");
            if size <= 200_000 {
                // All start-up: the burst was the queue.
                assert!(h_median + 15.0 <= median, "{size} {name}: median {median} → {h_median}");
                assert!(h_max + 20.0 <= max, "{size} {name}: max {max} → {h_max}");
            }
        }
    }
}

/// One transfer of a series on a link: time / ideal, keystroke wait median and p95 (ms), and
/// the wait median from `settle` on.
struct SeriesRun {
    ratio: f64,
    median: f64,
    p95: f64,
    late_median: f64,
    seeded: bool,
    /// A seeded transfer went back to probing (it found a faster link).
    reprobed: bool,
}

/// Runs `sizes.len()` transfers one after another, `GAP` apart, each on its link, sharing one
/// [`LinkMemory`] as the page or the relay does; `pacer` makes each fresh pacer.
fn series(
    links: &[Link],
    size: u64,
    pacer: impl Fn(u64) -> tern::transfer::Upload,
    settle: Duration,
) -> Vec<SeriesRun> {
    const GAP: Duration = Duration::from_secs(1);
    let mut memory = LinkMemory::default();
    let mut clock = Instant::ZERO;
    let mut out = Vec::new();
    for link in links {
        let seed = memory.begin(clock);
        let u = match seed {
            Some(e) => pacer(size).remembered(e),
            None => pacer(size),
        };
        let (mut learned, mut reprobed) = (None, false);
        let r = run(*link, u, Duration::ZERO, Duration::from_secs(600), |_, u| {
            learned = u.link_estimate();
            reprobed |= seed.is_some() && u.state() == UploadState::Probing;
        });
        let took = r.finished.expect("finishes");
        clock = clock + took;
        memory.end(clock, learned);
        clock = clock + GAP;
        let mut w: Vec<f64> = r.queue_series.iter().map(|(_, w)| w.as_secs_f64() * 1e3).collect();
        let mut late: Vec<f64> = r
            .queue_series
            .iter()
            .filter(|(t, _)| *t >= settle)
            .map(|(_, w)| w.as_secs_f64() * 1e3)
            .collect();
        w.sort_by(f64::total_cmp);
        late.sort_by(f64::total_cmp);
        out.push(SeriesRun {
            ratio: took.as_secs_f64() / link.serialization(size).as_secs_f64(),
            median: w[w.len() / 2],
            p95: w[w.len() * 95 / 100],
            late_median: late.get(late.len() / 2).copied().unwrap_or(0.0),
            seeded: seed.is_some(),
            reprobed,
        });
    }
    out
}

fn print_series(name: &str, runs: &[SeriesRun]) {
    for (i, r) in runs.iter().enumerate() {
        println!(
            "{name} #{}{}: time {:.3}x, keystroke wait median {:.1} ms, p95 {:.1} ms, from 2 s \
             {:.1} ms",
            i + 1,
            match (r.seeded, r.reprobed) {
                (true, true) => " (seeded, probed again)",
                (true, false) => " (seeded)",
                _ => "",
            },
            r.ratio,
            r.median,
            r.p95,
            r.late_median
        );
    }
}

/// Makes a fresh pacer for a transfer of the given size.
type Pacer = fn(u64) -> tern::transfer::Upload;

/// A paste's pacer (the page's, with the link's round trip as a hint) and a download's (the
/// relay's, with short chunks).
fn paste_pacer(size: u64) -> tern::transfer::Upload {
    upload(size, 0).rtt_hint(Duration::from_millis(80))
}

fn download_pacer(size: u64) -> tern::transfer::Upload {
    upload(size, 0).chunk_time(SHORT_CHUNK_LINK_TIME).rtt_hint(Duration::from_millis(80))
}

/// Pictures and pastes come in series on one link. The first 1 MB transfer probes from the small
/// window and queues about a round trip at twice the estimate; the next ones start from the rate
/// the link's memory kept (`LinkMemory`, `Upload::remembered`) and cruise: a much shorter
/// keystroke wait at the same time. Without the seeding every transfer is the first.
#[test]
fn a_series_of_1_mb_transfers_starts_from_the_remembered_rate() {
    let mut failures = Vec::new();
    for (name, link) in [
        ("immediate", Link::mbit(9.0, 80, Clump::None)),
        ("batched 50 ms", Link::mbit(9.0, 80, Clump::Batched { every: Duration::from_millis(50) })),
    ] {
        let pacers: [(&str, Pacer); 2] = [("paste", paste_pacer), ("download", download_pacer)];
        for (kind, pacer) in pacers {
            let case = format!("{kind}, {name}");
            let runs = series(&[link; 4], 1_000_000, pacer, Duration::from_secs(2));
            print_series(&case, &runs);
            let first = &runs[0];
            for (i, r) in runs.iter().enumerate().skip(1) {
                if !r.seeded || r.median > first.median / 2.0 || r.median > 20.0 {
                    failures.push(format!(
                        "{case} #{}: median wait {:.1} ms (first {:.1} ms)",
                        i + 1,
                        r.median,
                        first.median
                    ));
                }
                // Seeded 1/16 under the remembered rate: at most a little slower than probing.
                if r.p95 > first.p95 || r.ratio > first.ratio + 0.02 {
                    failures.push(format!(
                        "{case} #{}: p95 {:.1} ms, time {:.3}x (first {:.1} ms, {:.3}x)",
                        i + 1,
                        r.p95,
                        r.ratio,
                        first.p95,
                        first.ratio
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A download read by a page that stamps its reads in bursts (20, 40, 80 ms): its estimate reads
/// high (the max filter keeps the over-reads), and a seed remembered from it would queue; the
/// seed is paced a little under until the link confirms it, and the queue controller does the
/// rest. The seeded transfers keep a shorter wait than the first and its time.
#[test]
fn a_series_read_in_bursts_keeps_its_bounds() {
    let mut failures = Vec::new();
    for every in [20u64, 40, 80] {
        let link = Link {
            relay_clock: RelayClock::Bursty { every: Duration::from_millis(every) },
            ..Link::mbit(9.0, 80, Clump::None)
        };
        let case = format!("bursts every {every} ms");
        let runs = series(&[link; 4], 1_000_000, download_pacer, Duration::from_secs(2));
        print_series(&case, &runs);
        let first = &runs[0];
        // The long transfer's bounds for these receivers (see above): 1.10 at 20 ms, 1.15 beyond;
        // a 1 MB one spends a fifth of its time starting, so no more than the first took.
        let bound: f64 = if every <= 20 { 1.10 } else { 1.15 };
        for (i, r) in runs.iter().enumerate().skip(1) {
            if !r.seeded || r.median > 0.75 * first.median {
                failures.push(format!(
                    "{case} #{}: median wait {:.1} ms (first {:.1} ms)",
                    i + 1,
                    r.median,
                    first.median
                ));
            }
            if r.ratio > bound.max(first.ratio) + 0.001 {
                failures.push(format!("{case} #{}: time {:.3}x", i + 1, r.ratio));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The link got 3x slower between two transfers (9 → 3 Mbit/s): the seeded one sends too fast
/// until its seed lapses from the max filter (a few round trips) and queues up to its window;
/// the estimate then follows the samples and the queue is gone within two seconds. It still ends
/// in about the link's time, and the next one starts from the slower rate it learned.
#[test]
fn a_link_that_got_slower_is_believed_within_a_couple_of_seconds() {
    let nine = Link::mbit(9.0, 80, Clump::None);
    let three = Link::mbit(3.0, 80, Clump::None);
    let runs = series(&[nine, three, three], 1_000_000, download_pacer, Duration::from_secs(2));
    print_series("9 → 3 Mbit/s", &runs);
    let alone = series(&[three], 1_000_000, download_pacer, Duration::from_secs(2));
    print_series("3 Mbit/s alone", &alone);
    let (slower, next) = (&runs[1], &runs[2]);
    assert!(slower.seeded && next.seeded);
    assert!(slower.ratio <= 1.10, "the seeded transfer took {:.3}x", slower.ratio);
    assert!(slower.late_median <= 20.0, "from 2 s on: median wait {:.1} ms", slower.late_median);
    // At 3 Mbit/s a megabyte is 2.7 s, mostly cruising either way: the start shows in the p95.
    assert!(
        next.median <= 20.0 && next.p95 <= alone[0].p95 / 2.0,
        "seeded with the slower rate: median wait {:.1} ms, p95 {:.1} ms (unseeded {:.1} ms)",
        next.median,
        next.p95,
        alone[0].p95
    );
    // Seeded 1/16 under the remembered rate: at most a little slower than probing.
    assert!(next.ratio <= alone[0].ratio + 0.02, "{:.3}x", next.ratio);
}

/// The link got 3x faster (9 → 27 Mbit/s): the seeded transfer's cruise lifts the estimate past
/// the remembered rate by an eighth, then it probes as a fresh one would and finds the link;
/// the next starts from there. 3 MB transfers: a 1 MB one at 27 Mbit/s is four round trips.
#[test]
fn a_link_that_got_faster_is_found() {
    let nine = Link::mbit(9.0, 80, Clump::None);
    let fast = Link::mbit(27.0, 80, Clump::None);
    let runs = series(&[nine, fast, fast], 3_000_000, download_pacer, Duration::from_secs(2));
    print_series("9 → 27 Mbit/s, 3 MB", &runs);
    let alone = series(&[fast], 3_000_000, download_pacer, Duration::from_secs(2));
    print_series("27 Mbit/s alone, 3 MB", &alone);
    print_series(
        "9 → 27 Mbit/s, 1 MB",
        &series(&[nine, fast, fast], 1_000_000, download_pacer, Duration::from_secs(2)),
    );
    let (faster, next) = (&runs[1], &runs[2]);
    assert!(faster.seeded && faster.reprobed, "the seeded transfer never probed the faster link");
    assert!(faster.ratio <= 2.0, "{:.3}x", faster.ratio);
    assert!(next.seeded && !next.reprobed, "the next one did not start from the faster rate");
    assert!(next.ratio <= 1.15, "{:.3}x", next.ratio);
    assert!(next.median <= 20.0 && next.median <= alone[0].median, "{:.1} ms", next.median);
}
