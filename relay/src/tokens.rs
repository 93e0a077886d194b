//! Named tokens (`tern-relay token add|list|revoke`): one per device or person, each revocable,
//! some read-only, some expiring. Next to the owner's token (`--token`, `TERN_RELAY_TOKEN`, the
//! random one), which stays as it was.
//!
//! A named token reads `tn.ID.SECRET` ([`tern::relay_proto::proof::token_id`]): the page sends
//! ID (not secret) in its greet or challenge request so that the relay knows which key to prove
//! with, and never sends SECRET. The relay keeps no token: `tokens.json` in the state directory
//! (0600, written to a temporary file and renamed) holds each token's name, id, kind, times and
//! [`verifier`](tern::relay_proto::proof::verifier), the HMAC key of its proofs. A running relay
//! reads the file again when it changes ([`TokenStore::watch`]), so `token revoke` takes effect
//! at once, live links included: each link watches its token ([`TokenStore::changed`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde::{Deserialize, Serialize};
use tern::relay_proto::proof::{self, TOKEN_ID_LEN};

/// The file of named tokens in the state directory.
pub const FILE: &str = "tokens.json";
/// When each token was last used (the relay writes it; `token add` and `revoke` never do).
pub const USED_FILE: &str = "tokens-used.json";
/// How often a running relay looks at the file for a revocation.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(200);
/// At most this often a token's last use is written.
const USED_INTERVAL: u64 = 60;

/// The owner token's name in logs, the audit trail and session records; no named token may
/// take it.
pub const OWNER: &str = "owner";

/// Who a link or request is: the owner's token, or a named one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    Owner,
    Named {
        name: String,
        id: String,
        read_only: bool,
    },
    /// A person a trusted front door vouched for (`--identity-header`).
    Proxied {
        user: String,
    },
}

impl Who {
    /// A read-only token's link reads and never writes: no input, resize, paste, seed, offers
    /// or downloads (`forward.rs`, `streams.rs`, the paste and download routes).
    pub fn read_only(&self) -> bool {
        matches!(self, Who::Named { read_only: true, .. })
    }

    /// For logs and the audit trail: `owner`, or the token's name.
    pub fn name(&self) -> &str {
        match self {
            Who::Owner => OWNER,
            Who::Named { name, .. } => name,
            Who::Proxied { user } => user,
        }
    }

    /// Whether this caller may list, resume, take over or read a session `owner` started
    /// (`SessionRecord::owner_name`): its own, or any for the owner's token.
    pub fn may_use(&self, owner: &str) -> bool {
        matches!(self, Who::Owner) || self.name() == owner
    }

    pub fn id(&self) -> Option<&str> {
        match self {
            Who::Owner | Who::Proxied { .. } => None,
            Who::Named { id, .. } => Some(id),
        }
    }
}

/// One named token as stored: never the token itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub id: String,
    /// Hex of [`proof::verifier`].
    pub verifier: String,
    #[serde(default)]
    pub read_only: bool,
    /// Unix seconds.
    pub created: u64,
    #[serde(default)]
    pub expires: Option<u64>,
    /// A share (`tern share`, the page's Share dialog): a read-only token bound to this one
    /// session; its link may only watch it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<String>,
    /// A share's viewers may read the session's history (the recorder's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_history: bool,
}

/// What a share token allows: watching one session, its history or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    pub session: String,
    pub allow_history: bool,
}

/// The prefix of a share's token name (`share-` and random hex): no `token add` name clashes,
/// since a share's name is made here.
pub const SHARE_PREFIX: &str = "share-";

impl Entry {
    pub fn expired(&self, now: u64) -> bool {
        self.expires.is_some_and(|e| now >= e)
    }

    fn who(&self) -> Who {
        Who::Named { name: self.name.clone(), id: self.id.clone(), read_only: self.read_only }
    }

    fn key(&self) -> Option<[u8; 32]> {
        let d: tern::relay_proto::sha256::Sha256 = self.verifier.parse().ok()?;
        Some(d.0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{path}: not a token file ({source})")]
    Malformed { path: PathBuf, source: serde_json::Error },
    #[error(
        "a token name is 1 to 64 letters, digits, '.', '-', '_' or '@' (it shows in logs and the \
         audit trail)"
    )]
    BadName,
    #[error("there is a token named {0} already (revoke it first)")]
    Exists(String),
    #[error("no token named {0}")]
    NoSuchName(String),
    #[error("cannot make a random token: {0}")]
    Random(String),
}

