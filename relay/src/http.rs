//! The HTTP side: the page's static files (public), the small token-protected JSON API, and the
//! WebSocket fallback's upgrade (the session itself is the session layer's).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};

use tern::relay_proto::Message;
use tern::relay_proto::history::{MAX_PAGE_LINES, MAX_REQUEST, MAX_SEARCH_HITS};
use tern::relay_proto::{
    ApiError, HISTORY_PATH, HISTORY_SEARCH_PATH, HistoryRequest, HistorySearch, RelayInfo,
    SessionList, SessionSummary,
};

use crate::assets;
use crate::auth::{AuthOutcome, Credential, SourceKey};
use crate::challenge::Challenges;
use crate::session::{Pool, SessionContext};
use tern::relay_proto::proof::{CHALLENGE_PATH, ChallengeRequest};
use tern::relay_proto::{LINK_HINT_TIMING, LinkHint, WEBSOCKET_PATH};

type Body = Full<Bytes>;

/// The HTTP side's own settings, made from the relay's configuration by the top of the relay.
#[derive(Debug, Clone)]
pub(crate) struct HttpSettings {
    /// `--base-path`: where the page, `/api/*` and `/ws` are served.
    pub base_path: BasePath,
    /// `--header-timeout-secs`: for a connection's TLS handshake, and for each request's headers.
    pub header_timeout: Duration,
    /// `--trust-proxy`: peers whose forwarded client address the limiters count against.
    pub trust_proxy: Vec<std::net::IpAddr>,
}

/// What every HTTP connection's task shares.
#[derive(Debug)]
pub(crate) struct HttpContext {
    pub settings: HttpSettings,
    /// The sessions (a WebSocket upgrade becomes one; the API lists them), the token and its
    /// limiter.
    pub sessions: Arc<SessionContext>,
    /// `--max-http-connections`: held by each TCP connection until it closes or is upgraded.
    pub connections: Arc<tokio::sync::Semaphore>,
    /// HTTPS for the page, when configured (see [`CertManager::tls_acceptor`]).
    pub https: Option<Https>,
    /// The API's outstanding challenges (`POST /api/challenge`, spent by one request each).
    pub challenges: Challenges,
}

impl HttpContext {
    /// The acceptor for the next HTTPS connection; `None` when the page is served in clear.
    /// It asks the certificate manager for the current certificate at every handshake.
    pub fn https_acceptor(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.https.as_ref().map(|h| h.0.clone())
    }
}

/// The page's TLS acceptor.
pub(crate) struct Https(pub tokio_rustls::TlsAcceptor);

impl std::fmt::Debug for Https {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Https")
    }
}

/// A URL path prefix: starts and ends with `/` (`/` itself, or `/tern/`), made of unreserved URL
/// characters only, without `.` or `..` segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasePath(String);

/// Where a request path falls relative to the [`BasePath`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnderBase<'a> {
    /// Inside: the rest, starting with `/` (`/tern/api/info` under `/tern/` is `/api/info`).
    Inside(&'a str),
    /// The base without its trailing slash (`/tern`): redirect to the base, so the page's
    /// relative URLs resolve under it.
    Bare,
    /// Elsewhere.
    Outside,
}

impl BasePath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }

    /// Places a request path relative to the base.
    pub fn locate<'a>(&self, path: &'a str) -> UnderBase<'a> {
        let trimmed = &self.0[..self.0.len() - 1];
        match path.strip_prefix(trimmed) {
            Some(rest) if rest.starts_with('/') => UnderBase::Inside(rest),
            Some("") => UnderBase::Bare,
            _ => UnderBase::Outside,
        }
    }
}

impl std::fmt::Display for BasePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for BasePath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if !t.starts_with('/') {
            return Err(format!("bad base path {s:?}: it must start with '/', e.g. /tern/"));
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || "-._~/".contains(c);
        if !t.chars().all(ok) {
            return Err(format!(
                "bad base path {s:?}: only letters, digits and - . _ ~ / are allowed"
            ));
        }
        if t.split('/').any(|seg| seg == "." || seg == "..") || t.contains("//") {
            return Err(format!("bad base path {s:?}: no '.', '..' or empty segments"));
        }
        let mut p = t.to_string();
        if !p.ends_with('/') {
            p.push('/');
        }
        Ok(BasePath(p))
    }
}

/// Accepts TCP connections until shutdown; one task per connection, at most
/// `--max-http-connections` at once. At the cap nothing is accepted: new connections wait in the
/// kernel's queue for a slot, which `--header-timeout` frees within seconds even when every slot
/// is held by a slowloris client, so a real request is delayed, never starved.
/// Where HTTP connections come from.
pub(crate) enum Listener {
    Tcp(TcpListener),
    /// `--listen unix:PATH` (`crate::unix_listen`).
    Unix(UnixListener),
}

/// What a connection over the Unix socket counts as: only this user can connect (0600 in a 0700
/// directory), through a tunnel (`ssh -L`), so a loopback peer as through `ssh -L` to a port.
const UNIX_PEER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

