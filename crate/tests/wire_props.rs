//! Property tests: fragmentation round trips, and peer bytes never panic any decoder.

use proptest::prelude::*;
use tern::time::Instant;
use tern::wire::{
    DEFAULT_MTU, Direction, Fragment, Fragmenter, HostEvent, Instruction, Key, MAX_DATAGRAM_LEN,
    MIN_MTU, PacketLayer, Reassembler, StateNum, UserEvent, decode_host_message,
    decode_instruction, decode_user_message, encode_host_message, encode_user_message,
};

fn key() -> Key {
    Key(*b"0123456789abcdef")
}

fn state_num() -> impl Strategy<Value = StateNum> {
    prop_oneof![Just(StateNum::INITIAL), Just(StateNum::SHUTDOWN), any::<u64>().prop_map(StateNum)]
}

fn instruction() -> impl Strategy<Value = Instruction> {
    (
        state_num(),
        state_num(),
        state_num(),
        state_num(),
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            proptest::collection::vec(any::<u8>(), 0..6000),
            // Compressible: a screenful of repeated escape sequences.
            (0usize..4000).prop_map(|n| b"\x1b[K\r\n".iter().copied().cycle().take(n).collect()),
        ],
        proptest::collection::vec(any::<u8>(), 0..17),
    )
        .prop_map(|(old_num, new_num, ack_num, throwaway_num, diff, chaff)| Instruction {
            old_num,
            new_num,
            ack_num,
            throwaway_num,
            diff,
            chaff,
        })
}

