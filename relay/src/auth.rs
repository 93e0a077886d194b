//! The access token: generation, constant-time checking, and back-off for sources that guess wrong.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use subtle::ConstantTimeEq;

/// The relay's access token. Its `Debug` is redacted so it cannot slip into a log by accident.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// 32 bytes from the OS, URL-safe base64 (43 characters, fits a URL fragment and a header).
    pub fn random() -> Result<Token, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(Token(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
    }

    pub fn new(s: impl Into<String>) -> Token {
        Token(s.into())
    }

    /// The token text, for the printed URL only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison: the time taken does not depend on how many bytes match.
    /// (It does depend on the length, which is not secret: it is fixed by the generator.)
    pub fn matches(&self, candidate: &str) -> bool {
        self.0.as_bytes().ct_eq(candidate.as_bytes()).into()
    }
}

/// Why `--token-file` could not give a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenFileError {
    #[error("token file {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "token file {path} can be read by other users (mode {mode:o}): the token opens a shell; \
         fix with chmod 600 {path}"
    )]
    NotPrivate { path: std::path::PathBuf, mode: u32 },
    #[error(
        "token file {path} holds no usable token: it must be one line of printable ASCII without \
         spaces (delete the file and a new token is made)"
    )]
    Malformed { path: std::path::PathBuf },
    #[error("cannot make a random token: {0}")]
    Random(getrandom::Error),
}

impl Token {
    /// `--token-file`: the token in `path`, or, when there is no such file, a new random one
    /// written there (mode 0600; a missing parent directory is made 0700). A service keeps one
    /// URL across restarts this way, and the token stays out of its command line and unit file.
    /// A file other users can read is refused, not used.
    pub fn load_or_create(path: &std::path::Path) -> Result<Token, TokenFileError> {
        use std::io::Write as _;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        let io = |source| TokenFileError::Io { path: path.to_path_buf(), source };
        match std::fs::metadata(path) {
            Ok(meta) => {
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(TokenFileError::NotPrivate { path: path.to_path_buf(), mode });
                }
                let text = std::fs::read_to_string(path).map_err(io)?;
                let token = text.trim();
                if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(TokenFileError::Malformed { path: path.to_path_buf() });
                }
                Ok(Token::new(token))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    if !parent.exists() {
                        std::fs::DirBuilder::new()
                            .recursive(true)
                            .mode(0o700)
                            .create(parent)
                            .map_err(io)?;
                    }
                }
                let token = Token::random().map_err(TokenFileError::Random)?;
                // create_new: two relays starting at once never overwrite each other's token;
                // the loser reads the winner's.
                let file =
                    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path);
                match file {
                    Ok(mut f) => {
                        f.write_all(format!("{}\n", token.expose()).as_bytes()).map_err(io)?;
                        f.sync_all().map_err(io)?;
                        tracing::info!(path = %path.display(), "made a new token");
                        Ok(token)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Token::load_or_create(path)
                    }
                    Err(e) => Err(io(e)),
                }
            }
            Err(e) => Err(io(e)),
        }
    }
}

/// How a request presented its credential, as whoever checked it saw it. The limiter judges
/// only this, so how a credential is checked (a token compare, a proof over nonces) is the
/// caller's business.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// Nothing presented: a browser's stray request, a link preview, a probe. Refused, but not
    /// counted: anyone can send these, so they must not block the owner.
    Absent,
    /// The right credential: it passes, even from a blocked source.
    Right,
    /// A wrong one, or an attempt that failed in a way that costs the relay (a handshake that
    /// never said hello): counted.
    Wrong,
}

/// Where failures are counted: an IPv4 address as it is, an IPv6 address by its /64 (one
/// subscriber's prefix: a host picks new addresses inside it at will). An IPv4-mapped IPv6
/// address (a dual-stack socket's view of an IPv4 client) is its IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceKey(IpAddr);

impl SourceKey {
    pub fn of(ip: IpAddr) -> SourceKey {
        match ip.to_canonical() {
            IpAddr::V4(v4) => SourceKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                SourceKey(IpAddr::V6(prefix.into()))
            }
        }
    }
}

impl From<IpAddr> for SourceKey {
    fn from(ip: IpAddr) -> SourceKey {
        SourceKey::of(ip)
    }
}

