//! The relay's end of the `tern` command: a Unix socket in the state directory (0700, the socket
//! itself 0600, and the peer's uid checked), one request per connection.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tern::relay_proto::offer::{offered_name, openable_url};
use tern::relay_proto::{LineBuffer, OfferAnswer, PageSignal};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::offers::{FileSource, Offers};
use crate::command::{MAX_REQUEST, Reply, Request, SOCKET_NAME, line};
use crate::state::StateStore;

/// Where the socket of a relay with state directory `dir` (`--state-dir`, not its sessions/) is.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}

/// What the relay's end of the command works with: spawn mode's (in bridge mode there is no
/// shell of the relay's to hear from).
#[derive(Debug)]
pub(crate) struct CommandSocket {
    /// The state directory (`--state-dir`): the socket is [`socket_path`] in it.
    pub dir: PathBuf,
    /// `--send-limit`: the largest file offered.
    pub send_limit: u64,
    /// The sessions' records: a request must name one of them.
    pub state: Arc<StateStore>,
    pub shutdown: CancellationToken,
    /// The audit trail (shares made and ended).
    pub audit: Arc<crate::audit::Audit>,
}

/// Binds the socket (replacing one a dead relay left) and serves it until shutdown.
pub(crate) async fn serve(socket: Arc<CommandSocket>, offers: Arc<Offers>) {
    let path = socket_path(&socket.dir);
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(path = %path.display(), "`tern send` and `tern open` unavailable: cannot bind the socket: {e}");
            return;
        }
    };
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    let me = rustix::process::getuid().as_raw();
    loop {
        let stream = tokio::select! {
            _ = socket.shutdown.cancelled() => break,
            a = listener.accept() => match a {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::debug!("tern socket accept: {e}");
                    continue;
                }
            },
        };
        if stream.peer_cred().map(|c| c.uid()).ok() != Some(me) {
            tracing::warn!("a process of another user connected to the tern socket; refused");
            continue;
        }
        let (socket, offers) = (Arc::clone(&socket), Arc::clone(&offers));
        tokio::spawn(async move { serve_one(&socket, &offers, stream).await });
    }
    let _ = std::fs::remove_file(&path);
}

async fn serve_one(socket: &CommandSocket, offers: &Offers, mut stream: UnixStream) {
    let request = match read_request(&mut stream).await {
        Ok(r) => r,
        Err(message) => {
            let _ = stream.write_all(&line(&Reply::error(message))).await;
            return;
        }
    };
    let request = match request {
        Request::Clipboard { session, text } => {
            return signal(socket, offers, session, PageSignal::Clipboard { text });
        }
        Request::Notify { session, title, body } => {
            return signal(socket, offers, session, PageSignal::Notify { title, body });
        }
        Request::Link { session, url, text, col } => {
            return signal(socket, offers, session, PageSignal::Link { url, text, col });
        }
        Request::ImageStored { session, id } => {
            if socket.state.get(&session).is_some() {
                offers.image_stored(&session, id);
            }
            return;
        }
        r => r,
    };
    if let Request::Share { .. } | Request::Unshare { .. } = request {
        let reply = share(socket, request);
        let _ = stream.write_all(&line(&reply)).await;
        return;
    }
    let (session, waiting) = match handle(socket, offers, request).await {
        Ok(w) => w,
        Err(message) => {
            let _ = stream.write_all(&line(&Reply::error(message))).await;
            return;
        }
    };
    let (session, offer, rx) = match waiting {
        Waiting::Offered { offer, name, size, rx } => {
            let reply = Reply::Offered { offer: offer.clone(), name, size };
            if stream.write_all(&line(&reply)).await.is_err() {
                withdraw(offers, &session, &offer);
                return;
            }
            (session, offer, rx)
        }
        Waiting::Again { offer, rx } => (session, offer, rx),
    };
    let mut probe = [0u8; 1];
    tokio::select! {
        answer = rx => {
            let reply = match answer {
                Ok(a) => Reply::answer(&a),
                Err(_) => Reply::error("the relay forgot the offer"),
            };
            let _ = stream.write_all(&line(&reply)).await;
        }
        // The command went away (Ctrl+C): nobody wants the offer any more.
        _ = stream.read(&mut probe) => withdraw(offers, &session, &offer),
        // The relay stops: the offer stays for the next one, and the command waits on there.
        _ = socket.shutdown.cancelled() => {}
    }
}

/// The recorder's clipboard write or notification: to the session's attached pages, if any (no
/// answer: the recorder does not wait).
fn signal(socket: &CommandSocket, offers: &Offers, session: String, signal: PageSignal) {
    if socket.state.get(&session).is_none() {
        tracing::debug!(%session, "a signal for a session that is not this relay's");
        return;
    }
    let kind = match signal {
        PageSignal::Clipboard { .. } => "clipboard",
        PageSignal::Notify { .. } => "notify",
        PageSignal::Link { .. } => "link",
    };
    let sent = offers.signal(&session, signal);
    tracing::debug!(%session, kind, sent, "a program's signal mosh-server drops");
}

