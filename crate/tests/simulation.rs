//! Deterministic two-party simulation: Tern's client session against a Rust SSP server over a
//! simulated link (delay, jitter, loss, duplication, reordering, MTU) with a simulated clock.
//!
//! Every failure prints its seed; `TERN_SIM_SEED=N` reruns one seed.

mod support;

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use support::{LinkConfig, Pair, ServerEyes};
use tern::session::{ClientSession, CloseReason, Event, HostLog, ReceiveStage, SessionConfig};
use tern::transport::{ACK_DELAY, Counters};
use tern::wire::{StateNum, UserEvent};

// Tests are drivers, not core: the seed to replay comes from the environment.
#[allow(clippy::disallowed_methods)]
fn seeds(default_count: u64) -> Vec<u64> {
    match std::env::var("TERN_SIM_SEED") {
        Ok(seed) => vec![seed.parse().expect("TERN_SIM_SEED is a number")],
        Err(_) => (1..=default_count).collect(),
    }
}

/// Types `total` random printable bytes in bursts at random times while the link misbehaves, then
/// checks that the server received exactly what was typed, in order, and both views converged.
///
/// Returns both ends' counters.
fn typing_converges(
    seed: u64,
    up: LinkConfig,
    down: LinkConfig,
    mtu: usize,
    total: usize,
) -> (Counters, Counters) {
    let mut pair = Pair::with_mtu(seed, up, down, mtu);
    let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(7919));
    let mut typed = Vec::new();
    while typed.len() < total {
        let burst: Vec<u8> =
            (0..rng.random_range(1..=40)).map(|_| rng.random_range(b' '..=b'~')).collect();
        pair.type_bytes(&burst);
        typed.extend_from_slice(&burst);
        pair.run_for(Duration::from_millis(rng.random_range(0..400)));
    }
    let converged = pair.run_until(Duration::from_secs(300), |p| p.converged());
    assert!(
        converged,
        "seed {seed}: did not converge; server got {} of {} bytes",
        pair.server_input.len(),
        typed.len()
    );
    assert!(pair.server_input == typed, "seed {seed}: server input differs from what was typed");
    assert_eq!(pair.client.server_state().bytes(), typed.as_slice(), "seed {seed}: echo differs");
    let counters = pair.client.counters().clone();
    assert_eq!(
        counters.apply_failures + counters.malformed + counters.auth_failures,
        0,
        "seed {seed}"
    );
    (counters, pair.server.counters().clone())
}

#[test]
fn lossy_reordering_duplicating_one_second_rtt_link_delivers_every_byte_once_in_order() {
    let link = LinkConfig {
        delay: Duration::from_millis(450),
        jitter: Duration::from_millis(100),
        loss: 0.30,
        duplicate: 0.10,
    };
    let mut lost_base = 0;
    for seed in seeds(40) {
        let (client, server) = typing_converges(seed, link.clone(), link.clone(), 1252, 600);
        assert_eq!(client.dropped_unknown_base, 0, "seed {seed}: {client:?}");
        assert_eq!(server.dropped_unknown_base, 0, "seed {seed}: {server:?}");
        lost_base += client.lost_base + server.lost_base;
    }
    // With 30 % loss a sender's optimistic diffs (from a state sent < RTO ago) sometimes name a
    // state that was lost; mosh does the same, and the retransmission repairs it.
    println!("instructions on a lost base over all seeds, both ends: {lost_base}");
}

#[test]
fn small_mtu_forces_fragments_and_still_converges() {
    let link = LinkConfig {
        delay: Duration::from_millis(40),
        jitter: Duration::from_millis(30),
        loss: 0.1,
        duplicate: 0.05,
    };
    for seed in seeds(10) {
        // 200-byte datagrams: the echo of a few hundred keys spans several fragments.
        typing_converges(seed, link.clone(), link.clone(), 200, 3000);
    }
}

#[test]
fn reordering_and_duplication_without_loss_drop_nothing_for_an_unknown_base() {
    // Jitter of twice the delay reorders freely; parked instructions wait for their base.
    let link = LinkConfig {
        delay: Duration::from_millis(50),
        jitter: Duration::from_millis(100),
        loss: 0.0,
        duplicate: 0.2,
    };
    let mut parked = 0;
    for seed in seeds(20) {
        let (client, server) = typing_converges(seed, link.clone(), link.clone(), 1252, 800);
        for counters in [&client, &server] {
            assert_eq!(
                counters.dropped_unknown_base + counters.lost_base,
                0,
                "seed {seed}: {counters:?}"
            );
        }
        parked += client.parked + server.parked;
    }
    assert!(parked > 0, "the link reordered nothing: the test proves nothing");
}

