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
//! The store keeps at most `quota` bytes of image files and [`MAX_FILES`] files: storing past
//! either deletes the oldest first (each with an `evicted` line); an image larger than the quota
//! is not stored (a `dropped` line says so). A file is written whole before its index line, so a
//! reader that sees the line finds the file (unless it was evicted since: an `evicted` line
//! follows). The index is bounded too: past [`MAX_INDEX_BYTES`] it is rewritten (a new file
//! renamed over it) with a `{"compacted":true,"next_id":N}` line and the lines of the images
//! still stored, so the disk a session's images take stays bounded however many it prints.

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
/// Most image files a session keeps (the oldest go first).
pub const MAX_FILES: usize = 10_000;
/// The index's size past which it is rewritten with only the images still stored.
pub const MAX_INDEX_BYTES: u64 = 4 * 1024 * 1024;

/// A stored image: its id, file name, bytes, and index line (for a rewrite of the index).
#[derive(Debug)]
struct Stored {
    id: u64,
    file: String,
    bytes: u64,
    line: String,
}

/// Session `id`'s image directory in the state directory `dir`.
pub fn dir_of(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}{DIR_SUFFIX}"))
}

/// The recorder's side: stores images and appends their index lines.
#[derive(Debug)]
pub struct ImageStore {
    dir: PathBuf,
    index: File,
    /// Bytes in the index file.
    index_bytes: u64,
    quota: u64,
    next_id: u64,
    /// Stored files, oldest first.
    files: VecDeque<Stored>,
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
        let index_bytes = index.metadata()?.len();
        // What an earlier recorder of the session wrote: each image's line, the ids used.
        let (mut lines, mut next_id) = (std::collections::HashMap::new(), 1);
        if index_bytes <= 2 * MAX_INDEX_BYTES {
            for line in fs::read_to_string(dir.join(INDEX)).unwrap_or_default().lines() {
                let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
                if let Some(n) = v["next_id"].as_u64() {
                    next_id = next_id.max(n);
                }
                if let Some(id) = v["id"].as_u64() {
                    next_id = next_id.max(id + 1);
                    lines.insert(id, line.to_owned());
                }
            }
        }
        let mut files = Vec::new();
        for entry in fs::read_dir(&dir)?.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let id = file.split_once('.').and_then(|(n, _)| n.parse::<u64>().ok());
            if let (Some(id), Ok(meta)) = (id, entry.metadata()) {
                let line = lines.remove(&id).unwrap_or_default();
                files.push(Stored { id, file, bytes: meta.len(), line });
            }
        }
        files.sort_unstable_by_key(|f| f.id);
        next_id = next_id.max(files.last().map_or(1, |f| f.id + 1));
        let total = files.iter().map(|f| f.bytes).sum();
        Ok(ImageStore { dir, index, index_bytes, quota, next_id, files: files.into(), total })
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
        while self.total + size > self.quota || self.files.len() >= MAX_FILES {
            let Some(old) = self.files.pop_front() else { break };
            let _ = fs::remove_file(self.dir.join(&old.file));
            self.total -= old.bytes;
            self.append(&json!({ "evicted": old.id }))?;
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
        let line = position(line, at);
        self.files.push_back(Stored { id, file, bytes: size, line: line.to_string() });
        self.total += size;
        self.append(&line)?;
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
        self.index.write_all(text.as_bytes())?;
        self.index_bytes += text.len() as u64;
        if self.index_bytes > MAX_INDEX_BYTES {
            self.compact()?;
        }
        Ok(())
    }

    /// Rewrites the index with the lines of the images still stored (renamed over it whole).
    fn compact(&mut self) -> io::Result<()> {
        let mut text = json!({ "compacted": true, "next_id": self.next_id }).to_string();
        text.push('\n');
        for f in self.files.iter().filter(|f| !f.line.is_empty()) {
            text.push_str(&f.line);
            text.push('\n');
        }
        let tmp = self.dir.join(format!("{INDEX}.tmp"));
        let mut out =
            OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        out.write_all(text.as_bytes())?;
        fs::rename(&tmp, self.dir.join(INDEX))?;
        self.index = OpenOptions::new().append(true).open(self.dir.join(INDEX))?;
        self.index_bytes = text.len() as u64;
        Ok(())
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

/// Why [`read_image`] has no image to give.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadImageError {
    /// Never stored, or evicted by the quota since.
    Unknown,
    /// The store could not be read.
    Io(String),
}

