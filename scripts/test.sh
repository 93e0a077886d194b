#!/usr/bin/env bash
# Runs every check of the project, in stages, stopping at the first failure.
#   bash scripts/test.sh            all stages
#   bash scripts/test.sh fmt clippy only these stages (names as printed)
set -Eeuo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -d "$HOME/.cargo/bin" && ":$PATH:" != *":$HOME/.cargo/bin:"* ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
# The environment sets RUST_BACKTRACE=1; a backtrace per expected error drowns test output.
export RUST_BACKTRACE=0
# Property tests explore from a fixed seed here, so a run is reproducible and CI does not fail at
# random on a case no one has seen; set PROPTEST_RNG_SEED to explore elsewhere (failures are saved
# in the *.proptest-regressions files and replayed first on every run).
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261129}"
# A fresh clone builds everything once: incremental state would only double the target's size.
if [[ ${CI:-} == true ]]; then export CARGO_INCREMENTAL=0; fi

# Programs the interop and browser tests drive. A missing one fails here, loudly: tests that need
# a real peer never skip.
REQUIRED_PROGRAMS=(mosh-server mosh-client tmux chromium chromedriver wasm-bindgen pebble nginx certutil openssl ip unshare ssh ssh-keygen /usr/sbin/sshd
  debootstrap qemu-aarch64-static file dpkg-deb)
# Firefox runs most browser test files a second time (tests/browser/firefox/*.test.mjs, each
# importing its file in tests/browser/tests/).
# Where setup could not install it those tests are skipped, each with the reason printed; set
# TERN_REQUIRE_FIREFOX=1 to make a missing Firefox fail the tools stage instead.
FIREFOX=${TERN_FIREFOX:-/usr/bin/firefox-esr}

stage_setup() { bash scripts/setup.sh test; }

