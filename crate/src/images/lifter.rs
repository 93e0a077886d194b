//! The stream state machine: finds image sequences in the pty output, however it is cut into
//! reads, and passes everything else through unchanged.
//!
//! Introducers: ESC P (DCS), ESC ] (OSC), ESC _ (APC), and their C1 forms as the UTF-8 the
//! terminal reads (C2 90, C2 9D, C2 9F; a lone 0x90 byte is a continuation byte of a character
//! such as "ː", never DCS, in the UTF-8 locale mosh-server requires). Terminators: ESC \ or
//! C2 9C, and BEL for OSC. A DCS is an image when its parameters are digits and `;` and its final
//! byte `q` (DECRQSS, `DCS $ q`, is not); an OSC when it starts `1337;File=`, `1337;MultipartFile=`,
//! `1337;FilePart=` or `1337;FileEnd`; an APC when it starts `G`. Anything else is let through
//! byte for byte once it is clear that it is not an image (a few bytes in).
//!
//! Inside an image: ESC followed by anything but `\`, CAN or SUB end it as a terminal would (it
//! is dropped; the ESC begins the next sequence, CAN / SUB pass on); the stream's end
//! ([`Lifter::finish`]) drops one in progress.

use super::cells::{CursorAfter, Geometry};
use super::iterm::Iterm;
use super::kitty::Kitty;
use super::signal::{self, MAX_SIGNAL_BYTES, OSC_SIGNAL, Outcome};
use super::sixel::sixel_size;
use super::{DropReason, Dropped, ImageFormat, LiftedImage, LifterConfig, Piece, Protocol};

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;
/// The first byte of a C1 control in UTF-8.
const C1: u8 = 0xc2;

/// Longest SIXEL parameter string (before `q`) taken as an image's.
const MAX_DCS_PARAMS: usize = 32;
/// The OSC 1337 commands that carry images (matched on their prefix).
const OSC_IMAGE: [&[u8]; 4] =
    [b"1337;File=", b"1337;MultipartFile=", b"1337;FilePart=", b"1337;FileEnd"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dcs,
    Osc,
    Apc,
    /// An OSC that mosh-server drops or cuts (`super::signal`): clipboard, notifications.
    Signal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Text.
    Ground,
    /// ESC held: an introducer, or text.
    Esc,
    /// C2 held: a C1 introducer, or a character.
    C1,
    /// After an introducer, reading far enough to know if it is an image.
    Prefix(Kind),
    /// In an image sequence.
    Body(Kind),
    /// ESC in an image: ST, or the image is cut.
    BodyEsc(Kind),
    /// C2 in an image: ST (C2 9C), or data.
    BodyC1(Kind),
}

/// Lifts images out of a byte stream fed in any chunks. See the [module](super) docs.
#[derive(Debug)]
pub struct Lifter {
    config: LifterConfig,
    state: State,
    /// The raw bytes of a sequence whose prefix is still being read (let through if it is not an
    /// image).
    held: Vec<u8>,
    /// The sequence after its introducer, at most `max_image_bytes` of it.
    body: Vec<u8>,
    /// Bytes of the body past the cap (counted, not kept).
    over: u64,
    iterm: Iterm,
    kitty: Kitty,
}

impl Lifter {
    pub fn new(config: LifterConfig) -> Lifter {
        Lifter {
            config,
            state: State::Ground,
            held: Vec::new(),
            body: Vec::new(),
            over: 0,
            iterm: Iterm::default(),
            kitty: Kitty::default(),
        }
    }

    /// The terminal's size changed (cells, or a cell's pixels).
    pub fn set_geometry(&mut self, geometry: Geometry) {
        self.config.geometry = geometry;
    }

    pub fn config(&self) -> &LifterConfig {
        &self.config
    }

    /// Whether nothing is held back (the last byte fed was let through, or ended an image).
    pub fn is_idle(&self) -> bool {
        self.state == State::Ground
    }

    /// Whether the last bytes fed may start an image but do not say yet (an ESC, a C1 lead byte,
    /// or an introducer whose prefix is still being read): a reader that waits for more output
    /// may [`release_undecided`](Self::release_undecided) them after a quiet while, so a lone
    /// ESC a program printed last is not held back until it prints again.
    pub fn is_undecided(&self) -> bool {
        matches!(self.state, State::Esc | State::C1 | State::Prefix(_))
    }