/// The page's side: image `id` of session `session` as a browser draws it, with its index
/// entry (`tern::relay_proto::image`). PNG, JPEG, GIF and WebP as stored; SIXEL and raw pixels
/// converted to PNG; anything else (TIFF) or a conversion that fails becomes a small placeholder
/// picture whose `name` says why.
pub fn read_image(
    dir: &Path,
    session: &str,
    id: u64,
) -> Result<(tern::relay_proto::ImageInfo, Vec<u8>), ReadImageError> {
    use tern::images::convert;
    let dir = dir_of(dir, session);
    let index = match fs::read_to_string(dir.join(INDEX)) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadImageError::Unknown),
        Err(e) => return Err(ReadImageError::Io(e.to_string())),
    };
    let entry = index
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"].as_u64() == Some(id))
        .ok_or(ReadImageError::Unknown)?;
    let file = entry["file"].as_str().unwrap_or_default();
    // Only a name the recorder makes (`<n>.<format>`), never a path.
    if file.is_empty() || file.contains('/') || file.starts_with('.') {
        return Err(ReadImageError::Unknown);
    }
    let data = match fs::read(dir.join(file)) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadImageError::Unknown),
        Err(e) => return Err(ReadImageError::Io(e.to_string())),
    };
    let num = |k: &str| entry[k].as_u64().and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    let (width, height) = (num("width"), num("height"));
    let format = entry["format"].as_str().unwrap_or_default();
    let mut info = tern::relay_proto::ImageInfo {
        cols: num("cols"),
        rows: num("rows"),
        width,
        height,
        mime: String::new(),
        name: entry["name"].as_str().map(str::to_owned),
        size: 0,
        id: None,
    };
    let converted = match format {
        "png" | "jpeg" | "gif" | "webp" => {
            info.mime = format!("image/{format}");
            info.size = data.len() as u64;
            return Ok((info, data));
        }
        "sixel" => convert::sixel_to_rgba(&data, width, height),
        "rgb" => convert::raw_to_rgba(&data, width, height, 3),
        "rgba" => convert::raw_to_rgba(&data, width, height, 4),
        other => Err(format!("{other} images cannot be shown in a browser yet")),
    };
    info.mime = "image/png".into();
    match converted {
        Ok(rgba) => {
            let png = convert::png(&rgba);
            info.size = png.len() as u64;
            Ok((info, png))
        }
        Err(why) => {
            // A grey tile; the page shows `name` over it.
            info.name = Some(format!("[{why}]"));
            let (w, h) = (width.clamp(1, 256), height.clamp(1, 256));
            let pixels = [96, 96, 96, 255].repeat((w * h) as usize);
            let png = convert::png(&convert::Rgba { width: w, height: h, pixels });
            info.size = png.len() as u64;
            Ok((info, png))
        }
    }
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
        // Ids are not reused even when every file is gone.
        drop(s);
        for f in ["3.png", "4.png"] {
            fs::remove_file(dir.join(f)).unwrap();
        }
        let mut s = ImageStore::open(tmp.path(), "ab", 100).unwrap();
        assert_eq!(s.store(&image(1), &at).unwrap(), Some(5));
        // Removing the history removes the images.
        crate::history::remove(tmp.path(), "ab");
        assert!(!dir.exists());
    }

    #[test]
    fn the_page_gets_stored_images_converted_and_unknown_or_evicted_ones_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let at = Anchor { line: 0, row: 0, col: 0, alternate: false };
        let mut s = ImageStore::open(tmp.path(), "ab", 100).unwrap();
        assert_eq!(s.store(&image(40), &at).unwrap(), Some(1));
        let (info, bytes) = read_image(tmp.path(), "ab", 1).unwrap();
        assert_eq!((info.mime.as_str(), bytes), ("image/png", vec![40u8; 40]));
        assert_eq!(read_image(tmp.path(), "ab", 9), Err(ReadImageError::Unknown));
        assert_eq!(read_image(tmp.path(), "cd", 1), Err(ReadImageError::Unknown));
        // Evicted by the quota: gone.
        s.store(&image(40), &at).unwrap();
        s.store(&image(40), &at).unwrap();
        assert_eq!(read_image(tmp.path(), "ab", 1), Err(ReadImageError::Unknown));
        // A SIXEL becomes a PNG of its size.
        let mut sixel = image(0);
        sixel.format = ImageFormat::Sixel;
        sixel.data = b"\x1bPq\"1;1;5;7#1;2;0;0;100#1!5~-!5@\x1b\\".to_vec();
        (sixel.width, sixel.height) = (5, 7);
        let id = s.store(&sixel, &at).unwrap().unwrap();
        let (info, png) = read_image(tmp.path(), "ab", id).unwrap();
        assert_eq!(info.mime, "image/png");
        assert_eq!(tern::images::pixel_size(&png), Some((ImageFormat::Png, 5, 7)));
        // A TIFF: a placeholder saying so.
        let mut tiff = image(10);
        tiff.format = ImageFormat::Tiff;
        let id = s.store(&tiff, &at).unwrap().unwrap();
        let (info, png) = read_image(tmp.path(), "ab", id).unwrap();
        assert!(info.name.unwrap().contains("tiff"), "says the format");
        assert!(png.starts_with(b"\x89PNG"));
    }
}

