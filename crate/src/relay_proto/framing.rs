//! Relay framing of server→browser datagrams: split what exceeds the browser's datagram limit, join
//! it again.
//!
//! tern-relay uses the [`Splitter`], the browser client the [`Joiner`]; the two halves must agree
//! byte for byte, so they live together here.
//!
//! Why: stock mosh-server sends UDP datagrams of up to 1252 bytes (MOSH-PROTOCOL.md 2.7), Chromium
//! carries WebTransport datagrams of at most 1211 bytes and silently drops larger ones. OCB
//! ciphertext cannot be re-fragmented the mosh way without the key (which the relay does not have
//! in bridge mode), so the relay cuts the opaque bytes and the browser glues them back.
//!
//! Every relay→browser datagram starts with a header byte:
//!
//! ```text
//! 0x00                      whole:  [0x00] ++ the mosh datagram
//! 0x80 | id (7 bits)        part:   [0x80|id] [index << 4 | (count - 1)] ++ slice
//! 0x01..=0x7F               reserved (a newer framing); the joiner rejects them
//! ```
//!
//! A datagram cut in `count` parts (2..=16) has parts `0..count`, each one a contiguous slice, all
//! but the last of equal length. `id` counts up modulo 128 per sender, so parts of different
//! datagrams never mix unless 128 datagrams pass while one is incomplete; the joiner only keeps
//! [`Joiner::MAX_PENDING`] incomplete datagrams, so a stale one is gone long before its id returns.
//! Browser→relay datagrams carry no header: the client sizes its own datagrams to the limit.
//!
//! This module does no I/O and depends only on `std`.

/// Version of this framing, announced in `/api/info` and `ready`; a page refuses any other.
pub const FRAMING_VERSION: u8 = 1;

/// Header byte of a datagram sent whole.
pub const WHOLE: u8 = 0x00;
/// Bit set in the first header byte of a part.
const PART_BIT: u8 = 0x80;
/// Header length of a whole datagram.
pub const WHOLE_HEADER_LEN: usize = 1;
/// Header length of a part.
pub const PART_HEADER_LEN: usize = 2;
/// Most parts one datagram may be cut into (4 bits of `count - 1`).
pub const MAX_PARTS: usize = 16;
/// Largest datagram mosh ever accepts (`Session::RECEIVE_MTU`, MOSH-PROTOCOL.md 2.7); the joiner
/// refuses to build anything larger, which bounds its memory.
pub const MAX_JOINED_LEN: usize = 2048;

/// What was wrong with a datagram handed to the [`Splitter`] or the [`Joiner`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FramingError {
    /// An empty datagram has no header.
    Empty,
    /// The header byte is reserved (`0x01..=0x7F`): a framing this code does not know.
    UnknownHeader(u8),
    /// A part shorter than its two header bytes, or with no payload.
    TruncatedPart,
    /// A part whose index is not below its count, or whose count is 1.
    BadPartIndex { index: u8, count: u8 },
    /// A part that does not fit the parts already held for the same id (length or count).
    InconsistentPart,
    /// The joined datagram would exceed [`MAX_JOINED_LEN`].
    TooLarge,
    /// The splitter cannot cut this payload into at most [`MAX_PARTS`] parts of the given limit.
    CannotSplit { len: usize, max_datagram: usize },
}

impl std::fmt::Display for FramingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FramingError::Empty => write!(f, "empty datagram"),
            FramingError::UnknownHeader(b) => write!(f, "unknown framing header byte {b:#04x}"),
            FramingError::TruncatedPart => write!(f, "part shorter than its header or empty"),
            FramingError::BadPartIndex { index, count } => {
                write!(f, "part index {index} invalid for count {count}")
            }
            FramingError::InconsistentPart => write!(f, "part inconsistent with earlier parts"),
            FramingError::TooLarge => write!(f, "joined datagram larger than {MAX_JOINED_LEN}"),
            FramingError::CannotSplit { len, max_datagram } => write!(
                f,
                "cannot split {len} bytes into at most {MAX_PARTS} datagrams of {max_datagram}"
            ),
        }
    }
}

impl std::error::Error for FramingError {}

/// Cuts server datagrams into framed browser datagrams. Holds only the next part id.
#[derive(Debug, Default, Clone)]
pub struct Splitter {
    next_id: u8,
}

