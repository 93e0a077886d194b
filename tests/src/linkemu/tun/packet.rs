//! The reflector's packet surgery: which way an IPv4 packet from the TUN device goes, the address
//! swap that turns it back into an arriving packet, and the checksums the swap invalidates. Pure
//! functions on byte slices; no device, no clock.
//!
//! Three addresses of the TUN subnet take part ([`Reflection`]): `host` is the device's own
//! address (every local socket, client or server, lives there), `far` is where clients connect to
//! reach the server, `mirror` is where the server sees its clients come from. The kernel routes
//! packets for `far` and `mirror` out of the device; the reflector swaps addresses and writes them
//! back in:
//!
//! ```text
//!  up:    host:X -> far:P     becomes  mirror:X -> host:P   (to the server listening on P)
//!  down:  host:P -> mirror:X  becomes  far:P    -> host:X   (to the client connected to far:P)
//! ```
//!
//! Ports stay as they are, so the swap needs no connection table.

use std::net::Ipv4Addr;

use super::super::Dir;

const IPV4_MIN_HEADER: usize = 20;
const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_ECHO_REQUEST: u8 = 8;
/// Offset of the checksum field inside each transport header.
const TCP_CHECKSUM_AT: usize = 16;
const UDP_CHECKSUM_AT: usize = 6;

/// The three addresses of the reflection (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reflection {
    /// The TUN device's address: every local socket's address on the link.
    pub host: Ipv4Addr,
    /// Clients connect here to reach a server listening on `host` (or on any address).
    pub far: Ipv4Addr,
    /// The server sees its clients' connections coming from here.
    pub mirror: Ipv4Addr,
}

/// Why a packet from the device was not reflected (it is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreflected {
    /// Not IPv4 (IPv6 router solicitations show up when the device comes up).
    NotIpv4,
    /// Shorter than its headers claim.
    Malformed,
    /// Not from `host`, or not to `far` or `mirror`.
    OtherAddress,
    /// A protocol (or ICMP type) the reflector does not translate. ICMP errors quote the original
    /// header, which would need translating too; they are dropped instead.
    Unsupported,
}

impl Reflection {
    /// Which way `packet` crosses the link, after rewriting it in place into the packet to write
    /// back into the device. On `Err` the packet is left as it was.
    pub fn reflect(&self, packet: &mut [u8]) -> Result<Dir, Unreflected> {
        if packet.first().map(|b| b >> 4) != Some(4) {
            return Err(Unreflected::NotIpv4);
        }
        let header_len = usize::from(packet[0] & 0x0f) * 4;
        if header_len < IPV4_MIN_HEADER || packet.len() < header_len {
            return Err(Unreflected::Malformed);
        }
        let total_len = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
        if total_len < header_len || total_len > packet.len() {
            return Err(Unreflected::Malformed);
        }
        let src = Ipv4Addr::from(read4(packet, 12));
        let dst = Ipv4Addr::from(read4(packet, 16));
        if src != self.host {
            return Err(Unreflected::OtherAddress);
        }
        let (dir, new_src) = if dst == self.far {
            (Dir::Up, self.mirror)
        } else if dst == self.mirror {
            (Dir::Down, self.far)
        } else {
            return Err(Unreflected::OtherAddress);
        };
        let new_dst = self.host;

        // Only the first fragment carries the transport header; later fragments need only their
        // IP header rewritten (the transport checksum covers the whole datagram and lives in the
        // first fragment, which is why it is adjusted rather than recomputed).
        let fragment_offset = u16::from_be_bytes([packet[6], packet[7]]) & 0x1fff;
        let transport = &packet[header_len..total_len];
        let checksum_at = match packet[9] {
            _ if fragment_offset != 0 => None,
            PROTO_TCP if transport.len() >= TCP_CHECKSUM_AT + 2 => Some(TCP_CHECKSUM_AT),
            PROTO_UDP if transport.len() >= UDP_CHECKSUM_AT + 2 => Some(UDP_CHECKSUM_AT),
            PROTO_TCP | PROTO_UDP => return Err(Unreflected::Malformed),
            // ICMP's checksum has no pseudo-header, so an echo needs no transport change.
            PROTO_ICMP => match transport.first() {
                Some(&(ICMP_ECHO_REQUEST | ICMP_ECHO_REPLY)) => None,
                Some(_) => return Err(Unreflected::Unsupported),
                None => return Err(Unreflected::Malformed),
            },
            _ => return Err(Unreflected::Unsupported),
        };

        let mut old = [0u8; 8];
        old.copy_from_slice(&packet[12..20]);
        let mut new = [0u8; 8];
        new[..4].copy_from_slice(&new_src.octets());
        new[4..].copy_from_slice(&new_dst.octets());
        packet[12..20].copy_from_slice(&new);
        packet[10..12].fill(0);
        let header_sum = internet_checksum(&packet[..header_len]);
        packet[10..12].copy_from_slice(&header_sum.to_be_bytes());

        if let Some(at) = checksum_at {
            let at = header_len + at;
            let sum = u16::from_be_bytes([packet[at], packet[at + 1]]);
            let adjusted = if packet[9] == PROTO_UDP {
                adjust_udp_checksum(sum, &old, &new)
            } else {
                adjust_checksum(sum, &old, &new)
            };
            packet[at..at + 2].copy_from_slice(&adjusted.to_be_bytes());
        }
        Ok(dir)
    }
}