pub(crate) async fn serve(shared: Arc<HttpContext>, listener: Listener) {
    let tracker = tokio_util::task::TaskTracker::new();
    loop {
        let slot = tokio::select! {
            _ = shared.sessions.shutdown.cancelled() => break,
            s = Arc::clone(&shared.connections).acquire_owned() => s,
        };
        // The semaphore is never closed.
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            _ = shared.sessions.shutdown.cancelled() => break,
            a = accept(&listener) => a,
        };
        let shared = Arc::clone(&shared);
        let shutdown = shared.sessions.shutdown.clone();
        match accepted {
            Ok((Accepted::Tcp(stream), peer)) => {
                // A terminal's keystrokes and echoes are small writes that must leave at once:
                // Nagle's algorithm would hold an echo behind the previous one's ACK (tens of ms
                // on the WebSocket fallback). Browsers set TCP_NODELAY on their side too.
                let _ = stream.set_nodelay(true);
                tracker.spawn(async move {
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = serve_connection(shared, stream, peer) => {}
                    }
                    // Freed when the connection closes, or once it is upgraded to a WebSocket
                    // (which --max-sessions and --max-handshakes count from then on).
                    drop(slot);
                });
            }
            Ok((Accepted::Unix(stream), peer)) => {
                tracker.spawn(async move {
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = serve_connection(shared, stream, peer) => {}
                    }
                    drop(slot);
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("http accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    tracker.close();
    tracker.wait().await;
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(listener: &Listener) -> std::io::Result<(Accepted, SocketAddr)> {
    match listener {
        Listener::Tcp(l) => l.accept().await.map(|(s, peer)| (Accepted::Tcp(s), peer)),
        Listener::Unix(l) => l.accept().await.map(|(s, _)| (Accepted::Unix(s), UNIX_PEER)),
    }
}

async fn serve_connection<S>(shared: Arc<HttpContext>, stream: S, peer: SocketAddr)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc_shared = Arc::clone(&shared);
    let service = hyper::service::service_fn(move |req| {
        let shared = Arc::clone(&svc_shared);
        async move {
            // The policy names the host the browser used (WebTransport goes to it on the relay's
            // UDP port); taken before the request moves into its route.
            let host =
                req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).map(str::to_string);
            // Everything is served under --base-path (`/` unless the relay sits behind a reverse
            // proxy that forwards a sub-path); routes below see the path without it.
            let mut resp = match shared.settings.base_path.locate(req.uri().path()) {
                // Before anything else, the page included: a name the relay does not answer to
                // is how a DNS-rebinding page reaches it (crate::security::HostPolicy).
                _ if !host_allowed(&shared, req.headers(), peer) => error(
                    StatusCode::MISDIRECTED_REQUEST,
                    "bad_host",
                    "this relay does not answer to that host name (--allow-host adds one)",
                ),
                UnderBase::Inside(path) => {
                    let path = path.to_string();
                    if path == WEBSOCKET_PATH {
                        websocket(&shared, req, peer)
                    } else if path == HISTORY_PATH || path == HISTORY_SEARCH_PATH {
                        history(&shared, req, &path, peer).await
                    } else if path == tern::relay_proto::SHARE_PATH {
                        share(&shared, req, peer).await
                    } else if path == tern::relay_proto::IMAGE_PATH {
                        image(&shared, req, peer).await
                    } else if path == CHALLENGE_PATH {
                        challenge(&shared, req, peer).await
                    } else {
                        handle(&shared, req, &path, peer)
                    }
                }
                UnderBase::Bare => to_base(&shared, &req),
                UnderBase::Outside => text(StatusCode::NOT_FOUND, "not found\n"),
            };
            if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
                let subresource = resp.extensions().get::<crate::security::Subresource>().is_some();
                crate::security::add_response_headers(
                    resp.headers_mut(),
                    host.as_deref(),
                    subresource,
                );
            }
            Ok::<_, Infallible>(resp)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // A slowloris client (headers a byte at a time) is cut off after this, however it trickles.
    let header_timeout = shared.settings.header_timeout;
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
    let result = match shared.https_acceptor() {
        Some(acceptor) => {
            match tokio::time::timeout(header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    builder.serve_connection(TokioIo::new(tls), service).with_upgrades().await
                }
                Ok(Err(e)) => {
                    tracing::debug!(%peer, "tls handshake failed: {e}");
                    return;
                }
                Err(_) => return,
            }
        }
        None => builder.serve_connection(TokioIo::new(stream), service).with_upgrades().await,
    };
    if let Err(e) = result {
        tracing::debug!(%peer, "http connection ended: {e}");
    }
}

/// The WebSocket fallback (`tern::relay_proto::websocket`): the same session as over
/// WebTransport, for networks that pass only TCP. Refused before the upgrade, in this order: an
/// Origin other than the page's own (a foreign site must not ride the browser's access; checked
/// first, so it never reaches the limiter), a wrong token (a native client's, offered as a
/// subprotocol, `tern-token.TOKEN` or `tern-token-hex.HEX`, or `?token=`), a blocked source
/// presenting a wrong one, no handshake slot. A page offers no token: its control stream starts
/// with the challenge, as over WebTransport.
fn websocket(
    shared: &Arc<HttpContext>,
    mut req: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Body> {
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    let headers = req.headers();
    if let Err(refused) = check_origin(shared, headers, peer, "websocket") {
        return refused;
    }
    let is_upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let (Some(key), true) = (headers.get(header::SEC_WEBSOCKET_KEY).cloned(), is_upgrade) else {
        return error(StatusCode::BAD_REQUEST, "bad_request", "a WebSocket upgrade was expected");
    };
    let source = client_source(shared, &req, peer);
    // Judged once: a page's proof is spent by it. A trusted front door's identity needs none.
    let (credential, who) = match proxied_identity(shared, &req, peer) {
        Some(who) => (Credential::Right, Some(who)),
        None => upgrade_credential(shared, &req),
    };
    let agent = req
        .headers()
        .get(header::USER_AGENT)
        .map(|a| String::from_utf8_lossy(a.as_bytes()).into_owned());
    // Nothing presented: a client that proves itself on the control stream.
    let judged = match credential {
        Credential::Absent => AuthOutcome::Ok,
        _ => shared.sessions.auth.judge(credential, source, Instant::now()),
    };
    match judged {
        AuthOutcome::Ok => {}
        AuthOutcome::BadToken => {
            tracing::info!(%peer, %source, "websocket with a missing or wrong token");
            shared.sessions.audit.event(
                "refused",
                &crate::audit::Fields::new()
                    .addr(source)
                    .agent(agent.as_deref())
                    .link("websocket")
                    .reason("missing or wrong token"),
            );
            return error(StatusCode::UNAUTHORIZED, "bad_token", "missing or wrong token");
        }
        AuthOutcome::RateLimited(_) => {
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many failed attempts",
            );
        }
    }
    // As a WebTransport handshake: until its hello is admitted, an upgraded socket holds a slot
    // (and is closed after --handshake-timeout). One that already proved its credential takes
    // it from its own pool, which no flood of unauthenticated handshakes can empty.
    let pool = if credential == Credential::Right { Pool::Authenticated } else { Pool::Shared };
    let slot = match shared.sessions.handshakes.take(pool, source) {
        Ok(slot) => slot,
        Err(why) => {
            tracing::debug!(%peer, %source, ?pool, ?why, "websocket refused: no handshake slot");
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_handshakes",
                "too many sessions starting at once; retry shortly",
            );
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return r;
        }
    };
    let offered: Vec<String> = offered_subprotocols(req.headers());
    let upgrade = hyper::upgrade::on(&mut req);
    let sessions = Arc::clone(&shared.sessions);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => {
                let pre_authed = if credential == Credential::Right { who } else { None };
                crate::session::serve_websocket(
                    sessions, io, pre_authed, peer, source, slot, agent,
                )
                .await;
            }
            Err(e) => tracing::debug!(%peer, "websocket upgrade failed: {e}"),
        }
    });
    let mut r = Response::new(Body::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    if offered.iter().any(|p| p == "tern") {
        h.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static("tern"));
    }
    r
}