impl Splitter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Frames `payload` into datagrams of at most `max_datagram` bytes each, appended to `out`.
    ///
    /// One datagram when `payload` fits whole, else the fewest parts that fit.
    pub fn split(
        &mut self,
        payload: &[u8],
        max_datagram: usize,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), FramingError> {
        if payload.len() + WHOLE_HEADER_LEN <= max_datagram {
            let mut d = Vec::with_capacity(payload.len() + WHOLE_HEADER_LEN);
            d.push(WHOLE);
            d.extend_from_slice(payload);
            out.push(d);
            return Ok(());
        }
        let cannot = FramingError::CannotSplit { len: payload.len(), max_datagram };
        let room =
            max_datagram.checked_sub(PART_HEADER_LEN).filter(|r| *r > 0).ok_or(cannot.clone())?;
        let count = payload.len().div_ceil(room);
        if count > MAX_PARTS || payload.len() > MAX_JOINED_LEN {
            return Err(cannot);
        }
        // Equal-sized parts (all but the last) keep the joiner's bookkeeping to one number.
        let part_len = payload.len().div_ceil(count);
        let id = self.next_id;
        self.next_id = (self.next_id + 1) & !PART_BIT;
        for (index, chunk) in payload.chunks(part_len).enumerate() {
            let mut d = Vec::with_capacity(chunk.len() + PART_HEADER_LEN);
            d.push(PART_BIT | id);
            // index < count <= 16 and count >= 2, so both fit their nibbles.
            d.push(((index as u8) << 4) | (count as u8 - 1));
            d.extend_from_slice(chunk);
            out.push(d);
        }
        Ok(())
    }
}

/// One incomplete datagram: which parts arrived and their bytes.
#[derive(Debug, Clone)]
struct Pending {
    id: u8,
    count: u8,
    /// Length of every part but the last, from the first non-last part seen.
    part_len: Option<usize>,
    parts: Vec<Option<Vec<u8>>>,
    /// Arrival order, to evict the oldest when full.
    age: u64,
}

/// Joins framed datagrams back into mosh datagrams. Sans-IO: feed it datagrams, get whole ones.
///
/// Loss of any part loses the whole datagram, which mosh tolerates as ordinary packet loss.
#[derive(Debug, Default, Clone)]
pub struct Joiner {
    pending: Vec<Pending>,
    clock: u64,
    /// Incomplete datagrams evicted to make room; a diagnostic counter.
    pub evicted: u64,
}

impl Joiner {
    /// Incomplete datagrams kept at once; the oldest goes when another one starts.
    pub const MAX_PENDING: usize = 4;

    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one framed datagram. Returns the mosh datagram when it is complete, `None` while
    /// parts are missing, an error (and no state change) when the datagram is malformed.
    pub fn push(&mut self, datagram: &[u8]) -> Result<Option<Vec<u8>>, FramingError> {
        let (&first, rest) = datagram.split_first().ok_or(FramingError::Empty)?;
        if first == WHOLE {
            return Ok(Some(rest.to_vec()));
        }
        if first & PART_BIT == 0 {
            return Err(FramingError::UnknownHeader(first));
        }
        let id = first & !PART_BIT;
        let (&second, body) = rest.split_first().ok_or(FramingError::TruncatedPart)?;
        if body.is_empty() {
            return Err(FramingError::TruncatedPart);
        }
        let index = second >> 4;
        let count = (second & 0x0F) + 1;
        if count < 2 || index >= count {
            return Err(FramingError::BadPartIndex { index, count });
        }
        let is_last = index + 1 == count;
        if body.len() * usize::from(count) > MAX_JOINED_LEN + MAX_JOINED_LEN / 2 {
            // Even the loosest reading (every part as long as this one) is far beyond mosh's limit.
            return Err(FramingError::TooLarge);
        }

        self.clock += 1;
        let slot = match self.pending.iter().position(|p| p.id == id) {
            Some(i) if self.pending[i].count == count => i,
            Some(i) => {
                // Same id, different count: a new datagram reused the id; the old one is lost.
                self.pending.swap_remove(i);
                self.evicted += 1;
                self.start(id, count)
            }
            None => self.start(id, count),
        };
        let p = &mut self.pending[slot];
        if !is_last {
            match p.part_len {
                Some(len) if len != body.len() => return Err(FramingError::InconsistentPart),
                _ => p.part_len = Some(body.len()),
            }
        }
        if let (Some(len), true) = (p.part_len, is_last) {
            if body.len() > len {
                return Err(FramingError::InconsistentPart);
            }
        }
        // A duplicate part (QUIC does not duplicate, but be lenient) simply overwrites.
        p.parts[usize::from(index)] = Some(body.to_vec());
        if p.parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        let p = self.pending.swap_remove(slot);
        let total: usize = p.parts.iter().flatten().map(Vec::len).sum();
        if total > MAX_JOINED_LEN {
            return Err(FramingError::TooLarge);
        }
        let mut joined = Vec::with_capacity(total);
        for part in p.parts.into_iter().flatten() {
            joined.extend_from_slice(&part);
        }
        Ok(Some(joined))
    }

    /// Makes room for a new incomplete datagram and returns its slot.
    fn start(&mut self, id: u8, count: u8) -> usize {
        if self.pending.len() >= Self::MAX_PENDING {
            if let Some(oldest) = (0..self.pending.len()).min_by_key(|&i| self.pending[i].age) {
                self.pending.swap_remove(oldest);
                self.evicted += 1;
            }
        }
        self.pending.push(Pending {
            id,
            count,
            part_len: None,
            parts: vec![None; usize::from(count)],
            age: self.clock,
        });
        self.pending.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(payload: &[u8], max: usize, s: &mut Splitter) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        s.split(payload, max, &mut out).unwrap();
        out
    }

