//! The page's static files, embedded at build time from `relay/page/` (see build.rs), and what a
//! relay built without them serves instead.

/// A file as build.rs embeds it: its bytes, its compressed variants (scripts/hash-page.mjs wrote
/// them beside it) and a tag of its contents for the ETag.
#[derive(Debug)]
pub struct Embedded {
    pub path: &'static str,
    pub bytes: &'static [u8],
    pub br: Option<&'static [u8]>,
    pub gzip: Option<&'static [u8]>,
    pub tag: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// A file of the page.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    pub path: &'static str,
    pub bytes: &'static [u8],
    pub br: Option<&'static [u8]>,
    pub gzip: Option<&'static [u8]>,
    tag: &'static str,
}

/// A `Content-Encoding` the relay can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Brotli,
    Gzip,
}

impl Encoding {
    /// The header's value; `None` for identity.
    pub fn header(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Brotli => Some("br"),
            Encoding::Gzip => Some("gzip"),
        }
    }
}

impl Asset {
    /// The representation to send for `accept` (the request's `Accept-Encoding`): its encoding
    /// and bytes.
    pub fn representation(&self, accept: Option<&str>) -> (Encoding, &'static [u8]) {
        match choose_encoding(accept, self.br.is_some(), self.gzip.is_some()) {
            Encoding::Brotli => (Encoding::Brotli, self.br.unwrap_or(self.bytes)),
            Encoding::Gzip => (Encoding::Gzip, self.gzip.unwrap_or(self.bytes)),
            Encoding::Identity => (Encoding::Identity, self.bytes),
        }
    }

    /// Whether the file has compressed variants (its answers then vary by `Accept-Encoding`).
    pub fn has_variants(&self) -> bool {
        self.br.is_some() || self.gzip.is_some()
    }

    /// The strong ETag of one representation: the contents' tag, and the encoding (each
    /// representation is its own bytes).
    pub fn etag(&self, encoding: Encoding) -> String {
        match encoding.header() {
            Some(e) => format!("\"{}-{e}\"", self.tag),
            None => format!("\"{}\"", self.tag),
        }
    }
}

/// Looks up a request path (`/` means `index.html`).
pub fn find(request_path: &str) -> Option<Asset> {
    let path = request_path.trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    ASSETS.iter().find(|e| e.path == path).map(|e| Asset {
        path: e.path,
        bytes: e.bytes,
        br: e.br,
        gzip: e.gzip,
        tag: e.tag,
    })
}

/// The embedded name of a page file known by its name before hashing (`xterm/xterm.mjs` →
/// `xterm/xterm.b336ec65.mjs`: scripts/hash-page.mjs puts 8 hex digits before the extension), or
/// the name itself where it is kept (`index.html`).
pub fn hashed_name(logical: &str) -> Option<&'static str> {
    let (stem, ext) = logical.rsplit_once('.')?;
    let is_hashed = |path: &str| {
        let hash = path.strip_prefix(stem).and_then(|r| r.strip_prefix('.'));
        let hash = hash.and_then(|r| r.strip_suffix(ext)).and_then(|r| r.strip_suffix('.'));
        hash.is_some_and(|h| h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    ASSETS.iter().map(|e| e.path).find(|p| *p == logical || is_hashed(p))
}

/// Picks the encoding for an `Accept-Encoding` header: brotli over gzip over identity, among
/// those the client accepts (`q=0` refuses one; `*` stands for those it does not name) and the
/// file has. No header: identity (RFC 9110 allows anything, but a client that sends none may not
/// decode).
pub fn choose_encoding(accept: Option<&str>, has_br: bool, has_gzip: bool) -> Encoding {
    let Some(accept) = accept else { return Encoding::Identity };
    // The q-value the header gives a coding: Some(q) named (or by `*`), None not accepted at all.
    let q = |name: &str| -> Option<f32> {
        let mut star = None;
        for item in accept.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let weight = parts
                .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
                .find_map(|v| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if coding.eq_ignore_ascii_case(name) {
                return Some(weight);
            }
            if coding == "*" {
                star = Some(weight);
            }
        }
        star
    };
    let accepted = |name| q(name).is_some_and(|w| w > 0.0);
    if has_br && accepted("br") {
        Encoding::Brotli
    } else if has_gzip && (accepted("gzip") || accepted("x-gzip")) {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

/// Whether an `If-None-Match` header names `etag` (weak comparison, as for GET; `*` names any).
pub fn none_match(if_none_match: &str, etag: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    if_none_match.split(',').any(|t| t.trim() == "*" || bare(t) == bare(etag))
}

/// Whether the page was built into this binary at all.
pub fn page_present() -> bool {
    !ASSETS.is_empty()
}

/// The Content-Security-Policy sources (`'sha256-…'`) of the document's inline scripts: the
/// early link's (www/index.html), which must run as the document is parsed, before any file of
/// the page arrives. Each is allowed by the hash of its exact bytes, computed once from the
/// embedded document; a relay built without the page has none.
pub fn inline_script_hashes() -> &'static [String] {
    static HASHES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        let document = ASSETS.iter().find(|a| a.path == "index.html");
        document.map_or_else(Vec::new, |d| inline_scripts(d.bytes).map(script_source).collect())
    });
    &HASHES
}

