//! The lifter against each format, every split of its input into reads, and hostile bytes.

use base64::Engine;
use proptest::prelude::*;

use super::*;

/// What the lifter made of a stream: text merged, images and drops in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Text(Vec<u8>),
    Image(LiftedImage),
    Dropped(Dropped),
    Signal(Signal),
}

fn lift_chunks<'a>(config: LifterConfig, chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<Out> {
    let mut lifter = Lifter::new(config);
    let mut outs = Vec::new();
    let mut push = |p: Piece<'_>| match p {
        Piece::Text(t) => match outs.last_mut() {
            Some(Out::Text(v)) => v.extend_from_slice(t),
            _ => outs.push(Out::Text(t.to_vec())),
        },
        Piece::Image(i) => outs.push(Out::Image(i)),
        Piece::Dropped(d) => outs.push(Out::Dropped(d)),
        Piece::Signal(x) => outs.push(Out::Signal(x)),
    };
    for c in chunks {
        lifter.feed(c, &mut push);
    }
    lifter.finish(&mut push);
    outs
}

fn lift(input: &[u8]) -> Vec<Out> {
    lift_chunks(LifterConfig::default(), [input])
}

fn text(outs: &[Out]) -> Vec<u8> {
    outs.iter()
        .filter_map(|o| if let Out::Text(t) = o { Some(t.clone()) } else { None })
        .flatten()
        .collect()
}

fn images(outs: &[Out]) -> Vec<&LiftedImage> {
    outs.iter().filter_map(|o| if let Out::Image(i) = o { Some(i) } else { None }).collect()
}