/// The subprotocols a WebSocket upgrade offers.
fn offered_subprotocols(headers: &hyper::HeaderMap) -> Vec<String> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .collect()
}

/// What a WebSocket upgrade request presents: a page's proof over a challenge it fetched
/// (`tern-proof.R.PROOF`, spent here), or a native client's token (a subprotocol, or `?token=`).
fn upgrade_credential(
    shared: &HttpContext,
    req: &Request<Incoming>,
) -> (Credential, Option<crate::tokens::Who>) {
    let offered = offered_subprotocols(req.headers());
    if let Some((nonce, proof)) =
        offered.iter().find_map(|p| tern::relay_proto::websocket::proof_from_subprotocol(p))
    {
        return redeemed(shared, shared.challenges.redeem(&nonce, &proof, Instant::now()));
    }
    let presented = offered
        .iter()
        .find_map(|p| tern::relay_proto::websocket::token_from_subprotocol(p))
        .or_else(|| crate::session::query_token(&req.uri().to_string()));
    shared.sessions.check_plain(presented.as_deref())
}

/// A redeemed challenge as a credential: right only while its token is still live (one revoked
/// between the challenge and the request is refused).
fn redeemed(
    shared: &HttpContext,
    who: Option<crate::tokens::Who>,
) -> (Credential, Option<crate::tokens::Who>) {
    match who {
        Some(who) if shared.sessions.tokens.valid(&who) => (Credential::Right, Some(who)),
        _ => (Credential::Wrong, None),
    }
}

/// `--identity-header`: the identity a trusted proxy vouches for. From any other peer the header
/// is ignored (a spoof, or a proxy not named by --trust-proxy), logged and audited.
fn proxied_identity(
    shared: &HttpContext,
    req: &Request<Incoming>,
    peer: SocketAddr,
) -> Option<crate::tokens::Who> {
    let front_door = &shared.sessions.settings.front_door;
    let name = front_door.header.as_deref()?;
    let value = req.headers().get(name).map(HeaderValue::as_bytes);
    match front_door.vouch(peer.ip(), value) {
        crate::security::Vouch::Person(who) => Some(who),
        crate::security::Vouch::Nobody => None,
        crate::security::Vouch::Untrusted => {
            let agent = req.headers().get(header::USER_AGENT).and_then(|a| a.to_str().ok());
            tracing::warn!(%peer, header = name, "an identity header from a peer that is not a trusted proxy ignored");
            shared.sessions.audit.event(
                "refused",
                &crate::audit::Fields::new()
                    .addr(peer.ip().to_canonical())
                    .agent(agent)
                    .reason("identity header from a peer that is not a trusted proxy: ignored"),
            );
            None
        }
    }
}

