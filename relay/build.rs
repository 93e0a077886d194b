//! Embeds the page and names the build.
//!
//! The page: every file under `page/` inside this crate (written there by
//! `scripts/build-wasm.sh`, and carried in the crate's package, so `cargo install` from the package
//! serves the real page with no Node) becomes a static byte slice in `$OUT_DIR/assets.rs`. Without
//! it the relay still builds, and serves a page that says how to build the real one.
//!
//! The build: `TERN_RELAY_COMMIT` is the commit the relay was built from (`tern-relay --version`,
//! `/api/info`): `$TERN_BUILD_COMMIT` if set (a release build pins it), else the package's
//! `.cargo_vcs_info.json` (what `cargo package` records), else `git rev-parse`, else "unknown".

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, root, out);
        } else if let Ok(rel) = path.strip_prefix(root) {
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.push((rel, path.canonicalize().unwrap_or(path)));
        }
    }
}

fn embed_page(manifest: &Path) {
    let page = manifest.join("page");
    // Watch the page directory if it exists, else the crate's own directory: cargo treats a
    // missing path as always changed, which would rebuild the relay on every build.
    if page.is_dir() {
        println!("cargo:rerun-if-changed={}", page.display());
    } else {
        println!("cargo:rerun-if-changed={}", manifest.display());
    }
    let mut files = Vec::new();
    if page.is_dir() {
        collect(&page, &page, &mut files);
    }
    files.sort();
    // `FILE.br` and `FILE.gz` beside a FILE are its compressed variants (scripts/hash-page.mjs),
    // not files of their own.
    let names: std::collections::HashSet<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
    let variant =
        |rel: &str, ext: &str| rel.strip_suffix(ext).is_some_and(|base| names.contains(base));
    let find = |rel: String| files.iter().find(|(r, _)| *r == rel).map(|(_, abs)| abs);
    let include = |abs: Option<&PathBuf>| match abs {
        Some(abs) => format!("Some(include_bytes!({:?}))", abs.display().to_string()),
        None => "None".into(),
    };
    let mut code = String::from("pub static ASSETS: &[Embedded] = &[\n");
    for (rel, abs) in &files {
        if variant(rel, ".br") || variant(rel, ".gz") {
            continue;
        }
        let bytes = std::fs::read(abs).expect("a page file is readable");
        writeln!(
            code,
            "    Embedded {{ path: {rel:?}, bytes: include_bytes!({:?}), br: {}, gzip: {}, tag: \"{:016x}\" }},",
            abs.display().to_string(),
            include(find(format!("{rel}.br"))),
            include(find(format!("{rel}.gz"))),
            fnv1a(&bytes),
        )
        .expect("writing to a String");
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("assets.rs");
    std::fs::write(out, code).expect("OUT_DIR is writable");
}

/// A file's ETag: FNV-1a, 64 bits (only tells versions of one file apart).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The short commit hash, from the first source that knows it.
fn commit(manifest: &Path) -> String {
    println!("cargo:rerun-if-env-changed=TERN_BUILD_COMMIT");
    if let Ok(c) = std::env::var("TERN_BUILD_COMMIT") {
        if !c.trim().is_empty() {
            return short(c.trim());
        }
    }
    // A crate built from its package: cargo package wrote `{"git": {"sha1": "..."}, ...}`.
    if let Ok(vcs) = std::fs::read_to_string(manifest.join(".cargo_vcs_info.json")) {
        if let Some(sha) = vcs.split("\"sha1\"").nth(1).and_then(|rest| rest.split('"').nth(1)) {
            return short(sha);
        }
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(manifest)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(sha) if !sha.is_empty() => {
            // Rebuild when HEAD moves (a commit, a checkout): the version must not lie.
            if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
                // Only files that exist: cargo reruns a build script for a missing one every time.
                let head = git(&["symbolic-ref", "-q", "HEAD"]);
                let watched = ["HEAD", "packed-refs"].into_iter().map(String::from).chain(head);
                for file in watched.map(|f| Path::new(&dir).join(f)).filter(|p| p.exists()) {
                    println!("cargo:rerun-if-changed={}", file.display());
                }
            }
            short(&sha)
        }
        _ => "unknown".into(),
    }
}

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=build.rs");
    embed_page(&manifest);
    println!("cargo:rustc-env=TERN_RELAY_COMMIT={}", commit(&manifest));
}
