//! Bytes to terminal actions: mosh's UTF-8 decoder and DEC/ANSI state machine, nothing more.
//!
//! The parser classifies; the emulator ([`super::emulator`]) gives the actions meaning. The rules
//! are mosh's (`src/terminal/parser.cc`, `parserstate.cc`, `terminaldispatcher.cc`;
//! MOSH-PROTOCOL.md 8.3), which differ from the `vte` crate in ways that change screens: C1
//! controls as Unicode scalars, any ESC/CAN/SUB/C1 ends and dispatches an OSC, code points >=
//! U+00A0 act like `A` inside sequences, CSI parameter text is capped at 100 characters, OSC at 16
//! Ki characters. Hence our own state machine rather than `vte`.

/// What the parser hands to its consumer.
pub(crate) trait Perform {
    /// A printable character (Ground state).
    fn print(&mut self, c: char);
    /// A C0 or C1 control to execute.
    fn execute(&mut self, c: char);
    /// `ESC` + intermediates + final.
    fn esc_dispatch(&mut self, collected: &str, final_char: char);
    /// `CSI` + parameters + private markers/intermediates + final.
    fn csi_dispatch(&mut self, params: &Params, collected: &str, final_char: char);
    /// An OSC string, dispatched when it ends (by BEL, ST, or any sequence start or CAN/SUB).
    fn osc_dispatch(&mut self, osc: &str);
    /// At `ESC [` in Ground, with the input after the `[`: a consumer that recognises a whole
    /// `CSI params final` there (digits and `;` only, within the parameter cap) may act on it
    /// straight from the bytes, as [`csi_dispatch`](Self::csi_dispatch) would, and answer how
    /// many bytes it took; the parser then goes on after them. `None` (the default): the parser
    /// reads it as usual. (The emulator takes mosh-server's SGRs this way.)
    fn csi_from_input(&mut self, after_bracket: &[u8]) -> Option<usize> {
        let _ = after_bracket;
        None
    }
}

/// mosh keeps at most 100 characters of parameter text ("16 five-char params plus 15 semicolons").
pub(crate) const MAX_PARAM_TEXT: usize = 100;
/// mosh keeps at most 8 dispatch characters.
const MAX_COLLECTED: usize = 8;
/// mosh's `MAXIMUM_CLIPBOARD_SIZE`: OSC strings keep their first 16 Ki characters.
pub(crate) const MAX_OSC_CHARS: usize = 16 * 1024;
/// Larger parameter values count as missing (mosh's `PARAM_MAX`).
const PARAM_MAX: i64 = 65535;

/// CSI parameters as mosh keeps them: the first `MAX_PARAM_TEXT` characters of parameter text
/// (ASCII digits and `;`), read field by field where they are used. Every `;`-separated field is
/// a value, -1 when empty or out of range.
///
/// A view of the text rather than a list of values: a sequence that arrives whole (every SGR of
/// a repaint) is read straight from the input, with nothing stored, and the SGR reads its fields
/// once, in order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Params<'a> {
    text: &'a [u8],
}

impl<'a> Params<'a> {
    /// Parameter text: only digits and `;`, at most `MAX_PARAM_TEXT` characters.
    pub(crate) fn new(text: &'a [u8]) -> Params<'a> {
        debug_assert!(text.len() <= MAX_PARAM_TEXT && text.iter().all(|&b| is_param_byte(b)));
        Params { text }
    }
    /// The fields in order (at least one: an empty parameter list is one missing field).
    pub(crate) fn fields(&self) -> Fields<'a> {
        Fields { text: self.text, at: 0, done: false }
    }
    /// The fields for a reader that handles only the common form (see [`ShortFields`]).
    pub(crate) fn short_fields(&self) -> ShortFields<'a> {
        ShortFields { text: self.text, at: 0 }
    }
    /// Field `n`, or `default` when it is missing, empty or below 1 (mosh's `getparam`).
    pub(crate) fn get(&self, n: usize, default: i32) -> i32 {
        or_default(self.fields().nth(n), default)
    }
}

/// A field's value as mosh's `getparam` reads it: `default` when it is missing, empty or below 1.
#[inline]
pub(crate) fn or_default(field: Option<i32>, default: i32) -> i32 {
    match field {
        Some(v) if v >= 1 => v,
        _ => default,
    }
}

