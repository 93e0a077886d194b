//! The warm spare (spawn mode, this machine's sessions): one mosh-server started ahead, so that a
//! new session's `ready` does not wait for a spawn.
//!
//! It is started exactly as a fresh session's (same spec, recorder, environment) with the session
//! id it will have chosen when it is made: `TERN_SESSION` and the recorder's `--session` are
//! baked into the environment at spawn, so the id is fixed then and shown to nobody (not logged,
//! not recorded, not listed) until a page takes the spare. mosh-server does not run its command
//! until the first client's datagram arrives (its child waits to be released, and the pty gets
//! the client's size first), so the spare's recorder and shell start at attach, with the page's
//! size and nothing run before: nothing of the shell is "warm", only mosh-server.
//!
//! Policy:
//! - Demand: an authorized `/api/info` (a page is about to open a session) or a new session. For
//!   [`WARM_FOR`] after the last demand a spare is kept; after that none is (no process left
//!   running for a relay nobody uses), and the next demand starts one again.
//! - mosh-server ends itself 60 s after its start when no client came, so a spare older than
//!   [`ROTATE_AFTER`] (or 3/4 of a shorter `--session-idle-timeout`) is ended and replaced while
//!   the relay is warm. One that died anyway is not handed out (its pid is checked): that
//!   session is spawned fresh.
//! - Taken: replaced in the background, [`REPLACE_AFTER`] later (not beside the new session's
//!   first moments).
//! - Not a session: no record (the session list, `--max-spawned` and the registry never see it)
//!   until taken; none is made while `--max-spawned` mosh-servers run.
//! - Ended when the relay stops; a relay that dies leaves it to mosh-server's own 60 s.
//! - `--no-spare` turns it off.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::SessionContext;
use crate::spawn::{Spawned, spawn_mosh_server};

/// How long after the last demand a spare is kept.
pub(crate) const WARM_FOR: Duration = Duration::from_secs(10 * 60);
/// A spare's age at which it is replaced (mosh-server gives up on its first client at 60 s).
pub(crate) const ROTATE_AFTER: Duration = Duration::from_secs(45);

/// When a spare is replaced: at [`ROTATE_AFTER`], or earlier when `--session-idle-timeout`
/// (mosh-server's network timeout, which also counts from its start) would end it first.
fn rotate_after(idle_timeout: Option<Duration>) -> Duration {
    match idle_timeout {
        Some(t) => ROTATE_AFTER.min(t.saturating_sub(t / 4)).max(Duration::from_secs(1)),
        None => ROTATE_AFTER,
    }
}
/// After a spare is taken, the wait before the next is started: the new session's shell starts
/// and draws its first frame in these first moments, and a spawn beside it would compete for the
/// CPU.
const REPLACE_AFTER: Duration = Duration::from_secs(1);
/// After a failed start, the wait before the next try.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// A started mosh-server no page has used yet. No `Debug`: the key is inside.
pub(super) struct Warm {
    pub id: String,
    pub spawned: Spawned,
    born: Instant,
}

/// The spare's slot and the demand for it, shared by the sessions and the keeper task.
#[derive(Debug)]
pub(crate) struct Spare {
    enabled: bool,
    inner: Mutex<Inner>,
    wake: Notify,
}

#[derive(Default)]
struct Inner {
    warm: Option<Warm>,
    last_demand: Option<Instant>,
    /// When a page last took the spare.
    taken: Option<Instant>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("warm", &self.warm.as_ref().map(|w| w.spawned.pid))
            .field("last_demand", &self.last_demand)
            .finish()
    }
}

