//! The floor: a page that loads the same xterm.js and stylesheet as Tern's page and draws a fixed
//! prompt, with no wasm and no session (`floor/`), for the load benchmark's "Tern / floor" rows
//! (docs/BENCHMARKS.md). Served at `/floor.html` and `/floor.js` only when the relay runs with
//! `TERN_BENCH_FLOOR=1` in its environment: it is no page anyone needs, so a relay that was not
//! started by the bench answers 404 there as for any unknown path.

use std::sync::OnceLock;

/// The environment variable that turns the floor on.
pub const ENV: &str = "TERN_BENCH_FLOOR";

const FILES: &[(&str, &str, &str)] = &[
    ("floor.html", "text/html; charset=utf-8", include_str!("floor/floor.html")),
    ("floor.js", "text/javascript; charset=utf-8", include_str!("floor/floor.js")),
];

/// The page files the floor names, as floor.html and floor.js write them: replaced by their
/// content-hashed names (scripts/hash-page.mjs) when first served, so the floor loads the very
/// files Tern's page does (and the browser caches them the same way).
const REFERENCED: &[&str] =
    &["icon.svg", "xterm/xterm.css", "style.css", "xterm/xterm.mjs", "xterm/addon-fit.mjs"];

/// The floor's files with the page's names as this relay embeds them.
fn files() -> &'static [(&'static str, &'static str, Vec<u8>)] {
    static FILES_NAMED: OnceLock<Vec<(&'static str, &'static str, Vec<u8>)>> = OnceLock::new();
    FILES_NAMED.get_or_init(|| {
        FILES
            .iter()
            .map(|&(name, mime, body)| {
                let mut body = body.to_string();
                for logical in REFERENCED {
                    if let Some(hashed) = crate::assets::hashed_name(logical) {
                        body = body.replace(logical, hashed);
                    }
                }
                (name, mime, body.into_bytes())
            })
            .collect()
    })
}

/// Whether this process serves the floor (read once).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os(ENV).is_some_and(|v| v == "1"))
}

/// The floor's file at `request_path`: its name, MIME type and body, when `enabled`.
pub fn find(
    request_path: &str,
    enabled: bool,
) -> Option<(&'static str, &'static str, &'static [u8])> {
    if !enabled {
        return None;
    }
    let path = request_path.trim_start_matches('/');
    files()
        .iter()
        .find(|(p, ..)| *p == path)
        .map(|(name, mime, body)| (*name, *mime, body.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_only_when_enabled() {
        assert!(find("/floor.html", false).is_none());
        assert!(find("/floor.js", false).is_none());
        let (_, mime, body) = find("/floor.html", true).unwrap();
        assert!(mime.starts_with("text/html"));
        assert!(std::str::from_utf8(body).unwrap().contains("floor.js"));
        assert_eq!(find("/floor.js", true).unwrap().1, "text/javascript; charset=utf-8");
        assert!(find("/index.html", true).is_none());
    }
}