/// The fields of a parameter text, in order: -1 for an empty field or one above `PARAM_MAX`.
#[derive(Clone, Debug)]
pub(crate) struct Fields<'a> {
    text: &'a [u8],
    /// Where the next field starts (at most `text.len()`).
    at: usize,
    /// The last field was read (it is not followed by a `;`).
    done: bool,
}

impl Iterator for Fields<'_> {
    type Item = i32;

    #[inline]
    fn next(&mut self) -> Option<i32> {
        if self.done {
            return None;
        }
        let rest = self.text.get(self.at..).unwrap_or_default();
        let (value, len) = match rest.get(..4) {
            Some(&[b0, b1, b2, b3]) => match short_field(u32::from_le_bytes([b0, b1, b2, b3])) {
                Some(short) => short,
                None => long_field(rest),
            },
            _ => long_field(rest),
        };
        // The text holds only digits and `;`: what ends the digits is a `;` or the end.
        if len < rest.len() {
            self.at += len + 1;
        } else {
            self.done = true;
        }
        Some(value)
    }
}

/// The fields of a parameter text where every field has one to three digits (every SGR a server
/// writes), for a reader that falls back to [`Fields`] at anything else. Cheaper than [`Fields`]:
/// a field is one word read, with no case for long fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShortFields<'a> {
    text: &'a [u8],
    /// Where the next field starts; past the end once the last field was read.
    at: usize,
}

impl ShortFields<'_> {
    /// Whether a field is left.
    #[inline]
    pub(crate) fn more(&self) -> bool {
        self.at <= self.text.len()
    }
    /// The next field's value, or `None` when there is none or it is empty or longer than three
    /// digits (the reader then starts over with [`Fields`]).
    #[inline]
    pub(crate) fn next(&mut self) -> Option<u16> {
        let rest = self.text.get(self.at..)?;
        let (value, len) = match rest.get(..4) {
            Some(&[b0, b1, b2, b3]) => short_field(u32::from_le_bytes([b0, b1, b2, b3]))?,
            _ => {
                // The last few bytes: as many as there are, padded with a non-digit.
                let mut word = [b';'; 4];
                word[..rest.len()].copy_from_slice(rest);
                short_field(u32::from_le_bytes(word))?
            }
        };
        if len == 0 {
            return None;
        }
        // A `;` or the end follows the digits; past the end means no field is left.
        self.at += len + 1;
        Some(value as u16)
    }
    /// Whether the next fields are `38;5;`, `48;5;`, `38;2;` or `48;2;` (a colour's introduction,
    /// `N;` or `R;G;B` follows): `Some((38 or 48, 5 or 2))`, taken, if so. Five bytes compared as
    /// one word, instead of two fields read.
    #[inline]
    pub(crate) fn next_color(&mut self) -> Option<(u16, u16)> {
        let rest = self.text.get(self.at..)?;
        let word = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?) & 0xff_ffff_ffff;
        const fn intro(text: &[u8; 5]) -> u64 {
            u64::from_le_bytes([text[0], text[1], text[2], text[3], text[4], 0, 0, 0])
        }
        let found = match word {
            w if w == intro(b"38;5;") => (38, 5),
            w if w == intro(b"48;5;") => (48, 5),
            w if w == intro(b"38;2;") => (38, 2),
            w if w == intro(b"48;2;") => (48, 2),
            _ => return None,
        };
        self.at += 5;
        Some(found)
    }
    /// Whether the next field is the single digit `d`; takes it if so.
    #[inline]
    pub(crate) fn next_is_digit(&mut self, d: u8) -> bool {
        let rest = self.text.get(self.at..).unwrap_or_default();
        let is = rest.first() == Some(&(b'0' + d)) && rest.get(1).is_none_or(|&b| b == b';');
        if is {
            self.at += 2;
        }
        is
    }
}

