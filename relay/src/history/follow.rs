//! A recorder's files on an ssh host, brought back to the relay: `tern-relay record-follow` runs
//! on the host beside the recorder and writes what changed in the session's files as lines on
//! its stdout (an ssh channel); the relay's [`Mirror`] applies them to its own state directory
//! under the session's id, where the history API, search and pictures read them as for a session
//! on the relay's machine.
//!
//! ```text
//!  host: recorder ─▶ ~/.cache/tern/sessions/ID.history, ID.images/…
//!        record-follow (polls every 200 ms) ─▶ stdout ══ ssh ══▶ relay: Mirror ─▶ STATE/sessions/
//! ```
//!
//! A file is followed by its inode and length: growth is sent as `data` from the length the relay
//! has (the recorder's files are append-only), a file renamed over another (a history rotation,
//! an index compaction) as `rename`, a file that shrank or changed in place (`.history.base`,
//! rewritten whole) from offset 0, a file removed (an image past the quota) as `gone`. After a
//! drop, the relay starts the follower again with what it has (`--have NAME=INO:LEN`): nothing
//! is sent twice and nothing is lost; a relay that restarted has nothing and gets every file
//! again (bounded: the history's and the image store's own bounds). Each line is one JSON
//! object, at most [`MAX_LINE`] bytes (data in chunks of [`MAX_CHUNK`]); a line the relay cannot
//! read ends the channel, which starts again.
//!
//! Signals (OSC 52, 9, 777 and 8, which mosh-server drops) take the same channel: the follower
//! listens on `DIR/ID.sock` (the recorder's `TERN_SOCKET` on the host; the directory is 0700) as
//! the relay's own socket does, and passes each request line on as `signal`; the relay hands it
//! to the session's pages as it would one from its socket, for this session only. A signal sent
//! while the channel is down is lost, as one sent while the relay is away.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Value, json};

/// Most file bytes in one `data` line.
pub const MAX_CHUNK: usize = 192 * 1024;
/// Longest signal request the follower takes (a clipboard write is at most about 1.5 MB as JSON).
pub const MAX_SIGNAL: usize = 2 << 20;
/// Longest line the relay reads (a chunk's or a signal's base64 and its JSON).
pub const MAX_LINE: usize = MAX_SIGNAL / 3 * 4 + 1024;

/// One change to a session's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowLine {
    /// `data` at `at` of `name` (inode `ino` on the host); `at` 0 starts the file afresh.
    Data { name: String, ino: u64, at: u64, data: Vec<u8> },
    /// `from` was renamed over `to`.
    Rename { from: String, to: String },
    /// `name` was removed.
    Gone { name: String },
    /// A recorder's request line for the relay's socket (a clipboard write, a notification, a
    /// link), as it came.
    Signal { request: Vec<u8> },
    /// Nothing changed (sent now and then, so a dead channel is noticed on both ends).
    Idle,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl FollowLine {
    /// The line, newline included.
    pub fn encode(&self) -> Vec<u8> {
        let v = match self {
            FollowLine::Data { name, ino, at, data } => {
                json!({"t": "data", "name": name, "ino": ino, "at": at, "data": b64().encode(data)})
            }
            FollowLine::Rename { from, to } => json!({"t": "rename", "from": from, "to": to}),
            FollowLine::Gone { name } => json!({"t": "gone", "name": name}),
            FollowLine::Signal { request } => {
                json!({"t": "signal", "request": b64().encode(request)})
            }
            FollowLine::Idle => json!({"t": "idle"}),
        };
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        line
    }

    /// Reads one line of session `session`'s follower: names outside its files are refused.
    pub fn decode(line: &[u8], session: &str) -> Result<FollowLine, String> {
        let v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).ok_or_else(|| format!("no {k}"));
        let n = |k: &str| v.get(k).and_then(Value::as_u64).ok_or_else(|| format!("no {k}"));
        let name = |k: &str| {
            let name = s(k)?;
            if valid_name(session, name) {
                Ok(name.to_owned())
            } else {
                Err(format!("not one of the session's files: {name:?}"))
            }
        };
        match s("t")? {
            "data" => Ok(FollowLine::Data {
                name: name("name")?,
                ino: n("ino")?,
                at: n("at")?,
                data: b64().decode(s("data")?).map_err(|_| "data is not base64".to_owned())?,
            }),
            "rename" => Ok(FollowLine::Rename { from: name("from")?, to: name("to")? }),
            "gone" => Ok(FollowLine::Gone { name: name("name")? }),
            "signal" => Ok(FollowLine::Signal {
                request: b64()
                    .decode(s("request")?)
                    .map_err(|_| "request is not base64".to_owned())?,
            }),
            "idle" => Ok(FollowLine::Idle),
            other => Err(format!("unknown line type {other:?}")),
        }
    }
}