fn mtu() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(DEFAULT_MTU),
        Just(1211),
        Just(500),
        MIN_MTU..=MAX_DATAGRAM_LEN,
        MIN_MTU..MIN_MTU + 40
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn fragments_reassemble_in_order(instruction in instruction(), mtu in mtu()) {
        let mut fragmenter = Fragmenter::new(mtu);
        let fragments = fragmenter.fragment(&instruction).unwrap();
        prop_assert!(!fragments.is_empty());
        let mut reassembler = Reassembler::new();
        for (i, fragment) in fragments.iter().enumerate() {
            // Every datagram fits the MTU once sealed.
            prop_assert!(fragment.len() + 28 <= mtu);
            let got = reassembler.add(fragment).unwrap();
            if i + 1 < fragments.len() {
                prop_assert_eq!(got, None);
            } else {
                prop_assert_eq!(got.as_ref(), Some(&instruction));
            }
        }
    }

    #[test]
    fn permuted_and_duplicated_fragments_assemble_once_complete(
        instruction in instruction(),
        mtu in MIN_MTU..MIN_MTU + 300,
        order in proptest::collection::vec(any::<prop::sample::Index>(), 1..200),
    ) {
        let fragments = Fragmenter::new(mtu).fragment(&instruction).unwrap();
        // Deliver a random sequence with repeats, then every fragment once more in reverse.
        let mut deliveries: Vec<usize> = order.iter().map(|i| i.index(fragments.len())).collect();
        deliveries.extend((0..fragments.len()).rev());
        let mut reassembler = Reassembler::new();
        let mut seen = std::collections::BTreeSet::new();
        for index in deliveries {
            seen.insert(index);
            let got = reassembler.add(&fragments[index]).unwrap();
            if seen.len() == fragments.len() {
                prop_assert_eq!(got.as_ref(), Some(&instruction));
            } else {
                prop_assert_eq!(got, None);
            }
        }
    }

    #[test]
    fn sealed_fragments_survive_the_packet_layer(instruction in instruction(), mtu in mtu(), t in 0u64..1_000_000) {
        let mut client = PacketLayer::new(&key(), Direction::ToServer);
        let mut server = PacketLayer::new(&key(), Direction::ToClient);
        let mut reassembler = Reassembler::new();
        let mut out = None;
        for fragment in Fragmenter::new(mtu).fragment(&instruction).unwrap() {
            let datagram = client.seal(Instant::from_millis(t), &fragment).unwrap();
            prop_assert!(datagram.len() <= mtu);
            let opened = server.open(Instant::from_millis(t + 5), &datagram).unwrap();
            prop_assert!(opened.in_order);
            out = reassembler.add(&opened.payload).unwrap();
        }
        prop_assert_eq!(out, Some(instruction));
    }

    #[test]
    fn user_messages_round_trip(events in proptest::collection::vec(prop_oneof![
        proptest::collection::vec(any::<u8>(), 1..20).prop_map(UserEvent::Keys),
        (any::<u16>(), any::<u16>()).prop_map(|(cols, rows)| UserEvent::Resize { cols, rows }),
    ], 0..20)) {
        // Decoding gives the events with consecutive key runs merged.
        let mut merged: Vec<UserEvent> = Vec::new();
        for event in &events {
            match (merged.last_mut(), event) {
                (Some(UserEvent::Keys(run)), UserEvent::Keys(more)) => run.extend_from_slice(more),
                _ => merged.push(event.clone()),
            }
        }
        prop_assert_eq!(decode_user_message(&encode_user_message(&events)).unwrap(), merged);
    }

    #[test]
    fn host_messages_round_trip(events in proptest::collection::vec(prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(HostEvent::Bytes),
        (any::<u16>(), any::<u16>()).prop_map(|(cols, rows)| HostEvent::Resize { cols, rows }),
        any::<u64>().prop_map(|n| HostEvent::EchoAck(StateNum(n))),
    ], 0..20)) {
        prop_assert_eq!(decode_host_message(&encode_host_message(&events)).unwrap(), events);
    }

    /// Authentic datagrams with garbage inside: the layers above must refuse, never panic.
    #[test]
    fn garbage_inside_valid_datagrams_never_panics(
        plaintext in proptest::collection::vec(any::<u8>(), 0..300),
        seq in 0u64..10,
    ) {
        let cipher = tern::wire::Cipher::new(&key());
        let nonce = tern::wire::Nonce { direction: Direction::ToClient, seq };
        let datagram = cipher.seal(nonce, &plaintext).unwrap();
        let mut client = PacketLayer::new(&key(), Direction::ToServer);
        if let Ok(opened) = client.open(Instant::from_millis(seq), &datagram) {
            let mut reassembler = Reassembler::new();
            let _ = reassembler.add(&opened.payload);
        }
        let _ = decode_instruction(&plaintext);
        let _ = decode_user_message(&plaintext);
        let _ = decode_host_message(&plaintext);
    }

    /// Mutated, truncated or extended real datagrams, and wrong keys.
    #[test]
    fn mutated_datagrams_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
        tail in proptest::collection::vec(any::<u8>(), 0..8),
        wrong_key in any::<bool>(),
    ) {
        let mut server = PacketLayer::new(&key(), Direction::ToClient);
        let instruction = Instruction { diff: vec![7; 300], ..Instruction::default() };
        let fragment = Fragmenter::new(DEFAULT_MTU).fragment(&instruction).unwrap().remove(0);
        let mut datagram = server.seal(Instant::from_millis(1), &fragment).unwrap();
        for (at, xor) in &flips {
            let i = at.index(datagram.len());
            datagram[i] ^= xor;
        }
        datagram.truncate(cut.index(datagram.len() + 1));
        datagram.extend_from_slice(&tail);
        let receiver_key = if wrong_key { Key([1; 16]) } else { key() };
        let mut client = PacketLayer::new(&receiver_key, Direction::ToServer);
        let untouched = flips.iter().all(|(_, x)| *x == 0) && tail.is_empty() && datagram.len() == 24 + fragment.len() + 4;
        match client.open(Instant::from_millis(2), &datagram) {
            Ok(opened) => {
                prop_assert!(!wrong_key);
                let _ = Reassembler::new().add(&opened.payload);
            }
            Err(_) => prop_assert!(wrong_key || !untouched),
        }
    }

    /// Fragment streams with arbitrary headers and contents.
    #[test]
    fn arbitrary_fragment_streams_never_panic(
        fragments in proptest::collection::vec(
            (0u64..3, 0u16..8, any::<bool>(), proptest::collection::vec(any::<u8>(), 0..64)),
            0..40,
        ),
        raw in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..10),
    ) {
        let mut reassembler = Reassembler::new();
        for (id, num, is_final, contents) in &fragments {
            let bytes = Fragment { id: *id, num: *num, is_final: *is_final, contents }.to_bytes();
            let _ = reassembler.add(&bytes);
        }
        for bytes in &raw {
            let _ = reassembler.add(bytes);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode_instruction(&bytes);
        let _ = decode_user_message(&bytes);
        let _ = decode_host_message(&bytes);
        let _ = Reassembler::new().add(&bytes);
        let _ = PacketLayer::new(&key(), Direction::ToServer).open(Instant::ZERO, &bytes);
    }
}
