#!/usr/bin/env bash
# Sets up what running Tern needs (scripts/setup.sh run: mosh and the page's build; none of the test
# tools), builds the page and tern-relay, and runs it; it prints the URL to open (--print-url: a
# person ran this, so the URL goes to stdout even through a pipe or `npm start | tee`; the relay
# keeps it out of stdout otherwise, for services whose stdout is the journal). Arguments go to
# tern-relay:
#   npm start -- --help
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh run
bash scripts/build-wasm.sh
echo "[start] building tern-relay (release, the page from relay/page/ embedded)"
cargo build --release -p tern-relay
exec "${CARGO_TARGET_DIR:-target}/release/tern-relay" --print-url "$@"
