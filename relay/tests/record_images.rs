//! Images through the real recorder (issue 34): Debian's `img2sixel` and `chafa` (SIXEL, kitty,
//! iTerm2) and a shell script printing OSC 1337 run under `tern-relay record` on a pty of the
//! test's own. What reaches the outer pty (mosh-server's, in spawn mode) has the text before and
//! after each image unchanged and no image sequence; in the image's place, the line feeds (and for
//! iTerm2 / kitty the move right) of the rows it takes; the session's image store holds each image
//! with its pixel size; a truncated image is dropped with its reason and the text goes on.
//!
//! Fails, never skips, without img2sixel (libsixel-bin) or chafa: scripts/setup.sh installs them.

mod pty;

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine;
use rustix::termios::Winsize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tern::images::marker::marker_bytes;
use tern::terminal::Renditions;

const SESSION: &str = "0123456789abcdef";
/// The outer pty: 80 × 24 cells of 10 × 20 pixels.
const SIZE: Winsize = Winsize { ws_row: 24, ws_col: 80, ws_xpixel: 800, ws_ypixel: 480 };

fn need(tool: &str, package: &str) {
    let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "{tool} is not installed (apt-get install -y {package}, or scripts/setup.sh): this test \
         runs it under the recorder"
    );
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// A real `w` × `h` RGB PNG (a gradient), as img2sixel and chafa read it.
fn png(w: u32, h: u32) -> Vec<u8> {
    let mut raw = Vec::new();
    for y in 0..h {
        raw.push(0);
        for x in 0..w {
            raw.extend_from_slice(&[(x * 4) as u8, (y * 5) as u8, 128]);
        }
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&raw).unwrap();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    for (kind, data) in [(&b"IHDR"[..], ihdr), (b"IDAT", z.finish().unwrap()), (b"IEND", vec![])] {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut chunk = kind.to_vec();
        chunk.extend_from_slice(&data);
        out.extend_from_slice(&chunk);
        out.extend_from_slice(&crc32(&chunk).to_be_bytes());
    }
    out
}

/// Runs `script` under the recorder on a pty of [`SIZE`]; returns what reached the pty.
fn record(dir: &Path, script: &str) -> Vec<u8> {
    let (mut child, mut master) = start_recorder(dir, script);
    let (mut out, mut buf) = (Vec::new(), [0u8; 65536]);
    let deadline = Instant::now() + Duration::from_secs(60);
    // EIO once the recorder (the last holder of the pty's other side) exits.
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 || Instant::now() > deadline {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert!(child.wait().unwrap().success(), "the recorder exits as its shell: {out:?}");
    out
}

/// Starts `script` under the recorder on a pty of [`SIZE`]: the recorder, and the pty's side
/// that mosh-server would hold.
fn start_recorder(dir: &Path, script: &str) -> (std::process::Child, File) {
    pty::start_recorder(SIZE, |c| {
        c.arg("--history-dir").arg(dir).args(["--session", SESSION, "--", "sh", "-c"]);
        c.arg(script).current_dir(dir);
    })
}

/// The store's index lines.
fn index(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join(format!("{SESSION}.images/index.jsonl")))
        .expect("the index exists");
    text.lines().map(|l| serde_json::from_str(l).expect("each index line is JSON")).collect()
}

fn stored(dir: &Path, line: &Value) -> Vec<u8> {
    std::fs::read(dir.join(format!("{SESSION}.images")).join(line["file"].as_str().unwrap()))
        .unwrap()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// No image sequence reached the pty.
fn assert_no_image_sequence(out: &[u8]) {
    for intro in [&b"\x1bP"[..], b"\x1b_G", b"\x1b]1337;File", b"\xc2\x90"] {
        assert!(
            !contains(out, intro),
            "{intro:?} reached the pty: {:?}",
            String::from_utf8_lossy(out)
        );
    }
}

/// What is between `before` and `after` in the pty's output.
fn between<'a>(out: &'a [u8], before: &[u8], after: &[u8]) -> &'a [u8] {
    let start =
        out.windows(before.len()).position(|w| w == before).expect("text before") + before.len();
    let len = out[start..].windows(after.len()).position(|w| w == after).expect("text after");
    &out[start..start + len]
}

