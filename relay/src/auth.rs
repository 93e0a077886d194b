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