impl std::fmt::Display for SourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// Failed attempts from one source.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    blocked_until: Option<Instant>,
    last: Instant,
    /// Its place in [`Table::order`]: when it last failed, relative to the others.
    touched: u64,
}

/// The failures by source, bounded: when full, the source that failed longest ago is forgotten
/// (found in `order` at once, not by a scan that may free nothing).
#[derive(Debug, Default)]
struct Table {
    by_source: HashMap<SourceKey, Failures>,
    /// `touched` → source, oldest first.
    order: BTreeMap<u64, SourceKey>,
    next_touch: u64,
}

/// Per-source back-off after failed attempts.
///
/// The first [`AuthLimiter::FREE_FAILURES`] failures cost nothing (typos, a stale tab); after that
/// each failure blocks the source for a doubling delay up to [`AuthLimiter::MAX_BLOCK`]. A block
/// refuses wrong credentials only: the right one always passes, so a source that shares the
/// owner's address (every client behind a proxy or `ssh -L` is 127.0.0.1) cannot lock the owner
/// out, and a request with no credential at all is not counted. A success does not wipe the
/// record either: an owner sharing an address with a guesser would hand it fresh free guesses.
#[derive(Debug)]
pub struct AuthLimiter {
    table: Mutex<Table>,
    max_sources: usize,
}

impl Default for AuthLimiter {
    fn default() -> Self {
        AuthLimiter::with_capacity(Self::MAX_SOURCES)
    }
}

/// Outcome of checking a request's credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthOutcome {
    Ok,
    /// Missing or wrong.
    BadToken,
    /// A wrong credential from a source with too many failures: come back after the given delay.
    RateLimited(Duration),
}

impl AuthLimiter {
    pub const FREE_FAILURES: u32 = 5;
    pub const BASE_BLOCK: Duration = Duration::from_millis(500);
    pub const MAX_BLOCK: Duration = Duration::from_secs(60);
    /// Forget a source's count this long after its last failure.
    const FORGET_AFTER: Duration = Duration::from_secs(600);
    /// Bound on remembered sources; past it the one that failed longest ago is forgotten.
    pub const MAX_SOURCES: usize = 10_000;

    pub fn new() -> Self {
        Self::default()
    }

    /// A limiter remembering at most `max_sources` sources (at least one).
    pub fn with_capacity(max_sources: usize) -> Self {
        AuthLimiter { table: Mutex::new(Table::default()), max_sources: max_sources.max(1) }
    }

    /// Is the source currently blocked (for wrong credentials)?
    pub fn blocked(&self, source: impl Into<SourceKey>, now: Instant) -> Option<Duration> {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let until = table.by_source.get(&source.into())?.blocked_until?;
        until.checked_duration_since(now).filter(|d| !d.is_zero())
    }

