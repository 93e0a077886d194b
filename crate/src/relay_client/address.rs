//! The page's address: what tern-relay's printed URL carries after `#`.
//!
//! `#token=T`, and in bridge mode `&host=H&port=P&key=K`, where K is the key exactly as
//! `MOSH CONNECT` prints it. A mosh key is base64: it often holds `+` and `/` and may end in `=`.
//! A form decoder (the browser's `URLSearchParams`) turns `+` into a space, which broke about a
//! third of bridge sessions ("The session key is malformed"); here `+` stays `+`, and `%XX`
//! escapes are decoded, so a key works raw and percent-encoded alike.

/// The `name=value` pairs of a fragment (without its `#`), in order, percent-decoded, `+` kept.
/// A pair without `=` has an empty value; empty pieces (`&&`) are skipped.
pub fn fragment_params(fragment: &str) -> Vec<(String, String)> {
    fragment
        .split('&')
        .filter(|piece| !piece.is_empty())
        .map(|piece| {
            let (name, value) = piece.split_once('=').unwrap_or((piece, ""));
            (percent_decode(name), percent_decode(value))
        })
        .collect()
}

/// `%XX` escapes decoded (a `%` not followed by two hex digits stays as it is); bytes that are not
/// UTF-8 become U+FFFD.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A key as a person or a program may have passed it on: surrounding blanks dropped, and spaces
/// turned back into the `+` a form decoder made of them (a mosh key never holds a space).
pub fn key_text(raw: &str) -> String {
    raw.trim().replace(' ', "+")
}

/// The directory the page was loaded from (`/`, or `/tern/` behind a reverse proxy that
/// forwards a sub-path to a relay with `--base-path /tern/`): the part of `pathname` up to its
/// last `/`. The relay's routes (`api/info`, `ws`) are asked for under it.
pub fn page_dir(pathname: &str) -> &str {
    match pathname.rfind('/') {
        Some(i) => &pathname[..=i],
        None => "/",
    }
}

/// A relay route (`/api/info`, `/ws`) as a path under the page at `pathname`.
pub fn route_under_page(pathname: &str, route: &str) -> String {
    format!("{}{}", page_dir(pathname), route.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn routes_are_asked_for_under_the_page_directory() {
        use super::route_under_page;
        assert_eq!(route_under_page("/", "/api/info"), "/api/info");
        assert_eq!(route_under_page("/index.html", "/ws"), "/ws");
        assert_eq!(route_under_page("/tern/", "/api/info"), "/tern/api/info");
        assert_eq!(route_under_page("/a/tern/index.html", "ws"), "/a/tern/ws");
        assert_eq!(route_under_page("", "/api/info"), "/api/info");
    }

    use super::*;
    use crate::wire::Key;

    /// A key with `+` and `/`, as `MOSH CONNECT` prints them.
    const KEY: &str = "a+b/cdefghijklmnopqrs+g";

    fn get(params: &[(String, String)], name: &str) -> Option<String> {
        params.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn a_key_with_plus_and_slash_survives_raw_and_percent_encoded() {
        let raw = fragment_params(&format!("token=t0k&host=127.0.0.1&port=60001&key={KEY}"));
        assert_eq!(get(&raw, "key").as_deref(), Some(KEY));
        assert_eq!(get(&raw, "port").as_deref(), Some("60001"));
        let encoded = fragment_params("key=a%2Bb%2Fcdefghijklmnopqrs%2bg&token=t%3D");
        assert_eq!(get(&encoded, "key").as_deref(), Some(KEY));
        assert_eq!(get(&encoded, "token").as_deref(), Some("t="));
    }

    #[test]
    fn a_key_a_form_decoder_spoiled_is_mended() {
        assert_eq!(key_text(" a b/cdefghijklmnopqrs g "), KEY);
    }

    #[test]
    fn odd_fragments_give_what_they_hold_and_never_fail() {
        let p = fragment_params("&&flag&x=%&y=%zz&z=%e2%82%ac&w=%ff");
        assert_eq!(get(&p, "flag").as_deref(), Some(""));
        assert_eq!(get(&p, "x").as_deref(), Some("%"));
        assert_eq!(get(&p, "y").as_deref(), Some("%zz"));
        assert_eq!(get(&p, "z").as_deref(), Some("€"));
        assert_eq!(get(&p, "w").as_deref(), Some("\u{fffd}"));
        assert!(fragment_params("").is_empty());
    }

    #[test]
    fn real_keys_parse_after_the_round_trip() {
        // Keys of MOSH-PROTOCOL.md's captures and one with both characters.
        for key in ["PWSoCIVurTVBGXAj873xNg", "4NeCCgvZFe2RnPgrcU1PQw", "ab+/AAAAAAAAAAAAAAAAAA"] {
            let url = format!("token=x&key={key}");
            let got = get(&fragment_params(&url), "key").unwrap();
            assert!(key_text(&got).parse::<Key>().is_ok(), "{key}");
        }
    }
}