fn drops(outs: &[Out]) -> Vec<&Dropped> {
    outs.iter().filter_map(|o| if let Out::Dropped(d) = o { Some(d) } else { None }).collect()
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A PNG header (all the lifter reads) of `w` × `h`.
fn png(w: u32, h: u32) -> Vec<u8> {
    let mut d = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    d.extend_from_slice(&w.to_be_bytes());
    d.extend_from_slice(&h.to_be_bytes());
    d.extend_from_slice(&[8, 6, 0, 0, 0, 1, 2, 3, 4]);
    d
}

const SIXEL: &[u8] = b"\x1bPq\"1;1;20;40#0;2;100;0;0#0~~~~-~~~~\x1b\\";

fn iterm(args: &str, data: &[u8], end: &str) -> Vec<u8> {
    format!("\x1b]1337;File={args}:{}{end}", b64(data)).into_bytes()
}

fn kitty(keys: &str, data: &[u8]) -> Vec<u8> {
    format!("\x1b_G{keys};{}\x1b\\", b64(data)).into_bytes()
}

/// A stream with each kind of image, sequences that are not images, and text around them.
fn mixed() -> Vec<u8> {
    let mut s = b"before \xc2\xb0 \xcb\x90 \x1b[31mred\x1b[0m\r\n".to_vec();
    s.extend_from_slice(SIXEL);
    s.extend_from_slice(b"\x1bP$qm\x1b\\\x1b]0;title\x07after sixel\r\n");
    s.extend_from_slice(&iterm("inline=1;width=5", &png(30, 60), "\x07"));
    s.extend_from_slice(b"\x1b]1337;SetMark\x07\x1b_Xnot kitty\x1b\\");
    let p = b64(&png(100, 100));
    let (a, b) = p.split_at(8);
    s.extend_from_slice(format!("\x1b_Ga=T,f=100,m=1;{a}\x1b\\").as_bytes());
    s.extend_from_slice(b"between chunks");
    s.extend_from_slice(format!("\x1b_Gm=0;{b}\x1b\\").as_bytes());
    s.extend_from_slice(b"\xc2\x90q#0~~\xc2\x9c");
    s.extend_from_slice(b"\x1b]1337;File=inline=1:!!!\x1b\\end\x1b");
    s
}

#[test]
fn sixel_is_lifted_with_its_raster_size() {
    let mut input = b"a".to_vec();
    input.extend_from_slice(SIXEL);
    input.extend_from_slice(b"b");
    let outs = lift(&input);
    assert_eq!(text(&outs), b"ab");
    let i = images(&outs);
    assert_eq!(i.len(), 1);
    assert_eq!(
        (i[0].format, i[0].width, i[0].height, i[0].cols, i[0].rows),
        (ImageFormat::Sixel, 20, 40, 2, 2)
    );
    assert_eq!(i[0].data, SIXEL);
    assert_eq!(i[0].layout_bytes(), b"\n");
    // The C1 forms, as UTF-8.
    let outs = lift(b"x\xc2\x90q#0~~~\xc2\x9cy");
    assert_eq!(text(&outs), b"xy");
    assert_eq!((images(&outs)[0].width, images(&outs)[0].height), (3, 6));
}

#[test]
fn iterm_is_lifted_and_sized_in_cells() {
    let outs = lift(&iterm("name=YS5wbmc=;inline=1;width=5", &png(30, 60), "\x1b\\"));
    let i = images(&outs)[0];
    assert_eq!(
        (i.protocol, i.format, i.width, i.height),
        (Protocol::Iterm, ImageFormat::Png, 30, 60)
    );
    // width=5 cells = 50 px, aspect kept: 100 px high = 5 rows.
    assert_eq!((i.cols, i.rows), (5, 5));
    assert_eq!(i.name.as_deref(), Some("a.png"));
    assert_eq!(i.layout_bytes(), b"\n\n\n\n\x1b[5C");
    assert_eq!(text(&outs), b"");
    // In parts.
    let p = b64(&png(10, 10));
    let (a, b) = p.split_at(5);
    let s = format!(
        "x\x1b]1337;MultipartFile=inline=1\x07\x1b]1337;FilePart={a}\x07y\x1b]1337;FilePart={b}\x07\x1b]1337;FileEnd\x07z"
    );
    let outs = lift(s.as_bytes());
    assert_eq!(text(&outs), b"xyz");
    assert_eq!(images(&outs)[0].data, png(10, 10));
}

#[test]
fn kitty_direct_chunked_and_placed_later() {
    let outs = lift(&kitty("a=T,f=100", &png(25, 45)));
    let i = images(&outs)[0];
    assert_eq!((i.protocol, i.width, i.height, i.cols, i.rows), (Protocol::Kitty, 25, 45, 3, 3));
    assert_eq!(i.cursor, CursorAfter::BelowRight);
    // Raw RGB, zlib compressed, with c= and r=, C=1.
    let raw = vec![7u8; 2 * 3 * 3];
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, &raw).unwrap();
    let outs = lift(&kitty("a=T,f=24,s=2,v=3,o=z,c=4,r=2,C=1", &z.finish().unwrap()));
    let i = images(&outs)[0];
    assert_eq!((i.format, i.width, i.height, i.cols, i.rows), (ImageFormat::Rgb, 2, 3, 4, 2));
    assert_eq!((i.data.clone(), i.layout_bytes()), (raw, vec![]));
    // Chunks each padded on their own (as chafa sends them), and cut inside a group of four.
    let data = png(33, 21);
    let (a, b) = data.split_at(10);
    let s = format!("\x1b_Ga=T,f=100,m=1;{}\x1b\\\x1b_Gm=0;{}\x1b\\", b64(a), b64(b));
    assert_eq!(images(&lift(s.as_bytes()))[0].data, data);
    let p = b64(&data);
    let s = format!("\x1b_Ga=T,f=100,m=1;{}\x1b\\\x1b_Gm=0;{}\x1b\\", &p[..5], &p[5..]);
    assert_eq!(images(&lift(s.as_bytes()))[0].data, data);
    // Non-zero trailing bits before the padding (chafa's chunks end `gPP=`) are ignored.
    assert_eq!(iterm::decode_base64(b"gPP="), iterm::decode_base64(b"gPM="));
    assert_eq!(iterm::decode_base64(b"gPP=").map(|d| d.len()), Some(2));
    // Transmit, then place.
    let mut s = kitty("a=t,f=100,i=7", &png(10, 10));
    s.extend_from_slice(b"text\x1b_Ga=p,i=7\x1b\\\x1b_Ga=p,i=8\x1b\\\x1b_Ga=d\x1b\\");
    let outs = lift(&s);
    assert_eq!(text(&outs), b"text");
    assert_eq!(images(&outs).len(), 1);
    assert_eq!(
        drops(&outs)[0].reason,
        DropReason::Malformed("placement of an image not transmitted")
    );
}