#[test]
fn clean_link_converges_quickly_with_nothing_dropped() {
    let mut pair = Pair::new(1, LinkConfig::delay(25), LinkConfig::delay(25));
    pair.type_bytes(b"echo hello\r");
    assert!(pair.run_until(Duration::from_secs(2), |p| p.converged()));
    assert_eq!(pair.server_input, b"echo hello\r");
    assert_eq!(pair.server_resizes, vec![(80, 24)]);
    let counters = pair.client.counters();
    assert_eq!(counters.dropped_unknown_base, 0);
    assert_eq!(counters.auth_failures + counters.malformed + counters.apply_failures, 0);
}

/// Regression (lag cause 2 of an earlier client): keys typed before an ack must accumulate in one
/// diff, not overwrite each other, and the ack must prune them from the queue.
#[test]
fn keys_typed_before_an_ack_accumulate_in_one_diff_and_acks_prune_the_queue() {
    // Server replies take 2 s: nothing is acked while we type.
    let mut pair = Pair::new(3, LinkConfig::delay(10), LinkConfig::delay(2000));
    for key in [b"a", b"b", b"c"] {
        pair.type_bytes(key);
        pair.run_for(Duration::from_millis(30));
    }
    let mut eyes = ServerEyes::new(&pair.key);
    let last = pair.log.iter().rev().find(|d| d.to_server).expect("client sent something");
    let instruction = eyes.instruction(last.at, &last.bytes).expect("one-fragment instruction");
    let events = tern::wire::decode_user_message(&instruction.diff).expect("valid diff");
    let keys: Vec<u8> = events
        .iter()
        .filter_map(|e| match e {
            UserEvent::Keys(k) => Some(k.clone()),
            UserEvent::Resize { .. } => None,
        })
        .flatten()
        .collect();
    assert_eq!(keys, b"abc", "the newest datagram carries every unacknowledged key");
    assert_eq!(instruction.old_num, StateNum(0), "diffed from the state the server acknowledged");
    assert_eq!(pair.client.unacked_input(), 3);

    assert!(pair.run_until(Duration::from_secs(10), |p| p.converged()));
    assert_eq!(pair.server_input, b"abc", "each key arrived exactly once");
    assert_eq!(pair.client.unacked_input(), 0, "acks pruned the queue");
}

/// Regression (lag cause 3): an ack must leave within the ack delay of a new server state, with no
/// other throttle.
#[test]
fn an_ack_leaves_within_the_ack_delay_of_a_new_server_state() {
    let mut pair = Pair::new(4, LinkConfig::delay(100), LinkConfig::delay(100));
    pair.run_for(Duration::from_secs(1));
    for round in 0..5 {
        pair.type_bytes(format!("k{round}").as_bytes());
        let changed_before = pair.client_events.len();
        assert!(pair.run_until(Duration::from_secs(2), |p| p.client_events.len() > changed_before));
        let arrived = pair.now;
        let newest = pair.client.server_state_num();
        let mut eyes = ServerEyes::new(&pair.key);
        let log_len = pair.log.len();
        pair.run_for(ACK_DELAY + Duration::from_millis(1));
        let acked = pair.log[log_len..]
            .iter()
            .filter(|d| d.to_server && d.at <= arrived + ACK_DELAY)
            .filter_map(|d| eyes.instruction(d.at, &d.bytes))
            .any(|i| i.ack_num >= newest);
        assert!(acked, "round {round}: no ack of state {newest:?} within {ACK_DELAY:?}");
    }
}

/// Tern never holds a typed key back for the frame interval (the stock client waits for it).
#[test]
fn a_typed_key_leaves_within_the_minimum_delay_even_at_500ms_rtt() {
    let mut pair = Pair::new(5, LinkConfig::delay(250), LinkConfig::delay(250));
    pair.run_for(Duration::from_secs(3));
    assert!(pair.client.send_interval() >= Duration::from_millis(200), "SRTT learned");
    for key in [b"x", b"y", b"z"] {
        let log_len = pair.log.len();
        let typed_at = pair.now;
        pair.type_bytes(key);
        pair.run_for(Duration::from_millis(5));
        let first = pair.log[log_len..].iter().find(|d| d.to_server).expect("key sent");
        assert!(
            first.at - typed_at <= Duration::from_millis(2),
            "key waited {:?}",
            first.at - typed_at
        );
        pair.run_for(Duration::from_millis(37));
    }
}

