//! A session's image store: the images its recorder lifted out of the pty stream
//! (`tern::images`), beside its history, for the relay to show on the page.
//!
//! `<id>.images/` in the state directory (0700): one file per image, `<n>.<format>` (0600; n from
//! 1, never reused), and `index.jsonl` (0600), one JSON object per line, appended in stream
//! order (docs/IMAGES.md has the fields):
//!
//! ```text
//! {"id":3,"file":"3.png","line":120,"row":5,"col":0,"alternate":false,"cols":30,"rows":10,
//!  "width":300,"height":200,"format":"png","protocol":"iterm","bytes":1234,"sha256":"…"}
//! {"dropped":"truncated: the output ended","protocol":"sixel","bytes":5000,"line":130,…}
//! {"evicted":3}
//! ```
//!
//! The store keeps at most `quota` bytes of image files: storing past it deletes the oldest
//! first (each with an `evicted` line); an image larger than the quota is not stored (a
//! `dropped` line says so). A file is written whole before its index line, so a reader that
//! sees the line finds the file (unless it was evicted since: an `evicted` line follows).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tern::images::{Anchor, Dropped, LiftedImage};

/// What ends the name of a session's image directory.
pub const DIR_SUFFIX: &str = ".images";
/// The index's name in the directory.
pub const INDEX: &str = "index.jsonl";
/// Image bytes a session keeps by default.
pub const DEFAULT_QUOTA: u64 = 64 * 1024 * 1024;

/// Session `id`'s image directory in the state directory `dir`.
pub fn dir_of(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}{DIR_SUFFIX}"))
}

/// The recorder's side: stores images and appends their index lines.
#[derive(Debug)]
pub struct ImageStore {
    dir: PathBuf,
    index: File,
    quota: u64,
    next_id: u64,
    /// Stored files, oldest first: (id, file name, bytes).
    files: VecDeque<(u64, String, u64)>,
    total: u64,
}

impl ImageStore {
    /// Opens (creating) session `id`'s store in `dir`, keeping at most `quota` bytes of images.
    /// Files left by an earlier recorder of the same session count towards the quota.
    pub fn open(dir: &Path, id: &str, quota: u64) -> io::Result<ImageStore> {
        let dir = dir_of(dir, id);
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let index =
            OpenOptions::new().create(true).append(true).mode(0o600).open(dir.join(INDEX))?;
        let mut files = Vec::new();
        for entry in fs::read_dir(&dir)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.split_once('.').and_then(|(n, _)| n.parse::<u64>().ok());
            if let (Some(id), Ok(meta)) = (id, entry.metadata()) {
                files.push((id, name, meta.len()));
            }
        }
        files.sort_unstable();
        let next_id = files.last().map_or(1, |f| f.0 + 1);
        let total = files.iter().map(|f| f.2).sum();
        Ok(ImageStore { dir, index, quota, next_id, files: files.into(), total })
    }

    /// Stores `image` lifted at `at`; returns its id (None: larger than the quota, dropped).
    pub fn store(&mut self, image: &LiftedImage, at: &Anchor) -> io::Result<Option<u64>> {
        let size = image.data.len() as u64;
        if size > self.quota {
            let why = format!("larger than the session's image quota of {} bytes", self.quota);
            self.append(&position(
                json!({"dropped": why, "protocol": image.protocol.name(), "bytes": size}),
                at,
            ))?;
            return Ok(None);
        }
        while self.total + size > self.quota {
            let Some((old, name, bytes)) = self.files.pop_front() else { break };
            let _ = fs::remove_file(self.dir.join(&name));
            self.total -= bytes;
            self.append(&json!({ "evicted": old }))?;
        }
        let id = self.next_id;
        self.next_id += 1;
        let file = format!("{id}.{}", image.format.name());
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(self.dir.join(&file))?;
        f.write_all(&image.data)?;
        self.files.push_back((id, file.clone(), size));
        self.total += size;
        let mut line = json!({
            "id": id,
            "file": file,
            "cols": image.cols,
            "rows": image.rows,
            "width": image.width,
            "height": image.height,
            "format": image.format.name(),
            "protocol": image.protocol.name(),
            "bytes": size,
            "sha256": hex(&Sha256::digest(&image.data)),
        });
        if let Some(name) = &image.name {
            line["name"] = json!(name);
        }
        self.append(&position(line, at))?;
        Ok(Some(id))
    }

    /// Notes an image that was dropped, and why.
    pub fn dropped(&mut self, d: &Dropped, at: &Anchor) -> io::Result<()> {
        let line = json!({
            "dropped": d.reason.to_string(),
            "protocol": d.protocol.name(),
            "bytes": d.bytes,
        });
        self.append(&position(line, at))
    }

    /// Bytes of images stored.
    pub fn total(&self) -> u64 {
        self.total
    }

    fn append(&mut self, line: &Value) -> io::Result<()> {
        let mut text = line.to_string();
        text.push('\n');
        self.index.write_all(text.as_bytes())
    }
}