/// The bodies of `<script>` elements with no attributes (a `src` or `type` script is no inline
/// script the page runs), as the document holds them.
pub fn inline_scripts(document: &[u8]) -> impl Iterator<Item = &[u8]> {
    const OPEN: &[u8] = b"<script>";
    const CLOSE: &[u8] = b"</script>";
    let mut rest = document;
    std::iter::from_fn(move || {
        let start = rest.windows(OPEN.len()).position(|w| w == OPEN)? + OPEN.len();
        let len = rest[start..].windows(CLOSE.len()).position(|w| w == CLOSE)?;
        let body = &rest[start..start + len];
        rest = &rest[start + len + CLOSE.len()..];
        Some(body)
    })
}

/// A script's CSP hash source: `'sha256-BASE64'`.
pub fn script_source(script: &[u8]) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(script);
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(digest))
}

/// Whether a request path names the page's document (`/`, `/index.html`): what a relay built
/// without the page answers with [`PAGE_MISSING_HTML`].
pub fn is_document(request_path: &str) -> bool {
    matches!(request_path.trim_start_matches('/'), "" | "index.html")
}

/// The document of a relay built without the page (a checkout where `scripts/build-wasm.sh` never
/// ran): what happened and the commands that give the real page. No script (the relay's
/// Content-Security-Policy allows inline style, and of inline scripts only the built document's,
/// by hash: this one has none).
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

/// Cache policy: HTML is never stored (it carries the Content-Security-Policy and names the
/// current files: a stale one would run an old page against a new relay); a file whose name
/// carries its content's hash (`app.3f9a1c2b.js`, scripts/hash-page.mjs) never changes, so it is
/// kept a year without asking; the other names (sw.js: a service worker's URL is its identity)
/// revalidate with their ETag.
pub fn cache_control(path: &str) -> &'static str {
    if path.ends_with(".html") || path.ends_with(".htm") {
        "no-store"
    } else if is_hashed(path) {
        "max-age=31536000, immutable"
    } else {
        "no-cache"
    }
}

/// A file that is only ever a subresource of the page, never a document or a worker: a hashed
/// script, module, wasm, stylesheet, manifest or PNG. Its answer goes without the document-only
/// headers (the Content-Security-Policy and the framing and opener rules: a browser reads those
/// from documents and workers only), 392 bytes on each of a first visit's nine. Not
/// sw.js (a worker's policy is its script's answer's), not the document, not SVG (an SVG opened
/// on its own is a document that may run script).
pub fn is_subresource(path: &str) -> bool {
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    is_hashed(path) && matches!(ext, "js" | "mjs" | "wasm" | "css" | "webmanifest" | "png")
}

/// `name.<8 lower-case hex digits>.ext`, as scripts/hash-page.mjs names a file.
fn is_hashed(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let mut parts = file.rsplit('.');
    let (_ext, hash, name) = (parts.next(), parts.next(), parts.next());
    name.is_some_and(|n| !n.is_empty())
        && hash.is_some_and(|h| {
            h.len() == 8 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subresources() {
        for p in [
            "app.0123abcd.js",
            "pkg/tern_bg.0123abcd.wasm",
            "xterm/xterm.0123abcd.mjs",
            "style.0123abcd.css",
            "manifest.0123abcd.webmanifest",
            "icon-192.0123abcd.png",
        ] {
            assert!(is_subresource(p), "{p}");
        }
        for p in ["sw.js", "index.html", "icon.0123abcd.svg", "app.js", "x.0123abcd.html"] {
            assert!(!is_subresource(p), "{p}");
        }
    }

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
        assert_eq!(cache_control("app.3f9a1c2d.js"), "max-age=31536000, immutable");
        assert_eq!(cache_control("pkg/tern_bg.abcdefab.wasm"), "max-age=31536000, immutable");
        assert_eq!(cache_control("tern_bg.wasm"), "no-cache");
        assert_eq!(cache_control("sw.js"), "no-cache");
        assert_eq!(cache_control("manifest.webmanifest"), "no-cache");
        // Not the build's form: an upper-case hash, a longer one, no name before it.
        for name in ["app.3F9A1C2D.js", "app.3f9a1c2d0.js", ".3f9a1c2d.js", "addon-web-links.mjs"] {
            assert_eq!(cache_control(name), "no-cache", "{name}");
        }
    }

    #[test]
    fn encoding_by_accept_encoding() {
        use Encoding::*;
        let pick = |h: Option<&str>| choose_encoding(h, true, true);
        assert_eq!(pick(Some("gzip, deflate, br, zstd")), Brotli);
        assert_eq!(pick(Some("gzip, deflate")), Gzip);
        assert_eq!(pick(Some("br;q=0, gzip")), Gzip);
        assert_eq!(pick(Some("br;q=0,gzip;q=0")), Identity);
        assert_eq!(pick(Some("identity")), Identity);
        assert_eq!(pick(Some("")), Identity);
        assert_eq!(pick(None), Identity);
        assert_eq!(pick(Some("*")), Brotli);
        assert_eq!(pick(Some("gzip, *;q=0")), Gzip);
        assert_eq!(pick(Some("BR;Q=0.5")), Brotli);
        assert_eq!(choose_encoding(Some("br, gzip"), false, true), Gzip);
        assert_eq!(choose_encoding(Some("br, gzip"), false, false), Identity);
    }

    #[test]
    fn if_none_match() {
        assert!(none_match("\"ab-br\"", "\"ab-br\""));
        assert!(none_match("\"x\", W/\"ab\"", "\"ab\""));
        assert!(none_match("*", "\"ab\""));
        assert!(!none_match("\"ab-gzip\"", "\"ab-br\""));
    }
}