/// A field of at most three digits at the start of the little-endian word `w` (every SGR
/// parameter a server sends), read without a branch per digit: its value (-1 for none) and its
/// number of digits; `None` for four digits or more.
#[inline(always)]
pub(crate) fn short_field(w: u32) -> Option<(i32, usize)> {
    // A byte of `not_digit` is nonzero where `w`'s is not an ASCII digit: its high nibble is not
    // 3, or its low nibble is 10 or more (adding 6 carries into bit 4; no byte carries into the
    // next).
    let not_digit =
        ((w & 0xf0f0_f0f0) ^ 0x3030_3030) | (((w & 0x0f0f_0f0f) + 0x0606_0606) & 0x1010_1010);
    let len = (not_digit.trailing_zeros() / 8) as usize;
    if len == 4 {
        return None;
    }
    if len == 0 {
        return Some((-1, 0));
    }
    // The digits' values, right-aligned in the word (first digit lowest), then combined
    // pairwise: 10 * d0 + d1 in bytes 0 and 2, then 100 * (that) + (the other).
    let d = (u64::from(w & 0x0f0f_0f0f) << (8 * (4 - len))) as u32;
    let pairs = (d * 10 + (d >> 8)) & 0x00ff_00ff;
    Some((((pairs * 100 + (pairs >> 16)) & 0xffff) as i32, len))
}

/// A field read digit by digit (long fields and the text's last few bytes): its value (-1 for
/// none or above `PARAM_MAX`) and its number of digits.
fn long_field(text: &[u8]) -> (i32, usize) {
    let len = text.iter().take_while(|b| b.is_ascii_digit()).count();
    let value =
        text[..len].iter().fold(0i64, |v, &b| (v * 10 + i64::from(b - b'0')).min(PARAM_MAX + 1));
    (if len == 0 || value > PARAM_MAX { -1 } else { value as i32 }, len)
}