/// Whether `name` is one of session `session`'s files in the state directory: `ID.history`,
/// `ID.history.1`, `ID.history.base`, `ID.cast`, or a plain file name in `ID.images/`.
pub fn valid_name(session: &str, name: &str) -> bool {
    let plain = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && !s.starts_with('.')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    let Some(rest) = name.strip_prefix(session) else { return false };
    if !crate::ids::valid_id(session) {
        return false;
    }
    match rest {
        ".history" | ".history.1" | ".history.base" | ".cast" => true,
        _ => rest.strip_prefix(".images/").is_some_and(plain),
    }
}

/// Files rewritten in place rather than appended to: sent whole whenever they change.
fn rewritten(name: &str) -> bool {
    name.ends_with(".history.base")
}

/// What one side knows of a file: its inode on the host, its length, and (the host's side) its
/// modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
    ino: u64,
    len: u64,
    mtime: i64,
}

/// The host's side: which of the session's files changed since the last [`scan`](Self::scan).
#[derive(Debug)]
pub struct Follower {
    dir: PathBuf,
    session: String,
    known: BTreeMap<String, Known>,
}

impl Follower {
    /// `haves`: what the relay has (`NAME=INO:LEN`), so that only what it lacks is sent (a file
    /// rewritten in place is sent again whole: its length says nothing of its content).
    pub fn new(dir: &Path, session: &str, haves: &[String]) -> Follower {
        let known = haves
            .iter()
            .filter_map(|h| {
                let (name, rest) = h.split_once('=')?;
                let (ino, len) = rest.split_once(':')?;
                let k = Known { ino: ino.parse().ok()?, len: len.parse().ok()?, mtime: i64::MIN };
                (valid_name(session, name) && !rewritten(name)).then(|| (name.to_owned(), k))
            })
            .collect();
        Follower { dir: dir.to_owned(), session: session.to_owned(), known }
    }

    /// The session's files now, by name.
    fn list(&self) -> BTreeMap<String, Known> {
        let mut names: Vec<String> = [".history", ".history.1", ".history.base", ".cast"]
            .iter()
            .map(|s| format!("{}{s}", self.session))
            .collect();
        let images = format!("{}.images", self.session);
        if let Ok(entries) = fs::read_dir(self.dir.join(&images)) {
            for e in entries.flatten() {
                names.push(format!("{images}/{}", e.file_name().to_string_lossy()));
            }
        }
        names
            .into_iter()
            .filter(|n| valid_name(&self.session, n))
            .filter_map(|n| {
                let m = fs::symlink_metadata(self.dir.join(&n)).ok().filter(|m| m.is_file())?;
                Some((
                    n,
                    Known {
                        ino: m.ino(),
                        len: m.len(),
                        mtime: m.mtime_nsec() + m.mtime() * 1_000_000_000,
                    },
                ))
            })
            .collect()
    }