fn read4(packet: &[u8], at: usize) -> [u8; 4] {
    [packet[at], packet[at + 1], packet[at + 2], packet[at + 3]]
}

/// The one's complement sum of `data` as 16-bit big-endian words (an odd last byte is padded
/// with zero), folded to 16 bits. Not complemented.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    fold(sum)
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The Internet checksum of `data` (RFC 1071), to store in a zeroed checksum field. Summing a
/// region that includes a correct checksum gives 0.
pub fn internet_checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// `checksum` updated for `old` bytes (of even length) replaced by `new`, without reading the
/// rest of what it covers: RFC 1624's `HC' = ~(~HC + ~m + m')`.
pub fn adjust_checksum(checksum: u16, old: &[u8], new: &[u8]) -> u16 {
    debug_assert_eq!(old.len(), new.len());
    let mut sum = u32::from(!checksum);
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        sum += u32::from(!u16::from_be_bytes([o[0], o[1]]));
        sum += u32::from(u16::from_be_bytes([n[0], n[1]]));
    }
    !fold(sum)
}

/// [`adjust_checksum`] with UDP's rules: 0 means the sender sent no checksum (leave it so), and a
/// computed 0 is sent as 0xffff.
pub fn adjust_udp_checksum(checksum: u16, old: &[u8], new: &[u8]) -> u16 {
    match checksum {
        0 => 0,
        _ => match adjust_checksum(checksum, old, new) {
            0 => 0xffff,
            sum => sum,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn net77() -> Reflection {
        Reflection {
            host: Ipv4Addr::new(10, 77, 0, 1),
            far: Ipv4Addr::new(10, 77, 0, 2),
            mirror: Ipv4Addr::new(10, 77, 0, 3),
        }
    }

    /// The transport checksum of a whole (unfragmented) TCP or UDP packet, verified from scratch:
    /// the one's complement sum over pseudo-header and segment is 0xffff when it is right.
    fn transport_checksum_ok(packet: &[u8]) -> bool {
        let header_len = usize::from(packet[0] & 0x0f) * 4;
        let segment = &packet[header_len..];
        let mut pseudo = packet[12..20].to_vec();
        pseudo.extend_from_slice(&[0, packet[9]]);
        pseudo.extend_from_slice(&(segment.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(segment);
        ones_complement_sum(&pseudo) == 0xffff
    }

    // Packets the Linux kernel wrote into a TUN device whose address is 10.77.0.1 (so their
    // checksums are the kernel's), and the expected reflections, computed by an independent
    // from-scratch implementation (Python, full recomputation rather than RFC 1624 updates).
    /// UDP 10.77.0.1:40000 -> 10.77.0.2:7, "hello tern".
    const UDP_TO_FAR: &str =
        "45000026e0294000401146010a4d00010a4d00029c4000070012242068656c6c6f207465726e";
    const UDP_UP: &str =
        "45000026e0294000401146000a4d00030a4d00019c4000070012241f68656c6c6f207465726e";
    /// TCP SYN 10.77.0.1:40001 -> 10.77.0.2:5000 with MSS, SACK, timestamps and window scale.
    const TCP_SYN_TO_FAR: &str = "4500003c6b4140004006bade0a4d00010a4d00029c4113887c40a94900000000\
                                  a002faf0b0360000020405b40402080a25608d85000000000103030a";
    const TCP_SYN_UP: &str = "4500003c6b4140004006badd0a4d00030a4d00019c4113887c40a94900000000\
                              a002faf0b0350000020405b40402080a25608d85000000000103030a";
    /// The server's side: 10.77.0.1:7 -> 10.77.0.3:40000, and what the client then receives.
    const UDP_TO_MIRROR: &str =
        "45000026e0294000401146000a4d00010a4d00039c4000070012241f68656c6c6f207465726e";
    const UDP_DOWN: &str =
        "45000026e0294000401146010a4d00020a4d00019c4000070012242068656c6c6f207465726e";
    const TCP_TO_MIRROR: &str = "4500003c6b4140004006badd0a4d00010a4d00039c4113887c40a949000000\
                                 00a002faf0b0350000020405b40402080a25608d85000000000103030a";
    const TCP_DOWN: &str = "4500003c6b4140004006bade0a4d00020a4d00019c4113887c40a94900000000\
                            a002faf0b0360000020405b40402080a25608d85000000000103030a";

    #[test]
    fn checksum_known_answers() {
        // RFC 1071 section 3's example: the sum is 0xddf2.
        assert_eq!(ones_complement_sum(&hex("0001f203f4f5f6f7")), 0xddf2);
        assert_eq!(internet_checksum(&hex("0001f203f4f5f6f7")), 0x220d);
        // A textbook IPv4 header (192.168.0.1 -> 192.168.0.199), its checksum field zeroed.
        let header = hex("450000730000400040110000c0a80001c0a800c7");
        assert_eq!(internet_checksum(&header), 0xb861);
        // An odd length pads with a zero byte.
        assert_eq!(ones_complement_sum(&[0x12, 0x34, 0x56]), 0x6834);
        // Over a region holding its own correct checksum the result is 0.
        assert_eq!(internet_checksum(&hex(UDP_TO_FAR)[..20]), 0);
    }

    #[test]
    fn adjusting_equals_recomputing() {
        let mut header = hex("450000730000400040110000c0a80001c0a800c7");
        let before = internet_checksum(&header);
        let old = header[12..20].to_vec();
        let new = hex("0a4d00030a4d0001");
        header[12..20].copy_from_slice(&new);
        assert_eq!(adjust_checksum(before, &old, &new), internet_checksum(&header));
    }

    #[test]
    fn up_known_answers() {
        for (input, expected) in [(UDP_TO_FAR, UDP_UP), (TCP_SYN_TO_FAR, TCP_SYN_UP)] {
            let mut packet = hex(input);
            assert_eq!(net77().reflect(&mut packet), Ok(Dir::Up));
            assert_eq!(packet, hex(expected), "reflecting {input}");
            assert!(transport_checksum_ok(&packet));
            assert_eq!(internet_checksum(&packet[..20]), 0);
        }
    }

    #[test]
    fn down_known_answers() {
        for (input, expected) in [(UDP_TO_MIRROR, UDP_DOWN), (TCP_TO_MIRROR, TCP_DOWN)] {
            let mut packet = hex(input);
            assert_eq!(net77().reflect(&mut packet), Ok(Dir::Down));
            assert_eq!(packet, hex(expected), "reflecting {input}");
            assert!(transport_checksum_ok(&packet));
        }
    }

    #[test]
    fn udp_checksum_that_becomes_zero_is_sent_as_ffff() {
        // Payload chosen (by the independent implementation) so the reflected sum is 0.
        let mut packet = hex("4500001e12344000401113ff0a4d00010a4d00029c400007000a00014ef5");
        assert_eq!(net77().reflect(&mut packet), Ok(Dir::Up));
        assert_eq!(packet, hex("4500001e12344000401113fe0a4d00030a4d00019c400007000affff4ef5"));
        assert!(transport_checksum_ok(&packet));
    }

    #[test]
    fn udp_without_checksum_stays_without() {
        let mut packet = hex(UDP_TO_FAR);
        packet[26..28].fill(0);
        net77().reflect(&mut packet).unwrap();
        assert_eq!(&packet[26..28], &[0, 0]);
    }

    #[test]
    fn icmp_echo_keeps_its_payload_and_checksum() {
        // An echo request 10.77.0.1 -> 10.77.0.2 as the kernel sent it from a raw socket.
        let mut packet = hex("4500001ea42440004001821e0a4d00010a4d000208000000123400016162");
        let icmp = packet[20..].to_vec();
        assert_eq!(net77().reflect(&mut packet), Ok(Dir::Up));
        assert_eq!(&packet[12..20], &hex("0a4d00030a4d0001")[..]);
        assert_eq!(&packet[20..], &icmp[..]);
        assert_eq!(internet_checksum(&packet[..20]), 0);
    }

    #[test]
    fn fragments_reassemble_with_a_valid_checksum() {
        // One UDP datagram of 3000 payload bytes in three fragments, as an MTU of 1500 cuts it.
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut udp = [40000u16, 7, 3008].map(u16::to_be_bytes).concat();
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(&payload);
        let mut pseudo = hex("0a4d00010a4d0002");
        pseudo.extend_from_slice(&[0, PROTO_UDP]);
        pseudo.extend_from_slice(&3008u16.to_be_bytes());
        pseudo.extend_from_slice(&udp);
        let sum = internet_checksum(&pseudo);
        udp[6..8].copy_from_slice(&sum.to_be_bytes());

        let mut reassembled = Vec::new();
        for (i, piece) in udp.chunks(1480).enumerate() {
            let more = if (i + 1) * 1480 < udp.len() { 0x2000 } else { 0 };
            let flags_offset: u16 = more | (i * 1480 / 8) as u16;
            let mut packet = hex("45000000abcd0000401100000a4d00010a4d0002");
            packet[2..4].copy_from_slice(&((20 + piece.len()) as u16).to_be_bytes());
            packet[6..8].copy_from_slice(&flags_offset.to_be_bytes());
            let header_sum = internet_checksum(&packet);
            packet[10..12].copy_from_slice(&header_sum.to_be_bytes());
            packet.extend_from_slice(piece);
            assert_eq!(net77().reflect(&mut packet), Ok(Dir::Up), "fragment {i}");
            assert_eq!(internet_checksum(&packet[..20]), 0);
            assert_eq!(&packet[12..20], &hex("0a4d00030a4d0001")[..]);
            reassembled.extend_from_slice(&packet[20..]);
        }
        let mut whole = hex("450000000000000040110000");
        whole.extend_from_slice(&hex("0a4d00030a4d0001"));
        whole.extend_from_slice(&reassembled);
        assert_eq!(&reassembled[8..], &payload[..]);
        assert!(transport_checksum_ok(&whole));
    }

    #[test]
    fn what_is_not_reflected_is_left_alone() {
        let reflect = |packet: &str| {
            let mut p = hex(packet);
            let r = net77().reflect(&mut p);
            assert_eq!(p, hex(packet), "an unreflected packet must stay as it was");
            r
        };
        // An IPv6 router solicitation, as the kernel sends when the device comes up.
        let ipv6 = "6000000000083afffe80000000000000c3c1ae1a4ca3d7ceff0200000000000000000000\
                    000000028500e6e800000000";
        assert_eq!(reflect(ipv6), Err(Unreflected::NotIpv4));
        // To 10.77.0.9: neither far nor mirror.
        let other_dst = UDP_TO_FAR.replace("0a4d00010a4d0002", "0a4d00010a4d0009");
        assert_eq!(reflect(&other_dst), Err(Unreflected::OtherAddress));
        // From an address other than the host's.
        let other_src = UDP_TO_FAR.replace("0a4d00010a4d0002", "0a4d00050a4d0002");
        assert_eq!(reflect(&other_src), Err(Unreflected::OtherAddress));
        // ICMP port unreachable (type 3) quoting a header: not translated.
        let unreachable = "4500001ea42440004001821e0a4d00010a4d000303030000000000004500";
        assert_eq!(reflect(unreachable), Err(Unreflected::Unsupported));
        // A protocol other than TCP, UDP and ICMP (GRE, 47).
        let gre = UDP_TO_FAR.replacen("4011", "402f", 1);
        assert_eq!(reflect(&gre), Err(Unreflected::Unsupported));
        // Cut short: total length beyond the bytes, and a TCP header too short for its checksum.
        assert_eq!(reflect(&UDP_TO_FAR[..60]), Err(Unreflected::Malformed));
        let short_tcp = "4500001c00004000400600000a4d00010a4d00029c41138800000000";
        assert_eq!(reflect(short_tcp), Err(Unreflected::Malformed));
        assert_eq!(reflect(""), Err(Unreflected::NotIpv4));
    }
}
