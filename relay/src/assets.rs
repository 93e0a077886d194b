//! The page's static files, embedded at build time from `relay/page/` (see build.rs), and what a
//! relay built without them serves instead.

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// A file of the page.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    pub path: &'static str,
    pub bytes: &'static [u8],
}

/// Looks up a request path (`/` means `index.html`).
pub fn find(request_path: &str) -> Option<Asset> {
    let path = request_path.trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    ASSETS.iter().find(|(p, _)| *p == path).map(|&(path, bytes)| Asset { path, bytes })
}

/// Whether the page was built into this binary at all.
pub fn page_present() -> bool {
    !ASSETS.is_empty()
}

/// Whether a request path names the page's document (`/`, `/index.html`): what a relay built
/// without the page answers with [`PAGE_MISSING_HTML`].
pub fn is_document(request_path: &str) -> bool {
    matches!(request_path.trim_start_matches('/'), "" | "index.html")
}

/// The document of a relay built without the page (a checkout where `scripts/build-wasm.sh` never
/// ran): what happened and the commands that give the real page. No script (the relay's
/// Content-Security-Policy allows inline style, not inline script).
pub const PAGE_MISSING_HTML: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="color-scheme" content="light dark">
<title>Tern: page not built</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; max-width: 46em; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.5em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; padding: 0.6em 0.8em; border-radius: 6px;
      background: rgba(127, 127, 127, 0.15); }
</style></head>
<body>
<h1>This tern-relay was built without its page</h1>
<p>The relay is running, but the terminal page was not built when this binary was compiled, so
there is nothing to show here yet.</p>
<p>From a checkout of Tern (needs Rust and Node.js), build the page and then the relay:</p>
<pre>npm start</pre>
<p>or, step by step:</p>
<pre>bash scripts/setup.sh run
bash scripts/build-wasm.sh     # writes relay/page/
cargo build --release -p tern-relay</pre>
<p>Or install a release binary, which has the page inside (docs/INSTALL.md):</p>
<pre>curl -fsSL https://github.com/tern-term/tern/releases/latest/download/install.sh | sh</pre>
</body></html>
"#;

/// MIME type by extension; browsers refuse wasm streaming compilation and module scripts
/// served with the wrong type.
pub fn mime(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext.to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "wasm" => "application/wasm",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Cache policy: HTML is never stored (it is the document the token's tab runs in, and it names
/// the current files); other files revalidate, except that a file whose name carries a content
/// hash (`name-0123abcd.js`, `name.0123abcd.wasm`) never changes.
pub fn cache_control(path: &str) -> &'static str {
    if path.ends_with(".html") || path.ends_with(".htm") {
        "no-store"
    } else if !is_hashed(path) {
        "no-cache"
    } else {
        "public, max-age=31536000, immutable"
    }
}

fn is_hashed(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = file.rsplit_once('.').map(|(s, _)| s).unwrap_or(file);
    stem.rsplit(['-', '.', '_']).next().is_some_and(|h| {
        h.len() >= 8
            && h.bytes().all(|b| b.is_ascii_alphanumeric())
            && h.bytes().any(|b| b.is_ascii_digit())
    }) && stem.contains(['-', '.', '_'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_types() {
        assert_eq!(mime("tern_bg.wasm"), "application/wasm");
        assert_eq!(mime("a/b.js"), "text/javascript; charset=utf-8");
        assert_eq!(mime("x.css"), "text/css; charset=utf-8");
        assert_eq!(mime("index.html"), "text/html; charset=utf-8");
        assert_eq!(mime("manifest.webmanifest"), "application/manifest+json");
    }

    #[test]
    fn cache_policy() {
        assert_eq!(cache_control("index.html"), "no-store");
        assert_eq!(cache_control("app.js"), "no-cache");
        assert_eq!(cache_control("assets/app-3f9a1c2d.js"), "public, max-age=31536000, immutable");
        assert_eq!(cache_control("tern_bg.1a2b3c4d5e.wasm"), "public, max-age=31536000, immutable");
        assert_eq!(cache_control("tern_bg.wasm"), "no-cache");
    }
}
