//! The probe's script language: one action a line (`type`, `sleep`, `resize`, `wait-text`).

use std::fmt;
use std::time::Duration;

/// How long `wait-text` waits when the script names no time.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// One line of a probe script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Type these bytes (C-style escapes decoded).
    Type(Vec<u8>),
    Sleep(Duration),
    Resize {
        cols: u16,
        rows: u16,
    },
    /// Fail unless this text appears on the screen within the time.
    WaitText {
        text: String,
        timeout: Duration,
    },
}

/// A script line that could not be understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "script line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ScriptError {}

/// Parses a whole script. Blank lines and lines starting with `#` are skipped.
pub fn parse_script(text: &str) -> Result<Vec<Action>, ScriptError> {
    let mut actions = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let error = |message: String| ScriptError { line, message };
        let (verb, rest) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
        let action = match verb {
            // `type` keeps everything after the first space, trailing spaces included.
            "type" => Action::Type(unescape(rest).map_err(error)?),
            "sleep" => Action::Sleep(parse_millis(rest.trim()).map_err(error)?),
            "resize" => {
                let (cols, rows) = parse_size(rest.trim()).map_err(error)?;
                Action::Resize { cols, rows }
            }
            "wait-text" => {
                let rest = rest.trim_end();
                // An optional last word of digits is the time limit in milliseconds.
                let (text, timeout) = match rest.rsplit_once(' ') {
                    Some((text, ms))
                        if !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit()) =>
                    {
                        (text, parse_millis(ms).map_err(error)?)
                    }
                    _ => (rest, DEFAULT_WAIT),
                };
                let text = String::from_utf8(unescape(text).map_err(error)?)
                    .map_err(|_| error("wait-text needs UTF-8 text".into()))?;
                if text.is_empty() {
                    return Err(error("wait-text needs some text".into()));
                }
                Action::WaitText { text, timeout }
            }
            other => {
                return Err(error(format!(
                    "unknown action {other:?} (type, sleep, resize, wait-text)"
                )));
            }
        };
        actions.push(action);
    }
    Ok(actions)
}

/// `COLSxROWS`, each 1..=65535.
pub fn parse_size(text: &str) -> Result<(u16, u16), String> {
    let bad = || format!("expected COLSxROWS such as 80x24, got {text:?}");
    let (cols, rows) = text.split_once('x').ok_or_else(bad)?;
    let cols: u16 = cols.parse().map_err(|_| bad())?;
    let rows: u16 = rows.parse().map_err(|_| bad())?;
    if cols == 0 || rows == 0 {
        return Err(bad());
    }
    Ok((cols, rows))
}

fn parse_millis(text: &str) -> Result<Duration, String> {
    text.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("expected milliseconds, got {text:?}"))
}

/// Decodes `\r \n \t \e \\ \xNN` (and `\0`, `\a`, `\b`); anything else after a backslash is an
/// error.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let byte = match chars.next() {
            Some('r') => b'\r',
            Some('n') => b'\n',
            Some('t') => b'\t',
            Some('e') => 0x1b,
            Some('a') => 0x07,
            Some('b') => 0x08,
            Some('0') => 0,
            Some('\\') => b'\\',
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                u8::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 2)
                    .ok_or_else(|| format!("bad escape \\x{hex}"))?
            }
            Some(other) => return Err(format!("unknown escape \\{other}")),
            None => return Err("a backslash ends the line".into()),
        };
        out.push(byte);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_action() {
        let script = "# comment\n\ntype echo hi\\r\nsleep 250\nresize 100x30\nwait-text hi 5000\nwait-text two words\n";
        let actions = parse_script(script).expect("valid");
        assert_eq!(
            actions,
            vec![
                Action::Type(b"echo hi\r".to_vec()),
                Action::Sleep(Duration::from_millis(250)),
                Action::Resize { cols: 100, rows: 30 },
                Action::WaitText { text: "hi".into(), timeout: Duration::from_millis(5000) },
                Action::WaitText { text: "two words".into(), timeout: DEFAULT_WAIT },
            ]
        );
    }

    #[test]
    fn escapes_decode() {
        assert_eq!(unescape("a\\e[1m\\x41\\t\\\\").unwrap(), b"a\x1b[1mA\t\\");
        assert_eq!(unescape("é").unwrap(), "é".as_bytes());
        assert!(unescape("\\q").is_err());
        assert!(unescape("\\x4").is_err());
        assert!(unescape("x\\").is_err());
    }

    #[test]
    fn errors_name_the_line() {
        let error = parse_script("type a\njump 3\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(parse_script("resize 80by24").is_err());
        assert!(parse_script("resize 0x24").is_err());
        assert!(parse_script("sleep soon").is_err());
        assert!(parse_script("wait-text").is_err());
    }
}
