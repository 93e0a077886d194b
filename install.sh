#!/bin/sh
# Installs tern-relay, a static binary with Tern's page inside, from a release:
#
#   curl -fsSL https://github.com/tern-term/tern/releases/latest/download/install.sh | sh
#   curl -fsSL .../install.sh | sh -s -- --systemd
#
# Options:
#   --systemd        also set up the systemd user service: a unit in ~/.config/systemd/user, the
#                    token in ~/.config/tern-relay/token (mode 0600, kept across runs), and start it
#                    when a user systemd is reachable (`systemctl --user enable --now tern-relay`)
#   --prefix DIR     install into DIR/bin (default ~/.local, or /usr/local as root)
#   --from URL|DIR   where the release files are (default the newest release; also TERN_BASE_URL):
#                    a mirror, or a local dist/ directory
#   --uninstall      remove everything this script added (the service stopped first) and say what
#                    the relay itself left (session records, pasted files)
#   -- FLAGS...      tern-relay flags for the service, e.g. -- --listen 100.64.0.7:7480 --tls-self-signed
#   -h, --help       this text
#
# What it does: picks the tarball for this machine (Linux x86_64 or aarch64), downloads it and
# SHA256SUMS, checks the tarball's SHA-256 (a mismatch installs nothing), puts tern-relay and the
# `tern` command (tern send, tern open) into the bin directory through a rename (a running relay
# keeps its old file), and prints the next step. Running it again updates in place and keeps the
# token. It never calls sudo: as a normal user it installs for that user only.
#
# Environment: TERN_BASE_URL (as --from), TERN_INSTALL_SYSTEMCTL=0 (write the unit, never call
# systemctl), TERN_INSTALL_ARCH (the machine name uname -m would give; for tests).
set -eu

DEFAULT_BASE_URL=https://github.com/tern-term/tern/releases/latest/download

say() { printf 'tern install: %s\n' "$*"; }
die() { printf 'tern install: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0" 2>/dev/null || true; }

systemd=0 uninstall=0 prefix= from=${TERN_BASE_URL:-}
relay_flags=
while [ $# -gt 0 ]; do
  case $1 in
    --systemd) systemd=1 ;;
    --uninstall) uninstall=1 ;;
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift ;;
    --prefix=*) prefix=${1#--prefix=} ;;
    --from) [ $# -ge 2 ] || die "--from needs a URL or a directory"; from=$2; shift ;;
    --from=*) from=${1#--from=} ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (tern-relay flags go after --; --help lists the options)" ;;
  esac
  shift
done
# The relay's flags, each quoted for the unit file and for the shell line printed at the end.
for f in "$@"; do
  case $f in --token | --token=*) say "warning: --token in the unit shows in ps; the token file is used instead" ;; esac
done

[ -n "${HOME:-}" ] || die "HOME is not set"
if [ -z "$prefix" ]; then
  if [ "$(id -u)" -eq 0 ]; then prefix=/usr/local; else prefix=$HOME/.local; fi
fi
bin_dir=$prefix/bin
config_home=${XDG_CONFIG_HOME:-$HOME/.config}
data_home=${XDG_DATA_HOME:-$HOME/.local/share}
unit_dir=$config_home/systemd/user
unit=$unit_dir/tern-relay.service
token_dir=$config_home/tern-relay
token_file=$token_dir/token
# What this script added, one path a line: --uninstall removes exactly these.
manifest=$data_home/tern-relay/installed-files

user_systemd=0
if [ "${TERN_INSTALL_SYSTEMCTL:-1}" != 0 ] && command -v systemctl >/dev/null 2>&1 &&
  systemctl --user show-environment >/dev/null 2>&1; then
  user_systemd=1
fi

# missing_dirs DIR: the directories `mkdir -p DIR` would create, outermost first, one a line.
missing_dirs() {
  set -- "$1" ""
  while [ ! -d "$1" ]; do set -- "$(dirname "$1")" "$1
$2"; done
  printf '%s' "$2"
}

