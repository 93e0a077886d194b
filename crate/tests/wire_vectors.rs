//! Known-answer vectors of MOSH-PROTOCOL.md 5.4, 11.1 and 11.2, byte for byte.

use tern::time::Instant;
use tern::wire::{
    Cipher, Direction, Fragment, Fragmenter, HostEvent, Instruction, Key, Nonce, PacketLayer,
    Reassembler, StateNum, UserEvent, decode_host_message, decode_instruction, decode_user_message,
    encode_host_message, encode_instruction, encode_user_message,
};

fn h(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).unwrap()
}

/// The key of the 11.1 vectors: bytes 00..0f.
fn sheet_key() -> Key {
    "AAECAwQFBgcICQoLDA0ODw".parse().unwrap()
}

const CLIENT_ZLIB: &str = "789ce360126090605460d06030e2e0629362d1083090b0620000105301de";
const CLIENT_PLAIN: &str =
    "1234ffff00000000000000018000789ce360126090605460d06030e2e0629362d1083090b0620000105301de";
const CLIENT_WIRE: &str = "00000000000000009f164d976357081cc1c8bceef905db5a02428c8571949d686f4420ca31f0060ca43d50ffb19e12e522a8cf6e73fd36a91f68ecf470d119b52ed349b9";
const SERVER_INSTRUCTION: &str = "08021002180320072802320e0a043a0240030a061204220268693a02aabb";
const SERVER_PLAIN: &str = "abcd120000000000000000098000789ce360126092605660d76032e2e362b1627260e66213625162cac8b4625ab51b0024ad0412";
const SERVER_WIRE: &str = "80000000000000051004105c413ba807b9a1b4ee2292086d25440fe61dd1277973887685de40ee8814e51ff285e018df4e593bb597055e69b7ecc6858270ff58efde628d5b6b3514a75bcf3f";

fn resize_instruction() -> Instruction {
    Instruction {
        old_num: StateNum(0),
        new_num: StateNum(1),
        ack_num: StateNum(0),
        throwaway_num: StateNum(0),
        diff: encode_user_message(&[UserEvent::Resize { cols: 80, rows: 24 }]),
        chaff: Vec::new(),
    }
}

#[test]
fn key_text_decodes() {
    assert_eq!(sheet_key().0.to_vec(), h("000102030405060708090a0b0c0d0e0f"));
    let key: Key = "WLThFE98+opDlEMyexqWsA".parse().unwrap();
    assert_eq!(key.to_base64(), "WLThFE98+opDlEMyexqWsA");
}

#[test]
fn protobuf_examples_of_section_5_4() {
    let resize = encode_user_message(&[UserEvent::Resize { cols: 80, rows: 24 }]);
    assert_eq!(resize, h("0a 06 1a 04 28 50 30 18"));
    assert_eq!(
        decode_user_message(&resize).unwrap(),
        vec![UserEvent::Resize { cols: 80, rows: 24 }]
    );

    let keys =
        encode_user_message(&[UserEvent::Keys(b"l".to_vec()), UserEvent::Keys(b"s\r".to_vec())]);
    assert_eq!(keys, h("0a 07 12 05 22 03 6c 73 0d"));
    assert_eq!(decode_user_message(&keys).unwrap(), vec![UserEvent::Keys(b"ls\r".to_vec())]);

    let host_events = vec![HostEvent::EchoAck(StateNum(3)), HostEvent::Bytes(b"hi".to_vec())];
    let host = encode_host_message(&host_events);
    assert_eq!(host, h("0a 04 3a 02 40 03 0a 06 12 04 22 02 68 69"));
    assert_eq!(decode_host_message(&host).unwrap(), host_events);

    let instruction = encode_instruction(&resize_instruction());
    assert_eq!(instruction, h("08 02 10 00 18 01 20 00 28 00 32 08 0a 06 1a 04 28 50 30 18 3a 00"));
    assert_eq!(decode_instruction(&instruction).unwrap(), resize_instruction());
}

#[test]
fn shutdown_state_encodes_as_ten_byte_varint() {
    let instruction = Instruction { new_num: StateNum::SHUTDOWN, ..Instruction::default() };
    let bytes = encode_instruction(&instruction);
    assert_eq!(bytes, h("08 02 10 00 18 ff ff ff ff ff ff ff ff ff 01 20 00 28 00 32 00 3a 00"));
    assert_eq!(decode_instruction(&bytes).unwrap().new_num, StateNum::SHUTDOWN);
}

#[test]
fn client_datagram_vector_at_the_cipher_layer() {
    let cipher = Cipher::new(&sheet_key());
    let nonce = Nonce { direction: Direction::ToServer, seq: 0 };
    assert_eq!(hex::encode(cipher.seal(nonce, &h(CLIENT_PLAIN)).unwrap()), CLIENT_WIRE);
    assert_eq!(cipher.open(&h(CLIENT_WIRE)).unwrap(), (nonce, h(CLIENT_PLAIN)));
}

#[test]
fn server_datagram_vector_at_the_cipher_layer() {
    let cipher = Cipher::new(&sheet_key());
    let nonce = Nonce { direction: Direction::ToClient, seq: 5 };
    assert_eq!(hex::encode(cipher.seal(nonce, &h(SERVER_PLAIN)).unwrap()), SERVER_WIRE);
    assert_eq!(cipher.open(&h(SERVER_WIRE)).unwrap(), (nonce, h(SERVER_PLAIN)));
}