/// Who a request counts against in the limiters (`--trust-proxy`: the forwarded client).
fn client_source(shared: &HttpContext, req: &Request<Incoming>, peer: SocketAddr) -> SourceKey {
    crate::security::client_source(peer, req.headers(), &shared.settings.trust_proxy)
}

/// Refuses (403 `bad_origin`, logged) a request whose Origin is not this relay's page: see
/// [`crate::security::http_origin_ok`] and `--allow-origin`.
#[allow(clippy::result_large_err)]
fn check_origin(
    shared: &HttpContext,
    headers: &hyper::HeaderMap,
    peer: SocketAddr,
    what: &str,
) -> Result<(), Response<Body>> {
    let own = if shared.https_acceptor().is_some() { "https" } else { "http" };
    if crate::security::http_origin_ok(headers, own, &shared.sessions.settings.allow_origin) {
        return Ok(());
    }
    // Debug formatting: the header is the sender's text, escaped so it cannot forge log lines.
    let origin =
        headers.get(header::ORIGIN).map(|o| String::from_utf8_lossy(o.as_bytes()).into_owned());
    let host =
        headers.get(header::HOST).map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned());
    tracing::warn!(
        %peer,
        ?origin,
        ?host,
        "{what} from a foreign Origin refused (403): not this relay's page (--allow-origin adds one)"
    );
    let agent = headers.get(header::USER_AGENT).and_then(|a| a.to_str().ok());
    shared.sessions.audit.event(
        "refused",
        &crate::audit::Fields::new().addr(peer.ip()).agent(agent).reason("a foreign Origin"),
    );
    Err(error(StatusCode::FORBIDDEN, "bad_origin", "this page's own origin only"))
}

/// Whether the request's `Host` is a name the relay answers to; a refusal is logged.
fn host_allowed(shared: &HttpContext, headers: &hyper::HeaderMap, peer: SocketAddr) -> bool {
    let policy = &shared.sessions.settings.host_policy;
    let allowed = match headers.get(header::HOST) {
        None => policy.allows(None),
        Some(h) => h.to_str().is_ok_and(|h| policy.allows(Some(h))),
    };
    if !allowed {
        // Debug formatting: the header is the sender's text, escaped so it cannot forge log lines.
        let host =
            headers.get(header::HOST).map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned());
        tracing::warn!(
            %peer,
            ?host,
            "request for a host name this relay does not answer to refused (421): DNS rebinding? (--allow-host adds one)"
        );
    }
    allowed
}

/// `/tern` under `--base-path /tern/`: to `/tern/`, where the page's relative URLs resolve.
fn to_base(shared: &HttpContext, req: &Request<Incoming>) -> Response<Body> {
    let mut location = shared.settings.base_path.to_string();
    if let Some(q) = req.uri().query() {
        location.push('?');
        location.push_str(q);
    }
    let mut r = text(StatusCode::PERMANENT_REDIRECT, "moved\n");
    if let Ok(v) = HeaderValue::from_str(&location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// `path` is the request's path below `--base-path`.
fn handle(
    shared: &HttpContext,
    req: Request<Incoming>,
    path: &str,
    peer: SocketAddr,
) -> Response<Body> {
    if path.starts_with("/api/") || path == "/api" {
        return api(shared, &req, path, peer);
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    }
    // The load bench's floor page, when the bench started this relay (crate::floor).
    // Cached as the page's own files are, so its repeat visit compares with Tern's.
    if let Some((name, mime, body)) = crate::floor::find(path, crate::floor::enabled()) {
        let mut r = Response::new(Body::new(Bytes::from_static(body)));
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static(assets::cache_control(name)));
        if req.method() == Method::HEAD {
            *r.body_mut() = Body::new(Bytes::new());
        }
        return r;
    }
    let mut resp = match assets::find(path) {
        Some(asset) if asset.path == "index.html" => {
            let mut r = serve_asset(&req, asset);
            link_hint(shared, r.headers_mut());
            r
        }
        Some(asset) => serve_asset(&req, asset),
        // A relay built from a checkout whose page was never built: the document itself says how
        // to get the real page, so the person who opened the URL is not left with an error code.
        None if !assets::page_present() && assets::is_document(path) => {
            let mut r =
                Response::new(Body::new(Bytes::from_static(assets::PAGE_MISSING_HTML.as_bytes())));
            let h = r.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(assets::mime("index.html")));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        None => text(StatusCode::NOT_FOUND, "not found\n"),
    };
    if req.method() == Method::HEAD {
        *resp.body_mut() = Body::new(Bytes::new());
    }
    resp
}

/// Where the page's WebTransport link goes, on the document's answer to a navigation
/// (`Server-Timing: tern-link;desc="PORT PATH HASH…"`, `tern::relay_proto::LinkHint`): a first
/// visit starts its handshake at once, beside `/api/info` instead of after it (issue 36). Nothing
/// in it is secret (the port, the path, the certificate every handshake shows), and the page uses
/// the link only once the info names it and the relay proved the token on it. Not on the service
/// worker's fetches of the document (they are no navigation, and the page they serve knows the
/// last link), and not without WebTransport (`--listen unix:`).
fn link_hint(shared: &HttpContext, headers: &mut hyper::HeaderMap) {
    let info = info(shared);
    let Some(hint) = LinkHint::from_info(&info, info.port) else { return };
    let value = format!("{LINK_HINT_TIMING};desc=\"{}\"", hint.encode());
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert("server-timing", value);
    }
}