    #[test]
    fn small_datagram_goes_whole_with_one_byte_header() {
        let mut s = Splitter::new();
        let out = frames(b"hello", 1211, &mut s);
        assert_eq!(out, vec![b"\x00hello".to_vec()]);
        assert_eq!(Joiner::new().push(&out[0]).unwrap().unwrap(), b"hello");
    }

    #[test]
    fn exactly_fitting_datagram_is_not_split() {
        let payload = vec![7u8; 1210];
        let out = frames(&payload, 1211, &mut Splitter::new());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 1211);
    }

    #[test]
    fn mosh_max_datagram_splits_in_two_and_joins() {
        let payload: Vec<u8> = (0..1252u32).map(|i| i as u8).collect();
        let out = frames(&payload, 1211, &mut Splitter::new());
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|d| d.len() <= 1211));
        let mut j = Joiner::new();
        assert_eq!(j.push(&out[0]).unwrap(), None);
        assert_eq!(j.push(&out[1]).unwrap().unwrap(), payload);
    }

    #[test]
    fn parts_join_in_any_order_and_interleaved() {
        let mut s = Splitter::new();
        let a: Vec<u8> = (0..2000u32).map(|i| (i * 3) as u8).collect();
        let b: Vec<u8> = (0..1500u32).map(|i| (i * 5) as u8).collect();
        let fa = frames(&a, 600, &mut s);
        let fb = frames(&b, 600, &mut s);
        assert_eq!(fa.len(), 4);
        let mut j = Joiner::new();
        let mut got = Vec::new();
        for d in [&fb[2], &fa[3], &fa[0], &fb[0], &fa[2], &fb[1], &fa[1]] {
            if let Some(x) = j.push(d).unwrap() {
                got.push(x);
            }
        }
        assert_eq!(got, vec![b, a]);
    }

    #[test]
    fn lost_part_loses_only_its_datagram_and_memory_stays_bounded() {
        let mut s = Splitter::new();
        let mut j = Joiner::new();
        for n in 0..300u32 {
            let payload = vec![n as u8; 1252];
            let f = frames(&payload, 1211, &mut s);
            // Every third datagram loses its second part.
            if n % 3 == 0 {
                assert_eq!(j.push(&f[0]).unwrap(), None);
            } else {
                assert_eq!(j.push(&f[0]).unwrap(), None);
                assert_eq!(j.push(&f[1]).unwrap().unwrap(), payload);
            }
            assert!(j.pending.len() <= Joiner::MAX_PENDING);
        }
        assert!(j.evicted > 0);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        let mut j = Joiner::new();
        assert_eq!(j.push(b""), Err(FramingError::Empty));
        assert_eq!(j.push(b"\x05abc"), Err(FramingError::UnknownHeader(5)));
        assert_eq!(j.push(b"\x81"), Err(FramingError::TruncatedPart));
        assert_eq!(j.push(b"\x81\x01"), Err(FramingError::TruncatedPart));
        assert_eq!(j.push(b"\x81\x00x"), Err(FramingError::BadPartIndex { index: 0, count: 1 }));
        assert_eq!(j.push(b"\x81\x21x"), Err(FramingError::BadPartIndex { index: 2, count: 2 }));
        // A part too long for any mosh datagram.
        let mut big = vec![0x81, 0x0F];
        big.extend(vec![0u8; 1000]);
        assert_eq!(j.push(&big), Err(FramingError::TooLarge));
        // Inconsistent lengths of non-last parts.
        assert_eq!(j.push(b"\x82\x02abc").unwrap(), None);
        assert_eq!(j.push(b"\x82\x12ab"), Err(FramingError::InconsistentPart));
    }

    #[test]
    fn every_byte_string_is_handled() {
        // A cheap exhaustive-ish sweep over short inputs: nothing panics.
        let mut j = Joiner::new();
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let _ = j.push(&[a, b, 1, 2, 3]);
                let _ = j.push(&[a, b]);
            }
        }
    }

    #[test]
    fn splitter_refuses_what_it_cannot_frame() {
        let mut s = Splitter::new();
        let mut out = Vec::new();
        assert!(s.split(&[0u8; 3000], 1211, &mut out).is_err());
        assert!(s.split(&[0u8; 100], 2, &mut out).is_err());
        assert!(s.split(&[0u8; 1000], 50, &mut out).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn ids_wrap_within_seven_bits() {
        let mut s = Splitter::new();
        for _ in 0..300 {
            let f = frames(&[1u8; 1300], 1211, &mut s);
            assert_eq!(f[0][0] & 0x80, 0x80);
        }
    }
}
