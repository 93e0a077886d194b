//! Every captured mosh 1.4.0 datagram in tests/fixtures/golden, checked layer by layer.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;
use tern::time::Instant;
use tern::wire::{
    Cipher, Direction, Fragment, HostEvent, Instruction, Key, PacketLayer, Reassembler, UserEvent,
    decode_host_message, decode_instruction, decode_user_message, encode_instruction,
};

/// Keys of the capture files, where known (see fixtures/golden/README.md).
const KEYS: &[(&str, &str)] = &[
    ("real-session.jsonl", "WLThFE98+opDlEMyexqWsA"),
    ("session1.jsonl", "PWSoCIVurTVBGXAj873xNg"),
    ("verbose-client.jsonl", "XCnbKlYLJyvGXMCNvWahaA"),
];

const ALL_FILES: &[&str] = &[
    "real-session.jsonl",
    "session1.jsonl",
    "verbose-client.jsonl",
    "bs-test.jsonl",
    "frag-client.jsonl",
    "frag-session.jsonl",
    "resize-first.jsonl",
    "roam.jsonl",
];

// Tests are drivers, not core: reading the captured fixtures is the test's I/O.
#[allow(clippy::disallowed_methods)]
fn records(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn hex_field(record: &Value, name: &str) -> Option<Vec<u8>> {
    record.get(name).and_then(Value::as_str).map(|s| hex::decode(s).unwrap())
}

fn direction(record: &Value) -> Direction {
    match record["dir"].as_str() {
        Some("c2s") => Direction::ToServer,
        Some("s2c") => Direction::ToClient,
        other => panic!("bad dir {other:?}"),
    }
}

fn u64_field(record: &Value, name: &str) -> Option<u64> {
    record.get(name).and_then(Value::as_u64)
}

/// Checks a decoded diff against the `fields.diff` list the capture tools wrote.
fn check_diff(dir: Direction, diff: &[u8], expected: &[Value], what: &str) {
    match dir {
        Direction::ToServer => {
            let events = decode_user_message(diff).unwrap();
            assert_eq!(events.len(), expected.len(), "{what}: event count");
            for (event, want) in events.iter().zip(expected) {
                match event {
                    UserEvent::Keys(keys) => {
                        assert_eq!(hex::encode(keys), want["keys"].as_str().unwrap(), "{what}")
                    }
                    UserEvent::Resize { cols, rows } => {
                        assert_eq!(want["resize"], serde_json::json!([cols, rows]), "{what}")
                    }
                }
            }
        }
        Direction::ToClient => {
            let events = decode_host_message(diff).unwrap();
            assert_eq!(events.len(), expected.len(), "{what}: event count");
            for (event, want) in events.iter().zip(expected) {
                match event {
                    HostEvent::Bytes(bytes) => {
                        assert_eq!(
                            String::from_utf8_lossy(bytes),
                            want["hostbytes"].as_str().unwrap(),
                            "{what}"
                        )
                    }
                    HostEvent::Resize { cols, rows } => {
                        assert_eq!(want["resize"], serde_json::json!([cols, rows]), "{what}")
                    }
                    HostEvent::EchoAck(num) => {
                        assert_eq!(Some(num.0), want["echoack"].as_u64(), "{what}")
                    }
                }
            }
        }
    }
}

fn check_fields(dir: Direction, instruction: &Instruction, fields: &Value, what: &str) {
    assert_eq!(fields["protocol_version"].as_u64(), Some(2), "{what}");
    assert_eq!(fields["old_num"].as_u64(), Some(instruction.old_num.0), "{what}: old_num");
    assert_eq!(fields["new_num"].as_u64(), Some(instruction.new_num.0), "{what}: new_num");
    assert_eq!(fields["ack_num"].as_u64(), Some(instruction.ack_num.0), "{what}: ack_num");
    assert_eq!(
        fields["throwaway_num"].as_u64(),
        Some(instruction.throwaway_num.0),
        "{what}: throwaway_num"
    );
    assert_eq!(fields["chaff_len"].as_u64(), Some(instruction.chaff.len() as u64), "{what}: chaff");
    check_diff(dir, &instruction.diff, fields["diff"].as_array().unwrap(), what);
}

struct Totals {
    datagrams: usize,
    instructions: usize,
    multi_fragment: usize,
}

/// From the plaintext up: timestamps, fragment header, reassembly, inflate, protobuf, diff.
fn check_plaintext_layers(file: &str) -> Totals {
    let mut reassemblers: HashMap<Direction, Reassembler> = HashMap::new();
    let mut fragments_seen: HashMap<Direction, usize> = HashMap::new();
    let mut totals = Totals { datagrams: 0, instructions: 0, multi_fragment: 0 };
    for (line, record) in records(file).iter().enumerate() {
        let what = format!("{file}:{}", line + 1);
        let dir = direction(record);
        let plain = hex_field(record, "plain").unwrap();
        totals.datagrams += 1;

        let ts = u16::from_be_bytes([plain[0], plain[1]]);
        let reply = u16::from_be_bytes([plain[2], plain[3]]);
        if let Some(want) = u64_field(record, "ts") {
            assert_eq!(u64::from(ts), want, "{what}: ts");
        }
        if let Some(want) = u64_field(record, "ts_reply") {
            assert_eq!(u64::from(reply), want, "{what}: ts_reply");
        }
        assert_ne!(ts, 0xFFFF, "{what}: 0xFFFF is never a timestamp");

        let fragment = Fragment::parse(&plain[4..]).unwrap();
        if let Some(want) = u64_field(record, "frag_id") {
            assert_eq!(fragment.id, want, "{what}: frag_id");
        }
        if let Some(want) = u64_field(record, "frag_num") {
            assert_eq!(u64::from(fragment.num), want, "{what}: frag_num");
        }
        if let Some(want) = record.get("final").and_then(Value::as_bool) {
            assert_eq!(fragment.is_final, want, "{what}: final");
        }
        assert_eq!(Fragment::parse(&fragment.to_bytes()).unwrap(), fragment);

        *fragments_seen.entry(dir).or_default() += 1;
        let done = reassemblers.entry(dir).or_default().add(&plain[4..]).unwrap();
        let inst = hex_field(record, "inst").filter(|i| !i.is_empty());
        match (done, inst) {
            (Some(instruction), Some(inst)) => {
                totals.instructions += 1;
                if fragments_seen[&dir] > 1 {
                    totals.multi_fragment += 1;
                }
                fragments_seen.insert(dir, 0);
                assert_eq!(decode_instruction(&inst).unwrap(), instruction, "{what}");
                // Both mosh and the test tools write all seven fields in order: byte for byte.
                assert_eq!(
                    hex::encode(encode_instruction(&instruction)),
                    hex::encode(&inst),
                    "{what}: re-encoding"
                );
                if let Some(fields) = record.get("fields") {
                    check_fields(dir, &instruction, fields, &what);
                }
            }
            (None, None) => assert!(!fragment.is_final || fragment.num > 0, "{what}"),
            (done, inst) => panic!(
                "{what}: reassembled {:?} but capture has inst {:?}",
                done.is_some(),
                inst.is_some()
            ),
        }
    }
    totals
}

#[test]
fn every_captured_plaintext_reassembles_and_decodes_as_recorded() {
    let mut all = Totals { datagrams: 0, instructions: 0, multi_fragment: 0 };
    for file in ALL_FILES {
        let t = check_plaintext_layers(file);
        assert!(t.instructions > 0, "{file}");
        all.datagrams += t.datagrams;
        all.instructions += t.instructions;
        all.multi_fragment += t.multi_fragment;
    }
    assert_eq!(all.datagrams, 228);
    assert!(all.multi_fragment >= 2, "the captures include fragmented instructions");
}

#[test]
fn every_captured_datagram_with_a_known_key_decrypts_and_reseals_byte_for_byte() {
    let mut checked = 0;
    for &(file, key_text) in KEYS {
        let key: Key = key_text.parse().unwrap();
        let cipher = Cipher::new(&key);
        for (line, record) in records(file).iter().enumerate() {
            let what = format!("{file}:{}", line + 1);
            let wire = hex_field(record, "wire").unwrap();
            let (nonce, plaintext) = cipher.open(&wire).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(hex::encode(&plaintext), record["plain"].as_str().unwrap(), "{what}");
            assert_eq!(nonce.direction, direction(record), "{what}");
            if let Some(seq) = u64_field(record, "seq") {
                assert_eq!(nonce.seq, seq, "{what}: seq");
            }
            assert_eq!(cipher.seal(nonce, &plaintext).unwrap(), wire, "{what}: resealing");
            checked += 1;
        }
    }
    assert_eq!(checked, 19 + 33 + 33);
}

/// Both endpoints' packet layers open the capture in order: payloads, replay marking and RTT
/// samples as mosh computes them from the recorded timestamps.
#[test]
fn packet_layers_open_every_captured_datagram() {
    for &(file, key_text) in KEYS {
        let key: Key = key_text.parse().unwrap();
        // The client's layer receives s2c datagrams, the server's c2s.
        let mut client = PacketLayer::new(&key, Direction::ToServer);
        let mut server = PacketLayer::new(&key, Direction::ToClient);
        let mut expected: HashMap<Direction, u64> = HashMap::new();
        let mut rtt_samples = 0;
        for (line, record) in records(file).iter().enumerate() {
            let what = format!("{file}:{}", line + 1);
            let wire = hex_field(record, "wire").unwrap();
            let plain = hex_field(record, "plain").unwrap();
            let dir = direction(record);
            let layer = match dir {
                Direction::ToClient => &mut client,
                Direction::ToServer => &mut server,
            };
            // Receiver clock: pretend it equals the sender's timestamp plus 1 ms transit.
            let sent = u64::from(u16::from_be_bytes([plain[0], plain[1]]));
            let now = Instant::from_millis(sent + 65_536 * 100 + 1);
            let opened = layer.open(now, &wire).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(opened.payload, plain[4..], "{what}");

            let seq = u64::from_be_bytes(wire[..8].try_into().unwrap()) & !(1 << 63);
            let next = expected.entry(dir).or_default();
            assert_eq!(opened.in_order, seq >= *next, "{what}: in_order");
            if opened.in_order {
                *next = seq + 1;
            }
            let reply = u16::from_be_bytes([plain[2], plain[3]]);
            if opened.in_order && reply != 0xFFFF {
                let r = (sent as u16 + 1).wrapping_sub(reply);
                let want = (r < 5000).then(|| std::time::Duration::from_millis(u64::from(r)));
                assert_eq!(opened.rtt_sample, want, "{what}: rtt");
                rtt_samples += usize::from(want.is_some());
            } else {
                assert_eq!(opened.rtt_sample, None, "{what}");
            }

            let wrong_side = match dir {
                Direction::ToClient => &mut server,
                Direction::ToServer => &mut client,
            };
            assert!(wrong_side.open(now, &wire).is_err(), "{what}: reflected datagram accepted");
        }
        assert!(rtt_samples > 0, "{file}");
    }
}

#[test]
fn captured_datagrams_fail_under_a_wrong_key() {
    let wrong: Key = "AAECAwQFBgcICQoLDA0ODw".parse().unwrap();
    let cipher = Cipher::new(&wrong);
    for file in ALL_FILES {
        for record in records(file) {
            let wire = hex_field(&record, "wire").unwrap();
            assert!(cipher.open(&wire).is_err(), "{file}");
        }
    }
}
