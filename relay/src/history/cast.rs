//! Session recordings (`--record-sessions`): the recorder's output stream, as it went to
//! mosh-server, saved as an asciicast v2 file (`<id>.cast` beside the history, 0600), which
//! `tern-relay export SESSION` prints and asciinema plays.
//!
//! ```text
//! {"version": 2, "width": 80, "height": 24, "timestamp": 1765000000, "env": {...}}
//! [0.012345, "o", "$ "]
//! [1.500000, "r", "100x30"]
//! [9.000000, "m", "recording stopped: ..."]
//! ```
//!
//! Output only, never keystrokes: the recorder writes here what the shell printed (what a
//! program echoes, the shell's echo of typed commands included, is output; a password typed
//! with echo off never is). Each event's data is a JSON string, so the output is cut on UTF-8
//! character boundaries: a character split across reads waits for its rest; bytes that are not
//! UTF-8 become U+FFFD. Bounded: an event that would take the file past its cap is not written;
//! a last `"m"` (marker) event says the recording stopped, and nothing more is written.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bytes a recording takes at most by default (`--record-bytes`).
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Room kept under the cap for the last marker event.
const MARKER_ROOM: u64 = 256;

/// The recording file of session `id` in `dir`.
pub fn path_of(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.cast"))
}

/// The file name suffix (for pruning leftovers and removing a session's files).
pub const SUFFIX: &str = ".cast";

/// The asciicast encoding of one output stream, with no I/O: the lines to append come back as
/// bytes.
#[derive(Debug)]
pub struct Encoder {
    /// The end of the last read's bytes that may start a UTF-8 character (at most 3).
    pending: Vec<u8>,
    /// Bytes written so far (header included).
    written: u64,
    max_bytes: u64,
    /// The cap was reached: the marker is out, nothing more is written.
    stopped: bool,
}

impl Encoder {
    /// An encoder for a recording of at most `max_bytes` bytes.
    pub fn new(max_bytes: u64) -> Encoder {
        Encoder { pending: Vec::new(), written: 0, max_bytes, stopped: false }
    }

    /// The header line: size, start time (unix seconds), TERM and SHELL.
    pub fn header(
        &mut self,
        cols: u16,
        rows: u16,
        timestamp: u64,
        term: &str,
        shell: &str,
    ) -> Vec<u8> {
        let h = serde_json::json!({
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": timestamp,
            "env": {"TERM": term, "SHELL": shell},
        });
        let line = format!("{h}\n").into_bytes();
        self.written += line.len() as u64;
        line
    }

    /// Whether the cap stopped the recording.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// An output event for `bytes` at `time` seconds (empty when nothing complete is left to
    /// write, or the recording stopped).
    pub fn output(&mut self, time: f64, bytes: &[u8]) -> Vec<u8> {
        if self.stopped {
            return Vec::new();
        }
        self.pending.extend_from_slice(bytes);
        let text = take_text(&mut self.pending, false);
        self.event(time, "o", &text)
    }

    /// A resize event (`COLSxROWS`).
    pub fn resize(&mut self, time: f64, cols: u16, rows: u16) -> Vec<u8> {
        self.event(time, "r", &format!("{cols}x{rows}"))
    }

    /// The end of the output: what was left of a cut character (as U+FFFD).
    pub fn finish(&mut self, time: f64) -> Vec<u8> {
        if self.stopped {
            return Vec::new();
        }
        let text = take_text(&mut self.pending, true);
        self.event(time, "o", &text)
    }

    fn event(&mut self, time: f64, kind: &str, data: &str) -> Vec<u8> {
        if self.stopped || data.is_empty() {
            return Vec::new();
        }
        let line = line(time, kind, data);
        if self.written + line.len() as u64 + MARKER_ROOM > self.max_bytes {
            self.stopped = true;
            let why = format!(
                "recording stopped: it reached its cap of {} bytes (--record-bytes)",
                self.max_bytes
            );
            let marker = self::line(time, "m", &why);
            self.written += marker.len() as u64;
            return marker;
        }
        self.written += line.len() as u64;
        line
    }
}

fn line(time: f64, kind: &str, data: &str) -> Vec<u8> {
    // A string always serializes.
    let data = serde_json::to_string(data).unwrap_or_default();
    format!("[{time:.6}, \"{kind}\", {data}]\n").into_bytes()
}

/// The text of `pending`'s complete characters (invalid bytes as U+FFFD), leaving in it the
/// start of a character cut at its end (unless `end`).
fn take_text(pending: &mut Vec<u8>, end: bool) -> String {
    let mut text = String::new();
    let mut rest: &[u8] = pending;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                text.push_str(s);
                rest = &[];
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                // Valid by the error's own word.
                text.push_str(std::str::from_utf8(good).unwrap_or_default());
                match e.error_len() {
                    Some(n) => {
                        text.push('\u{fffd}');
                        rest = &bad[n..];
                    }
                    // A character cut at the end: its rest comes with the next read.
                    None if !end => {
                        rest = bad;
                        break;
                    }
                    None => {
                        text.push('\u{fffd}');
                        rest = &[];
                        break;
                    }
                }
            }
        }
    }
    let keep = rest.len();
    let from = pending.len() - keep;
    pending.drain(..from);
    text
}

