//! The paste directory: what is held of each hash, admission (size limit, quota), the part file
//! of an upload under way, publication under the content's hash, age cleanup, and the hand-over
//! between two uploads of the same content.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use tern::relay_proto::UploadErrorCode;
use tokio_util::sync::CancellationToken;

/// Extensions of published pastes (from [`magic_extension`]).
const EXTENSIONS: [&str; 6] = ["png", "jpg", "gif", "webp", "pdf", "bin"];
/// How many leading bytes are kept to name the extension (enough for every magic number here).
pub(super) const HEAD_LEN: usize = 16;

/// Limits of the paste directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasteLimits {
    /// Largest single paste in bytes.
    pub max_size: u64,
    /// Largest total of the directory (complete and partial pastes) in bytes.
    pub quota: u64,
    /// Pastes (and abandoned partial uploads) older than this are removed.
    pub max_age: Duration,
    /// An upload stream that sends nothing for this long is cut (its part stays to resume
    /// from) and its share of the quota freed.
    pub idle_timeout: Duration,
}

/// Why a paste was refused or failed; `code` and `message` go to the page as they are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PasteError {
    pub code: UploadErrorCode,
    pub message: String,
}

impl PasteError {
    pub fn new(code: UploadErrorCode, message: impl Into<String>) -> Self {
        PasteError { code, message: message.into() }
    }

    pub(super) fn io(what: &str, e: std::io::Error) -> Self {
        PasteError::new(UploadErrorCode::Io, format!("{what}: {e}"))
    }
}

/// What the store holds of one hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Have {
    /// Published at this absolute path.
    Complete(PathBuf),
    /// This many bytes of an interrupted upload (0: nothing).
    Partial(u64),
}

/// Sizes in MiB for humans.
fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1024.0 * 1024.0);
    if m >= 10.0 { format!("{m:.0} MiB") } else { format!("{m:.1} MiB") }
}

/// `.png`, `.jpg`, … from the first bytes; `bin` when nothing matches.
pub fn magic_extension(head: &[u8]) -> &'static str {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        "png"
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        "jpg"
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        "gif"
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        "webp"
    } else if head.starts_with(b"%PDF-") {
        "pdf"
    } else {
        "bin"
    }
}

/// Keeps the first [`HEAD_LEN`] bytes seen.
pub(super) fn take_head(head: &mut Vec<u8>, bytes: &[u8]) {
    if head.len() < HEAD_LEN {
        let take = (HEAD_LEN - head.len()).min(bytes.len());
        head.extend_from_slice(&bytes[..take]);
    }
}

/// The paste directory.
#[derive(Debug)]
pub struct PasteStore {
    dir: PathBuf,
    limits: PasteLimits,
    /// Uploads under way, by hash: a newer upload of the same content (the page reconnected
    /// while the old stream has not noticed yet) cancels the older one and waits for its lock.
    active: Mutex<HashMap<String, Active>>,
    /// Admitted uploads still under way, by hash: the size each announced, counted against the
    /// quota from admission on (their part files are not counted besides). Admission takes this
    /// lock for its whole check, so two uploads that each fit but not together cannot both pass.
    reserved: Mutex<HashMap<String, u64>>,
}

/// An admitted upload's share of the quota, given back when it is dropped (finished, failed,
/// cut, or superseded).
#[derive(Debug)]
pub struct Reservation {
    store: Arc<PasteStore>,
    hash: String,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.store.reserved.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.hash);
    }
}

