#!/usr/bin/env bash
# Builds a release into dist/ (docs/INSTALL.md lists every artifact):
#   tern-relay-TARGET.tar.gz     a static tern-relay (the page embedded), README, licences, the units
#   tern-relay_VERSION_ARCH.deb  /usr/bin/tern-relay, /usr/bin/tern, the units (enabled by no one)
#   install.sh                   the `curl -fsSL .../install.sh | sh` installer
#   SHA256SUMS                   of all of the above
# for TARGET x86_64-unknown-linux-musl (deb amd64) and aarch64-unknown-linux-musl (deb arm64).
#
#   npm run dist                         both targets
#   bash scripts/dist.sh x86_64          only the targets whose name starts with this
#
# The binaries are built with cargo-zigbuild: Zig (from PyPI) is the C compiler and the linker for
# both musl targets, so ring's C and assembly cross-compile with no cross gcc and no musl sysroot
# (docs/INSTALL.md "Building a release" says why this toolchain). Tarball and .deb names carry no
# version, the release URL .../releases/latest/download/NAME always names the newest.
#
# Environment: TERN_BUILD_COMMIT (the commit --version names; default git's HEAD),
# SOURCE_DATE_EPOCH (file times inside the archives; default the commit's time),
# TERN_DIST_TARGET_DIR (where the cross builds go; default CARGO_TARGET_DIR, else target/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd -P)
log() { printf '[dist] %s\n' "$*"; }
die() { printf '[dist] ERROR: %s\n' "$*" >&2; exit 1; }