/// A file of the page: the representation the client accepts (brotli, gzip, or the file), its
/// cache rule and ETag, or `304 Not Modified` when the client has it (`If-None-Match`).
fn serve_asset(req: &Request<Incoming>, asset: assets::Asset) -> Response<Body> {
    let header_str = |name| req.headers().get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let (encoding, bytes) = asset.representation(header_str(header::ACCEPT_ENCODING));
    let etag = asset.etag(encoding);
    let unchanged = header_str(header::IF_NONE_MATCH).is_some_and(|h| assets::none_match(h, &etag));
    tracing::debug!(
        path = asset.path,
        encoding = encoding.header().unwrap_or("identity"),
        status = if unchanged { 304 } else { 200 },
        "page file served"
    );
    let mut r = if unchanged {
        let mut r = Response::new(Body::new(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Body::new(Bytes::from_static(bytes)));
        // What is sent (HEAD keeps it while its body is dropped).
        r.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        if let Some(e) = encoding.header() {
            r.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static(e));
        }
        r
    };
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(assets::mime(asset.path)));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(assets::cache_control(asset.path)));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    // A cache between (a proxy, the browser's) must key the answer by the client's encodings.
    if asset.has_variants() {
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    if assets::is_subresource(asset.path) {
        r.extensions_mut().insert(crate::security::Subresource);
    }
    r
}

/// What every API route checks first, in this order: the page's Origin (a foreign page's request
/// never reaches the limiter), a credential (see [`authorize`]), then the route's one method.
/// `what` names the request in the log of a refused Origin.
#[allow(clippy::result_large_err)]
fn admit(
    shared: &HttpContext,
    req: &Request<Incoming>,
    peer: SocketAddr,
    what: &str,
    method: Method,
) -> Result<crate::tokens::Who, Response<Body>> {
    check_origin(shared, req.headers(), peer, what)?;
    let who = authorize(shared, req, peer)?;
    if req.method() != method {
        let only = format!("only {method}");
        return Err(error(StatusCode::METHOD_NOT_ALLOWED, "bad_request", &only));
    }
    Ok(who)
}

/// The API: every route needs the page's Origin (checked first: a foreign page's request never
/// reaches the limiter) and a credential (see [`authorize`]), checked before anything else.
fn api(
    shared: &HttpContext,
    req: &Request<Incoming>,
    path: &str,
    peer: SocketAddr,
) -> Response<Body> {
    let who = match admit(shared, req, peer, "api request", Method::GET) {
        Ok(who) => who,
        Err(refused) => return refused,
    };
    match path {
        "/api/info" => {
            // A page asks this right before it opens a session: have a spare mosh-server ready.
            shared.sessions.spare.want();
            json(StatusCode::OK, &info(shared))
        }
        tern::relay_proto::SESSIONS_PATH => json(StatusCode::OK, &sessions(shared, &who)),
        _ => error(StatusCode::NOT_FOUND, "not_found", "no such API route"),
    }
}

/// The owner's page shares its session read-only, or ends its shares
/// (`tern::relay_proto::share`). Only a caller that may open the session and is not read-only
/// may: a viewer cannot share what it watches.
async fn share(shared: &HttpContext, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    use http_body_util::BodyExt;
    use tern::relay_proto::{ShareReply, ShareRequest};
    let who = match admit(shared, &req, peer, "share request", Method::POST) {
        Ok(who) => who,
        Err(refused) => return refused,
    };
    let source = client_source(shared, &req, peer);
    let header = |name| {
        req.headers()
            .get(name)
            .map(|a: &HeaderValue| String::from_utf8_lossy(a.as_bytes()).into_owned())
    };
    let (agent, origin) = (header(header::USER_AGENT), header(header::ORIGIN));
    let body = match http_body_util::Limited::new(req.into_body(), MAX_REQUEST).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "bad_request", "request too large"),
    };
    let request = match tern::relay_proto::decode::<ShareRequest>(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("malformed request: {e}"),
            );
        }
    };
    let (Some(state), Some(dir)) = (shared.sessions.state.as_ref(), shared.sessions.tokens.dir())
    else {
        return error(
            StatusCode::NOT_FOUND,
            "no_share",
            "this relay keeps no copy of its sessions (bridge mode): there is nothing to share",
        );
    };
    let Some(record) =
        state.check_alive(&request.session).filter(|_| crate::ids::valid_id(&request.session))
    else {
        return error(StatusCode::NOT_FOUND, "unknown_session", "no such session running");
    };
    if who.read_only() {
        shared.sessions.audit.event(
            "refused",
            &crate::audit::Fields::new()
                .who(who.name())
                .addr(source)
                .agent(agent.as_deref())
                .session(&request.session)
                .kind("share")
                .reason("read-only"),
        );
        return error(
            StatusCode::FORBIDDEN,
            "read_only",
            "a read-only link cannot share a session",
        );
    }
    let caller = Caller { who: &who, source, agent: agent.as_deref() };
    if let Some(refused) =
        not_your_session(shared, &caller, record.owner_name(), &request.session, "share")
    {
        return refused;
    }
    let reply = if request.end {
        crate::share::end(dir, &shared.sessions.audit, &request.session, who.name())
            .map(|n| ShareReply { ended: n as u64, ..ShareReply::default() })
    } else {
        // The viewer opens the page where the owner's page is (its Origin and the base path).
        let base = match origin {
            Some(o) => format!("{o}{}", shared.settings.base_path.as_str()),
            None => crate::share::base_url(dir),
        };
        let expires =
            request.expires.map_or(crate::share::DEFAULT_EXPIRY, std::time::Duration::from_secs);
        crate::share::create(
            dir,
            &shared.sessions.audit,
            &request.session,
            expires,
            request.allow_history,
            who.name(),
            &base,
        )
        .map(|m| ShareReply { url: Some(m.url), expires: Some(m.expires), ended: 0 })
    };
    match reply {
        Ok(r) => json(StatusCode::OK, &r),
        Err(message) => error(StatusCode::BAD_REQUEST, "bad_request", &message),
    }
}

