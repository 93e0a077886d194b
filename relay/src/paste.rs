//! Pasted files: the paste directory (store) and the upload stream protocol (one bidirectional
//! WebTransport stream per upload).
//!
//! ```text
//!  page ─ {"hash","size","mime"}\n ─▶ relay        (header line, at most 1024 bytes)
//!  page ◀─ {"have":N} ─ relay                        (what it holds: resume from N)
//!     or ◀─ {"have":size,"path":P}                   (already complete: nothing is sent)
//!  page ─ raw bytes N..size ─▶ relay
//!  page ◀─ {"acked":M,"relay_time_us":T} …           (at most one per 5 ms, within 20 ms of data)
//!  page ◀─ {"path":P} | {"error":CODE,"message":…}   (last line; the relay finishes the stream)
//! ```
//!
//! On disk: `<dir>/<sha256>.part` while incomplete (its length is the resume offset), then,
//! once the SHA-256 of the whole file matches, `<dir>/<sha256>.<ext>` with the extension from
//! the content's magic bytes (never from anything the client says). Directory 0700, files 0600.
//! Files older than the maximum age are removed; the directory's total is capped by a quota.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;
use wtransport::{RecvStream, SendStream};

/// Longest header line, newline included.
pub const MAX_HEADER: usize = 1024;
/// Acks are coalesced to at most one per this interval...
pub const ACK_COALESCE: Duration = Duration::from_millis(5);
/// ...and data never waits longer than this for its ack (the sender's window may be only two
/// chunks: it must not wait for a third before hearing about the first).
pub const ACK_DEADLINE: Duration = Duration::from_millis(20);
/// How much is read from the stream at once.
const READ_BUF: usize = 64 * 1024;
/// Extensions of published pastes (from [`magic_extension`]).
const EXTENSIONS: [&str; 6] = ["png", "jpg", "gif", "webp", "pdf", "bin"];

/// The relay's monotonic clock for ack timestamps: microseconds since the first use.
fn relay_time_us() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// Limits of the paste directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasteLimits {
    /// Largest single paste in bytes.
    pub max_size: u64,
    /// Largest total of the directory (complete and partial pastes) in bytes.
    pub quota: u64,
    /// Pastes (and abandoned partial uploads) older than this are removed.
    pub max_age: Duration,
}

/// Why a paste was refused or failed; `code` goes to the page as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PasteError {
    pub code: &'static str,
    pub message: String,
}