#[test]
fn client_datagram_vector_through_the_packet_layer() {
    // A fresh client layer at clock 0x1234 ms: seq 0, ts 0x1234, no reply yet.
    let mut client = PacketLayer::new(&sheet_key(), Direction::ToServer);
    let fragment = Fragment { id: 1, num: 0, is_final: true, contents: &h(CLIENT_ZLIB) }.to_bytes();
    let wire = client.seal(Instant::from_millis(0x1234), &fragment).unwrap();
    assert_eq!(hex::encode(&wire), CLIENT_WIRE);
    assert_eq!(client.next_seq(), 1);

    let mut server = PacketLayer::new(&sheet_key(), Direction::ToClient);
    let opened = server.open(Instant::from_millis(0x2000), &wire).unwrap();
    assert!(opened.in_order);
    assert_eq!(opened.rtt_sample, None);
    let mut reassembler = Reassembler::new();
    assert_eq!(reassembler.add(&opened.payload).unwrap(), Some(resize_instruction()));
}

#[test]
fn server_datagram_vector_through_the_packet_layer() {
    let key = sheet_key();
    // The client stamps 0x1200; the server receives it at 0xABCD and answers at once (hold 0).
    let mut client = PacketLayer::new(&key, Direction::ToServer);
    let from_client = client.seal(Instant::from_millis(0x1200), b"0123456789").unwrap();
    let mut server = PacketLayer::with_next_seq(&key, Direction::ToClient, 5);
    let now = Instant::from_millis(0xABCD);
    server.open(now, &from_client).unwrap();

    let zlib = &h(SERVER_PLAIN)[14..];
    let fragment = Fragment { id: 9, num: 0, is_final: true, contents: zlib }.to_bytes();
    assert_eq!(hex::encode(server.seal(now, &fragment).unwrap()), SERVER_WIRE);

    let opened = client.open(Instant::from_millis(0x1250), &h(SERVER_WIRE)).unwrap();
    assert_eq!(opened.rtt_sample, Some(std::time::Duration::from_millis(0x50)));
    let instruction = Reassembler::new().add(&opened.payload).unwrap().unwrap();
    assert_eq!(encode_instruction(&instruction), h(SERVER_INSTRUCTION));
    assert_eq!(
        instruction,
        Instruction {
            old_num: StateNum(2),
            new_num: StateNum(3),
            ack_num: StateNum(7),
            throwaway_num: StateNum(2),
            diff: encode_host_message(&[
                HostEvent::EchoAck(StateNum(3)),
                HostEvent::Bytes(b"hi".to_vec())
            ]),
            chaff: h("aabb"),
        }
    );
}

#[test]
fn our_fragmenter_output_is_accepted_like_the_vector() {
    // Deflate output may differ between zlib implementations; the stream must round-trip.
    let mut fragmenter = Fragmenter::new(tern::wire::DEFAULT_MTU);
    let fragments = fragmenter.fragment(&resize_instruction()).unwrap();
    assert_eq!(fragments.len(), 1);
    assert_eq!(fragments[0][..10], h("0000000000000001 8000")[..]);
    assert_eq!(Reassembler::new().add(&fragments[0]).unwrap(), Some(resize_instruction()));
}

#[test]
fn real_datagrams_of_section_11_2() {
    let key: Key = "WLThFE98+opDlEMyexqWsA".parse().unwrap();
    let mut server = PacketLayer::new(&key, Direction::ToClient);
    let first = h(
        "0000000000000000ef0681032d5c5e5f7a165d52a1a2a5ead044a7a4cdcd7011ee558a13d0a9acea421479f836b3e4b2af64acccaf3736315dd8e192f80fbc6935730b0df920828becc9cc5d14a40c18cb07b42e",
    );
    let opened = server.open(Instant::from_millis(0xbce0), &first).unwrap();
    let instruction = Reassembler::new().add(&opened.payload).unwrap().unwrap();
    assert_eq!(
        encode_instruction(&instruction),
        h("0802100018012000280032080a061a04285030183a108703b2793cc6746d9a2cc5cd5f4c342a")
    );
    assert_eq!(
        decode_user_message(&instruction.diff).unwrap(),
        vec![UserEvent::Resize { cols: 80, rows: 24 }]
    );

    let mut client = PacketLayer::new(&key, Direction::ToServer);
    let mut reassembler = Reassembler::new();
    let second = h(
        "8000000000000001a592215b8125983a4e339b39f929dedd713f358469e4515ad345544a8330c492d9d7b409edf085514cf95bd0232bf35e92605361c568eca1bab344cf99ed19f9fdbd3b8d771a64c5f51c975656",
    );
    let opened = client.open(Instant::from_millis(0xbde8), &second).unwrap();
    let instruction = reassembler.add(&opened.payload).unwrap().unwrap();
    assert_eq!(
        encode_instruction(&instruction),
        h("08021000180220012800321b0a043a0240010a131211220f1b5b3f32356c0a24201b5b3f3235683a027f44")
    );
    assert_eq!(
        decode_host_message(&instruction.diff).unwrap(),
        vec![HostEvent::EchoAck(StateNum(1)), HostEvent::Bytes(b"\x1b[?25l\n$ \x1b[?25h".to_vec())]
    );
}
