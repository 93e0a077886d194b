//! The relay's datagram framing (server -> page): the page's `Joiner` fed anything, and the
//! relay's `Splitter` output joined back.
//!
//! Input: `max_datagram(u16 LE)` then records (u16 LE length + bytes). Every record goes to one
//! joiner as a framed datagram; then every record is split as a mosh datagram at
//! `max_datagram % 2100` and its parts go to another joiner, in order.
//!
//! Invariants: no panic; a joined datagram from parts is at most `MAX_JOINED_LEN`; a split that
//! succeeds joins back to exactly its payload at its last part and not before; a split refused
//! is one that cannot fit (too long, or more than `MAX_PARTS` parts, or no room for a part).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::relay_proto::framing::{
    Joiner, MAX_JOINED_LEN, MAX_PARTS, PART_HEADER_LEN, Splitter, WHOLE,
};
use tern_fuzz::{Reader, records};

fuzz_target!(|data: &[u8]| {
    let mut r = Reader(data);
    let max_datagram = usize::from(r.u16()) % 2100;
    let records = records(r.rest());

    let mut joiner = Joiner::new();
    for record in &records {
        let evicted = joiner.evicted;
        if let Ok(Some(joined)) = joiner.push(record)
            && record.first() != Some(&WHOLE)
        {
            assert!(joined.len() <= MAX_JOINED_LEN, "joined {} bytes", joined.len());
        }
        assert!(joiner.evicted >= evicted);
    }

    let mut splitter = Splitter::new();
    let mut rejoin = Joiner::new();
    for payload in &records {
        let mut parts = Vec::new();
        match splitter.split(payload, max_datagram, &mut parts) {
            Ok(()) => {
                assert!(!parts.is_empty());
                for (i, part) in parts.iter().enumerate() {
                    assert!(part.len() <= max_datagram, "a part of {} bytes", part.len());
                    let got = rejoin.push(part).expect("our own parts");
                    if i + 1 < parts.len() {
                        assert_eq!(got, None, "joined early");
                    } else {
                        assert_eq!(got.as_deref(), Some(&payload[..]), "joined back");
                    }
                }
            }
            Err(_) => {
                let whole_fits = payload.len() < max_datagram;
                assert!(!whole_fits, "a payload that fits whole was refused");
                let room = max_datagram.saturating_sub(PART_HEADER_LEN);
                assert!(
                    room == 0
                        || payload.len() > MAX_JOINED_LEN
                        || payload.len().div_ceil(room) > MAX_PARTS,
                    "{} bytes at {max_datagram} refused",
                    payload.len()
                );
            }
        }
    }
});
