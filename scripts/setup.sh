#!/usr/bin/env bash
# Installs what building and testing Tern needs on a Debian machine with Rust (rustup) and Node.
# Idempotent: every step checks first and skips what is already present.
set -euo pipefail

# --- Tool versions: the one place to change them. -------------------------------------------
# wasm-bindgen-cli must equal the wasm-bindgen crate version pinned in Cargo.toml (=0.2.130).
WASM_BINDGEN_VERSION=0.2.130
WASM_TARGET=wasm32-unknown-unknown
# Debian packages: mosh-server/mosh-client (interop), chromium + chromedriver (browser tests),
# openssh-server and openssh-client (sessions on ssh hosts: tests/ssh-fixture.sh runs a real sshd on
# loopback), tmux (screen comparison against the real mosh-client), vim-tiny and less (full-screen programs
# kept out of the history, tests/browser/history.test.mjs), pebble (ACME test server for
# relay/tests/acme.rs), nginx (the reverse proxy of relay/tests/base_path.rs and
# tests/browser/tls.test.mjs), libnss3-tools (certutil: tests/browser/tls.test.mjs trusts a test CA).
APT_PACKAGES=(mosh chromium chromium-driver tmux pebble nginx libnss3-tools openssl iproute2 util-linux vim-tiny less openssh-server openssh-client)
# Installed with them, but a failure only warns: the Firefox browser tests (tests/browser/firefox-*)
# skip with a printed reason when /usr/bin/firefox-esr is missing.
APT_OPTIONAL=(firefox-esr)
# npm packages (xterm.js, playwright-core, puppeteer-core, binaryen's wasm-opt) are pinned in
# package.json and package-lock.json.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# cargo install puts binaries here; a non-login shell may not have it on PATH.
if [[ -d "$HOME/.cargo/bin" && ":$PATH:" != *":$HOME/.cargo/bin:"* ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

# --- Debian packages -------------------------------------------------------------------------
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=() missing_opt=()
for pkg in "${APT_PACKAGES[@]}"; do installed "$pkg" || missing+=("$pkg"); done
for pkg in "${APT_OPTIONAL[@]}"; do installed "$pkg" || missing_opt+=("$pkg"); done
if ((${#missing[@]} + ${#missing_opt[@]} == 0)); then
  log "apt: ${APT_PACKAGES[*]} ${APT_OPTIONAL[*]} present, skipping"
elif [[ $(id -u) -eq 0 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  if ((${#missing[@]})); then
    log "apt: installing ${missing[*]}"
    apt-get install -y -q "${missing[@]}" </dev/null
  fi
  if ((${#missing_opt[@]})); then
    log "apt: installing ${missing_opt[*]}"
    apt-get install -y -q "${missing_opt[@]}" </dev/null ||
      log "WARNING: could not install ${missing_opt[*]}: the Firefox browser tests will be skipped"
  fi
elif ((${#missing[@]})); then
  die "missing Debian packages: ${missing[*]} ${missing_opt[*]}. Install them as root:
    sudo apt-get update && sudo apt-get install -y ${missing[*]} ${missing_opt[*]}"
else
  log "WARNING: ${missing_opt[*]} missing (not root, not installed): the Firefox browser tests will be skipped.
    sudo apt-get update && sudo apt-get install -y ${missing_opt[*]}"
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

# --- nightly Rust and cargo-fuzz (the fuzz stage: scripts/fuzz.sh, docs/FUZZING.md) ------------
if rustup toolchain list | grep -q '^nightly'; then
  log "rustup: nightly toolchain present, skipping"
else
  log "rustup: installing the nightly toolchain (minimal profile)"
  rustup toolchain install nightly --profile minimal
fi
if cargo fuzz --version >/dev/null 2>&1; then
  log "cargo-fuzz: $(cargo fuzz --version) present, skipping"
else
  log "cargo-fuzz: installing (takes ~3 min)"
  cargo +nightly install cargo-fuzz --locked
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
