//! Every bidirectional stream a page opens after the control stream: one paste upload or one
//! `tern send` download, told apart by the stream's first line, each served in a task of its own
//! (a bad stream ends only itself).

use std::sync::Arc;

use tern::relay_proto::StreamRequest;

use super::SessionContext;
use super::target::Target;
use crate::link::{RecvHalf, SendHalf};
use crate::paste::{Onward, read_first_line, serve_upload};
use crate::send::{SharedLinkMemory, serve_download, serve_image};

/// What a read-only link is told when it pastes or downloads.
pub(super) const READ_ONLY: &str =
    "this link's token is read-only: typing, resizing, pasting and downloads are refused";

/// Spawns the task that serves one stream of `target`'s session, audited (`fields`: who, which
/// session and link; the size and offer, never the content). A read-only link's stream is
/// answered with a refusal, whichever it is. `link`: the link's round trip, when it knows one,
/// and what its earlier downloads learned of it.
pub(super) fn serve(
    shared: &SessionContext,
    target: &Target,
    send: SendHalf,
    mut recv: RecvHalf,
    fields: crate::audit::Fields,
    read_only: bool,
    link: (Option<std::time::Duration>, SharedLinkMemory),
) {
    // A paste for a session on an ssh host is copied there.
    let onward: Onward = match (&shared.ssh, &target.ssh_host) {
        (Some(hosts), Some(host)) => Some((Arc::clone(hosts), host.clone())),
        _ => None,
    };
    let session = target.session.clone();
    let (pastes, offers) = (shared.pastes.clone(), Arc::clone(&shared.offers));
    let audit = Arc::clone(&shared.audit);
    if read_only {
        tokio::spawn(async move { refuse(send, recv, &audit, fields).await });
        return;
    }
    let state = shared.state.clone();
    tokio::spawn(async move {
        match read_first_line::<StreamRequest, _>(&mut recv).await {
            Ok((StreamRequest::Download(request), rest)) => {
                audit.event("download", &fields.file(&request.download));
                serve_download(offers, session, request, (send, recv, rest), link).await;
            }
            Ok((StreamRequest::Image(request), rest)) => {
                serve_image((state, &offers), session, request, (send, recv, rest), link).await;
            }
            Ok((StreamRequest::Upload(header), rest)) => {
                audit.event("upload", &fields.bytes(header.size));
                serve_upload(pastes, onward, send, recv, Ok((header, rest))).await;
            }
            Err(e) => serve_upload(pastes, onward, send, recv, Err(e)).await,
        }
    });
}

/// A read-only link's upload or download: refused with the stream's own error reply, logged
/// and audited; nothing is stored or read.
pub(super) async fn refuse(
    send: SendHalf,
    mut recv: RecvHalf,
    audit: &crate::audit::Audit,
    fields: crate::audit::Fields,
) {
    let first = read_first_line::<StreamRequest, _>(&mut recv).await.ok().map(|(r, _)| r);
    refuse_request(send, first.as_ref(), audit, fields).await;
}

/// A viewer's stream (`session/view.rs`): a picture of its session when `pictures` (its share
/// includes the session's history, or its token may read the session's), served as the owner's
/// page gets it; anything else refused as [`refuse`] does.
pub(super) async fn serve_viewer(
    (send, mut recv): (SendHalf, RecvHalf),
    audit: &crate::audit::Audit,
    fields: crate::audit::Fields,
    pictures: Option<(Arc<crate::state::StateStore>, Arc<crate::send::Offers>, String)>,
    link: (Option<std::time::Duration>, SharedLinkMemory),
) {
    use tokio::io::AsyncReadExt;
    match (read_first_line::<StreamRequest, _>(&mut recv).await, pictures) {
        (Ok((StreamRequest::Image(request), rest)), Some((state, offers, session))) => {
            serve_image((Some(state), &offers), session, request, (send, recv, rest), link).await;
        }
        // Waiting for the next picture without the pictures: held until the page lets go, never
        // answered (it learns nothing, and nothing is refused or audited for what every
        // viewer's page asks).
        (Ok((StreamRequest::Image(r), _)), None) if r.image == tern::relay_proto::NEXT_IMAGE => {
            let _ = recv.read(&mut [0u8; 1]).await;
        }
        (first, _) => {
            let first = first.ok().map(|(r, _)| r);
            refuse_request(send, first.as_ref(), audit, fields).await;
        }
    }
}

/// What a read-only link is told about a picture it may not have.
const NO_PICTURES: &str = "this link shows the screen only: its owner did not share the \
                           session's history or pictures";

async fn refuse_request(
    mut send: SendHalf,
    first: Option<&StreamRequest>,
    audit: &crate::audit::Audit,
    fields: crate::audit::Fields,
) {
    use tern::relay_proto::{ApiError, DownloadReply, UploadErrorCode, UploadReply};
    use tokio::io::AsyncWriteExt;
    let (what, line) = match first {
        Some(StreamRequest::Download(_)) => (
            "download",
            tern::relay_proto::encode_line(&DownloadReply::Error {
                message: READ_ONLY.into(),
                gone: true,
            }),
        ),
        Some(StreamRequest::Image(_)) => (
            "image",
            tern::relay_proto::encode_line(&ApiError {
                error: tern::relay_proto::control::ErrorCode::NotYourSession.as_str().into(),
                message: NO_PICTURES.into(),
                retry_after_secs: None,
            }),
        ),
        _ => (
            "paste",
            UploadReply::Error {
                error: UploadErrorCode::PasteUnavailable,
                message: READ_ONLY.into(),
            }
            .to_line(),
        ),
    };
    tracing::warn!(what, "a read-only link's {what} refused");
    audit.event("refused", &fields.kind(what).reason("read-only"));
    let _ = tokio::time::timeout(super::handshake::LINGER, async {
        send.write_all(&line).await?;
        send.finish().await
    })
    .await;
}
