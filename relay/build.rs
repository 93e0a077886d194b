//! Embeds the page: every file under `www/dist/` (if it exists at build time) becomes a static
//! byte slice in `$OUT_DIR/assets.rs`. Without it the relay builds fine and answers 503 for the
//! page, so relay work does not wait for the page's build.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let www = manifest.join("../www");
    let dist = www.join("dist");
    // Watch the deepest directory that exists: cargo treats a missing path as always changed,
    // which would rebuild the relay on every build.
    if dist.is_dir() {
        println!("cargo:rerun-if-changed={}", dist.display());
    } else if www.is_dir() {
        println!("cargo:rerun-if-changed={}", www.display());
    }
    println!("cargo:rerun-if-changed=build.rs");

    let mut files = Vec::new();
    if dist.is_dir() {
        collect(&dist, &dist, &mut files);
    }
    files.sort();
    let mut code = String::from("pub static ASSETS: &[(&str, &[u8])] = &[\n");
    for (rel, abs) in &files {
        writeln!(code, "    ({rel:?}, include_bytes!({:?})),", abs.display().to_string())
            .expect("writing to a String");
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("assets.rs");
    std::fs::write(out, code).expect("OUT_DIR is writable");
}
