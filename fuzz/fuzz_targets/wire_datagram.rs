//! Datagram receive path: open (AES-128-OCB3 under the fixed key, timestamps), reassemble
//! fragments, inflate, decode the protobuf Instruction, decode its diff both ways.
//!
//! Input: records (u16 LE length + bytes). A record's first byte picks what the rest is:
//! - `& 3 == 0`: a raw datagram, opened as the client opens the server's;
//! - `& 3 == 1`: a plaintext (timestamps + fragment), sealed under the key first (bit 2: under
//!   the previous sequence number, a replay), so every byte after the cipher is reachable;
//! - `& 3 == 2`: a fragment (the decrypted payload), straight to the reassembler;
//! - `& 3 == 3`: an encoded diff, decoded as HostMessage and UserMessage.
//!
//! Invariants: no panic; whatever assembles re-fragments and reassembles to itself; whatever
//! decodes re-encodes and decodes to itself (a client diff with its key runs merged, as the
//! encoder writes them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::time::Instant;
use tern::wire::{
    Cipher, Direction, Fragmenter, Instruction, Nonce, PacketLayer, Reassembler, UserEvent,
    decode_host_message, decode_user_message, encode_host_message, encode_user_message,
};
use tern_fuzz::{key, records};

fn check_diff(diff: &[u8]) {
    if let Ok(events) = decode_host_message(diff) {
        let again = decode_host_message(&encode_host_message(&events)).expect("re-encoded diff");
        assert_eq!(again, events);
    }
    if let Ok(events) = decode_user_message(diff) {
        // The encoder merges runs of keys and leaves empty ones out (as mosh does).
        let mut merged: Vec<UserEvent> = Vec::new();
        for event in events {
            match (merged.last_mut(), event) {
                (_, UserEvent::Keys(keys)) if keys.is_empty() => {}
                (Some(UserEvent::Keys(last)), UserEvent::Keys(keys)) => last.extend(keys),
                (_, event) => merged.push(event),
            }
        }
        let again = decode_user_message(&encode_user_message(&merged)).expect("re-encoded diff");
        assert_eq!(again, merged);
    }
}

fn check_instruction(instruction: &Instruction) {
    let mut fragmenter = Fragmenter::new(tern::wire::DEFAULT_MTU);
    if let Ok(fragments) = fragmenter.fragment(instruction) {
        let mut reassembler = Reassembler::new();
        let mut done = None;
        for fragment in &fragments {
            done = reassembler.add(fragment).expect("our own fragments");
        }
        assert_eq!(done.as_ref(), Some(instruction), "re-fragmented instruction");
    }
    check_diff(&instruction.diff);
}

fuzz_target!(|data: &[u8]| {
    let key = key();
    let cipher = Cipher::new(&key);
    let mut client = PacketLayer::new(&key, Direction::ToServer);
    let mut reassembler = Reassembler::new();
    let mut seq = 0u64;
    for (i, record) in records(data).into_iter().enumerate() {
        let Some((&mode, body)) = record.split_first() else { continue };
        let now = Instant::from_millis(1_000 + 7 * i as u64);
        let payload = match mode & 3 {
            0 => client.open(now, body).ok().map(|opened| opened.payload),
            1 => {
                let replay = mode & 4 != 0 && seq > 0;
                let this = if replay { seq - 1 } else { seq };
                seq = this + 1;
                let nonce = Nonce { direction: Direction::ToClient, seq: this };
                let datagram = cipher.seal(nonce, body).expect("seals");
                match client.open(now, &datagram) {
                    Ok(opened) => {
                        assert_eq!(opened.payload, body[4..], "payload after the timestamps");
                        Some(opened.payload)
                    }
                    Err(_) => {
                        assert!(
                            body.len() < 4,
                            "an authentic datagram of {} bytes refused",
                            body.len()
                        );
                        None
                    }
                }
            }
            2 => Some(body.to_vec()),
            _ => {
                check_diff(body);
                None
            }
        };
        if let Some(payload) = payload
            && let Ok(Some(instruction)) = reassembler.add(&payload)
        {
            check_instruction(&instruction);
        }
    }
});
