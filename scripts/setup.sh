#!/usr/bin/env bash
# Installs what Tern needs on a Debian machine with Rust (rustup) and Node, for one purpose:
#
#   bash scripts/setup.sh run     what `npm start` needs: mosh, and the page's build (the wasm
#                                 target, wasm-bindgen-cli, the npm packages the page is built from)
#   bash scripts/setup.sh dist    what `npm run dist` needs: the page's build, and the static musl
#                                 cross build (Zig and cargo-zigbuild from PyPI, the musl targets)
#   bash scripts/setup.sh test    what `npm test` needs: all of the above, and the test tools
#                                 (browsers, tmux, nginx, pebble, sshd, debootstrap, qemu-user,
#                                 nightly Rust and cargo-fuzz, the npm test drivers)
#   ... --dry-run                 print the steps of that purpose, each with what it would install
#                                 and why, and install nothing (tests/setup.test.mjs reads it)
#
# Idempotent: every step checks first and skips what is already present. Each step says what it
# installs and why before it does it. As root, Debian packages are installed with their services
# kept from starting (policy-rc.d): set-up never starts nginx or sshd on a machine.
set -euo pipefail

# --- Tool versions: the one place to change them. -------------------------------------------
# wasm-bindgen-cli must equal the wasm-bindgen crate version pinned in web/Cargo.toml (=0.2.130).
WASM_BINDGEN_VERSION=0.2.130
WASM_TARGET=wasm32-unknown-unknown
# The static release binaries (scripts/dist.sh, docs/INSTALL.md "Building a release").
MUSL_TARGETS=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
# Zig is the C compiler and linker for both musl targets (ring's C and assembly included);
# versions as PyPI serves them, pinned so a release build is repeatable.
ZIGLANG_VERSION=0.17.1
CARGO_ZIGBUILD_VERSION=0.24.1
# A venv of their own, outside the checkout so fresh clones reuse it.
DIST_TOOLS=${TERN_DIST_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/tern/dist-tools}

# Debian packages, by purpose.
# Running: mosh-server is what the relay starts for each session.
APT_RUN=(mosh)
# Testing: mosh-client and tmux (screen comparison against the real mosh-client), chromium and
# chromium-driver (browser tests), openssh-server and openssh-client (sessions on ssh hosts:
# tests/ssh-fixture.sh runs a real sshd on loopback), vim-tiny and less (full-screen programs kept out
# of the history), pebble (ACME test server), nginx (the reverse proxy of relay/tests/base_path.rs
# and tests/browser/tests/tls.test.mjs), libnss3-tools (certutil: tls.test.mjs trusts a test CA),
# debootstrap (the clean Debian root the package test installs into), qemu-user-static (runs the
# aarch64 release binary), python3-venv (the venv of the dist tools), asciinema
# (`asciinema cat` reads the session recordings, relay/tests/record_cast.rs).
APT_TEST=(libsixel-bin chafa tmux chromium chromium-driver pebble nginx libnss3-tools openssl iproute2 util-linux vim-tiny less
  openssh-server openssh-client debootstrap qemu-user-static file python3-venv asciinema)
# Installed with them, but a failure only warns: the Firefox browser tests (tests/browser/firefox/)
# skip with a printed reason when /usr/bin/firefox-esr is missing.
APT_TEST_OPTIONAL=(firefox-esr)
# The same for WebKit: WebKitGTK's WebKitWebDriver (and MiniBrowser with it) and Xvfb, its display;
# the WebKit browser tests (tests/browser/webkit/) skip with a printed reason without them.
APT_TEST_WEBKIT=(webkit2gtk-driver xvfb)
# Building a release: the venv for Zig and cargo-zigbuild, `file` to check the binaries are static.
APT_DIST=(python3-venv file)
# npm: package.json's "dependencies" build the page (xterm.js and its addons, binaryen's wasm-opt,
# terser for the shipped scripts);
# its "devDependencies" drive browsers in the tests (playwright-core, puppeteer-core).
NPM_PAGE=(@xterm/xterm @xterm/addon-fit @xterm/addon-web-links @xterm/addon-webgl binaryen terser)
NPM_TEST=(playwright-core puppeteer-core)

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

