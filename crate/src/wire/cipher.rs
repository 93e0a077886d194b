//! AES-128-OCB3 sealing and opening of whole datagrams: nonce word, ciphertext, tag.

use aes::Aes128;
use ocb3::aead::{AeadInOut, KeyInit};
use ocb3::consts::{U12, U16};
use ocb3::{Array, Ocb3};

use super::{Direction, Key, WireError};

/// Bytes of the on-wire nonce word (direction bit and 63-bit sequence number, big-endian).
pub const NONCE_LEN: usize = 8;
/// Bytes of the OCB authentication tag at the end of every datagram.
pub const TAG_LEN: usize = 16;
/// The largest sequence number: sequence numbers have 63 bits, the 64th is the direction.
pub const MAX_SEQ: u64 = (1 << 63) - 1;

const DIRECTION_BIT: u64 = 1 << 63;

/// The 8-byte nonce word that starts every datagram (MOSH-PROTOCOL.md 2.1, 2.2).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Nonce {
    pub direction: Direction,
    /// 0..=[`MAX_SEQ`].
    pub seq: u64,
}

impl Nonce {
    /// The wire bytes. `seq` above [`MAX_SEQ`] is the caller's bug; [`Cipher::seal`] refuses it.
    pub fn to_bytes(self) -> [u8; NONCE_LEN] {
        let bit = match self.direction {
            Direction::ToServer => 0,
            Direction::ToClient => DIRECTION_BIT,
        };
        (bit | (self.seq & MAX_SEQ)).to_be_bytes()
    }

    pub fn from_bytes(bytes: [u8; NONCE_LEN]) -> Nonce {
        let word = u64::from_be_bytes(bytes);
        let direction =
            if word & DIRECTION_BIT == 0 { Direction::ToServer } else { Direction::ToClient };
        Nonce { direction, seq: word & MAX_SEQ }
    }

    /// The nonce of a datagram, when it is long enough to have one.
    pub fn of_datagram(datagram: &[u8]) -> Option<Nonce> {
        let word: [u8; NONCE_LEN] = datagram.get(..NONCE_LEN)?.try_into().ok()?;
        Some(Nonce::from_bytes(word))
    }

    /// OCB's 12-byte nonce: four zero bytes, then the wire word (MOSH-PROTOCOL.md 2.3).
    fn ocb_nonce(self) -> [u8; 12] {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&self.to_bytes());
        nonce
    }
}

type Aes128Ocb3 = Ocb3<Aes128, U12, U16>;

/// AES-128-OCB3 with mosh's parameters: 12-byte nonce, 16-byte tag, no associated data.
///
/// It keeps no counters: choosing a fresh nonce per datagram is
/// [`PacketLayer`](super::PacketLayer)'s job.
#[derive(Clone)]
pub struct Cipher {
    ocb: Aes128Ocb3,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(..)")
    }
}

impl Cipher {
    pub fn new(key: &Key) -> Cipher {
        Cipher { ocb: Aes128Ocb3::new(&Array::from(key.0)) }
    }

    /// The whole datagram: nonce word, ciphertext of `plaintext`, tag.
    pub fn seal(&self, nonce: Nonce, plaintext: &[u8]) -> Result<Vec<u8>, WireError> {
        if nonce.seq > MAX_SEQ {
            return Err(WireError::SequenceExhausted);
        }
        let mut datagram = Vec::with_capacity(NONCE_LEN + plaintext.len() + TAG_LEN);
        datagram.extend_from_slice(&nonce.to_bytes());
        datagram.extend_from_slice(plaintext);
        let body = &mut datagram[NONCE_LEN..];
        let tag = self
            .ocb
            .encrypt_inout_detached(&Array::from(nonce.ocb_nonce()), &[], body.into())
            .map_err(|_| WireError::PlaintextTooLong { len: plaintext.len() })?;
        datagram.extend_from_slice(&tag);
        Ok(datagram)
    }