start_manifest() { # the manifest, its own new directories listed first (so removed last)
  [ -f "$manifest" ] && return 0
  created=$(missing_dirs "$(dirname "$manifest")")
  mkdir -p "$(dirname "$manifest")"
  printf '%s\n' "$created" | sed '/^$/d' >"$manifest"
}

remember() { # PATH: adds it to the manifest once
  start_manifest
  grep -qxF "$1" "$manifest" || printf '%s\n' "$1" >>"$manifest"
}

# make_dir DIR: mkdir -p, remembering each directory it creates (uninstall removes them if empty).
make_dir() {
  start_manifest
  missing_dirs "$1" | while IFS= read -r d; do
    [ -n "$d" ] || continue
    mkdir "$d" && remember "$d"
  done
}

# --- --uninstall ------------------------------------------------------------------------------
if [ "$uninstall" = 1 ]; then
  if [ "$user_systemd" = 1 ] && [ -f "$unit" ]; then
    say "systemctl --user disable --now tern-relay"
    systemctl --user disable --now tern-relay >/dev/null 2>&1 || true
  fi
  if [ -f "$manifest" ]; then
    files=$(cat "$manifest")
    rm -f "$manifest"
  else
    say "no record of an install ($manifest): removing what an install puts in the default places"
    files="$bin_dir/tern-relay
$bin_dir/tern
$unit
$token_file"
  fi
  # The `tern` link the relay itself makes for its sessions' shells, if it points at a tern-relay.
  for link in "$HOME/.local/bin/tern"; do
    if [ -L "$link" ]; then
      case $(readlink "$link") in *tern-relay*) rm -f "$link" && say "removed $link" ;; esac
    fi
  done
  # Newest first, so files go before the directories that held them; a directory that holds
  # something else (a file of the person's) stays.
  printf '%s\n' "$files" | sed '1!G;h;$!d' | while IFS= read -r f; do
    [ -n "$f" ] || continue
    if [ -d "$f" ] && [ ! -L "$f" ]; then
      if rmdir "$f" 2>/dev/null; then say "removed $f/"; else say "kept $f/: it holds files this script did not add"; fi
    elif [ -e "$f" ] || [ -L "$f" ]; then
      rm -f "$f" && say "removed $f"
    fi
  done
  [ "$user_systemd" = 1 ] && systemctl --user daemon-reload >/dev/null 2>&1 || true
  say "uninstalled"
  state=${XDG_STATE_HOME:-$HOME/.local/state}/tern-relay
  pastes=${XDG_CACHE_HOME:-$HOME/.cache}/tern
  for left in "$state" "$pastes"; do
    [ -e "$left" ] && say "left in place, made by the relay while it ran: $left (rm -rf it if you want it gone)"
  done
  exit 0
fi

# --- which binary -----------------------------------------------------------------------------
os=$(uname -s)
machine=${TERN_INSTALL_ARCH:-$(uname -m)}
[ "$os" = Linux ] || die "no tern-relay binary for $os yet: Tern's releases are for Linux (x86_64, aarch64). Build it from source: cargo install tern-relay"
case $machine in
  x86_64 | amd64) target=x86_64-unknown-linux-musl ;;
  aarch64 | arm64 | armv8*) target=aarch64-unknown-linux-musl ;;
  *) die "unsupported architecture '$machine': Tern's releases are for x86_64 and aarch64 Linux. Build it from source: cargo install tern-relay" ;;
esac
tarball=tern-relay-$target.tar.gz
base=${from:-$DEFAULT_BASE_URL}

work=$(mktemp -d "${TMPDIR:-/tmp}/tern-install.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

fetch() { # NAME: copies or downloads base/NAME into the work directory
  case $base in
    http://* | https://*)
      if command -v curl >/dev/null 2>&1; then
        curl -fsSL --proto '=https,http' --retry 2 -o "$work/$1" "$base/$1" ||
          die "could not download $base/$1"
      elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$work/$1" "$base/$1" || die "could not download $base/$1"
      else
        die "neither curl nor wget is installed: install one, or pass --from DIR with the release files"
      fi
      ;;
    *)
      [ -f "$base/$1" ] || die "$base/$1 does not exist"
      cp "$base/$1" "$work/$1"
      ;;
  esac
}

