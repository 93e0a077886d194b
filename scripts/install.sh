#!/usr/bin/env bash
# Builds a self-contained tern-relay (the page embedded) and installs it into ~/.local/bin, and with
# --systemd a systemd user unit that keeps it running.
#
#   npm run install-relay [-- [--systemd] [--prefix DIR] [-- RELAY FLAGS...]]
#   bash scripts/install.sh [--systemd] [--prefix DIR] [-- RELAY FLAGS...]
#
#   --systemd     also write ~/.config/systemd/user/tern-relay.service (Restart=on-failure, the
#                 RELAY FLAGS, the token from ~/.config/tern-relay/env, made once, mode 0600) and
#                 start it when a user systemd is reachable
#   --prefix DIR  install into DIR/bin (default: ~/.local, so ~/.local/bin/tern-relay)
#   -- FLAGS...   tern-relay flags for the unit's ExecStart (docs/RELAY.md "Running"), e.g.
#                 -- --listen 100.64.0.7:7480 --tls-self-signed
#
# Idempotent: a second run rebuilds, replaces the binary (write to a temporary file, then rename, so
# a running relay keeps its old copy), rewrites the unit from the flags given, keeps the token.
# Without --systemd an existing unit is left as it is (restart it to run the new binary).
#
# Environment:
#   TERN_INSTALL_BINARY=PATH   install this tern-relay instead of building one: skips set-up, the page
#                              build and the release build (tests use it with an already built binary)
#   TERN_INSTALL_SYSTEMCTL=0   never call systemctl (tests); only write the files and say what to run
#   CARGO_TARGET_DIR           where cargo builds (as for npm start)
set -euo pipefail

log() { printf '[install] %s\n' "$*"; }
die() { printf '[install] ERROR: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

systemd=0 prefix= relay_flags=()
while (($#)); do
  case $1 in
    --systemd) systemd=1 ;;
    --prefix) (($# >= 2)) || die "--prefix needs a directory"; prefix=$2; shift ;;
    --prefix=*) prefix=${1#--prefix=} ;;
    -h | --help) usage; exit 0 ;;
    --) shift; relay_flags=("$@"); break ;;
    *) printf '[install] ERROR: unknown argument %q (tern-relay flags go after --)\n\n' "$1" >&2
       usage >&2; exit 2 ;;
  esac
  shift
done

[[ -n ${HOME:-} ]] || die "HOME is not set"
prefix=${prefix:-$HOME/.local}
# Absolute paths only: they end up in the unit file.
mkdir -p "$prefix/bin"
bin_dir=$(cd "$prefix/bin" && pwd -P)
dest=$bin_dir/tern-relay
config_home=${XDG_CONFIG_HOME:-$HOME/.config}
given_binary=
if [[ -n ${TERN_INSTALL_BINARY:-} ]]; then
  [[ -f $TERN_INSTALL_BINARY && -x $TERN_INSTALL_BINARY ]] ||
    die "TERN_INSTALL_BINARY=$TERN_INSTALL_BINARY is not an executable file"
  given_binary=$(realpath "$TERN_INSTALL_BINARY")
fi

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd -P)

# --- 1. build (as npm start does, but --release) ----------------------------------------------
if [[ -n $given_binary ]]; then
  src=$given_binary
  log "TERN_INSTALL_BINARY: installing $src (set-up, page build and release build skipped)"
