//! One download stream: the page asked for an offered file from some offset; the relay sends it
//! paced by the same pacer the page uses for uploads (`tern::transfer::Upload`), its roles swapped:
//! the relay sends, the page acknowledges with its own clock's timestamps, so the rate is the
//! receiver's and about two round trips of data are in flight, never a queue that keystrokes
//! would wait behind.

use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tern::relay_proto::{DownloadAck, DownloadReply, DownloadRequest, LineBuffer, decode};
use tern::time::Instant;
use tern::transfer::{
    AckInfo, LinkEstimate, LinkMemory, SHORT_CHUNK_LINK_TIME, Upload, UploadConfig, UploadState,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::offers::Offers;
use crate::link::{RecvHalf, SendHalf};

/// Longest ack line accepted.
const MAX_ACK: usize = 256;

fn origin() -> std::time::Instant {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    *START.get_or_init(std::time::Instant::now)
}

/// The pacer's clock: microseconds since the first download.
fn now() -> Instant {
    Instant::from_micros(u64::try_from(origin().elapsed().as_micros()).unwrap_or(u64::MAX))
}

fn deadline(at: Instant) -> tokio::time::Instant {
    (origin() + Duration::from_micros(at.as_micros())).into()
}

/// What one page link's downloads and pictures learned of it (its rate, its round trip), shared
/// by their streams' tasks: a picture after another starts at the rate the last one found
/// instead of probing (`tern::transfer::LinkMemory`, docs/UPLOAD.md "The remembered start").
pub(crate) type SharedLinkMemory = Arc<std::sync::Mutex<LinkMemory>>;

/// One transfer's place in its link's memory: begun when made, ended (with what the pacer
/// learned) when dropped, however the stream ends.
struct Remembering<'a> {
    memory: &'a SharedLinkMemory,
    learned: Option<LinkEstimate>,
}

impl<'a> Remembering<'a> {
    /// Begins a transfer on the link: the estimate to seed it with, if any.
    fn begin(memory: &'a SharedLinkMemory) -> (Self, Option<LinkEstimate>) {
        let seed = memory.lock().map_or(None, |mut m| m.begin(now()));
        (Remembering { memory, learned: None }, seed)
    }
}

impl Drop for Remembering<'_> {
    fn drop(&mut self) {
        if let Ok(mut m) = self.memory.lock() {
            m.end(now(), self.learned);
        }
    }
}

/// Whether downloads start from their link's remembered rate: on unless
/// `TERN_BENCH_NO_LINK_MEMORY=1` (a benchmark's switch, to compare both in one run; read once).
fn seeding_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("TERN_BENCH_NO_LINK_MEMORY").is_none_or(|v| v != "1"))
}

/// Serves `request` (already read from the stream) for `session`; `rtt`: the link's round trip
/// when it knows one (the pacer spreads its first window over it).
pub(crate) async fn serve_download(
    offers: Arc<Offers>,
    session: String,
    request: DownloadRequest,
    (mut send, mut recv, rest): (SendHalf, RecvHalf, Vec<u8>),
    (rtt, memory): (Option<Duration>, SharedLinkMemory),
) {
    let refuse = |message: String, gone: bool| DownloadReply::Error { message, gone };
    let file = match offers.file(&session, &request.download) {
        None => Err(refuse(
            "that download is gone (answered, withdrawn, or its session ended)".into(),
            true,
        )),
        Some((_, source)) => match source.unchanged() {
            Err(why) => Err(refuse(why, true)),
            Ok(()) if request.from > source.size => {
                Err(refuse(format!("asked from byte {} of {}", request.from, source.size), false))
            }
            Ok(()) => std::fs::File::open(&source.path)
                .map(|f| (f, source.size))
                .map_err(|e| refuse(format!("{}: {e}", source.path.display()), false)),
        },
    };
    let (file, size) = match file {
        Ok(f) => f,
        Err(reply) => {
            tracing::info!(%session, offer = %request.download, "download refused: {reply:?}");
            let _ = send.write_all(&tern::relay_proto::encode_line(&reply)).await;
            let _ = send.finish().await;
            return;
        }
    };
    let start = DownloadReply::Start { size, from: request.from };
    if send.write_all(&tern::relay_proto::encode_line(&start)).await.is_err() {
        return;
    }
    tracing::info!(%session, offer = %request.download, size, from = request.from, "download");
    let read = |buf: &mut [u8], at: u64| file.read_exact_at(buf, at);
    let link = (rtt, &memory);
    match pump(read, (size, request.from), (&mut send, &mut recv, rest), link).await {
        Ok(()) => {
            let _ = send.finish().await;
        }
        Err(why) => {
            tracing::info!(%session, offer = %request.download, "download stream ended: {why}")
        }
    }
}