fn withdraw(offers: &Offers, session: &str, offer: &str) {
    let answer = OfferAnswer::Failed { message: "withdrawn by the shell".into() };
    if offers.answer(session, offer, answer).is_ok() {
        tracing::info!(session, offer, "offer withdrawn (the tern command went away)");
    }
}

/// `tern share` (or `--end`) for a session of this relay's.
fn share(socket: &CommandSocket, request: Request) -> Reply {
    // The shell's own user asked (the socket checked the uid): the owner's doing.
    const BY: &str = "tern share";
    let result = match request {
        Request::Share { session, expires, allow_history } => {
            if socket.state.check_alive(&session).is_none() {
                return Reply::error(format!("session {session} is not running on this relay"));
            }
            let expires =
                expires.map_or(crate::share::DEFAULT_EXPIRY, std::time::Duration::from_secs);
            let base = crate::share::base_url(&socket.dir);
            crate::share::create(
                &socket.dir,
                &socket.audit,
                &session,
                expires,
                allow_history,
                BY,
                &base,
            )
            .map(|m| Reply::Shared { url: m.url, expires: m.expires })
        }
        Request::Unshare { session } => crate::share::end(&socket.dir, &socket.audit, &session, BY)
            .map(|count| Reply::Unshared { count }),
        _ => Err("not a share request".into()),
    };
    result.unwrap_or_else(Reply::error)
}

async fn read_request(stream: &mut UnixStream) -> Result<Request, String> {
    let mut lines = LineBuffer::new(MAX_REQUEST);
    let mut buf = [0u8; 4096];
    loop {
        match lines.next_line() {
            Ok(Some(l)) => {
                return serde_json::from_slice(&l).map_err(|e| format!("bad request: {e}"));
            }
            Ok(None) => {}
            Err(_) => return Err(format!("request over {MAX_REQUEST} bytes")),
        }
        let want = lines.room().min(buf.len());
        match stream.read(&mut buf[..want]).await {
            Ok(n) if n > 0 => lines.push(&buf[..n]),
            _ => return Err("the request ended early".into()),
        }
    }
}

/// What a request turned into: an offer to wait on.
enum Waiting {
    Offered { offer: String, name: String, size: u64, rx: oneshot::Receiver<OfferAnswer> },
    Again { offer: String, rx: oneshot::Receiver<OfferAnswer> },
}

async fn handle(
    socket: &CommandSocket,
    offers: &Offers,
    request: Request,
) -> Result<(String, Waiting), String> {
    let session = match &request {
        Request::Send { session, .. }
        | Request::Open { session, .. }
        | Request::Wait { session, .. }
        | Request::Share { session, .. }
        | Request::Unshare { session } => session.clone(),
        // Handled before (serve_one): they wait for nothing.
        Request::Clipboard { .. }
        | Request::Notify { .. }
        | Request::Link { .. }
        | Request::ImageStored { .. } => {
            return Err("not a request that waits".into());
        }
    };
    let record = socket.state.get(&session);
    if record.is_none() {
        return Err(format!("session {session} is not one of this relay's (did it end?)"));
    }
    let waiting = match request {
        Request::Send { path, .. } => {
            let limit = socket.send_limit;
            let (name, sha256, source) =
                tokio::task::spawn_blocking(move || read_file(Path::new(&path), limit))
                    .await
                    .map_err(|e| format!("hashing failed: {e}"))??;
            let size = source.size;
            let (offer, rx) = offers
                .offer_file(&session, name.clone(), sha256, source)
                .map_err(|e| e.to_string())?;
            tracing::info!(%session, %offer, size, "tern send: file offered");
            Waiting::Offered { offer, name, size, rx }
        }
        Request::Open { url, .. } => {
            openable_url(&url).map_err(str::to_owned)?;
            let (offer, rx) = offers.offer_url(&session, url.clone()).map_err(|e| e.to_string())?;
            tracing::info!(%session, %offer, "tern open: URL offered");
            Waiting::Offered { offer, name: url, size: 0, rx }
        }
        Request::Wait { offer, .. } => {
            let rx = offers.wait(&session, &offer).map_err(|e| e.to_string())?;
            Waiting::Again { offer, rx }
        }
        Request::Clipboard { .. }
        | Request::Notify { .. }
        | Request::Link { .. }
        | Request::ImageStored { .. } => {
            return Err("not a request that waits".into());
        }
        Request::Share { .. } | Request::Unshare { .. } => {
            return Err("a share is answered at once".into());
        }
    };
    Ok((session, waiting))
}

/// Opens, checks and hashes a file to offer; refuses anything but a regular file within `limit`.
fn read_file(path: &Path, limit: u64) -> Result<(String, String, FileSource), String> {
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > limit {
        return Err(format!(
            "{} is {}; this relay sends at most {} (--send-limit)",
            path.display(),
            tern::paste::size(meta.len()),
            tern::paste::size(limit)
        ));
    }
    let source = FileSource::of(path.to_path_buf(), &meta);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    if total != source.size {
        return Err(format!("{} changed while it was read", path.display()));
    }
    source.unchanged()?;
    let name = offered_name(&path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
    let sha256 = tern::relay_proto::Sha256(hasher.finalize().into()).to_string();
    Ok((name, sha256, source))
}