/// How many bytes at the start of `bytes` are parameter text (digits and `;`), eight at a time:
/// a repaint's SGRs are some twenty of them per cell.
#[inline]
fn param_run(bytes: &[u8]) -> usize {
    const LOW: u64 = 0x0101_0101_0101_0101;
    let mut n = 0;
    while let Some(chunk) = bytes.get(n..n + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        // Parameter bytes are 0x30..=0x3B but not 0x3A: `x` below is 0..=9 or 11 for them.
        // Each test sets a byte's high bit exactly (no carry or borrow crosses bytes).
        let x = u64::from_le_bytes(word) ^ (0x30 * LOW);
        let twelve_or_more = (((x & (0x7f * LOW)) + 0x74 * LOW) | x) & (0x80 * LOW);
        let colon = x ^ (0x0a * LOW);
        let is_colon = !(((colon & (0x7f * LOW)) + 0x7f * LOW) | colon) & (0x80 * LOW);
        let not_param = twelve_or_more | is_colon;
        if not_param != 0 {
            return n + (not_param.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + bytes[n..].iter().take_while(|&&b| is_param_byte(b)).count()
}

/// The parameter text of a sequence that arrives in pieces (or byte by byte through the state
/// machine), kept up to mosh's cap.
#[derive(Clone, Copy, Debug)]
struct ParamText {
    len: u8,
    buf: [u8; MAX_PARAM_TEXT],
}

impl Default for ParamText {
    fn default() -> Self {
        ParamText { len: 0, buf: [0; MAX_PARAM_TEXT] }
    }
}

impl ParamText {
    fn clear(&mut self) {
        self.len = 0;
    }
    /// Keeps what fits of `text` (parameter characters past the cap are dropped, as mosh does).
    fn push(&mut self, text: &[u8]) {
        let len = usize::from(self.len);
        let n = text.len().min(MAX_PARAM_TEXT - len);
        self.buf[len..len + n].copy_from_slice(&text[..n]);
        self.len += n as u8;
    }
    fn params(&self) -> Params<'_> {
        Params::new(&self.buf[..usize::from(self.len)])
    }
}

/// The intermediate and private-marker characters of a sequence, at most `MAX_COLLECTED`.
/// Only ASCII reaches it (0x20-0x2F and 0x3C-0x3F; higher code points act as `A`), so it is a
/// byte array that clones by copy.
#[derive(Clone, Copy, Debug, Default)]
struct Collected {
    len: u8,
    buf: [u8; MAX_COLLECTED],
}

impl Collected {
    fn clear(&mut self) {
        self.len = 0;
    }
    fn push(&mut self, c: char) {
        let len = usize::from(self.len);
        if len < MAX_COLLECTED && c.is_ascii() {
            self.buf[len] = c as u8;
            self.len += 1;
        }
    }
    fn as_str(&self) -> &str {
        if self.len == 0 {
            // Nearly every sequence: no need to check the bytes.
            return "";
        }
        // Only ASCII is pushed, so the bytes are always valid UTF-8.
        std::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or("")
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Ground,
    Escape,
    EscapeIntermediate,
    CsiEntry,
    CsiParam,
    CsiIntermediate,
    CsiIgnore,
    DcsEntry,
    DcsParam,
    DcsIntermediate,
    DcsPassthrough,
    DcsIgnore,
    OscString,
    SosPmApcString,
}

/// The UTF-8 decoder plus the escape-sequence state machine. Cloning it copies a partial
/// sequence, so a snapshot resumes exactly where its source stopped.
#[derive(Clone, Debug)]
pub(crate) struct Parser {
    utf8: [u8; 6],
    utf8_len: usize,
    state: State,
    params: ParamText,
    collected: Collected,
    osc: String,
    osc_chars: usize,
}

impl Default for Parser {
    fn default() -> Self {
        Parser {
            utf8: [0; 6],
            utf8_len: 0,
            state: State::Ground,
            params: ParamText::default(),
            collected: Collected::default(),
            osc: String::new(),
            osc_chars: 0,
        }
    }
}

/// The outcome of decoding the buffered bytes, as glibc's `mbrtowc` reports it.
enum Decoded {
    Char(u32),
    Incomplete,
    Invalid,
}

/// glibc's UTF-8 `mbrtowc` on `buf` (checked against the real one by `tests/terminal_parser.rs`):
/// leads C2..FD announce 2..6 bytes, C0/C1/FE/FF and stray continuation bytes are invalid at once,
/// a non-continuation byte is invalid when it arrives, overlong forms and surrogates are invalid
/// once complete; values above U+10FFFF decode (mosh replaces them).
fn decode(buf: &[u8]) -> Decoded {
    let lead = buf[0];
    let (need, init) = match lead {
        0x00..=0x7f => return Decoded::Char(u32::from(lead)),
        0xc2..=0xdf => (2, u32::from(lead & 0x1f)),
        0xe0..=0xef => (3, u32::from(lead & 0x0f)),
        0xf0..=0xf7 => (4, u32::from(lead & 0x07)),
        0xf8..=0xfb => (5, u32::from(lead & 0x03)),
        0xfc..=0xfd => (6, u32::from(lead & 0x01)),
        _ => return Decoded::Invalid,
    };
    let mut value = init;
    for &b in &buf[1..] {
        if b & 0xc0 != 0x80 {
            return Decoded::Invalid;
        }
        value = (value << 6) | u32::from(b & 0x3f);
    }
    if buf.len() < need {
        return Decoded::Incomplete;
    }
    let min = [0, 0, 0x80, 0x800, 0x1_0000, 0x20_0000, 0x400_0000][need];
    if value < min || (0xd800..=0xdfff).contains(&value) {
        return Decoded::Invalid;
    }
    Decoded::Char(value)
}

/// A character of CSI parameter text.
#[inline]
fn is_param_byte(b: u8) -> bool {
    b.is_ascii_digit() || b == b';'
}

fn is_c0_prime(c: u32) -> bool {
    c <= 0x17 || c == 0x19 || (0x1c..=0x1f).contains(&c)
}

impl Parser {
    pub(crate) fn new() -> Parser {
        Parser::default()
    }

    /// Feeds bytes; actions go to `perform` as they complete.
    pub(crate) fn advance<P: Perform>(&mut self, perform: &mut P, bytes: &[u8]) {
        let mut at = 0;
        while at < bytes.len() {
            let b = bytes[at];
            if self.utf8_len == 0 {
                // Shortcuts for the bulk of a repaint, each exactly what the state machine does
                // with the same bytes (no transition from anywhere matches any of them).
                match self.state {
                    State::Ground if (0x20..0x7f).contains(&b) => {
                        perform.print(char::from(b));
                        at += 1;
                        continue;
                    }
                    State::Ground if b == 0x1b => {
                        if let Some(n) = self.whole_csi(perform, &bytes[at..]) {
                            at += n;
                            continue;
                        }
                    }
                    State::CsiEntry | State::CsiParam => {
                        let run = param_run(&bytes[at..]);
                        self.params.push(&bytes[at..at + run]);
                        if run > 0 {
                            self.state = State::CsiParam;
                            at += run;
                            continue;
                        }
                    }
                    _ => {}
                }
            }
            self.byte(perform, b);
            at += 1;
        }
    }

    /// In Ground at an ESC that starts a CSI: takes the `ESC [` and the parameters after it,
    /// then dispatches when the final byte follows (no private marker, no intermediates), and
    /// returns how many bytes it took. Anything else is left to the state machine (`None`).
    /// A whole sequence is dispatched with its parameters read in place.
    #[inline]
    fn whole_csi<P: Perform>(&mut self, perform: &mut P, bytes: &[u8]) -> Option<usize> {
        if bytes.get(1) != Some(&b'[') {
            return None;
        }
        let text = bytes.get(2..).unwrap_or_default();
        if let Some(n) = perform.csi_from_input(text) {
            // What entering CsiEntry and dispatching leave: Ground, nothing collected.
            self.collected.clear();
            self.params.clear();
            self.state = State::Ground;
            return Some(2 + n);
        }
        let run = param_run(text);
        match text.get(run) {
            Some(&b) if (0x40..=0x7e).contains(&b) => {
                // What entering CsiEntry and dispatching leave: Ground, nothing collected.
                self.collected.clear();
                self.params.clear();
                let params = Params::new(&text[..run.min(MAX_PARAM_TEXT)]);
                perform.csi_dispatch(&params, "", char::from(b));
                self.state = State::Ground;
                Some(3 + run)
            }
            _ => {
                self.enter(State::CsiEntry);
                self.params.push(&text[..run]);
                if run > 0 {
                    self.state = State::CsiParam;
                }
                Some(2 + run)
            }
        }
    }

    /// mosh's `UTF8Parser::input`: ASCII goes straight through; otherwise bytes gather until
    /// `mbrtowc` accepts or rejects them. A rejected buffer yields U+FFFD and its last byte is
    /// tried again as the start of a new character (Unicode "best practice" for U+FFFD).
    fn byte<P: Perform>(&mut self, perform: &mut P, b: u8) {
        if self.utf8_len == 0 && b < 0x80 {
            self.input(perform, char::from(b));
            return;
        }
        self.utf8[self.utf8_len] = b;
        self.utf8_len += 1;
        loop {
            match decode(&self.utf8[..self.utf8_len]) {
                Decoded::Incomplete => return,
                Decoded::Char(cp) => {
                    self.utf8_len = 0;
                    // Above U+10FFFF (glibc decodes up to 0x7FFFFFFF) mosh substitutes U+FFFD.
                    let c = char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER);
                    self.input(perform, c);
                    return;
                }
                Decoded::Invalid => {
                    let retry = self.utf8_len > 1;
                    let last = self.utf8[self.utf8_len - 1];
                    self.utf8_len = 0;
                    self.input(perform, char::REPLACEMENT_CHARACTER);
                    if !retry {
                        return;
                    }
                    self.utf8[0] = last;
                    self.utf8_len = 1;
                }
            }
        }
    }

    fn exit<P: Perform>(&mut self, perform: &mut P) {
        if self.state == State::OscString {
            perform.osc_dispatch(&self.osc);
        }
    }

    fn enter(&mut self, state: State) {
        self.state = state;
        match state {
            State::Escape | State::CsiEntry | State::DcsEntry => {
                self.params.clear();
                self.collected.clear();
            }
            State::OscString => {
                self.osc.clear();
                self.osc_chars = 0;
            }
            _ => {}
        }
    }

    fn transition<P: Perform>(&mut self, perform: &mut P, to: State) {
        self.exit(perform);
        self.enter(to);
    }

    fn collect(&mut self, c: char) {
        self.collected.push(c);
    }

    /// One Unicode scalar through the state machine (mosh's `Parser::input`).
    fn input<P: Perform>(&mut self, perform: &mut P, ch: char) {
        let c = u32::from(ch);
        // Transitions from anywhere: they leave the current state (dispatching an OSC).
        match c {
            0x18 | 0x1a | 0x80..=0x8f | 0x91..=0x97 | 0x99 | 0x9a => {
                self.exit(perform);
                perform.execute(ch);
                self.enter(State::Ground);
                return;
            }
            0x9c => return self.transition(perform, State::Ground),
            0x1b => return self.transition(perform, State::Escape),
            0x98 | 0x9e | 0x9f => return self.transition(perform, State::SosPmApcString),
            0x90 => return self.transition(perform, State::DcsEntry),
            0x9d => return self.transition(perform, State::OscString),
            0x9b => return self.transition(perform, State::CsiEntry),
            _ => {}
        }
        // High code points behave like 'A' for the rules; actions still see the real character.
        let r = if c >= 0xa0 { 0x41 } else { c };
        match self.state {
            State::Ground => {
                if is_c0_prime(r) {
                    perform.execute(ch);
                } else if (0x20..=0x7f).contains(&r) {
                    perform.print(ch);
                }
            }
            State::Escape => {
                if is_c0_prime(r) {
                    perform.execute(ch);
                } else if (0x20..=0x2f).contains(&r) {
                    self.collect(ch);
                    self.state = State::EscapeIntermediate;
                } else if matches!(r, 0x30..=0x4f | 0x51..=0x57 | 0x59 | 0x5a | 0x5c | 0x60..=0x7e)
                {
                    perform.esc_dispatch(self.collected.as_str(), ch);
                    self.enter(State::Ground);
                } else if r == 0x5b {
                    self.enter(State::CsiEntry);
                } else if r == 0x5d {
                    self.enter(State::OscString);
                } else if r == 0x50 {
                    self.enter(State::DcsEntry);
                } else if matches!(r, 0x58 | 0x5e | 0x5f) {
                    self.enter(State::SosPmApcString);
                }
            }
            State::EscapeIntermediate => {
                if is_c0_prime(r) {
                    perform.execute(ch);
                } else if (0x20..=0x2f).contains(&r) {
                    self.collect(ch);
                } else if (0x30..=0x7e).contains(&r) {
                    perform.esc_dispatch(self.collected.as_str(), ch);
                    self.enter(State::Ground);
                }
            }
            State::CsiEntry | State::CsiParam => {
                let entry = self.state == State::CsiEntry;
                if is_c0_prime(r) {
                    perform.execute(ch);
                } else if (0x40..=0x7e).contains(&r) {
                    self.csi_dispatch(perform, ch);
                } else if (0x30..=0x39).contains(&r) || r == 0x3b {
                    self.params.push(&[r as u8]);
                    self.state = State::CsiParam;
                } else if (0x3c..=0x3f).contains(&r) {
                    if entry {
                        self.collect(ch);
                        self.state = State::CsiParam;
                    } else {
                        self.state = State::CsiIgnore;
                    }
                } else if r == 0x3a {
                    self.state = State::CsiIgnore;
                } else if (0x20..=0x2f).contains(&r) {
                    self.collect(ch);
                    self.state = State::CsiIntermediate;
                }
            }
            State::CsiIntermediate => {
                if is_c0_prime(r) {
                    perform.execute(ch);
                } else if (0x20..=0x2f).contains(&r) {
                    self.collect(ch);
                } else if (0x40..=0x7e).contains(&r) {
                    self.csi_dispatch(perform, ch);
                } else if (0x30..=0x3f).contains(&r) {
                    self.state = State::CsiIgnore;
                }
            }
            State::CsiIgnore => {
                if is_c0_prime(r) {
                    perform.execute(ch);
                } else if (0x40..=0x7e).contains(&r) {
                    self.enter(State::Ground);
                }
            }
            // DCS strings are consumed and ignored (mosh's emulator does nothing with them).
            State::DcsEntry | State::DcsParam => {
                let entry = self.state == State::DcsEntry;
                if (0x20..=0x2f).contains(&r) {
                    self.state = State::DcsIntermediate;
                } else if r == 0x3a || (!entry && (0x3c..=0x3f).contains(&r)) {
                    self.state = State::DcsIgnore;
                } else if (0x30..=0x39).contains(&r) || r == 0x3b || (0x3c..=0x3f).contains(&r) {
                    self.state = State::DcsParam;
                } else if (0x40..=0x7e).contains(&r) {
                    self.state = State::DcsPassthrough;
                }
            }
            State::DcsIntermediate => {
                if (0x40..=0x7e).contains(&r) {
                    self.state = State::DcsPassthrough;
                } else if (0x30..=0x3f).contains(&r) {
                    self.state = State::DcsIgnore;
                }
            }
            State::DcsPassthrough | State::DcsIgnore | State::SosPmApcString => {}
            State::OscString => {
                if (0x20..=0x7f).contains(&r) {
                    if self.osc_chars < MAX_OSC_CHARS {
                        self.osc.push(ch);
                        self.osc_chars += 1;
                    }
                } else if r == 0x07 {
                    self.transition(perform, State::Ground);
                }
            }
        }
    }

    fn csi_dispatch<P: Perform>(&mut self, perform: &mut P, ch: char) {
        perform.csi_dispatch(&self.params.params(), self.collected.as_str(), ch);
        self.enter(State::Ground);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// mosh's reading, one character at a time: every `;` ends a field, -1 for an empty one or
    /// one above `PARAM_MAX`.
    fn reference(text: &[u8]) -> Vec<i32> {
        let mut values = Vec::new();
        let (mut field, mut digits) = (0i64, false);
        for &b in text {
            if b == b';' {
                values.push(if !digits || field > PARAM_MAX { -1 } else { field as i32 });
                (field, digits) = (0, false);
            } else {
                field = (field * 10 + i64::from(b - b'0')).min(PARAM_MAX + 1);
                digits = true;
            }
        }
        values.push(if !digits || field > PARAM_MAX { -1 } else { field as i32 });
        values
    }

    proptest! {
        /// The fields (word at a time for short ones) are what reading the text one character
        /// at a time gives, and `get` agrees with them.
        #[test]
        fn fields_match_the_byte_at_a_time_reading(
            fields in prop::collection::vec(prop_oneof![Just(String::new()), "[0-9]{1,3}", "[0-9]{4,9}"], 0..40),
        ) {
            let text = fields.join(";");
            let text = &text.as_bytes()[..text.len().min(MAX_PARAM_TEXT)];
            let params = Params::new(text);
            let want = reference(text);
            prop_assert_eq!(params.fields().collect::<Vec<_>>(), want.clone());
            for (n, &v) in want.iter().enumerate() {
                prop_assert_eq!(params.get(n, 7), if v >= 1 { v } else { 7 });
            }
            prop_assert_eq!(params.get(want.len(), 7), 7);
        }

        /// `param_run` (eight bytes at a time) stops where the first byte that is not a digit or
        /// `;` is, and a sequence cut anywhere dispatches the parameters it dispatches whole.
        #[test]
        fn parameter_runs_and_cut_sequences_read_as_whole_ones(
            fields in prop::collection::vec(prop_oneof![Just(String::new()), "[0-9]{1,3}", "[0-9]{4,9}"], 0..40),
            tail in prop::sample::select(vec!["", "m", "H", "?", ":", "\x1b", "12", "m!"]),
            cut in 0usize..200,
        ) {
            let text = format!("{}{tail}", fields.join(";"));
            let bytes = text.as_bytes();
            let want = bytes.iter().take_while(|&&b| is_param_byte(b)).count();
            prop_assert_eq!(param_run(bytes), want);

            let seq = format!("\x1b[{text}");
            let cut = cut.min(seq.len());
            let mut whole = Recorder::default();
            Parser::new().advance(&mut whole, seq.as_bytes());
            let mut pieces = Recorder::default();
            let mut parser = Parser::new();
            parser.advance(&mut pieces, &seq.as_bytes()[..cut]);
            parser.advance(&mut pieces, &seq.as_bytes()[cut..]);
            let mut by_byte = Recorder::default();
            let mut parser = Parser::new();
            for b in seq.as_bytes() {
                parser.byte(&mut by_byte, *b);
            }
            prop_assert_eq!(&pieces.0, &whole.0);
            prop_assert_eq!(&by_byte.0, &whole.0);
        }
    }

    /// Every action as text, to compare parses.
    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl Perform for Recorder {
        fn print(&mut self, c: char) {
            self.0.push(format!("print {c:?}"));
        }
        fn execute(&mut self, c: char) {
            self.0.push(format!("execute {c:?}"));
        }
        fn esc_dispatch(&mut self, collected: &str, final_char: char) {
            self.0.push(format!("esc {collected:?} {final_char:?}"));
        }
        fn csi_dispatch(&mut self, params: &Params, collected: &str, final_char: char) {
            let fields: Vec<i32> = params.fields().collect();
            self.0.push(format!("csi {fields:?} {collected:?} {final_char:?}"));
        }
        fn osc_dispatch(&mut self, osc: &str) {
            self.0.push(format!("osc {osc:?}"));
        }
    }
}
