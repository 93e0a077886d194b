//! kitty graphics: `APC G KEYS ; BASE64 ST`. KEYS are `k=v` separated by `,`. Lifted: direct
//! transmission (t=d) of PNG (f=100) or raw RGB / RGBA (f=24 / 32 with s= and v=), zlib
//! compressed or not (o=z), in chunks (m=1 … m=0), placed at once (a=T) or transmitted (a=t)
//! and placed later (a=p, by i=). Other actions (queries, deletes) are taken out and ignored:
//! mosh-server would drop them too.

use std::collections::VecDeque;
use std::io::Read;

use super::cells::{CursorAfter, Geometry, kitty_cells};
use super::iterm::Base64;
use super::{DropReason, ImageFormat, LiftedImage, Protocol, probe::pixel_size};

/// Transmitted images kept for a later placement, at most.
const MAX_STORED: usize = 8;

/// The keys of one command.
#[derive(Debug, Clone, Default)]
struct Keys {
    action: u8,
    format: u32,
    medium: u8,
    compression: u8,
    width: u32,
    height: u32,
    id: u32,
    cols: Option<u32>,
    rows: Option<u32>,
    stay: bool,
    more: bool,
}

impl Keys {
    fn parse(text: &[u8]) -> Keys {
        let mut k = Keys { action: b't', format: 32, medium: b'd', ..Keys::default() };
        for kv in text.split(|&b| b == b',') {
            let (key, value) = match kv {
                [key, b'=', value @ ..] => (*key, value),
                _ => continue,
            };
            let num = || std::str::from_utf8(value).ok().and_then(|v| v.parse::<u32>().ok());
            let ch = value.first().copied().unwrap_or(0);
            match key {
                b'a' => k.action = ch,
                b'f' => k.format = num().unwrap_or(0),
                b't' => k.medium = ch,
                b'o' => k.compression = ch,
                b's' => k.width = num().unwrap_or(0),
                b'v' => k.height = num().unwrap_or(0),
                b'i' => k.id = num().unwrap_or(0),
                b'c' => k.cols = num().filter(|&n| n > 0),
                b'r' => k.rows = num().filter(|&n| n > 0),
                b'C' => k.stay = num() == Some(1),
                b'm' => k.more = num() == Some(1),
                _ => {}
            }
        }
        k
    }
}

/// An image whose chunks are arriving.
#[derive(Debug)]
struct Transfer {
    keys: Keys,
    data: Base64,
    over: bool,
    seen: u64,
}

/// A transmitted image waiting for its placement.
#[derive(Debug)]
struct Stored {
    id: u32,
    format: ImageFormat,
    data: Vec<u8>,
    width: u32,
    height: u32,
}

/// What kitty commands leave for later: a transfer in chunks, transmitted images.
#[derive(Debug, Default)]
pub struct Kitty {
    transfer: Option<Transfer>,
    stored: VecDeque<Stored>,
}

/// One finished command's result: an image, a drop (reason, encoded bytes), or nothing.
pub type Outcome = Option<Result<LiftedImage, (DropReason, u64)>>;

impl Kitty {
    /// `body` is the sequence after `APC` (`G` and on), at most `cap` bytes of it kept; `over` says more
    /// came.
    pub fn complete(&mut self, body: &[u8], over: bool, g: &Geometry, cap: usize) -> Outcome {
        let body = body.strip_prefix(b"G").unwrap_or(body);
        let (keys, payload) = match body.iter().position(|&b| b == b';') {
            Some(i) => (&body[..i], &body[i + 1..]),
            None => (body, &[][..]),
        };
        let keys = Keys::parse(keys);
        if let Some(mut t) = self.transfer.take() {
            // A later chunk: only its m= counts.
            t.seen += payload.len() as u64;
            if over || t.seen > cap as u64 {
                t.over = true;
                t.data = Base64::default();
            }
            if !t.over {
                t.data.push(payload);
            }
            if keys.more {
                self.transfer = Some(t);
                return None;
            }
            return self.finish_transfer(t, g, cap);
        }
        match keys.action {
            b't' | b'T' => {
                let mut data = Base64::default();
                if !over {
                    data.push(payload);
                }
                let t = Transfer {
                    over: over || payload.len() > cap,
                    data,
                    seen: payload.len() as u64,
                    keys,
                };
                if t.keys.more {
                    self.transfer = Some(t);
                    return None;
                }
                self.finish_transfer(t, g, cap)
            }
            b'p' => {
                let Some(s) = self.stored.iter().find(|s| s.id == keys.id && keys.id != 0) else {
                    return Some(Err((
                        DropReason::Malformed("placement of an image not transmitted"),
                        0,
                    )));
                };
                Some(Ok(place(&keys, s.format, s.data.clone(), s.width, s.height, g)))
            }
            // Queries, deletes, animation: nothing to lift.
            _ => None,
        }
    }