/// Serves a picture the recorder lifted (`tern::relay_proto::image`) on a stream of `session`:
/// its `ImageInfo` line, then its bytes paced as a download (or one `ApiError` line). Asked for
/// [`NEXT_IMAGE`](tern::relay_proto::NEXT_IMAGE): first waits (until the page closes the stream)
/// for the recorder to store one (`offers`), then serves it with its id.
pub(crate) async fn serve_image(
    (state, offers): (Option<Arc<crate::state::StateStore>>, &Offers),
    session: String,
    mut request: tern::relay_proto::ImageRequest,
    (mut send, mut recv, rest): (SendHalf, RecvHalf, Vec<u8>),
    (rtt, memory): (Option<Duration>, SharedLinkMemory),
) {
    let next = request.image == tern::relay_proto::NEXT_IMAGE;
    if next {
        if request.session != session || state.is_none() {
            // Nothing will come: held until the page lets go (it learns nothing).
            let _ = recv.read(&mut [0u8; 1]).await;
            return;
        }
        let mut stored = offers.pictures(&session);
        let seen = *stored.borrow_and_update();
        let mut probe = [0u8; 1];
        request.image = loop {
            tokio::select! {
                changed = stored.changed() => {
                    if changed.is_err() {
                        return; // the session ended
                    }
                    let id = *stored.borrow_and_update();
                    if id > seen {
                        break id;
                    }
                }
                // The page closed the stream (or sent what it must not before the answer).
                _ = recv.read(&mut probe) => return,
            }
        };
    }
    use crate::history::images::{ReadImageError, read_image};
    let refuse = |error: &str, message: &str| {
        tern::relay_proto::encode_line(&tern::relay_proto::ApiError {
            error: error.into(),
            message: message.into(),
            retry_after_secs: None,
        })
    };
    let read = match state {
        // Only this stream's own session: a page asks for the pictures it is showing.
        Some(state) if request.session == session => {
            let dir = state.dir().to_path_buf();
            let id = request.image;
            tokio::task::spawn_blocking(move || read_image(&dir, &session, id))
                .await
                .unwrap_or_else(|_| Err(ReadImageError::Io("the read failed".into())))
        }
        Some(_) => Err(ReadImageError::Unknown),
        None => Err(ReadImageError::Io("no images in bridge mode".into())),
    };
    let (mut info, bytes) = match read {
        Ok(found) => found,
        Err(e) => {
            let line = match e {
                ReadImageError::Unknown => refuse(
                    "unknown_image",
                    "no such image (never stored, or dropped for the session's image quota)",
                ),
                ReadImageError::Io(why) => refuse("io", &why),
            };
            let _ = send.write_all(&line).await;
            let _ = send.finish().await;
            return;
        }
    };
    info.id = next.then_some(request.image);
    if send.write_all(&tern::relay_proto::encode_line(&info)).await.is_err() {
        return;
    }
    let read = |buf: &mut [u8], at: u64| {
        let at = usize::try_from(at).unwrap_or(usize::MAX);
        match bytes.get(at..at.saturating_add(buf.len())) {
            Some(part) => {
                buf.copy_from_slice(part);
                Ok(())
            }
            None => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
        }
    };
    let link = (rtt, &memory);
    match pump(read, (bytes.len() as u64, 0), (&mut send, &mut recv, rest), link).await {
        Ok(()) => {
            let _ = send.finish().await;
        }
        Err(why) => tracing::info!(image = request.image, "image stream ended: {why}"),
    }
}

