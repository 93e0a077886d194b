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
//! - Taken: replaced in the background, [`REPLACE_AFTER`] later (with the shell started ahead,
//!   [`REPLACE_PRESTARTED_AFTER`]; not beside the new session's
//!   first moments).
//! - Not a session: no record (the session list, `--max-spawned` and the registry never see it)
//!   until taken; none is made while `--max-spawned` mosh-servers run.
//! - Ended when the relay stops; a relay that dies leaves it to mosh-server's own 60 s.
//! - `--no-spare` turns it off.
//!
//! Pre-started shell (unless `--no-spare-prestart`): mosh-server runs its command only when a
//! first client state arrives, so a spare left waiting would still start the recorder and the
//! shell (bash reading its start files: hundreds of ms) after the page's first datagram. The
//! relay is the spare's first client instead ([`tern::session::Prestart`]): from the very UDP
//! socket the session will forward the page's datagrams on (mosh-server's remote address does
//! not change), it sends one state (a window size) as soon as the spare is made, so the shell
//! starts then and its prompt is on the server's screen before any page asks. The page that takes
//! the spare continues from that client's point as a page that resumes a session does (the
//! registry's copy starts from it: `ready.point`, states numbered above the relay's, sequence
//! numbers from the floor above every one the relay used), and its first state carries its own
//! size. The shell ran nothing but its start files: the spare is still a fresh session, started
//! a little earlier (at most [`ROTATE_AFTER`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tern::session::{Prestart, ResumePoint};
use tokio::net::UdpSocket;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::SessionContext;
use crate::spawn::{Spawned, spawn_mosh_server};
use crate::state::StateStore;

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
/// The same wait when the taken spare's shell was started ahead: the new session only draws what
/// is there, in the page's first ~100 ms, and the next page (a second tab, a reload) should find
/// a spare whose shell runs too.
const REPLACE_PRESTARTED_AFTER: Duration = Duration::from_millis(250);
/// After a failed start, the wait before the next try.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// The window size the relay releases a spare's shell with when no page used a session yet (then
/// the last page's size: [`Registry::latest_size`](crate::registry::Registry::latest_size)); the
/// page's own follows at once in its first state.
const PRESTART_SIZE: (u16, u16) = (80, 24);

/// A started mosh-server no page has used yet. No `Debug`: the key is inside.
pub(super) struct Warm {
    pub id: String,
    pub spawned: Spawned,
    born: Instant,
    /// The relay as its first client (the shell runs), unless `--no-spare-prestart`.
    prestart: Option<Driving>,
    /// Ends the mosh-server when the spare is dropped untaken, however that happens (the relay
    /// dropped without its keeper's last turn, as a test or a panic does): a pre-started spare
    /// has a client, so mosh-server's own exit when none came within 60 s never comes.
    reaper: Reaper,
}

/// See [`Warm::reaper`]; `None` once a page took the spare.
struct Reaper(Option<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        let Some(pid) = self.0.take() else { return };
        if !crate::state::pid_alive(pid) {
            return;
        }
        let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else { return };
        match rustix::process::kill_process(pid, rustix::process::Signal::TERM) {
            Ok(()) => tracing::debug!(pid = pid.as_raw_nonzero().get(), "warm spare ended"),
            Err(e) => tracing::debug!("ending the warm spare: {e}"),
        }
    }
}

/// A spare's shell, released: the client task, which hands back its socket and client when the
/// guard goes (dropping the guard alone stops it).
struct Driving {
    stop: DropGuard,
    task: JoinHandle<(UdpSocket, Prestart)>,
}

/// What a page takes over from a pre-started spare: the socket the relay sent from and the
/// point its client stopped at.
pub(super) struct Released {
    pub udp: UdpSocket,
    pub point: ResumePoint,
}

impl Warm {
    /// A page takes it: from now on it is a session, which outlives the relay.
    pub(super) fn keep_running(&mut self) {
        self.reaper.0 = None;
    }