impl PasteError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        PasteError { code, message: message.into() }
    }
    fn io(what: &str, e: std::io::Error) -> Self {
        PasteError::new("io", format!("{what}: {e}"))
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

/// Keeps the first 16 bytes seen (enough for every magic number we know).
fn take_head(head: &mut Vec<u8>, bytes: &[u8]) {
    if head.len() < 16 {
        let take = (16 - head.len()).min(bytes.len());
        head.extend_from_slice(&bytes[..take]);
    }
}

/// A SHA-256 in lowercase hex: the only thing that names a file here.
pub fn valid_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The paste directory.
#[derive(Debug)]
pub struct PasteStore {
    dir: PathBuf,
    limits: PasteLimits,
    /// Uploads under way, by hash: a newer upload of the same content (the page reconnected
    /// while the old stream has not noticed yet) cancels the older one and waits for its lock.
    active: Mutex<HashMap<String, Active>>,
}

impl PasteStore {
    /// Creates (0700) or tightens `dir`, then removes expired pastes.
    pub fn open(dir: &Path, limits: PasteLimits) -> Result<PasteStore, crate::state::StateError> {
        crate::state::ensure_private_dir(dir)?;
        // Absolute, so the path typed into the terminal works from any working directory.
        let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let store = PasteStore { dir, limits, active: Mutex::new(HashMap::new()) };
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

    /// What is held of `hash` (which must be [`valid_hash`]).
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
                    valid_hash(h) && (ext == "part" || EXTENSIONS.contains(&ext))
                })
            })
            .filter_map(|e| Some((e.path(), e.metadata().ok().filter(|m| m.is_file())?)))
            .collect()
    }

    /// Whether a paste of `size` bytes, of which `held` are already here, may start.
    pub fn admit(&self, size: u64, held: u64) -> Result<(), PasteError> {
        let l = self.limits;
        if size == 0 {
            return Err(PasteError::new("bad_request", "an empty paste"));
        }
        if size > l.max_size {
            return Err(PasteError::new(
                "too_large",
                format!("{} is over this relay's paste limit of {}", mib(size), mib(l.max_size)),
            ));
        }
        let usage = self.usage();
        let need = usage.saturating_sub(held).saturating_add(size);
        if need > l.quota {
            return Err(PasteError::new(
                "quota_exceeded",
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
        let mut head = Vec::with_capacity(16);
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
        let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
        if len != size || digest != hash {
            let _ = fs::remove_file(&part);
            return Err(PasteError::new(
                "hash_mismatch",
                format!("the relay received {len} bytes whose SHA-256 is not the announced one"),
            ));
        }
        let path = self.dir.join(format!("{hash}.{}", magic_extension(head)));
        fs::set_permissions(&part, fs::Permissions::from_mode(0o600))
            .map_err(|e| PasteError::io("cannot set the paste's mode", e))?;
        fs::rename(&part, &path).map_err(|e| PasteError::io("cannot publish the paste", e))?;
        Ok(path)
    }

    /// Registers an upload of `hash`, superseding an older one (which is cancelled); the guard
    /// must be held while writing the part file. Returns the generation to [`release`] with.
    async fn take_over(
        self: &Arc<Self>,
        hash: &str,
    ) -> (u64, CancellationToken, tokio::sync::OwnedMutexGuard<()>) {
        let (generation, token, lock) = {
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
        (generation, token, lock.lock_owned().await)
    }

    fn release(&self, hash: &str, generation: u64) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        // Only the newest upload removes the entry; a superseded one leaves it to its successor.
        if active.get(hash).is_some_and(|a| a.generation == generation) {
            active.remove(hash);
        }
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

/// The header line that opens an upload stream.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UploadHeader {
    /// SHA-256 of the whole content, lowercase hex.
    pub hash: String,
    /// Size of the whole content in bytes.
    pub size: u64,
    /// The browser's idea of the type; logged only (the extension comes from magic bytes).
    #[serde(default)]
    pub mime: Option<String>,
}

/// Relay → page lines on an upload stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
enum Reply {
    Have {
        have: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    Ack {
        acked: u64,
        relay_time_us: u64,
    },
    Path {
        path: String,
    },
    Error {
        error: &'static str,
        message: String,
    },
}

impl Reply {
    fn line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).expect("replies always serialize");
        v.push(b'\n');
        v
    }
}

/// Reads the header line; bytes after the newline are returned as the start of the content.
async fn read_header(recv: &mut RecvStream) -> Result<(UploadHeader, Vec<u8>), PasteError> {
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(at) = buf.iter().position(|&b| b == b'\n') {
            let rest = buf.split_off(at + 1);
            let header: UploadHeader = serde_json::from_slice(&buf[..at])
                .map_err(|e| PasteError::new("bad_request", format!("bad upload header: {e}")))?;
            return Ok((header, rest));
        }
        if buf.len() >= MAX_HEADER {
            return Err(PasteError::new("bad_request", "upload header over 1024 bytes"));
        }
        match recv.read(&mut chunk).await {
            Ok(Some(n)) => buf.extend_from_slice(&chunk[..n]),
            Ok(None) | Err(_) => {
                return Err(PasteError::new("bad_request", "stream ended before the header"));
            }
        }
    }
}

/// Serves one upload stream. `store` is `None` when pasting is not available (bridge mode
/// without `--paste-dir`): the page is told so.
pub(crate) async fn serve_upload(
    store: Option<Arc<PasteStore>>,
    mut send: SendStream,
    mut recv: RecvStream,
) {
    let result = match store {
        None => Err(PasteError::new(
            "paste_unavailable",
            "pasting files is not available: this relay runs in bridge mode without --paste-dir",
        )),
        Some(store) => upload(&store, &mut send, &mut recv).await,
    };
    let last = match result {
        Ok(Some(path)) => Reply::Path { path },
        Ok(None) => return, // the page went away or a newer upload took over
        Err(e) => {
            tracing::info!(code = e.code, "paste refused: {}", e.message);
            Reply::Error { error: e.code, message: e.message }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        send.write_all(&last.line()).await?;
        send.finish().await
    })
    .await;
}

fn path_string(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `Ok(Some(path))`: published. `Ok(None)`: stream gone or superseded (the part stays).
async fn upload(
    store: &Arc<PasteStore>,
    send: &mut SendStream,
    recv: &mut RecvStream,
) -> Result<Option<String>, PasteError> {
    let (header, mut pending) = read_header(recv).await?;
    if !valid_hash(&header.hash) {
        return Err(PasteError::new("bad_request", "hash must be 64 lowercase hex digits"));
    }
    let hash = header.hash.clone();
    let size = header.size;
    store.cleanup(SystemTime::now());
    if let Have::Complete(path) = store.have(&hash) {
        // A repeat paste: nothing to send. Touch it so age cleanup counts from the last use.
        let _ = fs::File::options()
            .append(true)
            .open(&path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        let reply = Reply::Have { have: size, path: Some(path_string(&path)) };
        let _ = send.write_all(&reply.line()).await;
        let _ = send.finish().await;
        return Ok(None);
    }
    let (generation, cancel, _guard) = store.take_over(&hash).await;
    let result = receive(store, send, recv, &hash, size, &mut pending, &cancel).await;
    store.release(&hash, generation);
    result
}

#[allow(clippy::too_many_arguments)]
async fn receive(
    store: &Arc<PasteStore>,
    send: &mut SendStream,
    recv: &mut RecvStream,
    hash: &str,
    size: u64,
    pending: &mut Vec<u8>,
    cancel: &CancellationToken,
) -> Result<Option<String>, PasteError> {
    let mut held = match store.have(hash) {
        Have::Partial(n) => n,
        Have::Complete(path) => return Ok(Some(path_string(&path))),
    };
    if held > size {
        // Not a prefix of this content (or a wrong size announced before): start over.
        held = 0;
    }
    store.admit(size, held)?;
    let file = store.open_part(hash, held)?;
    // Hash as the bytes arrive; a resumed upload first hashes what is already here.
    let (mut hasher, mut head) = if held > 0 {
        let (s2, h) = (Arc::clone(store), hash.to_string());
        let (hasher, len, head) = tokio::task::spawn_blocking(move || s2.hash_part(&h, held))
            .await
            .map_err(|e| PasteError::new("internal", format!("hashing task failed: {e}")))??;
        if len != held {
            return Err(PasteError::new("io", "the partial paste changed while reading it"));
        }
        (hasher, head)
    } else {
        (Sha256::new(), Vec::new())
    };
    let mut file = tokio::fs::File::from_std(file);
    if send.write_all(&Reply::Have { have: held, path: None }.line()).await.is_err() {
        return Ok(None);
    }
    tracing::info!(hash = &hash[..12], size, resume_from = held, "paste upload");
    let mut count = held;
    let mut acked = held;
    let mut last_read_us = relay_time_us();
    let mut last_ack_at = Instant::now() - ACK_COALESCE;
    let mut buf = vec![0u8; READ_BUF];
    // Bytes that came with the header.
    let mut first = std::mem::take(pending);
    loop {
        if count >= size {
            break;
        }
        // Coalesce: ack now if the last ack is ACK_COALESCE old, else when it will be.
        let ack_due = (acked < count).then(|| last_ack_at + ACK_COALESCE);
        let n = if !first.is_empty() {
            let n = first.len();
            buf[..n].copy_from_slice(&first);
            first.clear();
            Some(n)
        } else {
            tokio::select! {
                _ = cancel.cancelled() => return Ok(None),
                _ = tokio::time::sleep_until(ack_due.unwrap_or_else(Instant::now).into()), if ack_due.is_some() => {
                    if send.write_all(&Reply::Ack { acked: count, relay_time_us: last_read_us }.line()).await.is_err() {
                        return Ok(None);
                    }
                    acked = count;
                    last_ack_at = Instant::now();
                    continue;
                }
                r = recv.read(&mut buf) => match r {
                    Ok(Some(n)) => Some(n),
                    // Interrupted: what was written stays as the resume point.
                    Ok(None) | Err(_) => None,
                }
            }
        };
        let Some(n) = n else {
            let _ = file.flush().await;
            return Ok(None);
        };
        last_read_us = relay_time_us();
        if count + n as u64 > size {
            drop(file);
            let _ = fs::remove_file(store.part_path(hash));
            return Err(PasteError::new(
                "size_mismatch",
                format!("more than the announced {size} bytes arrived"),
            ));
        }
        file.write_all(&buf[..n]).await.map_err(|e| PasteError::io("cannot write the paste", e))?;
        hasher.update(&buf[..n]);
        take_head(&mut head, &buf[..n]);
        count += n as u64;
        if last_ack_at.elapsed() >= ACK_COALESCE && count < size {
            if send
                .write_all(&Reply::Ack { acked: count, relay_time_us: last_read_us }.line())
                .await
                .is_err()
            {
                return Ok(None);
            }
            acked = count;
            last_ack_at = Instant::now();
        }
    }
    // No fsync: the bytes were verified as they arrived, and a relay killed now still leaves
    // them in the page cache; only a power cut could lose them (then the hash check catches it).
    file.flush().await.map_err(|e| PasteError::io("cannot write the paste", e))?;
    drop(file);
    // The last ack: the sender's pacer finishes on it; verification follows.
    let _ = send.write_all(&Reply::Ack { acked: count, relay_time_us: last_read_us }.line()).await;
    let path = store.publish_hashed(hash, size, hasher, count, &head)?;
    tracing::info!(hash = &hash[..12], size, "paste published");
    Ok(Some(path_string(&path)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR not really a picture";

    fn sha(bytes: &[u8]) -> String {
        Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    fn limits() -> PasteLimits {
        PasteLimits { max_size: 1000, quota: 2500, max_age: Duration::from_secs(3600) }
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
        assert_eq!(e.code, "hash_mismatch");
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
        assert_eq!(e.code, "too_large");
        assert!(e.message.contains("paste limit"), "{}", e.message);
        assert_eq!(s.admit(0, 0).unwrap_err().code, "bad_request");
        put(&s, &[1u8; 1000]).unwrap();
        put(&s, &[2u8; 1000]).unwrap();
        let e = s.admit(600, 0).unwrap_err();
        assert_eq!(e.code, "quota_exceeded");
        assert!(e.message.contains("quota"), "{}", e.message);
        // What is already held of this paste does not count twice.
        s.admit(600, 200).unwrap();
        s.admit(500, 0).unwrap();
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

    #[test]
    fn hashes_are_validated() {
        assert!(valid_hash(&sha(b"")));
        assert!(!valid_hash(&sha(b"").to_uppercase()));
        assert!(!valid_hash("../../etc/passwd"));
        assert!(!valid_hash(&format!("{}/", &sha(b"")[..63])));
    }
}
