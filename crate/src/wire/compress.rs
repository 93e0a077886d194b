//! zlib (RFC 1950) around serialized instructions, with a hard cap on inflated size.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::WireError;

/// The largest inflated Instruction mosh accepts (a 2048 x 2048 buffer, MOSH-PROTOCOL.md 4).
pub const MAX_INFLATED_LEN: usize = 4_194_304;

/// A reusable zlib compressor at the default level 6, like mosh's `compress()`.
///
/// Setting up deflate state costs more than compressing a typical 1 KiB diff, so a sender keeps
/// one of these.
#[derive(Debug)]
pub(crate) struct Compressor {
    deflate: Compress,
}

impl Default for Compressor {
    fn default() -> Self {
        Compressor { deflate: Compress::new(Compression::default(), true) }
    }
}

impl Compressor {
    pub(crate) fn compress(&mut self, data: &[u8]) -> Vec<u8> {
        self.deflate.reset();
        let mut out = Vec::with_capacity(data.len() / 2 + 64);
        loop {
            if out.len() == out.capacity() {
                out.reserve(out.capacity().max(64));
            }
            let consumed = usize::try_from(self.deflate.total_in()).unwrap_or(usize::MAX);
            let input = data.get(consumed..).unwrap_or(&[]);
            // Deflate of in-memory input with room to write only fails on misuse of the stream
            // state, which `reset` above rules out.
            let status = self
                .deflate
                .compress_vec(input, &mut out, FlushCompress::Finish)
                .expect("deflate into a Vec with spare room cannot fail");
            if status == Status::StreamEnd {
                return out;
            }
        }
    }
}

/// One-off zlib at level 6 (tests and tools; senders keep a [`Compressor`]).
#[cfg(test)]
pub(crate) fn compress(data: &[u8]) -> Vec<u8> {
    Compressor::default().compress(data)
}

/// One-off [`Inflater::inflate`] (tests).
#[cfg(test)]
pub(crate) fn inflate(data: &[u8], limit: usize) -> Result<Vec<u8>, WireError> {
    Inflater::default().inflate(data, limit)
}

/// A reusable zlib decompressor (a receiver keeps one; its state is costly to set up).
#[derive(Debug)]
pub(crate) struct Inflater {
    state: Decompress,
}

impl Default for Inflater {
    fn default() -> Self {
        Inflater { state: Decompress::new(true) }
    }
}

impl Inflater {
    /// Inflates one complete zlib stream, refusing output beyond `limit` bytes.
    ///
    /// Memory grows with the output actually produced (doubling, never past `limit + 1` bytes), so
    /// a small bomb cannot make us reserve a large buffer up front. Bytes after the end of the
    /// stream are ignored, as zlib's `uncompress()` does.
    pub(crate) fn inflate(&mut self, data: &[u8], limit: usize) -> Result<Vec<u8>, WireError> {
        self.state.reset(true);
        inflate_with(&mut self.state, data, limit)
    }

    /// Bytes the last [`Inflater::inflate`] produced, whether or not it succeeded (a stream that
    /// runs past its limit, or fails its checksum at the end, cost as much work as one that did
    /// not).
    pub(crate) fn last_output_len(&self) -> u64 {
        self.state.total_out()
    }
}

fn inflate_with(
    inflater: &mut Decompress,
    data: &[u8],
    limit: usize,
) -> Result<Vec<u8>, WireError> {
    const FIRST_CHUNK: usize = 1024;
    let cap = limit.saturating_add(1);
    let mut out: Vec<u8> =
        Vec::with_capacity(data.len().saturating_mul(4).max(FIRST_CHUNK).min(cap));
    loop {
        if out.len() == out.capacity() {
            if out.len() >= cap {
                return Err(WireError::InflatedTooLarge { limit });
            }
            let grow_to = out.capacity().saturating_mul(2).max(FIRST_CHUNK).min(cap);
            out.reserve_exact(grow_to - out.len());
        }
        let consumed = usize::try_from(inflater.total_in()).unwrap_or(usize::MAX);
        let input = data.get(consumed..).unwrap_or(&[]);
        let produced_before = out.len();
        let status = inflater
            .decompress_vec(input, &mut out, FlushDecompress::None)
            .map_err(|e| WireError::InflateFailed { reason: e.to_string() })?;
        if out.len() > limit {
            return Err(WireError::InflatedTooLarge { limit });
        }
        match status {
            Status::StreamEnd => return Ok(out),
            Status::Ok | Status::BufError => {
                let consumed_now = usize::try_from(inflater.total_in()).unwrap_or(usize::MAX);
                let progress = consumed_now != consumed || out.len() != produced_before;
                let room_left = out.len() < out.capacity();
                if !progress && room_left {
                    return Err(WireError::InflateFailed {
                        reason: "zlib stream is truncated".into(),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_inflates_the_sheet_vector() {
        // MOSH-PROTOCOL.md 11.1: zlib level 6 of the 5.4 Instruction example.
        let z =
            hex::decode("789ce360126090605460d06030e2e0629362d1083090b0620000105301de").unwrap();
        let plain = inflate(&z, MAX_INFLATED_LEN).unwrap();
        assert_eq!(hex::encode(&plain), "0802100018012000280032080a061a04285030183a00");
        assert_eq!(inflate(&compress(&plain), MAX_INFLATED_LEN).unwrap(), plain);
        assert_eq!(&compress(&plain)[..2], &[0x78, 0x9c]);
    }

    #[test]
    fn round_trips_empty_and_large() {
        assert_eq!(inflate(&compress(b""), 0).unwrap(), b"");
        let mut reused = Compressor::default();
        for data in [&b"first"[..], b"", b"second, longer input"] {
            assert_eq!(inflate(&reused.compress(data), 100).unwrap(), data);
        }
        let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(inflate(&compress(&big), MAX_INFLATED_LEN).unwrap(), big);
    }

    #[test]
    fn refuses_output_beyond_the_limit() {
        let zeros = vec![0u8; MAX_INFLATED_LEN + 1];
        let bomb = compress(&zeros);
        assert!(bomb.len() < 10_000);
        assert_eq!(
            inflate(&bomb, MAX_INFLATED_LEN),
            Err(WireError::InflatedTooLarge { limit: MAX_INFLATED_LEN })
        );
        let exact = compress(&zeros[..MAX_INFLATED_LEN]);
        assert_eq!(inflate(&exact, MAX_INFLATED_LEN).unwrap().len(), MAX_INFLATED_LEN);
        assert_eq!(inflate(&compress(b"abc"), 2), Err(WireError::InflatedTooLarge { limit: 2 }));
    }

    #[test]
    fn refuses_truncated_and_corrupt_streams() {
        let z = compress(b"hello hello hello hello");
        for cut in 0..z.len() {
            assert!(
                matches!(inflate(&z[..cut], 1000), Err(WireError::InflateFailed { .. })),
                "cut at {cut}"
            );
        }
        let mut bad = z.clone();
        bad[0] = 0x00;
        assert!(matches!(inflate(&bad, 1000), Err(WireError::InflateFailed { .. })));
        let mut bad = z.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff; // Adler-32 mismatch
        assert!(matches!(inflate(&bad, 1000), Err(WireError::InflateFailed { .. })));
    }
}
