//! The page as a security boundary: the response headers every HTTP answer carries (a strict
//! Content-Security-Policy, no framing, no referrer, no sniffing, its own browsing context group)
//! and the Origin checks of the browser-facing handshakes (WebSocket upgrade, `/api/*`,
//! WebTransport CONNECT). docs/SECURITY.md says what each one defends against. Also who a request
//! is from, for the limiter: the TCP peer, or behind a `--trust-proxy` the client it forwards.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use hyper::HeaderMap;
use hyper::header::{self, HeaderValue};

/// An origin the relay accepts besides its own page's (`--allow-origin`): `scheme://host[:port]`,
/// kept lower-case with the scheme's default port made explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedOrigin(Origin);

impl FromStr for AllowedOrigin {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Origin::parse(s.trim()).map(AllowedOrigin).ok_or_else(|| {
            format!("bad origin {s:?}: want scheme://host[:port] (http or https, no path)")
        })
    }
}

impl std::fmt::Display for AllowedOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.0.scheme, self.0.host, self.0.port)
    }
}

/// A web origin as browsers serialize it in the `Origin` header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: &'static str,
    /// Lower-case; an IPv6 literal keeps its brackets.
    host: String,
    port: u16,
}

impl Origin {
    /// `http(s)://host[:port]` with nothing after it (a trailing `/` is tolerated for
    /// `--allow-origin`). `null` and other schemes are `None`.
    fn parse(s: &str) -> Option<Origin> {
        let (scheme, rest) = s.split_once("://")?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => "http",
            "https" => "https",
            _ => return None,
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = split_host_port(rest)?;
        let port = match port {
            Some(p) => p,
            None => default_port(scheme),
        };
        Some(Origin { scheme, host, port })
    }
}

fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// `host[:port]` (a `Host` header, an `:authority`, an origin's tail): the host lower-case and
/// checked to be a plain name or address (letters, digits, `-`, `.`, or a bracketed IPv6
/// literal), the port if one is written.
fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if inside.is_empty()
            || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return None;
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{inside}]"), port)
    } else {
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        let name_ok = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
        if host.is_empty() || !host.bytes().all(name_ok) {
            return None;
        }
        (host.to_string(), port)
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Some(p.parse().ok()?),
        Some(_) => return None,
    };
    Some((host.to_ascii_lowercase(), port))
}

/// Whether an `Origin` of an HTTP request (WebSocket upgrade, `/api/*`) is the page's own: its
/// scheme (the relay's, or the one a TLS-ending proxy names in `X-Forwarded-Proto`) and the
/// `Host` the browser sent (which is the address in its address bar: a proxy must pass `Host`
/// through), or one of `allowed`. A request without `Origin` passes: browsers always send one
/// on a WebSocket and on a cross-origin fetch; other clients are held by the token.
pub(crate) fn http_origin_ok(
    headers: &HeaderMap,
    own_scheme: &'static str,
    allowed: &[AllowedOrigin],
) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let Some(origin) = origin.to_str().ok().and_then(Origin::parse) else { return false };
    if allowed.iter().any(|a| a.0 == origin) {
        return true;
    }
    let forwarded = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(str::trim)
        .and_then(|p| match p.to_ascii_lowercase().as_str() {
            "http" => Some("http"),
            "https" => Some("https"),
            _ => None,
        });
    let scheme = forwarded.unwrap_or(own_scheme);
    let Some((host, port)) =
        headers.get(header::HOST).and_then(|h| h.to_str().ok()).and_then(split_host_port)
    else {
        return false;
    };
    let own = Origin { scheme, host, port: port.unwrap_or(default_port(scheme)) };
    origin == own
}