say "downloading $tarball from $base"
fetch SHA256SUMS
fetch "$tarball"

# --- verify -----------------------------------------------------------------------------------
want=$(awk -v f="$tarball" '$2 == f || $2 == "*" f { print $1 }' "$work/SHA256SUMS")
[ -n "$want" ] || die "SHA256SUMS has no line for $tarball: refusing to install an unverified file"
if command -v sha256sum >/dev/null 2>&1; then
  have=$(sha256sum "$work/$tarball" | cut -d' ' -f1)
elif command -v shasum >/dev/null 2>&1; then
  have=$(shasum -a 256 "$work/$tarball" | cut -d' ' -f1)
else
  die "no sha256sum or shasum to check the download with"
fi
[ "$have" = "$want" ] || die "checksum mismatch for $tarball: SHA256SUMS says $want, the download is $have. The file is corrupt or was tampered with; nothing was installed"
say "checksum ok ($want)"

mkdir "$work/x"
tar -xzf "$work/$tarball" -C "$work/x" || die "$tarball is not a readable tarball; nothing was installed"
new=$(find "$work/x" -type f -name tern-relay | head -n 1)
[ -n "$new" ] || die "$tarball holds no tern-relay; nothing was installed"
version=$("$new" --version 2>&1) || die "the downloaded tern-relay does not run on this machine ($version); nothing was installed"

# --- install ----------------------------------------------------------------------------------
make_dir "$bin_dir"
bin_dir=$(cd "$bin_dir" && pwd -P)
dest=$bin_dir/tern-relay
if [ -f "$dest" ] && cmp -s "$new" "$dest"; then
  say "$dest is already $version"
else
  # A temporary file beside it, then rename(2): a running relay keeps its (now unlinked) old
  # file, and nobody ever runs a half-written one.
  tmp=$bin_dir/.tern-relay.new.$$
  cp "$new" "$tmp" && chmod 0755 "$tmp" && mv -f "$tmp" "$dest" || { rm -f "$tmp"; die "could not write $dest"; }
  say "installed $dest ($version)"
fi
remember "$dest"
if [ ! -e "$bin_dir/tern" ] || [ -L "$bin_dir/tern" ]; then
  ln -sf tern-relay "$bin_dir/tern"
  remember "$bin_dir/tern"
else
  say "left $bin_dir/tern alone: it is not a link this script made"
fi

# --- the systemd user service -----------------------------------------------------------------
# One argument as systemd's ExecStart= reads it: plain words as they are, others in double quotes;
# % (specifiers) and $ (variables) doubled.
sd_quote() {
  printf '%s' "$1" | sed 's/%/%%/g; s/\$/$$/g' | {
    IFS= read -r a || true
    case $a in
      *[!A-Za-z0-9_./:=@,+-]* | '') printf '"%s"' "$(printf '%s' "$a" | sed 's/\\/\\\\/g; s/"/\\"/g')" ;;
      *) printf '%s' "$a" ;;
    esac
  }
}

listen=127.0.0.1:7480 scheme=http self_signed=0 prev=
for f in "$@"; do
  case $prev in --listen) listen=$f ;; esac
  case $f in
    --listen=*) listen=${f#--listen=} ;;
    --tls-self-signed) scheme=https self_signed=1 ;;
    --tls-cert | --tls-cert=* | --acme | --acme=*) scheme=https ;;
  esac
  prev=$f
done
port=${listen##*:} host=${listen%:*}
case $host in 0.0.0.0 | "[::]" | "") host=127.0.0.1 ;; esac
loopback=0
case $host in 127.* | localhost | "[::1]") loopback=1 ;; esac