#[cfg(test)]
mod bounds {
    use super::*;
    use tern::images::{CursorAfter, DropReason, ImageFormat, Protocol};

    #[test]
    fn many_images_keep_the_files_and_the_index_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let at = Anchor { line: 1, row: 0, col: 0, alternate: false };
        let mut s = ImageStore::open(tmp.path(), "ab", 1 << 30).unwrap();
        let image = LiftedImage {
            protocol: Protocol::Kitty,
            format: ImageFormat::Png,
            data: vec![1],
            width: 1,
            height: 1,
            cols: 1,
            rows: 1,
            cursor: CursorAfter::BelowRight,
            name: None,
        };
        let d = Dropped { protocol: Protocol::Sixel, reason: DropReason::Ended, bytes: 1 };
        let n = 2 * MAX_FILES as u64;
        for _ in 0..n {
            s.store(&image, &at).unwrap();
            s.dropped(&d, &at).unwrap();
        }
        let dir = dir_of(tmp.path(), "ab");
        let files = fs::read_dir(&dir).unwrap().count();
        assert_eq!(files, MAX_FILES + 1, "the files and the index");
        let index = fs::read_to_string(dir.join(INDEX)).unwrap();
        assert!(index.len() as u64 <= MAX_INDEX_BYTES, "{} bytes", index.len());
        assert!(index.contains("\"compacted\":true"));
        // Every image still stored has its line; the newest is there.
        let ids: Vec<u64> = index
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["id"].as_u64())
            .collect();
        assert!(ids.contains(&n), "the newest image's line");
        assert!(ids.contains(&(n - MAX_FILES as u64 + 1)), "the oldest kept image's line");
        // A recorder reopening the store goes on after the newest id.
        drop(s);
        let mut s = ImageStore::open(tmp.path(), "ab", 1 << 30).unwrap();
        assert_eq!(s.store(&image, &at).unwrap(), Some(n + 1));
    }
}
