//! Every page-relay protocol message parser, both sides (they share `relay_proto::decode`):
//! the input is one line (or HTTP body) decoded as every message type. The page's readers of
//! those answers, and the short text parsers of addresses, keys and saved sessions, get the
//! same bytes.
//!
//! Invariants: no panic; whatever decodes encodes to one line without a newline, and that line
//! decodes to an equal message; a saved session that decodes encodes and decodes to itself.
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use tern::relay_client::{
    SavedSession, answer, control_after_ready, decode_point, fragment_params, history_response,
    info_response, key_text, parse_mosh_connect, sessions_response, takeover,
};
use tern::relay_proto::Sha256;
use tern::relay_proto::offer::{offered_name, openable_url};
use tern::relay_proto::{
    ApiError, ClientMessage, DownloadAck, DownloadReply, DownloadRequest, HistoryPage,
    HistoryRequest, HistorySearch, HistorySearchResult, Message, RelayInfo, ServerMessage,
    SessionList, StreamRequest, UploadHeader, UploadReply, decode, encode, json,
};
use tern::wire::{Key, parse_connect_line};

fn round_trip<T: Message + PartialEq + Debug>(line: &[u8]) {
    if let Ok(message) = decode::<T>(line) {
        let bytes = encode(&message);
        assert!(!bytes.contains(&b'\n'), "an encoded message holds a newline");
        let again = decode::<T>(&bytes).unwrap_or_else(|e| {
            panic!("{message:?} encoded as {:?}: {e}", String::from_utf8_lossy(&bytes))
        });
        assert_eq!(again, message);
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = json::parse(data);
    round_trip::<ClientMessage>(data);
    round_trip::<ServerMessage>(data);
    round_trip::<StreamRequest>(data);
    round_trip::<DownloadRequest>(data);
    round_trip::<DownloadReply>(data);
    round_trip::<DownloadAck>(data);
    round_trip::<UploadHeader>(data);
    round_trip::<UploadReply>(data);
    round_trip::<HistoryRequest>(data);
    round_trip::<HistoryPage>(data);
    round_trip::<HistorySearch>(data);
    round_trip::<HistorySearchResult>(data);
    round_trip::<RelayInfo>(data);
    round_trip::<SessionList>(data);
    round_trip::<ApiError>(data);

    // The page's readers of the relay's answers.
    if let Ok(ready) = answer(Some(data)) {
        let _ = takeover(None, &ready);
    }
    let _ = control_after_ready(data);
    for status in [200, 401, 429, 503] {
        let _ = info_response(status, data);
        let _ = sessions_response(status, data);
        let _ = history_response::<HistoryPage>(status, data);
    }

    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = parse_connect_line(text);
    let _ = parse_mosh_connect(text);
    let _ = text.parse::<Key>();
    let _ = fragment_params(text);
    let _ = key_text(text);
    let _ = openable_url(text);
    let _ = offered_name(text);
    if let Ok(digest) = text.parse::<Sha256>() {
        assert_eq!(digest.to_string(), text, "a SHA-256 prints as it parsed");
    }
    let _ = tern::relay_client::route_under_page(text, text);
    let _ = decode_point(text);
    if let Some(saved) = SavedSession::decode(text) {
        let again = SavedSession::decode(&saved.encode()).expect("a saved session decodes");
        assert_eq!(again, saved);
    }
});
