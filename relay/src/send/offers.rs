//! What the shells of this relay's sessions sent to their browsers and that no page has answered
//! yet: files (`tern send`) and URLs (`tern open`), by session.
//!
//! Each session's list is kept in `<state>/<session>.offers` (0600, rewritten on every change), so
//! a restarted relay offers them again and a download resumes; a `tern` command waiting for an
//! answer reconnects and waits on. Every page that attaches to the session is offered the whole
//! list; the first answer wins and removes the offer.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tern::relay_proto::{Offer, OfferAnswer, Offered, PageSignal};
use tokio::sync::{broadcast, oneshot, watch};

/// Offers one session may have waiting at once (a runaway loop of `tern open` stops here).
pub const MAX_PENDING: usize = 32;

/// A file as it was when offered: a download refuses to send it once it changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSource {
    pub path: PathBuf,
    pub size: u64,
    /// Modification time: seconds since the epoch and nanoseconds (two fields: serde's
    /// flattened maps cannot carry an i128).
    pub mtime: i64,
    pub mtime_nsec: i64,
    /// The inode, so a file replaced under the same name counts as changed.
    pub ino: u64,
}

impl FileSource {
    /// What `meta` says of the file at `path` now.
    pub fn of(path: PathBuf, meta: &fs::Metadata) -> FileSource {
        FileSource {
            path,
            size: meta.len(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
            ino: meta.ino(),
        }
    }

    /// Whether the file at the path is still this one (same inode, size and modification time).
    pub fn unchanged(&self) -> Result<(), String> {
        let meta = fs::metadata(&self.path)
            .map_err(|e| format!("{} cannot be read any more: {e}", self.path.display()))?;
        if FileSource::of(self.path.clone(), &meta) == *self {
            Ok(())
        } else {
            Err(format!("{} changed after `tern send`", self.path.display()))
        }
    }
}

/// One offer and who waits for its answer.
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    id: String,
    #[serde(flatten)]
    what: Saved,
    #[serde(skip)]
    waiters: Vec<oneshot::Sender<OfferAnswer>>,
}

/// An offer as kept on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Saved {
    File { name: String, sha256: String, source: FileSource },
    Url { url: String },
}

impl Pending {
    fn offer(&self) -> Offer {
        let what = match &self.what {
            Saved::File { name, sha256, source } => {
                Offered::File { name: name.clone(), size: source.size, sha256: sha256.clone() }
            }
            Saved::Url { url } => Offered::Url { url: url.clone() },
        };
        Offer { id: self.id.clone(), what }
    }
}

#[derive(Debug)]
struct SessionOffers {
    list: Vec<Pending>,
    /// Bumped on every new offer: the session's forwarding loop offers what it has not yet.
    changed: watch::Sender<u64>,
}

impl SessionOffers {
    fn new() -> Self {
        SessionOffers { list: Vec::new(), changed: watch::channel(0).0 }
    }
}

/// Every session's offers.
#[derive(Debug)]
pub struct Offers {
    /// The state directory (spawn mode); `None`: offers live in memory only (tests, bridge mode,
    /// which has no shell to send anything).
    dir: Option<PathBuf>,
    sessions: Mutex<HashMap<String, SessionOffers>>,
    /// Clipboard writes and notifications from each session's recorder, for the pages attached
    /// when they come (not kept: a notification is about now).
    signals: Mutex<HashMap<String, broadcast::Sender<PageSignal>>>,
    /// Each session's last [`MAX_LINKS`] hyperlinks (OSC 8), for a page that attaches later (a
    /// reload, another browser): the text stays on the screen and in the scrollback.
    links: Mutex<HashMap<String, std::collections::VecDeque<PageSignal>>>,
    /// Each session's latest picture its recorder stored (`ImageStored`), for the pages waiting
    /// for the next one (`tern::relay_proto::NEXT_IMAGE`).
    pictures: Mutex<HashMap<String, watch::Sender<u64>>>,
}

/// Hyperlinks kept per session for pages that attach later.
pub const MAX_LINKS: usize = 200;

/// Why an offer was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    #[error("{MAX_PENDING} offers of this session wait for the browser already")]
    TooMany,
    #[error("no such offer (answered already, or its session ended)")]
    Unknown,
}

