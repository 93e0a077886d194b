//! Images a browser cannot draw, turned into PNG (the relay serves them to the page):
//! SIXEL decoded to RGBA, raw RGB / RGBA (kitty f=24 / f=32). Bounded: at most
//! [`MAX_PIXELS`] pixels, else an error (the page shows a placeholder saying why).

use std::io::Write;

/// Most pixels an image converted here may have (64 MiB of RGBA).
pub const MAX_PIXELS: u64 = 16 << 20;

/// RGBA pixels, `width` × `height` × 4 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgba {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

fn checked(width: u32, height: u32) -> Result<usize, String> {
    let n = u64::from(width) * u64::from(height);
    if width == 0 || height == 0 || n > MAX_PIXELS {
        return Err(format!("{width} × {height} pixels is more than this server converts"));
    }
    Ok(n as usize)
}

/// Raw pixels (3 or 4 bytes each) as RGBA.
pub fn raw_to_rgba(data: &[u8], width: u32, height: u32, channels: usize) -> Result<Rgba, String> {
    let n = checked(width, height)?;
    if data.len() != n * channels || !(channels == 3 || channels == 4) {
        return Err("the raw pixels do not match the image's size".into());
    }
    let pixels = if channels == 4 {
        data.to_vec()
    } else {
        data.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect()
    };
    Ok(Rgba { width, height, pixels })
}

/// The VT340's 16 default colours (percent), for SIXEL colour numbers the image never defines.
const VT340: [(u8, u8, u8); 16] = [
    (0, 0, 0),
    (20, 20, 80),
    (80, 13, 13),
    (20, 80, 20),
    (80, 20, 80),
    (20, 80, 80),
    (80, 80, 20),
    (53, 53, 53),
    (26, 26, 26),
    (33, 33, 60),
    (60, 26, 26),
    (33, 60, 33),
    (60, 33, 60),
    (33, 60, 60),
    (60, 60, 33),
    (80, 80, 80),
];

fn percent(p: u32) -> u8 {
    ((p.min(100) * 255 + 50) / 100) as u8
}

