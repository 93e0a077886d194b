//! How the relay serves the page's files (scripts/hash-page.mjs made them): the encoding by
//! `Accept-Encoding` (brotli, gzip, none, `q=0`), `Vary`, the cache rule of a content-hashed name
//! and of the document, the ETag and `304 Not Modified`, and that what it sends compressed
//! decompresses to the exact file.

mod support;

use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use support::*;
use tern_relay::assets::{ASSETS, Embedded};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An answer: status, lower-cased head, body bytes.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(str::trim))
    }
}

/// `METHOD path` with `headers` (each `Name: value\r\n`).
async fn request(addr: SocketAddr, method: &str, path: &str, headers: &str) -> Answer {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut resp)).await.unwrap().unwrap();
    let split = resp.windows(4).position(|w| w == b"\r\n\r\n").expect("a whole head");
    let head = String::from_utf8_lossy(&resp[..split]).to_lowercase();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Answer { status, head, body: resp[split + 4..].to_vec() }
}

fn file(prefix: &str) -> &'static Embedded {
    ASSETS
        .iter()
        .find(|e| e.path.starts_with(prefix) && !e.path.ends_with(".map"))
        .unwrap_or_else(|| panic!("no {prefix}* in the page"))
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).expect("gzip decodes");
    out
}

/// Brotli through Node's zlib (no Rust decoder among the workspace's crates); `None` without Node.
fn unbrotli(bytes: &[u8]) -> Option<Vec<u8>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let script = "const z=require('zlib');const c=[];process.stdin.on('data',d=>c.push(d));\
                  process.stdin.on('end',()=>process.stdout.write(z.brotliDecompressSync(Buffer.concat(c))));";
    let mut child = match Command::new("node")
        .args(["-e", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIPPED the brotli round trip: no node to decode with ({e})");
            return None;
        }
    };
    let mut stdin = child.stdin.take().unwrap();
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "node could not decode the brotli body");
    Some(out.stdout)
}

#[tokio::test]
async fn files_are_served_compressed_by_accept_encoding_and_cached_by_name() {
    assert!(tern_relay::assets::page_present(), "build the page first (scripts/build-wasm.sh)");
    let token = test_token("files");
    let relay = TestRelay::start(bridge_config(&token, &["127.0.0.1:60001"])).await;
    let addr = relay.addr();

    let wasm = file("pkg/tern_bg.");
    let app = file("app.");
    let path = format!("/{}", wasm.path);
    assert!(wasm.br.is_some() && wasm.gzip.is_some(), "the build made both variants");

    // What a browser sends: brotli, the smallest, which decodes to the exact file.
    let a = request(addr, "GET", &path, "Accept-Encoding: gzip, deflate, br, zstd\r\n").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-encoding"), Some("br"), "{}", a.head);
    assert_eq!(a.header("vary"), Some("accept-encoding"));
    assert_eq!(a.header("content-type"), Some("application/wasm"));
    assert_eq!(a.header("content-length"), Some(a.body.len().to_string().as_str()));
    assert!(
        a.body.len() < wasm.bytes.len() / 2,
        "brotli: {} of {}",
        a.body.len(),
        wasm.bytes.len()
    );
    assert_eq!(a.header("cache-control"), Some("max-age=31536000, immutable"));
    if let Some(decoded) = unbrotli(&a.body) {
        assert!(decoded == wasm.bytes, "the brotli body is the file");
    }
    let br_tag = a.header("etag").expect("an etag").to_string();

    // gzip when brotli is not accepted (not named, or q=0).
    for accept in ["gzip, deflate", "br;q=0, gzip", "gzip;q=0.5, br;q=0"] {
        let a = request(addr, "GET", &path, &format!("Accept-Encoding: {accept}\r\n")).await;
        assert_eq!(a.header("content-encoding"), Some("gzip"), "{accept}: {}", a.head);
        assert_eq!(a.header("content-length"), Some(a.body.len().to_string().as_str()));
        assert!(gunzip(&a.body) == wasm.bytes, "{accept}: the gzip body is the file");
        assert_ne!(a.header("etag"), Some(br_tag.as_str()), "each encoding its own etag");
    }

    // The file itself: no header, identity, or every coding refused.
    for headers in ["", "Accept-Encoding: identity\r\n", "Accept-Encoding: br;q=0, gzip;q=0\r\n"] {
        let a = request(addr, "GET", &path, headers).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.header("content-encoding"), None, "{headers:?}: {}", a.head);
        assert_eq!(a.header("vary"), Some("accept-encoding"));
        assert!(a.body == wasm.bytes, "{headers:?}: the file");
    }

    // HEAD: the length of what GET would send, no body.
    let a = request(addr, "HEAD", &format!("/{}", app.path), "Accept-Encoding: br\r\n").await;
    assert_eq!(a.header("content-length"), Some(app.br.unwrap().len().to_string().as_str()));
    assert!(a.body.is_empty());

    // PNGs are sent as they are.
    let png = file("icon-192.");
    assert!(png.br.is_none() && png.gzip.is_none(), "no variants of a PNG");
    let a = request(addr, "GET", &format!("/{}", png.path), "Accept-Encoding: br, gzip\r\n").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-encoding"), None);
    assert_eq!(a.header("vary"), None, "one representation");
    assert!(a.body == png.bytes);
    relay.stop().await;
}