#[test]
fn what_is_not_an_image_passes_byte_for_byte() {
    for s in [
        &b"\x1bP$qm\x1b\\"[..],
        b"\x1bP1$r0m\x1b\\",
        b"\x1b]0;title\x07",
        b"\x1b]1337;SetMark\x07",
        b"\x1b]133;A\x1b\\",
        b"\x1b_Xapc\x1b\\",
        b"\x1b[1;2H\x1bM\x1b7",
        "caf\u{e9} \u{2d0} \u{b0} \u{a0}".as_bytes(),
        b"\x1b",
        b"\x1bP12",
        b"\x1b]1337;Fil",
        b"\xc2",
        b"\x90\x9c\x9d",
    ] {
        let outs = lift(s);
        assert_eq!(outs, vec![Out::Text(s.to_vec())], "{s:?}");
    }
}

#[test]
fn malformed_truncated_and_too_large_are_dropped_and_the_text_goes_on() {
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (b"a\x1b]1337;File=inline=1:!!!\x07b".to_vec(), DropReason::Malformed("bad base64")),
        (
            iterm("inline=1", b"not an image", "\x07"),
            DropReason::Unsupported("not a PNG, JPEG, GIF, WebP or TIFF"),
        ),
        (
            iterm("inline=0", &png(1, 1), "\x07"),
            DropReason::Unsupported("a file download (inline=0), not an image"),
        ),
        (b"a\x1bPq#0????\x1b\\b".to_vec(), DropReason::Malformed("SIXEL that draws nothing")),
        (kitty("a=T,f=100", b"GIF89a"), DropReason::Malformed("f=100 but not a PNG")),
        (
            kitty("a=T,f=32,s=2,v=2", &[0; 15]),
            DropReason::Malformed("raw pixels do not match s= and v="),
        ),
        (
            kitty("a=T,t=f", b"/tmp/x"),
            DropReason::Unsupported("kitty transmission by file or shared memory"),
        ),
        (b"a\x1bPq#0~~\x1b[31mb".to_vec(), DropReason::Interrupted),
        (b"a\x1b_Ga=T;AAAA\x18b".to_vec(), DropReason::Interrupted),
        (b"a\x1b]1337;File=inline=1:AAAA".to_vec(), DropReason::Ended),
        (b"a\x1b_Ga=T,m=1;AAAA\x1b\\b".to_vec(), DropReason::Ended),
    ];
    for (input, reason) in cases {
        let outs = lift(&input);
        assert!(images(&outs).is_empty(), "{input:?}");
        assert_eq!(
            drops(&outs).iter().map(|d| d.reason.clone()).collect::<Vec<_>>(),
            vec![reason],
            "{input:?}"
        );
    }
    // The text around a cut image: the new sequence goes through whole.
    assert_eq!(text(&lift(b"a\x1bPq#0~~\x1b[31mb")), b"a\x1b[31mb");
    assert_eq!(text(&lift(b"a\x1b_Ga=T;AAAA\x18b")), b"a\x18b");
    // Over the cap: dropped, its bytes counted, and nothing of it kept past the cap.
    let config = LifterConfig { max_image_bytes: 100, ..LifterConfig::default() };
    let big = iterm("inline=1", &png(10, 10).repeat(20), "\x07");
    let mut input = b"before".to_vec();
    input.extend_from_slice(&big);
    input.extend_from_slice(b"after");
    let outs = lift_chunks(config, [&input[..]]);
    assert_eq!(text(&outs), b"beforeafter");
    let d = drops(&outs);
    assert_eq!(d[0].reason, DropReason::TooLarge { cap: 100 });
    assert_eq!(d[0].bytes, big.len() as u64 - 3);
    // kitty in chunks, over the cap together.
    let p = b64(&png(10, 10).repeat(4));
    let (a, b) = p.split_at(p.len() / 2);
    let s = format!("\x1b_Ga=T,f=100,m=1;{a}\x1b\\x\x1b_Gm=0;{b}\x1b\\y");
    let config = LifterConfig { max_image_bytes: p.len() - 4, ..LifterConfig::default() };
    let outs = lift_chunks(config, [s.as_bytes()]);
    assert_eq!(text(&outs), b"xy");
    assert!(matches!(drops(&outs)[0].reason, DropReason::TooLarge { .. }));
}

/// Every cut into two reads, byte by byte, and a few three-way cuts give what one read gives.
fn assert_split_invariant(input: &[u8]) {
    let whole = lift(input);
    for cut in 0..=input.len() {
        let (a, b) = input.split_at(cut);
        assert_eq!(lift_chunks(LifterConfig::default(), [a, b]), whole, "cut at {cut}");
    }
    assert_eq!(lift_chunks(LifterConfig::default(), input.chunks(1)), whole, "byte by byte");
    for step in [2, 3, 7, 64] {
        assert_eq!(
            lift_chunks(LifterConfig::default(), input.chunks(step)),
            whole,
            "chunks of {step}"
        );
    }
}

