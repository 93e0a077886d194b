//! The audit trail: one JSON line per event in `audit.log` in the state directory (0600) and in
//! the log (target `tern_relay::audit`): who (`owner` or a named token's name), from which
//! address and browser, did what (attach, resume, take-over, detach, end, upload, download,
//! token added or revoked, refused attempts). Never keystrokes, screen content, tokens, proofs
//! or keys: every field is one of [`Fields`]'s, filled by the relay from what it decided, and
//! a peer's text (the User-Agent) is cut short and escaped by the JSON writer.
//!
//! Bounded: past [`MAX_BYTES`] the file becomes `audit.log.1` (the one old file kept) and a new
//! one starts.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value};

pub const FILE: &str = "audit.log";
pub const OLD_FILE: &str = "audit.log.1";
/// The size at which the file is rotated.
pub const MAX_BYTES: u64 = 4 << 20;
/// A peer's User-Agent is kept to this many characters.
const MAX_AGENT: usize = 200;

/// What one event says besides its name and time.
#[derive(Debug, Default, Clone)]
pub struct Fields(Map<String, Value>);

impl Fields {
    pub fn new() -> Fields {
        Fields::default()
    }

    fn set(mut self, key: &str, value: impl Into<Value>) -> Fields {
        self.0.insert(key.into(), value.into());
        self
    }

    /// `owner` or a named token's name.
    pub fn who(self, name: &str) -> Fields {
        self.set("who", name)
    }

    pub fn addr(self, addr: impl std::fmt::Display) -> Fields {
        self.set("addr", addr.to_string())
    }

    pub fn agent(self, agent: Option<&str>) -> Fields {
        match agent {
            Some(a) => self.set("agent", a.chars().take(MAX_AGENT).collect::<String>()),
            None => self,
        }
    }

    pub fn session(self, id: &str) -> Fields {
        self.set("session", id)
    }

    pub fn link(self, kind: &str) -> Fields {
        self.set("link", kind)
    }

    pub fn kind(self, kind: &str) -> Fields {
        self.set("kind", kind)
    }

    /// Why (a refusal's reason, how a session ended): the relay's own words.
    pub fn reason(self, reason: &str) -> Fields {
        self.set("reason", reason)
    }

    /// A file's name (an upload's, a download's): what it is, not what is in it.
    pub fn file(self, name: &str) -> Fields {
        self.set("file", name.chars().take(MAX_AGENT).collect::<String>())
    }

    pub fn bytes(self, n: u64) -> Fields {
        self.set("bytes", n)
    }
}

/// The trail of one state directory (none in bridge mode without one: the log only).
#[derive(Debug)]
pub struct Audit {
    dir: Option<PathBuf>,
    file: Mutex<()>,
}

impl Audit {
    pub fn open(dir: Option<&Path>) -> Audit {
        Audit { dir: dir.map(Path::to_path_buf), file: Mutex::new(()) }
    }

    /// Records `event`: to the log, and appended to the file.
    pub fn event(&self, event: &str, fields: &Fields) {
        let mut line = Map::new();
        line.insert("time".into(), unix_now().into());
        line.insert("event".into(), event.into());
        for (k, v) in &fields.0 {
            line.insert(k.clone(), v.clone());
        }
        let text = Value::Object(line).to_string();
        tracing::info!(target: "tern_relay::audit", "{text}");
        let Some(dir) = &self.dir else { return };
        let _guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = append(dir, &text) {
            tracing::warn!("cannot write the audit trail in {}: {e}", dir.display());
        }
    }
}

/// Unix seconds now.
fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn append(dir: &Path, line: &str) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let path = dir.join(FILE);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() >= MAX_BYTES) {
        std::fs::rename(&path, dir.join(OLD_FILE))?;
    }
    let mut f = std::fs::OpenOptions::new().append(true).create(true).mode(0o600).open(&path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// The events of the old and the current file (oldest first) at or after `since` (unix seconds).
pub fn read_since(dir: &Path, since: u64) -> Vec<String> {
    let mut out = Vec::new();
    for name in [OLD_FILE, FILE] {
        let Ok(text) = std::fs::read_to_string(dir.join(name)) else { continue };
        for line in text.lines() {
            let time = serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|v| v.get("time").and_then(Value::as_u64));
            if time.is_some_and(|t| t >= since) {
                out.push(line.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_private_json_lines_rotated_with_one_old_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let audit = Audit::open(Some(dir.path()));
        audit.event("attach", &Fields::new().who("owner").addr("127.0.0.1").agent(Some("a\"b\n")));
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        let v: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["event"], "attach");
        assert_eq!(v["agent"], "a\"b\n", "a peer's text is escaped, one line");
        assert_eq!(text.lines().count(), 1);
        let mode = std::fs::metadata(dir.path().join(FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Rotation: past the cap the file moves to .1 and the next event starts a new one.
        let big = std::fs::OpenOptions::new().append(true).open(dir.path().join(FILE)).unwrap();
        big.set_len(MAX_BYTES).unwrap();
        audit.event("detach", &Fields::new().who("owner"));
        assert_eq!(std::fs::metadata(dir.path().join(OLD_FILE)).unwrap().len(), MAX_BYTES);
        let now = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(now.contains("detach") && now.lines().count() == 1);
        assert_eq!(read_since(dir.path(), 0).iter().filter(|l| l.contains("event")).count(), 2);
        assert!(read_since(dir.path(), u64::MAX).is_empty());
    }
}
