//! The line `mosh-server new` prints for its client: `MOSH CONNECT <port> <key>`
//! (MOSH-PROTOCOL.md 1). Read by the starter that runs mosh-server (tern-native) and by the page's
//! connect form (a line a person pasted).

use super::{Key, KeyError};

/// Why a line is not a usable `MOSH CONNECT <port> <key>` line. Never repeats the key text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectLineError {
    #[error("the line does not start with `MOSH CONNECT `")]
    NotConnectLine,
    #[error("the port is not a number from 1 to 65535")]
    BadPort,
    #[error("the key is missing")]
    MissingKey,
    #[error(transparent)]
    BadKey(#[from] KeyError),
    #[error("more words follow the key")]
    TrailingWords,
}

/// whitespace (mosh's `\r\n`) is ignored.
pub fn parse_connect_line(line: &str) -> Result<(u16, Key), ConnectLineError> {
    let rest = line.trim().strip_prefix("MOSH CONNECT ").ok_or(ConnectLineError::NotConnectLine)?;
    let mut words = rest.split_whitespace();
    let port = words.next().ok_or(ConnectLineError::BadPort)?;
    // `u16::from_str` also takes a leading `+`; mosh prints digits only.
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ConnectLineError::BadPort);
    }
    let port: u16 = match port.parse() {
        Ok(0) | Err(_) => return Err(ConnectLineError::BadPort),
        Ok(port) => port,
    };
    let key: Key = words.next().ok_or(ConnectLineError::MissingKey)?.parse()?;
    if words.next().is_some() {
        return Err(ConnectLineError::TrailingWords);
    }
    Ok((port, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "PWSoCIVurTVBGXAj873xNg";

    fn key() -> Key {
        KEY.parse().expect("a valid key")
    }

    #[test]
    fn parses_the_connect_line_mosh_prints() {
        assert_eq!(parse_connect_line(&format!("MOSH CONNECT 60011 {KEY}")), Ok((60011, key())));
        // With a tty on stdin mosh-server prints `\r\n` first; lines keep their `\r`.
        assert_eq!(
            parse_connect_line(&format!("\r\nMOSH CONNECT 60011 {KEY}\r\n")),
            Ok((60011, key()))
        );
    }

    #[test]
    fn the_connect_line_parser_is_strict() {
        use ConnectLineError::*;
        let parse = |line: &str| parse_connect_line(line).map(|(port, _)| port);
        assert_eq!(parse(&format!("MOSH CONNECT 0 {KEY}")), Err(BadPort));
        assert_eq!(parse(&format!("MOSH CONNECT 70000 {KEY}")), Err(BadPort));
        assert_eq!(parse(&format!("MOSH CONNECT +600 {KEY}")), Err(BadPort));
        assert_eq!(parse(&format!("MOSH CONNECT x {KEY}")), Err(BadPort));
        assert_eq!(parse("MOSH CONNECT  "), Err(NotConnectLine));
        assert_eq!(parse(&format!("MOSH CONNECT  {KEY}")), Err(BadPort));
        assert_eq!(parse("MOSH CONNECT 60011"), Err(MissingKey));
        assert_eq!(
            parse("MOSH CONNECT 60011 short"),
            Err(BadKey(KeyError::WrongLength { len: 5 }))
        );
        assert_eq!(
            parse(&format!("MOSH CONNECT 60011 {KEY}x")),
            Err(BadKey(KeyError::WrongLength { len: 23 }))
        );
        assert_eq!(
            parse("MOSH CONNECT 60011 PWSoCIVurTVBGXAj873x-g"),
            Err(BadKey(KeyError::BadCharacter { position: 20 }))
        );
        // The 22nd character carries 2 bits only; mosh refuses any other.
        assert_eq!(
            parse("MOSH CONNECT 60011 PWSoCIVurTVBGXAj873xNh"),
            Err(BadKey(KeyError::NonCanonical))
        );
        assert_eq!(parse(&format!("MOSH CONNECT 60011 {KEY} extra")), Err(TrailingWords));
        assert_eq!(parse("hello"), Err(NotConnectLine));
        assert_eq!(parse(""), Err(NotConnectLine));
        assert_eq!(parse(&format!("MOSH  CONNECT 60011 {KEY}")), Err(NotConnectLine));
    }

    #[test]
    fn connect_line_errors_never_repeat_the_key() {
        for line in [
            format!("MOSH CONNECT 0 {KEY}"),
            format!("MOSH CONNECT 60011 {KEY}x"),
            format!("MOSH CONNECT 60011 {KEY} extra"),
        ] {
            let error = parse_connect_line(&line).expect_err(&line).to_string();
            assert!(!error.contains(KEY), "{error}");
        }
    }
}
