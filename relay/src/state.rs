//! The state directory: one private file per spawned mosh-server, so a restarted relay finds them.
//!
//! Layout: `<dir>/sessions/<id>.json` holding a [`SessionRecord`], and `<id>.shadow` holding the
//! relay's copy of the session (`tern::session::Shadow`, saved as a resume point: the screen and
//! the input in flight, plaintext). The directory is 0700 and every file 0600 because records carry
//! mosh keys and shadows the session's content. Files are written to a temporary name and renamed,
//! so a relay killed mid-write leaves either the old record or the new one, never half of one.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::ids::valid_id;

/// One spawned mosh-server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The relay's session id (random, hex), what a browser names to resume.
    pub id: String,
    /// UDP port mosh-server listens on (on loopback).
    pub port: u16,
    /// mosh key (22 characters of base64). Secret: never logged.
    pub key: String,
    /// pid of the detached mosh-server daemon, when it could be learnt.
    pub pid: Option<u32>,
    /// Unix seconds when it was spawned.
    pub created: u64,
    /// Every client sequence number below this may have been forwarded to this mosh-server: a
    /// restarted relay forwards only numbers from here on (see the registry's documentation).
    #[serde(default)]
    pub seq_reserved: u64,
    /// A session on an ssh host (`--ssh-host`): where its mosh-server runs. `None`: on this
    /// machine, on loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteServer>,
    /// Who started it (`crate::tokens::Who::name`: `owner`, a named token's name, or
    /// `proxy:USER`). Only they and the owner's token may list, resume, take over or read it.
    /// `None`: a record from before sessions had owners, which belongs to the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl SessionRecord {
    /// Whose session this is: `owner` for a record from before sessions had owners.
    pub fn owner_name(&self) -> &str {
        self.owner.as_deref().unwrap_or(crate::tokens::OWNER)
    }
}

/// A mosh-server the relay started on another host over ssh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteServer {
    /// The `--ssh-host` name it was started on (what pastes are copied to).
    pub host: String,
    /// The address its datagrams go to.
    pub ip: std::net::IpAddr,
    /// Its pid on that host (not this machine's: `pid` is `None` for such a record).
    pub pid: Option<u32>,
    /// Why the session has no recorder there (no history, pictures or signals), as the page is
    /// told on every `ready`; `None` when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder_off: Option<String>,
    /// The recorder there, when it has one: its files are followed back into this state
    /// directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<RemoteRecorder>,
}

/// The recorder on an ssh host: the relay's copy there, and the directory of its sessions' files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteRecorder {
    pub program: String,
    pub dir: String,
}

impl std::fmt::Debug for SessionRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRecord")
            .field("id", &self.id)
            .field("port", &self.port)
            .field("key", &"<redacted>")
            .field("pid", &self.pid)
            .field("created", &self.created)
            .field("seq_reserved", &self.seq_reserved)
            .field("remote", &self.remote)
            .field("owner", &self.owner)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// A file of the state directory could not be written or read while the relay runs.
    #[error("state directory {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A private directory could not be made ready at start: which one, what was being done,
    /// the system's reason, and the flag that names another.
    #[error(
        "{} {path}: cannot {op}: {cause}{}; pass {} DIR to use another directory",
        .role.name(),
        advice(.cause),
        .role.flag()
    )]
    Dir { role: DirRole, path: PathBuf, op: &'static str, cause: std::io::Error },
    #[error(
        "{} {path} is not private (mode {mode:o}) and cannot be made so; fix with chmod 700 \
         {path}, or pass {} DIR",
        .role.name(),
        .role.flag()
    )]
    NotPrivate { role: DirRole, path: PathBuf, mode: u32 },
    /// Another relay holds the state directory: two would drive the same sessions' counters and
    /// records over each other.
    #[error(
        "state directory {path} is in use by another tern-relay{}: stop it (`systemctl --user \
         stop tern-relay`?) or pass --state-dir DIR to use another directory",
        .pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    InUse { path: PathBuf, pid: Option<u32> },
}

/// What a private directory is for: names it in messages, with the flag that moves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirRole {
    /// `--state-dir` (and what lives in it: `sessions/`, `acme/`, `tls/`).
    State,
    /// `--paste-dir`.
    Paste,
}

impl DirRole {
    pub fn name(self) -> &'static str {
        match self {
            DirRole::State => "state directory",
            DirRole::Paste => "paste directory",
        }
    }

    pub fn flag(self) -> &'static str {
        match self {
            DirRole::State => "--state-dir",
            DirRole::Paste => "--paste-dir",
        }
    }
}