TARGETS=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
if (($#)); then
  wanted=()
  for t in "${TARGETS[@]}"; do for p in "$@"; do [[ $t == "$p"* ]] && wanted+=("$t"); done; done
  ((${#wanted[@]})) || die "no target matches $* (targets: ${TARGETS[*]})"
  TARGETS=("${wanted[@]}")
fi
deb_arch() { case $1 in x86_64-*) echo amd64 ;; aarch64-*) echo arm64 ;; *) die "no Debian architecture for $1" ;; esac; }

bash scripts/setup.sh dist
DIST_TOOLS=${TERN_DIST_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/tern/dist-tools}
# cargo-zigbuild runs `python3 -m ziglang` when no `zig` is on PATH: the venv's python has it.
export PATH="$DIST_TOOLS/bin:$HOME/.cargo/bin:$PATH"

version=$(sed -n '/^\[workspace.package\]/,/^\[/{s/^version = "\(.*\)"/\1/p}' Cargo.toml)
[[ -n $version ]] || die "no version in Cargo.toml's [workspace.package]"
homepage=$(sed -n '/^\[workspace.package\]/,/^\[/{s/^repository = "\(.*\)"/\1/p}' Cargo.toml)
export TERN_BUILD_COMMIT=${TERN_BUILD_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
# The cross builds' target directory: TERN_DIST_TARGET_DIR (npm test keeps one outside the
# checkout, so repeated runs on a machine rebuild only what changed), else cargo's own.
target_dir=${TERN_DIST_TARGET_DIR:-${CARGO_TARGET_DIR:-target}}
[[ $target_dir == /* ]] || target_dir=$repo/$target_dir

log "tern-relay $version (commit ${TERN_BUILD_COMMIT:0:12}) for ${TARGETS[*]}"
bash scripts/build-wasm.sh
[[ -f relay/page/index.html ]] || die "relay/page/index.html missing after scripts/build-wasm.sh"

rm -rf dist && mkdir -p dist
stage=$target_dir/dist-stage
rm -rf "$stage" && mkdir -p "$stage"

# Units with the binary's directory filled in.
unit() { sed "s|@BINDIR@|$2|g" "packaging/$1.in"; }

# A tarball or .deb whose bytes depend only on the inputs: fixed owners, times and order.
tar_reproducible() { # OUT DIR_IN_STAGE
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$stage" -cf - "$2" | gzip -9n >"$1"
}

# The crates inside the binary and their licences (the page's npm packages are MIT: xterm.js).
third_party() { # TARGET
  echo "# Third-party code in tern-relay $version ($1)"
  echo
  echo "tern-relay is MIT OR Apache-2.0. It contains these crates (name version: licence):"
  echo
  cargo tree -p tern-relay --target "$1" -e normal --prefix none --format '{p}: {l}' 2>/dev/null |
    sed 's/ (.*)//; s/ (\*)$//' | grep -v '^tern' | sort -u | sed 's/^/- /'
  echo
  echo "and, in the embedded page, xterm.js and its addons (MIT) and wasm-bindgen's glue (MIT OR Apache-2.0)."
  local d
  for d in "$repo"/third_party/*/; do
    echo
    echo "$(basename "$d") is built from a copy with Tern's change (third_party/$(basename "$d")/PATCH.md in the source)."
  done
}

for target in "${TARGETS[@]}"; do
  arch=$(deb_arch "$target")
  log "cargo zigbuild --release -p tern-relay --target $target"
  # Stripped (symbols) and not position-independent: `file` says "statically linked", and the
  # binary alone, with no libc and no loader, is the product.
  env "CARGO_TARGET_DIR=$target_dir" "CARGO_PROFILE_RELEASE_STRIP=symbols" \
    "CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_RUSTFLAGS=-C relocation-model=static -C target-feature=+crt-static" \
    cargo zigbuild --release --locked -p tern-relay --target "$target"
  bin=$target_dir/$target/release/tern-relay
  kind=$(file -b "$bin")
  [[ $kind == *"statically linked"* ]] || die "$bin is not statically linked: $kind"
  log "  $(stat -c %s "$bin") bytes: $kind"

  # --- the tarball ---
  name=tern-relay-$version-$target
  d=$stage/$name
  mkdir -p "$d"
  install -m 0755 "$bin" "$d/tern-relay"
  install -m 0644 README.md LICENSE-MIT LICENSE-APACHE "$d/"
  unit tern-relay.service '%h/.local/bin' >"$d/tern-relay.service"
  unit tern-relay@.service /usr/local/bin >"$d/tern-relay@.service"
  third_party "$target" >"$d/THIRD-PARTY.md"
  tar_reproducible "dist/tern-relay-$target.tar.gz" "$name"

  # --- the .deb: no maintainer scripts, so installing it starts nothing and opens no port ---
  r=$stage/deb-$arch
  mkdir -p "$r/DEBIAN" "$r/usr/bin" "$r/usr/lib/systemd/user" "$r/usr/lib/systemd/system" \
    "$r/usr/share/doc/tern-relay"
  install -m 0755 "$bin" "$r/usr/bin/tern-relay"
  # `tern send FILE`, `tern open URL`: the same executable under another name.
  ln -s tern-relay "$r/usr/bin/tern"
  unit tern-relay.service /usr/bin >"$r/usr/lib/systemd/user/tern-relay.service"
  unit tern-relay@.service /usr/bin >"$r/usr/lib/systemd/system/tern-relay@.service"
  chmod 0644 "$r/usr/lib/systemd/user/tern-relay.service" "$r/usr/lib/systemd/system/tern-relay@.service"
  install -m 0644 README.md "$r/usr/share/doc/tern-relay/README.md"
  {
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: tern"
    echo "Source: $homepage"
    echo
    echo "Files: *"
    echo "Copyright: The Tern authors"
    echo "License: MIT or Apache-2.0"
    echo " The MIT licence:"
    sed 's/^$/./; s/^/ /' LICENSE-MIT
    echo " ."
    echo " The Apache License 2.0: /usr/share/common-licenses/Apache-2.0"
    echo
    third_party "$target" | sed 's/^$/./; s/^/ /; 1s/^ /Comment: /'
  } >"$r/usr/share/doc/tern-relay/copyright"
  chmod 0644 "$r/usr/share/doc/tern-relay/copyright"
  size_kb=$(du -sk --exclude=DEBIAN "$r" | cut -f1)
  cat >"$r/DEBIAN/control" <<EOF
Package: tern-relay
Version: $version
Architecture: $arch
Maintainer: The Tern authors <tern@invalid>
Installed-Size: $size_kb
Recommends: mosh
Section: net
Priority: optional
Homepage: $homepage
Description: browser terminal that speaks mosh
 tern-relay serves Tern's page and carries mosh datagrams between the browser
 (WebTransport, or a WebSocket where UDP cannot pass) and mosh-server, so a
 shell opened from a URL survives lag, loss, sleep and network changes.
 .
 Installing this package starts nothing and opens no port. Enable it on
 purpose: systemctl --user enable --now tern-relay (a user service), or
 systemctl enable --now tern-relay@USER (a system service for USER).
EOF
  find "$r" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  deb=dist/tern-relay_${version}_$arch.deb
  dpkg-deb --root-owner-group -Zxz --build "$r" "$deb" >/dev/null
  log "  $deb: $(stat -c %s "$deb") bytes"
done

install -m 0755 install.sh dist/install.sh
(cd dist && sha256sum -- *.tar.gz *.deb install.sh >SHA256SUMS)
log "dist/:"
(cd dist && ls -l --time-style=+ -- * | awk '{print "  " $5 "\t" $NF}')