#[tokio::test]
async fn the_document_is_never_stored_and_unchanged_files_answer_304() {
    let token = test_token("etag");
    let relay = TestRelay::start(bridge_config(&token, &["127.0.0.1:60001"])).await;
    let addr = relay.addr();

    // The document: no-store, compressed, and names the hashed files.
    let doc = request(addr, "GET", "/", "Accept-Encoding: br, gzip\r\n").await;
    assert_eq!(doc.status, 200);
    assert_eq!(doc.header("cache-control"), Some("no-store"));
    assert_eq!(doc.header("content-encoding"), Some("br"));
    // The document names the hashed files (checked on what was sent when node can decode it).
    let plain = tern_relay::assets::find("/").unwrap().bytes.to_vec();
    let html = String::from_utf8(unbrotli(&doc.body).unwrap_or(plain)).unwrap();
    assert!(html.contains(&format!("src=\"{}\"", file("app.").path)), "{html}");
    // The CSP lets the page have its service worker, and only its own.
    assert!(doc.head.contains("worker-src 'self'"), "{}", doc.head);

    // 304 for what the client has: the document (the service worker revalidates it so), sw.js
    // (the browser checks it for a new worker), a hashed file; with the ETag and cache rule
    // again, and no body.
    let immutable = "max-age=31536000, immutable";
    let app = format!("/{}", file("app.").path);
    for (path, rule) in [("/", "no-store"), ("/sw.js", "no-cache"), (app.as_str(), immutable)] {
        let first = request(addr, "GET", path, "Accept-Encoding: br\r\n").await;
        let tag = first.header("etag").expect("an etag").to_string();
        let again =
            request(addr, "GET", path, &format!("Accept-Encoding: br\r\nIf-None-Match: {tag}\r\n"))
                .await;
        assert_eq!(again.status, 304, "{path}: {}", again.head);
        assert!(again.body.is_empty());
        assert_eq!(again.header("etag"), Some(tag.as_str()));
        assert_eq!(again.header("cache-control"), Some(rule));
        // Another version's tag, or another encoding's: the whole file.
        for other in ["\"0000000000000000-br\"", &tag.replace("-br", "-gzip")] {
            let a = request(
                addr,
                "GET",
                path,
                &format!("Accept-Encoding: br\r\nIf-None-Match: {other}\r\n"),
            )
            .await;
            assert_eq!(a.status, 200, "{path} with {other}");
            assert_eq!(a.body, first.body);
        }
    }
    relay.stop().await;
}

/// The document tells a page where WebTransport listens before the page can ask `/api/info`
/// (`Server-Timing: tern-link`, `tern::relay_proto::LinkHint`): exactly what the info says, so the
/// page's early link is the one the info later confirms (issue 36), and nothing more: no token,
/// no session, on an answer anyone may fetch. Only the document carries it.
#[tokio::test]
async fn the_document_names_where_webtransport_listens_as_the_info_does() {
    use tern::relay_proto::{LINK_HINT_TIMING, LinkHint, RelayInfo};
    let token = test_token("link-hint");
    let relay = TestRelay::start(bridge_config(&token, &["127.0.0.1:60001"])).await;
    let addr = relay.addr();
    let (status, body) = http_get(addr, "/api/info", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let info: RelayInfo = tern::relay_proto::decode(body.as_bytes()).expect("the info");
    let hint = LinkHint::from_info(&info, info.port).expect("the relay serves WebTransport");
    for path in ["/", "/index.html"] {
        // A navigation, and the service worker's fetch of the document (no token either way).
        for mode in ["Sec-Fetch-Mode: navigate\r\n", ""] {
            let a = request(addr, "GET", path, mode).await;
            assert_eq!(a.status, 200);
            // (The head is lower-cased; the hashes are base64.)
            let want = format!("{LINK_HINT_TIMING};desc=\"{}\"", hint.encode()).to_lowercase();
            assert_eq!(a.header("server-timing"), Some(want.as_str()), "{path} {mode}");
            assert!(!a.head.contains(&token.to_lowercase()), "no token in {}", a.head);
            assert!(LinkHint::describes(&hint.encode(), &info, info.port));
        }
    }
    let app = ASSETS.iter().find(|e| e.path.starts_with("app.")).expect("app.js");
    let a = request(addr, "GET", &format!("/{}", app.path), "").await;
    assert_eq!(a.header("server-timing"), None, "only the document");
    let a = request(addr, "GET", "/api/info", "").await;
    assert_eq!(a.header("server-timing"), None, "not the API");
    relay.stop().await;
}