purpose= dry_run=0
for arg in "$@"; do
  case $arg in
    run | dist | test) [[ -z $purpose ]] || die "one purpose at a time (run, dist or test)"; purpose=$arg ;;
    --dry-run) dry_run=1 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$arg' (run, dist, test, --dry-run)" ;;
  esac
done
purpose=${purpose:-test}
log "purpose: $purpose$( ((dry_run)) && echo ' (dry run: nothing is installed)')"

# cargo install puts binaries here; a non-login shell may not have it on PATH.
if [[ -d "$HOME/.cargo/bin" && ":$PATH:" != *":$HOME/.cargo/bin:"* ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

# step NAME WHY: announces a step. In a dry run it also prints the plan line the test reads:
#   [setup] step NAME: WHY
step() { log "step $1: $2"; }

# --- Debian packages -------------------------------------------------------------------------
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
apt_updated=0
# apt_install [--optional] WHY PACKAGE...: installs the missing ones; as non-root, says what to
# run. --optional: a package that cannot be had only returns 1 (the caller warns).
apt_install() {
  local optional=0 missing=() p
  [[ $1 == --optional ]] && { optional=1; shift; }
  local why=$1
  shift
  step "apt $*" "$why"
  ((dry_run)) && return 0
  for p in "$@"; do installed "$p" || missing+=("$p"); done
  if ((${#missing[@]} == 0)); then
    log "  present: $*"
    return 0
  fi
  if [[ $(id -u) -ne 0 ]]; then
    local hint="Install them as root:
    sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    ((optional)) && { log "  missing (not root): ${missing[*]}. $hint"; return 1; }
    die "missing Debian packages: ${missing[*]}. $hint"
  fi
  export DEBIAN_FRONTEND=noninteractive
  ((apt_updated)) || { apt-get update -q; apt_updated=1; }
  log "  installing: ${missing[*]}"
  # policy-rc.d answering 101 keeps maintainer scripts from starting services (nginx on :80,
  # sshd on :22): the tests start their own, on loopback ports of their own. A file that was
  # already there is left as it was.
  local policy=/usr/sbin/policy-rc.d ours=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\n# scripts/setup.sh: no service starts during set-up\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    ours=1
  fi
  local rc=0
  apt-get install -y -q "${missing[@]}" </dev/null || rc=$?
  ((ours)) && rm -f "$policy"
  return $rc
}

# --- Rust ------------------------------------------------------------------------------------
command -v rustup >/dev/null || die "rustup not found: install Rust with rustup first (https://rustup.rs)"
rust_target() { # TARGET WHY
  step "rustup target $1" "$2"
  ((dry_run)) && return 0
  if rustup target list --installed | grep -qx "$1"; then
    log "  present"
  else
    rustup target add "$1"
  fi
}

wasm_bindgen() {
  step "cargo install wasm-bindgen-cli $WASM_BINDGEN_VERSION" \
    "makes the JavaScript bindings of the page's wasm module (must equal the crate's version)"
  ((dry_run)) && return 0
  local have
  have=$(wasm-bindgen --version 2>/dev/null || true)
  if [[ $have == "wasm-bindgen $WASM_BINDGEN_VERSION" ]]; then
    log "  present"
  else
    log "  installing (found: ${have:-none}; takes ~5 min)"
    # Not --locked: its lockfile wants a webpki-roots version the registry here lacks.
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
  fi
}

nightly_and_fuzz() {
  step "rustup toolchain nightly" "cargo-fuzz builds the fuzz targets with nightly (the fuzz stage)"
  if ((!dry_run)); then
    if rustup toolchain list | grep -q '^nightly'; then
      log "  present"
    else
      rustup toolchain install nightly --profile minimal
    fi
  fi
  step "cargo install cargo-fuzz" "runs the fuzz targets from their corpora (the fuzz stage)"
  if ((!dry_run)); then
    if cargo fuzz --version >/dev/null 2>&1; then
      log "  present: $(cargo fuzz --version)"
    else
      log "  installing (takes ~3 min)"
      cargo +nightly install cargo-fuzz --locked
    fi
  fi
}

# --- Zig and cargo-zigbuild (the static musl builds of scripts/dist.sh) ----------------------
dist_tools() {
  step "pip ziglang==$ZIGLANG_VERSION cargo-zigbuild==$CARGO_ZIGBUILD_VERSION (venv $DIST_TOOLS)" \
    "Zig cross-compiles and links the static musl tern-relay for x86_64 and aarch64"
  ((dry_run)) && return 0
  local py=$DIST_TOOLS/bin/python
  if [[ -x $py ]] && "$py" -m ziglang version >/dev/null 2>&1 &&
    [[ $("$DIST_TOOLS/bin/cargo-zigbuild" --version 2>/dev/null) == *" $CARGO_ZIGBUILD_VERSION" ]]; then
    log "  present: zig $("$py" -m ziglang version), $("$DIST_TOOLS/bin/cargo-zigbuild" --version)"
    return 0
  fi
  python3 -m venv "$DIST_TOOLS" || die "python3 -m venv failed: install python3-venv"
  "$DIST_TOOLS/bin/pip" install -q --disable-pip-version-check \
    "ziglang==$ZIGLANG_VERSION" "cargo-zigbuild==$CARGO_ZIGBUILD_VERSION"
  log "  installed: zig $("$py" -m ziglang version), $("$DIST_TOOLS/bin/cargo-zigbuild" --version)"
}

# --- npm packages ----------------------------------------------------------------------------
npm_packages() { # WHICH (page|all)
  local which=$1 wanted=("${NPM_PAGE[@]}") p
  [[ $which == all ]] && wanted+=("${NPM_TEST[@]}")
  if [[ $which == all ]]; then
    step "npm ci" "the page's build (${NPM_PAGE[*]}) and the browser test drivers (${NPM_TEST[*]})"
  else
    step "npm ci --omit=dev" "the packages the page is built from: ${NPM_PAGE[*]}"
  fi
  ((dry_run)) && return 0
  # npm writes node_modules/.package-lock.json on every install: older than package.json or
  # package-lock.json means the install is stale.
  local marker=node_modules/.package-lock.json fresh=1
  [[ -f $marker && ! package.json -nt $marker && ! package-lock.json -nt $marker ]] || fresh=0
  for p in "${wanted[@]}"; do [[ -d node_modules/$p ]] || fresh=0; done
  if ((fresh)); then
    log "  present: node_modules up to date"
  elif [[ $which == all ]]; then
    npm ci --no-audit --no-fund
  else
    npm ci --omit=dev --no-audit --no-fund
  fi
}

# --- the purposes ----------------------------------------------------------------------------
page_build() {
  rust_target "$WASM_TARGET" "the core is compiled to wasm for the page"
  wasm_bindgen
  npm_packages "$1"
}

case $purpose in
  run)
    apt_install "mosh-server runs each session's shell (spawn mode)" "${APT_RUN[@]}"
    page_build page
    ;;
  dist)
    apt_install "a venv for Zig, and file(1) to check the binaries are static" "${APT_DIST[@]}"
    page_build page
    for t in "${MUSL_TARGETS[@]}"; do rust_target "$t" "the static release binary for $t"; done
    dist_tools
    ;;
  test)
    apt_install "mosh-server runs each session's shell (spawn mode)" "${APT_RUN[@]}"
    apt_install "the tests' real peers: browsers, mosh-client in tmux, sshd, nginx, pebble, a clean Debian root, qemu-user" \
      "${APT_TEST[@]}"
    apt_install --optional "Firefox runs the browser tests a second time (skipped, saying so, without it)" \
      "${APT_TEST_OPTIONAL[@]}" ||
      log "WARNING: could not install ${APT_TEST_OPTIONAL[*]}: the Firefox browser tests will be skipped"
    apt_install --optional "WebKitGTK (MiniBrowser under WebKitWebDriver, on Xvfb) runs the WebKit browser tests (skipped, saying so, without it)" \
      "${APT_TEST_WEBKIT[@]}" ||
      log "WARNING: could not install ${APT_TEST_WEBKIT[*]}: the WebKit browser tests will be skipped"
    page_build all
    for t in "${MUSL_TARGETS[@]}"; do rust_target "$t" "the static release binary for $t (the dist stage)"; done
    dist_tools
    nightly_and_fuzz
    ;;
esac

log "done ($purpose)"
