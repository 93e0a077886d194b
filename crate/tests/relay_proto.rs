//! Every page-relay protocol message: its exact line on the wire (as docs/RELAY.md shows it) and
//! the round trip through the one codec both ends use.

use tern::relay_proto::control::{MAX_MESSAGE, Ready};
use tern::relay_proto::framing::FRAMING_VERSION;
use tern::relay_proto::upload::MAX_HEADER;
use tern::relay_proto::*;

/// Encodes, checks the exact line, decodes, checks equality.
fn round_trip<T: Message + PartialEq + std::fmt::Debug>(message: &T, wire: &str) {
    let line = encode_line(message);
    assert_eq!(String::from_utf8(line.clone()).unwrap(), format!("{wire}\n"));
    let mut buffer = LineBuffer::new(MAX_MESSAGE);
    buffer.push(&line);
    let back: T = decode(&buffer.next_line().unwrap().unwrap()).unwrap();
    assert_eq!(&back, message);
}

#[test]
fn client_messages() {
    let hello = Hello {
        protocol: Some(PROTOCOL_VERSION),
        token: Some("t0k".into()),
        mode: Some(Mode::Spawn),
        resume: Some("00ff00ff00ff00ff00ff00ff00ff00ff".into()),
        max_datagram_size: Some(1211),
        ..Hello::default()
    };
    round_trip(
        &ClientMessage::Hello(hello.clone()),
        &format!(
            r#"{{"type":"hello","protocol":{PROTOCOL_VERSION},"token":"t0k","mode":"spawn","resume":"00ff00ff00ff00ff00ff00ff00ff00ff","max_datagram_size":1211}}"#
        ),
    );
    let bridge = Hello {
        mode: Some(Mode::Bridge),
        host: Some("::1".into()),
        port: Some(60001),
        ..Hello::default()
    };
    round_trip(
        &ClientMessage::Hello(bridge),
        r#"{"type":"hello","mode":"bridge","host":"::1","port":60001}"#,
    );
    let on_host =
        Hello { mode: Some(Mode::Spawn), ssh_host: Some("devbox".into()), ..Hello::default() };
    round_trip(
        &ClientMessage::Hello(on_host),
        r#"{"type":"hello","mode":"spawn","ssh_host":"devbox"}"#,
    );
    round_trip(&ClientMessage::Ping, r#"{"type":"ping"}"#);
    assert!(!format!("{hello:?}").contains("t0k"), "Debug hides the token");
}

/// The challenge-response: the page's greet (protocol and nonce only), the relay's challenge,
/// the page's hello with its proof, and the API's challenge bodies and `Authorization` value.
#[test]
fn the_challenge_messages() {
    let (p, r) = (ProofNonce([0x11; 32]), ProofNonce([0x22; 32]));
    let (n11, n22) = ("11".repeat(32), "22".repeat(32));
    round_trip(
        &ClientMessage::Greet { protocol: PROTOCOL_VERSION, nonce: p, token_id: None },
        &format!(r#"{{"type":"greet","protocol":{PROTOCOL_VERSION},"nonce":"{n11}"}}"#),
    );
    let relay_proof = proof::prove("tok-of-the-relay", Prover::Relay, &p, &r);
    let challenge = Challenge { nonce: r, proof: relay_proof };
    round_trip(
        &ServerMessage::Challenge(control::ChallengeText(challenge)),
        &format!(r#"{{"type":"challenge","nonce":"{n22}","proof":"{relay_proof}"}}"#),
    );
    let page_proof = proof::prove("tok-of-the-relay", Prover::Page, &p, &r);
    let hello = Hello {
        protocol: Some(PROTOCOL_VERSION),
        proof: Some(control::ProofText(page_proof)),
        mode: Some(Mode::Spawn),
        ..Hello::default()
    };
    round_trip(
        &ClientMessage::Hello(hello),
        &format!(
            r#"{{"type":"hello","protocol":{PROTOCOL_VERSION},"proof":"{page_proof}","mode":"spawn"}}"#
        ),
    );
    let line = encode_line(&ChallengeRequest { nonce: p, token_id: None });
    assert_eq!(String::from_utf8(line).unwrap(), format!("{{\"nonce\":\"{n11}\"}}\n"));
    let line = encode_line(&challenge);
    assert_eq!(
        String::from_utf8(line).unwrap(),
        format!("{{\"nonce\":\"{n22}\",\"proof\":\"{relay_proof}\"}}\n")
    );
    assert_eq!(proof::authorization(&r, &page_proof), format!("Tern {n22}.{page_proof}"));
    // Malformed nonces and proofs are refused, not taken as something else.
    assert!(decode::<ClientMessage>(br#"{"type":"greet","protocol":8,"nonce":"abc"}"#).is_err());
    assert!(decode::<ClientMessage>(br#"{"type":"hello","proof":"XYZ"}"#).is_err());
}

#[test]
fn client_messages_refuse_unknown_fields() {
    assert!(decode::<ClientMessage>(br#"{"type":"hello","mode":"spawn","tokne":"x"}"#).is_err());
    assert!(decode::<ClientMessage>(br#"{"type":"shout"}"#).is_err());
}

#[test]
fn server_messages() {
    let ready = Ready {
        session: "ab".into(),
        mode: Mode::Bridge,
        port: 60001,
        key: None,
        max_datagram_size: 1211,
        framing: FRAMING_VERSION,
        resumed: false,
        seq_floor: 0,
        point: None,
        view: false,
        owner: None,
        off: None,
        info: None,
    };
    round_trip(
        &ServerMessage::Ready(ready.clone()),
        r#"{"type":"ready","session":"ab","mode":"bridge","port":60001,"max_datagram_size":1211,"framing":1,"resumed":false,"seq_floor":0}"#,
    );
    let spawned = Ready {
        key: Some("PWSoCIVurTVBGXAj873xNg".into()),
        resumed: true,
        seq_floor: 4096,
        point: Some("VFJQMQ==".into()),
        ..ready.clone()
    };
    round_trip(
        &ServerMessage::Ready(spawned.clone()),
        r#"{"type":"ready","session":"ab","mode":"bridge","port":60001,"key":"PWSoCIVurTVBGXAj873xNg","max_datagram_size":1211,"framing":1,"resumed":true,"seq_floor":4096,"point":"VFJQMQ=="}"#,
    );
    assert!(!format!("{spawned:?}").contains("VFJQ"), "Debug hides the point");
    let viewer = Ready {
        key: None,
        point: None,
        view: true,
        owner: Some("alice".into()),
        ..spawned.clone()
    };
    round_trip(
        &ServerMessage::Ready(viewer),
        r#"{"type":"ready","session":"ab","mode":"bridge","port":60001,"max_datagram_size":1211,"framing":1,"resumed":true,"seq_floor":4096,"view":true,"owner":"alice"}"#,
    );
    round_trip(
        &ServerMessage::Screen { cols: 80, rows: 24, full: true, data: b"\x1b[Hhi".to_vec() },
        r#"{"type":"screen","cols":80,"rows":24,"full":true,"data":"G1tIaGk="}"#,
    );
    round_trip(&ServerMessage::Viewers { count: 3 }, r#"{"type":"viewers","count":3}"#);
    let watch = Hello { resume: Some("ab".into()), view: true, ..Hello::default() };
    round_trip(&ClientMessage::Hello(watch), r#"{"type":"hello","resume":"ab","view":true}"#);
    // A session on an ssh host whose recorder cannot run says which features are off and why.
    let off = FeaturesOff {
        host: "devbox".into(),
        features: vec!["history".into(), "pictures".into(), "signals".into()],
        why: "its machine is aarch64, this relay is x86_64".into(),
    };
    let on_host = Ready { off: Some(off.clone()), ..ready.clone() };
    round_trip(
        &ServerMessage::Ready(on_host),
        r#"{"type":"ready","session":"ab","mode":"bridge","port":60001,"max_datagram_size":1211,"framing":1,"resumed":false,"seq_floor":0,"off":{"host":"devbox","features":["history","pictures","signals"],"why":"its machine is aarch64, this relay is x86_64"}}"#,
    );
    assert_eq!(
        off.sentence(),
        "History, pictures and signals are off on devbox: its machine is aarch64, this relay is x86_64."
    );
    let one = FeaturesOff { features: vec!["history".into()], why: "no sha256sum.".into(), ..off };
    assert_eq!(one.sentence(), "History is off on devbox: no sha256sum.");
    round_trip(&ServerMessage::Moved, r#"{"type":"moved"}"#);
    round_trip(
        &ClientMessage::Seed { point: "VFJQMQ==".into() },
        r#"{"type":"seed","point":"VFJQMQ=="}"#,
    );
    assert!(!format!("{spawned:?}").contains("PWSo"), "Debug hides the key");
    round_trip(
        &ServerMessage::error(ErrorCode::TargetNotAllowed, "no"),
        r#"{"type":"error","code":"target_not_allowed","message":"no"}"#,
    );
    round_trip(
        &ServerMessage::Ended { code: ErrorCode::SessionEnded, message: "bye".into() },
        r#"{"type":"ended","code":"session_ended","message":"bye"}"#,
    );
    round_trip(&ServerMessage::Pong, r#"{"type":"pong"}"#);
    round_trip(&ClientMessage::Hold { ms: 1000 }, r#"{"type":"hold","ms":1000}"#);
    round_trip(&ClientMessage::Hold { ms: 0 }, r#"{"type":"hold","ms":0}"#);
    round_trip(
        &ServerMessage::Held { datagrams: vec![vec![0, 1, 2, 255], vec![], vec![b'x'; 3]] },
        r#"{"type":"held","datagrams":["AAEC/w==","","eHh4"]}"#,
    );
}

#[test]
fn resume_points_travel_typed_as_base64_and_an_unreadable_one_is_no_error() {
    use tern::session::ResumePoint;
    use tern::wire::StateNum;
    let point = ResumePoint {
        server_num: StateNum(12),
        screen_cols: 80,
        screen_rows: 24,
        screen: Vec::new(),
        input_acked: StateNum(4),
        input_next: StateNum(9),
        input_pending: Vec::new(),
        next_seq: 300,
        next_fragment_id: 40,
    };
    let text = CarriedPoint::text_of(&point);
    let seed = ClientMessage::Seed { point: CarriedPoint::from(point.clone()) };
    round_trip(&seed, &format!(r#"{{"type":"seed","point":"{text}"}}"#));
    let line = format!(r#"{{"type":"seed","point":"{text}"}}"#);
    match decode::<ClientMessage>(line.as_bytes()).unwrap() {
        ClientMessage::Seed { point: carried } => assert_eq!(carried.point(), Some(&point)),
        other => panic!("{other:?}"),
    }
    // Text that is not a point: the message still reads, without a point (the relay ignores
    // such a seed, the page such a `ready.point`).
    let odd: ClientMessage = decode(br#"{"type":"seed","point":"not base64!"}"#).unwrap();
    assert_eq!(odd, ClientMessage::Seed { point: CarriedPoint::Unreadable("not base64!".into()) });
    let ready: ServerMessage = decode(
        br#"{"type":"ready","session":"ab","mode":"spawn","port":1,"max_datagram_size":1211,"framing":1,"resumed":true,"seq_floor":1,"point":"VFJQMQ=="}"#,
    )
    .unwrap();
    let ServerMessage::Ready(ready) = ready else { panic!("{ready:?}") };
    assert_eq!(ready.point.as_ref().and_then(CarriedPoint::point), None);
    // A point that is not a string is a malformed message, as before.
    assert!(decode::<ClientMessage>(br#"{"type":"seed","point":7}"#).is_err());
}

#[test]
fn held_datagrams_that_are_not_base64_are_refused() {
    let bad = decode::<ServerMessage>(br#"{"type":"held","datagrams":["not base64!"]}"#);
    assert!(bad.is_err(), "{bad:?}");
    let not_strings = decode::<ServerMessage>(br#"{"type":"held","datagrams":[1]}"#);
    assert!(not_strings.is_err(), "{not_strings:?}");
    for bad in [r#"{"type":"hold","ms":"1"}"#, r#"{"type":"hold","ms":-1}"#, r#"{"type":"hold"}"#] {
        assert!(decode::<ClientMessage>(bad.as_bytes()).is_err(), "{bad}");
    }
    let too_long = decode::<ClientMessage>(br#"{"type":"hold","ms":99999999999}"#);
    assert!(too_long.is_err(), "more than a u32: {too_long:?}");
}

#[test]
fn every_error_code_has_its_wire_name() {
    for code in ErrorCode::ALL {
        assert_eq!(ErrorCode::parse(code.as_str()), code);
        round_trip(
            &ServerMessage::Ended { code, message: "m".into() },
            &format!(r#"{{"type":"ended","code":"{}","message":"m"}}"#, code.as_str()),
        );
    }
    // A newer relay's code is not a broken message, just one this page cannot act on.
    let m: ServerMessage =
        decode(br#"{"type":"error","code":"solar_flare","message":"m"}"#).unwrap();
    assert_eq!(m, ServerMessage::error(ErrorCode::Unknown, "m"));
    assert!(!ErrorCode::Unknown.is_retryable());
    assert!(ErrorCode::ShuttingDown.is_retryable());
    assert!(ErrorCode::SessionEnded.session_is_over());
}

#[test]
fn info_and_api_bodies() {
    let info = RelayInfo {
        version: "0.1.0".into(),
        commit: "1a2b3c4d5e6f".into(),
        protocol: PROTOCOL_VERSION,
        mode: Mode::Spawn,
        port: 7480,
        webtransport_path: WEBTRANSPORT_PATH.into(),
        cert_hashes: vec!["AAEC".into(), "not base64!".into()],
        cert_hash_algorithm: "sha-256".into(),
        cert_self_signed: true,
        framing: FRAMING_VERSION,
        max_datagram_size: 1211,
        limits: RelayLimits {
            max_sessions: 64,
            max_spawned: 16,
            datagram_rate: 2000,
            datagram_burst: 400,
            idle_timeout_secs: 3600,
            max_control_message: MAX_MESSAGE,
        },
        paste: PasteInfo { available: true, max_size: Some(1 << 26), reason: None },
        bridge_allow: vec!["127.0.0.1:60001-60999".into()],
        history_lines: 100_000,
    };
    round_trip(
        &info,
        &format!(
            concat!(
                r#"{{"version":"0.1.0","commit":"1a2b3c4d5e6f","protocol":{},"mode":"spawn","port":7480,"webtransport_path":"/wt","#,
                r#""cert_hashes":["AAEC","not base64!"],"cert_hash_algorithm":"sha-256","cert_self_signed":true,"#,
                r#""framing":1,"max_datagram_size":1211,"limits":{{"max_sessions":64,"max_spawned":16,"#,
                r#""datagram_rate":2000,"datagram_burst":400,"idle_timeout_secs":3600,"max_control_message":4096}},"#,
                r#""paste":{{"available":true,"max_size":67108864}},"bridge_allow":["127.0.0.1:60001-60999"],"history_lines":100000}}"#
            ),
            PROTOCOL_VERSION
        ),
    );
    assert_eq!(info.cert_hash_bytes(), vec![vec![0u8, 1, 2]]);
    assert_eq!(info.relay_build(), "tern-relay 0.1.0 (1a2b3c4d5e6f)");
    // A relay from before `commit` still connects; the page names its version alone.
    let line = String::from_utf8(encode(&info)).unwrap().replace(r#""commit":"1a2b3c4d5e6f","#, "");
    let older = decode::<RelayInfo>(line.as_bytes()).unwrap();
    assert_eq!(older, RelayInfo { commit: String::new(), ..info.clone() });
    assert_eq!(older.relay_build(), "tern-relay 0.1.0");
    // `ready` carries the same info, as an object of its own (an early hello's page reads it
    // there instead of waiting for `/api/info`); a `ready` from a relay before the field has none.
    let info_line = String::from_utf8(encode(&info)).unwrap();
    let ready_line = r#"{"type":"ready","session":"ab","mode":"spawn","port":60001,"max_datagram_size":1211,"framing":1,"resumed":false,"seq_floor":0}"#;
    let with_info =
        format!("{},\"info\":{}}}", &ready_line[..ready_line.len() - 1], info_line.trim_end());
    let Ok(ServerMessage::Ready(ready)) = decode::<ServerMessage>(with_info.as_bytes()) else {
        panic!("a ready with its info: {with_info}")
    };
    assert_eq!(ready.info.as_deref(), Some(&info));
    assert_eq!(String::from_utf8(encode(&ServerMessage::Ready(ready.clone()))).unwrap(), with_info);
    let Ok(ServerMessage::Ready(older)) = decode::<ServerMessage>(ready_line.as_bytes()) else {
        panic!("a ready without info")
    };
    assert_eq!(older, Ready { info: None, ..ready });
    // An info that is not one is an error in the line, not a ready without it.
    let broken = ready_line.replace(r#""seq_floor":0"#, r#""seq_floor":0,"info":{"version":1}"#);
    assert!(decode::<ServerMessage>(broken.as_bytes()).is_err(), "{broken}");
    let unavailable = RelayInfo {
        paste: PasteInfo { available: false, max_size: None, reason: Some("bridge".into()) },
        ..info
    };
    let line = String::from_utf8(encode(&unavailable)).unwrap();
    assert!(line.contains(r#""paste":{"available":false,"reason":"bridge"}"#), "{line}");
    assert_eq!(decode::<RelayInfo>(line.as_bytes()).unwrap(), unavailable);
    round_trip(
        &SessionList {
            sessions: vec![SessionSummary {
                id: "ab".into(),
                port: 60001,
                created: 7,
                last_active: 9,
                cols: 80,
                rows: 24,
                title: "vim \"a\"".into(),
                attached: true,
                host: "devbox".into(),
            }],
            ssh_hosts: vec!["devbox".into(), "me@build".into()],
        },
        r#"{"sessions":[{"id":"ab","port":60001,"created":7,"last_active":9,"cols":80,"rows":24,"title":"vim \"a\"","attached":true,"host":"devbox"}],"ssh_hosts":["devbox","me@build"]}"#,
    );
    round_trip(
        &ApiError {
            error: "rate_limited".into(),
            message: "too many failed attempts".into(),
            retry_after_secs: Some(3),
        },
        r#"{"error":"rate_limited","message":"too many failed attempts","retry_after_secs":3}"#,
    );
}

#[test]
fn upload_stream_messages() {
    let hash = "a".repeat(64);
    round_trip(
        &UploadHeader {
            hash: hash.clone(),
            size: 70,
            mime: Some("image/png".into()),
            eager: false,
        },
        &format!(r#"{{"hash":"{hash}","size":70,"mime":"image/png"}}"#),
    );
    round_trip(
        &UploadHeader { hash: hash.clone(), size: 70, mime: None, eager: false },
        &format!(r#"{{"hash":"{}","size":70}}"#, "a".repeat(64)),
    );
    round_trip(
        &UploadHeader { hash, size: 70, mime: None, eager: true },
        &format!(r#"{{"hash":"{}","size":70,"eager":true}}"#, "a".repeat(64)),
    );
    round_trip(&UploadReply::Have { have: 12, path: None }, r#"{"have":12}"#);
    round_trip(
        &UploadReply::Have { have: 70, path: Some("/p/x.png".into()) },
        r#"{"have":70,"path":"/p/x.png"}"#,
    );
    round_trip(
        &UploadReply::Ack { acked: 40, relay_time_us: 123456 },
        r#"{"acked":40,"relay_time_us":123456}"#,
    );
    round_trip(&UploadReply::Path { path: "/p/x.png".into() }, r#"{"path":"/p/x.png"}"#);
    for code in UploadErrorCode::ALL {
        assert_eq!(UploadErrorCode::parse(code.as_str()), code);
        round_trip(
            &UploadReply::Error { error: code, message: "m".into() },
            &format!(r#"{{"error":"{}","message":"m"}}"#, code.as_str()),
        );
    }
    assert!(
        encode_line(&UploadHeader {
            hash: "a".repeat(64),
            size: u64::MAX,
            mime: Some("x".repeat(100)),
            eager: true,
        })
        .len()
            < MAX_HEADER
    );
}

#[test]
fn hostile_lines_are_errors_not_panics() {
    let inputs: [&[u8]; 8] = [
        b"",
        b"{",
        b"null",
        b"[1,2,3]",
        b"{\"type\":\"ready\"}",
        b"{\"have\":-1}",
        b"{\"acked\":1e400,\"relay_time_us\":1}",
        b"\xff\xfe",
    ];
    for line in inputs {
        let _ = decode::<ServerMessage>(line);
        let _ = decode::<ClientMessage>(line);
        let _ = decode::<UploadReply>(line);
        let _ = decode::<UploadHeader>(line);
        let _ = decode::<RelayInfo>(line);
    }
    assert!(decode::<UploadReply>(b"{\"have\":-1}").is_err());
    assert!(decode::<ClientMessage>(br#"{"type":"hello","mode":"spawn","port":70000}"#).is_err());
    assert!(decode::<ClientMessage>(br#"{"type":"hello","token":"a","token":"b"}"#).is_err());
    // A newer relay's extra fields do not break the page.
    let m: ServerMessage = decode(br#"{"type":"pong","news":[1.5,{"x":null}]}"#).unwrap();
    assert_eq!(m, ServerMessage::Pong);
}