/// Which `Host` names the relay answers to: its defence against DNS rebinding. A page on a
/// name its author controls (`evil.example`) can have that name re-resolve to 127.0.0.1 and
/// then read the relay's answers as its own origin: its `Origin` and `Host` then agree, so the
/// Origin check cannot tell it from the relay's own page. It cannot choose the name, though, and
/// that is what this checks. An IP literal or a `localhost` name is always accepted (no DNS is
/// involved); any other name only when listed: `--allow-host`, and the names of the relay's
/// certificate (`--acme`, `--tls-cert`). The check applies when the relay listens on loopback
/// (where rebinding is the way in) or when `--allow-host` is given; elsewhere names are not
/// checked, so a relay on the LAN stays reachable by whatever name the network gives it.
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    enforced: bool,
    /// Lower-case, without a trailing dot.
    names: Vec<String>,
}

impl HostPolicy {
    /// `listen_on_loopback`: `--listen` is a loopback address; `allow_host`: `--allow-host`;
    /// `cert_names`: the DNS names of the relay's certificate.
    pub fn new(listen_on_loopback: bool, allow_host: &[String], cert_names: &[String]) -> Self {
        let names = allow_host
            .iter()
            .chain(cert_names)
            .map(|n| n.trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        HostPolicy { enforced: listen_on_loopback || !allow_host.is_empty(), names }
    }

    /// Whether a request that names `host` (a `Host` header or a CONNECT's `:authority`, with or
    /// without a port) may be answered. No `Host` at all is no browser and passes.
    pub fn allows(&self, host: Option<&str>) -> bool {
        if !self.enforced {
            return true;
        }
        let Some(host) = host else { return true };
        let Some((host, _port)) = split_host_port(host) else { return false };
        let host = host.strip_suffix('.').unwrap_or(&host);
        if host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok() {
            return true;
        }
        if host == "localhost" || host.ends_with(".localhost") {
            return true;
        }
        self.names.iter().any(|n| n == host)
    }
}

/// Whether the `Origin` of a WebTransport CONNECT may open a session: absent (a native client),
/// one of `allowed`, or an http(s) origin whose host is the host the CONNECT went to. The page
/// builds its WebTransport URL from its own `location.hostname`, so its host always matches;
/// the port may not (behind a reverse proxy the page is on 443 and WebTransport on the relay's
/// UDP port), so it is not compared. A page served from another port of the same host comes from
/// whoever can reach the relay from that host anyway, and still needs the token.
pub(crate) fn webtransport_origin_ok(
    origin: Option<&str>,
    authority: &str,
    allowed: &[AllowedOrigin],
) -> bool {
    let Some(origin) = origin else { return true };
    let Some(origin) = Origin::parse(origin) else { return false };
    if allowed.iter().any(|a| a.0 == origin) {
        return true;
    }
    split_host_port(authority).is_some_and(|(host, _)| host == origin.host)
}

/// The source an HTTP request (an `/api/*` call, a WebSocket upgrade) counts against in the
/// limiters: the TCP peer, unless the peer is one of the `trusted` proxies (`--trust-proxy`):
/// then the client the proxies forwarded, the last `X-Forwarded-For` entry not added by a trusted
/// proxy (or, without that header, the same in `Forwarded: for=`). A forwarded header from any
/// other peer is ignored: a client could write anything there.
pub fn client_source(
    peer: SocketAddr,
    headers: &HeaderMap,
    trusted: &[IpAddr],
) -> crate::auth::SourceKey {
    crate::auth::SourceKey::of(client_address(peer.ip(), headers, trusted))
}

fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|t| t.to_canonical() == ip.to_canonical());
    if !is_trusted(&peer) {
        return peer;
    }
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    };
    // Entries in the order the hops added them: the last one is the nearest proxy's view.
    let forwarded_for = values("x-forwarded-for");
    let hops: Vec<Option<IpAddr>> = if !forwarded_for.is_empty() {
        forwarded_for.iter().flat_map(|v| v.split(',')).map(parse_forwarded_node).collect()
    } else {
        values("forwarded")
            .iter()
            .flat_map(|v| v.split(','))
            .filter_map(|element| {
                element.split(';').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("for").then(|| parse_forwarded_node(v))
                })
            })
            .collect()
    };
    // Walk back from the nearest hop over the trusted proxies; the first other hop is the client.
    // A hop that is no address (`unknown`, an obfuscated name, garbage) ends the walk at the
    // proxy that added it: nothing further left can be trusted.
    let mut client = peer;
    for hop in hops.iter().rev() {
        match hop {
            Some(ip) => {
                client = *ip;
                if !is_trusted(ip) {
                    break;
                }
            }
            None => break,
        }
    }
    client
}

