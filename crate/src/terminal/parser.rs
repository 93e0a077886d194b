//! Bytes to terminal actions: mosh's UTF-8 decoder and DEC/ANSI state machine, nothing more.
//!
//! The parser classifies; the emulator ([`super::emulator`]) gives the actions meaning. The rules
//! are mosh's (`src/terminal/parser.cc`, `parserstate.cc`, `terminaldispatcher.cc`;
//! MOSH-PROTOCOL.md 8.3), which differ from the `vte` crate in ways that change screens: C1
//! controls as Unicode scalars, any ESC/CAN/SUB/C1 ends and dispatches an OSC, code points >= U+00A0
//! act like `A` inside sequences, CSI parameter text is capped at 100 characters, OSC at 16 Ki
//! characters. Hence our own state machine rather than `vte`.

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
}

/// mosh keeps at most 100 characters of parameter text ("16 five-char params plus 15 semicolons").
const MAX_PARAM_TEXT: usize = 100;
/// mosh keeps at most 8 dispatch characters.
const MAX_COLLECTED: usize = 8;
/// mosh's `MAXIMUM_CLIPBOARD_SIZE`: OSC strings keep their first 16 Ki characters.
pub(crate) const MAX_OSC_CHARS: usize = 16 * 1024;
/// Larger parameter values count as missing (mosh's `PARAM_MAX`).
const PARAM_MAX: i64 = 65535;

/// CSI parameters as mosh parses them: every `;`-separated field, -1 when empty or out of range.
///
/// Built as the characters arrive rather than from a saved string, so a sequence costs no
/// allocation once the vector has grown (this runs for every SGR of a full-screen repaint).
#[derive(Clone, Debug, Default)]
pub(crate) struct Params {
    values: Vec<i32>,
    /// The field being read: its value so far (saturating just above `PARAM_MAX`) and whether
    /// it has any digit.
    field: i64,
    field_digits: bool,
    /// Parameter characters kept so far (mosh drops those past `MAX_PARAM_TEXT`).
    chars: usize,
}

impl Params {
    fn clear(&mut self) {
        self.values.clear();
        self.field = 0;
        self.field_digits = false;
        self.chars = 0;
    }
    /// Reads the parameter characters (ASCII digits and `;`) that `bytes` starts with and
    /// returns how many there were.
    #[inline]
    fn push_run(&mut self, bytes: &[u8]) -> usize {
        let mut n = 0;
        if !self.field_digits {
            n = self.push_short_fields(bytes);
        }
        let bytes = bytes.get(n..).unwrap_or_default();
        // The field in locals: this loop runs for most bytes of a colourful repaint.
        let (mut field, mut digits, mut chars) = (self.field, self.field_digits, self.chars);
        for &b in bytes {
            if !is_param_byte(b) {
                break;
            }
            n += 1;
            if chars >= MAX_PARAM_TEXT {
                continue;
            }
            chars += 1;
            if b == b';' {
                self.values.push(field_value(field, digits));
                (field, digits) = (0, false);
            } else {
                field = (field * 10 + i64::from(b - b'0')).min(PARAM_MAX + 1);
                digits = true;
            }
        }
        (self.field, self.field_digits, self.chars) = (field, digits, chars);
        n
    }
    /// At the start of a field: reads whole fields of at most three digits (every SGR
    /// parameter a server sends) four bytes at a time, as one word and without a branch per
    /// digit, and returns how many bytes it took. It stops, leaving the rest to the
    /// byte-at-a-time loop, at a longer field, near the end of `bytes` or near the parameter
    /// text's cap; it ends the run (with the field open, as the loop would leave it) at a byte
    /// that is not parameter text.
    #[inline]
    fn push_short_fields(&mut self, bytes: &[u8]) -> usize {
        let (mut at, mut chars) = (0, self.chars);
        // The field holds nothing yet (no digit): it is 0 at the start of every field.
        debug_assert!(!self.field_digits && self.field == 0);
        while let Some(&[b0, b1, b2, b3]) = bytes.get(at..at + 4) {
            if chars + 4 > MAX_PARAM_TEXT {
                break;
            }
            let w = u32::from_le_bytes([b0, b1, b2, b3]);
            // A byte of `not_digit` is nonzero where `w`'s is not an ASCII digit: its high
            // nibble is not 3, or its low nibble is 10 or more (adding 6 carries into bit 4;
            // no byte carries into the next).
            let not_digit = ((w & 0xf0f0_f0f0) ^ 0x3030_3030)
                | (((w & 0x0f0f_0f0f) + 0x0606_0606) & 0x1010_1010);
            // How many digits the field has: 4 means four or more.
            let len = (not_digit.trailing_zeros() / 8) as usize;
            if len == 4 {
                break;
            }
            // The digits' values, right-aligned in the word (first digit lowest), then combined
            // pairwise: 10 * d0 + d1 in bytes 0 and 2, then 100 * (that) + (the other).
            let d = (u64::from(w & 0x0f0f_0f0f) << (8 * (4 - len))) as u32;
            let pairs = (d * 10 + (d >> 8)) & 0x00ff_00ff;
            let value = (pairs * 100 + (pairs >> 16)) & 0xffff;
            let next = (w >> (8 * len)) as u8;
            if next == b';' {
                self.values.push(if len == 0 { -1 } else { value as i32 });
                chars += len + 1;
                at += len + 1;
                continue;
            }
            // The run ends inside this field (`next` is no digit: `len` stopped there).
            self.field = i64::from(value);
            self.field_digits = len > 0;
            self.chars = chars + len;
            return at + len;
        }
        self.chars = chars;
        at
    }
    #[inline]
    fn end_field(&mut self) {
        self.values.push(field_value(self.field, self.field_digits));
        self.field = 0;
        self.field_digits = false;
    }
    /// How many fields there were; at least 1 (an empty parameter list is one missing field).
    pub(crate) fn count(&self) -> usize {
        self.values.len()
    }
    /// Field `n`, or `default` when it is missing, empty or below 1 (mosh's `getparam`).
    pub(crate) fn get(&self, n: usize, default: i32) -> i32 {
        match self.values.get(n) {
            Some(&v) if v >= 1 => v,
            _ => default,
        }
    }
}