impl Offers {
    /// The offers kept in `dir` (spawn mode's state directory) by an earlier relay.
    pub fn open(dir: Option<&Path>) -> Arc<Offers> {
        let mut sessions = HashMap::new();
        if let Some(dir) = dir {
            for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let Some(id) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".offers"))
                    .filter(|id| crate::ids::valid_id(id))
                else {
                    continue;
                };
                match fs::read(&path).map(|b| serde_json::from_slice::<Vec<Pending>>(&b)) {
                    Ok(Ok(list)) => {
                        let mut s = SessionOffers::new();
                        s.list = list;
                        sessions.insert(id.to_owned(), s);
                    }
                    _ => tracing::warn!(path = %path.display(), "unreadable offers file; ignored"),
                }
            }
        }
        Arc::new(Offers {
            dir: dir.map(Path::to_path_buf),
            sessions: Mutex::new(sessions),
            signals: Mutex::new(HashMap::new()),
            links: Mutex::new(HashMap::new()),
            pictures: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionOffers>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Offers a file to `session`'s browser; the receiver gets the page's answer.
    pub fn offer_file(
        &self,
        session: &str,
        name: String,
        sha256: String,
        source: FileSource,
    ) -> Result<(String, oneshot::Receiver<OfferAnswer>), OfferError> {
        self.add(session, Saved::File { name, sha256, source })
    }

    /// Offers a URL to `session`'s browser (checked with `openable_url` by the caller).
    pub fn offer_url(
        &self,
        session: &str,
        url: String,
    ) -> Result<(String, oneshot::Receiver<OfferAnswer>), OfferError> {
        self.add(session, Saved::Url { url })
    }

    fn add(
        &self,
        session: &str,
        what: Saved,
    ) -> Result<(String, oneshot::Receiver<OfferAnswer>), OfferError> {
        let mut all = self.lock();
        let s = all.entry(session.to_owned()).or_insert_with(SessionOffers::new);
        if s.list.len() >= MAX_PENDING {
            return Err(OfferError::TooMany);
        }
        let id = random_id();
        let (tx, rx) = oneshot::channel();
        s.list.push(Pending { id: id.clone(), what, waiters: vec![tx] });
        s.changed.send_modify(|n| *n += 1);
        self.save(session, s);
        Ok((id, rx))
    }

    /// Waits on an offer made before (a `tern` command whose relay restarted).
    pub fn wait(
        &self,
        session: &str,
        id: &str,
    ) -> Result<oneshot::Receiver<OfferAnswer>, OfferError> {
        let mut all = self.lock();
        let pending = all
            .get_mut(session)
            .and_then(|s| s.list.iter_mut().find(|p| p.id == id))
            .ok_or(OfferError::Unknown)?;
        let (tx, rx) = oneshot::channel();
        pending.waiters.push(tx);
        Ok(rx)
    }

    /// What `session`'s pages are to be offered, and a signal that fires when that grows.
    pub fn watch(&self, session: &str) -> watch::Receiver<u64> {
        self.lock().entry(session.to_owned()).or_insert_with(SessionOffers::new).changed.subscribe()
    }

    /// The offers waiting for `session`'s browser, oldest first.
    pub fn pending(&self, session: &str) -> Vec<Offer> {
        self.lock()
            .get(session)
            .map(|s| s.list.iter().map(Pending::offer).collect())
            .unwrap_or_default()
    }

    /// The file behind offer `id` of `session`, for a download stream.
    pub fn file(&self, session: &str, id: &str) -> Option<(String, FileSource)> {
        let all = self.lock();
        let p = all.get(session)?.list.iter().find(|p| p.id == id)?;
        match &p.what {
            Saved::File { sha256, source, .. } => Some((sha256.clone(), source.clone())),
            Saved::Url { .. } => None,
        }
    }

    /// A page's answer: the waiting commands hear it and the offer is gone.
    pub fn answer(&self, session: &str, id: &str, answer: OfferAnswer) -> Result<(), OfferError> {
        let mut all = self.lock();
        let s = all.get_mut(session).ok_or(OfferError::Unknown)?;
        let at = s.list.iter().position(|p| p.id == id).ok_or(OfferError::Unknown)?;
        let pending = s.list.remove(at);
        for w in pending.waiters {
            let _ = w.send(answer.clone());
        }
        self.save(session, s);
        Ok(())
    }

    /// Hands `signal` to the pages attached to `session` now; false when none is.
    pub fn signal(&self, session: &str, signal: PageSignal) -> bool {
        if let PageSignal::Link { .. } = &signal {
            let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            let kept = links.entry(session.to_owned()).or_default();
            if kept.len() == MAX_LINKS {
                kept.pop_front();
            }
            kept.push_back(signal.clone());
        }
        let signals = self.signals.lock().unwrap_or_else(|p| p.into_inner());
        signals.get(session).is_some_and(|tx| tx.send(signal).is_ok())
    }

    /// The hyperlinks `session`'s programs printed (the last [`MAX_LINKS`]), oldest first.
    pub fn links(&self, session: &str) -> Vec<PageSignal> {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        links.get(session).map(|l| l.iter().cloned().collect()).unwrap_or_default()
    }

    /// The clipboard writes and notifications of `session` from now on.
    pub fn signals(&self, session: &str) -> broadcast::Receiver<PageSignal> {
        let mut signals = self.signals.lock().unwrap_or_else(|p| p.into_inner());
        // A few at once: more than a page's forwarding can fall behind are dropped (lagged).
        signals.entry(session.to_owned()).or_insert_with(|| broadcast::channel(16).0).subscribe()
    }

    /// `session`'s recorder stored picture `id`: the pages waiting for the next one hear it.
    pub fn image_stored(&self, session: &str, id: u64) {
        let pictures = self.pictures.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = pictures.get(session) {
            tx.send_replace(id);
        }
    }

    /// The pictures `session`'s recorder stores from now on (the latest id; 0 before any).
    pub fn pictures(&self, session: &str) -> watch::Receiver<u64> {
        let mut pictures = self.pictures.lock().unwrap_or_else(|p| p.into_inner());
        pictures.entry(session.to_owned()).or_insert_with(|| watch::channel(0).0).subscribe()
    }

    /// The session is over: its offers go, and whoever waits hears why.
    pub fn end_session(&self, session: &str) {
        self.pictures.lock().unwrap_or_else(|p| p.into_inner()).remove(session);
        self.signals.lock().unwrap_or_else(|p| p.into_inner()).remove(session);
        self.links.lock().unwrap_or_else(|p| p.into_inner()).remove(session);
        let Some(s) = self.lock().remove(session) else { return };
        for p in s.list {
            for w in p.waiters {
                let _ = w.send(OfferAnswer::Failed { message: "the session ended".into() });
            }
        }
        if let Some(dir) = &self.dir {
            let _ = fs::remove_file(dir.join(format!("{session}.offers")));
        }
    }

    /// Ends every session's offers but those of `alive` sessions.
    pub fn retain(&self, alive: &[&str]) {
        let gone: Vec<String> =
            self.lock().keys().filter(|s| !alive.contains(&s.as_str())).cloned().collect();
        for session in gone {
            self.end_session(&session);
        }
    }

    /// Rewrites `session`'s file (0600, atomically), or removes it when nothing waits.
    fn save(&self, session: &str, s: &SessionOffers) {
        let Some(dir) = &self.dir else { return };
        let path = dir.join(format!("{session}.offers"));
        if s.list.is_empty() {
            let _ = fs::remove_file(&path);
            return;
        }
        let tmp = dir.join(format!("{session}.offers.tmp"));
        let bytes = serde_json::to_vec(&s.list).expect("offers always serialize");
        let write = || -> std::io::Result<()> {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            // The offer still works; only a relay restart would forget it.
            tracing::warn!(path = %path.display(), "cannot keep offers: {e}");
        }
    }
}

/// A fresh offer id: 16 random bytes in hex (names an offer; the session's token guards it).
fn random_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b = t.to_be_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "0123456789abcdef";

    fn source(dir: &Path) -> FileSource {
        let path = dir.join("f.txt");
        fs::write(&path, b"hello").unwrap();
        FileSource::of(path.clone(), &fs::metadata(&path).unwrap())
    }

    #[test]
    fn an_answer_reaches_every_waiter_and_removes_the_offer() {
        let offers = Offers::open(None);
        let mut changed = offers.watch(S);
        let (id, mut first) = offers.offer_url(S, "https://example.invalid/".into()).unwrap();
        assert!(changed.has_changed().unwrap(), "the forwarding loop is woken");
        let mut second = offers.wait(S, &id).unwrap();
        assert_eq!(offers.pending(S).len(), 1);
        offers.answer(S, &id, OfferAnswer::Opened).unwrap();
        assert_eq!(first.try_recv().unwrap(), OfferAnswer::Opened);
        assert_eq!(second.try_recv().unwrap(), OfferAnswer::Opened);
        assert!(offers.pending(S).is_empty());
        assert_eq!(offers.answer(S, &id, OfferAnswer::Opened), Err(OfferError::Unknown));
        changed.mark_unchanged();
    }

    #[test]
    fn offers_survive_a_restart_in_a_private_file_and_go_with_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        let offers = Offers::open(Some(dir.path()));
        let (id, mut rx) =
            offers.offer_file(S, "f.txt".into(), "ab".repeat(32), src.clone()).unwrap();
        let file = dir.path().join(format!("{S}.offers"));
        assert_eq!(fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        let again = Offers::open(Some(dir.path()));
        assert_eq!(again.pending(S), offers.pending(S));
        assert_eq!(again.file(S, &id), Some(("ab".repeat(32), src)));
        again.end_session(S);
        assert!(!file.exists());
        offers.end_session(S);
        assert!(matches!(rx.try_recv(), Ok(OfferAnswer::Failed { .. })));
    }

    #[test]
    fn a_changed_file_is_noticed_and_a_runaway_shell_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        assert_eq!(src.unchanged(), Ok(()));
        fs::write(&src.path, b"hello, world").unwrap();
        assert!(src.unchanged().unwrap_err().contains("changed"));
        let offers = Offers::open(None);
        for _ in 0..MAX_PENDING {
            offers.offer_url(S, "https://a.b/".into()).unwrap();
        }
        assert_eq!(offers.offer_url(S, "https://a.b/".into()).unwrap_err(), OfferError::TooMany);
    }
}