/// One node of `X-Forwarded-For` or of `Forwarded`'s `for=`: an address, optionally quoted,
/// bracketed (IPv6) and with a port.
fn parse_forwarded_node(s: &str) -> Option<IpAddr> {
    let s = s.trim().trim_matches('"');
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    let inside = s.strip_prefix('[')?.split(']').next()?;
    inside.parse().ok()
}

/// The page's Content-Security-Policy. Scripts: the page's own files, and of inline scripts only
/// the document's own by their SHA-256 (the early link's, [`crate::assets::inline_script_hashes`]),
/// no eval; `'wasm-unsafe-eval'` lets the page compile its own wasm module (and nothing else).
/// Styles: xterm.js 6 writes `<style>` elements (its scrollbar colours, the DOM renderer's theme
/// and cell size) and `style` attributes (the DOM renderer's contrast colours; the history view's
/// line positions and 24-bit colours), so `'unsafe-inline'` stays for styles only (docs/SECURITY.md
/// has the measurement). Connections: the page's own origin (fetch, ws/wss) and WebTransport to
/// any port of the host it was loaded from (`host`: the request's `Host` without its port; the
/// relay's UDP port differs from the page's behind a proxy). Workers: the page's own service worker
/// (`sw.js`, which caches the page's files). Nothing may frame the page.
/// A trusted front door (`--trust-proxy` with `--identity-header`): who a request's identity
/// header names, if the peer may say it.
#[derive(Debug, Clone, Default)]
pub(crate) struct FrontDoor {
    /// `--trust-proxy`: the only peers whose identity header counts.
    pub trust_proxy: Vec<IpAddr>,
    /// `--identity-header`: none, no front door.
    pub header: Option<String>,
}

/// What a request's identity header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Vouch {
    /// No front door, or no header.
    Nobody,
    /// The header from a peer that is not a trusted proxy: ignored (the caller logs and audits).
    Untrusted,
    /// A trusted proxy named this person (`proxy:USER`; no token name has a colon, so it never
    /// reads as a token or `owner`). A malformed value names nobody.
    Person(crate::tokens::Who),
}

impl FrontDoor {
    /// `value`: the header's value as the request carried it (looked up by [`Self::header`]).
    pub fn vouch(&self, peer: IpAddr, value: Option<&[u8]>) -> Vouch {
        let (Some(_), Some(value)) = (&self.header, value) else { return Vouch::Nobody };
        let ip = peer.to_canonical();
        if !self.trust_proxy.iter().any(|t| t.to_canonical() == ip) {
            return Vouch::Untrusted;
        }
        let user = std::str::from_utf8(value).ok().map(str::trim).filter(|u| {
            (1..=128).contains(&u.len()) && u.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        });
        match user {
            Some(u) => Vouch::Person(crate::tokens::Who::Proxied { user: format!("proxy:{u}") }),
            None => Vouch::Nobody,
        }
    }
}

pub(crate) fn content_security_policy(host: Option<&str>) -> String {
    let connect = match host.and_then(split_host_port) {
        Some((host, _)) => format!("'self' https://{host}:*"),
        None => "'self'".to_string(),
    };
    let mut scripts = String::from("'self' 'wasm-unsafe-eval'");
    for hash in crate::assets::inline_script_hashes() {
        scripts.push(' ');
        scripts.push_str(hash);
    }
    format!(
        "default-src 'none'; script-src {scripts}; \
         style-src 'self' 'unsafe-inline'; img-src 'self' blob:; font-src 'self'; \
         manifest-src 'self'; connect-src {connect}; \
         base-uri 'none'; form-action 'none'; object-src 'none'; frame-src 'none'; \
         worker-src 'self'; frame-ancestors 'none'"
    )
}

/// Marks a response that is only ever a subresource of the page ([`crate::assets::is_subresource`]):
/// [`add_response_headers`] leaves the document-only headers off it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Subresource;