    /// The stream ended: a transfer in progress is dropped.
    pub fn finish(&mut self) -> Option<(DropReason, u64)> {
        self.transfer.take().map(|t| (DropReason::Ended, t.seen))
    }

    fn finish_transfer(&mut self, t: Transfer, g: &Geometry, cap: usize) -> Outcome {
        let seen = t.seen;
        let err = |r: DropReason| Some(Err((r, seen)));
        if t.over {
            return err(DropReason::TooLarge { cap });
        }
        if t.keys.medium != b'd' {
            return err(DropReason::Unsupported("kitty transmission by file or shared memory"));
        }
        let Some(mut data) = t.data.finish() else {
            return err(DropReason::Malformed("bad base64"));
        };
        if t.keys.compression == b'z' {
            // Decompressed, at most four times the cap (raw pixels compress well).
            let limit = cap.saturating_mul(4) as u64;
            let mut out = Vec::new();
            let read =
                flate2::read::ZlibDecoder::new(&data[..]).take(limit + 1).read_to_end(&mut out);
            if read.is_err() {
                return err(DropReason::Malformed("bad zlib data"));
            }
            if out.len() as u64 > limit {
                return err(DropReason::TooLarge { cap });
            }
            data = out;
        }
        let k = &t.keys;
        let (format, width, height) = match k.format {
            100 => match pixel_size(&data) {
                Some((ImageFormat::Png, w, h)) => (ImageFormat::Png, w, h),
                _ => return err(DropReason::Malformed("f=100 but not a PNG")),
            },
            24 | 32 => {
                let bpp = if k.format == 24 { 3 } else { 4 };
                let want = u64::from(k.width) * u64::from(k.height) * bpp;
                if k.width == 0 || k.height == 0 || data.len() as u64 != want {
                    return err(DropReason::Malformed("raw pixels do not match s= and v="));
                }
                let f = if bpp == 3 { ImageFormat::Rgb } else { ImageFormat::Rgba };
                (f, k.width, k.height)
            }
            _ => return err(DropReason::Unsupported("kitty pixel format other than 24, 32, 100")),
        };
        if k.action == b'T' {
            return Some(Ok(place(k, format, data, width, height, g)));
        }
        if k.id != 0 {
            self.stored.retain(|s| s.id != k.id);
            self.stored.push_back(Stored { id: k.id, format, data, width, height });
            // Bounded: a few images, their bytes under the cap together.
            while self.stored.len() > MAX_STORED
                || self.stored.iter().map(|s| s.data.len()).sum::<usize>() > cap.saturating_mul(4)
            {
                self.stored.pop_front();
            }
        }
        None
    }
}

fn place(
    k: &Keys,
    format: ImageFormat,
    data: Vec<u8>,
    width: u32,
    height: u32,
    g: &Geometry,
) -> LiftedImage {
    let (cols, rows) = kitty_cells(g, width, height, k.cols, k.rows);
    LiftedImage {
        protocol: Protocol::Kitty,
        format,
        data,
        width,
        height,
        cols,
        rows,
        cursor: if k.stay { CursorAfter::Stay } else { CursorAfter::BelowRight },
        name: None,
    }
}
