//! Bridge mode's sequence floors, kept in the state directory so that a restarted relay never
//! tells a page to number its datagrams from below a number an earlier page sent to the same
//! mosh-server.
//!
//! In bridge mode the mosh key is the page's: the relay sees only datagrams, so it cannot tell
//! one key from another (no fingerprint of the key reaches it) and keys what it keeps by target
//! (`host:port`). A page that starts over under a key already used (another browser, a tab with
//! cleared storage) must start above every sequence number sent under it, or AES-OCB nonces
//! repeat. So, as spawn mode does with its records:
//!
//! - before a datagram numbered at or above a target's reservation is forwarded, the reservation
//!   is raised to [`SEQ_BLOCK`](crate::registry::SEQ_BLOCK) above it, on disk (one durable write
//!   per block, not per datagram);
//! - a restarted relay starts each target above its reservation;
//! - a target it has no reservation for (never used with this state directory, forgotten when
//!   the table was full, or used by a relay that kept nothing) starts above the highest
//!   reservation of any target and above a floor that grows with the clock ([`time_floor`]), which
//!   no earlier page could have reached without sending millions of datagrams a second.
//!
//! Layout: `<state dir>/bridge-floors.json`, 0600, written to a temporary name and renamed.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::state::{DirRole, StateError, ensure_private_dir};

/// The file in the state directory.
const FILE: &str = "bridge-floors.json";
/// Targets kept at most; beyond it the least recently used is forgotten (the high-water mark
/// still covers it).
pub const MAX_TARGETS: usize = 4096;
/// [`time_floor`]'s step: sequence numbers per second of the clock. The relay forwards at most
/// `--datagram-rate` (1,000 by default) a second per page, and each new page starts a million
/// above the last: a session would have to take over its server sixteen times a second, for its
/// whole life, to climb faster than this.
pub const TIME_FLOOR_PER_SECOND: u64 = 1 << 24;

/// The floor the clock gives at `unix_secs`: above anything a page could have sent since the
/// epoch at a pace a mosh client can keep (see [`TIME_FLOOR_PER_SECOND`]).
pub fn time_floor(unix_secs: u64) -> u64 {
    unix_secs.saturating_mul(TIME_FLOOR_PER_SECOND).min(1 << 62)
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Saved {
    /// The highest reservation any target ever had.
    high_water: u64,
    targets: BTreeMap<String, Reservation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Reservation {
    /// Every sequence number below this may have been forwarded to the target.
    reserved: u64,
    /// Unix seconds of the last reservation (which target to forget first).
    used: u64,
}

/// The reservations, in memory and (with a state directory) on disk.
#[derive(Debug)]
pub struct BridgeFloors {
    /// `None`: no state directory (no `--state-dir`, no `$HOME`): kept in memory only, and a
    /// restart falls back on the clock.
    path: Option<PathBuf>,
    saved: Mutex<Saved>,
}

impl BridgeFloors {
    /// Kept in memory only.
    pub fn in_memory() -> Self {
        BridgeFloors { path: None, saved: Mutex::default() }
    }

    /// Opens (creating the directory) the reservations kept in `dir`. A file that does not parse
    /// is set aside and counts as nothing kept: every target then starts above the clock's floor.
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        ensure_private_dir(dir, DirRole::State)?;
        let path = dir.join(FILE);
        let saved = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<Saved>(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), "unreadable bridge floors ({e}); every target starts above the clock's floor");
                Saved::default()
            }),
            Err(_) => Saved::default(),
        };
        Ok(BridgeFloors { path: Some(path), saved: Mutex::new(saved) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Saved> {
        self.saved.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where `target`'s numbering starts when the relay first hears of it since it started:
    /// every number below may have been sent to it under some key.
    pub fn start(&self, target: &str, unix_secs: u64) -> u64 {
        let saved = self.lock();
        let mine = saved.targets.get(target).map_or(0, |r| r.reserved);
        mine.max(saved.high_water).max(time_floor(unix_secs))
    }

    /// Whether `target` has a reservation kept (a page sent to it before, maybe before a
    /// restart).
    pub fn has(&self, target: &str) -> bool {
        self.lock().targets.contains_key(target)
    }

    /// Raises `target`'s reservation to `bound`; on disk (durably) before it returns.
    pub fn reserve(&self, target: &str, bound: u64, unix_secs: u64) -> Result<(), StateError> {
        let mut saved = self.lock();
        let entry = saved
            .targets
            .entry(target.to_string())
            .or_insert(Reservation { reserved: 0, used: unix_secs });
        entry.reserved = entry.reserved.max(bound);
        entry.used = unix_secs;
        saved.high_water = saved.high_water.max(bound);
        while saved.targets.len() > MAX_TARGETS {
            let oldest = saved.targets.iter().min_by_key(|(_, r)| r.used).map(|(t, _)| t.clone());
            match oldest {
                Some(t) if t != target => saved.targets.remove(&t),
                _ => break,
            };
        }
        let Some(path) = &self.path else { return Ok(()) };
        let bytes = serde_json::to_vec(&*saved).expect("floors always serialize");
        write_durably(path, &bytes)
            .map_err(|source| StateError::Io { path: path.to_path_buf(), source })
    }
}

/// Writes `bytes` to `path` (0600) through a temporary file renamed over it, synced first: a
/// machine crash must not lose a reservation a datagram went out under.
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut f =
        fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn reservations_survive_a_restart_and_unknown_targets_start_above_all_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let floors = BridgeFloors::open(dir.path()).unwrap();
        let first = floors.start("127.0.0.1:60001", NOW);
        assert_eq!(first, time_floor(NOW));
        let high = time_floor(NOW) + 5 * TIME_FLOOR_PER_SECOND;
        floors.reserve("127.0.0.1:60001", high, NOW).unwrap();
        let file = dir.path().join(FILE);
        assert_eq!(fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);

        // A restart one second later: the clock's floor is below the reservation.
        let again = BridgeFloors::open(dir.path()).unwrap();
        assert_eq!(again.start("127.0.0.1:60001", NOW + 1), high);
        // Another target starts above every reservation too.
        assert_eq!(again.start("127.0.0.1:60002", NOW + 1), high);
        // Much later the clock is higher than any reservation.
        let later = NOW + 3600;
        assert_eq!(again.start("127.0.0.1:60001", later), time_floor(later));
    }

    #[test]
    fn a_broken_file_counts_as_nothing_kept_and_memory_only_works() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE), b"{not json").unwrap();
        let floors = BridgeFloors::open(dir.path()).unwrap();
        assert_eq!(floors.start("h:1", NOW), time_floor(NOW));
        let memory = BridgeFloors::in_memory();
        memory.reserve("h:1", time_floor(NOW) + 9, NOW).unwrap();
        assert_eq!(memory.start("h:1", NOW), time_floor(NOW) + 9);
    }

    #[test]
    fn the_table_is_bounded_and_a_forgotten_target_stays_under_the_high_water_mark() {
        let floors = BridgeFloors::in_memory();
        for i in 0..=MAX_TARGETS as u64 {
            floors.reserve(&format!("h:{i}"), 100 + i, i).unwrap();
        }
        assert_eq!(floors.lock().targets.len(), MAX_TARGETS);
        let forgotten = floors.start("h:0", 0);
        assert_eq!(forgotten, 100 + MAX_TARGETS as u64);
    }
}
