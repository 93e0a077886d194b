//! A SIXEL image's size in pixels: the raster attributes (`"Pan;Pad;Ph;Pv`) when they give one,
//! else what its sixels cover (scanned: the widest row, the lowest pixel set).

/// (width, height) of SIXEL data (the bytes after `q`); None when it draws nothing.
pub fn sixel_size(data: &[u8]) -> Option<(u32, u32)> {
    let raster = raster(data);
    if let Some((w, h)) = raster.filter(|&(w, h)| w > 0 && h > 0) {
        return Some((w, h));
    }
    let (w, h) = scan(data);
    (w > 0 && h > 0).then_some((w, h))
}

/// Ph and Pv of the raster attributes at the start of the data.
fn raster(data: &[u8]) -> Option<(u32, u32)> {
    let rest = data.strip_prefix(b"\"")?;
    let end = rest.iter().position(|b| !(b.is_ascii_digit() || *b == b';')).unwrap_or(rest.len());
    let fields: Vec<u32> = std::str::from_utf8(&rest[..end])
        .ok()?
        .split(';')
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    Some((*fields.get(2)?, *fields.get(3)?))
}

/// The width and height the sixels reach.
fn scan(data: &[u8]) -> (u32, u32) {
    let (mut x, mut band, mut width, mut height) = (0u64, 0u64, 0u64, 0u64);
    let mut i = 0;
    while i < data.len() {
        let b = data[i];
        i += 1;
        match b {
            b'?'..=b'~' => {
                let bits = b - b'?';
                x += 1;
                width = width.max(x);
                if bits != 0 {
                    height = height.max(band * 6 + u64::from(8 - bits.leading_zeros()));
                }
            }
            b'!' => {
                let start = i;
                while i < data.len() && data[i].is_ascii_digit() {
                    i += 1;
                }
                let n: u64 = std::str::from_utf8(&data[start..i])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(1)
                    .clamp(1, 1 << 20);
                if let Some(&c @ b'?'..=b'~') = data.get(i) {
                    i += 1;
                    x += n;
                    width = width.max(x);
                    let bits = c - b'?';
                    if bits != 0 {
                        height = height.max(band * 6 + u64::from(8 - bits.leading_zeros()));
                    }
                }
            }
            b'$' => x = 0,
            b'-' => {
                x = 0;
                band += 1;
            }
            // Colour introducers and raster attributes: numbers that follow are not pixels.
            b'#' | b'"' => {
                while i < data.len() && (data[i].is_ascii_digit() || data[i] == b';') {
                    i += 1;
                }
            }
            _ => {}
        }
    }
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    (clamp(width), clamp(height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raster_attributes_win() {
        assert_eq!(sixel_size(b"\"1;1;300;200#0;2;0;0;0#0~~"), Some((300, 200)));
    }

    #[test]
    fn scans_without_raster() {
        // Two bands: 4 wide, then 2 wide with only the lowest bit: 7 high.
        assert_eq!(sixel_size(b"#1~~~~-#1@@"), Some((4, 7)));
        assert_eq!(sixel_size(b"#1!10~$~-"), Some((10, 6)));
        assert_eq!(sixel_size(b"#1????"), None);
        assert_eq!(sixel_size(b""), None);
    }
}
