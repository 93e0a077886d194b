//! Every bidirectional stream a page opens after the control stream: one paste upload or one
//! `tern send` download, told apart by the stream's first line, each served in a task of its own
//! (a bad stream ends only itself).

use std::sync::Arc;

use tern::relay_proto::StreamRequest;

use super::SessionContext;
use super::target::Target;
use crate::link::{RecvHalf, SendHalf};
use crate::paste::{Onward, read_first_line, serve_upload};
use crate::send::{serve_download, serve_image};

/// Spawns the task that serves one stream of `target`'s session.
pub(super) fn serve(shared: &SessionContext, target: &Target, send: SendHalf, mut recv: RecvHalf) {
    // A paste for a session on an ssh host is copied there.
    let onward: Onward = match (&shared.ssh, &target.ssh_host) {
        (Some(hosts), Some(host)) => Some((Arc::clone(hosts), host.clone())),
        _ => None,
    };
    let session = target.session.clone();
    let (pastes, offers) = (shared.pastes.clone(), Arc::clone(&shared.offers));
    let state = shared.state.clone();
    tokio::spawn(async move {
        match read_first_line::<StreamRequest, _>(&mut recv).await {
            Ok((StreamRequest::Download(request), rest)) => {
                serve_download(offers, session, request, send, recv, rest).await;
            }
            Ok((StreamRequest::Image(request), rest)) => {
                serve_image(state, session, request, send, recv, rest).await;
            }
            Ok((StreamRequest::Upload(header), rest)) => {
                serve_upload(pastes, onward, send, recv, Ok((header, rest))).await;
            }
            Err(e) => serve_upload(pastes, onward, send, recv, Err(e)).await,
        }
    });
}
