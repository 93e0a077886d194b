//! Where the page's WebTransport link goes, known before `/api/info` answers, so the page starts
//! its handshake at once, beside the info instead of after it (issue 36: the handshake's two
//! round trips leave the first prompt's path).
//!
//! The relay puts it on the document's answer (`Server-Timing: tern-link;desc="…"`, the one
//! header of a navigation a page's script can read), and the page knocks there before its wasm is
//! in. The hint only says where to knock early; it decides nothing. The link it opens is used
//! only when the relay's fresh `/api/info` (asked after the relay proved it knows the token)
//! gives the same hint ([`LinkHint::describes`]: port, path and certificates); otherwise the page
//! closes it and opens one from the info, as before. And whatever answers on it must still
//! prove the token on the control stream before the page says anything but a nonce: a stale or
//! forged hint costs a handshake, never the token. Nothing in it is secret: the port and path are
//! in every `/api/info`, the certificate's hash in every TLS handshake on the port.

use super::RelayInfo;

/// The `Server-Timing` metric of the document's answer that carries the hint in its `desc`.
pub const LINK_HINT_TIMING: &str = "tern-link";

/// The only certificate hash algorithm WebTransport takes (`serverCertificateHashes`).
const ALGORITHM: &str = "sha-256";

/// Where a WebTransport link to the relay goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkHint {
    /// The UDP port (`info.port`, or the page's `#wt_port=` override).
    pub port: u16,
    pub path: String,
    /// Base64 SHA-256 of a self-signed relay's certificates (as `/api/info` gives them); empty
    /// for a certificate the browser trusts itself.
    pub cert_hashes: Vec<String>,
}

impl LinkHint {
    /// The hint for a link to `port` as `info` describes it; `None` for a relay without
    /// WebTransport.
    pub fn from_info(info: &RelayInfo, port: u16) -> Option<LinkHint> {
        let hashes = if info.cert_self_signed { info.cert_hashes.clone() } else { Vec::new() };
        let usable = info.has_webtransport()
            && port != 0
            && (!info.cert_self_signed
                || (info.cert_hash_algorithm == ALGORITHM && !hashes.is_empty()));
        usable.then(|| LinkHint { port, path: info.webtransport_path.clone(), cert_hashes: hashes })
    }

    /// One line, fields between spaces: `PORT PATH [HASH...]` (the header's `desc`, and what
    /// the page keeps).
    pub fn encode(&self) -> String {
        let mut text = format!("{} {}", self.port, self.path);
        for hash in &self.cert_hashes {
            text.push(' ');
            text.push_str(hash);
        }
        text
    }

    /// Whether `text`, a hint the page knocked at, is the one the relay's `info` gives for a link
    /// to `port` (`info.port`, or the page's `#wt_port=`): the same port, path and certificates
    /// (a certificate renewed between the document and the info, or a hint from anyone but the
    /// relay, is not).
    pub fn describes(text: &str, info: &RelayInfo, port: u16) -> bool {
        LinkHint::from_info(info, port).is_some_and(|hint| hint.encode() == text)
    }