/// The recorder's recording: the encoder and its file. A write error (a full disk) stops the
/// recording, never the session.
#[derive(Debug)]
pub struct Recording {
    encoder: Encoder,
    file: Option<File>,
    start: Instant,
    size: (u16, u16),
    /// Where the audit trail is (the state directory), and the session, for the cap's event.
    audit: Option<(PathBuf, String)>,
}

impl Recording {
    /// Creates (0600, truncating) session `id`'s recording in `dir`, `max_bytes` at most, for a
    /// terminal of `cols`×`rows`.
    pub fn create(
        dir: &Path,
        id: &str,
        max_bytes: u64,
        cols: u16,
        rows: u16,
    ) -> io::Result<Recording> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path_of(dir, id))?;
        let mut encoder = Encoder::new(max_bytes);
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let env = |k| std::env::var(k).unwrap_or_default();
        file.write_all(&encoder.header(cols, rows, timestamp, &env("TERM"), &env("SHELL")))?;
        Ok(Recording {
            encoder,
            file: Some(file),
            start: Instant::now(),
            size: (cols, rows),
            audit: dir.parent().map(|d| (d.to_path_buf(), id.to_owned())),
        })
    }

    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Records output that went to mosh-server, after a resize event if the size changed.
    pub fn output(&mut self, bytes: &[u8], cols: u16, rows: u16) {
        if self.file.is_none() {
            return;
        }
        let t = self.now();
        let mut out = Vec::new();
        if (cols, rows) != self.size {
            self.size = (cols, rows);
            out = self.encoder.resize(t, cols, rows);
        }
        out.extend(self.encoder.output(t, bytes));
        self.write(&out);
    }

    /// The output ended (at a terminal of `cols`×`rows`: a last resize no output followed is
    /// recorded too).
    pub fn finish(&mut self, cols: u16, rows: u16) {
        if self.file.is_some() {
            let t = self.now();
            let mut out = self.encoder.finish(t);
            if (cols, rows) != self.size {
                self.size = (cols, rows);
                out.extend(self.encoder.resize(t, cols, rows));
            }
            self.write(&out);
        }
    }

    fn write(&mut self, out: &[u8]) {
        let Some(file) = self.file.as_mut() else { return };
        if !out.is_empty() && file.write_all(out).is_err() {
            self.file = None;
            return;
        }
        if self.encoder.stopped() {
            self.file = None;
            if let Some((dir, id)) = &self.audit {
                crate::audit::Audit::open(Some(dir)).event(
                    "recording_stopped",
                    &crate::audit::Fields::new()
                        .session(id)
                        .reason("size cap")
                        .bytes(self.encoder.max_bytes),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(bytes: &[u8]) -> Vec<serde_json::Value> {
        String::from_utf8(bytes.to_vec())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_character_cut_across_reads_waits_for_its_rest() {
        let mut e = Encoder::new(DEFAULT_MAX_BYTES);
        let euro = "é€😀".as_bytes();
        let mut out = e.output(0.0, &euro[..1]);
        assert!(out.is_empty(), "half a character alone is not written");
        out.extend(e.output(0.1, &euro[1..4]));
        out.extend(e.output(0.2, &euro[4..8]));
        out.extend(e.output(0.3, &euro[8..]));
        let text: String = events(&out).iter().map(|v| v[2].as_str().unwrap().to_owned()).collect();
        assert_eq!(text, "é€😀");
    }

    #[test]
    fn invalid_bytes_and_control_characters_stay_valid_json() {
        let mut e = Encoder::new(DEFAULT_MAX_BYTES);
        let mut out = e.output(0.0, b"a\xffb\x1b[31m\"q\"\\\r\n\x00");
        out.extend(e.output(0.1, b"\xe2\x82"));
        out.extend(e.finish(0.2));
        let ev = events(&out);
        assert_eq!(ev[0][1], "o");
        assert_eq!(ev[0][2], "a\u{fffd}b\x1b[31m\"q\"\\\r\n\0");
        assert_eq!(ev[1][2], "\u{fffd}", "a cut character at the very end");
    }

    #[test]
    fn the_cap_stops_the_recording_with_a_marker() {
        let mut e = Encoder::new(1024);
        let mut out = e.header(80, 24, 0, "xterm", "/bin/sh");
        for i in 0..100 {
            out.extend(e.output(f64::from(i), b"0123456789012345678901234567890123456789"));
        }
        assert!(e.stopped());
        assert!(out.len() <= 1024, "{} bytes", out.len());
        let ev = events(&out);
        let last = ev.last().unwrap();
        assert_eq!(last[1], "m");
        assert!(last[2].as_str().unwrap().contains("recording stopped"));
        assert!(e.output(200.0, b"more").is_empty());
        assert_eq!(ev[0]["version"], 2);
    }

    #[test]
    fn resizes_are_r_events() {
        let mut e = Encoder::new(DEFAULT_MAX_BYTES);
        assert_eq!(events(&e.resize(1.5, 100, 30))[0], serde_json::json!([1.5, "r", "100x30"]));
    }
}
