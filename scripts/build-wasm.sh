#!/usr/bin/env bash
# Builds the page into relay/page/: the core as wasm (+ wasm-bindgen glue), xterm.js, the page files.
# tern-relay embeds relay/page/ at compile time, so run this BEFORE building tern-relay
# (scripts/start.sh and the `wasm` stage of scripts/test.sh do).
#   TERN_WASM_OPT=0   skip wasm-opt (faster; about 25% larger module)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -d "$HOME/.cargo/bin" && ":$PATH:" != *":$HOME/.cargo/bin:"* ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
log() { printf '[build-wasm] %s\n' "$*"; }

TARGET=wasm32-unknown-unknown
target_dir=${CARGO_TARGET_DIR:-target}
dist=relay/page
# Outside relay/page: tern-relay embeds every file in there.
stamp=$target_dir/tern-www.inputs

# One build at a time: two at once (a test and a person, say) would share relay/page.tmp.
mkdir -p "$target_dir"
exec 9>"$target_dir/tern-www.lock"
flock 9

# Skip everything when no input changed since the last build (cheap: hashes of file listings).
inputs_hash() {
  {
    find crate/src crate/Cargo.toml web/src web/Cargo.toml Cargo.toml Cargo.lock .cargo www scripts/bundle-page.mjs scripts/strip-comments.mjs scripts/hash-page.mjs -path relay/page -prune -o -type f -printf '%p %s %T@\n' 2>/dev/null
    cat package-lock.json 2>/dev/null
    echo "opt=${TERN_WASM_OPT:-1}"
  } | sort | sha256sum | cut -d' ' -f1
}
hash=$(inputs_hash)
if [[ -f $stamp && $(cat "$stamp") == "$hash" && -f $dist/index.html ]]; then
  log "inputs unchanged, $dist is up to date"
  exit 0
fi

want=$(grep -A3 'wasm-bindgen = ' web/Cargo.toml | grep -o '=[0-9.]*' | head -1 | tr -d =)
have=$(wasm-bindgen --version 2>/dev/null | cut -d' ' -f2 || true)
if [[ -n $want && $have != "$want" ]]; then
  echo "[build-wasm] ERROR: wasm-bindgen CLI ${have:-missing}, crate wants $want (run scripts/setup.sh)" >&2
  exit 1
fi

# The `wasm` profile (Cargo.toml): release with whole-program LTO in one codegen unit, ~2 KB less
# brotli than release's thin LTO (docs/BENCHMARKS.md, "Bytes on the wire").
log "cargo build --profile wasm --target $TARGET -p tern-web --lib"
# RUSTFLAGS from the environment would replace .cargo/config.toml's web_sys_unstable_apis.
env -u RUSTFLAGS cargo build --profile wasm --target "$TARGET" -p tern-web --lib

rm -rf "$dist.tmp" && mkdir -p "$dist.tmp/pkg" "$dist.tmp/xterm"
log "wasm-bindgen --target web"
# --out-name keeps the page's file names (pkg/tern.js, pkg/tern_bg.wasm) independent of the package name.
wasm-bindgen --target web --no-typescript --out-name tern --out-dir "$dist.tmp/pkg" "$target_dir/$TARGET/wasm/tern_web.wasm"

# Debian's /usr/bin/wasm-opt (binaryen 108) corrupts wasm-bindgen 0.2.130 output: only npm's.
if [[ ${TERN_WASM_OPT:-1} != 0 && -x node_modules/.bin/wasm-opt ]]; then
  log "wasm-opt -Oz (npm binaryen)"
  # The producers and target-features custom sections are the toolchain's notes, read by no
  # browser (wasm-bindgen, which might, ran before): 0.5 KB of brotli off the first visit, which
  # pays for the early WebTransport link (issue 36, docs/BENCHMARKS.md "The round trips at 50 ms").
  node_modules/.bin/wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-reference-types --enable-mutable-globals \
    --strip-producers --strip-target-features \
    "$dist.tmp/pkg/tern_bg.wasm" -o "$dist.tmp/pkg/tern_bg.opt.wasm"
  mv "$dist.tmp/pkg/tern_bg.opt.wasm" "$dist.tmp/pkg/tern_bg.wasm"
fi

x=node_modules/@xterm
[[ -f $x/xterm/lib/xterm.mjs ]] || { echo "[build-wasm] ERROR: node_modules missing (npm ci)" >&2; exit 1; }
cp $x/xterm/lib/xterm.mjs $x/xterm/css/xterm.css $x/addon-fit/lib/addon-fit.mjs \
  $x/addon-web-links/lib/addon-web-links.mjs "$dist.tmp/xterm/"
[[ -f $x/addon-webgl/lib/addon-webgl.mjs ]] && cp $x/addon-webgl/lib/addon-webgl.mjs "$dist.tmp/xterm/"
cp www/index.html www/*.js www/style.css www/manifest.webmanifest www/icon.svg www/icon-*.png www/apple-touch-icon.png "$dist.tmp/"
# The page's own modules folded into app.js: one script of ours to fetch, not nine.
node scripts/bundle-page.mjs "$dist.tmp"
# Content-hashed names (immutable in the browser's cache) and brotli/gzip variants beside them.
node scripts/hash-page.mjs "$dist.tmp"

rm -rf "$dist" && mv "$dist.tmp" "$dist"
echo "$hash" >"$stamp"
wasm=$(ls "$dist"/pkg/tern_bg.*.wasm)
log "done: $dist ($(basename "$wasm") $(stat -c %s "$wasm") bytes, $(stat -c %s "$wasm.br") brotli, $(stat -c %s "$wasm.gz") gzip)"
