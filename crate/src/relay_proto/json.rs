//! The small JSON the protocol needs, by hand: objects, arrays, strings, booleans, null and
//! non-negative integers (every number the protocol carries). Written once here instead of serde,
//! which tripled the protocol's share of the page's wasm (docs/BENCHMARKS.md, "wasm size").
//!
//! Parsing never panics and never quotes its input in an error (a token put in the wrong field
//! must not reach a log). Nesting is bounded, duplicate keys are refused (two `token`s must not
//! mean whichever one a reader happens to take). Numbers that are negative, fractional or beyond
//! `u64` parse (an unknown field may hold one) but cannot be read as a protocol field.

use std::fmt::Write as _;

/// Deepest nesting accepted; the protocol's deepest message has two levels.
const MAX_DEPTH: usize = 16;
/// Most fields one object may have; the protocol's largest message has a few dozen. Past it the
/// line is refused, so a 4 MiB line of distinct keys costs a bounded duplicate-key check.
pub const MAX_FIELDS: usize = 256;
/// Up to this many fields, a new key is compared with each earlier one as it comes (cheaper
/// than sorting for the small objects of every message); past it, keys are sorted once at the
/// end of the object, so even [`MAX_FIELDS`] keys cost no more than sorting them.
const LINEAR_DUPLICATE_CHECK: usize = 16;

/// Why bytes are not the message they should be. Never quotes the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// What is wrong: "syntax", "missing field", "unknown field", "wrong type", ...
    pub reason: &'static str,
    /// The protocol's name of the field concerned (never a name taken from the input).
    pub field: Option<&'static str>,
    /// Byte offset + 1 of a syntax error (0 for errors about the content).
    pub column: usize,
}

impl DecodeError {
    fn syntax(at: usize) -> Self {
        DecodeError { reason: "syntax", field: None, column: at + 1 }
    }

    pub(crate) fn data(reason: &'static str, field: &'static str) -> Self {
        DecodeError { reason, field: Some(field), column: 0 }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.field, self.column) {
            (Some(field), _) => write!(f, "{} `{field}`", self.reason),
            (None, 0) => write!(f, "{}", self.reason),
            (None, col) => write!(f, "{} error at column {col}", self.reason),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// A non-negative integer that fits `u64`.
    UInt(u64),
    /// Any other number (kept only so an unknown field holding one does not break a message).
    OtherNumber,
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

fn duplicate_key(key_at: usize) -> DecodeError {
    DecodeError { reason: "duplicate key", field: None, column: key_at + 1 }
}

/// Where the first key that repeats an earlier one starts, for an object too large for the
/// check as keys come: the keys sorted once (stable, so equal keys keep their order).
fn first_duplicate(fields: &[(String, Value)], key_starts: &[usize]) -> Option<usize> {
    if fields.len() <= LINEAR_DUPLICATE_CHECK {
        return None;
    }
    let mut order: Vec<usize> = (0..fields.len()).collect();
    order.sort_by(|&a, &b| fields[a].0.cmp(&fields[b].0));
    order
        .windows(2)
        .filter(|w| fields[w[0]].0 == fields[w[1]].0)
        .map(|w| key_starts[w[0]].max(key_starts[w[1]]))
        .min()
}

/// Parses one JSON value filling all of `bytes` (whitespace around it allowed).
pub fn parse(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut p = Parser { bytes, at: 0 };
    let v = p.value(0)?;
    p.skip_ws();
    if p.at != bytes.len() {
        return Err(DecodeError::syntax(p.at));
    }
    Ok(v)
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, b: u8) -> Result<(), DecodeError> {
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(DecodeError::syntax(self.at))
        }
    }

