//! Writes the seed corpora, fuzz/corpus/<target>/, from the golden mosh captures
//! (crate/tests/fixtures/) and from messages the core's encoders and test suites produce.
//!
//!     cd fuzz && cargo run --example seed      (scripts/fuzz.sh seed)
//!
//! Seeds are named `seed-*`; files libFuzzer adds to a corpus (its hashes) are left alone.

use std::fs;
use std::path::{Path, PathBuf};

use tern::relay_proto::framing::Splitter;
use tern::relay_proto::offer::{Offer, OfferAnswer, Offered};
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{
    ClientMessage, DownloadAck, DownloadReply, DownloadRequest, ErrorCode, HistoryPage,
    HistoryRequest, HistorySearch, HistorySearchResult, SearchHit, ServerMessage, UploadHeader,
    UploadReply, encode, encode_line,
};
use tern::session::{ClientSession, SessionConfig, Shadow};
use tern::terminal::Complete;
use tern::time::Instant;
use tern::wire::{HostEvent, Instruction, decode_host_message, decode_instruction};
use tern_fuzz::{key, write_records};

/// One captured datagram: the fields the seeds need.
struct Captured {
    to_client: bool,
    wire: Vec<u8>,
    plain: Vec<u8>,
    instruction: Option<Instruction>,
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("\"{name}\": \""))? + name.len() + 5;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex")).collect()
}

fn capture(path: &Path) -> Vec<Captured> {
    let text = fs::read_to_string(path).expect("golden capture");
    text.lines()
        .filter_map(|line| {
            Some(Captured {
                to_client: field(line, "dir")? == "s2c",
                wire: unhex(field(line, "wire")?),
                plain: unhex(field(line, "plain")?),
                instruction: field(line, "inst")
                    .filter(|i| !i.is_empty())
                    .and_then(|i| decode_instruction(&unhex(i)).ok()),
            })
        })
        .collect()
}

/// The terminal bytes the server sent in a capture, in order.
fn host_bytes(capture: &[Captured]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in capture.iter().filter(|c| c.to_client) {
        let Some(instruction) = &c.instruction else { continue };
        for event in decode_host_message(&instruction.diff).unwrap_or_default() {
            if let HostEvent::Bytes(bytes) = event {
                out.extend_from_slice(&bytes);
            }
        }
    }
    out
}

struct Corpus {
    root: PathBuf,
    written: usize,
    bytes: usize,
}

impl Corpus {
    fn put(&mut self, target: &str, name: &str, data: &[u8]) {
        let dir = self.root.join(target);
        fs::create_dir_all(&dir).expect("corpus directory");
        fs::write(dir.join(format!("seed-{name}")), data).expect("seed written");
        self.written += 1;
        self.bytes += data.len();
    }
}

