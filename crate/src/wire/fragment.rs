//! Cutting compressed instructions into datagram-sized fragments and joining them again.

use std::collections::BTreeMap;

use super::cipher::{NONCE_LEN, TAG_LEN};
use super::compress::{Compressor, Inflater, MAX_INFLATED_LEN};
use super::messages::{decode_instruction, encode_instruction};
use super::packet::TIMESTAMPS_LEN;
use super::{Instruction, WireError};

/// Bytes of the fragment header: instruction id (u64 BE), final bit and number (u16 BE).
pub const FRAGMENT_HEADER_LEN: usize = 10;
/// Fragment numbers have 15 bits (MOSH-PROTOCOL.md 3.1).
pub const MAX_FRAGMENTS: usize = 1 << 15;
/// mosh's datagram size for IPv4 (MOSH-PROTOCOL.md 2.7).
pub const DEFAULT_MTU: usize = 1252;
/// mosh's datagram size for IPv6.
pub const IPV6_MTU: usize = 1216;
/// The largest datagram mosh receives (`RECEIVE_MTU`); larger ones are dropped.
pub const MAX_DATAGRAM_LEN: usize = 2048;
/// Bytes a datagram carries besides fragment contents: nonce, timestamps, tag, fragment header.
pub const DATAGRAM_OVERHEAD: usize = NONCE_LEN + TIMESTAMPS_LEN + TAG_LEN + FRAGMENT_HEADER_LEN;
/// The smallest usable MTU: one byte of contents per fragment.
pub const MIN_MTU: usize = DATAGRAM_OVERHEAD + 1;
/// The most compressed bytes one instruction may assemble to. A zlib stream whose output fits
/// [`MAX_INFLATED_LEN`] is at most that plus 5 bytes per 64 KiB stored block plus header and
/// trailer; the margin covers that with room to spare.
pub const MAX_ASSEMBLY_LEN: usize = MAX_INFLATED_LEN + 64 * 1024;

const FINAL_BIT: u16 = 0x8000;

/// One fragment as it travels inside a datagram's plaintext (after the timestamps).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Fragment<'a> {
    pub id: u64,
    /// 0..[`MAX_FRAGMENTS`].
    pub num: u16,
    pub is_final: bool,
    pub contents: &'a [u8],
}

impl<'a> Fragment<'a> {
    pub fn parse(payload: &'a [u8]) -> Result<Fragment<'a>, WireError> {
        let too_short = WireError::FragmentHeaderTooShort { len: payload.len() };
        let (header, contents) =
            payload.split_at_checked(FRAGMENT_HEADER_LEN).ok_or(too_short.clone())?;
        let id = u64::from_be_bytes(header[..8].try_into().map_err(|_| too_short.clone())?);
        let word = u16::from_be_bytes(header[8..].try_into().map_err(|_| too_short)?);
        Ok(Fragment { id, num: word & !FINAL_BIT, is_final: word & FINAL_BIT != 0, contents })
    }

    /// Header and contents, ready for [`PacketLayer::seal`](super::PacketLayer::seal).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FRAGMENT_HEADER_LEN + self.contents.len());
        out.extend_from_slice(&self.id.to_be_bytes());
        let word = (self.num & !FINAL_BIT) | if self.is_final { FINAL_BIT } else { 0 };
        out.extend_from_slice(&word.to_be_bytes());
        out.extend_from_slice(self.contents);
        out
    }
}

/// Cuts instructions into fragments (serialize, compress, slice).
///
/// Every call uses a new instruction id, strictly increasing from 1: the stock server aborts on two
/// fragments with one id and number but different contents, so an id is never reused. After a
/// restart under the same key, continue from a persisted [`Fragmenter::next_id`].
#[derive(Debug)]
pub struct Fragmenter {
    mtu: usize,
    next_id: u64,
    compressor: Compressor,
}