/// Adds the headers every HTTP answer of the relay carries (the page, its files, `/api/*`,
/// errors). `host` is the request's `Host` header. A [`Subresource`] (a hashed script, wasm,
/// stylesheet...) goes without the ones a browser reads from documents and workers only.
pub(crate) fn add_response_headers(headers: &mut HeaderMap, host: Option<&str>, subresource: bool) {
    // Browsers must take the declared types at their word (wasm, module scripts).
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    // A stylesheet's referrer policy also covers what it fetches (url()).
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if !subresource {
        if let Ok(csp) = HeaderValue::from_str(&content_security_policy(host)) {
            headers.insert(header::CONTENT_SECURITY_POLICY, csp);
        }
        // frame-ancestors' older spelling, for browsers that predate it.
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        // Its own browsing context group: a page that opened this one (or that it opens) gets no
        // handle on it. `tern open` opens with noopener anyway.
        headers.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    }
    // Other origins may not load the relay's files as their subresources.
    headers.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    headers.entry(header::CACHE_CONTROL).or_insert_with(|| HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_trusted_proxy_names_a_person() {
        let door = FrontDoor {
            trust_proxy: vec!["127.0.0.2".parse().unwrap()],
            header: Some("X-Forwarded-User".into()),
        };
        let proxy: IpAddr = "127.0.0.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        let who =
            |u: &str| Vouch::Person(crate::tokens::Who::Proxied { user: format!("proxy:{u}") });
        assert_eq!(door.vouch(proxy, Some(b" alice ")), who("alice"));
        assert_eq!(door.vouch(mapped, Some(b"alice")), who("alice"), "a dual-stack socket's view");
        assert_eq!(door.vouch("127.0.0.1".parse().unwrap(), Some(b"alice")), Vouch::Untrusted);
        assert_eq!(door.vouch(proxy, None), Vouch::Nobody);
        assert_eq!(door.vouch(proxy, Some(b"")), Vouch::Nobody, "an empty login names nobody");
        assert_eq!(door.vouch(proxy, Some(b"a\nb")), Vouch::Nobody);
        assert_eq!(door.vouch(proxy, Some(&[b'x'; 129])), Vouch::Nobody);
        let closed = FrontDoor { header: None, ..door };
        assert_eq!(closed.vouch(proxy, Some(b"alice")), Vouch::Nobody, "no front door");
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn origins_parse_with_default_ports() {
        let o = |s| Origin::parse(s);
        assert_eq!(
            o("https://Example.COM"),
            Some(Origin { scheme: "https", host: "example.com".into(), port: 443 })
        );
        assert_eq!(
            o("http://127.0.0.1:8080"),
            Some(Origin { scheme: "http", host: "127.0.0.1".into(), port: 8080 })
        );
        assert_eq!(
            o("http://[::1]:7480"),
            Some(Origin { scheme: "http", host: "[::1]".into(), port: 7480 })
        );
        assert_eq!(o("null"), None);
        assert_eq!(o("file://"), None);
        assert_eq!(o("https://a.b/path"), None);
        assert_eq!(o("https://a b"), None);
        assert_eq!(o("https://a:99999"), None);
        assert_eq!(o("https://a:"), None);
        assert!("https://relay.example:8443/".parse::<AllowedOrigin>().is_ok());
        assert!("relay.example".parse::<AllowedOrigin>().is_err());
    }

    #[test]
    fn http_origin_is_scheme_and_host() {
        let ok = |h: &[(&'static str, &str)], scheme| http_origin_ok(&headers(h), scheme, &[]);
        assert!(ok(&[("host", "127.0.0.1:7480")], "http"), "no Origin: not a browser");
        assert!(ok(&[("host", "127.0.0.1:7480"), ("origin", "http://127.0.0.1:7480")], "http"));
        assert!(ok(&[("host", "Relay.example"), ("origin", "https://relay.example")], "https"));
        assert!(ok(&[("host", "relay.example:443"), ("origin", "https://relay.example")], "https"));
        assert!(!ok(&[("host", "127.0.0.1:7480"), ("origin", "http://127.0.0.1:7481")], "http"));
        assert!(!ok(&[("host", "127.0.0.1:7480"), ("origin", "https://127.0.0.1:7480")], "http"));
        assert!(!ok(&[("host", "127.0.0.1:7480"), ("origin", "http://evil.example")], "http"));
        assert!(!ok(&[("host", "127.0.0.1:7480"), ("origin", "null")], "http"));
        assert!(!ok(&[("origin", "http://127.0.0.1:7480")], "http"), "no Host to compare with");
        let proxied = [
            ("host", "relay.example"),
            ("origin", "https://relay.example"),
            ("x-forwarded-proto", "https"),
        ];
        assert!(ok(&proxied, "http"), "a TLS-ending proxy names its scheme");
        let allowed = ["https://portal.example:8443".parse::<AllowedOrigin>().unwrap()];
        let h = headers(&[("host", "10.0.0.5:7480"), ("origin", "https://portal.example:8443")]);
        assert!(!http_origin_ok(&h, "http", &[]));
        assert!(http_origin_ok(&h, "http", &allowed), "--allow-origin");
    }

    #[test]
    fn rebinding_names_are_refused_on_loopback() {
        let loopback = HostPolicy::new(true, &[], &[]);
        for host in ["127.0.0.1:7480", "[::1]:7480", "localhost:7480", "LOCALHOST", "a.localhost"] {
            assert!(loopback.allows(Some(host)), "{host}");
        }
        assert!(loopback.allows(Some("10.0.0.5:7480")), "an address involves no DNS");
        assert!(loopback.allows(None), "no Host: not a browser");
        for host in ["evil.example:7480", "localhost.evil.example", "x y", "evil.example.:1"] {
            assert!(!loopback.allows(Some(host)), "{host}");
        }
        let allowed = HostPolicy::new(true, &["Relay.Example.".into()], &["cert.example".into()]);
        assert!(allowed.allows(Some("relay.example:443")), "--allow-host");
        assert!(allowed.allows(Some("cert.example")), "the certificate's name");
        assert!(!allowed.allows(Some("evil.example")));
        assert!(HostPolicy::new(false, &[], &[]).allows(Some("any.example")), "not on loopback");
        let lan = HostPolicy::new(false, &["relay.lan".into()], &[]);
        assert!(!lan.allows(Some("evil.example")), "--allow-host turns the check on anywhere");
        assert!(lan.allows(Some("192.168.1.9:7480")));
    }

    #[test]
    fn webtransport_origin_is_the_connect_host() {
        let ok = |o, a| webtransport_origin_ok(o, a, &[]);
        assert!(ok(None, "127.0.0.1:7480"), "native clients send no Origin");
        assert!(ok(Some("http://127.0.0.1:7480"), "127.0.0.1:7480"));
        assert!(
            ok(Some("https://relay.example"), "relay.example:4433"),
            "page behind a proxy on 443"
        );
        assert!(ok(Some("http://localhost:7480"), "LOCALHOST:9999"));
        assert!(ok(Some("http://[::1]:7480"), "[::1]:7480"));
        assert!(
            !ok(Some("http://127.0.0.1:7480"), "localhost:7480"),
            "another name is another site"
        );
        assert!(!ok(Some("https://evil.example"), "relay.example:4433"));
        assert!(!ok(Some("null"), "relay.example:4433"));
        let allowed = ["https://portal.example".parse::<AllowedOrigin>().unwrap()];
        assert!(webtransport_origin_ok(
            Some("https://portal.example"),
            "relay.example:4433",
            &allowed
        ));
    }

    #[test]
    fn forwarded_clients_count_only_behind_a_trusted_proxy() {
        use crate::auth::SourceKey;
        let proxy: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        let stranger: SocketAddr = "203.0.113.9:50000".parse().unwrap();
        let trusted: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()];
        let key = |s: &str| SourceKey::of(s.parse().unwrap());
        let src = |peer, h: &[(&'static str, &str)]| client_source(peer, &headers(h), &trusted);
        // No header: the peer.
        assert_eq!(src(proxy, &[]), key("127.0.0.1"));
        // The last entry a trusted proxy did not add.
        assert_eq!(src(proxy, &[("x-forwarded-for", "198.51.100.7")]), key("198.51.100.7"));
        assert_eq!(
            src(proxy, &[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.0.0.2")]),
            key("198.51.100.7"),
            "what the client wrote itself (6.6.6.6) is not believed"
        );
        assert_eq!(src(proxy, &[("x-forwarded-for", "[2001:db8::5]:443")]), key("2001:db8::5"));
        // Forwarded: for= (RFC 7239), quoted IPv6 with a port.
        let fwd = "for=6.6.6.6, for=\"[2001:db8:7::1]:4711\";proto=https";
        assert_eq!(src(proxy, &[("forwarded", fwd)]), key("2001:db8:7::1"));
        // Garbage from the nearest proxy: the proxy itself, not something the client chose.
        assert_eq!(src(proxy, &[("x-forwarded-for", "6.6.6.6, unknown")]), key("127.0.0.1"));
        // Every hop trusted: the first one.
        assert_eq!(src(proxy, &[("x-forwarded-for", "10.0.0.2")]), key("10.0.0.2"));
        // An untrusted peer's headers are ignored.
        assert_eq!(src(stranger, &[("x-forwarded-for", "198.51.100.7")]), key("203.0.113.9"));
        assert_eq!(src(stranger, &[("forwarded", "for=198.51.100.7")]), key("203.0.113.9"));
        // Without --trust-proxy nothing is trusted.
        let h = headers(&[("x-forwarded-for", "198.51.100.7")]);
        assert_eq!(client_source(proxy, &h, &[]), key("127.0.0.1"));
    }

    #[test]
    fn the_policy_names_the_host_only_when_it_is_a_plain_host() {
        let csp = content_security_policy(Some("127.0.0.1:7480"));
        assert!(csp.contains("connect-src 'self' https://127.0.0.1:*;"), "{csp}");
        // Scripts: the page's files and the document's inline scripts by hash, nothing else.
        let scripts = csp.split("script-src ").nth(1).and_then(|s| s.split(';').next()).unwrap();
        let sources: Vec<&str> = scripts.split(' ').collect();
        assert_eq!(sources[..2], ["'self'", "'wasm-unsafe-eval'"], "{csp}");
        let hashes = crate::assets::inline_script_hashes();
        assert_eq!(sources[2..], hashes.iter().map(String::as_str).collect::<Vec<_>>(), "{csp}");
        assert!(!scripts.contains("unsafe-inline"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        // A Host header cannot smuggle directives into the policy.
        let csp = content_security_policy(Some("x; script-src *"));
        assert!(csp.contains("connect-src 'self';"), "{csp}");
        assert!(!csp.contains("script-src *"), "{csp}");
        assert!(content_security_policy(None).contains("connect-src 'self';"));
    }

    #[test]
    fn inline_scripts_are_allowed_by_the_hash_of_their_exact_bytes() {
        use crate::assets::{inline_scripts, script_source};
        // SHA-256 of nothing, as CSP writes it.
        assert_eq!(script_source(b""), "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='");
        let doc = b"<head><script>a()</script><script src=x.js></script>\
            <script type=module>b()</script><script>\nc()\n</script><script>unclosed";
        let found: Vec<&[u8]> = inline_scripts(doc).collect();
        assert_eq!(found, [&b"a()"[..], &b"\nc()\n"[..]]);
        // One byte more or less is another script: not allowed.
        assert_ne!(script_source(b"a()"), script_source(b"a() "));
        // The embedded document's inline scripts (the early link's, when the page is built) are
        // each in the policy.
        if let Some(doc) = crate::assets::find("/index.html") {
            let csp = content_security_policy(Some("127.0.0.1:7480"));
            let scripts: Vec<&[u8]> = inline_scripts(doc.bytes).collect();
            assert_eq!(scripts.len(), 1, "the early link's script alone");
            for script in scripts {
                assert!(csp.contains(&script_source(script)), "{csp}");
            }
        }
    }
}
