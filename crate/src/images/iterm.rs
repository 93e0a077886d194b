//! iTerm2 inline images: `OSC 1337 ; File=ARGS : BASE64 ST`, and the same in parts
//! (`MultipartFile=ARGS`, then `FilePart=BASE64`…, then `FileEnd`). ARGS are `key=value`
//! separated by `;`: inline=1 (else it is a download, not an image), name (base64), width and
//! height (cells, `Npx`, `N%` or `auto`), preserveAspectRatio.

use super::cells::{CursorAfter, Geometry, iterm_cells, iterm_dimension};
use super::{DropReason, LiftedImage, Protocol, probe::pixel_size};

/// A multipart image being received.
#[derive(Debug)]
struct Multi {
    args: String,
    data: Vec<u8>,
    over: bool,
}

/// What iTerm2 images in parts wait for.
#[derive(Debug, Default)]
pub struct Iterm {
    multi: Option<Multi>,
}

/// One finished OSC 1337 (its text after `OSC`): an image, a drop, or nothing (a part).
pub type Outcome = Option<Result<LiftedImage, (DropReason, u64)>>;

impl Iterm {
    /// `body` is the sequence after `OSC` (`1337;File=…`), at most `cap` bytes of it kept;
    /// `over` says more came.
    pub fn complete(&mut self, body: &[u8], over: bool, g: &Geometry, cap: usize) -> Outcome {
        let body = body.strip_prefix(b"1337;")?;
        let len = body.len() as u64;
        if let Some(rest) = body.strip_prefix(b"File=") {
            if over {
                return Some(Err((DropReason::TooLarge { cap }, len)));
            }
            let Some(colon) = rest.iter().position(|&b| b == b':') else {
                return Some(Err((DropReason::Malformed("no ':' before the data"), len)));
            };
            let args = String::from_utf8_lossy(&rest[..colon]);
            return Some(image(&args, &rest[colon + 1..], g).map_err(|r| (r, len)));
        }
        if let Some(args) = body.strip_prefix(b"MultipartFile=") {
            let dropped = self.multi.take().map(|m| (DropReason::Interrupted, m.data.len() as u64));
            self.multi = Some(Multi {
                args: String::from_utf8_lossy(args).into_owned(),
                data: Vec::new(),
                over,
            });
            return dropped.map(Err);
        }
        if let Some(part) = body.strip_prefix(b"FilePart=") {
            let Some(m) = self.multi.as_mut() else {
                return Some(Err((DropReason::Malformed("FilePart without MultipartFile"), len)));
            };
            if over || m.data.len() + part.len() > cap {
                m.over = true;
                m.data = Vec::new();
            }
            if !m.over {
                m.data.extend_from_slice(part);
            }
            return None;
        }
        if body == b"FileEnd" {
            let m = self.multi.take()?;
            if m.over {
                return Some(Err((DropReason::TooLarge { cap }, m.data.len() as u64)));
            }
            let len = m.data.len() as u64;
            return Some(image(&m.args, &m.data, g).map_err(|r| (r, len)));
        }
        // Other OSC 1337 commands never get here (the lifter passes them through).
        None
    }

    /// The stream ended: a multipart image in progress is dropped.
    pub fn finish(&mut self) -> Option<(DropReason, u64)> {
        self.multi.take().map(|m| (DropReason::Ended, m.data.len() as u64))
    }
}

/// Base64 as terminals take it: padding optional, line breaks ignored.
pub fn decode_base64(b64: &[u8]) -> Option<Vec<u8>> {
    let mut d = Base64::default();
    d.push(b64).then_some(())?;
    d.finish()
}

/// Base64 decoded as it comes in pieces (kitty's chunks, iTerm2's parts): each piece may be
/// padded on its own (chafa pads every kitty chunk) or cut anywhere; whitespace is skipped.
#[derive(Debug, Default)]
pub struct Base64 {
    /// Decoded so far.
    data: Vec<u8>,
    /// Characters of an unfinished group of four.
    group: Vec<u8>,
    bad: bool,
}

impl Base64 {
    /// Takes the next piece; false once it is not base64.
    pub fn push(&mut self, piece: &[u8]) -> bool {
        for &b in piece {
            if self.bad || b.is_ascii_whitespace() {
                continue;
            }
            self.group.push(b);
            if self.group.len() == 4 {
                self.bad |= !decode_group(&self.group, &mut self.data);
                self.group.clear();
            }
        }
        !self.bad
    }

    /// The bytes, or None when it was not base64.
    pub fn finish(mut self) -> Option<Vec<u8>> {
        if !self.group.is_empty() {
            // The last group without its padding.
            let mut g = std::mem::take(&mut self.group);
            g.resize(4, b'=');
            self.bad |= !decode_group(&g, &mut self.data);
        }
        (!self.bad).then_some(self.data)
    }
}

fn sextet(c: u8) -> Option<u32> {
    Some(u32::from(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    }))
}

/// Decodes four characters (`xx==` and `xxx=` padded) onto `out`.
fn decode_group(g: &[u8], out: &mut Vec<u8>) -> bool {
    let pad = g.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return false;
    }
    let mut v = 0u32;
    for &c in &g[..4 - pad] {
        let Some(s) = sextet(c) else { return false };
        v = v << 6 | s;
    }
    v <<= 6 * pad as u32;
    let bytes = v.to_be_bytes();
    out.extend_from_slice(&bytes[1..4 - pad]);
    true
}

fn image(args: &str, b64: &[u8], g: &Geometry) -> Result<LiftedImage, DropReason> {
    let mut inline = false;
    let (mut name, mut want_w, mut want_h, mut preserve) = (None, None, None, true);
    let total_w = u32::from(g.cols) * u32::from(g.cell_width);
    let total_h = u32::from(g.rows) * u32::from(g.cell_height);
    for kv in args.split(';') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "inline" => inline = v == "1",
            "name" => {
                name = decode_base64(v.as_bytes())
                    .map(|n| String::from_utf8_lossy(&n).chars().take(255).collect())
            }
            "width" => want_w = iterm_dimension(v, total_w, g.cell_width),
            "height" => want_h = iterm_dimension(v, total_h, g.cell_height),
            "preserveAspectRatio" => preserve = v != "0",
            _ => {}
        }
    }
    if !inline {
        return Err(DropReason::Unsupported("a file download (inline=0), not an image"));
    }
    let data = decode_base64(b64).ok_or(DropReason::Malformed("bad base64"))?;
    let (format, width, height) =
        pixel_size(&data).ok_or(DropReason::Unsupported("not a PNG, JPEG, GIF, WebP or TIFF"))?;
    let (cols, rows) = iterm_cells(g, width, height, want_w, want_h, preserve);
    Ok(LiftedImage {
        protocol: Protocol::Iterm,
        format,
        data,
        width,
        height,
        cols,
        rows,
        cursor: CursorAfter::BelowRight,
        name,
    })
}