fn position(mut line: Value, at: &Anchor) -> Value {
    line["line"] = json!(at.line);
    line["row"] = json!(at.row);
    line["col"] = json!(at.col);
    line["alternate"] = json!(at.alternate);
    line
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use tern::images::{CursorAfter, DropReason, ImageFormat, Protocol};

    fn image(n: usize) -> LiftedImage {
        LiftedImage {
            protocol: Protocol::Kitty,
            format: ImageFormat::Png,
            data: vec![n as u8; n],
            width: 10,
            height: 20,
            cols: 1,
            rows: 1,
            cursor: CursorAfter::BelowRight,
            name: None,
        }
    }

    fn index(dir: &Path) -> Vec<Value> {
        fs::read_to_string(dir_of(dir, "ab").join(INDEX))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn stores_0600_files_with_index_lines_and_drops_the_oldest_past_the_quota() {
        let tmp = tempfile::tempdir().unwrap();
        let at = Anchor { line: 7, row: 2, col: 3, alternate: false };
        let mut s = ImageStore::open(tmp.path(), "ab", 100).unwrap();
        assert_eq!(s.store(&image(40), &at).unwrap(), Some(1));
        assert_eq!(s.store(&image(40), &at).unwrap(), Some(2));
        // A third does not fit: the first goes.
        assert_eq!(s.store(&image(40), &at).unwrap(), Some(3));
        assert_eq!(s.store(&image(101), &at).unwrap(), None);
        let d = Dropped { protocol: Protocol::Sixel, reason: DropReason::Ended, bytes: 9 };
        s.dropped(&d, &at).unwrap();
        assert_eq!(s.total(), 80);
        let dir = dir_of(tmp.path(), "ab");
        assert!(!dir.join("1.png").exists());
        let mode = fs::metadata(dir.join("2.png")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mode = fs::metadata(dir.join(INDEX)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let lines = index(tmp.path());
        assert_eq!(lines.len(), 6, "{lines:?}");
        assert_eq!(lines[0]["file"], "1.png");
        assert_eq!(lines[0]["line"], 7);
        assert_eq!(lines[0]["col"], 3);
        assert_eq!(lines[0]["sha256"], hex(&Sha256::digest([40u8; 40])));
        assert_eq!(lines[2]["evicted"], 1);
        assert!(lines[4]["dropped"].as_str().unwrap().contains("quota"));
        assert_eq!(lines[5]["dropped"], "truncated: the output ended");
        // A later recorder of the same session goes on numbering, the old files in its quota.
        let mut s = ImageStore::open(tmp.path(), "ab", 100).unwrap();
        assert_eq!(s.total(), 80);
        assert_eq!(s.store(&image(40), &at).unwrap(), Some(4));
        assert!(!dir.join("2.png").exists());
        // Removing the history removes the images.
        crate::history::remove(tmp.path(), "ab");
        assert!(!dir.exists());
    }
}