    fn literal(&mut self, word: &[u8], v: Value) -> Result<Value, DecodeError> {
        if self.bytes[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(v)
        } else {
            Err(DecodeError::syntax(self.at))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::syntax(self.at));
        }
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal(b"true", Value::Bool(true)),
            Some(b'f') => self.literal(b"false", Value::Bool(false)),
            Some(b'n') => self.literal(b"null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(DecodeError::syntax(self.at)),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, DecodeError> {
        self.expect(b'{')?;
        let mut fields: Vec<(String, Value)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Object(fields));
        }
        // Where each key starts, for the column of a duplicate found at the end.
        let mut key_starts: Vec<usize> = Vec::new();
        loop {
            self.skip_ws();
            let key_at = self.at;
            if fields.len() == MAX_FIELDS {
                return Err(DecodeError {
                    reason: "too many fields",
                    field: None,
                    column: key_at + 1,
                });
            }
            let key = self.string()?;
            if fields.len() < LINEAR_DUPLICATE_CHECK && fields.iter().any(|(k, _)| *k == key) {
                return Err(duplicate_key(key_at));
            }
            self.skip_ws();
            self.expect(b':')?;
            let v = self.value(depth + 1)?;
            fields.push((key, v));
            key_starts.push(key_at);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    if let Some(at) = first_duplicate(&fields, &key_starts) {
                        return Err(duplicate_key(at));
                    }
                    return Ok(Value::Object(fields));
                }
                _ => return Err(DecodeError::syntax(self.at)),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, DecodeError> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(DecodeError::syntax(self.at)),
            }
        }
    }

    fn number(&mut self) -> Result<Value, DecodeError> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let digits = self.digits();
        if digits == 0 || (digits > 1 && self.bytes[self.at - digits] == b'0') {
            return Err(DecodeError::syntax(start));
        }
        let int_end = self.at;
        let mut integral = !negative;
        if self.peek() == Some(b'.') {
            self.at += 1;
            integral = false;
            if self.digits() == 0 {
                return Err(DecodeError::syntax(self.at));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            integral = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(DecodeError::syntax(self.at));
            }
        }
        // The digits are ASCII, so the slice is valid UTF-8.
        let text = std::str::from_utf8(&self.bytes[start..int_end]).unwrap_or("");
        Ok(match (integral, text.parse::<u64>()) {
            (true, Ok(n)) => Value::UInt(n),
            _ => Value::OtherNumber,
        })
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            let at = self.at;
            match self.peek() {
                None => return Err(DecodeError::syntax(at)),
                Some(b'"') => {
                    self.at += 1;
                    return String::from_utf8(out).map_err(|_| DecodeError::syntax(at));
                }
                Some(b'\\') => {
                    self.at += 1;
                    let c = self.escape()?;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                Some(b) if b < 0x20 => return Err(DecodeError::syntax(at)),
                Some(b) => {
                    out.push(b);
                    self.at += 1;
                }
            }
        }
    }

    fn escape(&mut self) -> Result<char, DecodeError> {
        let at = self.at;
        let c = match self.peek().ok_or(DecodeError::syntax(at))? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                self.at += 1;
                return self.unicode_escape();
            }
            _ => return Err(DecodeError::syntax(at)),
        };
        self.at += 1;
        Ok(c)
    }

    /// `\uXXXX` (after the `u`), with a following low surrogate when it is a high one.
    fn unicode_escape(&mut self) -> Result<char, DecodeError> {
        let at = self.at;
        let high = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&high) {
            if !self.bytes[self.at..].starts_with(b"\\u") {
                return Err(DecodeError::syntax(at));
            }
            self.at += 2;
            let low = self.hex4()?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(DecodeError::syntax(at));
            }
            0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        } else {
            high
        };
        char::from_u32(code).ok_or(DecodeError::syntax(at))
    }

    fn hex4(&mut self) -> Result<u32, DecodeError> {
        let digits = self.bytes.get(self.at..self.at + 4).ok_or(DecodeError::syntax(self.at))?;
        let mut n = 0;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or(DecodeError::syntax(self.at))?;
            n = n * 16 + v;
        }
        self.at += 4;
        Ok(n)
    }
}

/// The fields of a JSON object, read by the protocol's names.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a>(&'a [(String, Value)]);

impl<'a> Fields<'a> {
    /// The object `v` is, or a "wrong type" error naming `what`.
    pub fn of(v: &'a Value, what: &'static str) -> Result<Self, DecodeError> {
        match v {
            Value::Object(f) => Ok(Fields(f)),
            _ => Err(DecodeError::data("wrong type", what)),
        }
    }