    /// Whether a link the page knocked at with hint `text` goes where the page was told to take
    /// WebTransport (`wt_port`, a `#wt_port=` the tab keeps; `None`: wherever the relay says).
    /// A link used before the info is in (its relay proved the token) is checked with this
    /// instead of [`describes`](Self::describes): a page sent to another port (a test's dead
    /// one, standing for blocked UDP) must not keep the relay's own.
    pub fn goes_to_port(text: &str, wt_port: Option<u16>) -> bool {
        let knocked = text.split(' ').next().and_then(|port| port.parse::<u16>().ok());
        wt_port.is_none_or(|wanted| knocked == Some(wanted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay_proto::decode;

    const A: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    const B: &str = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=";
    const C: &str = "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCA=";

    fn info() -> RelayInfo {
        let json = format!(
            r#"{{"version":"0.1.0","commit":"abc","protocol":{},"mode":"spawn","port":7480,
            "webtransport_path":"/wt","cert_hashes":["{A}","{B}"],"cert_hash_algorithm":"sha-256",
            "cert_self_signed":true,"framing":1,"max_datagram_size":1200,
            "limits":{{"max_sessions":1,"max_spawned":1,"datagram_rate":1,"datagram_burst":1,
            "idle_timeout_secs":1,"max_control_message":1}},"paste":{{"available":false}},
            "bridge_allow":[],"history_lines":0}}"#,
            crate::relay_proto::PROTOCOL_VERSION
        );
        decode(json.as_bytes()).expect("info")
    }

    #[test]
    fn a_hint_is_one_line_of_port_path_and_hashes() {
        let hint = LinkHint::from_info(&info(), 9000).expect("a hint");
        assert_eq!(hint.encode(), format!("9000 /wt {A} {B}"));
        let ca = RelayInfo { cert_self_signed: false, ..info() };
        assert_eq!(LinkHint::from_info(&ca, 7480).map(|h| h.encode()), Some("7480 /wt".into()));
    }

    #[test]
    fn a_relay_without_webtransport_gives_no_hint() {
        let unix = RelayInfo { port: 0, webtransport_path: String::new(), ..info() };
        assert_eq!(LinkHint::from_info(&unix, 0), None);
        let unhashed = RelayInfo { cert_hashes: vec![], ..info() };
        assert_eq!(LinkHint::from_info(&unhashed, 7480), None);
        let other = RelayInfo { cert_hash_algorithm: "sha-512".into(), ..info() };
        assert_eq!(LinkHint::from_info(&other, 7480), None);
    }

    #[test]
    fn a_page_told_to_take_another_port_uses_only_a_link_to_that_port() {
        let hint = format!("7480 /wt {A} {B}");
        assert!(LinkHint::goes_to_port(&hint, None));
        assert!(LinkHint::goes_to_port(&hint, Some(7480)));
        assert!(!LinkHint::goes_to_port(&hint, Some(9)), "a dead port stands for blocked UDP");
        assert!(!LinkHint::goes_to_port("garbage", Some(7480)));
        assert!(!LinkHint::goes_to_port("", Some(7480)));
    }

    #[test]
    fn a_link_is_used_only_when_the_fresh_info_gives_the_same_hint() {
        let info = info();
        assert!(LinkHint::describes(&format!("7480 /wt {A} {B}"), &info, 7480));
        for other in [
            // Another port, another path, fewer or other certificates, another order, noise.
            format!("7481 /wt {A} {B}"),
            format!("7480 /other {A} {B}"),
            format!("7480 /wt {A}"),
            format!("7480 /wt {A} {C}"),
            format!("7480 /wt {B} {A}"),
            format!("7480 /wt {A} {B} "),
            "7480 /wt".into(),
            String::new(),
        ] {
            assert!(!LinkHint::describes(&other, &info, 7480), "{other:?}");
        }
        // Through the tests' link emulator (#wt_port=): the page knocked at its port.
        assert!(LinkHint::describes(&format!("9000 /wt {A} {B}"), &info, 9000));
        assert!(!LinkHint::describes(&format!("7480 /wt {A} {B}"), &info, 9000));
        // The relay renewed its certificate between the document and the info.
        let renewed = RelayInfo { cert_hashes: vec![C.into()], ..info.clone() };
        assert!(!LinkHint::describes(&format!("7480 /wt {A} {B}"), &renewed, 7480));
        // A relay whose certificate the browser trusts itself: no hashes.
        let ca = RelayInfo { cert_self_signed: false, ..info.clone() };
        assert!(LinkHint::describes("7480 /wt", &ca, 7480));
        assert!(!LinkHint::describes(&format!("7480 /wt {A} {B}"), &ca, 7480));
        let unix = RelayInfo { port: 0, webtransport_path: String::new(), ..info };
        assert!(!LinkHint::describes("0 ", &unix, 0));
    }
}
