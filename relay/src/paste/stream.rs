//! One upload stream: read the header, say what is held, take the content while acknowledging
//! it, publish, and send the last line.
//!
//! The timing of acks is [`AckPolicy`]'s (the core's, so the page's pacer and the relay agree on
//! it); [`Progress`] applies it to the relay's clock without doing I/O, [`Receiver`] adds the
//! part file and the hash, and [`Receiver::run`] is the loop that feeds both from the stream.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use tern::relay_proto::line::{LineBuffer, Message, decode};
use tern::relay_proto::upload::{
    AckPolicy, MAX_HEADER, UploadErrorCode, UploadHeader, UploadReply,
};
use tern::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::link::{RecvHalf as RecvStream, SendHalf as SendStream};
use crate::spawn::ssh::{SshHost, SshHosts};

use super::store::{Claim, HEAD_LEN, Have, PasteError, PasteStore, Reservation, take_head};

/// How much is read from the stream at once.
const READ_BUF: usize = 64 * 1024;
/// How long the last line may take to reach the page before the stream is given up.
const LAST_LINE_LINGER: Duration = Duration::from_secs(2);

/// The origin of the relay's clock for acks.
fn origin() -> std::time::Instant {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    *START.get_or_init(std::time::Instant::now)
}

/// The relay's monotonic clock for ack timestamps: microseconds since the first use.
fn relay_time_us() -> u64 {
    u64::try_from(origin().elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Now, on the relay's ack clock, as the core's [`AckPolicy`] wants it.
fn relay_now() -> Instant {
    Instant::from_micros(relay_time_us())
}

/// A point of the ack clock as a tokio deadline.
fn deadline(at: Instant) -> tokio::time::Instant {
    (origin() + Duration::from_micros(at.as_micros())).into()
}

fn bad_request(message: impl Into<String>) -> PasteError {
    PasteError::new(UploadErrorCode::BadRequest, message)
}

/// Where a published paste goes last: `None` when the session's shell runs on the relay's
/// machine, else its ssh host (the file is copied there and the host's path is typed).
pub(crate) type Onward = Option<(Arc<SshHosts>, SshHost)>;

/// The path the person's shell sees for the published `path`: the relay's own, or the copy's
/// on the session's ssh host.
async fn deliver(onward: &Onward, path: &Path) -> Result<String, PasteError> {
    match onward {
        None => Ok(path_string(path)),
        Some((hosts, host)) => hosts.deliver(host, path).await.map_err(|e| {
            PasteError::new(UploadErrorCode::Io, format!("copying the paste to {host}: {e}"))
        }),
    }
}

/// Serves one upload stream. `store` is `None` when pasting is not available (bridge mode
/// without `--paste-dir`): the page is told so.
/// `header` is the stream's first line as read by the caller, with the bytes after it (or why it
/// could not be read: the page is told).
pub(crate) async fn serve_upload(
    store: Option<Arc<PasteStore>>,
    onward: Onward,
    mut send: SendStream,
    mut recv: RecvStream,
    header: Result<(UploadHeader, Vec<u8>), PasteError>,
) {
    let result = match store {
        None => Err(PasteError::new(
            UploadErrorCode::PasteUnavailable,
            "pasting files is not available: this relay runs in bridge mode without --paste-dir",
        )),
        Some(store) => match upload(&store, &onward, &mut send, &mut recv, header).await {
            Ok(Some(path)) => deliver(&onward, Path::new(&path)).await.map(Some),
            other => other,
        },
    };
    let last = match result {
        Ok(Some(path)) => UploadReply::Path { path },
        Ok(None) => return, // the page went away, a newer upload took over, or a repeat
        Err(e) => {
            tracing::info!(code = e.code.as_str(), "paste refused: {}", e.message);
            UploadReply::Error { error: e.code, message: e.message }
        }
    };
    let _ = tokio::time::timeout(LAST_LINE_LINGER, async {
        send.write_all(&last.to_line()).await?;
        send.finish().await
    })
    .await;
}

fn path_string(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `Ok(Some(path))`: published. `Ok(None)`: done already (a repeat, answered here), or the
/// stream is gone or superseded (the part stays).
async fn upload(
    store: &Arc<PasteStore>,
    onward: &Onward,
    send: &mut SendStream,
    recv: &mut RecvStream,
    header: Result<(UploadHeader, Vec<u8>), PasteError>,
) -> Result<Option<String>, PasteError> {
    let (header, first) = header?;
    if !tern::relay_proto::Sha256::is_valid(&header.hash) {
        return Err(bad_request("hash must be 64 lowercase hex digits"));
    }
    store.cleanup(SystemTime::now());
    if let Have::Complete(path) = store.have(&header.hash) {
        let shown = deliver(onward, &path).await?;
        repeat(send, &path, &shown, header.size).await;
        return Ok(None);
    }
    let claim = store.claim(&header.hash).await;
    if header.eager {
        // The bytes behind an eager header start at 0: with a part held they are not the
        // next ones. Say what is held and read nothing more; the page resumes on a new stream.
        if let Have::Partial(n) = store.have(&header.hash) {
            let held = resume_point(n, header.size);
            if held > 0 {
                let reply = UploadReply::Have { have: held, path: None };
                let _ = send.write_all(&reply.to_line()).await;
                let _ = send.finish().await;
                return Ok(None);
            }
        }
    }
    let receiver = match Receiver::start(store, header.hash, header.size).await? {
        Start::Complete(path) => return Ok(Some(path_string(&path))),
        Start::Receiving(r) => r,
    };
    let have = UploadReply::Have { have: receiver.progress.count, path: None };
    if send.write_all(&have.to_line()).await.is_err() {
        return Ok(None);
    }
    tracing::info!(
        hash = &receiver.hash[..12],
        size = receiver.progress.size,
        resume_from = receiver.progress.count,
        "paste upload"
    );
    receiver.run(send, recv, first, &claim).await
}

/// A repeat paste: nothing to send. Touches the file so age cleanup counts from the last use;
/// `shown` is the path the shell sees.
async fn repeat(send: &mut SendStream, path: &Path, shown: &str, size: u64) {
    let _ = std::fs::File::options()
        .append(true)
        .open(path)
        .and_then(|f| f.set_modified(SystemTime::now()));
    let reply = UploadReply::Have { have: size, path: Some(shown.to_owned()) };
    let _ = send.write_all(&reply.to_line()).await;
    let _ = send.finish().await;
}

/// Reads the header line (at most [`MAX_HEADER`] bytes); bytes after its newline are returned
/// as the start of the content.
#[cfg(test)]
pub(super) async fn read_header<R: AsyncRead + Unpin>(
    recv: &mut R,
) -> Result<(UploadHeader, Vec<u8>), PasteError> {
    read_first_line(recv).await
}

/// Reads the first line of a stream the page opened as message `T` (at most [`MAX_HEADER`]
/// bytes); bytes after its newline are returned as the start of the content.
pub(crate) async fn read_first_line<T: Message, R: AsyncRead + Unpin>(
    recv: &mut R,
) -> Result<(T, Vec<u8>), PasteError> {
    let mut lines = LineBuffer::new(MAX_HEADER);
    let mut chunk = [0u8; MAX_HEADER];
    loop {
        match lines.next_line() {
            Ok(Some(line)) => {
                let header =
                    decode(&line).map_err(|e| bad_request(format!("bad upload header: {e}")))?;
                return Ok((header, lines.take_rest()));
            }
            Ok(None) => {}
            Err(_) => return Err(bad_request(format!("upload header over {MAX_HEADER} bytes"))),
        }
        // Never more than `room()`: the buffer stays within MAX_HEADER.
        let want = lines.room();
        match recv.read(&mut chunk[..want]).await {
            Ok(n) if n > 0 => lines.push(&chunk[..n]),
            _ => return Err(bad_request("stream ended before the header")),
        }
    }
}

/// Where an upload starts: what the part holds, unless that is more than the announced size
/// (not a prefix of this content, or a wrong size announced before): then from scratch.
fn resume_point(held: u64, size: u64) -> u64 {
    if held > size { 0 } else { held }
}

/// How far an upload is and when to say so: [`AckPolicy`] on the relay's clock. No I/O.
#[derive(Debug)]
struct Progress {
    /// Bytes held (the resume point plus what arrived since).
    count: u64,
    size: u64,
    acks: AckPolicy,
    /// When the read that brought byte `count` happened: the acks' `relay_time_us`, so the
    /// page measures the rate on the relay's clock rather than by its own send times.
    last_read: Instant,
}

impl Progress {
    /// The page was told `held` in the `have` line; that needs no ack.
    fn new(held: u64, size: u64, now: Instant) -> Self {
        Progress { count: held, size, acks: AckPolicy::new(held), last_read: now }
    }

    fn received(&mut self, n: usize, now: Instant) {
        self.count += n as u64;
        self.last_read = now;
    }

    fn complete(&self) -> bool {
        self.count >= self.size
    }

    /// An ack to send now, if one is due. None once complete: the last ack goes with
    /// [`Progress::last_ack`], after the file is flushed.
    fn ack_if_due(&mut self, now: Instant) -> Option<UploadReply> {
        (!self.complete() && self.acks.ack_now(now, self.count)).then(|| self.ack(now))
    }

    /// When [`Progress::ack_if_due`] should be asked again; `None`: nothing is waiting.
    fn ack_deadline(&self) -> Option<Instant> {
        if self.complete() || !self.acks.pending(self.count) {
            return None;
        }
        // No ack sent yet: due at once.
        Some(self.acks.due(self.count).unwrap_or(Instant::ZERO))
    }

    /// The ack of everything: the page's pacer finishes on it; verification follows.
    fn last_ack(&mut self, now: Instant) -> UploadReply {
        self.ack(now)
    }

    fn ack(&mut self, now: Instant) -> UploadReply {
        self.acks.sent(now, self.count);
        UploadReply::Ack { acked: self.count, relay_time_us: self.last_read.as_micros() }
    }
}

/// What [`Receiver::start`] found once the upload held the hash's claim.
enum Start {
    /// Another upload of the same content finished meanwhile.
    Complete(std::path::PathBuf),
    Receiving(Box<Receiver>),
}

/// One upload taking content: the part file, the running hash, the progress.
struct Receiver {
    store: Arc<PasteStore>,
    hash: String,
    file: tokio::fs::File,
    hasher: Sha256,
    /// The first bytes of the content, for the extension.
    head: Vec<u8>,
    progress: Progress,
    /// Its share of the quota, from admission to its end.
    _reservation: Reservation,
    /// When content last arrived (or the upload started): `--paste-idle-timeout` counts from
    /// here.
    last_content: tokio::time::Instant,
}

/// What woke [`Receiver::run`] while it waited for content.
enum Wake {
    Read(usize),
    AckTimer,
    /// The stream ended or failed, or a newer upload took over.
    Stop,
    /// Nothing arrived for `--paste-idle-timeout`.
    Idle,
}

impl Receiver {
    /// Admits the upload, opens the part at the resume point and hashes what it already holds.
    async fn start(store: &Arc<PasteStore>, hash: String, size: u64) -> Result<Start, PasteError> {
        let held = match store.have(&hash) {
            Have::Partial(n) => resume_point(n, size),
            Have::Complete(path) => return Ok(Start::Complete(path)),
        };
        let reservation = store.reserve(&hash, size, held)?;
        let file = store.open_part(&hash, held)?;
        let (hasher, head) = hash_held(store, &hash, held).await?;
        Ok(Start::Receiving(Box::new(Receiver {
            store: Arc::clone(store),
            hash,
            file: tokio::fs::File::from_std(file),
            hasher,
            head,
            progress: Progress::new(held, size, relay_now()),
            _reservation: reservation,
            last_content: tokio::time::Instant::now(),
        })))
    }

    /// Takes content until `size` bytes are held, acking on the way; `first` came with the
    /// header. `Ok(None)`: the stream ended early or a newer upload took over.
    async fn run(
        mut self,
        send: &mut SendStream,
        recv: &mut RecvStream,
        first: Vec<u8>,
        claim: &Claim,
    ) -> Result<Option<String>, PasteError> {
        let mut pending = first;
        let mut buf = vec![0u8; READ_BUF];
        while !self.progress.complete() {
            if !pending.is_empty() {
                let bytes = std::mem::take(&mut pending);
                self.write_chunk(&bytes).await?;
            } else {
                match self.wait(recv, &mut buf, claim).await {
                    Wake::Read(n) => {
                        self.last_content = tokio::time::Instant::now();
                        self.write_chunk(&buf[..n]).await?;
                    }
                    Wake::AckTimer => {}
                    Wake::Stop => return Ok(self.stop().await),
                    Wake::Idle => {
                        let idle = self.store.limits().idle_timeout;
                        tracing::info!(
                            hash = &self.hash[..12],
                            "paste upload idle for {idle:?}: cut"
                        );
                        self.stop().await;
                        return Err(PasteError::new(
                            UploadErrorCode::BadRequest,
                            format!(
                                "nothing arrived for {} s: the upload was cut (pasting again \
                                 resumes it)",
                                idle.as_secs()
                            ),
                        ));
                    }
                }
            }
            let Some(ack) = self.progress.ack_if_due(relay_now()) else { continue };
            if send.write_all(&ack.to_line()).await.is_err() {
                return Ok(self.stop().await);
            }
        }
        self.finish(send).await.map(Some)
    }

    /// Waits for content, the ack timer, the end of the stream or a successor.
    async fn wait(&self, recv: &mut RecvStream, buf: &mut [u8], claim: &Claim) -> Wake {
        let timer = self.progress.ack_deadline();
        let idle_at = self.last_content + self.store.limits().idle_timeout;
        tokio::select! {
            _ = claim.cancelled() => Wake::Stop,
            _ = tokio::time::sleep_until(idle_at) => Wake::Idle,
            _ = tokio::time::sleep_until(deadline(timer.unwrap_or(Instant::ZERO))), if timer.is_some() => {
                Wake::AckTimer
            }
            r = recv.read(buf) => match r {
                Ok(0) | Err(_) => Wake::Stop,
                Ok(n) => Wake::Read(n),
            },
        }
    }

    /// Appends bytes to the part and the hash; more than the announced size deletes the part.
    async fn write_chunk(&mut self, bytes: &[u8]) -> Result<(), PasteError> {
        let now = relay_now();
        if self.progress.count + bytes.len() as u64 > self.progress.size {
            self.store.remove_part(&self.hash);
            return Err(PasteError::new(
                UploadErrorCode::SizeMismatch,
                format!("more than the announced {} bytes arrived", self.progress.size),
            ));
        }
        self.file
            .write_all(bytes)
            .await
            .map_err(|e| PasteError::io("cannot write the paste", e))?;
        self.hasher.update(bytes);
        take_head(&mut self.head, bytes);
        self.progress.received(bytes.len(), now);
        Ok(())
    }

    /// Interrupted: what was written stays as the resume point (flushed, so a successor
    /// waiting for the claim sees all of it).
    async fn stop(mut self) -> Option<String> {
        let _ = self.file.flush().await;
        None
    }

    /// Flushes, sends the last ack, verifies and publishes.
    async fn finish(mut self, send: &mut SendStream) -> Result<String, PasteError> {
        // No fsync: the bytes were verified as they arrived, and a relay killed now still leaves
        // them in the page cache; only a power cut could lose them (then the hash check catches
        // it on the next attempt).
        self.file.flush().await.map_err(|e| PasteError::io("cannot write the paste", e))?;
        drop(self.file);
        let _ = send.write_all(&self.progress.last_ack(relay_now()).to_line()).await;
        let (hash, size, count) = (&self.hash, self.progress.size, self.progress.count);
        let path = self.store.publish_hashed(hash, size, self.hasher, count, &self.head)?;
        tracing::info!(hash = &hash[..12], size, "paste published");
        Ok(path_string(&path))
    }
}

/// SHA-256 state and first bytes of the `held` bytes a resumed upload starts from.
async fn hash_held(
    store: &Arc<PasteStore>,
    hash: &str,
    held: u64,
) -> Result<(Sha256, Vec<u8>), PasteError> {
    if held == 0 {
        return Ok((Sha256::new(), Vec::with_capacity(HEAD_LEN)));
    }
    let (store, owned) = (Arc::clone(store), hash.to_string());
    let (hasher, len, head) =
        tokio::task::spawn_blocking(move || store.hash_part(&owned, held)).await.map_err(
            |e| PasteError::new(UploadErrorCode::Internal, format!("hashing task failed: {e}")),
        )??;
    if len != held {
        return Err(PasteError::new(
            UploadErrorCode::Io,
            "the partial paste changed while reading it",
        ));
    }
    Ok((hasher, head))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_line(size: u64) -> Vec<u8> {
        UploadHeader { hash: "ab".repeat(32), size, mime: Some("image/png".into()), eager: false }
            .to_line()
    }

    #[tokio::test]
    async fn header_reading_keeps_the_bytes_after_the_newline() {
        let mut bytes = header_line(9);
        bytes.extend_from_slice(b"\x89PNG rest");
        let (header, rest) = read_header(&mut &bytes[..]).await.unwrap();
        assert_eq!(header.size, 9);
        assert_eq!(header.mime.as_deref(), Some("image/png"));
        assert_eq!(rest, b"\x89PNG rest");
    }

    #[tokio::test]
    async fn header_and_content_split_anywhere_still_part_correctly() {
        let mut bytes = header_line(5);
        let at = bytes.len();
        bytes.extend_from_slice(b"hello");
        for cut in [1, at - 1, at, at + 2] {
            let (mut w, mut r) = tokio::io::duplex(4096);
            let (a, b) = bytes.split_at(cut);
            let (a, b) = (a.to_vec(), b.to_vec());
            let writer = tokio::spawn(async move {
                w.write_all(&a).await.unwrap();
                tokio::task::yield_now().await;
                w.write_all(&b).await.unwrap();
                w
            });
            let (header, mut rest) = read_header(&mut r).await.unwrap();
            let _w = writer.await.unwrap();
            // What did not come with the header line is still in the stream.
            let mut more = vec![0u8; 5 - rest.len()];
            r.read_exact(&mut more).await.unwrap();
            rest.extend(more);
            assert_eq!((header.size, rest.as_slice()), (5, &b"hello"[..]), "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn bad_headers_are_refused_without_quoting_them() {
        let long = vec![b' '; MAX_HEADER + 1];
        let e = read_header(&mut &long[..]).await.unwrap_err();
        assert_eq!(e.code, UploadErrorCode::BadRequest);
        assert!(e.message.contains("over 1024"), "{}", e.message);
        let e = read_header(&mut &b"{\"hash\":\"x\""[..]).await.unwrap_err();
        assert!(e.message.contains("ended before"), "{}", e.message);
        let e = read_header(&mut &b"{\"sekrit\":1}\n"[..]).await.unwrap_err();
        assert_eq!(e.code, UploadErrorCode::BadRequest);
        assert!(!e.message.contains("sekrit"), "{}", e.message);
    }

    fn ack(acked: u64, relay_time: Instant) -> Option<UploadReply> {
        Some(UploadReply::Ack { acked, relay_time_us: relay_time.as_micros() })
    }

    #[test]
    fn acks_go_at_once_then_at_most_every_5_ms_stamped_with_the_read_time() {
        let ms = Duration::from_millis;
        let t0 = Instant::from_millis(1000);
        let mut p = Progress::new(0, 100, t0);
        assert_eq!(p.ack_deadline(), None, "nothing received, nothing to ack");
        p.received(10, t0);
        assert_eq!(p.ack_if_due(t0), ack(10, t0), "the first ack goes at once");
        assert_eq!(p.ack_deadline(), None);
        p.received(10, t0 + ms(1));
        assert_eq!(p.ack_if_due(t0 + ms(1)), None, "coalesced");
        assert_eq!(p.ack_deadline(), Some(t0 + AckPolicy::COALESCE));
        p.received(10, t0 + ms(3));
        assert_eq!(p.ack_if_due(t0 + ms(4)), None);
        // The timer fires: everything so far, stamped with the last read's time.
        assert_eq!(p.ack_if_due(t0 + ms(5)), ack(30, t0 + ms(3)));
        // A read long after the last ack is acked at once.
        p.received(10, t0 + ms(50));
        assert_eq!(p.ack_if_due(t0 + ms(50)), ack(40, t0 + ms(50)));
        // Complete: no coalesced ack, the last ack carries everything.
        p.received(60, t0 + ms(51));
        assert!(p.complete());
        assert_eq!(p.ack_if_due(t0 + ms(60)), None);
        assert_eq!(p.ack_deadline(), None);
        assert_eq!(Some(p.last_ack(t0 + ms(52))), ack(100, t0 + ms(51)));
    }

    #[test]
    fn a_resumed_upload_acks_only_what_is_new() {
        let t0 = Instant::from_millis(7);
        let mut p = Progress::new(40, 100, t0);
        assert_eq!(p.ack_if_due(t0), None, "the have line told the page about 40");
        assert_eq!(p.ack_deadline(), None);
        p.received(1, t0);
        assert_eq!(p.ack_deadline(), Some(Instant::ZERO), "due at once");
        assert_eq!(p.ack_if_due(t0), ack(41, t0));
    }

    #[test]
    fn a_part_longer_than_the_announced_size_starts_over() {
        assert_eq!(resume_point(10, 100), 10);
        assert_eq!(resume_point(100, 100), 100);
        assert_eq!(resume_point(101, 100), 0);
    }
}