/// A session's history (`tern::relay_proto::history`): a page of lines or a search, `POST`ed
/// as JSON. Read off the async threads: a 100,000-line history is a few megabytes of file.
async fn history(
    shared: &HttpContext,
    req: Request<Incoming>,
    path: &str,
    peer: SocketAddr,
) -> Response<Body> {
    use http_body_util::BodyExt;
    // The Origin first: a foreign page's request (`fetch(…, {mode: 'no-cors'})`) is refused
    // before it can reach the limiter.
    let who = match admit(shared, &req, peer, "history request", Method::POST) {
        Ok(who) => who,
        Err(refused) => return refused,
    };
    let source = client_source(shared, &req, peer);
    let agent = req
        .headers()
        .get(header::USER_AGENT)
        .map(|a| String::from_utf8_lossy(a.as_bytes()).into_owned());
    let body = match http_body_util::Limited::new(req.into_body(), MAX_REQUEST).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "bad_request", "request too large"),
    };
    let Some(state) = shared.sessions.state.as_ref() else {
        return error(
            StatusCode::NOT_FOUND,
            "no_history",
            "this relay keeps no history in bridge mode: only what the page saw can be scrolled",
        );
    };
    let dir = state.dir().to_path_buf();
    let known = |id: &str| crate::ids::valid_id(id) && state.get(id).is_some();
    let not_yours = |id: &str| {
        let caller = Caller { who: &who, source, agent: agent.as_deref() };
        not_your_session(shared, &caller, state.get(id)?.owner_name(), id, "history")
    };
    let bad = |e: tern::relay_proto::DecodeError| {
        error(StatusCode::BAD_REQUEST, "bad_request", &format!("malformed request: {e}"))
    };
    let unknown = || error(StatusCode::NOT_FOUND, "unknown_session", "no such session");
    let read = if path == HISTORY_PATH {
        let r = match tern::relay_proto::decode::<HistoryRequest>(&body) {
            Ok(r) => r,
            Err(e) => return bad(e),
        };
        if !known(&r.session) {
            return unknown();
        }
        if let Some(refused) = not_yours(&r.session) {
            return refused;
        }
        let count = r.count.min(MAX_PAGE_LINES) as usize;
        tokio::task::spawn_blocking(move || {
            crate::history::read_page(&dir, &r.session, r.before, count)
                .map(|page| tern::relay_proto::encode(&page))
        })
        .await
    } else {
        let s = match tern::relay_proto::decode::<HistorySearch>(&body) {
            Ok(s) => s,
            Err(e) => return bad(e),
        };
        if !known(&s.session) {
            return unknown();
        }
        if let Some(refused) = not_yours(&s.session) {
            return refused;
        }
        let query = match tern::terminal::SearchQuery::new(&s.pattern, s.case_sensitive, s.regex) {
            Ok(q) => q,
            Err(e) => return error(StatusCode::BAD_REQUEST, "bad_pattern", &e.to_string()),
        };
        tokio::task::spawn_blocking(move || {
            crate::history::search(&dir, &s.session, &query, MAX_SEARCH_HITS as usize)
                .map(|result| tern::relay_proto::encode(&result))
        })
        .await
    };
    match read {
        Ok(Ok(bytes)) => json_bytes(StatusCode::OK, bytes),
        Ok(Err(e)) => {
            tracing::warn!("reading a history failed: {e}");
            error(StatusCode::INTERNAL_SERVER_ERROR, "io", "the history could not be read")
        }
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the history read failed"),
    }
}