stage_tools() {
  local missing=()
  for p in "${REQUIRED_PROGRAMS[@]}"; do
    command -v "$p" >/dev/null || missing+=("$p")
  done
  [[ -x node_modules/.bin/wasm-opt ]] || missing+=("node_modules/.bin/wasm-opt")
  if [[ ${TERN_REQUIRE_FIREFOX:-0} == 1 ]]; then
    [[ -x $FIREFOX ]] || missing+=("$FIREFOX")
    [[ -d node_modules/puppeteer-core ]] || missing+=("node_modules/puppeteer-core")
  fi
  if ((${#missing[@]})); then
    echo "missing: ${missing[*]} (scripts/setup.sh should have installed them)" >&2
    return 1
  fi
  echo "found: ${REQUIRED_PROGRAMS[*]} node_modules/.bin/wasm-opt"
  if [[ -x $FIREFOX && -d node_modules/puppeteer-core ]]; then
    echo "found: $("$FIREFOX" --version 2>/dev/null || echo "$FIREFOX") node_modules/puppeteer-core"
  else
    echo "WARNING: $FIREFOX or node_modules/puppeteer-core missing: the Firefox browser tests will be SKIPPED" >&2
  fi
  if command -v WebKitWebDriver >/dev/null && command -v Xvfb >/dev/null; then
    echo "found: WebKitWebDriver Xvfb"
  else
    echo "WARNING: WebKitWebDriver (webkit2gtk-driver) or Xvfb (xvfb) missing: the WebKit browser tests will be SKIPPED" >&2
  fi
}

stage_fmt() {
  cargo fmt --all --check
  # The fuzz crate is a workspace of its own (not in --all).
  cargo fmt --manifest-path fuzz/Cargo.toml --check
}

stage_clippy() {
  cargo clippy --workspace --all-targets -- -D warnings
  # The browser client compiles only for wasm32 (and the core with it); RUSTFLAGS from the
  # environment would replace .cargo/config.toml's web_sys_unstable_apis.
  env -u RUSTFLAGS cargo clippy -p tern-web --lib --target wasm32-unknown-unknown -- -D warnings
}

# Native tests, and the set-up's plans (what `npm start` may install).
stage_test() { cargo test --workspace; node --test tests/setup.test.mjs tests/strip-comments.test.mjs; }

# The release as a person gets it (docs/INSTALL.md): `npm run dist` builds the static binaries,
# tarballs, .debs and install.sh into dist/; then install.sh from a local mirror into a temporary
# HOME, each static binary alone in an empty root (aarch64 under qemu), and the .deb installed with
# apt in a clean Debian 12 root (debootstrap, cached in /var/cache/tern-tests) whose shell a
# headless Chromium reaches.
# Its cross builds and the build from the crates' packages keep their target directories in
# ~/.cache/tern (like the Debian root), so a second run on a machine rebuilds only what changed.
stage_dist() {
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern
  TERN_DIST_TARGET_DIR=$cache/dist-target bash scripts/dist.sh
  TERN_PACKAGE_BUILD_DIR=$cache/package-build node --test tests/dist/*.test.mjs
}

# Builds the page (wasm + bindings + xterm.js) into relay/page. It runs before `test`: tern-relay
# embeds relay/page when it is compiled, and a relay rebuilt in the middle of `cargo test` (by a test
# that builds it) would leave crates compiled against the old one unable to link it.
stage_wasm() { bash scripts/build-wasm.sh; }

# End-to-end tests with node's test runner (docs/BROWSER.md, "Tests"): headless Chromium runs
# tests/browser/tests/, then tests/browser/firefox/ runs the same test bodies in headless Firefox
# (they skip, saying why, when Firefox is missing), then tests/browser/webkit/ runs WebKitGTK's
# MiniBrowser under WebKitWebDriver on Xvfb (the WebSocket fallback: no WebTransport there; they
# skip, saying why, without webkit2gtk-driver or xvfb).
stage_browser() {
  shopt -s nullglob
  local chromium=(tests/browser/tests/*.test.mjs) firefox=(tests/browser/firefox/*.test.mjs)
  local webkit=(tests/browser/webkit/*.test.mjs) t
  if ((${#chromium[@]} + ${#firefox[@]} + ${#webkit[@]} == 0)); then
    echo "skipped: no tests/browser/{tests,firefox,webkit}/*.test.mjs yet"
    return 0
  fi
  if ((${#chromium[@]})); then
    t=$SECONDS
    node --test "${chromium[@]}"
    echo "[test] browser: Chromium tests passed ($((SECONDS - t))s)"
  fi
  if ((${#firefox[@]})); then
    t=$SECONDS
    node --test "${firefox[@]}"
    echo "[test] browser: Firefox tests passed ($((SECONDS - t))s)"
  fi
  if ((${#webkit[@]})); then
    t=$SECONDS
    node --test "${webkit[@]}"
    echo "[test] browser: WebKit tests passed ($((SECONDS - t))s)"
  fi
}

# Every fuzz target for a few seconds from its committed corpus (fuzz/corpus/); a crash fails.
# Longer runs: `bash scripts/fuzz.sh long` (docs/FUZZING.md).
stage_fuzz() { bash scripts/fuzz.sh short "${TERN_FUZZ_SECONDS:-5}"; }

STAGES=(setup tools fmt clippy wasm test dist fuzz browser)
selected=("$@")
((${#selected[@]})) || selected=("${STAGES[@]}")
for s in "${selected[@]}"; do
  declare -F "stage_$s" >/dev/null || { echo "unknown stage '$s' (stages: ${STAGES[*]})" >&2; exit 2; }
done

trap 'rc=$?; ((rc)) && printf "\n[test] FAILED in stage %s (exit %d)\n" "$stage" "$rc" >&2' EXIT
start=$SECONDS
for stage in "${selected[@]}"; do
  printf '\n[test] ===== stage: %s =====\n' "$stage"
  t=$SECONDS
  "stage_$stage"
  printf '[test] stage %s passed (%ds)\n' "$stage" "$((SECONDS - t))"
done
printf '\n[test] all stages passed: %s (%ds)\n' "${selected[*]}" "$((SECONDS - start))"