impl PasteStore {
    /// Creates (0700) or tightens `dir`, then removes expired pastes.
    pub fn open(dir: &Path, limits: PasteLimits) -> Result<PasteStore, crate::state::StateError> {
        crate::state::ensure_private_dir(dir, crate::state::DirRole::Paste)?;
        // Absolute, so the path typed into the terminal works from any working directory.
        let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let store = PasteStore {
            dir,
            limits,
            active: Mutex::new(HashMap::new()),
            reserved: Mutex::new(HashMap::new()),
        };
        store.cleanup(SystemTime::now());
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn limits(&self) -> PasteLimits {
        self.limits
    }

    fn part_path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!("{hash}.part"))
    }

    /// Deletes `<hash>.part` (its bytes cannot be the announced content).
    pub fn remove_part(&self, hash: &str) {
        let _ = fs::remove_file(self.part_path(hash));
    }

    /// What is held of `hash` (a SHA-256 in `relay_proto::Sha256`'s form: the only thing that names a file here).
    pub fn have(&self, hash: &str) -> Have {
        for ext in EXTENSIONS {
            let p = self.dir.join(format!("{hash}.{ext}"));
            if p.is_file() {
                return Have::Complete(p);
            }
        }
        Have::Partial(fs::metadata(self.part_path(hash)).map(|m| m.len()).unwrap_or(0))
    }

    /// Removes pastes and partial uploads last modified before `now - max_age`; returns how many.
    pub fn cleanup(&self, now: SystemTime) -> usize {
        let Some(cutoff) = now.checked_sub(self.limits.max_age) else { return 0 };
        let mut removed = 0;
        for (path, meta) in self.entries() {
            if meta.modified().is_ok_and(|m| m < cutoff) && fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::info!(removed, "removed expired pastes");
        }
        removed
    }

    /// Bytes the directory holds (complete and partial pastes).
    pub fn usage(&self) -> u64 {
        self.entries().iter().map(|(_, m)| m.len()).sum()
    }

    /// Our own files only: `<hash>.<known ext>` and `<hash>.part`.
    fn entries(&self) -> Vec<(PathBuf, fs::Metadata)> {
        let Ok(rd) = fs::read_dir(&self.dir) else { return Vec::new() };
        rd.filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.split_once('.').is_some_and(|(h, ext)| {
                    tern::relay_proto::Sha256::is_valid(h)
                        && (ext == "part" || EXTENSIONS.contains(&ext))
                })
            })
            .filter_map(|e| Some((e.path(), e.metadata().ok().filter(|m| m.is_file())?)))
            .collect()
    }

    /// Admits a paste of `hash`, `size` bytes, of which `held` are already here (its part file),
    /// and reserves its size against the quota until the returned reservation is dropped.
    pub fn reserve(
        self: &Arc<Self>,
        hash: &str,
        size: u64,
        held: u64,
    ) -> Result<Reservation, PasteError> {
        let mut reserved = self.reserved.lock().unwrap_or_else(|e| e.into_inner());
        // The part files of uploads under way count through their reservations; this one's own
        // part is `held`, which the check subtracts.
        let parts_under_way: u64 = reserved
            .keys()
            .filter(|h| h.as_str() != hash)
            .filter_map(|h| fs::metadata(self.part_path(h)).ok())
            .map(|m| m.len())
            .sum();
        let others: u64 = reserved.iter().filter(|(h, _)| h.as_str() != hash).map(|(_, n)| n).sum();
        self.admit_with(size, held, others, parts_under_way)?;
        reserved.insert(hash.to_owned(), size);
        Ok(Reservation { store: Arc::clone(self), hash: hash.to_owned() })
    }

    /// Whether a paste of `size` bytes, of which `held` are already here, may start.
    pub fn admit(&self, size: u64, held: u64) -> Result<(), PasteError> {
        self.admit_with(size, held, 0, 0)
    }

    /// [`PasteStore::admit`] with `reserved` bytes promised to uploads under way, whose part
    /// files (`parts_under_way` bytes) are therefore not counted again.
    fn admit_with(
        &self,
        size: u64,
        held: u64,
        reserved: u64,
        parts_under_way: u64,
    ) -> Result<(), PasteError> {
        let l = self.limits;
        if size == 0 {
            return Err(PasteError::new(UploadErrorCode::BadRequest, "an empty paste"));
        }
        if size > l.max_size {
            return Err(PasteError::new(
                UploadErrorCode::TooLarge,
                format!("{} is over this relay's paste limit of {}", mib(size), mib(l.max_size)),
            ));
        }
        let usage = self.usage().saturating_sub(parts_under_way).saturating_add(reserved);
        let need = usage.saturating_sub(held).saturating_add(size);
        if need > l.quota {
            return Err(PasteError::new(
                UploadErrorCode::QuotaExceeded,
                format!(
                    "the paste directory holds {} of its {} quota; {} more does not fit \
                     (old pastes are removed after {} h)",
                    mib(usage),
                    mib(l.quota),
                    mib(size - held.min(size)),
                    l.max_age.as_secs() / 3600
                ),
            ));
        }
        Ok(())
    }

    /// Opens `<hash>.part` for appending (0600), truncating it to `keep` bytes.
    pub fn open_part(&self, hash: &str, keep: u64) -> Result<fs::File, PasteError> {
        let path = self.part_path(hash);
        let f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| PasteError::io("cannot open the partial paste", e))?;
        f.set_len(keep).map_err(|e| PasteError::io("cannot truncate the partial paste", e))?;
        Ok(f)
    }

    /// Checks the complete `.part` against `hash` and `size`, then renames it to its published
    /// name and returns that (absolute) path. A mismatch removes the part: resuming it could
    /// only reproduce the same wrong bytes. Blocking (reads the whole file).
    pub fn publish(&self, hash: &str, size: u64) -> Result<PathBuf, PasteError> {
        let (hasher, len, head) = self.hash_part(hash, u64::MAX)?;
        self.publish_hashed(hash, size, hasher, len, &head)
    }

    /// SHA-256 state, length and first 16 bytes of the first `limit` bytes of `<hash>.part`.
    /// Blocking.
    pub fn hash_part(&self, hash: &str, limit: u64) -> Result<(Sha256, u64, Vec<u8>), PasteError> {
        let f = fs::File::open(self.part_path(hash))
            .map_err(|e| PasteError::io("cannot read the paste", e))?;
        let mut f = f.take(limit);
        let mut hasher = Sha256::new();
        let mut head = Vec::with_capacity(HEAD_LEN);
        let mut buf = vec![0u8; 256 * 1024];
        let mut len = 0u64;
        loop {
            let n = f.read(&mut buf).map_err(|e| PasteError::io("cannot read the paste", e))?;
            if n == 0 {
                break;
            }
            take_head(&mut head, &buf[..n]);
            hasher.update(&buf[..n]);
            len += n as u64;
        }
        Ok((hasher, len, head))
    }

    /// Publishes `<hash>.part` whose `len` bytes hashed to `hasher` (hashed as they arrived, so
    /// the end of an upload costs no second read), or removes it on a mismatch.
    pub fn publish_hashed(
        &self,
        hash: &str,
        size: u64,
        hasher: Sha256,
        len: u64,
        head: &[u8],
    ) -> Result<PathBuf, PasteError> {
        let part = self.part_path(hash);
        let digest = tern::relay_proto::Sha256(hasher.finalize().into()).to_string();
        if len != size || digest != hash {
            let _ = fs::remove_file(&part);
            return Err(PasteError::new(
                UploadErrorCode::HashMismatch,
                format!("the relay received {len} bytes whose SHA-256 is not the announced one"),
            ));
        }
        let path = self.dir.join(format!("{hash}.{}", magic_extension(head)));
        fs::set_permissions(&part, fs::Permissions::from_mode(0o600))
            .map_err(|e| PasteError::io("cannot set the paste's mode", e))?;
        fs::rename(&part, &path).map_err(|e| PasteError::io("cannot publish the paste", e))?;
        Ok(path)
    }

    /// Registers an upload of `hash`, superseding an older one (which is cancelled), and waits
    /// until the older one has stopped writing the part file. The claim is released on drop.
    pub async fn claim(self: &Arc<Self>, hash: &str) -> Claim {
        let (generation, cancel, lock) = {
            let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
            let entry = active.entry(hash.to_string()).or_insert_with(|| Active {
                generation: 0,
                cancel: CancellationToken::new(),
                lock: Arc::new(tokio::sync::Mutex::new(())),
            });
            entry.cancel.cancel();
            entry.cancel = CancellationToken::new();
            entry.generation += 1;
            (entry.generation, entry.cancel.clone(), Arc::clone(&entry.lock))
        };
        let guard = lock.lock_owned().await;
        Claim { store: Arc::clone(self), hash: hash.to_string(), generation, cancel, _guard: guard }
    }

    fn release(&self, hash: &str, generation: u64) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        // Only the newest upload removes the entry; a superseded one leaves it to its successor.
        if active.get(hash).is_some_and(|a| a.generation == generation) {
            active.remove(hash);
        }
    }
}