    /// Stops the relay's client of this spare (if any) and returns where a page continues.
    pub(super) async fn release(&mut self) -> Option<Released> {
        let Driving { stop, task } = self.prestart.take()?;
        drop(stop);
        match task.await {
            Ok((udp, client)) => Some(Released { udp, point: client.hand_over() }),
            Err(e) => {
                tracing::warn!("the warm spare's client task failed: {e}");
                None
            }
        }
    }
}

/// The spare's slot and the demand for it, shared by the sessions and the keeper task.
#[derive(Debug)]
pub(crate) struct Spare {
    enabled: bool,
    /// Release the spare's shell ahead (see the module documentation).
    prestart: bool,
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
    /// `enabled`: spawn mode without `--no-spare`; `prestart`: without `--no-spare-prestart`.
    pub(crate) fn new(enabled: bool, prestart: bool) -> Self {
        Spare { enabled, prestart, inner: Mutex::new(Inner::default()), wake: Notify::new() }
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
    pub(super) fn take(&self, state: &StateStore) -> Option<Warm> {
        if !self.enabled {
            return None;
        }
        let warm = {
            let mut inner = self.lock();
            inner.last_demand = Some(Instant::now());
            let warm = inner.warm.take();
            if warm.is_some() {
                inner.taken = Some(Instant::now());
                // A session now (its record follows): a restarted relay must not end it.
                forget(state);
            }
            warm
        };
        self.wake.notify_one();
        let warm = warm?;
        match warm.spawned.pid {
            Some(pid) if !crate::state::pid_alive(pid) => {
                crate::history::remove(state.dir(), &warm.id);
                None
            }
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
    end_left_over(state);
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
            let cold = spare.lock().warm.take();
            if cold.is_some() {
                forget(state);
            }
            end(state, cold);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = spare.wake.notified() => continue,
            }
        }
        if !has_warm {
            let wait = if spare.prestart { REPLACE_PRESTARTED_AFTER } else { REPLACE_AFTER };
            if let Some(not_before) = taken.map(|t| t + wait).filter(|t| *t > now) {
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
                    let prestart = if spare.prestart {
                        let (cols, rows) = shared.registry.latest_size().unwrap_or(PRESTART_SIZE);
                        release(&spawned, cols, rows).await
                    } else {
                        None
                    };
                    note(state, spawned.pid);
                    let reaper = Reaper(spawned.pid);
                    let warm = Warm { id, spawned, born: Instant::now(), prestart, reaper };
                    let old = spare.lock().warm.replace(warm);
                    end(state, old);
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
                    end(state, old);
                }
            }
        }
    }
    let last = spare.lock().warm.take();
    if last.is_some() {
        forget(state);
    }
    end(state, last);
}

/// Where the spare's pid and start time are noted (`<state dir>/spare`, beside `sessions/`): a
/// pre-started spare has a client, so mosh-server's own exit when none came within 60 s never
/// comes, and one left by a relay that died would run on, recorded nowhere. The next relay ends it.
fn note_path(state: &StateStore) -> Option<std::path::PathBuf> {
    Some(state.dir().parent()?.join("spare"))
}

/// A process's start time (clock ticks since boot): with the pid, it names one process for good.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

fn note(state: &StateStore, pid: Option<u32>) {
    let (Some(path), Some(pid)) = (note_path(state), pid) else { return };
    let Some(start) = start_ticks(pid) else { return };
    if let Err(e) = std::fs::write(&path, format!("{pid} {start}\n")) {
        tracing::debug!("cannot note the warm spare: {e}");
    }
}

fn forget(state: &StateStore) {
    if let Some(path) = note_path(state) {
        let _ = std::fs::remove_file(path);
    }
}