/// An image the session's recorder lifted (`tern::relay_proto::image`): its [`ImageInfo`]
/// line, then its bytes as a browser draws them. Behind the same Origin check and credential as
/// the history.
async fn image(shared: &HttpContext, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    use http_body_util::BodyExt;
    use tern::relay_proto::ImageRequest;
    let who = match admit(shared, &req, peer, "image request", Method::POST) {
        Ok(who) => who,
        Err(refused) => return refused,
    };
    let source = client_source(shared, &req, peer);
    let agent = req
        .headers()
        .get(header::USER_AGENT)
        .map(|a| String::from_utf8_lossy(a.as_bytes()).into_owned());
    let body = match http_body_util::Limited::new(req.into_body(), MAX_REQUEST).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "bad_request", "request too large"),
    };
    let Some(state) = shared.sessions.state.as_ref() else {
        return error(StatusCode::NOT_FOUND, "unknown_image", "no images in bridge mode");
    };
    let r = match tern::relay_proto::decode::<ImageRequest>(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("malformed request: {e}"),
            );
        }
    };
    let Some(record) = state.get(&r.session).filter(|_| crate::ids::valid_id(&r.session)) else {
        return error(StatusCode::NOT_FOUND, "unknown_session", "no such session");
    };
    let caller = Caller { who: &who, source, agent: agent.as_deref() };
    if let Some(refused) =
        not_your_session(shared, &caller, record.owner_name(), &r.session, "image")
    {
        return refused;
    }
    let dir = state.dir().to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        crate::history::images::read_image(&dir, &r.session, r.image)
    })
    .await;
    use crate::history::images::ReadImageError;
    match read {
        Ok(Ok((info, bytes))) => {
            let mut out = tern::relay_proto::encode_line(&info);
            out.extend_from_slice(&bytes);
            let mut r = Response::new(Body::new(Bytes::from(out)));
            let h = r.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        Ok(Err(ReadImageError::Unknown)) => error(
            StatusCode::NOT_FOUND,
            "unknown_image",
            "no such image (never stored, or dropped for the session's image quota)",
        ),
        Ok(Err(ReadImageError::Io(e))) => {
            tracing::warn!("reading an image failed: {e}");
            error(StatusCode::INTERNAL_SERVER_ERROR, "io", "the image could not be read")
        }
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the image read failed"),
    }
}

/// `POST /api/challenge`: the relay's nonce and its proof that it knows the token, for the
/// page's nonce (`tern::relay_proto::proof`). The page checks the proof before it sends
/// anything that matters, and spends the nonce on one API request. Public (it proves, it asks
/// nothing), behind the Origin check like every route.
async fn challenge(
    shared: &HttpContext,
    req: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Body> {
    use http_body_util::BodyExt;
    if let Err(refused) = check_origin(shared, req.headers(), peer, "challenge request") {
        return refused;
    }
    if req.method() != Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "bad_request", "only POST");
    }
    let body = match http_body_util::Limited::new(req.into_body(), 1024).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "bad_request", "request too large"),
    };
    let request = match tern::relay_proto::decode::<ChallengeRequest>(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("malformed request: {e}"),
            );
        }
    };
    // A named token's id picks the key the relay proves with; an id no live token has gets the
    // refusal a wrong token gets (ids are not secret: nothing is learned).
    let Some((who, key)) = shared.sessions.key_for(request.token_id.as_deref()) else {
        shared.sessions.audit.event(
            "refused",
            &crate::audit::Fields::new()
                .addr(peer.ip())
                .reason("a named token that was revoked, has expired or never was"),
        );
        return error(
            StatusCode::UNAUTHORIZED,
            "bad_token",
            "this token was revoked or has expired: ask the relay's owner for a new one",
        );
    };
    match shared.challenges.issue(who, key, request.nonce, Instant::now()) {
        Ok(answer) => json(StatusCode::OK, &answer),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "no randomness"),
    }
}

/// Who made an API request: the credential's identity, the address it came from, its browser.
struct Caller<'a> {
    who: &'a crate::tokens::Who,
    source: SourceKey,
    agent: Option<&'a str>,
}

/// A request for `what` (its history, an image) of another identity's session: refused as a
/// resume is (`NotYourSession`), and audited; `None` when the caller may use it (its own, or the
/// owner's token).
fn not_your_session(
    shared: &HttpContext,
    caller: &Caller<'_>,
    owner: &str,
    session: &str,
    what: &str,
) -> Option<Response<Body>> {
    if caller.who.may_use(owner) {
        return None;
    }
    // A share link reads its own session's history, and its pictures, when its share allows it.
    let share = shared.sessions.tokens.share(caller.who).filter(|s| s.session == session);
    if matches!(what, "history" | "image") && share.as_ref().is_some_and(|s| s.allow_history) {
        return None;
    }
    shared.sessions.audit.event(
        "refused",
        &crate::audit::Fields::new()
            .who(caller.who.name())
            .addr(caller.source)
            .agent(caller.agent)
            .session(session)
            .reason(&format!("{what} of another identity's session")),
    );
    let message = if share.is_some() {
        "this share link shows the screen only: its owner did not share the session's history \
         or pictures"
    } else {
        crate::session::NOT_YOURS
    };
    Some(error(
        StatusCode::FORBIDDEN,
        tern::relay_proto::control::ErrorCode::NotYourSession.as_str(),
        message,
    ))
}