    /// What changed since the last scan, in the order to apply it.
    pub fn scan(&mut self) -> Vec<FollowLine> {
        let now = self.list();
        let mut out = Vec::new();
        // Renames first: a file now under a name whose inode is one known under another name.
        for (name, k) in &now {
            if self.known.get(name).is_some_and(|old| old.ino == k.ino) {
                continue;
            }
            let from = self
                .known
                .iter()
                .find(|(other, old)| {
                    *other != name
                        && old.ino == k.ino
                        && now.get(*other).is_none_or(|n| n.ino != k.ino)
                })
                .map(|(other, _)| other.clone());
            if let Some(from) = from {
                let moved = self.known.remove(&from).expect("found above");
                self.known.insert(name.clone(), moved);
                out.push(FollowLine::Rename { from, to: name.clone() });
            }
        }
        for (name, k) in &now {
            let old = self.known.get(name).copied();
            let from = match old {
                Some(o)
                    if o.ino == k.ino
                        && o.len == k.len
                        && (o.mtime == k.mtime || o.mtime == i64::MIN) =>
                {
                    continue;
                }
                Some(o) if o.ino == k.ino && k.len > o.len && !rewritten(name) => o.len,
                _ => 0,
            };
            match self.read_from(name, from, k.len) {
                Ok(bytes) => {
                    let sent = bytes.len() as u64;
                    if bytes.is_empty() {
                        out.push(FollowLine::Data {
                            name: name.clone(),
                            ino: k.ino,
                            at: from,
                            data: Vec::new(),
                        });
                    }
                    for (i, chunk) in bytes.chunks(MAX_CHUNK).enumerate() {
                        let at = from + (i * MAX_CHUNK) as u64;
                        out.push(FollowLine::Data {
                            name: name.clone(),
                            ino: k.ino,
                            at,
                            data: chunk.to_vec(),
                        });
                    }
                    self.known.insert(name.clone(), Known { len: from + sent, ..*k });
                }
                // Removed between the listing and the read: the next scan says so.
                Err(_) => continue,
            }
        }
        let gone: Vec<String> =
            self.known.keys().filter(|n| !now.contains_key(*n)).cloned().collect();
        for name in gone {
            self.known.remove(&name);
            out.push(FollowLine::Gone { name });
        }
        out
    }