/// The right to write `<hash>.part`, held by one upload at a time; a newer upload of the same
/// hash cancels [`Claim::cancelled`] and then waits for this to drop.
#[derive(Debug)]
pub struct Claim {
    store: Arc<PasteStore>,
    hash: String,
    generation: u64,
    cancel: CancellationToken,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl Claim {
    /// Completes when a newer upload of the same hash takes over.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.store.release(&self.hash, self.generation);
    }
}

/// One upload under way.
#[derive(Debug)]
struct Active {
    generation: u64,
    cancel: CancellationToken,
    /// Held while the part file is written: a successor waits for its predecessor to stop.
    lock: Arc<tokio::sync::Mutex<()>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR not really a picture";

    fn sha(bytes: &[u8]) -> String {
        tern::relay_proto::Sha256(Sha256::digest(bytes).into()).to_string()
    }

    fn limits() -> PasteLimits {
        PasteLimits {
            max_size: 1000,
            quota: 2500,
            max_age: Duration::from_secs(3600),
            idle_timeout: Duration::from_secs(30),
        }
    }

    fn store(dir: &Path) -> PasteStore {
        PasteStore::open(&dir.join("pastes"), limits()).unwrap()
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// Writes `bytes` (from `from`) to the part file and publishes it, as an upload would.
    fn put(s: &PasteStore, bytes: &[u8]) -> Result<PathBuf, PasteError> {
        let hash = sha(bytes);
        s.admit(bytes.len() as u64, 0)?;
        let mut f = s.open_part(&hash, 0)?;
        f.write_all(bytes).unwrap();
        drop(f);
        s.publish(&hash, bytes.len() as u64)
    }

    #[test]
    fn published_files_are_private_and_named_by_hash_and_magic() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        assert_eq!(mode(s.dir()), 0o700);
        assert!(s.dir().is_absolute());
        let path = put(&s, PNG).unwrap();
        assert_eq!(path, s.dir().join(format!("{}.png", sha(PNG))));
        assert_eq!(mode(&path), 0o600);
        assert_eq!(fs::read(&path).unwrap(), PNG);
        assert_eq!(s.have(&sha(PNG)), Have::Complete(path));
        for (bytes, ext) in [
            (&b"\xff\xd8\xff\xe0 jfif"[..], "jpg"),
            (b"GIF89a....", "gif"),
            (b"RIFF\0\0\0\0WEBPVP8 ", "webp"),
            (b"%PDF-1.7\n", "pdf"),
            (b"#!/bin/sh\nrm -rf /\n", "bin"),
        ] {
            let p = put(&s, bytes).unwrap();
            assert_eq!(p.extension().unwrap(), ext, "{bytes:?}");
        }
    }