/// Checks the request's credential: `Authorization: Tern R.PROOF` (a page: a challenge from
/// `/api/challenge` and its proof over it), or `Bearer TOKEN` (curl, native clients). The
/// response to send when it is missing or wrong.
#[allow(clippy::result_large_err)]
fn authorize(
    shared: &HttpContext,
    req: &Request<Incoming>,
    peer: SocketAddr,
) -> Result<crate::tokens::Who, Response<Body>> {
    let value = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let now = Instant::now();
    if let Some(who) = proxied_identity(shared, req, peer) {
        return Ok(who);
    }
    let (credential, who) = match value {
        None => (Credential::Absent, None),
        Some(v) if v.starts_with(tern::relay_proto::proof::SCHEME) => {
            let who = tern::relay_proto::proof::parse_authorization(v)
                .and_then(|(nonce, proof)| shared.challenges.redeem(&nonce, &proof, now));
            redeemed(shared, who)
        }
        Some(v) => match v.strip_prefix("Bearer ").map(str::trim) {
            Some(t) => shared.sessions.check_plain(Some(t)),
            None => (Credential::Wrong, None),
        },
    };
    if let Some(who) = &who {
        shared.sessions.tokens.used(who);
    }
    let source = client_source(shared, req, peer);
    match (shared.sessions.auth.judge(credential, source, now), who) {
        (AuthOutcome::Ok, Some(who)) => Ok(who),
        // Judged right only with a token's identity; anything else is a refusal.
        (AuthOutcome::Ok, None) => {
            Err(error(StatusCode::UNAUTHORIZED, "bad_token", "missing or wrong token"))
        }
        (AuthOutcome::BadToken, _) => {
            tracing::info!(%peer, %source, "api request with a missing or wrong credential");
            if credential == Credential::Wrong {
                let agent = req.headers().get(header::USER_AGENT).and_then(|a| a.to_str().ok());
                shared.sessions.audit.event(
                    "refused",
                    &crate::audit::Fields::new()
                        .addr(source)
                        .agent(agent)
                        .reason("api request with a wrong credential"),
                );
            }
            let mut r = error(StatusCode::UNAUTHORIZED, "bad_token", "missing or wrong token");
            r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Tern"));
            Err(r)
        }
        (AuthOutcome::RateLimited(wait), _) => {
            let retry = wait.as_secs() + 1;
            let body = ApiError {
                error: "rate_limited".into(),
                message: "too many failed attempts".into(),
                retry_after_secs: Some(retry),
            };
            let mut r = json(StatusCode::TOO_MANY_REQUESTS, &body);
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry));
            Err(r)
        }
    }
}

/// `/api/info`: the session layer's [`SessionContext::relay_info`], which `ready` carries too.
fn info(shared: &HttpContext) -> RelayInfo {
    shared.sessions.relay_info()
}

/// Spawned mosh-servers still alive that `who` may open (its own; all for the owner's token),
/// without their keys.
fn sessions(shared: &HttpContext, who: &crate::tokens::Who) -> SessionList {
    let ssh_hosts = shared.sessions.ssh.as_ref().map(|h| h.names()).unwrap_or_default();
    let Some(store) = shared.sessions.state.as_ref() else {
        return SessionList { sessions: Vec::new(), ssh_hosts };
    };
    let sessions = store
        .alive()
        .into_iter()
        .filter(|r| who.may_use(r.owner_name()))
        .map(|r| {
            let s = shared.sessions.registry.summary(store, &r);
            SessionSummary {
                id: r.id,
                port: r.port,
                created: r.created,
                last_active: s.last_active,
                cols: s.cols,
                rows: s.rows,
                title: s.title,
                attached: s.attached,
                host: r.remote.map(|m| m.host).unwrap_or_default(),
            }
        })
        .collect();
    SessionList { sessions, ssh_hosts }
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    let body = ApiError { error: code.into(), message: message.into(), retry_after_secs: None };
    json(status, &body)
}

fn json(status: StatusCode, body: &impl Message) -> Response<Body> {
    json_bytes(status, tern::relay_proto::encode(body))
}

fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Body::new(Bytes::from(bytes)));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_paths_parse_and_locate() {
        let root: BasePath = "/".parse().unwrap();
        assert!(root.is_root());
        assert_eq!(root.locate("/api/info"), UnderBase::Inside("/api/info"));
        assert_eq!(root.locate("/"), UnderBase::Inside("/"));
        let b: BasePath = "/tern".parse().unwrap();
        assert_eq!(b.as_str(), "/tern/");
        assert_eq!(b, "/tern/".parse().unwrap());
        assert_eq!(b.locate("/tern/"), UnderBase::Inside("/"));
        assert_eq!(b.locate("/tern/api/info"), UnderBase::Inside("/api/info"));
        assert_eq!(b.locate("/tern/ws"), UnderBase::Inside("/ws"));
        assert_eq!(b.locate("/tern"), UnderBase::Bare);
        assert_eq!(b.locate("/ternx/"), UnderBase::Outside);
        assert_eq!(b.locate("/api/info"), UnderBase::Outside);
        let deep: BasePath = "/a/b-c/".parse().unwrap();
        assert_eq!(deep.locate("/a/b-c/x.js"), UnderBase::Inside("/x.js"));
        for bad in ["tern/", "/a/../b/", "/a//b/", "/a b/", "/a?x/", "/./"] {
            assert!(bad.parse::<BasePath>().is_err(), "{bad}");
        }
    }
}