else
  if [[ -d "$HOME/.cargo/bin" && ":$PATH:" != *":$HOME/.cargo/bin:"* ]]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  bash scripts/setup.sh
  bash scripts/build-wasm.sh
  [[ -f www/dist/index.html ]] || die "www/dist/index.html missing after scripts/build-wasm.sh"
  log "building tern-relay (release, page from www/dist embedded)"
  cargo build --release -p tern-relay
  src=${CARGO_TARGET_DIR:-target}/release/tern-relay
  [[ $src == /* ]] || src=$repo/$src
fi
version=$("$src" --version 2>&1) || die "$src --version failed: $version"

# --- 2. install atomically ---------------------------------------------------------------------
# Same directory, then rename(2): a relay running from $dest keeps its (now unlinked) old file, and
# nobody ever sees a half-written binary. cp onto a running binary would fail ("Text file busy").
tmp=$(mktemp "$bin_dir/.tern-relay.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cp "$src" "$tmp"
chmod 0755 "$tmp"
replaced=$([[ -e $dest ]] && echo replaced || echo installed)
mv -f "$tmp" "$dest"
trap - EXIT
log "$replaced $dest ($version)"

# --- 3. systemd user unit ----------------------------------------------------------------------
# One argument as systemd's ExecStart= reads it: plain words as they are, others in double quotes
# with \ and " escaped; % (specifiers) and $ (variable expansion) doubled everywhere.
sd_quote() {
  local a=$1
  a=${a//%/%%}
  a=${a//\$/\$\$}
  if [[ $a =~ ^[A-Za-z0-9_./:=@,+-]+$ ]]; then
    printf '%s' "$a"
  else
    a=${a//\\/\\\\}
    a=${a//\"/\\\"}
    printf '"%s"' "$a"
  fi
}

# The listen address and scheme the flags ask for (defaults as in relay/src/config.rs).
listen=127.0.0.1:7480 scheme=http self_signed=0
for ((i = 0; i < ${#relay_flags[@]}; i++)); do
  case ${relay_flags[i]} in
    --listen) listen=${relay_flags[i + 1]:-$listen} ;;
    --listen=*) listen=${relay_flags[i]#--listen=} ;;
    --tls-self-signed) scheme=https self_signed=1 ;;
    --tls-cert | --tls-cert=*) scheme=https ;;
    --token | --token=*) log "WARNING: --token in the flags shows in ps and in the unit file; the token in the env file is enough" ;;
  esac
done
port=${listen##*:} host=${listen%:*}
case $host in 0.0.0.0 | "[::]" | "") host=127.0.0.1 ;; esac
loopback=0
case $host in 127.* | localhost | "[::1]") loopback=1 ;; esac

unit_dir=$config_home/systemd/user
unit=$unit_dir/tern-relay.service
env_dir=$config_home/tern-relay
env_file=$env_dir/env
user_systemd=0
if [[ ${TERN_INSTALL_SYSTEMCTL:-1} != 0 ]] && command -v systemctl >/dev/null &&
  systemctl --user show-environment >/dev/null 2>&1; then
  user_systemd=1
fi
token=

if ((systemd)); then
  mkdir -p "$env_dir" "$unit_dir"
  chmod 0700 "$env_dir"
  if [[ -f $env_file ]] && grep -q '^TERN_RELAY_TOKEN=.' "$env_file"; then
    chmod 0600 "$env_file"
    log "kept the token in $env_file"
  else
    # 32 random bytes, base64url without padding: the relay's own format.
    new_token=$(head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=')
    (
      umask 077
      if [[ -f $env_file ]]; then
        printf 'TERN_RELAY_TOKEN=%s\n' "$new_token" >>"$env_file"
      else
        printf '%s\n' "# tern-relay's environment (the unit's EnvironmentFile). Keep it 0600." \
          "# Any TERN_RELAY_* variable of docs/RELAY.md works here too." \
          "TERN_RELAY_TOKEN=$new_token" >"$env_file.tmp"
        mv -f "$env_file.tmp" "$env_file"
      fi
    )
    chmod 0600 "$env_file"
    log "made a new token in $env_file (mode 0600)"
  fi
  token=$(sed -n 's/^TERN_RELAY_TOKEN=//p' "$env_file" | tail -1)

  exec_start=$(sd_quote "$dest")
  for f in "${relay_flags[@]}"; do exec_start+=" $(sd_quote "$f")"; done
  {
    printf '%s\n' \
      "# Written by tern's scripts/install.sh; it rewrites this file on every --systemd run." \
      "[Unit]" \
      "Description=Tern relay (browser terminal over mosh)" \
      "" \
      "[Service]" \
      "Type=exec" \
      "EnvironmentFile=$(sd_quote "$env_file")" \
      "ExecStart=$exec_start" \
      "Restart=on-failure" \
      "RestartSec=2" \
      "# The mosh-servers the relay starts must outlive a restart or stop of the relay." \
      "KillMode=process" \
      "" \
      "[Install]" \
      "WantedBy=default.target"
  } >"$unit.tmp"
  mv -f "$unit.tmp" "$unit"
  log "wrote $unit"
  log "  ExecStart=$exec_start"

  if ! mosh=$(command -v mosh-server); then
    log "WARNING: mosh-server not found: install it (sudo apt-get install mosh) before opening a terminal"
  elif [[ $mosh != /usr/bin/* && $mosh != /bin/* && $mosh != /usr/local/bin/* ]]; then
    log "WARNING: $mosh may not be on systemd's PATH: add -- --mosh-server-command $mosh"
  fi

  if ((user_systemd)); then
    was_active=$(systemctl --user is-active tern-relay 2>/dev/null || true)
    log "systemctl --user daemon-reload && systemctl --user enable --now tern-relay"
    systemctl --user daemon-reload
    systemctl --user enable --now tern-relay
    if [[ $was_active == active ]]; then
      log "systemctl --user restart tern-relay (it was running the old binary)"
      systemctl --user restart tern-relay
    fi
    sleep 2
    if [[ $(systemctl --user is-active tern-relay 2>/dev/null || true) != active ]]; then
      systemctl --user --no-pager status tern-relay >&2 || true
      die "tern-relay did not stay up: journalctl --user -u tern-relay -n 50 says why"
    fi
    log "tern-relay is running (logs: journalctl --user -u tern-relay)"
  fi
fi

# --- 4. what next ------------------------------------------------------------------------------
shell_join() { (($#)) && printf ' %q' "$@"; return 0; }
flags_shown=$(shell_join "${relay_flags[@]}")
if [[ -n $token ]]; then
  url="$scheme://$host:$port/#token=$token"
else
  url="the URL it prints ($scheme://$host:$port/#token=...)"
fi
echo
echo "Next:"
if [[ ":$PATH:" != *":$bin_dir:"* ]]; then
  echo "  $bin_dir is not on your PATH: add  export PATH=\"$bin_dir:\$PATH\"  to ~/.profile"
fi
if ((systemd)) && ((!user_systemd)); then
  echo "  No user systemd is reachable from here, so nothing was started. From a login session run"
  echo "    systemctl --user daemon-reload && systemctl --user enable --now tern-relay"
  echo "  or run it in the foreground:  (set -a; . $(printf %q "$env_file"); exec $(printf %q "$dest")$flags_shown)"
fi
if ((systemd)); then
  if [[ ! -e /var/lib/systemd/linger/$(id -un) ]]; then
    echo "  To keep it running while you are logged out (and start it at boot):  loginctl enable-linger $(id -un)"
  fi
elif [[ -f $unit ]]; then
  echo "  A unit is installed ($unit): run the new binary with  systemctl --user restart tern-relay"
else
  echo "  Run it:  $(printf %q "$dest")$flags_shown   (it prints the URL to open)"
  echo "  or keep it running as a systemd user service:  npm run install-relay -- --systemd"
fi
if ((loopback)); then
  echo "  On your laptop:  ssh -L $port:127.0.0.1:$port $(id -un)@$(uname -n)   (or however you ssh here), then open"
  echo "    $url"
  echo "  in the laptop's browser. WebTransport cannot pass the tunnel; the page falls back to a WebSocket by itself."
else
  echo "  On your laptop open  $url"
  if ((self_signed)); then
    echo "  The browser warns about the self-signed certificate (a new one each relay start): accept it."
  elif [[ $scheme == https ]]; then
    echo "  With --tls-cert, use the host name the certificate names instead of $host."
  fi
fi