/// The numbers after `key` in `text` (`"1;1;64;48` → the 3rd and 4th for SIXEL), as the program
/// printed them.
fn numbers_after(text: &[u8], key: &str) -> Vec<u32> {
    let text = String::from_utf8_lossy(text);
    let at = text.find(key).unwrap_or_else(|| panic!("{key} in the program's output")) + key.len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .take_while(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

#[test]
fn img2sixel_is_lifted_at_its_history_line_and_the_text_around_it_is_unchanged() {
    need("img2sixel", "libsixel-bin");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.png"), png(64, 48)).unwrap();
    let out = record(
        dir.path(),
        "seq 1 30; printf BEFORE; img2sixel t.png; printf AFTER; echo; seq 31 60",
    );
    assert_no_image_sequence(&out);
    // 48 px in 20 px rows: 3 rows, the cursor on the last, in the column the image began.
    // Before them, the image's marker (image 1 at column 6; docs/IMAGES.md).
    let marker = marker_bytes(1, Renditions::DEFAULT, 6, SIZE.ws_col);
    assert_eq!(between(&out, b"BEFORE", b"AFTER"), [&marker[..], b"\n\n"].concat());
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("29\r\n30\r\nBEFORE"), "{text}");
    let lines = index(dir.path());
    assert_eq!(lines.len(), 1, "{lines:?}");
    let l = &lines[0];
    assert_eq!((l["format"].as_str(), l["protocol"].as_str()), (Some("sixel"), Some("sixel")));
    assert_eq!((l["width"].as_u64(), l["height"].as_u64()), (Some(64), Some(48)));
    assert_eq!((l["cols"].as_u64(), l["rows"].as_u64()), (Some(7), Some(3)));
    // 30 lines printed on 24 rows: "1".."7" scrolled off (lines 0..=6), the cursor on row 23:
    // history line 30, column 6 (after BEFORE).
    assert_eq!(
        (l["line"].as_u64(), l["row"].as_u64(), l["col"].as_u64()),
        (Some(30), Some(23), Some(6))
    );
    let data = stored(dir.path(), l);
    assert!(data.starts_with(b"\x1bP") && data.ends_with(b"\x1b\\"));
    assert_eq!(l["sha256"].as_str().unwrap(), format!("{:x}", Sha256::digest(&data)));
    let direct = Command::new("img2sixel").arg(dir.path().join("t.png")).output().unwrap().stdout;
    assert!(contains(&direct, &data[2..data.len() - 2]), "the SIXEL as img2sixel printed it");
    // The history has every line in order, the image's rows among them (blank).
    let history = tern_relay::history::read_page(dir.path(), SESSION, None, usize::MAX).unwrap();
    let plain: Vec<String> = history.lines.iter().map(|l| tern::terminal::plain(l)).collect();
    // The marker's two spaces follow BEFORE (kept in the history: the history view finds it).
    let at = plain.iter().position(|l| l == "BEFORE  ").expect("BEFORE in the history");
    assert_eq!(at as u64 + history.first, 30, "the image's line is BEFORE's");
    // The SIXEL cursor rule: the image's last row, the column the image began in.
    assert_eq!(plain[at + 2], "      AFTER");
    assert_eq!(plain[at - 1], "30");
}

/// Runs chafa for `format` (8 × 6 cells) under the recorder, its output also to `out.bin` (the
/// same bytes the recorder read: chafa sizes differently for a terminal than for a pipe).
fn chafa_under_recorder(format: &str) -> (Vec<u8>, Vec<Value>, tempfile::TempDir, Vec<u8>) {
    need("chafa", "chafa");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.png"), png(64, 48)).unwrap();
    let out = record(
        dir.path(),
        &format!(
            "printf BEFORE; chafa -f {format} --size 8x6 --animate off t.png | tee out.bin; \
             printf AFTER"
        ),
    );
    let direct = std::fs::read(dir.path().join("out.bin")).unwrap();
    assert!(!direct.is_empty(), "chafa -f {format} printed something");
    assert_no_image_sequence(&out);
    let lines = index(dir.path());
    assert_eq!(lines.len(), 1, "one image from chafa -f {format}: {lines:?}");
    assert!(lines[0]["dropped"].is_null(), "{lines:?}");
    (out, lines, dir, direct)
}

#[test]
fn chafa_sixels_are_lifted_with_their_raster_size() {
    let (out, lines, dir, direct) = chafa_under_recorder("sixels");
    let l = &lines[0];
    let size = numbers_after(&direct, "q\"");
    assert_eq!(
        (l["width"].as_u64(), l["height"].as_u64()),
        (Some(u64::from(size[2])), Some(u64::from(size[3])))
    );
    let rows = u64::from(size[3]).div_ceil(20);
    assert_eq!(l["rows"].as_u64(), Some(rows));
    let data = stored(dir.path(), l);
    assert!(contains(&direct, &data[2..data.len() - 2]), "the SIXEL as chafa printed it");
    // What chafa prints besides the image (its cursor moves and line ends) comes through.
    let lf = between(&out, b"BEFORE", b"AFTER").iter().filter(|&&b| b == b'\n').count() as u64;
    assert!(lf >= rows - 1, "the image's rows: {:?}", String::from_utf8_lossy(&out));
}

/// Base64 as terminals read it: chafa's kitty chunks end in non-zero trailing bits (`gPP=`).
const LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// The base64 payloads of kitty's APC G chunks or iTerm2's OSC 1337, each decoded (chafa pads
/// each chunk), joined.
fn payloads(direct: &[u8], intro: &[u8], sep: u8) -> Vec<u8> {
    let mut data = Vec::new();
    let mut rest = direct;
    while let Some(at) = rest.windows(intro.len()).position(|w| w == intro) {
        rest = &rest[at + intro.len()..];
        let end = rest.iter().position(|&b| b == 0x1b || b == 0x07).unwrap();
        if let Some(s) = rest[..end].iter().position(|&b| b == sep) {
            let b64 = &rest[s + 1..end];
            data.extend(LENIENT.decode(b64).expect("base64"));
        }
        rest = &rest[end..];
    }
    data
}

#[test]
fn chafa_kitty_is_lifted_from_its_chunks() {
    let (out, lines, dir, direct) = chafa_under_recorder("kitty");
    let l = &lines[0];
    let s = numbers_after(&direct, "s=")[0];
    let v = numbers_after(&direct, "v=")[0];
    assert_eq!(
        (l["width"].as_u64(), l["height"].as_u64()),
        (Some(u64::from(s)), Some(u64::from(v)))
    );
    let (c, r) = (numbers_after(&direct, "c=")[0], numbers_after(&direct, "r=")[0]);
    assert_eq!((l["cols"].as_u64(), l["rows"].as_u64()), (Some(u64::from(c)), Some(u64::from(r))));
    assert_eq!(l["format"].as_str(), Some("rgba"));
    let want = payloads(&direct, b"\x1b_G", b';');
    assert!(stored(dir.path(), l) == want, "the pixels as chafa printed them");
    // r rows: r - 1 line feeds, then right by c (kitty's cursor rule).
    let moves = between(&out, b"BEFORE", b"AFTER");
    let want = format!("{}\x1b[{c}C", "\n".repeat(r as usize - 1));
    assert!(contains(moves, want.as_bytes()), "{moves:?}");
}

#[test]
fn chafa_iterm_is_lifted_with_its_tiff_size() {
    let (out, lines, dir, direct) = chafa_under_recorder("iterm");
    let l = &lines[0];
    assert_eq!(l["format"].as_str(), Some("tiff"));
    let want = payloads(&direct, b"\x1b]1337;File=", b':');
    assert!(stored(dir.path(), l) == want, "the TIFF as chafa printed it");
    let (w, h) = (numbers_after(&direct, "width=")[0], numbers_after(&direct, "height=")[0]);
    assert_eq!((l["cols"].as_u64(), l["rows"].as_u64()), (Some(u64::from(w)), Some(u64::from(h))));
    assert!(l["width"].as_u64().unwrap() > 0 && l["height"].as_u64().unwrap() > 0);
    assert!(contains(&out, b"BEFORE") && contains(&out, b"AFTER"));
}

#[test]
fn a_script_printing_osc_1337_is_lifted_and_a_truncated_image_is_dropped() {
    need("base64", "coreutils");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.png"), png(64, 48)).unwrap();
    let script = r#"printf 'one\n'; printf '\033]1337;File=name=dC5wbmc=;inline=1;width=3:%s\a' "$(base64 -w0 t.png)"; printf 'two\n'; printf '\033Pq#0~~'; printf '\033[1mthree\033[0m\n'"#;
    let out = record(dir.path(), script);
    assert_no_image_sequence(&out);
    let text = String::from_utf8_lossy(&out);
    // width=3 cells (30 px, 23 px high: 2 rows): one line feed, then right by 3.
    let marker = String::from_utf8(marker_bytes(1, Renditions::DEFAULT, 0, SIZE.ws_col)).unwrap();
    assert!(text.contains(&format!("one\r\n{marker}\n\x1b[3Ctwo\r\n")), "{text:?}");
    assert!(text.contains("\x1b[1mthree\x1b[0m\r\n"), "the text after a cut image: {text:?}");
    let lines = index(dir.path());
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!((lines[0]["width"].as_u64(), lines[0]["height"].as_u64()), (Some(64), Some(48)));
    assert_eq!((lines[0]["cols"].as_u64(), lines[0]["rows"].as_u64()), (Some(3), Some(2)));
    assert_eq!(lines[0]["name"].as_str(), Some("t.png"));
    assert_eq!(stored(dir.path(), &lines[0]), png(64, 48));
    assert_eq!(lines[1]["dropped"].as_str(), Some("truncated: another escape sequence began"));
    assert_eq!(lines[1]["protocol"].as_str(), Some("sixel"));
}

#[test]
fn with_no_images_every_byte_passes_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut master) = pty::start_recorder(SIZE, |c| {
        c.arg("--no-images").arg("--history-dir").arg(dir.path());
        c.args(["--session", SESSION, "--", "sh", "-c", r"printf 'a\033Pq#0~~\033\\b'"]);
    });
    let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    child.wait().unwrap();
    assert!(contains(&out, b"a\x1bPq#0~~\x1b\\b"), "{out:?}");
    assert!(!dir.path().join(format!("{SESSION}.images")).exists());
}

/// A lone ESC a program prints last (it may start an image, so the lifter holds it) reaches
/// mosh-server's pty while the program still waits, not only with its next output.
#[test]
fn a_lone_esc_printed_last_is_not_held_until_the_next_output() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut master) =
        start_recorder(dir.path(), r"printf 'waiting\033'; sleep 6; printf 'next\n'");
    let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
    while !contains(&out, b"waiting\x1b") {
        let n = master.read(&mut buf).expect("the recorder's output");
        assert!(n > 0, "the output ended before the ESC: {out:?}");
        out.extend_from_slice(&buf[..n]);
    }
    assert!(
        !contains(&out, b"next"),
        "the ESC came only with the program's next output (held for 6 s): {out:?}"
    );
    while master.read(&mut buf).is_ok_and(|n| n > 0) {}
    assert!(child.wait().unwrap().success());
}
