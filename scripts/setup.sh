#!/usr/bin/env bash
# Installs what building and testing Tern needs on a Debian machine with Rust (rustup) and Node.
# Idempotent: every step checks first and skips what is already present.
set -euo pipefail

# --- Tool versions: the one place to change them. -------------------------------------------
# wasm-bindgen-cli must equal the wasm-bindgen crate version pinned in Cargo.toml (=0.2.130).
WASM_BINDGEN_VERSION=0.2.130
WASM_TARGET=wasm32-unknown-unknown
# Debian packages: mosh-server/mosh-client (interop), chromium + chromedriver (browser tests),
# tmux (screen comparison against the real mosh-client).
APT_PACKAGES=(mosh chromium chromium-driver tmux)
# npm packages (xterm.js, playwright-core, binaryen's wasm-opt) are pinned in package.json and
# package-lock.json.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# cargo install puts binaries here; a non-login shell may not have it on PATH.
if [[ -d "$HOME/.cargo/bin" && ":$PATH:" != *":$HOME/.cargo/bin:"* ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

# --- Debian packages -------------------------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]} == 0)); then
  log "apt: ${APT_PACKAGES[*]} present, skipping"
elif [[ $(id -u) -eq 0 ]]; then
  log "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q "${missing[@]}" </dev/null
else
  die "missing Debian packages: ${missing[*]}. Install them as root:
    sudo apt-get update && sudo apt-get install -y ${missing[*]}"
fi

# --- Rust wasm target ------------------------------------------------------------------------
command -v rustup >/dev/null || die "rustup not found: install Rust with rustup first"
if rustup target list --installed | grep -qx "$WASM_TARGET"; then
  log "rustup: target $WASM_TARGET present, skipping"
else
  log "rustup: adding target $WASM_TARGET"
  rustup target add "$WASM_TARGET"
fi

# --- wasm-bindgen-cli ------------------------------------------------------------------------
have_bindgen=$(wasm-bindgen --version 2>/dev/null || true)
if [[ $have_bindgen == "wasm-bindgen $WASM_BINDGEN_VERSION" ]]; then
  log "wasm-bindgen-cli: $WASM_BINDGEN_VERSION present, skipping"
else
  log "wasm-bindgen-cli: installing $WASM_BINDGEN_VERSION (found: ${have_bindgen:-none}; takes ~5 min)"
  # Not --locked: its lockfile wants a webpki-roots version the registry here lacks.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

# --- npm packages ----------------------------------------------------------------------------
# npm writes node_modules/.package-lock.json on every install: older than package.json or
# package-lock.json means the install is stale.
marker=node_modules/.package-lock.json
if [[ -f $marker && ! package.json -nt $marker && ! ( -f package-lock.json && package-lock.json -nt $marker ) ]]; then
  log "npm: node_modules up to date, skipping"
elif [[ -f package-lock.json ]]; then
  log "npm: npm ci (node_modules missing or stale)"
  npm ci --no-audit --no-fund
else
  log "npm: npm install (no package-lock.json yet)"
  npm install --no-audit --no-fund
fi

log "done"