#[test]
fn server_shutdown_is_acknowledged_and_closes_the_session() {
    let mut pair = Pair::new(6, LinkConfig::delay(20), LinkConfig::delay(20));
    pair.type_bytes(b"exit\r");
    assert!(pair.run_until(Duration::from_secs(2), |p| p.converged()));
    pair.server.start_shutdown(pair.now);
    assert!(pair.run_until(Duration::from_secs(5), |p| p.client.is_closed()));
    assert_eq!(pair.client_events.last(), Some(&Event::Closed(CloseReason::ServerShutdown)));
    assert!(
        pair.run_until(Duration::from_secs(5), |p| p.server.sender().shutdown_acknowledged()),
        "the server saw its shutdown acknowledged"
    );
}

#[test]
fn client_shutdown_completes_when_the_server_acknowledges() {
    let mut pair = Pair::new(7, LinkConfig::delay(20), LinkConfig::delay(20));
    pair.run_for(Duration::from_millis(500));
    pair.client.shutdown(pair.now);
    assert!(pair.run_until(Duration::from_secs(5), |p| p.client.is_closed()));
    assert_eq!(pair.client_events.last(), Some(&Event::Closed(CloseReason::ClientShutdown)));
}

#[test]
fn client_shutdown_gives_up_when_the_server_is_gone() {
    let mut pair =
        Pair::new(8, LinkConfig::delay(20), LinkConfig { loss: 1.0, ..LinkConfig::delay(20) });
    pair.client.shutdown(pair.now);
    assert!(pair.run_until(Duration::from_secs(30), |p| p.client.is_closed()));
    assert_eq!(pair.client_events.last(), Some(&Event::Closed(CloseReason::ShutdownTimedOut)));
}

#[test]
fn a_huge_paste_is_held_in_order_and_arrives_whole() {
    let mut pair = Pair::new(9, LinkConfig::delay(30), LinkConfig::delay(30));
    let paste: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    pair.type_bytes(&paste);
    pair.type_bytes(b"\rDONE");
    assert!(pair.client.unacked_input() == paste.len() + 5);
    assert!(pair.run_until(Duration::from_secs(60), |p| p.converged()));
    let mut expected = paste.clone();
    expected.extend_from_slice(b"\rDONE");
    assert!(pair.server_input == expected, "paste arrived whole and in order");
}

#[test]
fn resizes_reach_the_server_in_order() {
    let mut pair = Pair::new(10, LinkConfig::delay(20), LinkConfig::delay(20));
    pair.resize(100, 30);
    pair.type_bytes(b"x");
    pair.resize(120, 40);
    assert!(pair.run_until(Duration::from_secs(2), |p| p.converged()));
    assert_eq!(pair.server_resizes, vec![(80, 24), (100, 30), (120, 40)]);
    assert_eq!(pair.client.server_state().size(), (120, 40));
}

/// With nothing to say, the client still sends a fresh state number at least every 3 s, so the
/// server's idle timers and "last contact" stay alive (MOSH-PROTOCOL.md 6.4).
#[test]
fn an_idle_client_sends_a_heartbeat_with_a_fresh_state_number_every_three_seconds() {
    let mut pair = Pair::new(11, LinkConfig::delay(20), LinkConfig::delay(20));
    pair.run_for(Duration::from_secs(2));
    let start = pair.log.len();
    let started = pair.now;
    pair.run_for(Duration::from_secs(20));
    let mut eyes = ServerEyes::new(&pair.key);
    let sent: Vec<_> = pair.log[start..]
        .iter()
        .filter(|d| d.to_server)
        .filter_map(|d| eyes.instruction(d.at, &d.bytes).map(|i| (d.at, i.new_num)))
        .collect();
    let mut last = (started, StateNum(0));
    for (at, num) in sent {
        assert!(num > last.1, "every heartbeat carries a new state number");
        assert!(at - last.0 <= Duration::from_millis(3001), "gap of {:?}", at - last.0);
        last = (at, num);
    }
    assert!(pair.now - last.0 <= Duration::from_millis(3001));
}

/// A driver whose input already comes in bursts (the browser) sets no gathering delay: the key's
/// datagram is ready as soon as `handle_input` returns, without any timer.
#[test]
fn with_no_gathering_delay_a_key_leaves_inside_handle_input() {
    use tern::session::{ClientSession, HostLog, SessionConfig};
    use tern::time::Instant;
    let mut config = SessionConfig::new(support::test_key(), 80, 24);
    config.min_delay = Duration::ZERO;
    let start = Instant::from_millis(5);
    let mut client: ClientSession<HostLog> = ClientSession::new(config, start);
    assert!(client.poll_transmit().is_some(), "the first Resize leaves at once");
    while client.poll_transmit().is_some() {}
    let later = start + Duration::from_millis(300);
    client.handle_timeout(later);
    while client.poll_transmit().is_some() {}
    client.handle_input(later, b"k");
    assert!(client.poll_transmit().is_some(), "the key left within handle_input");
}