impl Fragmenter {
    /// `mtu` is the size of whole datagrams on the wire ([`DEFAULT_MTU`] for mosh over IPv4; at
    /// most 1211 through a browser's WebTransport). It must lie in
    /// [`MIN_MTU`]..=[`MAX_DATAGRAM_LEN`], which [`Fragmenter::fragment`] checks.
    pub fn new(mtu: usize) -> Self {
        Fragmenter::with_next_id(mtu, 1)
    }

    /// Continues the id sequence of an earlier fragmenter under the same key.
    pub fn with_next_id(mtu: usize, next_id: u64) -> Self {
        Fragmenter { mtu, next_id, compressor: Compressor::default() }
    }

    /// The id the next instruction will get (persist it with the key).
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Changes the datagram size for later instructions (e.g. after `EMSGSIZE`).
    pub fn set_mtu(&mut self, mtu: usize) {
        self.mtu = mtu;
    }

    /// Compressed bytes per fragment at this MTU.
    pub fn slice_len(&self) -> usize {
        self.mtu.saturating_sub(DATAGRAM_OVERHEAD)
    }

    /// Fragment payloads (header and slice), ready for
    /// [`PacketLayer::seal`](super::PacketLayer::seal). Always at least one.
    pub fn fragment(&mut self, instruction: &Instruction) -> Result<Vec<Vec<u8>>, WireError> {
        if !(MIN_MTU..=MAX_DATAGRAM_LEN).contains(&self.mtu) {
            return Err(WireError::MtuOutOfRange {
                mtu: self.mtu,
                min: MIN_MTU,
                max: MAX_DATAGRAM_LEN,
            });
        }
        let compressed = self.compressor.compress(&encode_instruction(instruction));
        let slice_len = self.slice_len();
        let count = compressed.len().div_ceil(slice_len).max(1);
        if count > MAX_FRAGMENTS {
            return Err(WireError::TooManyFragments { needed: count, max: MAX_FRAGMENTS });
        }
        let id = self.next_id;
        self.next_id = id.checked_add(1).ok_or(WireError::FragmentIdExhausted)?;
        let mut fragments = Vec::with_capacity(count);
        let mut slices = compressed.chunks(slice_len);
        for num in 0..count {
            let contents = slices.next().unwrap_or(&[]);
            let fragment = Fragment {
                id,
                // count <= MAX_FRAGMENTS, so num < 2^15 fits.
                num: u16::try_from(num).unwrap_or(u16::MAX) & !FINAL_BIT,
                is_final: num + 1 == count,
                contents,
            };
            fragments.push(fragment.to_bytes());
        }
        Ok(fragments)
    }
}

/// The instruction being collected in the single slot.
#[derive(Debug)]
struct Assembly {
    id: u64,
    parts: BTreeMap<u16, Vec<u8>>,
    /// Fixed by the final fragment.
    count: Option<u16>,
    bytes: usize,
    /// Set once complete; a late duplicate fragment yields it again (as mosh does) without
    /// inflating twice.
    done: Option<Instruction>,
}

impl Assembly {
    fn new(id: u64) -> Self {
        Assembly { id, parts: BTreeMap::new(), count: None, bytes: 0, done: None }
    }
}

/// Joins fragments back into instructions.
///
/// One assembly slot, as mosh has (MOSH-PROTOCOL.md 3.3): a fragment of another instruction
/// discards the partial one. Duplicates are ignored, conflicting duplicates refused; the final
/// fragment fixes the count. Compressed size is capped at [`MAX_ASSEMBLY_LEN`], inflated size at 4
/// MiB.
#[derive(Debug, Default)]
pub struct Reassembler {
    slot: Option<Assembly>,
    inflater: Inflater,
    /// Bytes inflated so far, failed attempts included (see [`Reassembler::inflated_bytes`]).
    inflated: u64,
}

impl Reassembler {
    pub fn new() -> Self {
        Reassembler::default()
    }

