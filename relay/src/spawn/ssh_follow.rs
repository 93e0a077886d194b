//! The relay's end of a recorder on an ssh host: one long-lived ssh channel per session running
//! `tern-relay record-follow` there, whose lines ([`crate::history::follow`]) are applied to the
//! relay's own state directory under the session's id. A channel that drops (the network, the
//! host's sshd, a bad line) is started again with what the relay has, after a pause that grows
//! to [`MAX_PAUSE`]; a follower that ends by itself (the session's mosh-server is gone, after a
//! last look at the files) ends the following. At most one channel per session: a relay that
//! restarted starts them again from its records ([`ensure`], called by the relay's pruning
//! tick).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tern_native::shell_quote;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::ssh::{SshHost, SshHosts};
use crate::command::Request;
use crate::history::follow::{FollowLine, MAX_LINE, Mirror};
use crate::send::offers::Offers;
use crate::state::{SessionRecord, StateStore};

/// The longest pause before a dropped channel is started again.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// The sessions whose channel runs in this process.
static RUNNING: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn running() -> std::sync::MutexGuard<'static, Option<HashSet<String>>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts following `record`'s recorder, unless it has none or is followed already.
pub fn ensure(
    hosts: &Arc<SshHosts>,
    state: &Arc<StateStore>,
    offers: &Arc<Offers>,
    record: &SessionRecord,
    max_bytes: u64,
    shutdown: &CancellationToken,
) {
    let Some(remote) = &record.remote else { return };
    let (Some(_), Ok(host)) = (&remote.recorder, remote.host.parse::<SshHost>()) else { return };
    if !running().get_or_insert_default().insert(record.id.clone()) {
        return;
    }
    let (hosts, state, offers, record, shutdown) =
        (hosts.clone(), state.clone(), offers.clone(), record.clone(), shutdown.clone());
    tokio::spawn(async move {
        let id = record.id.clone();
        tokio::select! {
            () = follow(max_bytes, &hosts, &state, &offers, &host, &record) => {}
            () = shutdown.cancelled() => {}
        }
        if let Some(set) = running().as_mut() {
            set.remove(&id);
        }
    });
}

/// Follows until the follower ends by itself or the session's record is gone.
async fn follow(
    max_bytes: u64,
    hosts: &SshHosts,
    state: &StateStore,
    offers: &Offers,
    host: &SshHost,
    record: &SessionRecord,
) {
    let Some(remote) = &record.remote else { return };
    let Some(recorder) = &remote.recorder else { return };
    let mut mirror = Mirror::new(state.dir(), &record.id, max_bytes);
    let mut pause = Duration::from_secs(1);
    while state.check_alive(&record.id).is_some() {
        let mut argv = vec![
            recorder.program.clone(),
            "record-follow".into(),
            "--history-dir".into(),
            recorder.dir.clone(),
            "--session".into(),
            record.id.clone(),
        ];
        if let Some(pid) = remote.pid {
            argv.extend(["--pid".into(), pid.to_string()]);
        }
        for have in mirror.haves() {
            argv.extend(["--have".into(), have]);
        }
        let command = argv.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" ");
        match channel(hosts, host, &command, &mut mirror, offers).await {
            Ok(Ended::ByItself) => {
                tracing::debug!(session = %record.id, "the recorder's files are all here");
                return;
            }
            Ok(Ended::Dropped { lines }) => {
                if lines > 0 {
                    pause = Duration::from_secs(1);
                }
                tracing::info!(session = %record.id, %host, "the recorder's channel dropped; again in {pause:?}");
            }
            Err(why) => {
                tracing::warn!(session = %record.id, %host, "the recorder's channel: {why}; again in {pause:?}");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

enum Ended {
    /// The follower exited on its own (the session's mosh-server is gone).
    ByItself,
    /// The channel went away after `lines` lines.
    Dropped { lines: u64 },
}

/// One channel: its lines into `mirror` until it ends; `Err` on a line that cannot be applied.
async fn channel(
    hosts: &SshHosts,
    host: &SshHost,
    command: &str,
    mirror: &mut Mirror,
    offers: &Offers,
) -> Result<Ended, String> {
    let mut child =
        hosts.channel(host, command).spawn().map_err(|e| format!("cannot run ssh: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut reader = BufReader::new(stdout);
    let mut lines = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        // A line longer than a follower writes is refused, never buffered without bound.
        let read = (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line).await;
        match read {
            Ok(0) => break,
            Ok(_) if line.last() != Some(&b'\n') => {
                return Err(if line.len() > MAX_LINE {
                    "a line over the limit".to_owned()
                } else {
                    "the channel ended mid-line".to_owned()
                });
            }
            Ok(_) => {}
            Err(e) => return Err(format!("reading: {e}")),
        }
        let parsed = FollowLine::decode(&line[..line.len() - 1], mirror.session())?;
        // Small writes to local files: done in place (a chunk is at most 192 KiB).
        mirror.apply(&parsed)?;
        if let FollowLine::Signal { request } = &parsed {
            signal(offers, mirror.session(), request);
        }
        lines += 1;
    }
    let status = child.wait().await.map_err(|e| format!("ssh: {e}"))?;
    if status.success() { Ok(Ended::ByItself) } else { Ok(Ended::Dropped { lines }) }
}

/// A signal from the recorder on the host: to the session's pages, as one from the relay's own
/// socket (`send/socket.rs`); only for this very session, whatever the line names.
fn signal(offers: &Offers, session: &str, request: &[u8]) {
    use tern::relay_proto::PageSignal;
    let signal = match serde_json::from_slice::<Request>(request) {
        Ok(Request::Clipboard { session: s, text }) if s == session => {
            PageSignal::Clipboard { text }
        }
        Ok(Request::Notify { session: s, title, body }) if s == session => {
            PageSignal::Notify { title, body }
        }
        Ok(Request::Link { session: s, url, text, col }) if s == session => {
            PageSignal::Link { url, text, col }
        }
        _ => {
            tracing::debug!(%session, "a request from the host that is not this session's signal");
            return;
        }
    };
    let sent = offers.signal(session, signal);
    tracing::debug!(%session, sent, "a signal from the recorder on the host");
}