/// The page times each step of receiving a datagram (its frame cost); the steps come in order,
/// and a datagram that fails authentication stops before any.
#[test]
fn receiving_a_datagram_reports_its_steps_in_order() {
    let mut pair = Pair::new(9, LinkConfig::delay(5), LinkConfig::delay(5));
    pair.type_bytes(b"echo steps\r");
    assert!(pair.run_until(Duration::from_secs(2), |p| p.converged()));
    let from_server = pair.log.iter().find(|d| !d.to_server).expect("the server sent something");
    let mut config = SessionConfig::new(pair.key.clone(), 80, 24);
    config.seed = 99;
    let mut fresh = ClientSession::<HostLog>::new(config, pair.now);
    let mut steps = Vec::new();
    fresh.handle_datagram_staged(pair.now, &from_server.bytes, &mut |s| steps.push(s));
    assert_eq!(steps, [ReceiveStage::Opened, ReceiveStage::Assembled, ReceiveStage::Applied]);
    let mut forged = from_server.bytes.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    steps.clear();
    fresh.handle_datagram_staged(pair.now, &forged, &mut |s| steps.push(s));
    assert!(steps.is_empty(), "a forged datagram got as far as {steps:?}");
}

/// Floods the server's screen (a line every 5 ms) for `duration`.
fn flood(pair: &mut Pair, duration: Duration) {
    let end = pair.now + duration;
    while pair.now < end {
        let now = pair.now;
        pair.server.update_local(now, |screen| screen.push_bytes(b"12345\n"));
        pair.run_for(Duration::from_millis(5));
    }
}

/// Server datagrams put on the link since `from`, per second.
fn server_datagrams_per_second(pair: &Pair, from: tern::time::Instant) -> f64 {
    let sent = pair.log.iter().filter(|d| !d.to_server && d.at >= from).count();
    sent as f64 / (pair.now - from).as_secs_f64()
}

/// The relay holds a hidden page's datagrams (`HIDDEN_RELAY_HOLD`). Echoing the newest of each batch
/// (mosh's rule) hides the hold: the server keeps sending a flood ~50 states a second, which the
/// page must decrypt and apply. Echoing the oldest shows the server what the hold costs: it paces
/// itself to ~4 a second, every state still arrives, and once the hold ends its pace comes back.
#[test]
fn echoing_the_oldest_of_held_batches_paces_a_flood_to_the_hold_and_the_pace_comes_back() {
    use tern::wire::TimestampEcho;
    let hold = tern::session::HIDDEN_RELAY_HOLD;
    let mut rates = Vec::new();
    for echo in [TimestampEcho::Newest, TimestampEcho::Oldest] {
        let mut pair = Pair::new(21, LinkConfig::delay(5), LinkConfig::delay(5));
        flood(&mut pair, Duration::from_secs(1));
        assert!(pair.server.rtt().send_interval() <= Duration::from_millis(25), "{echo:?}");

        pair.down_hold = Some((hold, echo));
        flood(&mut pair, Duration::from_secs(5));
        let from = pair.now;
        flood(&mut pair, Duration::from_secs(5));
        let rate = server_datagrams_per_second(&pair, from);
        let interval = pair.server.rtt().send_interval();
        println!(
            "{echo:?}: {rate:.1} server datagrams/s while held, send interval {interval:?}, \
             {} batches of {} datagrams",
            pair.held_batches, pair.held_datagrams
        );
        rates.push(rate);
        match echo {
            TimestampEcho::Newest => assert!(rate > 30.0, "the hold stays hidden: {rate:.1}/s"),
            TimestampEcho::Oldest => {
                assert!(rate < 6.0, "the server paces itself to the hold: {rate:.1}/s");
                assert!(interval >= Duration::from_millis(200), "{interval:?}");
            }
        }

        // Shown again: no hold, and the pace comes back within a few seconds.
        pair.down_hold = None;
        let shown = pair.now;
        let mut back = None;
        while back.is_none() && pair.now < shown + Duration::from_secs(10) {
            flood(&mut pair, Duration::from_millis(50));
            if pair.server.rtt().send_interval() <= Duration::from_millis(25) {
                back = Some(pair.now - shown);
            }
        }
        let back = back.expect("the server's pace came back within 10 s");
        println!("{echo:?}: full pace again {back:?} after the hold ended");
        assert!(back < Duration::from_secs(4), "{echo:?}: {back:?} to full pace");
        let caught_up = |p: &Pair| p.client.server_state() == p.server.local();
        assert!(pair.run_until(Duration::from_secs(5), caught_up), "{echo:?}: every state arrived");
    }
    assert!(rates[1] * 5.0 < rates[0], "held batches with the oldest echo: {rates:?}");
}