/// Sends `from..size` (read with `read(buf, at)`) as the pacer allows until the page
/// acknowledged all of it (`rest`: what was read of the acks already). `link`: its round trip
/// when it knows one, and its memory.
async fn pump(
    read: impl Fn(&mut [u8], u64) -> std::io::Result<()>,
    (size, from): (u64, u64),
    (send, recv, rest): (&mut SendHalf, &mut RecvHalf, Vec<u8>),
    (rtt, memory): (Option<Duration>, &SharedLinkMemory),
) -> Result<(), String> {
    // Short chunks: quinn packs consecutive writes into full datagrams (docs/UPLOAD.md).
    let mut pacer = Upload::new(UploadConfig::new(size, from), now())
        .map_err(|e| e.to_string())?
        .chunk_time(SHORT_CHUNK_LINK_TIME);
    if let Some(rtt) = rtt {
        pacer = pacer.rtt_hint(rtt);
    }
    let (mut remembering, seed) = Remembering::begin(memory);
    if let Some(seed) = seed.filter(|_| seeding_enabled()) {
        tracing::debug!(rate = seed.rate, min_rtt = ?seed.min_rtt, "starting from the link's remembered rate");
        pacer = pacer.remembered(seed);
    }
    let mut acks = LineBuffer::new(MAX_ACK);
    acks.push(&rest);
    let mut chunk = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        while let Some(line) = acks.next_line().map_err(|_| "an ack line over its limit")? {
            let ack: DownloadAck = decode(&line).map_err(|e| format!("bad ack: {e}"))?;
            let info = AckInfo {
                acked_bytes: ack.acked,
                relay_time: Duration::from_micros(ack.page_time_us),
            };
            pacer.handle_ack(now(), info).map_err(|e| e.to_string())?;
        }
        remembering.learned = pacer.link_estimate().or(remembering.learned);
        match pacer.state() {
            UploadState::Done => return Ok(()),
            UploadState::Failed { reason } => return Err(format!("{reason:?}")),
            UploadState::Cancelled => return Err("cancelled".into()),
            _ => {}
        }
        while let Some(range) = pacer.poll_chunk(now()) {
            chunk.resize(usize::try_from(range.end - range.start).unwrap_or(0), 0);
            read(&mut chunk, range.start).map_err(|e| format!("reading: {e}"))?;
            send.write_all(&chunk).await.map_err(|e| format!("writing: {e}"))?;
        }
        let timer = pacer.poll_timeout();
        tokio::select! {
            r = recv.read(&mut buf) => match r {
                Ok(0) => return Err("the page closed the stream".into()),
                Ok(n) => acks.push(&buf[..n]),
                Err(e) => return Err(format!("reading acks: {e}")),
            },
            _ = tokio::time::sleep_until(deadline(timer.unwrap_or(Instant::ZERO))), if timer.is_some() => {
                pacer.handle_timeout(now());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A download stream's place in its link's memory: only a lone one is seeded, and what it
    /// learned is kept when it ends however it ends (the guard's drop).
    #[test]
    fn a_link_memory_seeds_the_next_lone_transfer_with_what_the_last_learned() {
        let memory = SharedLinkMemory::default();
        let learned = LinkEstimate { rate: 1_125_000, min_rtt: Duration::from_millis(80) };
        {
            let (mut first, seed) = Remembering::begin(&memory);
            assert_eq!(seed, None, "nothing learned yet");
            let (_second, seed) = Remembering::begin(&memory);
            assert_eq!(seed, None, "two at once");
            first.learned = Some(learned);
        }
        assert_eq!(memory.lock().unwrap().running(), 0);
        let (_third, seed) = Remembering::begin(&memory);
        assert_eq!(seed, Some(learned));
    }
}