    /// `None` when absent or null.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v).filter(|v| **v != Value::Null)
    }

    /// Refuses fields not in `known` (messages whose extra fields would mean a confused sender).
    pub fn only(&self, known: &[&str]) -> Result<(), DecodeError> {
        match self.0.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            // The name comes from the input: never echo it.
            Some(_) => Err(DecodeError { reason: "unknown field", field: None, column: 0 }),
            None => Ok(()),
        }
    }

    pub fn opt_str(&self, key: &'static str) -> Result<Option<String>, DecodeError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(DecodeError::data("wrong type", key)),
        }
    }

    pub fn str(&self, key: &'static str) -> Result<String, DecodeError> {
        self.opt_str(key)?.ok_or(DecodeError::data("missing field", key))
    }

    pub fn opt_u64(&self, key: &'static str) -> Result<Option<u64>, DecodeError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::UInt(n)) => Ok(Some(*n)),
            Some(_) => Err(DecodeError::data("wrong type", key)),
        }
    }

    pub fn u64(&self, key: &'static str) -> Result<u64, DecodeError> {
        self.opt_u64(key)?.ok_or(DecodeError::data("missing field", key))
    }

    /// An integer that must fit `T` (a port in `u16`, say).
    pub fn opt_int<T: TryFrom<u64>>(&self, key: &'static str) -> Result<Option<T>, DecodeError> {
        self.opt_u64(key)?
            .map(|n| T::try_from(n).map_err(|_| DecodeError::data("out of range", key)))
            .transpose()
    }

    pub fn int<T: TryFrom<u64>>(&self, key: &'static str) -> Result<T, DecodeError> {
        self.opt_int(key)?.ok_or(DecodeError::data("missing field", key))
    }

    pub fn bool(&self, key: &'static str) -> Result<bool, DecodeError> {
        match self.get(key) {
            Some(Value::Bool(b)) => Ok(*b),
            None => Err(DecodeError::data("missing field", key)),
            Some(_) => Err(DecodeError::data("wrong type", key)),
        }
    }

    /// A flag that may be left out (false).
    pub fn opt_bool(&self, key: &'static str) -> Result<bool, DecodeError> {
        match self.get(key) {
            None => Ok(false),
            _ => self.bool(key),
        }
    }

    pub fn object(&self, key: &'static str) -> Result<Fields<'a>, DecodeError> {
        Fields::of(self.get(key).ok_or(DecodeError::data("missing field", key))?, key)
    }

    pub fn array(&self, key: &'static str) -> Result<&'a [Value], DecodeError> {
        match self.get(key) {
            Some(Value::Array(items)) => Ok(items),
            None => Err(DecodeError::data("missing field", key)),
            Some(_) => Err(DecodeError::data("wrong type", key)),
        }
    }

    /// An array of strings.
    pub fn strings(&self, key: &'static str) -> Result<Vec<String>, DecodeError> {
        self.array(key)?
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                _ => Err(DecodeError::data("wrong type", key)),
            })
            .collect()
    }
}