    /// How many bytes this reassembler has inflated in all, counting attempts that failed (past
    /// the 4 MiB cap, a bad checksum, an undecodable instruction): the work it did, which a
    /// caller that rations it reads before and after [`Reassembler::add`].
    pub fn inflated_bytes(&self) -> u64 {
        self.inflated
    }

    /// Adds one fragment payload (as [`PacketLayer::open`](super::PacketLayer::open) returns it);
    /// returns the instruction once all its fragments are in.
    pub fn add(&mut self, payload: &[u8]) -> Result<Option<Instruction>, WireError> {
        let fragment = Fragment::parse(payload)?;
        let (id, num) = (fragment.id, fragment.num);
        let assembly = match &mut self.slot {
            Some(assembly) if assembly.id == id => assembly,
            slot => slot.insert(Assembly::new(id)),
        };

        if let Some(existing) = assembly.parts.get(&num) {
            let existing_final = assembly.count == Some(num + 1);
            if existing.as_slice() != fragment.contents || existing_final != fragment.is_final {
                return Err(WireError::ConflictingFragment { id, num });
            }
            return Ok(assembly.done.clone());
        }

        if fragment.is_final {
            let count = num + 1;
            if let Some(previous) = assembly.count {
                return Err(WireError::ConflictingFinalFragment {
                    id,
                    num,
                    previous: previous - 1,
                });
            }
            if let Some((&highest, _)) = assembly.parts.last_key_value() {
                if highest >= count {
                    return Err(WireError::FragmentBeyondFinal { id, num: highest, count });
                }
            }
            assembly.count = Some(count);
        } else if let Some(count) = assembly.count {
            if num >= count {
                return Err(WireError::FragmentBeyondFinal { id, num, count });
            }
        }

        let bytes = assembly.bytes + fragment.contents.len();
        if bytes > MAX_ASSEMBLY_LEN {
            self.slot = None;
            return Err(WireError::AssemblyTooLarge { id, limit: MAX_ASSEMBLY_LEN });
        }
        assembly.bytes = bytes;
        assembly.parts.insert(num, fragment.contents.to_vec());

        if assembly.count.map(usize::from) != Some(assembly.parts.len()) {
            return Ok(None);
        }
        let compressed: Vec<u8> = assembly.parts.values().flatten().copied().collect();
        let inflated = self.inflater.inflate(&compressed, MAX_INFLATED_LEN);
        self.inflated = self.inflated.saturating_add(self.inflater.last_output_len());
        match inflated.and_then(|plain| decode_instruction(&plain)) {
            Ok(instruction) => {
                assembly.done = Some(instruction.clone());
                Ok(Some(instruction))
            }
            Err(e) => {
                // The instruction is lost either way; a fresh assembly can retry a retransmission.
                self.slot = None;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::StateNum;

    /// Incompressible bytes (xorshift), so fragment counts follow the length.
    fn noise(len: usize) -> Vec<u8> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn instruction(diff_len: usize) -> Instruction {
        Instruction {
            old_num: StateNum(3),
            new_num: StateNum(4),
            ack_num: StateNum(9),
            throwaway_num: StateNum(3),
            diff: noise(diff_len),
            chaff: vec![1, 2],
        }
    }

    #[test]
    fn header_layout() {
        let bytes = Fragment { id: 0x0102, num: 3, is_final: true, contents: b"xy" }.to_bytes();
        assert_eq!(bytes, [0, 0, 0, 0, 0, 0, 1, 2, 0x80, 3, b'x', b'y']);
        let parsed = Fragment::parse(&bytes).unwrap();
        assert_eq!(
            (parsed.id, parsed.num, parsed.is_final, parsed.contents),
            (0x0102, 3, true, &b"xy"[..])
        );
        assert_eq!(Fragment::parse(&bytes[..9]), Err(WireError::FragmentHeaderTooShort { len: 9 }));
    }

    #[test]
    fn ids_start_at_one_and_increase() {
        let mut fragmenter = Fragmenter::new(DEFAULT_MTU);
        for expected in 1..=3u64 {
            let frags = fragmenter.fragment(&Instruction::default()).unwrap();
            assert_eq!(frags.len(), 1);
            let f = Fragment::parse(&frags[0]).unwrap();
            assert_eq!((f.id, f.num, f.is_final), (expected, 0, true));
        }
        assert_eq!(fragmenter.next_id(), 4);
    }

    #[test]
    fn slices_fill_the_mtu() {
        let mut fragmenter = Fragmenter::new(DEFAULT_MTU);
        assert_eq!(fragmenter.slice_len(), 1214);
        let frags = fragmenter.fragment(&instruction(5000)).unwrap();
        assert!(frags.len() >= 5);
        for (i, f) in frags.iter().enumerate() {
            let last = i + 1 == frags.len();
            if !last {
                assert_eq!(f.len() + NONCE_LEN + TIMESTAMPS_LEN + TAG_LEN, DEFAULT_MTU);
            }
            let parsed = Fragment::parse(f).unwrap();
            assert_eq!((usize::from(parsed.num), parsed.is_final), (i, last));
        }
        let mut reassembler = Reassembler::new();
        let mut out = None;
        for f in &frags {
            out = reassembler.add(f).unwrap();
        }
        assert_eq!(out, Some(instruction(5000)));
    }

    #[test]
    fn inflated_bytes_count_failed_attempts_too() {
        let mut reassembler = Reassembler::new();
        let frags = Fragmenter::new(DEFAULT_MTU).fragment(&instruction(5000)).unwrap();
        let mut out = None;
        for f in &frags {
            out = reassembler.add(f).unwrap();
        }
        let plain_len = encode_instruction(out.as_ref().unwrap()).len() as u64;
        assert_eq!(reassembler.inflated_bytes(), plain_len);
        // A bomb one byte past the cap: refused, but the work was done and is counted.
        let bomb = super::super::compress::compress(&vec![0u8; MAX_INFLATED_LEN + 1]);
        let last = Fragment { id: 99, num: 0, is_final: true, contents: &bomb }.to_bytes();
        assert_eq!(
            reassembler.add(&last),
            Err(WireError::InflatedTooLarge { limit: MAX_INFLATED_LEN })
        );
        assert!(reassembler.inflated_bytes() >= plain_len + MAX_INFLATED_LEN as u64);
    }

    #[test]
    fn mtu_is_checked() {
        let mut fragmenter = Fragmenter::new(MIN_MTU - 1);
        assert!(matches!(
            fragmenter.fragment(&Instruction::default()),
            Err(WireError::MtuOutOfRange { .. })
        ));
        fragmenter.set_mtu(MAX_DATAGRAM_LEN + 1);
        assert!(matches!(
            fragmenter.fragment(&Instruction::default()),
            Err(WireError::MtuOutOfRange { .. })
        ));
        fragmenter.set_mtu(MIN_MTU);
        let frags = fragmenter.fragment(&instruction(10)).unwrap();
        assert!(frags.iter().all(|f| f.len() == FRAGMENT_HEADER_LEN + 1));
        assert_eq!(fragmenter.next_id(), 2, "failed calls consume no id");
    }

    #[test]
    fn too_many_fragments_is_an_error() {
        let mut fragmenter = Fragmenter::new(MIN_MTU);
        match fragmenter.fragment(&instruction(40_000)) {
            Err(WireError::TooManyFragments { needed, max }) => {
                assert!(needed > MAX_FRAGMENTS);
                assert_eq!(max, MAX_FRAGMENTS);
            }
            other => panic!("expected TooManyFragments, got {:?}", other.map(|f| f.len())),
        }
        assert_eq!(fragmenter.next_id(), 1);
    }

    #[test]
    fn a_new_id_discards_the_partial_assembly() {
        let mut fragmenter = Fragmenter::new(MIN_MTU + 20);
        let a = fragmenter.fragment(&instruction(100)).unwrap();
        let b = fragmenter.fragment(&instruction(101)).unwrap();
        let mut r = Reassembler::new();
        assert_eq!(r.add(&a[0]).unwrap(), None);
        assert_eq!(r.add(&b[0]).unwrap(), None);
        for f in &a[1..] {
            assert_eq!(r.add(f).unwrap(), None, "a's first fragment was discarded");
        }
        let mut out = None;
        for f in &b {
            out = r.add(f).unwrap();
        }
        assert_eq!(out, Some(instruction(101)));
    }

    #[test]
    fn duplicates_are_ignored_and_a_late_duplicate_yields_again() {
        let frags = Fragmenter::new(MIN_MTU + 20).fragment(&instruction(100)).unwrap();
        let mut r = Reassembler::new();
        for f in &frags[..frags.len() - 1] {
            assert_eq!(r.add(f).unwrap(), None);
            assert_eq!(r.add(f).unwrap(), None);
        }
        assert_eq!(r.add(frags.last().unwrap()).unwrap(), Some(instruction(100)));
        assert_eq!(r.add(&frags[0]).unwrap(), Some(instruction(100)));
    }

    #[test]
    fn conflicts_are_refused() {
        let frags = Fragmenter::new(MIN_MTU + 20).fragment(&instruction(100)).unwrap();
        let id = Fragment::parse(&frags[0]).unwrap().id;
        let mut r = Reassembler::new();
        r.add(&frags[0]).unwrap();
        let mut changed = frags[0].clone();
        *changed.last_mut().unwrap() ^= 1;
        assert_eq!(r.add(&changed), Err(WireError::ConflictingFragment { id, num: 0 }));
        let mut flagged = frags[0].clone();
        flagged[8] |= 0x80;
        assert_eq!(r.add(&flagged), Err(WireError::ConflictingFragment { id, num: 0 }));

        let fin = Fragment { id, num: 5, is_final: true, contents: b"z" }.to_bytes();
        assert_eq!(r.add(&fin).unwrap(), None);
        let other_fin = Fragment { id, num: 7, is_final: true, contents: b"z" }.to_bytes();
        assert_eq!(
            r.add(&other_fin),
            Err(WireError::ConflictingFinalFragment { id, num: 7, previous: 5 })
        );
        let beyond = Fragment { id, num: 6, is_final: false, contents: b"z" }.to_bytes();
        assert_eq!(r.add(&beyond), Err(WireError::FragmentBeyondFinal { id, num: 6, count: 6 }));

        let mut r = Reassembler::new();
        r.add(&Fragment { id: 1, num: 9, is_final: false, contents: b"z" }.to_bytes()).unwrap();
        let early_final = Fragment { id: 1, num: 3, is_final: true, contents: b"z" }.to_bytes();
        assert_eq!(
            r.add(&early_final),
            Err(WireError::FragmentBeyondFinal { id: 1, num: 9, count: 4 })
        );
    }

    #[test]
    fn garbage_contents_fail_to_inflate() {
        let mut r = Reassembler::new();
        let bad = Fragment { id: 1, num: 0, is_final: true, contents: b"not zlib" }.to_bytes();
        assert!(matches!(r.add(&bad), Err(WireError::InflateFailed { .. })));
        let empty = Fragment { id: 2, num: 0, is_final: true, contents: b"" }.to_bytes();
        assert!(matches!(r.add(&empty), Err(WireError::InflateFailed { .. })));
    }

    #[test]
    fn assembly_size_is_capped() {
        let mut r = Reassembler::new();
        let chunk = vec![0u8; 2000];
        let mut result = Ok(None);
        for num in 0..(MAX_ASSEMBLY_LEN / 2000 + 2) {
            let f =
                Fragment { id: 7, num: num as u16, is_final: false, contents: &chunk }.to_bytes();
            result = r.add(&f);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(WireError::AssemblyTooLarge { id: 7, limit: MAX_ASSEMBLY_LEN }));
    }
}
