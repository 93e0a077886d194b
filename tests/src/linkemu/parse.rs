//! Text forms of link parameters: durations (`25ms`), rates (`10mbit`), sizes (`64k`),
//! probabilities (`1%`) and whole direction specs (`delay=25ms,loss=1%,rate=10mbit`).

use std::time::Duration;

use super::DirectionConfig;

/// A link parameter that could not be read; the message names the text and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

fn err(what: &str, text: &str, expected: &str) -> ParseError {
    ParseError(format!("bad {what} {text:?}: expected {expected}"))
}

fn split_number(text: &str) -> (&str, &str) {
    let t = text.trim();
    let end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    (&t[..end], t[end..].trim())
}

/// `250us`, `25ms`, `1.5s`; a bare number is milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, ParseError> {
    const EXPECTED: &str = "a number with us, ms or s (bare numbers are ms)";
    let (num, unit) = split_number(text);
    let value: f64 = num.parse().map_err(|_| err("duration", text, EXPECTED))?;
    let secs = match unit.to_ascii_lowercase().as_str() {
        "us" | "µs" => value / 1e6,
        "" | "ms" => value / 1e3,
        "s" => value,
        _ => return Err(err("duration", text, EXPECTED)),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| err("duration", text, EXPECTED))
}

/// Bits per second: `64000`, `500kbit`, `10mbit`, `1gbit` (also `kbps`/`mbps`/`gbps`, still bits).
pub fn parse_rate(text: &str) -> Result<u64, ParseError> {
    const EXPECTED: &str = "bits/s, e.g. 64000, 500kbit, 10mbit, 1gbit";
    let (num, unit) = split_number(text);
    let value: f64 = num.parse().map_err(|_| err("rate", text, EXPECTED))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" => 1e0,
        "k" | "kbit" | "kbps" => 1e3,
        "m" | "mbit" | "mbps" => 1e6,
        "g" | "gbit" | "gbps" => 1e9,
        _ => return Err(err("rate", text, EXPECTED)),
    };
    let bps = value * scale;
    if !(1.0..=1e12).contains(&bps) {
        return Err(err("rate", text, "between 1 bit/s and 1 Tbit/s"));
    }
    Ok(bps as u64)
}

/// Bytes: `1500`, `64k`, `1m` (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<usize, ParseError> {
    const EXPECTED: &str = "bytes, e.g. 1500, 64k, 1m";
    let (num, unit) = split_number(text);
    let value: f64 = num.parse().map_err(|_| err("size", text, EXPECTED))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        _ => return Err(err("size", text, EXPECTED)),
    };
    Ok((value * scale) as usize)
}

/// `0.01` or `1%`, between 0 and 1.
pub fn parse_probability(text: &str) -> Result<f64, ParseError> {
    const EXPECTED: &str = "a probability such as 0.01 or 1%";
    let t = text.trim();
    let p = match t.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| err("probability", text, EXPECTED))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(err("probability", text, "between 0 and 1 (0% and 100%)"));
    }
    Ok(p)
}

fn parse_bool(text: &str) -> Result<bool, ParseError> {
    match text.trim() {
        "" | "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(err("flag", text, "true or false")),
    }
}

impl DirectionConfig {
    /// Applies a spec of comma-separated `key=value` items on top of `self`. Keys: `delay`,
    /// `jitter`, `reorder` (alone means true), `loss`, `dup`, `rate`, `queue-bytes`, `queue-delay`;
    /// `rate=none`, `queue-bytes=none` and `queue-delay=none` lift a limit.
    pub fn apply_spec(&mut self, spec: &str) -> Result<(), ParseError> {
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').unwrap_or((item, ""));
            let none = value.trim().eq_ignore_ascii_case("none");
            match key.trim() {
                "delay" => self.delay = parse_duration(value)?,
                "jitter" => self.jitter = parse_duration(value)?,
                "reorder" => self.reorder = parse_bool(value)?,
                "loss" => self.loss = parse_probability(value)?,
                "dup" | "duplicate" => self.duplicate = parse_probability(value)?,
                "rate" => self.rate_bps = if none { None } else { Some(parse_rate(value)?) },
                "queue-bytes" | "qbytes" => {
                    self.queue_bytes = if none { None } else { Some(parse_bytes(value)?) }
                }
                "queue-delay" | "qdelay" => {
                    self.queue_delay = if none { None } else { Some(parse_duration(value)?) }
                }
                other => {
                    return Err(ParseError(format!(
                        "unknown link parameter {other:?}: expected delay, jitter, reorder, loss, \
                         dup, rate, queue-bytes or queue-delay"
                    )));
                }
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for DirectionConfig {
    type Err = ParseError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let mut config = Self::default();
        config.apply_spec(spec)?;
        Ok(config)
    }
}

impl std::fmt::Display for DirectionConfig {
    /// The spec form, which [`DirectionConfig::apply_spec`] reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = |d: Duration| d.as_micros();
        write!(f, "delay={}us,jitter={}us", us(self.delay), us(self.jitter))?;
        write!(f, ",reorder={},loss={},dup={}", self.reorder, self.loss, self.duplicate)?;
        match self.rate_bps {
            Some(r) => write!(f, ",rate={r}")?,
            None => write!(f, ",rate=none")?,
        }
        match self.queue_bytes {
            Some(b) => write!(f, ",queue-bytes={b}")?,
            None => write!(f, ",queue-bytes=none")?,
        }
        match self.queue_delay {
            Some(d) => write!(f, ",queue-delay={}us", us(d)),
            None => write!(f, ",queue-delay=none"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("25").unwrap(), Duration::from_millis(25));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_rate("10mbit").unwrap(), 10_000_000);
        assert_eq!(parse_rate("500kbit").unwrap(), 500_000);
        assert_eq!(parse_bytes("64k").unwrap(), 65_536);
        assert_eq!(parse_probability("1%").unwrap(), 0.01);
        assert_eq!(parse_probability("0.25").unwrap(), 0.25);
        assert!(parse_probability("120%").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn spec_round_trips_through_display() {
        let cfg: DirectionConfig =
            "delay=25ms,jitter=3ms,reorder,loss=1%,dup=0.5%,rate=10mbit,queue-bytes=64k,queue-delay=100ms"
                .parse()
                .unwrap();
        assert_eq!(cfg.delay, Duration::from_millis(25));
        assert!(cfg.reorder);
        assert_eq!(cfg.rate_bps, Some(10_000_000));
        let again: DirectionConfig = cfg.to_string().parse().unwrap();
        assert_eq!(again, cfg);
    }

    #[test]
    fn spec_overrides_and_rejects_unknown_keys() {
        let mut cfg: DirectionConfig = "delay=10ms,rate=1mbit".parse().unwrap();
        cfg.apply_spec("delay=20ms,rate=none").unwrap();
        assert_eq!(cfg.delay, Duration::from_millis(20));
        assert_eq!(cfg.rate_bps, None);
        let e = cfg.apply_spec("latency=5ms").unwrap_err();
        assert!(e.to_string().contains("latency"), "{e}");
    }
}
