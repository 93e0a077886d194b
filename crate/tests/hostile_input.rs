//! Peer data never panics the core: random, mutated, truncated and wrongly keyed datagrams, and
//! authentic datagrams carrying malformed or malicious content, are dropped and counted.

mod support;

use proptest::prelude::*;
use support::test_key;
use tern::session::{ClientSession, HostLog, SessionConfig};
use tern::time::Instant;
use tern::wire::{
    Direction, Fragmenter, HostEvent, Instruction, Key, PacketLayer, StateNum, encode_host_message,
};

fn session() -> ClientSession<HostLog> {
    ClientSession::new(SessionConfig::new(test_key(), 80, 24), Instant::from_millis(10))
}

/// Seals `payload` (fragment bytes) as the server would.
fn server_datagram(server: &mut PacketLayer, payload: &[u8]) -> Vec<u8> {
    server.seal(Instant::from_millis(20), payload).expect("sequence numbers left")
}

fn server_instruction(server: &mut PacketLayer, instruction: &Instruction) -> Vec<Vec<u8>> {
    let mut fragmenter = Fragmenter::new(1252);
    fragmenter
        .fragment(instruction)
        .expect("fits")
        .iter()
        .map(|fragment| server_datagram(server, fragment))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_counted_as_auth_failures(datagrams in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..1600), 1..20)) {
        let mut client = session();
        for (i, datagram) in datagrams.iter().enumerate() {
            client.handle_datagram(Instant::from_millis(20 + i as u64), datagram);
        }
        prop_assert_eq!(client.counters().auth_failures, datagrams.len() as u64);
        prop_assert_eq!(client.server_state_num(), StateNum(0));
    }

    #[test]
    fn authentic_garbage_never_produces_a_state(payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..1200), 1..20)) {
        let mut client = session();
        let mut server = PacketLayer::new(&test_key(), Direction::ToClient);
        for payload in &payloads {
            let datagram = server_datagram(&mut server, payload);
            client.handle_datagram(Instant::from_millis(30), &datagram);
        }
        let counters = client.counters();
        prop_assert_eq!(counters.auth_failures, 0);
        prop_assert_eq!(client.server_state_num(), StateNum(0));
    }

    #[test]
    fn mutated_real_datagrams_never_panic(flips in prop::collection::vec((0usize..200, any::<u8>()), 1..8), cut in 0usize..200) {
        let mut client = session();
        let mut server = PacketLayer::new(&test_key(), Direction::ToClient);
        let instruction = Instruction {
            old_num: StateNum(0),
            new_num: StateNum(1),
            ack_num: StateNum(1),
            throwaway_num: StateNum(0),
            diff: encode_host_message(&[HostEvent::EchoAck(StateNum(1)), HostEvent::Bytes(b"$ hello".to_vec())]),
            chaff: vec![],
        };
        let mut datagram = server_instruction(&mut server, &instruction).remove(0);
        for (position, value) in flips {
            let len = datagram.len();
            datagram[position % len] ^= value;
        }
        datagram.truncate(cut.max(1));
        client.handle_datagram(Instant::from_millis(30), &datagram);
        let counters = client.counters();
        prop_assert!(counters.auth_failures + counters.malformed + counters.applied + counters.apply_failures >= 1);
    }

    #[test]
    fn authentic_instructions_with_hostile_numbers_never_panic(
        old in prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
        new in prop_oneof![Just(1u64), Just(u64::MAX), any::<u64>()],
        ack in any::<u64>(),
        throwaway in prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
        diff in prop_oneof![prop::collection::vec(any::<u8>(), 0..64), Just(encode_host_message(&[HostEvent::Resize { cols: 0, rows: 0 }]))],
    ) {
        let mut client = session();
        let mut server = PacketLayer::new(&test_key(), Direction::ToClient);
        let instruction = Instruction {
            old_num: StateNum(old),
            new_num: StateNum(new),
            ack_num: StateNum(ack),
            throwaway_num: StateNum(throwaway),
            diff,
            chaff: vec![],
        };
        for datagram in server_instruction(&mut server, &instruction) {
            client.handle_datagram(Instant::from_millis(30), &datagram);
        }
        // The session still works afterwards: it keeps a timer and can take input.
        client.handle_input(Instant::from_millis(40), b"x");
        prop_assert!(client.poll_timeout().is_some() || client.is_closed());
    }
}

#[test]
fn a_datagram_under_a_wrong_key_is_an_auth_failure() {
    let mut client = session();
    let wrong = Key([7; 16]);
    let mut stranger = PacketLayer::new(&wrong, Direction::ToClient);
    let datagram = server_datagram(&mut stranger, &[0; 20]);
    client.handle_datagram(Instant::from_millis(30), &datagram);
    assert_eq!(client.counters().auth_failures, 1);
    assert!(client.last_error().is_some());
}

#[test]
fn our_own_datagrams_reflected_back_are_rejected() {
    let mut client = session();
    let mut reflected = Vec::new();
    while let Some(datagram) = client.poll_transmit() {
        reflected.push(datagram);
    }
    client.handle_timeout(Instant::from_millis(50));
    while let Some(datagram) = client.poll_transmit() {
        reflected.push(datagram);
    }
    assert!(!reflected.is_empty());
    for datagram in &reflected {
        client.handle_datagram(Instant::from_millis(60), datagram);
    }
    assert_eq!(client.counters().auth_failures, reflected.len() as u64, "direction bit checked");
}
