//! `tern show FILE… [--cols N] [--rows N]`: prints each picture as an iTerm2 inline image (OSC
//! 1337 File=…;inline=1), which the session's recorder lifts like any program's image
//! (docs/IMAGES.md): the page draws it at the cursor, taking its rows, and the prompt comes
//! below. Without a recorder lifting images (ssh-host sessions, `--no-images`, a shell outside
//! Tern) nothing could show it, so it says so and exits 1. The recorder tells its shell by
//! [`IMAGES_ENV`], set to the largest image it takes (encoded bytes).

use std::io::Write;
use std::process::ExitCode;

use base64::Engine;
use tern::images::{ImageFormat, pixel_size};

// The recorder's: `tern show` reads what the layer below it sets.
use crate::history::record::IMAGES_ENV;

/// What `tern show` was asked.
#[derive(Debug, PartialEq, Eq)]
pub struct ShowArgs {
    pub files: Vec<String>,
    pub cols: Option<u32>,
    pub rows: Option<u32>,
}

impl ShowArgs {
    pub fn parse(args: &[String]) -> Result<ShowArgs, String> {
        let (mut files, mut cols, mut rows) = (Vec::new(), None, None);
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut number = |what: &str| {
                it.next()
                    .and_then(|n| n.parse::<u32>().ok())
                    .filter(|&n| (1..=1000).contains(&n))
                    .ok_or(format!("{what} wants a number of cells from 1 to 1000"))
            };
            match a.as_str() {
                "--cols" => cols = Some(number("--cols")?),
                "--rows" => rows = Some(number("--rows")?),
                _ => files.push(a.clone()),
            }
        }
        if files.is_empty() {
            return Err("tern show wants a file".into());
        }
        Ok(ShowArgs { files, cols, rows })
    }
}

/// The bytes that show `data` (already checked) inline, then a line feed: the prompt comes
/// below the picture.
pub fn inline_image(name: &str, data: &[u8], cols: Option<u32>, rows: Option<u32>) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out =
        format!("\x1b]1337;File=name={};size={};inline=1", b64.encode(name.as_bytes()), data.len());
    if let Some(c) = cols {
        out.push_str(&format!(";width={c}"));
    }
    if let Some(r) = rows {
        out.push_str(&format!(";height={r}"));
    }
    out.push(':');
    out.push_str(&b64.encode(data));
    out.push_str("\x07\n");
    out.into_bytes()
}

/// Whether `data` may be shown: a PNG, JPEG, GIF or WebP whose encoded form is within `limit`.
pub fn check(data: &[u8], limit: u64) -> Result<(), String> {
    match pixel_size(data) {
        Some((
            ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::Webp,
            _,
            _,
        )) => {}
        _ => return Err("not a PNG, JPEG, GIF or WebP picture".into()),
    }
    // Base64 and the sequence's header, as the recorder counts them.
    let encoded = (data.len() as u64).div_ceil(3) * 4 + 512;
    if encoded > limit {
        return Err(format!(
            "{} is over the limit for one picture ({})",
            tern::paste::size(data.len() as u64),
            tern::paste::size(limit / 4 * 3)
        ));
    }
    Ok(())
}

/// `tern show ARGS` (after `show`).
pub fn main(args: &[String]) -> ExitCode {
    let args = match ShowArgs::parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tern: {e}\nusage: tern show FILE... [--cols N] [--rows N]");
            return ExitCode::from(2);
        }
    };
    let Some(limit) = std::env::var(IMAGES_ENV).ok().and_then(|v| v.parse::<u64>().ok()) else {
        eprintln!(
            "tern: pictures cannot be shown in this shell: only a shell that tern-relay started \
             itself, with images on, has the recorder that carries them to the page (not ssh-host \
             sessions, not --no-images)"
        );
        return ExitCode::FAILURE;
    };
    let mut ok = true;
    let mut stdout = std::io::stdout().lock();
    for file in &args.files {
        let data = match std::fs::read(file) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("tern: {file}: {e}");
                ok = false;
                continue;
            }
        };
        if let Err(why) = check(&data, limit) {
            eprintln!("tern: {file}: {why}");
            ok = false;
            continue;
        }
        let name = std::path::Path::new(file)
            .file_name()
            .map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned());
        if stdout.write_all(&inline_image(&name, &data, args.cols, args.rows)).is_err() {
            return ExitCode::FAILURE;
        }
    }
    let _ = stdout.flush();
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG_1X1: &[u8] =
        b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

    #[test]
    fn refuses_what_is_not_a_picture_or_too_large() {
        assert!(check(b"hello, I am text\n", 1 << 20).unwrap_err().contains("not a PNG"));
        assert!(check(PNG_1X1, 1 << 20).is_ok());
        assert!(check(PNG_1X1, 100).unwrap_err().contains("over the limit"));
    }

    #[test]
    fn options_and_the_sequence() {
        let a = ShowArgs::parse(&["a.png".into(), "--cols".into(), "12".into()]).unwrap();
        assert_eq!(a, ShowArgs { files: vec!["a.png".into()], cols: Some(12), rows: None });
        assert!(ShowArgs::parse(&["--rows".into(), "x".into()]).is_err());
        assert!(ShowArgs::parse(&[]).is_err());
        let seq = inline_image("a.png", PNG_1X1, Some(12), Some(3));
        let s = String::from_utf8(seq).unwrap();
        assert!(s.starts_with("\x1b]1337;File=name=YS5wbmc=;size=33;inline=1;width=12;height=3:"));
        assert!(s.ends_with("\x07\n"));
    }
}