/// A finished field: -1 when it had no digit or is out of range.
#[inline]
fn field_value(field: i64, digits: bool) -> i32 {
    if !digits || field > PARAM_MAX { -1 } else { field as i32 }
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
    params: Params,
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
            params: Params::default(),
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
                        let run = self.params.push_run(&bytes[at..]);
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
    fn whole_csi<P: Perform>(&mut self, perform: &mut P, bytes: &[u8]) -> Option<usize> {
        if bytes.get(1) != Some(&b'[') {
            return None;
        }
        self.enter(State::CsiEntry);
        let digits = self.params.push_run(&bytes[2..]);
        if digits > 0 {
            self.state = State::CsiParam;
        }
        match bytes.get(2 + digits) {
            Some(&b) if (0x40..=0x7e).contains(&b) => {
                self.csi_dispatch(perform, char::from(b));
                Some(3 + digits)
            }
            _ => Some(2 + digits),
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
                    self.params.push_run(&[r as u8]);
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
        self.params.end_field();
        perform.csi_dispatch(&self.params, self.collected.as_str(), ch);
        self.enter(State::Ground);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One character at a time, as mosh reads them: what `push_run` must agree with.
    fn reference(chunks: &[Vec<u8>]) -> (Vec<i32>, i64, bool, usize) {
        let mut p = Params::default();
        for chunk in chunks {
            for &b in chunk.iter().take_while(|&&b| is_param_byte(b)) {
                if p.chars >= MAX_PARAM_TEXT {
                    continue;
                }
                p.chars += 1;
                if b == b';' {
                    p.end_field();
                } else {
                    p.field = (p.field * 10 + i64::from(b - b'0')).min(PARAM_MAX + 1);
                    p.field_digits = true;
                }
            }
        }
        (p.values, p.field, p.field_digits, p.chars)
    }

    proptest! {
        /// `push_run` (fields in locals, runs across calls) reads the parameters as reading
        /// them one character at a time does, however the text is cut and whatever follows.
        #[test]
        fn runs_of_parameters_match_the_byte_at_a_time_reading(
            fields in prop::collection::vec(prop_oneof![Just(String::new()), "[0-9]{1,3}", "[0-9]{4,9}"], 0..40),
            tail in prop::sample::select(vec!["", "m", "H", "?", ":", "\x1b", "12"]),
            cut in 0usize..200,
        ) {
            let text = format!("{}{tail}", fields.join(";"));
            let bytes = text.as_bytes();
            let cut = cut.min(bytes.len());
            let chunks = [bytes[..cut].to_vec(), bytes[cut..].to_vec()];
            let mut p = Params::default();
            let first = p.push_run(&chunks[0]);
            if first == chunks[0].len() {
                p.push_run(&chunks[1]);
            }
            let want = if first == chunks[0].len() { reference(&chunks) } else { reference(&chunks[..1]) };
            prop_assert_eq!((p.values, p.field, p.field_digits, p.chars), want);
        }
    }
}