    /// Authenticates and decrypts a datagram; returns its nonce and plaintext. Checks nothing about
    /// direction or sequence.
    pub fn open(&self, datagram: &[u8]) -> Result<(Nonce, Vec<u8>), WireError> {
        let too_short = WireError::DatagramTooShort { len: datagram.len() };
        if datagram.len() < NONCE_LEN + TAG_LEN {
            return Err(too_short);
        }
        let nonce = Nonce::of_datagram(datagram).ok_or(too_short)?;
        let (body, tag) = datagram[NONCE_LEN..].split_at(datagram.len() - NONCE_LEN - TAG_LEN);
        let tag: [u8; TAG_LEN] = tag.try_into().map_err(|_| WireError::AuthenticationFailed)?;
        let mut plaintext = body.to_vec();
        self.ocb
            .decrypt_inout_detached(
                &Array::from(nonce.ocb_nonce()),
                &[],
                plaintext.as_mut_slice().into(),
                &Array::from(tag),
            )
            .map_err(|_| WireError::AuthenticationFailed)?;
        Ok((nonce, plaintext))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Cipher {
        /// RFC 7253 vectors use arbitrary nonces and associated data, which mosh never does.
        fn seal_raw(&self, nonce: [u8; 12], aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
            let mut out = plaintext.to_vec();
            let tag = self
                .ocb
                .encrypt_inout_detached(&Array::from(nonce), aad, out.as_mut_slice().into())
                .unwrap();
            out.extend_from_slice(&tag);
            out
        }

        fn open_raw(&self, nonce: [u8; 12], aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
            let (body, tag) = sealed.split_at(sealed.len() - TAG_LEN);
            let tag: [u8; TAG_LEN] = tag.try_into().unwrap();
            let mut out = body.to_vec();
            self.ocb
                .decrypt_inout_detached(
                    &Array::from(nonce),
                    aad,
                    out.as_mut_slice().into(),
                    &Array::from(tag),
                )
                .ok()?;
            Some(out)
        }
    }

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    /// RFC 7253 appendix A, AES-128, 128-bit tags: (nonce, A, P, C||T). The first and fourth are
    /// also quoted in MOSH-PROTOCOL.md 11.1.
    const RFC7253_A: &[(&str, &str, &str, &str)] = &[
        ("BBAA99887766554433221100", "", "", "785407BFFFC8AD9EDCC5520AC9111EE6"),
        (
            "BBAA99887766554433221101",
            "0001020304050607",
            "0001020304050607",
            "6820B3657B6F615A5725BDA0D3B4EB3A257C9AF1F8F03009",
        ),
        ("BBAA99887766554433221102", "0001020304050607", "", "81017F8203F081277152FADE694A0A00"),
        (
            "BBAA99887766554433221103",
            "",
            "0001020304050607",
            "45DD69F8F5AAE72414054CD1F35D82760B2CD00D2F99BFA9",
        ),
        (
            "BBAA99887766554433221104",
            "000102030405060708090A0B0C0D0E0F",
            "000102030405060708090A0B0C0D0E0F",
            "571D535B60B277188BE5147170A9A22C3AD7A4FF3835B8C5701C1CCEC8FC3358",
        ),
        (
            "BBAA99887766554433221105",
            "000102030405060708090A0B0C0D0E0F",
            "",
            "8CF761B6902EF764462AD86498CA6B97",
        ),
        (
            "BBAA99887766554433221106",
            "",
            "000102030405060708090A0B0C0D0E0F",
            "5CE88EC2E0692706A915C00AEB8B2396F40E1C743F52436BDF06D8FA1ECA343D",
        ),
        (
            "BBAA99887766554433221107",
            "000102030405060708090A0B0C0D0E0F1011121314151617",
            "000102030405060708090A0B0C0D0E0F1011121314151617",
            "1CA2207308C87C010756104D8840CE1952F09673A448A122C92C62241051F57356D7F3C90BB0E07F",
        ),
        (
            "BBAA99887766554433221108",
            "000102030405060708090A0B0C0D0E0F1011121314151617",
            "",
            "6DC225A071FC1B9F7C69F93B0F1E10DE",
        ),
        (
            "BBAA99887766554433221109",
            "",
            "000102030405060708090A0B0C0D0E0F1011121314151617",
            "221BD0DE7FA6FE993ECCD769460A0AF2D6CDED0C395B1C3CE725F32494B9F914D85C0B1EB38357FF",
        ),
        (
            "BBAA9988776655443322110A",
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
            "BD6F6C496201C69296C11EFD138A467ABD3C707924B964DEAFFC40319AF5A48540FBBA186C5553C68AD9F592A79A4240",
        ),
        (
            "BBAA9988776655443322110B",
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
            "",
            "FE80690BEE8A485D11F32965BC9D2A32",
        ),
        (
            "BBAA9988776655443322110C",
            "",
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
            "2942BFC773BDA23CABC6ACFD9BFD5835BD300F0973792EF46040C53F1432BCDFB5E1DDE3BC18A5F840B52E653444D5DF",
        ),
        (
            "BBAA9988776655443322110D",
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F2021222324252627",
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F2021222324252627",
            "D5CA91748410C1751FF8A2F618255B68A0A12E093FF454606E59F9C1D0DDC54B65E8628E568BAD7AED07BA06A4A69483A7035490C5769E60",
        ),
        (
            "BBAA9988776655443322110E",
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F2021222324252627",
            "",
            "C5CD9D1850C141E358649994EE701B68",
        ),
        (
            "BBAA9988776655443322110F",
            "",
            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F2021222324252627",
            "4412923493C57D5DE0D700F753CCE0D1D2D95060122E9F15A5DDBFC5787E50B5CC55EE507BCB084E479AD363AC366B95A98CA5F3000B1479",
        ),
    ];

    #[test]
    fn rfc7253_appendix_a_aes128_vectors() {
        let cipher = Cipher::new(&Key(h("000102030405060708090a0b0c0d0e0f").try_into().unwrap()));
        for &(n, a, p, c) in RFC7253_A {
            let nonce: [u8; 12] = h(n).try_into().unwrap();
            assert_eq!(cipher.seal_raw(nonce, &h(a), &h(p)), h(c), "encrypt N={n}");
            assert_eq!(cipher.open_raw(nonce, &h(a), &h(c)), Some(h(p)), "decrypt N={n}");
            let mut bad = h(c);
            bad[0] ^= 1;
            assert_eq!(cipher.open_raw(nonce, &h(a), &bad), None, "tamper N={n}");
        }
    }

    #[test]
    fn nonce_word_layout() {
        let n = Nonce { direction: Direction::ToClient, seq: 5 };
        assert_eq!(n.to_bytes(), [0x80, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(Nonce::from_bytes(n.to_bytes()), n);
        let n = Nonce { direction: Direction::ToServer, seq: MAX_SEQ };
        assert_eq!(n.to_bytes(), [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(n.ocb_nonce()[..4], [0, 0, 0, 0]);
    }

    #[test]
    fn seal_refuses_seq_beyond_63_bits() {
        let cipher = Cipher::new(&Key([7; 16]));
        let nonce = Nonce { direction: Direction::ToServer, seq: MAX_SEQ + 1 };
        assert_eq!(cipher.seal(nonce, b"1234"), Err(WireError::SequenceExhausted));
    }
}
