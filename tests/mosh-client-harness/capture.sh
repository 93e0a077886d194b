#!/usr/bin/env bash
# Runs one workload through the real mosh-server and the stock mosh-client inside a detached
# tmux session, then saves what mosh-client drew: screen text, cursor, and the screen with
# escapes. The Tern side (tern-probe) will run the same workload and compare.
#
#   capture.sh WORKLOAD OUTDIR [COLS ROWS]      (workloads: see workloads.sh)
#
# Output in OUTDIR/WORKLOAD/: screen.txt (capture-pane text, one line per row), cursor.txt
# ("row col", 0-based), screen-ansi.txt (capture-pane -e), title.txt (pane title), size.txt.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
workload="$1"
outdir="$2"
cols="${3:-80}"
rows="${4:-24}"
# shellcheck source=workloads.sh
source "$here/workloads.sh"
declare -F "workload_$workload" >/dev/null || { echo "unknown workload: $workload" >&2; exit 2; }

port="${MOSH_HARNESS_PORT:-$((60100 + RANDOM % 800))}"
session="tern-harness-$workload-$$"
# A tmux server of our own, so parallel or back-to-back captures never share one.
sock="tern-harness-$$"
T() { tmux -L "$sock" -f /dev/null "$@"; }
out="$outdir/$workload"
mkdir -p "$out"
tmp="$(mktemp -d)"
server_pid=""
client_pid=""

cleanup() {
    T kill-server 2>/dev/null || true
    # mosh-client lingers after its tmux session dies: end it (and the server) by pid.
    [ -n "$client_pid" ] && kill "$client_pid" 2>/dev/null || true
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# The server: a plain shell with a fixed prompt, UTF-8 locale, no rc files.
env -i HOME="$tmp" PATH=/usr/bin:/bin TERM=xterm-256color LANG=C.UTF-8 PS1='tern$ ' \
    mosh-server new -s -p "$port" -l LANG=C.UTF-8 -- /bin/bash --norc --noprofile \
    >"$tmp/server.out" 2>"$tmp/server.err"
read -r _ _ port key < <(grep '^MOSH CONNECT' "$tmp/server.out")
server_pid="$(sed -n 's/.*pid = \([0-9]*\).*/\1/p' "$tmp/server.err")"

# The client, in a detached tmux window of exactly COLS x ROWS (no status line).
T new-session -d -s "$session" -x "$cols" -y "$rows" \
    "env TERM=xterm-256color LANG=C.UTF-8 MOSH_KEY=$key MOSH_TITLE_NOPREFIX=1 mosh-client 127.0.0.1 $port"
T set-option -t "$session" status off >/dev/null
T resize-window -t "$session" -x "$cols" -y "$rows"
client_pid="$(T display -p -t "$session" '#{pane_pid}')"

wait_for() { # text, timeout in tenths of a second
    local i
    for ((i = 0; i < ${2:-100}; i++)); do
        if T capture-pane -p -t "$session" | grep -qF -- "$1"; then return 0; fi
        sleep 0.1
    done
    echo "timeout waiting for '$1'" >&2
    T capture-pane -p -t "$session" >&2
    return 1
}
type_line() { T send-keys -t "$session" -l -- "$1"; T send-keys -t "$session" Enter; }
keys() { T send-keys -t "$session" "$@"; }
settle() { sleep "${1:-1.5}"; }

wait_for 'tern$'
"workload_$workload"
settle

T capture-pane -p -t "$session" >"$out/screen.txt"
T capture-pane -p -e -t "$session" >"$out/screen-ansi.txt"
T display -p -t "$session" '#{cursor_y} #{cursor_x}' >"$out/cursor.txt"
T display -p -t "$session" '#{pane_title}' >"$out/title.txt"
T display -p -t "$session" '#{window_width} #{window_height}' >"$out/size.txt"
echo "$workload: $(cat "$out/size.txt"), cursor $(cat "$out/cursor.txt")"
