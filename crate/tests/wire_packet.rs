//! PacketLayer behaviour: timestamp echo, RTT samples, replays, directions, sequence numbers.

use std::time::Duration;

use tern::time::Instant;
use tern::wire::{Cipher, Direction, Key, MAX_SEQ, Nonce, PacketLayer, TimestampEcho, WireError};

fn key() -> Key {
    "WLThFE98+opDlEMyexqWsA".parse().unwrap()
}

fn ms(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// (seq, timestamp, timestamp_reply) of a datagram, read with the key.
fn stamps(datagram: &[u8]) -> (u64, u16, u16) {
    let (nonce, plain) = Cipher::new(&key()).open(datagram).unwrap();
    (nonce.seq, u16::from_be_bytes([plain[0], plain[1]]), u16::from_be_bytes([plain[2], plain[3]]))
}

fn pair() -> (PacketLayer, PacketLayer) {
    (PacketLayer::new(&key(), Direction::ToServer), PacketLayer::new(&key(), Direction::ToClient))
}

#[test]
fn timestamp_reply_is_ffff_before_anything_received() {
    let (mut client, _) = pair();
    let datagram = client.seal(ms(70_000), b"0123456789").unwrap();
    assert_eq!(stamps(&datagram), (0, (70_000 % 65_536) as u16, 0xFFFF));
    assert_eq!(&datagram[..8], &[0; 8]);
}

#[test]
fn timestamp_reply_is_peer_timestamp_plus_hold_time() {
    let (mut client, mut server) = pair();
    let from_server = server.seal(ms(10_000), b"0123456789").unwrap();
    assert_eq!(from_server[0], 0x80, "server datagrams carry the direction bit");
    client.open(ms(500_000), &from_server).unwrap();
    let reply = client.seal(ms(500_250), b"0123456789").unwrap();
    assert_eq!(stamps(&reply).2, 10_250);
}

#[test]
fn timestamp_reply_wraps_mod_65536() {
    let (mut client, mut server) = pair();
    let from_server = server.seal(ms(65_530), b"x").unwrap();
    client.open(ms(3), &from_server).unwrap();
    assert_eq!(stamps(&client.seal(ms(13), b"x").unwrap()).2, 4);
}

#[test]
fn timestamp_is_echoed_once_only() {
    let (mut client, mut server) = pair();
    client.open(ms(1_000), &server.seal(ms(5_000), b"x").unwrap()).unwrap();
    assert_eq!(stamps(&client.seal(ms(1_010), b"x").unwrap()).2, 5_010);
    assert_eq!(stamps(&client.seal(ms(1_020), b"x").unwrap()).2, 0xFFFF);
}

#[test]
fn timestamp_is_not_echoed_after_one_second() {
    let (mut client, mut server) = pair();
    client.open(ms(1_000), &server.seal(ms(5_000), b"x").unwrap()).unwrap();
    assert_eq!(stamps(&client.seal(ms(2_000), b"x").unwrap()).2, 0xFFFF);

    client.open(ms(3_000), &server.seal(ms(6_000), b"x").unwrap()).unwrap();
    assert_eq!(stamps(&client.seal(ms(3_999), b"x").unwrap()).2, 6_999);
}

#[test]
fn newer_timestamps_overwrite_older_ones() {
    let (mut client, mut server) = pair();
    client.open(ms(1_000), &server.seal(ms(5_000), b"x").unwrap()).unwrap();
    client.open(ms(1_100), &server.seal(ms(5_300), b"x").unwrap()).unwrap();
    assert_eq!(stamps(&client.seal(ms(1_150), b"x").unwrap()).2, 5_350);
}

#[test]
fn replayed_packets_do_not_update_the_timestamp_echo() {
    let (mut client, mut server) = pair();
    let older = server.seal(ms(5_000), b"old").unwrap();
    let newer = server.seal(ms(6_000), b"new").unwrap();
    let first = client.open(ms(1_000), &newer).unwrap();
    assert!(first.in_order);
    let late = client.open(ms(1_001), &older).unwrap();
    assert!(!late.in_order);
    assert_eq!(late.payload, b"old", "a late datagram's payload is still delivered");
    assert_eq!(stamps(&client.seal(ms(1_010), b"x").unwrap()).2, 6_010);

    // A replay of the newest one after its echo does not re-arm the echo either.
    let replay = client.open(ms(1_020), &newer).unwrap();
    assert!(!replay.in_order);
    assert_eq!(replay.rtt_sample, None);
    assert_eq!(stamps(&client.seal(ms(1_030), b"x").unwrap()).2, 0xFFFF);
}

#[test]
fn rtt_sample_is_now_minus_reply() {
    let (mut client, mut server) = pair();
    server.open(ms(90_000), &client.seal(ms(5_000), b"x").unwrap()).unwrap();
    // The server holds the timestamp 30 ms, the path takes 70 ms in all.
    let answer = server.seal(ms(90_030), b"y").unwrap();
    let opened = client.open(ms(5_100), &answer).unwrap();
    assert_eq!(opened.rtt_sample, Some(Duration::from_millis(70)));
    assert_eq!(opened.payload, b"y");

    // No reply: no sample. A sample of 5 s or more is discarded.
    let opened = client.open(ms(5_200), &server.seal(ms(90_100), b"z").unwrap()).unwrap();
    assert_eq!(opened.rtt_sample, None);
    server.open(ms(90_200), &client.seal(ms(6_000), b"x").unwrap()).unwrap();
    let answer = server.seal(ms(90_200), b"y").unwrap();
    assert_eq!(client.open(ms(11_000), &answer).unwrap().rtt_sample, None);
}

#[test]
fn seal_maps_clock_ffff_to_zero() {
    let (mut client, _) = pair();
    assert_eq!(stamps(&client.seal(ms(0xFFFF), b"x").unwrap()).1, 0);
}

#[test]
fn open_rejects_reflections_wrong_keys_and_short_datagrams() {
    let (mut client, mut server) = pair();
    let own = client.seal(ms(1), b"0123456789").unwrap();
    assert_eq!(
        client.open(ms(2), &own),
        Err(WireError::WrongDirection { got: Direction::ToServer, expected: Direction::ToClient })
    );
    let mut other = PacketLayer::new(&Key([9; 16]), Direction::ToClient);
    assert_eq!(other.open(ms(2), &own), Err(WireError::AuthenticationFailed));
    let mut tampered = own.clone();
    tampered[12] ^= 0x40;
    assert_eq!(server.open(ms(2), &tampered), Err(WireError::AuthenticationFailed));
    assert_eq!(server.open(ms(2), &own[..23]), Err(WireError::DatagramTooShort { len: 23 }));
    assert_eq!(server.open(ms(2), &[]), Err(WireError::DatagramTooShort { len: 0 }));

    let three =
        Cipher::new(&key()).seal(Nonce { direction: Direction::ToServer, seq: 0 }, b"abc").unwrap();
    assert_eq!(server.open(ms(2), &three), Err(WireError::PlaintextTooShort { len: 3 }));
    // Failed opens change nothing: the genuine datagram is still in order.
    assert!(server.open(ms(3), &own).unwrap().in_order);
}

#[test]
fn sequence_numbers_count_every_datagram_and_can_resume() {
    let (mut client, _) = pair();
    for seq in 0..5 {
        assert_eq!(client.next_seq(), seq);
        assert_eq!(stamps(&client.seal(ms(1), b"x").unwrap()).0, seq);
    }
    let mut resumed = PacketLayer::with_next_seq(&key(), Direction::ToServer, client.next_seq());
    assert_eq!(stamps(&resumed.seal(ms(1), b"x").unwrap()).0, 5);
}

#[test]
fn sequence_exhaustion_is_an_error_not_a_wrap() {
    let mut client = PacketLayer::with_next_seq(&key(), Direction::ToServer, MAX_SEQ);
    let mut server = PacketLayer::new(&key(), Direction::ToClient);
    server.open(ms(1), &client.seal(ms(1), b"x").unwrap()).unwrap();
    assert_eq!(client.next_seq(), MAX_SEQ + 1);
    let echo_source = server.seal(ms(2), b"x").unwrap();
    client.open(ms(2), &echo_source).unwrap();
    assert_eq!(client.seal(ms(3), b"x"), Err(WireError::SequenceExhausted));
    assert_eq!(client.seal(ms(3), b"x"), Err(WireError::SequenceExhausted));
    assert_eq!(client.next_seq(), MAX_SEQ + 1);
    let mut beyond = PacketLayer::with_next_seq(&key(), Direction::ToServer, u64::MAX);
    assert_eq!(beyond.seal(ms(3), b"x"), Err(WireError::SequenceExhausted));
}

#[test]
fn held_datagrams_can_leave_the_oldest_timestamp_to_be_echoed() {
    let (mut client, mut server) = pair();
    client.set_timestamp_echo(TimestampEcho::Oldest);
    // Three datagrams sent 20 ms apart, held on the way and opened together.
    let sent: Vec<_> = [5_000, 5_020, 5_040].map(|t| server.seal(ms(t), b"x").unwrap()).into();
    for d in &sent {
        client.open(ms(1_000), d).unwrap();
    }
    // The first one's stamp, advanced by how long the client held it (10 ms).
    assert_eq!(stamps(&client.seal(ms(1_010), b"x").unwrap()).2, 5_010);

    // Once echoed it is gone, and the next batch's first one waits.
    client.open(ms(1_500), &server.seal(ms(5_500), b"x").unwrap()).unwrap();
    client.open(ms(1_500), &server.seal(ms(5_520), b"x").unwrap()).unwrap();
    assert_eq!(stamps(&client.seal(ms(1_500), b"x").unwrap()).2, 5_500);
}

#[test]
fn the_oldest_timestamp_gives_way_once_it_is_too_old_to_echo() {
    let (mut client, mut server) = pair();
    client.set_timestamp_echo(TimestampEcho::Oldest);
    client.open(ms(1_000), &server.seal(ms(5_000), b"x").unwrap()).unwrap();
    // Nothing was sent for a second: that one can no longer be echoed, the newer one can.
    client.open(ms(2_000), &server.seal(ms(6_000), b"x").unwrap()).unwrap();
    assert_eq!(stamps(&client.seal(ms(2_005), b"x").unwrap()).2, 6_005);

    // Back to the newest: a later datagram overwrites again.
    client.set_timestamp_echo(TimestampEcho::Newest);
    client.open(ms(3_000), &server.seal(ms(7_000), b"x").unwrap()).unwrap();
    client.open(ms(3_000), &server.seal(ms(7_040), b"x").unwrap()).unwrap();
    assert_eq!(stamps(&client.seal(ms(3_000), b"x").unwrap()).2, 7_040);
}