    /// Bytes `from..to` of `name` (fewer if it is shorter now).
    fn read_from(&self, name: &str, from: u64, to: u64) -> io::Result<Vec<u8>> {
        let mut f = File::open(self.dir.join(name))?;
        f.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        f.take(to.saturating_sub(from)).read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// The relay's side: applies a follower's lines to the state directory `dir`.
#[derive(Debug)]
pub struct Mirror {
    dir: PathBuf,
    session: String,
    /// What it has, by name: the host's inode and the length here.
    have: BTreeMap<String, (u64, u64)>,
    /// Most bytes and files it keeps of the session: a host that sends more (it is not the
    /// relay's machine) is refused, never filling the relay's disk.
    max_bytes: u64,
    max_files: usize,
}

impl Mirror {
    /// A mirror of at most `max_bytes` in all (what the recorder's own bounds allow, with room).
    pub fn new(dir: &Path, session: &str, max_bytes: u64) -> Mirror {
        Mirror {
            dir: dir.to_owned(),
            session: session.to_owned(),
            have: BTreeMap::new(),
            max_bytes,
            max_files: super::images::MAX_FILES + 16,
        }
    }

    /// Bytes it has in all.
    fn total(&self) -> u64 {
        self.have.values().map(|(_, len)| len).sum()
    }

    /// `NAME=INO:LEN` for each file it has: the follower's `--have`s after a drop.
    pub fn haves(&self) -> Vec<String> {
        self.have.iter().map(|(n, (ino, len))| format!("{n}={ino}:{len}")).collect()
    }

    /// Applies one line; `Err` when it does not fit what is here (the channel then starts again,
    /// from what is here).
    pub fn apply(&mut self, line: &FollowLine) -> Result<(), String> {
        let path = |name: &str| self.dir.join(name);
        match line {
            // Not a file: the caller hands it on.
            FollowLine::Idle | FollowLine::Signal { .. } => Ok(()),
            FollowLine::Data { name, ino, at, data } => {
                let have = self.have.get(name).copied();
                if *at != 0 && have != Some((*ino, *at)) {
                    self.have.remove(name);
                    return Err(format!(
                        "{name}: data at {at} does not follow what is here ({have:?})"
                    ));
                }
                let before = if *at == 0 { have.map_or(0, |(_, len)| len) } else { 0 };
                let after = self.total() - before + data.len() as u64;
                if after > self.max_bytes || (have.is_none() && self.have.len() >= self.max_files) {
                    return Err(format!("{name}: over the session's bounds ({after} bytes)"));
                }
                if let Some((dir, _)) = name.split_once('/') {
                    let dir = path(dir);
                    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                    let _ = fs::set_permissions(
                        &dir,
                        std::os::unix::fs::PermissionsExt::from_mode(0o700),
                    );
                }
                let mut f = OpenOptions::new()
                    .create(true)
                    .write(true)
                    .truncate(*at == 0)
                    .append(*at != 0)
                    .mode(0o600)
                    .open(path(name))
                    .map_err(|e| format!("{name}: {e}"))?;
                f.write_all(data).map_err(|e| format!("{name}: {e}"))?;
                self.have.insert(name.clone(), (*ino, at + data.len() as u64));
                Ok(())
            }
            FollowLine::Rename { from, to } => {
                if let Err(e) = fs::rename(path(from), path(to)) {
                    // Both are sent whole on the next channel.
                    self.have.remove(from);
                    self.have.remove(to);
                    return Err(format!("{from} -> {to}: {e}"));
                }
                if let Some(h) = self.have.remove(from) {
                    self.have.insert(to.clone(), h);
                }
                Ok(())
            }
            FollowLine::Gone { name } => {
                let _ = fs::remove_file(path(name));
                self.have.remove(name);
                Ok(())
            }
        }
    }

    /// The session this mirror is of.
    pub fn session(&self) -> &str {
        &self.session
    }
}

/// What a mirror of a session may hold: what its recorder keeps (two history files, the image
/// store's quota and index, the recording), with room for what is being written.
pub fn mirror_bound(history_bytes: u64, cast_bytes: Option<u64>) -> u64 {
    2 * history_bytes
        + super::images::DEFAULT_QUOTA
        + 2 * super::images::MAX_INDEX_BYTES
        + cast_bytes.unwrap_or(0)
        + (16 << 20)
}

/// How often the host's follower looks at the files.
const POLL: std::time::Duration = std::time::Duration::from_millis(200);
/// How often it says `idle` when nothing changed.
const IDLE_EVERY: u32 = 25;

/// The socket a session's recorder on a host sends its signals to (`TERN_SOCKET` there).
pub fn socket_of(dir: &Path, session: &str) -> PathBuf {
    dir.join(format!("{session}.sock"))
}

/// The follower's end of the recorder's socket: takes the request lines waiting, never blocking
/// on one for long (a recorder writes its line and closes).
struct Signals {
    listener: std::os::unix::net::UnixListener,
    path: PathBuf,
}

impl Signals {
    fn bind(path: PathBuf) -> Option<Signals> {
        let _ = fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).ok()?;
        let _ = fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600));
        listener.set_nonblocking(true).ok()?;
        Some(Signals { listener, path })
    }

    fn take(&self) -> Vec<FollowLine> {
        let mut out = Vec::new();
        while let Ok((stream, _)) = self.listener.accept() {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(1)));
            let mut request = Vec::new();
            let _ = stream.take(MAX_SIGNAL as u64 + 1).read_to_end(&mut request);
            if let Some(end) = request.iter().position(|b| *b == b'\n') {
                request.truncate(end);
                out.push(FollowLine::Signal { request });
            }
        }
        out
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// `tern-relay record-follow --history-dir DIR --session ID [--pid PID] [--have NAME=INO:LEN]...`:
/// the host's side. Ends when its stdout is gone (the relay or the channel went away) or, after
/// a last scan, when process PID (the session's mosh-server) has ended: then the session's files
/// on the host are removed.
pub fn main(args: impl Iterator<Item = std::ffi::OsString>) -> std::process::ExitCode {
    let mut dir = None;
    let mut session = None;
    let mut pid: Option<i32> = None;
    let mut haves = Vec::new();
    let mut args = args.map(|a| a.to_string_lossy().into_owned());
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--history-dir", Some(v)) => dir = Some(PathBuf::from(v)),
            ("--session", Some(v)) => session = Some(v),
            ("--pid", Some(v)) => pid = v.parse().ok(),
            ("--have", Some(v)) => haves.push(v),
            _ => {
                eprintln!(
                    "usage: tern-relay record-follow --history-dir DIR --session ID [--pid PID] [--have NAME=INO:LEN]..."
                );
                return std::process::ExitCode::from(2);
            }
        }
    }
    let (Some(dir), Some(session)) = (dir, session) else {
        eprintln!("tern-relay record-follow: --history-dir and --session are needed");
        return std::process::ExitCode::from(2);
    };
    let mut follower = Follower::new(&dir, &session, &haves);
    let signals = Signals::bind(socket_of(&dir, &session));
    let mut out = io::stdout().lock();
    let mut quiet = 0;
    loop {
        let alive = pid.is_none_or(|p| {
            rustix::process::Pid::from_raw(p)
                .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
        });
        let mut lines = follower.scan();
        lines.extend(signals.iter().flat_map(Signals::take));
        if lines.is_empty() {
            quiet += 1;
        }
        let idle = (quiet >= IDLE_EVERY).then(|| vec![FollowLine::Idle]);
        for line in lines.iter().chain(idle.iter().flatten()) {
            quiet = 0;
            if out.write_all(&line.encode()).is_err() {
                return std::process::ExitCode::SUCCESS;
            }
        }
        if out.flush().is_err() {
            return std::process::ExitCode::SUCCESS;
        }
        if !alive {
            // The session is over and the relay has its last lines: the host keeps nothing of
            // it (the relay drops its own copy with the session's record).
            super::remove(&dir, &session);
            return std::process::ExitCode::SUCCESS;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef";

    /// Everything a follower on `host` says, applied to a mirror on `relay`.
    fn sync(f: &mut Follower, m: &mut Mirror) {
        for line in f.scan() {
            let wire = line.encode();
            assert!(wire.len() <= MAX_LINE);
            let back = FollowLine::decode(&wire[..wire.len() - 1], ID).unwrap();
            assert_eq!(back, line);
            m.apply(&back).unwrap();
        }
    }

    fn same(host: &Path, relay: &Path, name: &str) {
        assert_eq!(fs::read(host.join(name)).ok(), fs::read(relay.join(name)).ok(), "{name}");
    }

    #[test]
    fn growth_rotation_rewrites_images_and_a_restart_from_haves_mirror_the_files_exactly() {
        let (host, relay) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (h, r) = (host.path(), relay.path());
        let mut f = Follower::new(h, ID, &[]);
        let mut m = Mirror::new(r, ID, 1 << 30);
        let hist = format!("{ID}.history");
        let append = |name: &str, text: &[u8]| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(h.join(name))
                .unwrap()
                .write_all(text)
                .unwrap();
        };
        append(&hist, b"one\ntwo\n");
        sync(&mut f, &mut m);
        same(h, r, &hist);
        append(&hist, b"three\n");
        let lines = f.scan();
        assert_eq!(lines.len(), 1);
        assert!(
            matches!(&lines[0], FollowLine::Data { at: 8, data, .. } if data == b"three\n"),
            "{lines:?}"
        );
        for l in &lines {
            m.apply(l).unwrap();
        }
        same(h, r, &hist);
        // A rotation: the current file renamed over the previous one, the base rewritten, a new
        // current started.
        fs::write(h.join(format!("{ID}.history.base")), "0").unwrap();
        fs::rename(h.join(&hist), h.join(format!("{ID}.history.1"))).unwrap();
        append(&hist, b"four\n");
        fs::write(h.join(format!("{ID}.history.base")), "10").unwrap();
        let lines = f.scan();
        assert!(lines.iter().any(|l| matches!(l, FollowLine::Rename { .. })), "{lines:?}");
        for l in &lines {
            m.apply(l).unwrap();
        }
        for n in [".history", ".history.1", ".history.base"] {
            same(h, r, &format!("{ID}{n}"));
        }
        // Images: a file and an index line; one removed; a big one in chunks.
        fs::create_dir(h.join(format!("{ID}.images"))).unwrap();
        let big: Vec<u8> = (0..MAX_CHUNK * 2 + 7).map(|i| (i * 13) as u8).collect();
        fs::write(h.join(format!("{ID}.images/1.png")), &big).unwrap();
        append(&format!("{ID}.images/index.jsonl"), b"{\"id\":1}\n");
        sync(&mut f, &mut m);
        same(h, r, &format!("{ID}.images/1.png"));
        same(h, r, &format!("{ID}.images/index.jsonl"));
        fs::remove_file(h.join(format!("{ID}.images/1.png"))).unwrap();
        sync(&mut f, &mut m);
        assert!(!r.join(format!("{ID}.images/1.png")).exists());

        // The channel drops; more is written meanwhile (the base rewritten to the same length);
        // a new follower from the mirror's haves sends only what is new, and the base whole:
        // nothing twice, nothing lost.
        append(&hist, b"five\n");
        fs::write(h.join(format!("{ID}.history.base")), "20").unwrap();
        let mut again = Follower::new(h, ID, &m.haves());
        let lines = again.scan();
        let sent: Vec<&[u8]> = lines
            .iter()
            .filter_map(|l| match l {
                FollowLine::Data { data, .. } => Some(data.as_slice()),
                _ => None,
            })
            .collect();
        assert_eq!(sent, [b"five\n".as_slice(), b"20".as_slice()], "{lines:?}");
        for l in &lines {
            m.apply(l).unwrap();
        }
        same(h, r, &hist);
        same(h, r, &format!("{ID}.history.base"));
        assert_eq!(fs::read_to_string(r.join(&hist)).unwrap(), "four\nfive\n");
    }

    #[test]
    fn lines_out_of_step_or_naming_other_files_are_refused_without_harm() {
        let relay = tempfile::tempdir().unwrap();
        let mut m = Mirror::new(relay.path(), ID, 100);
        let big = FollowLine::Data {
            name: format!("{ID}.history"),
            ino: 1,
            at: 0,
            data: vec![b'x'; 101],
        };
        assert!(m.apply(&big).is_err(), "over the bound");
        let skip =
            FollowLine::Data { name: format!("{ID}.history"), ino: 1, at: 5, data: b"x".to_vec() };
        assert!(m.apply(&skip).is_err(), "data past what is here");
        for bad in [
            r#"{"t":"data","name":"../etc/passwd","ino":1,"at":0,"data":""}"#.to_owned(),
            format!(r#"{{"t":"data","name":"{ID}.images/../x","ino":1,"at":0,"data":""}}"#),
            format!(r#"{{"t":"gone","name":"{ID}.images/.hidden"}}"#),
            format!(r#"{{"t":"rename","from":"{ID}.history","to":"other.history"}}"#),
            format!(r#"{{"t":"data","name":"{ID}.history","ino":1,"at":0,"data":"!!"}}"#),
            r#"{"t":"what"}"#.to_owned(),
            "not json".to_owned(),
        ] {
            assert!(FollowLine::decode(bad.as_bytes(), ID).is_err(), "{bad}");
        }
        assert!(fs::read_dir(relay.path()).unwrap().next().is_none(), "nothing written");
        assert!(valid_name(ID, &format!("{ID}.images/12.png")));
    }
}
