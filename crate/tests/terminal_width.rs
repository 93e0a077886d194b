//! The width table against the real glibc, and the UTF-8 decoder against glibc's `mbrtowc`.
//!
//! Both need python3 with ctypes and glibc's C.UTF-8 locale (as on the Debian 12 server); when
//! python3 is missing the tests say so and pass, because the committed table is the product.

// Tests are drivers, not core (crate/clippy.toml): glibc, through python3, is the oracle.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::process::Command;

use tern::terminal::width::{print_width, wcwidth, width_ranges};
use tern::terminal::{Emulator, Size, screen_text};

const GENERATOR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/terminal/gen_width_table.py");

fn python(args: &[&str], stdin: Option<&[u8]>) -> Option<Vec<u8>> {
    use std::io::Write;
    let mut child = Command::new("python3")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    if let Some(input) = stdin {
        child.stdin.take()?.write_all(input).ok()?;
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().ok()?;
    assert!(out.status.success(), "python3 {args:?} failed");
    Some(out.stdout)
}

#[test]
fn width_table_equals_glibc_wcwidth_for_every_code_point() {
    let Some(out) = python(&[GENERATOR, "--ranges"], None) else {
        eprintln!("python3 not available: skipped");
        return;
    };
    let libc: Vec<(u32, u32, i8)> = String::from_utf8(out)
        .expect("utf8")
        .lines()
        .map(|l| {
            let f: Vec<&str> =
                l.trim().trim_start_matches('(').trim_end_matches("),").split(", ").collect();
            let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex");
            (hex(f[0]), hex(f[1]), f[2].parse().expect("width"))
        })
        .collect();
    assert_eq!(libc, width_ranges(), "regenerate width_table.rs with gen_width_table.py");
    // And the lookup agrees with the ranges everywhere.
    let mut expect = vec![1i8; 0x110000];
    for &(a, b, w) in width_ranges() {
        for cp in a..=b {
            expect[cp as usize] = w;
        }
    }
    for (cp, &w) in expect.iter().enumerate() {
        if let Some(c) = char::from_u32(cp as u32) {
            assert_eq!(wcwidth(c), w, "U+{cp:04X}");
        }
    }
}

#[test]
fn widths_of_the_usual_suspects() {
    assert_eq!(wcwidth('a'), 1);
    assert_eq!(wcwidth('日'), 2);
    assert_eq!(wcwidth('😀'), 2);
    assert_eq!(wcwidth('\u{301}'), 0);
    assert_eq!(wcwidth('\u{200d}'), 0);
    assert_eq!(wcwidth('\u{7f}'), -1);
    // mosh forces printable Latin-1 to width 1 before asking wcwidth (U+00AD is 1 anyway).
    assert_eq!(print_width('\u{a0}'), 1);
    assert_eq!(print_width('\0'), -1);
}

/// mosh's `UTF8Parser::input` run on glibc's real `mbrtowc`, printing one code point per line.
const MOSH_UTF8: &str = r#"
import ctypes, sys
libc = ctypes.CDLL("libc.so.6")
libc.setlocale.restype = ctypes.c_char_p
assert libc.setlocale(6, b"C.UTF-8")
f = libc.mbrtowc
f.restype = ctypes.c_size_t
f.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p]
out = []
buf = b""
for c in sys.stdin.buffer.read():
    if not buf and c <= 0x7f:
        out.append(c); continue
    buf += bytes([c])
    total, orig = 0, len(buf)
    while total != orig:
        wc = ctypes.c_uint32(); st = ctypes.create_string_buffer(32)
        r = f(ctypes.byref(wc), buf, len(buf), st)
        if r == 0:
            buf = b""; pwc = 0; r = 1
        elif r == 2**64 - 1:
            if len(buf) > 1:
                r = len(buf) - 1; buf = buf[-1:]
            else:
                buf = b""; r = 1
            pwc = 0xFFFD
        elif r == 2**64 - 2:
            total += len(buf); continue
        else:
            pwc = wc.value; buf = buf[r:]
        if pwc > 0x10FFFF or 0xD800 <= pwc <= 0xDFFF:
            pwc = 0xFFFD
        out.append(pwc)
        total += r
print("\n".join(map(str, out)))
"#;

#[test]
fn utf8_decoding_matches_mosh_on_glibc() {
    // Every kind of trouble: truncated, overlong, surrogates, above U+10FFFF, 5/6-byte forms,
    // stray continuation bytes, FE/FF, and a long random tail.
    let mut input: Vec<u8> = Vec::new();
    for s in [
        &b"\xc3\xa9\xc3(\xe0\x80\x80\xe0\xa0\x80\xed\xa0\x80\xf4\x8f\xbf\xbf\xf4\x90\x80\x80"[..],
        b"\xf5\x80\x80\x80\xf8\x88\x80\x80\x80\xfc\x84\x80\x80\x80\x80\xfe\xff\x80\xbf\xc0\xc1",
        b"\xe2\x82\xac\xe2\x82A\xf0\x9f\x98\x80\xf0\x9f\x98\xc3\xa9\xc2\xc2\xa0",
    ] {
        input.extend_from_slice(s);
    }
    let mut x: u32 = 12345;
    for _ in 0..4000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let b = (x >> 16) as u8;
        // Mostly high bytes, some continuation-heavy runs; never C0 controls (they would be
        // executed instead of printed and make the comparison about the parser, not UTF-8).
        input.push(if b < 0x20 { b | 0x80 } else { b });
    }
    let Some(out) = python(&["-c", MOSH_UTF8], Some(&input)) else {
        eprintln!("python3 not available: skipped");
        return;
    };
    let want: Vec<u32> =
        String::from_utf8(out).expect("utf8").lines().map(|l| l.parse().expect("int")).collect();

    // Our decoder, observed through the emulator: print every code point on a wide screen and
    // read back the cells. C1 controls and ESC would act, so compare only printable scalars, in
    // a screen whose width fits everything.
    let printable = |cp: u32| cp >= 0xa0 || (0x20..0x7f).contains(&cp);
    let want: Vec<u32> = want.into_iter().filter(|&cp| printable(cp)).collect();
    let mut e = Emulator::new(Size { cols: 60000, rows: 1 });
    e.feed(&input);
    let fb = e.framebuffer();
    let mut got = Vec::new();
    for cell in fb.rows()[0].cells() {
        got.extend(cell.text().chars().map(u32::from));
    }
    // Cells drop unprintable (width -1) characters; compare the printable-width ones in order.
    let want: Vec<u32> = want
        .into_iter()
        .filter(|&cp| char::from_u32(cp).is_some_and(|c| print_width(c) >= 0))
        .collect();
    assert_eq!(
        got.len(),
        want.len(),
        "{:?}",
        screen_text(fb).rows[0].chars().take(50).collect::<String>()
    );
    assert_eq!(got, want);
}
