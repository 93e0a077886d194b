//! Shares: a read-only link to one session (issue 35), made by `tern share` in the session's
//! shell or by the owner's page (the Share dialog, `/api/share`). A share is a named token
//! ([`crate::tokens::add_share`]) bound to its session, expiring (an hour unless asked), with
//! or without the session's history; ending it revokes the token, and the relay closes its
//! viewers' links within a token-watch interval (`tokens::WATCH_INTERVAL`).

use std::path::Path;
use std::time::Duration;

use crate::audit::{Audit, Fields};

/// A share's life unless asked otherwise.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(3600);
/// The longest a share may live.
pub const MAX_EXPIRY: Duration = Duration::from_secs(7 * 24 * 3600);

/// A share made: its token's name, the viewer's URL (with the token: shown once) and when it
/// expires (unix seconds).
#[derive(Debug, Clone)]
pub struct Made {
    pub name: String,
    pub url: String,
    pub expires: u64,
}

/// The viewer's URL of a share: the page's address with the token and the session in the
/// fragment (never sent to a server, as for `#token=`).
pub fn viewer_url(base: &str, token: &str, session: &str) -> String {
    let base = base.split('#').next().unwrap_or(base);
    format!("{base}#token={token}&view={session}")
}

/// Shares `session` (a running one of this relay's; the caller checked) for `expires`, audited
/// as made by `by`. `base`: the page's address.
pub fn create(
    dir: &Path,
    audit: &Audit,
    session: &str,
    expires: Duration,
    allow_history: bool,
    by: &str,
    base: &str,
) -> Result<Made, String> {
    if expires.is_zero() || expires > MAX_EXPIRY {
        return Err(format!(
            "a share lasts from a second to {} days",
            MAX_EXPIRY.as_secs() / 86400
        ));
    }
    let (name, token) = crate::tokens::add_share(dir, session, expires, allow_history)
        .map_err(|e| format!("cannot make the share: {e}"))?;
    let expires_at = crate::tokens::unix_now().saturating_add(expires.as_secs());
    audit.event(
        "share_created",
        &Fields::new()
            .who(by)
            .session(session)
            .kind(if allow_history { "with-history" } else { "screen" })
            .reason(&format!("{name}, expires in {} s", expires.as_secs())),
    );
    tracing::info!(session, share = %name, expires_in = expires.as_secs(), allow_history, "session shared");
    Ok(Made { name, url: viewer_url(base, &token, session), expires: expires_at })
}

/// Ends every share of `session`: how many there were. Their viewers are closed within a
/// token-watch interval.
pub fn end(dir: &Path, audit: &Audit, session: &str, by: &str) -> Result<usize, String> {
    let gone = crate::tokens::end_shares(dir, Some(session))
        .map_err(|e| format!("cannot end the shares: {e}"))?;
    for e in &gone {
        audit.event("share_ended", &Fields::new().who(by).session(session).reason(&e.name));
    }
    if !gone.is_empty() {
        tracing::info!(session, count = gone.len(), "sharing ended");
    }
    Ok(gone.len())
}

/// The page's address as the relay wrote it (`url` in the state directory), or a local one.
pub fn base_url(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("url"))
        .ok()
        .and_then(|u| u.trim().split('#').next().map(str::to_string))
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "http://127.0.0.1:7480/".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_made_and_ended_and_its_url_names_token_and_session() {
        let dir = tempfile::tempdir().unwrap();
        let audit = Audit::open(Some(dir.path()));
        let made = create(dir.path(), &audit, "s1", DEFAULT_EXPIRY, false, "owner", "https://h/#x")
            .unwrap();
        assert!(made.url.starts_with("https://h/#token=tn.") && made.url.ends_with("&view=s1"));
        assert!(create(dir.path(), &audit, "s1", MAX_EXPIRY * 2, false, "owner", "h").is_err());
        assert_eq!(end(dir.path(), &audit, "s1", "owner").unwrap(), 1);
        assert_eq!(end(dir.path(), &audit, "s1", "owner").unwrap(), 0);
        let log = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
        assert!(log.contains("share_created") && log.contains("share_ended"), "{log}");
        let token = made.url.split("token=").nth(1).unwrap().split('&').next().unwrap();
        assert!(!log.contains(token), "no token in the audit trail");
    }
}