    /// Lets what is held as undecided through as text (nothing when an image is in progress or
    /// nothing is held). What follows is read anew: an image whose introducer was released this
    /// way comes through as text, the price of not holding a program's last bytes forever; the
    /// recorder only releases after its quiet while ([`is_undecided`](Self::is_undecided)).
    pub fn release_undecided(&mut self, out: &mut dyn FnMut(Piece<'_>)) {
        match self.state {
            State::Esc => out(Piece::Text(&[ESC])),
            State::C1 => out(Piece::Text(&[C1])),
            State::Prefix(_) => out(Piece::Text(&self.held)),
            _ => return,
        }
        self.state = State::Ground;
        self.held.clear();
    }

    /// Feeds the next bytes of the stream; `out` gets the pieces in stream order. Text may come
    /// in more pieces than it went in (an ESC held across a read comes out on its own).
    pub fn feed(&mut self, input: &[u8], out: &mut dyn FnMut(Piece<'_>)) {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Ground => {
                    let run = input[i..].iter().position(|&b| b == ESC || b == C1);
                    let end = run.map_or(input.len(), |n| i + n);
                    if end > i {
                        out(Piece::Text(&input[i..end]));
                    }
                    i = end;
                    if let Some(&b) = input.get(i) {
                        self.state = if b == ESC { State::Esc } else { State::C1 };
                        i += 1;
                    }
                }
                State::Esc | State::C1 => {
                    let b = input[i];
                    let lead = if self.state == State::Esc { ESC } else { C1 };
                    let kind = match (lead, b) {
                        (ESC, b'P') | (C1, 0x90) => Some(Kind::Dcs),
                        (ESC, b']') | (C1, 0x9d) => Some(Kind::Osc),
                        (ESC, b'_') | (C1, 0x9f) => Some(Kind::Apc),
                        _ => None,
                    };
                    match kind {
                        Some(kind) => {
                            self.held.clear();
                            self.held.extend_from_slice(&[lead, b]);
                            self.body.clear();
                            self.over = 0;
                            self.state = State::Prefix(kind);
                            i += 1;
                        }
                        None => {
                            // Not an introducer: the held byte is text; this one is read anew.
                            out(Piece::Text(if lead == ESC { &[ESC] } else { &[C1] }));
                            self.state = State::Ground;
                        }
                    }
                }
                State::Prefix(kind) => {
                    let b = input[i];
                    match self.prefix_step(kind, b) {
                        Some(next) => {
                            self.held.push(b);
                            self.body.push(b);
                            self.state = next;
                            i += 1;
                        }
                        None => {
                            // Not an image: what was held goes through, this byte is read anew.
                            out(Piece::Text(&self.held));
                            self.held.clear();
                            self.body.clear();
                            self.state = State::Ground;
                        }
                    }
                }
                State::Body(kind) => {
                    let ends = |b: u8| {
                        b == ESC
                            || b == C1
                            || b == CAN
                            || b == SUB
                            || (matches!(kind, Kind::Osc | Kind::Signal) && b == BEL)
                    };
                    let run = input[i..].iter().position(|&b| ends(b));
                    let end = run.map_or(input.len(), |n| i + n);
                    self.keep(kind, &input[i..end]);
                    i = end;
                    let Some(&b) = input.get(i) else { break };
                    i += 1;
                    match b {
                        ESC => self.state = State::BodyEsc(kind),
                        C1 => self.state = State::BodyC1(kind),
                        BEL => self.complete(kind, b"\x07", out),
                        _ => {
                            // CAN / SUB cancel the sequence; they go on to the terminal.
                            self.drop_current(kind, DropReason::Interrupted, out);
                            i -= 1;
                        }
                    }
                }
                State::BodyEsc(kind) => {
                    if input[i] == b'\\' {
                        i += 1;
                        self.complete(kind, b"\x1b\\", out);
                    } else {
                        // A new escape sequence: the image is cut; the ESC starts the next.
                        self.drop_current(kind, DropReason::Interrupted, out);
                        self.state = State::Esc;
                    }
                }
                State::BodyC1(kind) => {
                    if input[i] == 0x9c {
                        i += 1;
                        self.complete(kind, b"\xc2\x9c", out);
                    } else {
                        self.keep(kind, &[C1]);
                        self.state = State::Body(kind);
                    }
                }
            }
        }
    }

    /// The stream ended: what is held back comes out (text), an image in progress is dropped.
    pub fn finish(&mut self, out: &mut dyn FnMut(Piece<'_>)) {
        match std::mem::replace(&mut self.state, State::Ground) {
            State::Ground => {}
            State::Esc => out(Piece::Text(&[ESC])),
            State::C1 => out(Piece::Text(&[C1])),
            State::Prefix(_) => out(Piece::Text(&self.held)),
            State::Body(kind) | State::BodyEsc(kind) | State::BodyC1(kind) => {
                self.state = State::Body(kind);
                self.drop_current(kind, DropReason::Ended, out);
            }
        }
        self.held.clear();
        for (protocol, d) in
            [(Protocol::Iterm, self.iterm.finish()), (Protocol::Kitty, self.kitty.finish())]
        {
            if let Some((reason, bytes)) = d {
                out(Piece::Dropped(Dropped { protocol, reason, bytes }));
            }
        }
    }

    /// The state after prefix byte `b`, or None when the sequence is not an image.
    fn prefix_step(&self, kind: Kind, b: u8) -> Option<State> {
        let so_far = &self.body;
        match kind {
            Kind::Dcs => match b {
                b'q' => Some(State::Body(kind)),
                b'0'..=b'9' | b';' if so_far.len() < MAX_DCS_PARAMS => Some(State::Prefix(kind)),
                _ => None,
            },
            Kind::Apc => (b == b'G').then_some(State::Body(kind)),
            Kind::Osc | Kind::Signal => {
                let n = so_far.len();
                let lifted = OSC_IMAGE.iter().map(|p| (p, Kind::Osc));
                let (p, k) = lifted
                    .chain(OSC_SIGNAL.iter().map(|p| (p, Kind::Signal)))
                    .find(|(p, _)| p.len() > n && p[..n] == so_far[..] && p[n] == b)?;
                Some(if p.len() == n + 1 { State::Body(k) } else { State::Prefix(kind) })
            }
        }
    }

    /// Keeps body bytes up to the cap; counts the rest.
    fn keep(&mut self, kind: Kind, bytes: &[u8]) {
        let cap = if kind == Kind::Signal { MAX_SIGNAL_BYTES } else { self.config.max_image_bytes };
        let room = cap.saturating_sub(self.body.len());
        let (kept, past) = bytes.split_at(bytes.len().min(room));
        self.body.extend_from_slice(kept);
        self.over += past.len() as u64;
    }

    fn protocol(kind: Kind) -> Protocol {
        match kind {
            Kind::Dcs => Protocol::Sixel,
            Kind::Osc => Protocol::Iterm,
            Kind::Apc => Protocol::Kitty,
            // Never asked: a signal is never reported as a dropped image.
            Kind::Signal => Protocol::Iterm,
        }
    }

    fn drop_current(&mut self, kind: Kind, reason: DropReason, out: &mut dyn FnMut(Piece<'_>)) {
        if kind == Kind::Signal {
            // A cut clipboard write or notification is let go quietly (mosh ignores what it
            // cannot parse too).
            self.reset_body();
            return;
        }
        let bytes = self.body.len() as u64 + self.over;
        out(Piece::Dropped(Dropped { protocol: Self::protocol(kind), reason, bytes }));
        self.reset_body();
    }

    fn reset_body(&mut self) {
        self.state = State::Ground;
        self.held.clear();
        // An image's worth of memory is not kept once it is done.
        if self.body.capacity() > 64 * 1024 {
            self.body = Vec::new();
        } else {
            self.body.clear();
        }
        self.over = 0;
    }

    /// The image sequence ended (ST or BEL: `term`).
    fn complete(&mut self, kind: Kind, term: &[u8], out: &mut dyn FnMut(Piece<'_>)) {
        if kind == Kind::Signal {
            match signal::decide(&self.body, self.over > 0) {
                Outcome::Pass => {
                    // mosh-server handles it: on as it came (introducer, string, terminator).
                    let mut raw = Vec::with_capacity(self.body.len() + 4);
                    raw.extend_from_slice(&self.held[..2]);
                    raw.extend_from_slice(&self.body);
                    raw.extend_from_slice(term);
                    out(Piece::Text(&raw));
                }
                Outcome::Signal(s) => out(Piece::Signal(s)),
                Outcome::Drop => {}
            }
            self.reset_body();
            return;
        }
        let (g, cap) = (self.config.geometry, self.config.max_image_bytes);
        let over = self.over > 0;
        let protocol = Self::protocol(kind);
        let outcome = match kind {
            Kind::Dcs => Some(if over {
                Err((DropReason::TooLarge { cap }, self.body.len() as u64 + self.over))
            } else {
                sixel(&self.body, &g)
            }),
            Kind::Osc => self.iterm.complete(&self.body, over, &g, cap),
            Kind::Apc => self.kitty.complete(&self.body, over, &g, cap),
            Kind::Signal => None,
        };
        let over_bytes = self.over;
        match outcome {
            Some(Ok(image)) => out(Piece::Image(image)),
            Some(Err((reason, bytes))) => {
                let bytes = if matches!(reason, DropReason::TooLarge { .. }) {
                    bytes.max(self.body.len() as u64 + over_bytes)
                } else {
                    bytes
                };
                out(Piece::Dropped(Dropped { protocol, reason, bytes }))
            }
            None => {}
        }
        self.reset_body();
    }
}

/// A SIXEL image from its DCS body (`params q data`).
fn sixel(body: &[u8], g: &Geometry) -> Result<LiftedImage, (DropReason, u64)> {
    let q = body.iter().position(|&b| b == b'q').unwrap_or(0);
    let (width, height) = sixel_size(&body[q + 1..])
        .ok_or((DropReason::Malformed("SIXEL that draws nothing"), body.len() as u64))?;
    let (cols, rows) = g.cells_of(width, height);
    let mut data = Vec::with_capacity(body.len() + 4);
    data.extend_from_slice(b"\x1bP");
    data.extend_from_slice(body);
    data.extend_from_slice(b"\x1b\\");
    Ok(LiftedImage {
        protocol: Protocol::Sixel,
        format: ImageFormat::Sixel,
        data,
        width,
        height,
        cols,
        rows,
        cursor: CursorAfter::BelowLeft,
        name: None,
    })
}