    #[test]
    fn a_hash_mismatch_is_rejected_and_the_part_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let claimed = sha(b"something else");
        let mut f = s.open_part(&claimed, 0).unwrap();
        f.write_all(PNG).unwrap();
        drop(f);
        let e = s.publish(&claimed, PNG.len() as u64).unwrap_err();
        assert_eq!(e.code, UploadErrorCode::HashMismatch);
        assert_eq!(s.have(&claimed), Have::Partial(0));
        assert!(fs::read_dir(s.dir()).unwrap().next().is_none(), "nothing published");
    }

    #[test]
    fn a_partial_upload_is_the_resume_offset() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let hash = sha(PNG);
        let mut f = s.open_part(&hash, 0).unwrap();
        f.write_all(&PNG[..10]).unwrap();
        drop(f);
        assert_eq!(mode(&s.part_path(&hash)), 0o600);
        assert_eq!(s.have(&hash), Have::Partial(10));
        // Resuming appends after what is held.
        let mut f = s.open_part(&hash, 10).unwrap();
        f.write_all(&PNG[10..]).unwrap();
        drop(f);
        assert!(s.publish(&hash, PNG.len() as u64).is_ok());
        // A part reopened with a shorter `keep` is cut back (the relay distrusts the excess).
        let mut f = s.open_part(&sha(b"x"), 0).unwrap();
        f.write_all(b"abcdef").unwrap();
        drop(f);
        drop(s.open_part(&sha(b"x"), 2).unwrap());
        assert_eq!(s.have(&sha(b"x")), Have::Partial(2));
    }

    #[test]
    fn size_limit_and_quota_refuse_with_clear_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let e = s.admit(1001, 0).unwrap_err();
        assert_eq!(e.code, UploadErrorCode::TooLarge);
        assert!(e.message.contains("paste limit"), "{}", e.message);
        assert_eq!(s.admit(0, 0).unwrap_err().code, UploadErrorCode::BadRequest);
        put(&s, &[1u8; 1000]).unwrap();
        put(&s, &[2u8; 1000]).unwrap();
        let e = s.admit(600, 0).unwrap_err();
        assert_eq!(e.code, UploadErrorCode::QuotaExceeded);
        assert!(e.message.contains("quota"), "{}", e.message);
        // What is already held of this paste does not count twice.
        s.admit(600, 200).unwrap();
        s.admit(500, 0).unwrap();
    }

    #[test]
    fn admitted_uploads_hold_their_share_of_the_quota_until_they_end() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Arc::new(store(tmp.path()));
        put(&s, &[1u8; 1000]).unwrap();
        // 1500 left: two uploads of 800 each fit alone, not together.
        let first = s.reserve(&sha(b"a"), 800, 0).unwrap();
        let e = s.reserve(&sha(b"b"), 800, 0).unwrap_err();
        assert_eq!(e.code, UploadErrorCode::QuotaExceeded, "{}", e.message);
        // The first one's part file as it grows is not counted on top of its reservation.
        drop(s.open_part(&sha(b"a"), 0).unwrap());
        std::fs::write(s.part_path(&sha(b"a")), [0u8; 700]).unwrap();
        s.reserve(&sha(b"c"), 700, 0).map(drop).unwrap();
        drop(first);
        std::fs::remove_file(s.part_path(&sha(b"a"))).unwrap();
        s.reserve(&sha(b"b"), 800, 0).expect("freed when the first ends");
    }

    #[test]
    fn old_pastes_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let old = put(&s, PNG).unwrap();
        let young = put(&s, b"young").unwrap();
        let stranger = s.dir().join("notes.txt");
        fs::write(&stranger, b"not ours").unwrap();
        let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
        fs::File::options().append(true).open(&old).unwrap().set_modified(two_hours_ago).unwrap();
        fs::File::options()
            .append(true)
            .open(&stranger)
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
        assert_eq!(s.cleanup(SystemTime::now()), 1);
        assert!(!old.exists());
        assert!(young.exists());
        assert!(stranger.exists(), "files the relay did not write are left alone");
    }

    #[tokio::test]
    async fn a_newer_upload_of_the_same_hash_takes_over_once_the_older_stops() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Arc::new(store(tmp.path()));
        let hash = sha(PNG);
        let older = s.claim(&hash).await;
        let newer = tokio::spawn({
            let (s, hash) = (Arc::clone(&s), hash.clone());
            async move { s.claim(&hash).await }
        });
        tokio::time::timeout(Duration::from_secs(5), older.cancelled())
            .await
            .expect("the older upload is told to stop");
        tokio::task::yield_now().await;
        assert!(!newer.is_finished(), "the newer one waits while the older holds the part");
        drop(older);
        let newer = tokio::time::timeout(Duration::from_secs(5), newer).await.unwrap().unwrap();
        let active = |s: &PasteStore| s.active.lock().unwrap().contains_key(&hash);
        assert!(active(&s), "the superseded claim's release left the newer one registered");
        drop(newer);
        assert!(!active(&s));
    }

    #[test]
    fn hashes_are_validated() {
        let valid = tern::relay_proto::Sha256::is_valid;
        assert!(valid(&sha(b"")));
        assert!(!valid(&sha(b"").to_uppercase()));
        assert!(!valid("../../etc/passwd"));
        assert!(!valid(&format!("{}/", &sha(b"")[..63])));
    }
}
