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
    FILES.iter().find(|(p, ..)| *p == path).map(|&(name, mime, body)| (name, mime, body.as_bytes()))
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