/// Ends the spare a relay before this one left running (it died without ending it).
fn end_left_over(state: &StateStore) {
    let Some(path) = note_path(state) else { return };
    let Ok(text) = std::fs::read_to_string(&path) else { return };
    let _ = std::fs::remove_file(&path);
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    let (Some(Ok(pid)), Some(Ok(start))) = (fields.next(), fields.next()) else { return };
    let Ok(pid) = u32::try_from(pid) else { return };
    // The same process (not another that got its pid since), and no session's.
    let recorded = state.alive().iter().any(|r| r.pid == Some(pid));
    if start_ticks(pid) != Some(start) || recorded {
        return;
    }
    let Some(raw) = rustix::process::Pid::from_raw(pid as i32) else { return };
    if rustix::process::kill_process(raw, rustix::process::Signal::TERM).is_ok() {
        tracing::info!(pid, "ended the warm spare a previous relay left running");
    }
}

/// Starts the relay's client of a just-started spare: its first datagram releases the shell.
async fn release(spawned: &Spawned, cols: u16, rows: u16) -> Option<Driving> {
    let Ok(key) = spawned.key.parse::<tern::wire::Key>() else {
        tracing::warn!("the warm spare's key does not parse; its shell starts with the page");
        return None;
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], spawned.port));
    let udp = match super::target::connect_udp(addr).await {
        Ok(udp) => udp,
        Err(e) => {
            tracing::warn!("no socket for the warm spare's client: {}", e.message);
            return None;
        }
    };
    let epoch = std::time::Instant::now();
    let client = Prestart::new(key, cols, rows, tern::time::Instant::ZERO);
    let stop = CancellationToken::new();
    let task = tokio::spawn(drive(udp, client, stop.clone(), epoch));
    Some(Driving { stop: stop.drop_guard(), task })
}

/// The relay's client of a spare until a page takes it (or the spare ends): sends what the client
/// sends, hands it what the server sends. Then what already came is taken in too, and the socket
/// and the client are handed back.
async fn drive(
    udp: UdpSocket,
    mut client: Prestart,
    stop: CancellationToken,
    epoch: std::time::Instant,
) -> (UdpSocket, Prestart) {
    let now = || tern::time::Instant::from_micros(epoch.elapsed().as_micros() as u64);
    let mut buf = vec![0u8; 65_536];
    let mut released = false;
    loop {
        while let Some(datagram) = client.poll_transmit() {
            // A lost datagram is sent again by the client's timer, as on any link.
            let _ = udp.send(&datagram).await;
        }
        if !released && client.has_heard_server() {
            released = true;
            tracing::debug!(
                after_us = epoch.elapsed().as_micros() as u64,
                "warm spare's shell released"
            );
        }
        let wake = client
            .poll_timeout()
            .map(|t| Instant::from_std(epoch + Duration::from_micros(t.as_micros())));
        let timer = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            got = udp.recv(&mut buf) => match got {
                Ok(n) => client.handle_datagram(now(), &buf[..n]),
                // An ICMP error (the server is gone): nothing to take in; the spare's pid check
                // keeps a dead one from being handed out.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            _ = timer => client.handle_timeout(now()),
        }
    }
    while let Ok(n) = udp.try_recv(&mut buf) {
        client.handle_datagram(now(), &buf[..n]);
    }
    (udp, client)
}

/// Ends a spare's mosh-server (its child goes with it: the pty closes) and the relay's client of
/// it, and removes what its recorder wrote (a pre-started spare's shell drew its prompt): no
/// session, no history. The recorder may write once more as it goes, so the files are removed
/// again a moment later.
fn end(state: &StateStore, warm: Option<Warm>) {
    let Some(warm) = warm else { return };
    let dir = state.dir().to_path_buf();
    crate::history::remove(&dir, &warm.id);
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let id = warm.id.clone();
        handle.spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            crate::history::remove(&dir, &id);
        });
    }
    // Dropping it ends the mosh-server (its reaper).
    drop(warm);
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