impl Spare {
    /// `enabled`: spawn mode without `--no-spare`.
    pub(crate) fn new(enabled: bool) -> Self {
        Spare { enabled, inner: Mutex::new(Inner::default()), wake: Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A session is about to be opened: keep a spare ready.
    pub(crate) fn want(&self) {
        if !self.enabled {
            return;
        }
        self.lock().last_demand = Some(Instant::now());
        self.wake.notify_one();
    }

    /// The ready spare, if there is one and its mosh-server still runs; the keeper starts the
    /// next one.
    pub(super) fn take(&self) -> Option<Warm> {
        if !self.enabled {
            return None;
        }
        let warm = {
            let mut inner = self.lock();
            inner.last_demand = Some(Instant::now());
            let warm = inner.warm.take();
            if warm.is_some() {
                inner.taken = Some(Instant::now());
            }
            warm
        };
        self.wake.notify_one();
        let warm = warm?;
        match warm.spawned.pid {
            Some(pid) if !crate::state::pid_alive(pid) => None,
            _ => Some(warm),
        }
    }
}

/// Keeps the spare until the relay stops, then ends it.
pub(crate) async fn keep(shared: Arc<SessionContext>) {
    let spare = &shared.spare;
    let Some(state) = shared.state.as_ref().filter(|_| spare.enabled) else { return };
    let shutdown = shared.shutdown.clone();
    let rotate = rotate_after(shared.settings.targets.spawn.idle_timeout);
    loop {
        if shutdown.is_cancelled() {
            break;
        }
        let (has_warm, born, last_demand, taken) = {
            let inner = spare.lock();
            let born = inner.warm.as_ref().map(|w| w.born);
            (inner.warm.is_some(), born, inner.last_demand, inner.taken)
        };
        let warm_until = last_demand.map(|t| t + WARM_FOR);
        let now = Instant::now();
        if warm_until.is_none_or(|t| t <= now) {
            // Cold: end what is there and wait for the next demand.
            end(spare.lock().warm.take());
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = spare.wake.notified() => continue,
            }
        }
        if !has_warm {
            if let Some(not_before) = taken.map(|t| t + REPLACE_AFTER).filter(|t| *t > now) {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep_until(not_before) => continue,
                }
            }
            if state.alive().len() >= shared.settings.targets.max_spawned {
                // At the limit: a spare could not be used; look again when a session asks.
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = spare.wake.notified() => continue,
                    _ = tokio::time::sleep(RETRY_AFTER) => continue,
                }
            }
            // Not raced with the shutdown: a start under way finishes and is ended below.
            let id = crate::ids::new_session_id();
            let spec = super::target::local_spec(&shared, state, &id);
            let started = std::time::Instant::now();
            match spawn_mosh_server(&spec).await {
                Ok(spawned) => {
                    tracing::debug!(pid = ?spawned.pid, took_ms = started.elapsed().as_millis() as u64, "warm spare ready");
                    let old = spare.lock().warm.replace(Warm { id, spawned, born: Instant::now() });
                    end(old);
                }
                Err(e) => {
                    tracing::warn!("starting the warm spare failed: {e:#}");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(RETRY_AFTER) => {}
                    }
                }
            }
            continue;
        }
        let rotate_at = born.map_or(now, |b| b + rotate);
        let until = warm_until.map_or(rotate_at, |w| w.min(rotate_at));
        tokio::select! {
            _ = shutdown.cancelled() => break,
            // Taken (or asked for): look again.
            _ = spare.wake.notified() => {}
            _ = tokio::time::sleep_until(until) => {
                let mut inner = spare.lock();
                if inner.warm.as_ref().is_some_and(|w| w.born + rotate <= Instant::now()) {
                    let old = inner.warm.take();
                    drop(inner);
                    tracing::debug!("warm spare replaced (mosh-server waits 60 s for a client)");
                    end(old);
                }
            }
        }
    }
    end(spare.lock().warm.take());
}

/// Ends a spare's mosh-server (its waiting child goes with it: the pty closes).
fn end(warm: Option<Warm>) {
    let Some(pid) = warm.and_then(|w| w.spawned.pid) else { return };
    if !crate::state::pid_alive(pid) {
        return;
    }
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else { return };
    match rustix::process::kill_process(pid, rustix::process::Signal::TERM) {
        Ok(()) => tracing::debug!(pid = pid.as_raw_nonzero().get(), "warm spare ended"),
        Err(e) => tracing::debug!("ending the warm spare: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_is_replaced_before_mosh_server_would_end_it() {
        assert_eq!(rotate_after(None), ROTATE_AFTER);
        assert_eq!(rotate_after(Some(Duration::from_secs(7 * 86400))), ROTATE_AFTER);
        assert_eq!(rotate_after(Some(Duration::from_secs(20))), Duration::from_secs(15));
        assert_eq!(rotate_after(Some(Duration::from_secs(1))), Duration::from_secs(1));
    }
}
