#!/usr/bin/env bash
# Sets up, builds, and runs tern-relay, which prints the URL to open. Arguments go to tern-relay:
#   npm start -- --help
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
if [[ -f scripts/build-wasm.sh ]]; then
  bash scripts/build-wasm.sh
fi
if [[ ! -f relay/Cargo.toml ]]; then
  cargo build --workspace
  echo "[start] ERROR: tern-relay is not built yet: relay/ does not exist in this checkout." >&2
  exit 1
fi
echo "[start] building tern-relay (release)"
cargo build --release -p tern-relay
exec "${CARGO_TARGET_DIR:-target}/release/tern-relay" "$@"