/// The likely cause of a directory error the system names tersely.
fn advice(cause: &std::io::Error) -> &'static str {
    use std::io::ErrorKind;
    match cause.kind() {
        ErrorKind::PermissionDenied => " (the relay's user may not write there)",
        ErrorKind::ReadOnlyFilesystem => {
            " (a read-only file system, or a systemd unit's ProtectHome=)"
        }
        ErrorKind::NotADirectory => " (a file stands where a directory of the path should be)",
        ErrorKind::StorageFull => " (the disk is full)",
        _ => "",
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io { path: path.to_path_buf(), source }
}

fn dir_err(
    role: DirRole,
    path: &Path,
    op: &'static str,
) -> impl FnOnce(std::io::Error) -> StateError {
    let path = path.to_path_buf();
    move |cause| StateError::Dir { role, path, op, cause }
}

/// Creates `dir` (and parents) with mode 0700, or checks an existing one is not group/world
/// accessible (tightening it when it is), then checks a file can be written in it: a directory
/// the relay cannot use is refused at start with its reason, not discovered at the first session.
pub fn ensure_private_dir(dir: &Path, role: DirRole) -> Result<(), StateError> {
    let create = dir_err(role, dir, "create the directory");
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(create)?;
    let mode = fs::metadata(dir).map_err(dir_err(role, dir, "read the directory's mode"))?;
    let mode = mode.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        // Tighten rather than refuse: we created or own it, and keys are about to go in.
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|_| StateError::NotPrivate { role, path: dir.to_path_buf(), mode })?;
    }
    let probe = dir.join(format!(".tern-relay-write-test-{}", std::process::id()));
    let written = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&probe)
        .and_then(|mut f| f.write_all(b"ok"));
    let _ = fs::remove_file(&probe);
    written.map_err(dir_err(role, dir, "write a file in the directory"))?;
    Ok(())
}

/// The records of spawned mosh-servers, in memory and on disk.
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    records: Mutex<HashMap<String, SessionRecord>>,
    /// `relay.lock` in the state directory, locked (flock) while this relay runs; `None` once
    /// released at shutdown.
    lock: Mutex<Option<fs::File>>,
}

/// The lock file's name in the state directory; it holds the pid of the relay that locks it.
const LOCK_FILE: &str = "relay.lock";

/// Takes the state directory for this relay: an exclusive lock on its lock file (the kernel
/// drops it when the process dies, however it dies), then writes this pid there for the message
/// another relay shows.
fn lock_state_dir(dir: &Path) -> Result<fs::File, StateError> {
    use std::io::{Read, Seek};
    let path = dir.join(LOCK_FILE);
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(dir_err(DirRole::State, dir, "open its lock file"))?;
    // rustix's flock: std's File::try_lock is newer than the project's MSRV.
    use rustix::fs::{FlockOperation, flock};
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            let mut held = String::new();
            let _ = file.read_to_string(&mut held);
            return Err(StateError::InUse {
                path: dir.to_path_buf(),
                pid: held.trim().parse().ok(),
            });
        }
        Err(e) => {
            return Err(dir_err(DirRole::State, dir, "lock its lock file")(e.into()));
        }
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()));
    written.map_err(dir_err(DirRole::State, dir, "write its lock file"))?;
    Ok(file)
}

