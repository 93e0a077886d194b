//! The one line codec: newline-delimited JSON with a hard bound on line length.
//!
//! [`LineBuffer`] is sans-IO: the relay feeds it what a tokio stream read, the page what a
//! WHATWG stream read; both take whole lines out. [`encode_line`] and [`decode`] are the only
//! places a protocol message becomes bytes or comes back; each message says how it is written
//! and read by implementing [`Message`].

use super::json::{self, DecodeError, Fields, ObjectWriter};

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

    /// Changes the longest line accepted (a stream whose messages grow once a peer is trusted).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
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

/// A protocol message: one JSON object, written and read by hand in [`super::json`].
pub trait Message: Sized {
    /// Writes the message's fields into its object.
    fn write(&self, w: &mut ObjectWriter<'_>);
    /// Reads the message from its object's fields.
    fn read(fields: Fields<'_>) -> Result<Self, DecodeError>;
}

/// One message as JSON, without a newline (an HTTP body).
pub fn encode<T: Message>(message: &T) -> Vec<u8> {
    let mut out = String::new();
    let mut w = ObjectWriter::new(&mut out);
    message.write(&mut w);
    w.finish();
    out.into_bytes()
}

/// One message as a line of JSON with its newline.
pub fn encode_line<T: Message>(message: &T) -> Vec<u8> {
    let mut v = encode(message);
    v.push(b'\n');
    v
}

/// One message from a line (without its newline) or an HTTP body.
pub fn decode<T: Message>(line: &[u8]) -> Result<T, DecodeError> {
    let value = json::parse(line)?;
    T::read(Fields::of(&value, "message")?)
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

    struct Count {
        n: u32,
    }

    impl Message for Count {
        fn write(&self, w: &mut ObjectWriter<'_>) {
            w.u64("n", self.n.into());
        }
        fn read(f: Fields<'_>) -> Result<Self, DecodeError> {
            f.only(&["n"])?;
            Ok(Count { n: f.int("n")? })
        }
    }

    #[test]
    fn decode_errors_never_quote_the_input() {
        let lines: [&[u8]; 5] =
            [b"{\"n\":\"sekrit\"}", b"sekrit", b"{\"sekrit\":1}", b"{\"n\":1", b"[\"sekrit\"]"];
        for line in lines {
            let e = decode::<Count>(line).err().expect("an error");
            assert!(!e.to_string().contains("sekrit"), "{e}");
        }
        assert_eq!(decode::<Count>(b"{\"n\":7}").unwrap().n, 7);
        assert_eq!(encode_line(&Count { n: 7 }), b"{\"n\":7}\n");
        let e = decode::<Count>(b"{\"n\":4294967296}").err().unwrap();
        assert_eq!(e.to_string(), "out of range `n`");
    }
}