token=
if [ "$systemd" = 1 ]; then
  make_dir "$token_dir"
  make_dir "$unit_dir"
  chmod 0700 "$token_dir"
  if [ -s "$token_file" ]; then
    chmod 0600 "$token_file"
    say "kept the token in $token_file"
  else
    # An earlier from-source install kept it as TERN_RELAY_TOKEN in the env file: keep using it.
    old=$(sed -n 's/^TERN_RELAY_TOKEN=//p' "$token_dir/env" 2>/dev/null | tail -n 1)
    if [ -n "$old" ]; then
      new_token=$old
      sed -i '/^TERN_RELAY_TOKEN=/d' "$token_dir/env"
    else
      # 32 random bytes, base64url without padding: the relay's own format.
      new_token=$(head -c 32 /dev/urandom | base64 | tr -d '\n=' | tr '+/' '-_')
    fi
    (umask 077 && printf '%s\n' "$new_token" >"$token_file.tmp" && mv -f "$token_file.tmp" "$token_file")
    say "made the token file $token_file (mode 0600)"
  fi
  remember "$token_file"
  token=$(head -n 1 "$token_file")

  exec_start="$(sd_quote "$dest") --token-file $(sd_quote "$token_file")"
  for f in "$@"; do exec_start="$exec_start $(sd_quote "$f")"; done
  cat >"$unit.tmp" <<EOF
# Written by Tern's install.sh; it rewrites this file on every --systemd run.
[Unit]
Description=Tern relay (browser terminal over mosh)

[Service]
Type=exec
EnvironmentFile=-$(sd_quote "$token_dir/env")
ExecStart=$exec_start
Restart=on-failure
RestartSec=2
# The mosh-servers the relay starts are the person's shells: they outlive a restart or stop of it.
KillMode=process

[Install]
WantedBy=default.target
EOF
  mv -f "$unit.tmp" "$unit"
  remember "$unit"
  say "wrote $unit"

  if ! command -v mosh-server >/dev/null 2>&1; then
    say "warning: mosh-server is not installed; the relay refuses to start without it: sudo apt install mosh (or dnf install mosh, brew install mosh)"
  fi
  if [ "$user_systemd" = 1 ]; then
    say "systemctl --user daemon-reload && systemctl --user enable tern-relay && systemctl --user restart tern-relay"
    systemctl --user daemon-reload
    systemctl --user enable tern-relay >/dev/null 2>&1
    systemctl --user restart tern-relay
    sleep 1
    if [ "$(systemctl --user is-active tern-relay 2>/dev/null || true)" != active ]; then
      systemctl --user --no-pager status tern-relay >&2 || true
      die "tern-relay did not stay up: journalctl --user -u tern-relay -n 50 says why"
    fi
    say "tern-relay is running (logs: journalctl --user -u tern-relay)"
  fi
fi

# --- what next --------------------------------------------------------------------------------
if [ -n "$token" ]; then
  url="$scheme://$host:$port/#token=$token"
else
  url="the URL it prints ($scheme://$host:$port/#token=...)"
fi
echo
echo "Next:"
case ":$PATH:" in
  *":$bin_dir:"*) ;;
  *) echo "  $bin_dir is not on your PATH: add  export PATH=\"$bin_dir:\$PATH\"  to ~/.profile" ;;
esac
if [ "$systemd" = 1 ] && [ "$user_systemd" = 0 ]; then
  echo "  No user systemd is reachable from here, so nothing was started. From a login session run"
  echo "    systemctl --user daemon-reload && systemctl --user enable --now tern-relay"
fi
if [ "$systemd" = 0 ] && [ -f "$unit" ]; then
  echo "  A service is installed ($unit): run the new binary with  systemctl --user restart tern-relay"
elif [ "$systemd" = 1 ]; then
  [ -e "/var/lib/systemd/linger/$(id -un)" ] ||
    echo "  To keep it running while you are logged out (and start it at boot):  loginctl enable-linger $(id -un)"
else
  echo "  Run it:  $dest $*   (it prints the URL to open)"
  echo "  or keep it running as a systemd user service:  sh install.sh --systemd"
fi
if [ "$loopback" = 1 ]; then
  echo "  On your laptop:  ssh -L $port:127.0.0.1:$port $(id -un)@$(uname -n)   then open"
  echo "    $url"
  echo "  in the laptop's browser (the page falls back to a WebSocket through the tunnel by itself)."
else
  echo "  On your laptop open  $url"
  [ "$self_signed" = 1 ] &&
    echo "  The browser warns about the self-signed certificate once: check its fingerprint against the one the relay prints, then accept it."
fi
