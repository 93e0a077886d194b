//! Datagrams per second through `tern::wire` for a typical ~1 KiB host diff.
//!
//! Run: `cargo run -p tern-mosh --release --example wire_throughput`
//!
//! Send path: encode HostMessage, serialize + zlib + fragment the Instruction, seal each fragment.
//! Receive path: open each datagram, reassemble + inflate + decode the Instruction, decode the diff.

// A benchmark is a driver, not core (crate/clippy.toml): it reads the wall clock.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Instant as WallClock;

use tern::time::Instant;
use tern::wire::{
    DEFAULT_MTU, Direction, Fragmenter, HostEvent, Instruction, Key, PacketLayer, Reassembler,
    StateNum, decode_host_message, encode_host_message,
};

/// A repaint-like diff: cursor moves, SGR colours and directory-listing text, about 1 KiB.
fn typical_host_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"\x1b[?25l\x1b[0m");
    let names =
        ["Cargo.toml", "README.md", "src", "target", "tests", "examples", "node_modules", "web"];
    let mut row = 3;
    while out.len() < 1000 {
        out.extend_from_slice(format!("\x1b[{row};1H\x1b[K").as_bytes());
        for (i, name) in names.iter().enumerate() {
            let colour = 31 + (row + i) % 7;
            out.extend_from_slice(format!("\x1b[1;{colour}m{name}\x1b[0m  ").as_bytes());
        }
        row += 1;
    }
    out.extend_from_slice(b"\x1b[24;3H\x1b[?25h");
    out
}

fn main() {
    let key = Key(*b"tern-benchmark!!");
    let events = vec![HostEvent::EchoAck(StateNum(41)), HostEvent::Bytes(typical_host_bytes())];
    let diff = encode_host_message(&events);
    let template = Instruction {
        old_num: StateNum(40),
        new_num: StateNum(41),
        ack_num: StateNum(17),
        throwaway_num: StateNum(40),
        diff: diff.clone(),
        chaff: vec![0x5a; 8],
    };

    // --- send ---
    let mut server = PacketLayer::new(&key, Direction::ToClient);
    let mut fragmenter = Fragmenter::new(DEFAULT_MTU);
    let mut sealed: Vec<Vec<u8>> = Vec::new();
    let mut instructions = 0u64;
    let start = WallClock::now();
    while start.elapsed().as_secs_f64() < 2.0 {
        for _ in 0..100 {
            let mut instruction = template.clone();
            instruction.diff = encode_host_message(&events);
            instruction.new_num = StateNum(instructions);
            let now = Instant::from_millis(instructions);
            for fragment in fragmenter.fragment(&instruction).expect("MTU is in range") {
                let datagram = server.seal(now, &fragment).expect("sequence numbers left");
                if sealed.len() < 50_000 {
                    sealed.push(datagram);
                }
            }
            instructions += 1;
        }
    }
    let send_secs = start.elapsed().as_secs_f64();
    let send_datagrams = server.next_seq();

    // --- receive ---
    let mut client = PacketLayer::new(&key, Direction::ToServer);
    let mut reassembler = Reassembler::new();
    let mut received = 0u64;
    let mut decoded_bytes = 0usize;
    let start = WallClock::now();
    for (i, datagram) in sealed.iter().enumerate() {
        let opened = client.open(Instant::from_millis(i as u64), datagram).expect("authentic");
        if let Some(instruction) = reassembler.add(&opened.payload).expect("well formed") {
            let events = decode_host_message(&instruction.diff).expect("well formed");
            decoded_bytes += events.len();
        }
        received += 1;
    }
    let recv_secs = start.elapsed().as_secs_f64();
    assert!(decoded_bytes > 0);

    println!(
        "diff: {} bytes HostMessage ({} bytes of HostBytes), {} datagram(s) per instruction, {} bytes each",
        diff.len(),
        typical_host_bytes().len(),
        send_datagrams as f64 / instructions as f64,
        sealed[0].len()
    );
    println!(
        "send    (encode + serialize + zlib + fragment + seal):   {:>9.0} datagrams/s  ({} in {:.2} s)",
        send_datagrams as f64 / send_secs,
        send_datagrams,
        send_secs
    );
    println!(
        "receive (open + reassemble + inflate + decode + diff):   {:>9.0} datagrams/s  ({} in {:.2} s)",
        received as f64 / recv_secs,
        received,
        recv_secs
    );
}
