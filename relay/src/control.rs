//! The control stream's reader: whole, bounded lines from a tokio stream, decoded into the core's
//! [`ClientMessage`].
//!
//! The messages themselves are defined once, in `tern::relay_proto::control` (re-exported here);
//! this module only adapts the sans-IO [`LineBuffer`] to an [`AsyncRead`].

use tokio::io::{AsyncRead, AsyncReadExt};

pub use tern::relay_proto::control::*;
pub use tern::relay_proto::framing::FRAMING_VERSION;
pub use tern::relay_proto::{DecodeError, LineBuffer, decode, encode_line};

/// Why a control message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("control stream closed")]
    Closed,
    #[error("control message too long")]
    TooLarge,
    /// The text never quotes the input (see [`DecodeError`]).
    #[error("malformed control message: {0}")]
    Malformed(#[from] DecodeError),
    #[error("control stream: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads newline-delimited messages, never buffering more than [`MAX_MESSAGE`] bytes.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    lines: LineBuffer,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(inner: R) -> Self {
        Self { inner, lines: LineBuffer::new(MAX_MESSAGE) }
    }

    /// Accepts lines up to `limit` bytes from now on (larger once the page is admitted).
    pub fn set_limit(&mut self, limit: usize) {
        self.lines.set_limit(limit);
    }

    /// The next line, without its newline. Cancel-safe: bytes read stay in the buffer.
    pub async fn next_line(&mut self) -> Result<Vec<u8>, ReadError> {
        let mut chunk = [0u8; 1024];
        loop {
            if let Some(line) = self.lines.next_line().map_err(|_| ReadError::TooLarge)? {
                return Ok(line);
            }
            // `room()` is never 0 here: a full buffer without a newline was an error above.
            let want = chunk.len().min(self.lines.room());
            let n = self.inner.read(&mut chunk[..want]).await?;
            if n == 0 {
                return Err(ReadError::Closed);
            }
            self.lines.push(&chunk[..n]);
        }
    }

    pub async fn next_message(&mut self) -> Result<ClientMessage, ReadError> {
        let line = self.next_line().await?;
        Ok(decode(&line)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn malformed_error_does_not_echo_input() {
        for line in [
            &b"{\"type\":\"sekrit\"}\n"[..],
            b"{\"type\":\"hello\",\"mode\":\"sekrit\"}\n",
            b"{\"type\":\"hello\",\"port\":\"sekrit\"}\n",
            b"{\"type\":\"hello\",\"sekrit\":1}\n",
            b"sekrit\n",
        ] {
            let e = LineReader::new(line).next_message().await.unwrap_err();
            assert!(matches!(e, ReadError::Malformed(_)));
            assert!(!e.to_string().contains("sekrit"), "{e}");
        }
    }

    #[tokio::test]
    async fn line_reader_bounds_lines() {
        let data = b"{\"type\":\"ping\"}\n".to_vec();
        let mut r = LineReader::new(&data[..]);
        assert_eq!(r.next_message().await.unwrap(), ClientMessage::Ping);
        assert!(matches!(r.next_message().await, Err(ReadError::Closed)));
        let big = vec![b'x'; MAX_MESSAGE + 10];
        let mut r = LineReader::new(&big[..]);
        assert!(matches!(r.next_line().await, Err(ReadError::TooLarge)));
        // A line of exactly MAX_MESSAGE bytes with its newline still fits.
        let mut exact = vec![b' '; MAX_MESSAGE - 1];
        exact[..15].copy_from_slice(b"{\"type\":\"ping\"}");
        exact.push(b'\n');
        let mut r = LineReader::new(&exact[..]);
        assert_eq!(r.next_message().await.unwrap(), ClientMessage::Ping);
    }

    #[tokio::test]
    async fn lines_split_across_reads_come_out_whole() {
        let (mut w, r) = tokio::io::duplex(64);
        let mut reader = LineReader::new(r);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in [&b"{\"type\":"[..], b"\"ping\"}\n{\"ty", b"pe\":\"ping\"}\n"] {
                w.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(reader.next_message().await.unwrap(), ClientMessage::Ping);
        assert_eq!(reader.next_message().await.unwrap(), ClientMessage::Ping);
        writer.await.unwrap();
    }
}