impl StateStore {
    /// Opens (creating) the state directory, loads every record and prunes those whose
    /// mosh-server is gone.
    pub fn open(dir: &Path) -> Result<StateStore, StateError> {
        ensure_private_dir(dir, DirRole::State)?;
        // Before reading anything: another relay's records are its own.
        let lock = lock_state_dir(dir)?;
        let sessions = dir.join("sessions");
        ensure_private_dir(&sessions, DirRole::State)?;
        let mut records = HashMap::new();
        let list = dir_err(DirRole::State, &sessions, "list the directory");
        for entry in fs::read_dir(&sessions).map_err(list)? {
            let entry = entry.map_err(dir_err(DirRole::State, &sessions, "list the directory"))?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                // Leftover temporary files from an interrupted write.
                if path.extension().and_then(|e| e.to_str()) == Some("tmp") {
                    let _ = fs::remove_file(&path);
                }
                continue;
            }
            let parsed =
                fs::read(&path).ok().and_then(|b| serde_json::from_slice::<SessionRecord>(&b).ok());
            match parsed {
                Some(r) if valid_id(&r.id) && r.pid.is_none_or(pid_alive) => {
                    records.insert(r.id.clone(), r);
                }
                Some(r) => {
                    tracing::info!(session = %r.id, pid = ?r.pid, "pruning record of a mosh-server that is gone");
                    let _ = fs::remove_file(&path);
                    if valid_id(&r.id) {
                        let _ = fs::remove_file(sessions.join(format!("{}.shadow", r.id)));
                        crate::history::remove(&sessions, &r.id);
                    }
                }
                None => {
                    tracing::warn!(path = %path.display(), "ignoring unreadable session record");
                }
            }
        }
        // A saved session copy or history whose record is gone (pruned above, or removed by
        // hand).
        let list = dir_err(DirRole::State, &sessions, "list the directory");
        for entry in fs::read_dir(&sessions).map_err(list)?.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|s| s.to_str()).unwrap_or_default();
            let owner = name.strip_suffix(".shadow").or_else(|| crate::history::owner_of(name));
            if owner.is_some_and(|id| !records.contains_key(id)) {
                // A session's image store is a directory.
                let _ =
                    if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
            }
        }
        Ok(StateStore { dir: sessions, records: Mutex::new(records), lock: Mutex::new(Some(lock)) })
    }

    /// Lets the next relay take the state directory: called when this one has stopped and saved
    /// what it keeps (the lock would go with the process anyway, but a relay embedded in a
    /// longer-lived process, as in the tests, must let go at its end).
    pub fn release_lock(&self) {
        self.lock.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Where sessions' files live (records, copies, histories).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn shadow_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.shadow"))
    }

    /// Writes `bytes` to `path` (0600, atomically: a temporary file renamed over it); `durable`
    /// waits for the disk too (records of servers on ssh hosts: a crash of this machine must not
    /// lose a reservation a datagram went out under, since that mosh-server and its key live on).
    /// A record of a server on this machine and a session copy are not: a relay that dies leaves
    /// them in the page cache, and a machine that dies takes the mosh-server and its key along,
    /// so nothing is left for them to protect (and a new session's `ready` and its first datagram
    /// do not wait for the disk: tens of milliseconds on a busy one).
    fn write_private(
        &self,
        path: &Path,
        tmp_name: &str,
        bytes: &[u8],
        durable: bool,
    ) -> Result<(), StateError> {
        let tmp = self.dir.join(tmp_name);
        let write = || -> std::io::Result<()> {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(bytes)?;
            if durable {
                f.sync_all()?;
            }
            fs::rename(&tmp, path)
        };
        write().map_err(io_err(path))
    }

    /// Writes a record (0600, atomically) and remembers it.
    pub fn insert(&self, record: SessionRecord) -> Result<(), StateError> {
        let path = self.path_of(&record.id);
        let bytes = serde_json::to_vec_pretty(&record).expect("a record always serializes");
        self.write_private(&path, &format!("{}.tmp", record.id), &bytes, durable(&record))?;
        self.lock().insert(record.id.clone(), record);
        Ok(())
    }

    /// Raises a record's `seq_reserved` (written before it returns; see [`Self::write_private`]
    /// for when it waits for the disk).
    pub fn reserve_seq(&self, id: &str, bound: u64) -> Result<(), StateError> {
        let Some(mut record) = self.get(id) else { return Ok(()) };
        record.seq_reserved = record.seq_reserved.max(bound);
        self.insert(record)
    }

    /// Saves the relay's copy of a session (0600, atomically).
    pub fn save_shadow(&self, id: &str, bytes: &[u8]) -> Result<(), StateError> {
        if !valid_id(id) {
            return Ok(());
        }
        self.write_private(&self.shadow_path(id), &format!("{id}.shadow.tmp"), bytes, false)
    }

    /// The saved copy of a session, if any.
    pub fn load_shadow(&self, id: &str) -> Option<Vec<u8>> {
        if !valid_id(id) {
            return None;
        }
        fs::read(self.shadow_path(id)).ok()
    }

    pub fn get(&self, id: &str) -> Option<SessionRecord> {
        self.lock().get(id).cloned()
    }

    /// Forgets a record, on disk too, with the session's saved copy and history.
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
        let _ = fs::remove_file(self.path_of(id));
        let _ = fs::remove_file(self.shadow_path(id));
        if valid_id(id) {
            crate::history::remove(&self.dir, id);
        }
    }

    /// All records whose mosh-server still runs; prunes the others.
    pub fn alive(&self) -> Vec<SessionRecord> {
        let all: Vec<SessionRecord> = self.lock().values().cloned().collect();
        let mut alive = Vec::new();
        for r in all {
            if r.pid.is_none_or(pid_alive) {
                alive.push(r);
            } else {
                self.remove(&r.id);
            }
        }
        alive.sort_by_key(|r| r.created);
        alive
    }

    /// Is the record's mosh-server still running? Prunes it when not.
    pub fn check_alive(&self, id: &str) -> Option<SessionRecord> {
        let r = self.get(id)?;
        if r.pid.is_none_or(pid_alive) {
            Some(r)
        } else {
            self.remove(id);
            None
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionRecord>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether a record's writes wait for the disk: only a server on an ssh host outlives a crash of
/// this machine (see [`StateStore::write_private`]).
fn durable(record: &SessionRecord) -> bool {
    record.remote.is_some()
}

/// Is `pid` a running mosh-server? Checks /proc (Linux): the process exists, is not a zombie,
/// and its command line names mosh-server, so a recycled pid is not mistaken for it.
pub fn pid_alive(pid: u32) -> bool {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    if !Path::new("/proc/self").exists() {
        // No procfs (not Linux): cannot tell, so assume alive and let UDP errors tell later.
        return true;
    }
    let Ok(stat) = fs::read_to_string(proc.join("stat")) else {
        return false;
    };
    // Field 3 (after the parenthesised command) is the state; Z and X are dead.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    if matches!(state, Some("Z") | Some("X") | None) {
        return false;
    }
    fs::read(proc.join("cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("mosh-server"))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, pid: Option<u32>) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            port: 60001,
            key: "AAAAAAAAAAAAAAAAAAAAAA".into(),
            pid,
            created: 1,
            seq_reserved: 0,
            remote: None,
            owner: None,
        }
    }

    #[test]
    fn only_records_of_servers_on_other_hosts_wait_for_the_disk() {
        assert!(!durable(&record("0123456789abcdef", Some(7))));
        let remote = RemoteServer {
            host: "h".into(),
            ip: [10, 0, 0, 2].into(),
            pid: Some(7),
            recorder_off: Some("no recorder".into()),
            recorder: None,
        };
        assert!(durable(&SessionRecord {
            remote: Some(remote),
            ..record("0123456789abcdef", None)
        }));
    }

    #[test]
    fn records_survive_reopen_with_private_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let s = StateStore::open(&dir).unwrap();
        s.insert(record("0123456789abcdef", None)).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("sessions")), 0o700);
        assert_eq!(mode(&dir.join("sessions/0123456789abcdef.json")), 0o600);
        // Another relay on the same directory while this one holds it: refused, naming us.
        match StateStore::open(&dir) {
            Err(StateError::InUse { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected InUse, got {other:?}"),
        }
        assert_eq!(mode(&dir.join("relay.lock")), 0o600);
        // The first relay stops: the next one opens it.
        s.release_lock();
        let s2 = StateStore::open(&dir).unwrap();
        assert_eq!(s2.get("0123456789abcdef"), Some(record("0123456789abcdef", None)));
    }

    #[test]
    fn dead_pids_are_pruned_on_open() {
        let tmp = tempfile::tempdir().unwrap();
        let s = StateStore::open(tmp.path()).unwrap();
        // Our own pid is alive but is not mosh-server: treated as gone (pid reuse guard).
        s.insert(record("00000000aaaaaaaa", Some(std::process::id()))).unwrap();
        s.insert(record("00000000bbbbbbbb", Some(u32::MAX - 1))).unwrap();
        s.release_lock();
        let s2 = StateStore::open(tmp.path()).unwrap();
        assert_eq!(s2.get("00000000aaaaaaaa"), None);
        assert_eq!(s2.get("00000000bbbbbbbb"), None);
        assert!(!tmp.path().join("sessions/00000000bbbbbbbb.json").exists());
    }

    #[test]
    fn a_directory_it_cannot_use_is_named_with_the_operation_and_the_reason() {
        // Under a regular file: fails for root too, unlike permission bits.
        let tmp = tempfile::NamedTempFile::new().unwrap();
        let dir = tmp.path().join("state");
        let e = StateStore::open(&dir).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, StateError::Dir { role: DirRole::State, .. }), "{text}");
        assert!(text.contains(&format!("state directory {}", dir.display())), "{text}");
        assert!(text.contains("cannot create the directory"), "{text}");
        assert!(text.contains("Not a directory"), "{text}");
        assert!(text.contains("pass --state-dir DIR"), "{text}");
        let e = ensure_private_dir(&dir, DirRole::Paste).unwrap_err().to_string();
        assert!(e.contains("paste directory") && e.contains("--paste-dir DIR"), "{e}");
        // A directory that works leaves no trace of the check.
        let ok = tempfile::tempdir().unwrap();
        ensure_private_dir(ok.path(), DirRole::State).unwrap();
        assert_eq!(fs::read_dir(ok.path()).unwrap().count(), 0);
    }

    #[test]
    fn debug_hides_the_key() {
        let r = record("0123456789abcdef", None);
        assert!(!format!("{r:?}").contains("AAAAAAAA"));
    }
}
