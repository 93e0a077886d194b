//! The byte streams between page and relay: WebSocket fallback frames, and the line buffer
//! that splits control and upload streams (on both sides) into messages.
//!
//! Input: `limit` then records (u16 LE length + bytes). Each record is decoded as a WebSocket
//! frame; then all records, one push each, are a stream read by a `LineBuffer` of at most
//! `(limit + 1) * 8` bytes a line, each line decoded as the messages a stream starts with or
//! carries (control, upload header, download request).
//!
//! Invariants: no panic; a frame that decodes encodes to a message that decodes to it; lines
//! hold no newline and fit the limit; the lines, their newlines and the rest are exactly the
//! bytes pushed, until the buffer reports a line too long.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern::relay_proto::websocket::Frame;
use tern::relay_proto::{
    ClientMessage, LineBuffer, ServerMessage, StreamRequest, UploadHeader, UploadReply, decode,
};
use tern_fuzz::{Reader, records};

fuzz_target!(|data: &[u8]| {
    let mut r = Reader(data);
    let limit = (usize::from(r.u8()) + 1) * 8;
    let records = records(r.rest());

    for record in &records {
        if let Ok(frame) = Frame::decode(record) {
            let bytes = frame.encode();
            assert_eq!(Frame::decode(&bytes), Ok(frame.clone()), "frame round trip");
        }
    }

    let mut buffer = LineBuffer::new(limit);
    let mut pushed = Vec::new();
    let mut read = Vec::new();
    'stream: for record in &records {
        let room = buffer.room();
        assert!(room <= limit);
        // A reader asks for at most `room` bytes at a time.
        let take = &record[..record.len().min(room.max(1))];
        buffer.push(take);
        pushed.extend_from_slice(take);
        loop {
            match buffer.next_line() {
                Ok(Some(line)) => {
                    assert!(!line.contains(&b'\n'));
                    assert!(line.len() < limit, "a line of {} bytes past {limit}", line.len());
                    let _ = decode::<ClientMessage>(&line);
                    let _ = decode::<ServerMessage>(&line);
                    let _ = decode::<UploadHeader>(&line);
                    let _ = decode::<UploadReply>(&line);
                    let _ = decode::<StreamRequest>(&line);
                    read.extend_from_slice(&line);
                    read.push(b'\n');
                }
                Ok(None) => break,
                Err(e) => {
                    assert_eq!(e.limit, limit);
                    break 'stream;
                }
            }
        }
        let mut whole = read.clone();
        whole.extend_from_slice(&buffer.clone().take_rest());
        assert_eq!(whole, pushed, "bytes lost or invented");
    }
});