/// HLS (hue 0-360 with blue at 0 as DEC has it, lightness and saturation 0-100) to RGB.
fn hls(h: u32, l: u32, s: u32) -> [u8; 3] {
    let (h, l, s) =
        (((h + 240) % 360) as f64, f64::from(l.min(100)) / 100.0, f64::from(s.min(100)) / 100.0);
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let m = l - c / 2.0;
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let v = |f: f64| ((f + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    [v(r), v(g), v(b)]
}

/// Decodes a SIXEL sequence as the lifter keeps it (`ESC P params q data ESC \`) at the size
/// the lifter found (`width` × `height`). Pixels no sixel sets stay transparent.
pub fn sixel_to_rgba(sequence: &[u8], width: u32, height: u32) -> Result<Rgba, String> {
    let n = checked(width, height)?;
    let q = sequence.iter().position(|&b| b == b'q').ok_or("not a SIXEL sequence")?;
    let data = sequence[q + 1..].strip_suffix(b"\x1b\\").unwrap_or(&sequence[q + 1..]);
    let mut pixels = vec![0u8; n * 4];
    let mut palette: Vec<[u8; 3]> = VT340
        .iter()
        .map(|&(r, g, b)| [percent(r.into()), percent(g.into()), percent(b.into())])
        .collect();
    palette.resize(256, [0, 0, 0]);
    let (w, h) = (width as u64, height as u64);
    let (mut x, mut band, mut color) = (0u64, 0u64, 0usize);
    let mut i = 0;
    let number = |i: &mut usize| -> Option<u32> {
        let start = *i;
        while *i < data.len() && data[*i].is_ascii_digit() {
            *i += 1;
        }
        std::str::from_utf8(&data[start..*i])
            .ok()?
            .parse::<u64>()
            .ok()
            .map(|v| v.min(1 << 24) as u32)
    };
    let mut paint = |x: u64, band: u64, bits: u8, count: u64, color: [u8; 3]| {
        for bit in 0..6u64 {
            if bits & (1 << bit) == 0 {
                continue;
            }
            let y = band * 6 + bit;
            if y >= h {
                continue;
            }
            for px in x..(x + count).min(w) {
                let at = ((y * w + px) * 4) as usize;
                pixels[at..at + 4].copy_from_slice(&[color[0], color[1], color[2], 255]);
            }
        }
    };
    while i < data.len() {
        let b = data[i];
        i += 1;
        match b {
            b'?'..=b'~' => {
                paint(x, band, b - b'?', 1, palette[color]);
                x += 1;
            }
            b'!' => {
                let count = u64::from(number(&mut i).unwrap_or(1).max(1));
                if let Some(&c @ b'?'..=b'~') = data.get(i) {
                    i += 1;
                    paint(x, band, c - b'?', count, palette[color]);
                    x += count;
                }
            }
            b'$' => x = 0,
            b'-' => {
                x = 0;
                band += 1;
            }
            b'"' => {
                while i < data.len() && (data[i].is_ascii_digit() || data[i] == b';') {
                    i += 1;
                }
            }
            b'#' => {
                let mut args = vec![number(&mut i).unwrap_or(0)];
                while data.get(i) == Some(&b';') && args.len() < 5 {
                    i += 1;
                    args.push(number(&mut i).unwrap_or(0));
                }
                let c = (args[0] as usize).min(255);
                match args[..] {
                    [_, 1, hue, l, s] => palette[c] = hls(hue, l, s),
                    [_, 2, r, g, b] => palette[c] = [percent(r), percent(g), percent(b)],
                    _ => {}
                }
                color = c;
            }
            _ => {}
        }
    }
    Ok(Rgba { width, height, pixels })
}

/// Encodes RGBA pixels as a PNG (8-bit RGBA, no filter, zlib).
pub fn png(image: &Rgba) -> Vec<u8> {
    let row = image.width as usize * 4;
    let mut raw = Vec::with_capacity((row + 1) * image.height as usize);
    for line in image.pixels.chunks_exact(row.max(1)) {
        raw.push(0);
        raw.extend_from_slice(line);
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = z.write_all(&raw);
    let idat = z.finish().unwrap_or_default();
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&image.width.to_be_bytes());
    ihdr.extend_from_slice(&image.height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = Crc::default();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finish().to_be_bytes());
}

/// CRC-32 (ISO-HDLC), as PNG's chunks carry.
#[derive(Default)]
struct Crc(u32);

impl Crc {
    fn update(&mut self, bytes: &[u8]) {
        let mut c = !self.0;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            }
        }
        self.0 = !c;
    }
    fn finish(&self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sixel_decodes_to_its_colours() {
        // Colour 1 red, 2 green (RGB percent): a red band 3 wide, then green in the next band.
        let seq = b"\x1bP0;1q\"1;1;3;12#1;2;100;0;0#2;2;0;100;0#1~~~-#2!3~\x1b\\";
        let img = sixel_to_rgba(seq, 3, 12).unwrap();
        let px = |x: usize, y: usize| &img.pixels[(y * 3 + x) * 4..(y * 3 + x) * 4 + 4];
        assert_eq!(px(0, 0), [255, 0, 0, 255]);
        assert_eq!(px(2, 5), [255, 0, 0, 255]);
        assert_eq!(px(1, 6), [0, 255, 0, 255]);
        assert_eq!(px(2, 11), [0, 255, 0, 255]);
        assert!(sixel_to_rgba(seq, 100_000, 100_000).is_err());
    }

    #[test]
    fn png_header_and_crc() {
        let png = png(&Rgba { width: 2, height: 1, pixels: vec![1, 2, 3, 255, 4, 5, 6, 255] });
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR"));
        assert_eq!(crate::images::pixel_size(&png), Some((crate::images::ImageFormat::Png, 2, 1)));
        // The known CRC of an empty IEND chunk.
        assert!(png.ends_with(&[0xae, 0x42, 0x60, 0x82]));
        let mut crc = Crc::default();
        crc.update(b"123456789");
        assert_eq!(crc.finish(), 0xcbf4_3926);
    }

    #[test]
    fn raw_pixels_must_match_their_size() {
        assert_eq!(raw_to_rgba(&[1, 2, 3], 1, 1, 3).unwrap().pixels, vec![1, 2, 3, 255]);
        assert!(raw_to_rgba(&[1, 2], 1, 1, 3).is_err());
    }
}
