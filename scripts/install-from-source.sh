#!/usr/bin/env bash
# Builds tern-relay from this checkout and installs it with the release installer (install.sh), as
# if it were a release: the same places, the same --systemd service, the same --uninstall.
#
#   npm run install-relay [-- INSTALL.SH OPTIONS [-- RELAY FLAGS...]]
#   e.g. npm run install-relay -- --systemd -- --listen 100.64.0.7:7480 --tls-self-signed
#
# Needs what `npm start` needs (scripts/setup.sh run). A release needs none of it: docs/INSTALL.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '[install-from-source] %s\n' "$*"; }

bash scripts/setup.sh run
bash scripts/build-wasm.sh
log "cargo build --release -p tern-relay"
cargo build --release -p tern-relay
bin=${CARGO_TARGET_DIR:-target}/release/tern-relay

# A one-file release in a temporary directory: the tarball install.sh picks for this machine, and
# its SHA256SUMS.
case $(uname -m) in
  x86_64 | amd64) target=x86_64-unknown-linux-musl ;;
  aarch64 | arm64) target=aarch64-unknown-linux-musl ;;
  *) target=$(uname -m)-unknown-linux-musl ;;
esac
release=$(mktemp -d)
trap 'rm -rf "$release"' EXIT
mkdir "$release/tern-relay"
cp "$bin" "$release/tern-relay/tern-relay"
tar -C "$release" -czf "$release/tern-relay-$target.tar.gz" tern-relay
(cd "$release" && sha256sum "tern-relay-$target.tar.gz" >SHA256SUMS)
TERN_INSTALL_ARCH=$(uname -m) sh install.sh --from "$release" "$@"