#[test]
fn every_split_into_reads_gives_the_same() {
    let input = mixed();
    let whole = lift(&input);
    assert_eq!(images(&whole).len(), 4, "{whole:?}");
    assert_eq!(drops(&whole).len(), 1);
    let mut want = b"before \xc2\xb0 \xcb\x90 \x1b[31mred\x1b[0m\r\n".to_vec();
    want.extend_from_slice(b"\x1bP$qm\x1b\\\x1b]0;title\x07after sixel\r\n");
    want.extend_from_slice(b"\x1b]1337;SetMark\x07\x1b_Xnot kitty\x1b\\between chunksend\x1b");
    assert_eq!(text(&whole), want);
    assert_split_invariant(&input);
    for case in
        [&b"a\x1bPq#0~~\x1b[31mb"[..], b"a\x1b_Ga=T;AAAA\x18b", b"\x1b]1337;File=inline=1:AAAA"]
    {
        assert_split_invariant(case);
    }
}

fn hostile() -> impl Strategy<Value = Vec<u8>> {
    // Bytes weighted towards what sequences are made of.
    let byte = prop_oneof![
        4 => any::<u8>(),
        2 => Just(0x1bu8),
        1 => Just(b'\\'), 1 => Just(b'P'), 1 => Just(b']'), 1 => Just(b'_'), 1 => Just(b'G'),
        1 => Just(b'q'), 1 => Just(0x07u8), 1 => Just(0xc2u8), 1 => Just(0x9cu8), 1 => Just(b';'),
    ];
    let piece = prop_oneof![
        4 => prop::collection::vec(byte, 0..40),
        1 => Just(SIXEL.to_vec()),
        1 => Just(b"\x1b]1337;File=inline=1:".to_vec()),
        1 => Just(b"\x1b_Ga=T,f=100,m=1;".to_vec()),
        1 => Just(b"\x1b]1337;MultipartFile=inline=1\x07".to_vec()),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

proptest! {
    /// Peer bytes never panic, any split gives the same, and a stream without ESC or C2 comes
    /// out as it went in.
    #[test]
    fn random_bytes_never_panic_and_split_anywhere(input in hostile(), cuts in prop::collection::vec(any::<usize>(), 0..4)) {
        let whole = lift(&input);
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for c in at {
            chunks.push(&input[last..c]);
            last = c;
        }
        chunks.push(&input[last..]);
        prop_assert_eq!(lift_chunks(LifterConfig::default(), chunks), whole.clone());
        let small = LifterConfig { max_image_bytes: 8, ..LifterConfig::default() };
        lift_chunks(small, input.chunks(3));
        if !input.iter().any(|&b| b == 0x1b || b == 0xc2) {
            prop_assert_eq!(whole, if input.is_empty() { vec![] } else { vec![Out::Text(input)] });
        }
    }
}

/// A program's last bytes that may start an image (a lone ESC, an undecided OSC) come out when
/// the reader releases them after its quiet while; an image in progress is never released.
#[test]
fn undecided_bytes_are_released_and_images_in_progress_are_not() {
    for held in [&b"\x1b"[..], b"\xc2", b"\x1b]13", b"\x1bP0;0"] {
        let mut lifter = Lifter::new(LifterConfig::default());
        let mut out = Vec::new();
        lifter.feed(b"done", &mut |p| {
            if let Piece::Text(t) = p {
                out.extend_from_slice(t)
            }
        });
        lifter.feed(held, &mut |p| {
            if let Piece::Text(t) = p {
                out.extend_from_slice(t)
            }
        });
        assert!(lifter.is_undecided(), "{held:?}");
        assert_eq!(out, b"done", "{held:?} came out before it was released");
        lifter.release_undecided(&mut |p| {
            if let Piece::Text(t) = p {
                out.extend_from_slice(t)
            }
        });
        assert!(lifter.is_idle());
        lifter.feed(b"[0m", &mut |p| {
            if let Piece::Text(t) = p {
                out.extend_from_slice(t)
            }
        });
        let mut want = b"done".to_vec();
        want.extend_from_slice(held);
        want.extend_from_slice(b"[0m");
        assert_eq!(out, want, "{held:?}");
    }
    // A SIXEL whose data is still coming: nothing to release, the image is lifted whole.
    let mut lifter = Lifter::new(LifterConfig::default());
    let mut outs = Vec::new();
    let mut push = |p: Piece<'_>| match p {
        Piece::Text(t) => outs.push(Out::Text(t.to_vec())),
        Piece::Image(i) => outs.push(Out::Image(i)),
        Piece::Dropped(d) => outs.push(Out::Dropped(d)),
        Piece::Signal(x) => outs.push(Out::Signal(x)),
    };
    lifter.feed(b"\x1bPq\"1;1;2;6#0;2;0;0;0#0~~", &mut push);
    assert!(!lifter.is_undecided());
    lifter.release_undecided(&mut push);
    lifter.feed(b"\x1b\\after", &mut push);
    assert_eq!(images(&outs).len(), 1, "{outs:?}");
    assert_eq!(text(&outs), b"after");
}

fn signals(outs: &[Out]) -> Vec<&Signal> {
    outs.iter().filter_map(|o| if let Out::Signal(s) = o { Some(s) } else { None }).collect()
}

/// OSC 52 that mosh-server keeps passes byte for byte; what it drops or cuts (another selector,
/// over 16384 characters) and OSC 9 / 777 notifications are lifted, BEL or ST (both forms)
/// terminated, at every cut into reads.
#[test]
fn clipboard_and_notifications_mosh_drops_are_lifted_at_every_split() {
    let big = "y".repeat(20_000);
    let mut input = b"a\x1b]52;c;aGk=\x07b".to_vec();
    input.extend_from_slice(format!("\x1b]52;p;{}\x1b\\c", b64(b"primary")).as_bytes());
    input.extend_from_slice(format!("\x1b]52;c;{}\x07d", b64(big.as_bytes())).as_bytes());
    input.extend_from_slice(b"\x1b]9;Build done\xc2\x9ce");
    input.extend_from_slice(b"\xc2\x9d777;notify;Agent;Waiting for you\x07f");
    input.extend_from_slice(b"\x1b]9;4;1;50\x07\x1b]52;p;?\x07\x1b]52;s;!!\x07g");
    input.extend_from_slice(b"\x1b]777;other\x07\x1b]99;x\x07\x1b]9;cut\x1b[0mh");
    input.extend_from_slice(b"\x1b]8;id=1;https://example.com/x\x1b\\link\x1b]8;;\x07i");
    input.extend_from_slice(b"\x1b]8;;javascript:alert(1)\x07j\x1b]8;;\x07");
    let whole = lift(&input);
    assert_eq!(
        signals(&whole),
        [
            &Signal::Clipboard { selector: "p".into(), text: "primary".into() },
            &Signal::Clipboard { selector: "c".into(), text: big.clone() },
            &Signal::Notify { title: "".into(), body: "Build done".into() },
            &Signal::Notify { title: "Agent".into(), body: "Waiting for you".into() },
            &Signal::Link { url: Some("https://example.com/x".into()) },
            &Signal::Link { url: None },
            &Signal::Link { url: None },
            &Signal::Link { url: None },
        ]
    );
    assert_eq!(
        text(&whole),
        b"a\x1b]52;c;aGk=\x07bcdef\x1b]9;4;1;50\x07g\x1b]777;other\x07\x1b]99;x\x07\x1b[0mhlinkij"
    );
    assert!(drops(&whole).is_empty());
    // The 20 kB write makes every-cut quadratic: check the cuts on a shorter stream, and the
    // whole one in reads of a few sizes.
    let short: Vec<u8> = input.iter().copied().filter(|&b| b != b'y').collect();
    assert_split_invariant(&short);
    for step in [1, 5, 4096] {
        assert_eq!(lift_chunks(LifterConfig::default(), input.chunks(step)), whole, "{step}");
    }
}

#[test]
fn a_clipboard_write_over_the_signal_cap_is_dropped_and_the_text_goes_on() {
    let mut input = b"\x1b]52;p;".to_vec();
    input.extend(std::iter::repeat_n(b'A', signal::MAX_SIGNAL_BYTES + 10));
    input.extend_from_slice(b"\x07after");
    let outs = lift_chunks(LifterConfig::default(), input.chunks(8192));
    assert!(signals(&outs).is_empty());
    assert_eq!(text(&outs), b"after");
}
