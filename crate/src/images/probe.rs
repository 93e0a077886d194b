//! An image's format and size in pixels, read from the few header bytes that say it (PNG's
//! IHDR, GIF's screen descriptor, WebP's VP8 / VP8L / VP8X header, JPEG's start-of-frame, and
//! TIFF's first directory, which chafa's iTerm2 output carries).

use super::ImageFormat;

/// The format and (width, height) of a PNG, JPEG, GIF, WebP or TIFF file; None for anything else or
/// a header too short or with a zero size.
pub fn pixel_size(data: &[u8]) -> Option<(ImageFormat, u32, u32)> {
    let (format, w, h) = if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        (ImageFormat::Png, be32(data, 16)?, be32(data, 20)?)
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        (ImageFormat::Gif, u32::from(le16(data, 6)?), u32::from(le16(data, 8)?))
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        let (w, h) = webp(data)?;
        (ImageFormat::Webp, w, h)
    } else if data.starts_with(b"II*\0") || data.starts_with(b"MM\0*") {
        let (w, h) = tiff(data)?;
        (ImageFormat::Tiff, w, h)
    } else if data.starts_with(&[0xff, 0xd8]) {
        let (w, h) = jpeg(data)?;
        (ImageFormat::Jpeg, w, h)
    } else {
        return None;
    };
    (w > 0 && h > 0).then_some((format, w, h))
}

fn be32(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

fn le16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

fn le24(d: &[u8], at: usize) -> Option<u32> {
    let b = d.get(at..at + 3)?;
    Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
}

fn webp(d: &[u8]) -> Option<(u32, u32)> {
    match d.get(12..16)? {
        b"VP8X" => Some((le24(d, 24)? + 1, le24(d, 27)? + 1)),
        b"VP8L" => {
            if *d.get(20)? != 0x2f {
                return None;
            }
            let bits = u32::from_le_bytes(d.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1))
        }
        b"VP8 " => {
            if d.get(23..26)? != [0x9d, 0x01, 0x2a] {
                return None;
            }
            Some((u32::from(le16(d, 26)? & 0x3fff), u32::from(le16(d, 28)? & 0x3fff)))
        }
        _ => None,
    }
}

/// ImageWidth (256) and ImageLength (257) of the first directory.
fn tiff(d: &[u8]) -> Option<(u32, u32)> {
    let big = d[0] == b'M';
    let u16_at = |at: usize| {
        let b: [u8; 2] = d.get(at..at + 2)?.try_into().ok()?;
        Some(if big { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    };
    let u32_at = |at: usize| {
        let b: [u8; 4] = d.get(at..at + 4)?.try_into().ok()?;
        Some(if big { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    };
    let ifd = usize::try_from(u32_at(4)?).ok()?;
    let (mut w, mut h) = (None, None);
    for n in 0..usize::from(u16_at(ifd)?).min(512) {
        let at = ifd + 2 + n * 12;
        let value = match u16_at(at + 2)? {
            3 => u32::from(u16_at(at + 8)?),
            4 => u32_at(at + 8)?,
            _ => continue,
        };
        match u16_at(at)? {
            256 => w = Some(value),
            257 => h = Some(value),
            _ => {}
        }
    }
    Some((w?, h?))
}

fn jpeg(d: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    loop {
        // Fill bytes (0xff) may precede a marker.
        while *d.get(at)? == 0xff && *d.get(at + 1)? == 0xff {
            at += 1;
        }
        if *d.get(at)? != 0xff {
            return None;
        }
        let marker = *d.get(at + 1)?;
        at += 2;
        match marker {
            // Markers without a length.
            0x01 | 0xd0..=0xd7 => continue,
            0xd8 | 0xd9 => return None,
            // Start of frame (not DHT, JPG, DAC): precision, height, width.
            0xc0..=0xcf if !matches!(marker, 0xc4 | 0xc8 | 0xcc) => {
                return Some((u32::from(be16(d, at + 5)?), u32::from(be16(d, at + 3)?)));
            }
            _ => at += usize::from(be16(d, at)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn png(w: u32, h: u32) -> Vec<u8> {
        let mut d = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        d.extend_from_slice(&w.to_be_bytes());
        d.extend_from_slice(&h.to_be_bytes());
        d.extend_from_slice(&[8, 6, 0, 0, 0]);
        d
    }

    #[test]
    fn reads_each_format() {
        assert_eq!(pixel_size(&png(300, 200)), Some((ImageFormat::Png, 300, 200)));
        let gif = b"GIF89a\x2c\x01\xc8\x00\xf7\0\0";
        assert_eq!(pixel_size(gif), Some((ImageFormat::Gif, 300, 200)));
        // JPEG: SOI, an APP0 of 16 bytes, SOF0 with height 200, width 300.
        let mut jpg = vec![0xff, 0xd8, 0xff, 0xe0, 0, 16];
        jpg.extend_from_slice(&[0; 14]);
        jpg.extend_from_slice(&[0xff, 0xc0, 0, 17, 8, 0, 200, 1, 44, 3]);
        assert_eq!(pixel_size(&jpg), Some((ImageFormat::Jpeg, 300, 200)));
        let mut vp8x = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        vp8x.extend_from_slice(&[43, 1, 0, 199, 0, 0]);
        assert_eq!(pixel_size(&vp8x), Some((ImageFormat::Webp, 300, 200)));
        let mut vp8l = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        let bits: u32 = 299 | (199 << 14);
        vp8l.extend_from_slice(&bits.to_le_bytes());
        assert_eq!(pixel_size(&vp8l), Some((ImageFormat::Webp, 300, 200)));
        let mut vp8 = b"RIFF\0\0\0\0WEBPVP8 \0\0\0\0\0\0\0\x9d\x01\x2a".to_vec();
        vp8.extend_from_slice(&[44, 1, 200, 0]);
        assert_eq!(pixel_size(&vp8), Some((ImageFormat::Webp, 300, 200)));
        // TIFF, little-endian: two entries, width as SHORT, height as LONG.
        let mut tif = b"II*\0\x08\0\0\0\x02\0".to_vec();
        tif.extend_from_slice(&[0, 1, 3, 0, 1, 0, 0, 0, 44, 1, 0, 0]);
        tif.extend_from_slice(&[1, 1, 4, 0, 1, 0, 0, 0, 200, 0, 0, 0]);
        assert_eq!(pixel_size(&tif), Some((ImageFormat::Tiff, 300, 200)));
    }

    #[test]
    fn rejects_short_and_unknown() {
        assert_eq!(pixel_size(b""), None);
        assert_eq!(pixel_size(b"\x89PNG\r\n\x1a\n\0\0"), None);
        assert_eq!(pixel_size(&png(0, 5)), None);
        assert_eq!(pixel_size(b"%PDF-1.4"), None);
        assert_eq!(pixel_size(&[0xff, 0xd8, 0xff, 0xe0, 0xff, 0xff]), None);
    }
}
