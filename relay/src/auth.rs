//! The access token: generation, constant-time checking, and back-off for sources that guess wrong.

use std::collections::HashMap;
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

/// Failed attempts from one source address.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    blocked_until: Option<Instant>,
    last: Instant,
}

/// Per-source-IP back-off after failed token checks.
///
/// The first [`AuthLimiter::FREE_FAILURES`] failures cost nothing (typos, a stale tab); after that
/// each failure blocks the source for a doubling delay up to [`AuthLimiter::MAX_BLOCK`]. A blocked
/// source is refused before its token is even looked at, so guessing is throttled, and a success
/// clears the record.
#[derive(Debug, Default)]
pub struct AuthLimiter {
    sources: Mutex<HashMap<IpAddr, Failures>>,
}

/// Outcome of checking a request's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthOutcome {
    Ok,
    BadToken,
    /// Too many failures from this source: come back after the given delay.
    RateLimited(Duration),
}

impl AuthLimiter {
    pub const FREE_FAILURES: u32 = 5;
    pub const BASE_BLOCK: Duration = Duration::from_millis(500);
    pub const MAX_BLOCK: Duration = Duration::from_secs(60);
    /// Forget a source this long after its last failure.
    const FORGET_AFTER: Duration = Duration::from_secs(600);
    /// Bound on remembered sources; old entries are pruned when it is reached.
    const MAX_SOURCES: usize = 10_000;

    pub fn new() -> Self {
        Self::default()
    }

    /// Is the source currently blocked? Call before doing any work for it.
    pub fn blocked(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        let until = sources.get(&ip)?.blocked_until?;
        until.checked_duration_since(now).filter(|d| !d.is_zero())
    }

    /// Checks `candidate` (None: no token presented) against `token` for a request from `ip`.
    pub fn check(
        &self,
        token: &Token,
        candidate: Option<&str>,
        ip: IpAddr,
        now: Instant,
    ) -> AuthOutcome {
        if let Some(wait) = self.blocked(ip, now) {
            return AuthOutcome::RateLimited(wait);
        }
        let ok = candidate.is_some_and(|c| token.matches(c));
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        if ok {
            sources.remove(&ip);
            return AuthOutcome::Ok;
        }
        if sources.len() >= Self::MAX_SOURCES {
            sources.retain(|_, f| now.duration_since(f.last) < Self::FORGET_AFTER);
        }
        let f = sources.entry(ip).or_insert(Failures { count: 0, blocked_until: None, last: now });
        if now.duration_since(f.last) >= Self::FORGET_AFTER {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        if f.count > Self::FREE_FAILURES {
            let doublings = (f.count - Self::FREE_FAILURES - 1).min(16);
            let block = (Self::BASE_BLOCK * 2u32.pow(doublings)).min(Self::MAX_BLOCK);
            f.blocked_until = Some(now + block);
        }
        AuthOutcome::BadToken
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
    fn repeated_failures_back_off_and_success_clears() {
        let t = Token::new("secret");
        let l = AuthLimiter::new();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let now = Instant::now();
        for _ in 0..AuthLimiter::FREE_FAILURES {
            assert_eq!(l.check(&t, Some("x"), ip, now), AuthOutcome::BadToken);
        }
        assert_eq!(l.check(&t, None, ip, now), AuthOutcome::BadToken);
        // Now blocked, even with the right token.
        assert!(matches!(l.check(&t, Some("secret"), ip, now), AuthOutcome::RateLimited(_)));
        // Other sources are unaffected.
        assert_eq!(l.check(&t, Some("secret"), other, now), AuthOutcome::Ok);
        // After the block, the right token works and clears the record.
        let later = now + AuthLimiter::BASE_BLOCK + Duration::from_millis(1);
        assert_eq!(l.check(&t, Some("secret"), ip, later), AuthOutcome::Ok);
        assert_eq!(l.blocked(ip, later), None);
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