    /// Sources remembered now.
    pub fn remembered(&self) -> usize {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).by_source.len()
    }

    /// Judges an attempt from `source` that presented `credential`: the right one passes, an
    /// absent one is refused without being counted, a wrong one is counted (unless the source is
    /// blocked already) and refused.
    pub fn judge(&self, credential: Credential, source: SourceKey, now: Instant) -> AuthOutcome {
        match credential {
            Credential::Right => AuthOutcome::Ok,
            Credential::Absent => AuthOutcome::BadToken,
            Credential::Wrong => {
                if let Some(wait) = self.blocked(source, now) {
                    return AuthOutcome::RateLimited(wait);
                }
                self.count_failure(source, now);
                AuthOutcome::BadToken
            }
        }
    }

    /// Checks `candidate` (None: no token presented) against `token` for an attempt from
    /// `source`: [`judge`](Self::judge) with the token compared in constant time.
    pub fn check(
        &self,
        token: &Token,
        candidate: Option<&str>,
        source: impl Into<SourceKey>,
        now: Instant,
    ) -> AuthOutcome {
        let credential = match candidate {
            None => Credential::Absent,
            Some(c) if token.matches(c) => Credential::Right,
            Some(_) => Credential::Wrong,
        };
        self.judge(credential, source.into(), now)
    }

    fn count_failure(&self, source: SourceKey, now: Instant) {
        let mut guard = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let table = &mut *guard;
        let touch = table.next_touch;
        table.next_touch += 1;
        if !table.by_source.contains_key(&source) && table.by_source.len() >= self.max_sources {
            if let Some((_, oldest)) = table.order.pop_first() {
                table.by_source.remove(&oldest);
            }
        }
        let f = table.by_source.entry(source).or_insert(Failures {
            count: 0,
            blocked_until: None,
            last: now,
            touched: touch,
        });
        table.order.remove(&f.touched);
        table.order.insert(touch, source);
        f.touched = touch;
        if now.saturating_duration_since(f.last) >= Self::FORGET_AFTER {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        if f.count > Self::FREE_FAILURES {
            let doublings = (f.count - Self::FREE_FAILURES - 1).min(16);
            let block = (Self::BASE_BLOCK * 2u32.pow(doublings)).min(Self::MAX_BLOCK);
            f.blocked_until = Some(now + block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_is_made_once_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config/tern-relay/token");
        let made = Token::load_or_create(&path).unwrap();
        assert_eq!(made.expose().len(), 43);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let parent = path.parent().unwrap();
        assert_eq!(std::fs::metadata(parent).unwrap().permissions().mode() & 0o777, 0o700);
        // The next start reads the same token: the URL survives a restart.
        assert!(Token::load_or_create(&path).unwrap().matches(made.expose()));
        // A hand-written one, with its newline, is taken as it is.
        std::fs::write(&path, "hand-made-token-0123456789\n").unwrap();
        assert!(Token::load_or_create(&path).unwrap().matches("hand-made-token-0123456789"));
    }

    #[test]
    fn a_token_file_others_can_read_or_an_empty_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "secret-token-value-0123456789\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::load_or_create(&path).unwrap_err();
        assert!(matches!(e, TokenFileError::NotPrivate { mode: 0o644, .. }), "{e}");
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "  \n").unwrap();
        let e = Token::load_or_create(&path).unwrap_err();
        assert!(matches!(e, TokenFileError::Malformed { .. }), "{e}");
        std::fs::write(&path, "two words\n").unwrap();
        assert!(matches!(Token::load_or_create(&path), Err(TokenFileError::Malformed { .. })));
    }

    #[test]
    fn random_tokens_differ_and_never_show_in_debug() {
        let a = Token::random().unwrap();
        let b = Token::random().unwrap();
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.expose().len(), 43);
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn matching_is_exact() {
        let t = Token::new("abc");
        assert!(t.matches("abc"));
        assert!(!t.matches("abd"));
        assert!(!t.matches("ab"));
        assert!(!t.matches("abcd"));
        assert!(!t.matches(""));
    }

    #[test]
    fn wrong_tokens_back_off_but_the_right_one_always_passes() {
        let t = Token::new("secret");
        let l = AuthLimiter::new();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let now = Instant::now();
        // No token at all, however often: refused, never counted.
        for _ in 0..50 {
            assert_eq!(l.check(&t, None, ip, now), AuthOutcome::BadToken);
        }
        assert_eq!(l.remembered(), 0);
        for _ in 0..=AuthLimiter::FREE_FAILURES {
            assert_eq!(l.check(&t, Some("x"), ip, now), AuthOutcome::BadToken);
        }
        // Now blocked for wrong tokens...
        assert!(matches!(l.check(&t, Some("y"), ip, now), AuthOutcome::RateLimited(_)));
        assert!(l.blocked(ip, now).is_some());
        // ... but not for the right one, nor for none (still a plain refusal).
        assert_eq!(l.check(&t, Some("secret"), ip, now), AuthOutcome::Ok);
        assert_eq!(l.check(&t, None, ip, now), AuthOutcome::BadToken);
        // A success does not hand the source fresh free guesses.
        assert!(matches!(l.check(&t, Some("z"), ip, now), AuthOutcome::RateLimited(_)));
        // Other sources are unaffected.
        assert_eq!(l.check(&t, Some("nope"), other, now), AuthOutcome::BadToken);
        assert_eq!(l.blocked(other, now), None);
        // The judgement needs no token at all: whoever checks a credential says how it went.
        let key = SourceKey::of(ip);
        assert!(matches!(l.judge(Credential::Wrong, key, now), AuthOutcome::RateLimited(_)));
        assert_eq!(l.judge(Credential::Right, key, now), AuthOutcome::Ok);
        assert_eq!(l.judge(Credential::Absent, key, now), AuthOutcome::BadToken);
    }

    #[test]
    fn ipv6_sources_are_keyed_by_their_64_and_mapped_ipv4_by_the_address() {
        let key = |s: &str| SourceKey::of(s.parse().unwrap());
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("2001:db8:1:2:aaaa::1").to_string(), "2001:db8:1:2::/64");
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"), "a dual-stack socket's IPv4 client");
        assert_ne!(key("::ffff:192.0.2.7"), key("::ffff:192.0.2.8"));
        assert_ne!(key("10.0.0.1"), key("10.0.0.2"));
        // A host that hops addresses inside its /64 is one source to the limiter.
        let t = Token::new("secret");
        let l = AuthLimiter::new();
        let now = Instant::now();
        for i in 0..=AuthLimiter::FREE_FAILURES {
            let ip: IpAddr = format!("2001:db8:1:2::{:x}", i + 1).parse().unwrap();
            l.check(&t, Some("bad"), ip, now);
        }
        let fresh: IpAddr = "2001:db8:1:2:dead:beef::9".parse().unwrap();
        assert!(matches!(l.check(&t, Some("bad"), fresh, now), AuthOutcome::RateLimited(_)));
        assert_eq!(l.remembered(), 1);
    }

    #[test]
    fn a_full_table_forgets_the_source_that_failed_longest_ago() {
        let l = AuthLimiter::with_capacity(3);
        let now = Instant::now();
        let src = |i: u8| SourceKey::of(IpAddr::from([10, 0, 0, i]));
        // Source 1 is blocked; 2 and 3 fail once each, later.
        for _ in 0..=AuthLimiter::FREE_FAILURES {
            l.judge(Credential::Wrong, src(1), now);
        }
        l.judge(Credential::Wrong, src(2), now);
        l.judge(Credential::Wrong, src(3), now);
        assert_eq!(l.remembered(), 3);
        // Source 2 fails again: the order of last failures is now 1, 3, 2.
        l.judge(Credential::Wrong, src(2), now);
        // A fourth source evicts exactly one entry, the oldest (1), though none has expired.
        l.judge(Credential::Wrong, src(4), now);
        assert_eq!(l.remembered(), 3);
        assert_eq!(l.blocked(src(1), now), None, "the oldest entry was evicted");
        // The next evicts 3 (its last failure is older than 2's second one).
        l.judge(Credential::Wrong, src(5), now);
        assert_eq!(l.remembered(), 3);
        let table = l.table.lock().unwrap();
        let mut kept: Vec<_> = table.by_source.keys().copied().collect();
        kept.sort();
        assert_eq!(kept, vec![src(2), src(4), src(5)]);
        assert_eq!(table.order.len(), 3, "the order index tracks the table");
    }

    #[test]
    fn ten_thousand_sources_stay_bounded() {
        let l = AuthLimiter::new();
        let now = Instant::now();
        for i in 0..(AuthLimiter::MAX_SOURCES as u32 + 500) {
            l.judge(Credential::Wrong, SourceKey::of(IpAddr::from(i.to_be_bytes())), now);
        }
        assert_eq!(l.remembered(), AuthLimiter::MAX_SOURCES);
    }

    #[test]
    fn block_doubles_up_to_the_cap() {
        let t = Token::new("secret");
        let l = AuthLimiter::new();
        let ip: IpAddr = "::1".parse().unwrap();
        let mut now = Instant::now();
        let mut last = Duration::ZERO;
        for _ in 0..40 {
            if let Some(wait) = l.blocked(ip, now) {
                now += wait;
            }
            l.check(&t, Some("bad"), ip, now);
            if let Some(wait) = l.blocked(ip, now) {
                assert!(wait >= last || wait == AuthLimiter::MAX_BLOCK);
                assert!(wait <= AuthLimiter::MAX_BLOCK);
                last = wait;
            }
        }
        assert_eq!(last, AuthLimiter::MAX_BLOCK);
    }
}