/// Output terminal programs write, one piece each (the shapes of `terminal_props.rs`' tokens).
const TERMINAL_SNIPPETS: &[&[u8]] = &[
    b"hello world\r\n$ ",
    "日本語 ＡＢ e\u{301} 😀 a\u{200d}b \u{a0}ÿ".as_bytes(),
    b"\x1b[2J\x1b[H\x1b[1;31mred\x1b[0m \x1b[38;5;200mx\x1b[48;2;1;2;3my\x1b[m",
    b"\x1b[5;10r\x1b[10;1H\n\n\n\x1bM\x1bD\x1bE\x1b[r",
    b"\x1b[?1049h\x1b[H\x1b[2Jfull screen\x1b[?1049l",
    b"\x1b7\x1b[3;4H\x1b[4hins\x1b[4l\x1b8\x1b[2@\x1b[3P\x1b[2X\x1b[K\x1b[1K\x1b[2K",
    b"\x1b]0;title\x07\x1b]2;win\x1b\\\x1b]1;icon\x07\x1b]52;c;aGVsbG8=\x07\x07",
    b"\x1b[?25l\x1b[?1000h\x1b[?1006h\x1b[?2004h\x1b[?1004h\x1b[?5h\x1b[?6h\x1b[?7l",
    b"\t\x1bH\x1b[3g\x1b[0g\x1b[2I\x1b[Z\x08\x08\r",
    b"\x1b#8\x1bc\x1b[!p\x1b[10S\x1b[2T\x1b[3L\x1b[2M\x1b[5d\x1b[20G\x1b[2A\x1b[3B\x1b[4C\x1b[5D",
    b"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890",
    b"\x1b]8;;http://x/\x07link\x1b]8;;\x07 \x1bP1$r\x1b\\ \x1b[>c \x1b[6n",
];

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures = here.join("../crate/tests/fixtures");
    let mut corpus = Corpus { root: here.join("corpus"), written: 0, bytes: 0 };
    let mut files: Vec<PathBuf> = fs::read_dir(fixtures.join("golden"))
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let captures: Vec<(String, Vec<Captured>)> = files
        .iter()
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), capture(p)))
        .collect();

    // --- wire_datagram: each capture's datagrams, plaintexts, fragments and diffs.
    for (name, capture) in &captures {
        let raw = write_records(
            capture
                .iter()
                .map(|c| [&[0u8][..], &c.wire].concat())
                .collect::<Vec<_>>()
                .iter()
                .map(Vec::as_slice),
        );
        corpus.put("wire_datagram", &format!("{name}-wire"), &raw);
        for (dir, to_client) in [("s2c", true), ("c2s", false)] {
            let plain: Vec<Vec<u8>> = capture
                .iter()
                .filter(|c| c.to_client == to_client)
                .map(|c| [&[1u8][..], &c.plain].concat())
                .collect();
            corpus.put(
                "wire_datagram",
                &format!("{name}-{dir}-plain"),
                &write_records(plain.iter().map(Vec::as_slice)),
            );
        }
        let mut inner: Vec<Vec<u8>> = Vec::new();
        for c in capture.iter().filter(|c| c.plain.len() > 4) {
            inner.push([&[2u8][..], &c.plain[4..]].concat());
            if let Some(i) = &c.instruction {
                inner.push([&[3u8][..], &i.diff].concat());
            }
        }
        corpus.put(
            "wire_datagram",
            &format!("{name}-fragments"),
            &write_records(inner.iter().map(Vec::as_slice)),
        );
    }

    // --- transport_session: the captured server instructions as programs, plus a session
    // with reordering, a resize, typing, timers and a shutdown.
    let clamp = |n: u64| n.min(254) as u8;
    for (name, capture) in &captures {
        let mut program = Vec::new();
        for c in capture.iter().filter(|c| c.to_client) {
            let Some(i) = &c.instruction else { continue };
            let events = decode_host_message(&i.diff).unwrap_or_default();
            program.extend_from_slice(&[
                0,
                clamp(i.old_num.0),
                clamp(i.new_num.0),
                clamp(i.ack_num.0),
                clamp(i.throwaway_num.0),
            ]);
            let mut bytes = Vec::new();
            let mut kind = 1u8;
            let (mut cols, mut rows, mut echo) = (0, 0, 0);
            for e in events {
                match e {
                    HostEvent::Bytes(b) => bytes.extend_from_slice(&b),
                    HostEvent::Resize { cols: c, rows: r } => {
                        kind |= 0x10;
                        (cols, rows) = (c.min(255) as u8, r.min(255) as u8);
                    }
                    HostEvent::EchoAck(n) => {
                        kind |= 0x20;
                        echo = clamp(n.0);
                    }
                }
            }
            bytes.truncate(255);
            program.push(kind);
            program.push(bytes.len() as u8);
            program.extend_from_slice(&bytes);
            if kind & 0x10 != 0 {
                program.extend_from_slice(&[cols, rows]);
            }
            if kind & 0x20 != 0 {
                program.push(echo);
            }
            program.extend_from_slice(&[200, 0]); // mtu, delivery
            program.extend_from_slice(&[5, 10]); // 40 ms, timers
        }
        corpus.put("transport_session", name, &program);
    }
    let mut scenario = Vec::new();
    // State 2 (on 1) before state 1, then 1; keys; a resize; a duplicate; an ack; shutdown.
    scenario.extend_from_slice(&[0, 1, 2, 1, 0, 1, 5]);
    scenario.extend_from_slice(b" worl");
    scenario.extend_from_slice(&[0, 1]);
    scenario.extend_from_slice(&[0, 0, 1, 1, 0, 0x31, 5]);
    scenario.extend_from_slice(b"hello");
    scenario.extend_from_slice(&[40, 10, 1, 0, 0x03]);
    scenario.extend_from_slice(&[4, 3, b'l', b's', b'\r', 5, 25, 6, 100, 30]);
    scenario.extend_from_slice(&[1, 2, 3, 2, 1, 1, 3, b'd', b'\r', b'\n', 3, 2]);
    scenario
        .extend_from_slice(&[3, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    scenario.extend_from_slice(&[2, 12, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0]);
    scenario.extend_from_slice(&[0, 3, 255, 3, 3, 2, 0, 0, 0, 5, 250, 7, 255, 5, 250, 5, 250]);
    corpus.put("transport_session", "scenario", &scenario);

    // --- terminal_emulator, render_roundtrip, history: captured screens and snippets.
    let mut streams: Vec<(String, Vec<u8>)> = captures
        .iter()
        .map(|(name, c)| (name.clone(), host_bytes(c)))
        .filter(|(_, b)| !b.is_empty())
        .collect();
    streams.push((
        "client-screen".into(),
        fs::read(fixtures.join("terminal/client-screen.bin")).expect("screen"),
    ));
    for (i, snippet) in TERMINAL_SNIPPETS.iter().enumerate() {
        streams.push((format!("snippet{i}"), snippet.to_vec()));
    }
    streams.push(("snippets".into(), TERMINAL_SNIPPETS.concat()));
    for (name, bytes) in &streams {
        let bytes = &bytes[..bytes.len().min(16 << 10)];
        corpus.put("terminal_emulator", name, &[&[79, 23, 7, 1, 39, 11][..], bytes].concat());
        let half = (bytes.len() / 2) as u16;
        let [lo, hi] = half.to_le_bytes();
        corpus.put("render_roundtrip", name, &[&[39, 11, lo, hi, 1, 59, 19][..], bytes].concat());
        corpus.put("history", name, &[&[19, 4, 0x0f, 1, b'e'][..], bytes].concat());
    }
    corpus.put(
        "history",
        "regex",
        &[&[29, 2, 0x06, 6][..], b"h.l+o\\b", TERMINAL_SNIPPETS[0], b"\n\x1b[31mhello\x1b[0m\n"]
            .concat(),
    );

    // --- relay_framing: captured datagrams framed at the browser's limit, and as they are.
    for (name, capture) in captures.iter().take(4) {
        let mut splitter = Splitter::new();
        let mut framed = Vec::new();
        for c in capture.iter().filter(|c| c.to_client) {
            splitter.split(&c.wire, 1211, &mut framed).expect("a mosh datagram splits");
        }
        let mut records: Vec<&[u8]> = framed.iter().map(Vec::as_slice).collect();
        records.extend(capture.iter().take(6).map(|c| c.wire.as_slice()));
        corpus.put(
            "relay_framing",
            name,
            &[&1211u16.to_le_bytes()[..], &write_records(records)].concat(),
        );
    }

    // --- relay_messages, relay_streams: every message type, as the encoders and tests write them.
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let hash = "ab".repeat(32);
    lines.push(encode(&ServerMessage::error(ErrorCode::TargetNotAllowed, "no")));
    lines.push(encode(&ServerMessage::Offer(Offer {
        id: "0f0f".into(),
        what: Offered::File { name: "report.pdf".into(), size: 70_000, sha256: hash.clone() },
    })));
    lines.push(encode(&ServerMessage::Offer(Offer {
        id: "1e".into(),
        what: Offered::Url { url: "https://example.com/a?b=c".into() },
    })));
    for answer in [
        OfferAnswer::Saved,
        OfferAnswer::Opened,
        OfferAnswer::Dismissed,
        OfferAnswer::Failed { message: "disk full".into() },
    ] {
        lines.push(encode(&ClientMessage::Answer { id: "0f0f".into(), answer }));
    }
    lines.push(encode(&ClientMessage::Seed { point: "VFJQMQ==".into() }));
    lines.push(encode(&ClientMessage::Hold { ms: 1000 }));
    lines.push(encode(&ServerMessage::Held { datagrams: vec![vec![0, 1, 2], vec![0xff; 40]] }));
    lines.push(encode(&UploadHeader {
        hash: hash.clone(),
        size: 70,
        mime: Some("image/png".into()),
        eager: false,
    }));
    lines.push(encode(&UploadReply::Error {
        error: tern::relay_proto::UploadErrorCode::TooLarge,
        message: "m".into(),
    }));
    lines.push(encode(&DownloadRequest { download: "0f0f".into(), from: 4096 }));
    lines.push(encode(&DownloadReply::Start { size: 70_000, from: 4096 }));
    lines.push(encode(&DownloadReply::Error { message: "gone".into(), gone: true }));
    lines.push(encode(&DownloadAck { acked: 8192, page_time_us: 123_456 }));
    lines.push(encode(&HistoryRequest { session: "ab".into(), before: Some(100), count: 50 }));
    lines.push(encode(&HistoryPage {
        first: 0,
        end: 3,
        start: 1,
        lines: vec!["\x1b[31mred\x1b[0m".into(), "plain \"q\" é".into()],
    }));
    lines.push(encode(&HistorySearch {
        session: "ab".into(),
        pattern: "h.llo".into(),
        case_sensitive: false,
        regex: true,
    }));
    lines.push(encode(&HistorySearchResult {
        first: 0,
        end: 9,
        hits: vec![SearchHit { line: 2, start: 0, end: 5 }],
        total_hits: 1,
        truncated: false,
    }));
    for json in RELAY_JSON {
        lines.push(json.as_bytes().to_vec());
    }
    for (i, line) in lines.iter().enumerate() {
        corpus.put("relay_messages", &format!("{i:02}"), line);
    }
    corpus.put("relay_messages", "connect-line", b"MOSH CONNECT 60001 WLThFE98+opDlEMyexqWsA");
    corpus.put(
        "relay_messages",
        "url",
        b"https://host:8443/#key=WLThFE98%2BopDlEMyexqWsA&port=60001",
    );
    let mut stream: Vec<Vec<u8>> = lines.iter().map(|l| [l.as_slice(), b"\n"].concat()).collect();
    stream.push(encode_line(&ClientMessage::Ping)[..5].to_vec());
    stream.push(b"ing\"}\n\x89PNG raw upload bytes".to_vec());
    corpus.put(
        "relay_streams",
        "lines",
        &[&[255u8][..], &write_records(stream.iter().map(Vec::as_slice))].concat(),
    );
    let frames: Vec<Vec<u8>> = vec![
        Frame::Control(&encode_line(&ClientMessage::Ping)).encode(),
        Frame::Datagram(&captures[0].1[0].wire).encode(),
        Frame::Open(1).encode(),
        Frame::Data(1, &encode_line(&UploadHeader { hash, size: 3, mime: None, eager: false }))
            .encode(),
        Frame::Data(1, b"abc").encode(),
        Frame::Fin(1).encode(),
        Frame::Reset(u32::MAX).encode(),
    ];
    corpus.put(
        "relay_streams",
        "websocket",
        &[&[63u8][..], &write_records(frames.iter().map(Vec::as_slice))].concat(),
    );

    // --- resume_point: points of a client that received a real session, and of a shadow.
    let (_, real) =
        captures.iter().find(|(n, _)| n == "real-session").expect("real-session capture");
    let start = Instant::from_millis(1_000);
    let mut client: ClientSession<Complete> =
        ClientSession::new(SessionConfig::new(key(), 80, 24), start);
    let mut shadow = Shadow::new(&key(), start);
    for (i, c) in real.iter().filter(|c| c.to_client).enumerate() {
        let now = Instant::from_millis(1_000 + 10 * i as u64);
        client.handle_datagram(now, &c.wire);
        shadow.server_datagram(now, &c.wire);
        if i == 3 {
            client.handle_input(now, b"echo typed but not acked");
        }
        while let Some(d) = client.poll_transmit() {
            shadow.client_datagram(now, &d);
        }
    }
    corpus.put("resume_point", "client", &client.resume_point().encode());
    if let Ok(point) = shadow.resume_point() {
        corpus.put("resume_point", "shadow", &point.encode());
    }
    let fresh: ClientSession<Complete> =
        ClientSession::new(SessionConfig::new(key(), 20, 5), start);
    corpus.put("resume_point", "blank", &fresh.resume_point().encode());

    println!(
        "wrote {} seeds, {} bytes, under {}",
        corpus.written,
        corpus.bytes,
        corpus.root.display()
    );
}

/// Lines copied from the protocol tests (crate/tests/relay_proto.rs and relay_proto's own),
/// including ones that must be refused.
const RELAY_JSON: &[&str] = &[
    r#"{"type":"hello","protocol":7,"token":"t0k","mode":"spawn","resume":"00ff00ff00ff00ff00ff00ff00ff00ff","max_datagram_size":1211}"#,
    r#"{"type":"hello","mode":"bridge","host":"::1","port":60001}"#,
    r#"{"type":"hello","mode":"spawn","ssh_host":"devbox"}"#,
    r#"{"type":"hello","mode":"spawn","port":70000}"#,
    r#"{"type":"hello","token":"a","token":"b"}"#,
    r#"{"type":"ping"}"#,
    r#"{"type":"pong","news":[1.5,{"x":null}]}"#,
    r#"{"type":"moved"}"#,
    r#"{"type":"seed","point":"VFJQMQ=="}"#,
    r#"{"type":"ready","session":"ab","mode":"bridge","port":60001,"max_datagram_size":1211,"framing":1,"resumed":false,"seq_floor":0}"#,
    r#"{"type":"ready","session":"ab","mode":"bridge","port":60001,"key":"PWSoCIVurTVBGXAj873xNg","max_datagram_size":1211,"framing":1,"resumed":true,"seq_floor":4096,"point":"VFJQMQ=="}"#,
    r#"{"type":"ended","code":"session_ended","message":"bye"}"#,
    r#"{"type":"error","code":"solar_flare","message":"m"}"#,
    r#"{"version":"0.1.0","protocol":7,"mode":"spawn","port":7480,"webtransport_path":"/wt","cert_hashes":["AAEC","not base64!"],"cert_hash_algorithm":"sha-256","cert_self_signed":true,"framing":1,"max_datagram_size":1211,"limits":{"max_sessions":64,"max_spawned":16,"datagram_rate":2000,"datagram_burst":400,"idle_timeout_secs":3600,"max_control_message":4096},"paste":{"available":true,"max_size":67108864},"bridge_allow":["127.0.0.1:60001-60999"],"history_lines":100000}"#,
    r#"{"sessions":[{"id":"ab","port":60001,"created":7,"last_active":9,"cols":80,"rows":24,"title":"vim \"a\"","attached":true,"host":"devbox"}],"ssh_hosts":["devbox","me@build"]}"#,
    r#"{"error":"rate_limited","message":"too many failed attempts","retry_after_secs":3}"#,
    r#"{"have":70,"path":"/p/x.png"}"#,
    r#"{"acked":40,"relay_time_us":123456}"#,
    r#"{"path":"/p/x.png"}"#,
    r#"{"session":"a","count":1,"path":"/etc"}"#,
    r#"{"session":"a","count":99999999999}"#,
    r#"{"a":[true,false,{}],"b":"x\"\\\/\n\u00e9\ud83d\ude00"}"#,
];