/// Writes one JSON object, field by field, in the order given.
#[derive(Debug)]
pub struct ObjectWriter<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> ObjectWriter<'a> {
    /// Opens an object in `out`; [`finish`](Self::finish) closes it.
    pub fn new(out: &'a mut String) -> Self {
        out.push('{');
        ObjectWriter { out, first: true }
    }

    fn key(&mut self, key: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        write_string(self.out, key);
        self.out.push(':');
    }

    pub fn str(&mut self, key: &str, v: &str) -> &mut Self {
        self.key(key);
        write_string(self.out, v);
        self
    }

    pub fn opt_str(&mut self, key: &str, v: Option<&str>) -> &mut Self {
        if let Some(v) = v {
            self.str(key, v);
        }
        self
    }

    pub fn u64(&mut self, key: &str, v: u64) -> &mut Self {
        self.key(key);
        let _ = write!(self.out, "{v}");
        self
    }

    pub fn opt_u64(&mut self, key: &str, v: Option<u64>) -> &mut Self {
        if let Some(v) = v {
            self.u64(key, v);
        }
        self
    }

    pub fn bool(&mut self, key: &str, v: bool) -> &mut Self {
        self.key(key);
        self.out.push_str(if v { "true" } else { "false" });
        self
    }

    pub fn strings(&mut self, key: &str, items: &[String]) -> &mut Self {
        self.key(key);
        self.out.push('[');
        for (i, s) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            write_string(self.out, s);
        }
        self.out.push(']');
        self
    }

    /// A nested object, written by `fill`.
    pub fn object(&mut self, key: &str, fill: impl FnOnce(&mut ObjectWriter<'_>)) -> &mut Self {
        self.key(key);
        let mut inner = ObjectWriter::new(self.out);
        fill(&mut inner);
        inner.finish();
        self
    }

    /// An array of objects, each written by `fill`.
    pub fn objects<T>(
        &mut self,
        key: &str,
        items: &[T],
        fill: impl Fn(&mut ObjectWriter<'_>, &T),
    ) -> &mut Self {
        self.key(key);
        self.out.push('[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            let mut inner = ObjectWriter::new(self.out);
            fill(&mut inner, item);
            inner.finish();
        }
        self.out.push(']');
        self
    }

    pub fn finish(self) {
        self.out.push('}');
    }
}

/// A JSON string literal: `"`, `\` and control characters escaped, the rest as UTF-8.
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{"k0":0,"k1":0,...}` with `n` distinct keys, and `dup` repeated at the end when given.
    fn object_of(n: usize, dup: Option<&str>) -> String {
        let mut s = String::from("{");
        for i in 0..n {
            let _ = write!(s, "\"k{i}\":0,");
        }
        match dup {
            Some(k) => s.push_str(&format!("\"{k}\":1}}")),
            None => {
                s.pop();
                s.push('}');
            }
        }
        s
    }

    #[test]
    fn an_object_with_too_many_fields_is_refused() {
        // A 4 MiB line of distinct keys: every key compared with every earlier one was quadratic
        // (200k keys, 2e10 comparisons). Now refused at the field past the bound.
        let line = object_of(200_000, None);
        assert!(line.len() > 2 << 20);
        let e = parse(line.as_bytes()).unwrap_err();
        assert_eq!(e.reason, "too many fields");
        assert_eq!(e.to_string(), format!("too many fields error at column {}", e.column));
        // The bound itself parses, nested ones too.
        assert!(parse(object_of(MAX_FIELDS, None).as_bytes()).is_ok());
        let nested = format!("[{}]", vec![object_of(MAX_FIELDS, None); 4].join(","));
        assert!(parse(nested.as_bytes()).is_ok());
        assert_eq!(
            parse(object_of(MAX_FIELDS + 1, None).as_bytes()).unwrap_err().reason,
            "too many fields"
        );
    }

    #[test]
    fn duplicates_are_found_in_large_objects_too() {
        for n in [1, 5, LINEAR_DUPLICATE_CHECK - 1, LINEAR_DUPLICATE_CHECK, 100, MAX_FIELDS - 1] {
            let line = object_of(n, Some("k0"));
            let e = parse(line.as_bytes()).unwrap_err();
            assert_eq!(e.reason, "duplicate key", "{n} fields");
            assert_eq!(e.column, line.rfind("\"k0\"").unwrap() + 1, "{n}: the repeated key");
        }
        // The earliest repeat is the one named, whichever key it repeats.
        let line = r#"{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"k":0,"l":0,"m":0,"n":0,"o":0,"p":0,"q":0,"z":0,"q":1,"a":1}"#;
        let e = parse(line.as_bytes()).unwrap_err();
        assert_eq!(e.column, line.find(r#""q":1"#).unwrap() + 1);
    }

    #[test]
    fn values_parse() {
        assert_eq!(parse(b" null ").unwrap(), Value::Null);
        assert_eq!(parse(b"18446744073709551615").unwrap(), Value::UInt(u64::MAX));
        for other in [&b"18446744073709551616"[..], b"-1", b"1.5", b"1e3", b"0.0"] {
            assert_eq!(parse(other).unwrap(), Value::OtherNumber, "{other:?}");
        }
        assert_eq!(
            parse(br#"{"a":[true,false,{}],"b":"x\"\\\/\n\u00e9\ud83d\ude00"}"#).unwrap(),
            Value::Object(vec![
                (
                    "a".into(),
                    Value::Array(vec![
                        Value::Bool(true),
                        Value::Bool(false),
                        Value::Object(vec![])
                    ])
                ),
                ("b".into(), Value::String("x\"\\/\né😀".into())),
            ])
        );
    }

    #[test]
    fn malformed_input_is_refused() {
        for bad in [
            &b""[..],
            b"{",
            b"{\"a\"}",
            b"{\"a\":1,}",
            b"[1,]",
            b"01",
            b"1.",
            b"-",
            b"\"\x01\"",
            b"\"\\x\"",
            b"\"\\ud800\"",
            b"\"\\udc00\"",
            b"\"\xff\"",
            b"nul",
            b"{} {}",
            b"{\"a\":1,\"a\":2}",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(parse(deep.as_bytes()).is_err());
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(ok.as_bytes()).is_ok());
    }

    #[test]
    fn strings_round_trip_through_the_writer() {
        for s in ["", "plain", "q\"b\\s/", "\u{0}\u{1f}\n\r\t\u{8}\u{c}", "é😀"] {
            let mut out = String::new();
            write_string(&mut out, s);
            assert_eq!(parse(out.as_bytes()).unwrap(), Value::String(s.into()));
        }
    }

    #[test]
    fn every_byte_sequence_is_handled() {
        let seeds: [&[u8]; 4] = [br#"{"a":"b"}"#, b"[1,2]", br#""\u00e9""#, b"true"];
        for seed in seeds {
            for i in 0..seed.len() {
                for b in 0..=255u8 {
                    let mut v = seed.to_vec();
                    v[i] = b;
                    let _ = parse(&v);
                    let _ = parse(&v[..i]);
                }
            }
        }
    }
}
