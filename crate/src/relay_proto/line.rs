//! The one line codec: newline-delimited JSON with a hard bound on line length.
//!
//! [`LineBuffer`] is sans-IO: the relay feeds it what a tokio stream read, the page what a
//! WHATWG stream read; both take whole lines out. [`encode_line`] and [`decode`] are the only
//! places a protocol message becomes bytes or comes back.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A line longer than the buffer's limit: the stream is broken or hostile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineError {
    pub limit: usize,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line longer than {} bytes", self.limit)
    }
}

impl std::error::Error for LineError {}

/// Bytes in, lines out. Holds at most `limit` bytes of an unfinished line.
#[derive(Debug, Clone)]
pub struct LineBuffer {
    buf: Vec<u8>,
    limit: usize,
}

impl LineBuffer {
    /// `limit`: longest line accepted, newline included.
    pub fn new(limit: usize) -> Self {
        LineBuffer { buf: Vec::new(), limit }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// How many more bytes a reader may ask for before the buffer is over its limit (reading
    /// no more than this keeps memory bounded by the limit).
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.buf.len())
    }

    /// The next whole line without its newline; `Ok(None)` while it is incomplete; an error
    /// once `limit` bytes hold no newline.
    pub fn next_line(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        let scan = self.buf.len().min(self.limit);
        match self.buf[..scan].iter().position(|&b| b == b'\n') {
            Some(at) => {
                let mut line: Vec<u8> = self.buf.drain(..=at).collect();
                line.pop();
                Ok(Some(line))
            }
            None if self.buf.len() >= self.limit => Err(LineError { limit: self.limit }),
            None => Ok(None),
        }
    }

    /// Whatever follows the last line taken (the start of an upload's raw content).
    pub fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// One message as a line of JSON with its newline.
pub fn encode_line<T: Serialize>(message: &T) -> Vec<u8> {
    // Our messages are plain structs and enums with string keys: serializing cannot fail.
    let mut v = serde_json::to_vec(message).unwrap_or_default();
    v.push(b'\n');
    v
}

/// Why a line is not the message it should be. The text never quotes the input: a token put
/// in the wrong field must not end up in a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub category: &'static str,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} error at line {} column {}", self.category, self.line, self.column)
    }
}

impl std::error::Error for DecodeError {}

/// One message from a line (without its newline).
pub fn decode<T: DeserializeOwned>(line: &[u8]) -> Result<T, DecodeError> {
    serde_json::from_slice(line).map_err(|e| DecodeError {
        category: match e.classify() {
            serde_json::error::Category::Io => "io",
            serde_json::error::Category::Syntax => "syntax",
            serde_json::error::Category::Data => "data",
            serde_json::error::Category::Eof => "eof",
        },
        line: e.line(),
        column: e.column(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_out_whole_and_in_order_however_the_bytes_arrive() {
        let mut b = LineBuffer::new(64);
        b.push(b"ab");
        assert_eq!(b.next_line(), Ok(None));
        b.push(b"c\nde\n\nf");
        assert_eq!(b.next_line(), Ok(Some(b"abc".to_vec())));
        assert_eq!(b.next_line(), Ok(Some(b"de".to_vec())));
        assert_eq!(b.next_line(), Ok(Some(Vec::new())));
        assert_eq!(b.next_line(), Ok(None));
        assert_eq!(b.take_rest(), b"f");
    }

    #[test]
    fn a_line_at_the_limit_without_newline_is_an_error() {
        let mut b = LineBuffer::new(8);
        b.push(b"1234567\n");
        assert_eq!(b.next_line(), Ok(Some(b"1234567".to_vec())));
        b.push(b"12345678");
        assert_eq!(b.room(), 0);
        assert_eq!(b.next_line(), Err(LineError { limit: 8 }));
        // A newline beyond the limit does not rescue it.
        b.push(b"\n");
        assert_eq!(b.next_line(), Err(LineError { limit: 8 }));
    }

    #[test]
    fn decode_errors_never_quote_the_input() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct T {
            n: u32,
        }
        for line in [&b"{\"n\":\"sekrit\"}"[..], b"sekrit", b"{\"sekrit\":1}", b"{\"n\":1"] {
            let e = decode::<T>(line).unwrap_err();
            assert!(!e.to_string().contains("sekrit"), "{e}");
        }
    }
}