/// `--expires`: `90s`, `30m`, `12h`, `7d`, `2w`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("{text:?}: a number and a unit (s, m, h, d, w)"))?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(format!("{text:?}: the unit is one of s, m, h, d, w")),
    };
    match n.checked_mul(secs) {
        Some(s) if s > 0 => Ok(Duration::from_secs(s)),
        _ => Err(format!("{text:?}: out of range")),
    }
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn valid_name(name: &str) -> bool {
    // `owner` is the owner token's name in session records: a token so named would own them.
    name != OWNER
        && (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b))
}

/// Reads the entries in `dir` (none when there is no file).
pub fn read(dir: &Path) -> Result<Vec<Entry>, TokenError> {
    let path = dir.join(FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes).map_err(|source| TokenError::Malformed { path, source })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Writes `bytes` to `dir/name`, 0600, atomically (a temporary file renamed over it), making
/// `dir` 0700 when missing; `durable`: on disk before the rename (fsync), for what must survive
/// a crash (the tokens; not when each was last used, which the relay writes from its tasks).
pub fn write_private(dir: &Path, name: &str, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    if durable {
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(name))
}

fn write(dir: &Path, entries: &[Entry]) -> Result<(), TokenError> {
    let json = serde_json::to_vec_pretty(entries).map_err(std::io::Error::other)?;
    Ok(write_private(dir, FILE, &json, true)?)
}

/// A new named token, added to `dir`: the token, printed once and kept nowhere.
pub fn add(
    dir: &Path,
    name: &str,
    read_only: bool,
    expires_in: Option<Duration>,
) -> Result<String, TokenError> {
    if !valid_name(name) {
        return Err(TokenError::BadName);
    }
    let mut entries = read(dir)?;
    if entries.iter().any(|e| e.name == name) {
        return Err(TokenError::Exists(name.into()));
    }
    let mut id_bytes = [0u8; TOKEN_ID_LEN / 2];
    let mut secret = [0u8; 32];
    getrandom::fill(&mut id_bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    getrandom::fill(&mut secret).map_err(|e| TokenError::Random(e.to_string()))?;
    let id: String = id_bytes.iter().map(|b| format!("{b:02x}")).collect();
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    let token = format!("{}{id}.{secret}", proof::NAMED_TOKEN_PREFIX);
    debug_assert_eq!(proof::token_id(&token), Some(id.as_str()));
    let now = unix_now();
    entries.push(Entry {
        name: name.into(),
        id,
        verifier: tern::relay_proto::sha256::Sha256(proof::verifier(&token)).to_string(),
        read_only,
        created: now,
        expires: expires_in.map(|d| now.saturating_add(d.as_secs())),
        share: None,
        allow_history: false,
    });
    write(dir, &entries)?;
    Ok(token)
}

/// A new share of `session` (see [`Entry::share`]): its name and token, printed once.
pub fn add_share(
    dir: &Path,
    session: &str,
    expires_in: Duration,
    allow_history: bool,
) -> Result<(String, String), TokenError> {
    let mut suffix = [0u8; 4];
    getrandom::fill(&mut suffix).map_err(|e| TokenError::Random(e.to_string()))?;
    let name: String =
        format!("{SHARE_PREFIX}{}", suffix.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let token = add(dir, &name, true, Some(expires_in))?;
    let mut entries = read(dir)?;
    if let Some(e) = entries.iter_mut().find(|e| e.name == name) {
        e.share = Some(session.to_string());
        e.allow_history = allow_history;
    }
    write(dir, &entries)?;
    Ok((name, token))
}

/// Ends every share of `session` (all shares when `None`): the entries removed.
pub fn end_shares(dir: &Path, session: Option<&str>) -> Result<Vec<Entry>, TokenError> {
    let mut entries = read(dir)?;
    let (gone, kept): (Vec<Entry>, Vec<Entry>) = entries
        .drain(..)
        .partition(|e| e.share.as_deref().is_some_and(|s| session.is_none_or(|id| id == s)));
    if !gone.is_empty() {
        write(dir, &kept)?;
    }
    Ok(gone)
}

/// Removes the token named `name`: returns its entry.
pub fn revoke(dir: &Path, name: &str) -> Result<Entry, TokenError> {
    let mut entries = read(dir)?;
    let Some(at) = entries.iter().position(|e| e.name == name) else {
        return Err(TokenError::NoSuchName(name.into()));
    };
    let gone = entries.remove(at);
    write(dir, &entries)?;
    Ok(gone)
}

/// When each token id was last used (unix seconds), as the relay wrote it.
pub fn last_used(dir: &Path) -> HashMap<String, u64> {
    std::fs::read(dir.join(USED_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The named tokens a running relay accepts, read again whenever the file changes.
#[derive(Debug)]
pub struct TokenStore {
    dir: Option<PathBuf>,
    inner: Mutex<Loaded>,
    /// Bumped at each reload: links re-check their token.
    generation: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Loaded {
    entries: Vec<Entry>,
    /// The file's length, modification time and inode when read (a rename changes the inode);
    /// `None` before the first read, `Some(None)` when there was no file.
    stamp: Option<Option<(u64, SystemTime, u64)>>,
    /// Last uses not yet written, and when each was last written.
    used: HashMap<String, u64>,
    used_written: HashMap<String, u64>,
}

fn stamp(path: &Path) -> Option<(u64, SystemTime, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

impl TokenStore {
    /// The store of `dir` (`None`: bridge mode without a state directory; only the owner).
    pub fn open(dir: Option<PathBuf>) -> Result<TokenStore, TokenError> {
        let store = TokenStore {
            dir,
            inner: Mutex::new(Loaded::default()),
            generation: tokio::sync::watch::channel(0).0,
        };
        store.reload()?;
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the file again if it changed; true when it did.
    pub fn reload(&self) -> Result<bool, TokenError> {
        let Some(dir) = &self.dir else { return Ok(false) };
        let now = Some(stamp(&dir.join(FILE)));
        if self.lock().stamp == now {
            return Ok(false);
        }
        let entries = read(dir)?;
        {
            let mut l = self.lock();
            if l.stamp == now {
                return Ok(false);
            }
            l.entries = entries;
            l.stamp = now;
        }
        self.generation.send_modify(|g| *g += 1);
        Ok(true)
    }

    /// Polls the file until `stop`; a change wakes every link to re-check its token.
    pub async fn watch(self: std::sync::Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut tick = tokio::time::interval(WATCH_INTERVAL);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.reload() {
                Ok(true) => tracing::info!("named tokens changed; links re-check theirs"),
                Ok(false) => {}
                // A half-edited file by hand: keep the tokens as they were, say so.
                Err(e) => tracing::warn!("cannot read the named tokens: {e}"),
            }
            self.flush_used();
        }
    }

    /// The HMAC key and identity for a token id (a live, unexpired one). An id not known yet
    /// makes the store look at its file first: a token added a moment ago works at once.
    pub fn key(&self, id: &str) -> Option<(Who, [u8; 32])> {
        self.lookup(id).or_else(|| {
            self.reload().ok()?;
            self.lookup(id)
        })
    }

    fn lookup(&self, id: &str) -> Option<(Who, [u8; 32])> {
        let l = self.lock();
        let e = l.entries.iter().find(|e| e.id == id && !e.expired(unix_now()))?;
        Some((e.who(), e.key()?))
    }

    /// A native client's plain token, if it is a live named one.
    pub fn check_plain(&self, token: &str) -> Option<Who> {
        let id = proof::token_id(token)?;
        let (who, key) = self.key(id)?;
        let v = proof::verifier(token);
        let same: bool = subtle::ConstantTimeEq::ct_eq(&v[..], &key[..]).into();
        same.then_some(who)
    }

    /// Whether `who` may still act: the owner always, a named token while it is in the file and
    /// not expired.
    pub fn valid(&self, who: &Who) -> bool {
        match who.id() {
            None => true,
            Some(id) => self.key(id).is_some(),
        }
    }

    /// The state directory the tokens live in (`None`: bridge mode without one).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The share `who`'s token is, if it is one.
    pub fn share(&self, who: &Who) -> Option<Share> {
        let id = who.id()?;
        let l = self.lock();
        let e = l.entries.iter().find(|e| e.id == id)?;
        Some(Share { session: e.share.clone()?, allow_history: e.allow_history })
    }

    /// The live shares of `session`: how many, and when the last one expires.
    pub fn shares_of(&self, session: &str) -> Vec<Entry> {
        let now = unix_now();
        let l = self.lock();
        l.entries
            .iter()
            .filter(|e| e.share.as_deref() == Some(session) && !e.expired(now))
            .cloned()
            .collect()
    }

    /// When `who` expires (unix seconds), if it does.
    pub fn expires(&self, who: &Who) -> Option<u64> {
        let id = who.id()?;
        self.lock().entries.iter().find(|e| e.id == id)?.expires
    }

    /// Wakes at each reload.
    pub fn changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Notes a successful use of `who` (written within a minute by [`TokenStore::watch`]).
    pub fn used(&self, who: &Who) {
        if let Some(id) = who.id() {
            self.lock().used.insert(id.to_string(), unix_now());
        }
    }

    fn flush_used(&self) {
        let Some(dir) = &self.dir else { return };
        let now = unix_now();
        let due = {
            let l = self.lock();
            l.used.iter().any(|(id, at)| {
                l.used_written.get(id).is_none_or(|w| *at >= w + USED_INTERVAL || *w == 0)
            })
        };
        if !due {
            return;
        }
        let mut all = last_used(dir);
        let mut l = self.lock();
        for (id, at) in l.used.drain().collect::<Vec<_>>() {
            all.insert(id.clone(), at);
            l.used_written.insert(id, now);
        }
        drop(l);
        if let Ok(json) = serde_json::to_vec(&all) {
            if let Err(e) = write_private(dir, USED_FILE, &json, false) {
                tracing::debug!("cannot write when tokens were last used: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_its_starters_and_the_owners() {
        let phone =
            Who::Named { name: "phone".into(), id: "0123456789ab".into(), read_only: false };
        let alice = Who::Proxied { user: "proxy:alice".into() };
        assert!(phone.may_use("phone") && !phone.may_use(OWNER) && !phone.may_use("proxy:alice"));
        assert!(alice.may_use("proxy:alice") && !alice.may_use("alice") && !alice.may_use("phone"));
        assert!(Who::Owner.may_use("phone") && Who::Owner.may_use("proxy:alice"));
    }

    #[test]
    fn tokens_are_added_stored_hashed_privately_found_and_revoked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let token = add(&state, "phone", false, None).unwrap();
        let ro = add(&state, "guest", true, Some(Duration::from_secs(3600))).unwrap();
        assert!(token.starts_with("tn.") && token.len() > 50, "{token}");
        let file = std::fs::read_to_string(state.join(FILE)).unwrap();
        assert!(!file.contains(token.split('.').nth(2).unwrap()), "the secret is not stored");
        let mode = std::fs::metadata(state.join(FILE)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(matches!(add(&state, "phone", false, None), Err(TokenError::Exists(_))));
        assert!(matches!(add(&state, "a b", false, None), Err(TokenError::BadName)));
        assert!(
            matches!(add(&state, OWNER, false, None), Err(TokenError::BadName)),
            "a token named owner would own the owner's sessions"
        );

        let store = TokenStore::open(Some(state.clone())).unwrap();
        let who = store.check_plain(&token).unwrap();
        assert_eq!(who.name(), "phone");
        assert!(!who.read_only());
        assert!(store.check_plain(&ro).unwrap().read_only());
        // The same id with another secret is not the token.
        let forged = format!("{}.forged-secret", &token[..token.rfind('.').unwrap()]);
        assert_eq!(store.check_plain(&forged), None);
        assert!(store.expires(&store.check_plain(&ro).unwrap()).is_some());
        // A use is written (at most once a minute per token).
        store.used(&who);
        store.flush_used();
        assert!(last_used(&state).contains_key(who.id().unwrap()), "the last use is kept");

        revoke(&state, "phone").unwrap();
        assert!(matches!(revoke(&state, "phone"), Err(TokenError::NoSuchName(_))));
        assert!(store.reload().unwrap(), "the change is seen");
        assert!(!store.reload().unwrap(), "and only once");
        assert!(!store.valid(&who));
        assert_eq!(store.check_plain(&token), None);
        assert!(store.check_plain(&ro).is_some());
    }

    #[test]
    fn a_share_is_a_read_only_token_bound_to_one_session_and_ends_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let (name, token) = add_share(dir.path(), "s1", Duration::from_secs(3600), true).unwrap();
        let (_, other) = add_share(dir.path(), "s2", Duration::from_secs(60), false).unwrap();
        assert!(name.starts_with(SHARE_PREFIX));
        let store = TokenStore::open(Some(dir.path().into())).unwrap();
        let who = store.check_plain(&token).unwrap();
        assert!(who.read_only(), "a share is read-only");
        assert_eq!(store.share(&who), Some(Share { session: "s1".into(), allow_history: true }));
        assert!(store.expires(&who).is_some(), "a share expires");
        assert_eq!(store.shares_of("s1").len(), 1);
        let ended = end_shares(dir.path(), Some("s1")).unwrap();
        assert_eq!(ended.len(), 1);
        store.reload().unwrap();
        assert!(!store.valid(&who), "an ended share's token is gone");
        assert!(store.check_plain(&other).is_some(), "another session's share stays");
    }

    #[test]
    fn a_token_added_after_the_store_opened_works_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(Some(dir.path().into())).unwrap();
        let token = add(dir.path(), "late", false, None).unwrap();
        assert_eq!(store.check_plain(&token).map(|w| w.name().to_string()), Some("late".into()));
    }

    #[test]
    fn an_expired_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let token = add(dir.path(), "brief", false, Some(Duration::from_secs(60))).unwrap();
        let mut entries = read(dir.path()).unwrap();
        entries[0].expires = Some(unix_now() - 1);
        write(dir.path(), &entries).unwrap();
        let store = TokenStore::open(Some(dir.path().into())).unwrap();
        assert_eq!(store.check_plain(&token), None);
    }
}
