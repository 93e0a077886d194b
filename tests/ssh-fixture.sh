#!/usr/bin/env bash
# A real sshd on loopback for the tests of sessions on ssh hosts (relay/tests/ssh.rs,
# tests/browser/tests/ssh.test.mjs): its own host keys, a client key authorized for the current user,
# and an ssh configuration naming four hosts, each a case a person meets:
#   good            key login on PORT_KEY (the host key known)
#   needs-password  an sshd on PORT_PW that takes passwords only
#   wrong-key       PORT_KEY again, but known_hosts holds another key for it (a changed host key)
#   down            PORT_DOWN, where nothing listens
#   other-arch      `good` again, whose `uname -s -m` says aarch64 under --ssh-program DIR/ssh-other-arch
# (and --ssh-program DIR/ssh-bad-follow: every host's recorder follow channel answers garbage)
#
#   bash tests/ssh-fixture.sh start DIR PORT_KEY PORT_PW PORT_DOWN   # files in DIR, two sshds
#   bash tests/ssh-fixture.sh stop DIR
# The relay is then run with `--ssh-config DIR/ssh_config`. Only loopback is ever used.
set -euo pipefail

cmd=${1:?start or stop}
dir=${2:?directory}

stop() {
  for f in "$dir"/sshd-*.pid; do
    [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

if [[ $cmd == stop ]]; then
  stop
  exit 0
fi
[[ $cmd == start ]] || { echo "usage: $0 start|stop DIR [PORT_KEY PORT_PW PORT_DOWN]" >&2; exit 2; }
port_key=${3:?PORT_KEY} port_pw=${4:?PORT_PW} port_down=${5:?PORT_DOWN}
sshd=/usr/sbin/sshd
[[ -x $sshd ]] || { echo "$sshd missing: apt-get install openssh-server (scripts/setup.sh does)" >&2; exit 1; }

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
chmod 700 "$dir"
user=$(id -un)
# sshd's privilege separation directory (root-owned; created by the service, which is not running).
if [[ $(id -u) -eq 0 && ! -d /run/sshd ]]; then mkdir -p -m 0755 /run/sshd; fi

for k in host_key other_host_key id; do
  [[ -f $dir/$k ]] || ssh-keygen -q -t ed25519 -N '' -C "tern-test-$k" -f "$dir/$k"
done
cp "$dir/id.pub" "$dir/authorized_keys"
chmod 600 "$dir/authorized_keys"

common() {
  cat <<EOF
ListenAddress 127.0.0.1
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
AllowUsers $user
KbdInteractiveAuthentication no
LogLevel ERROR
EOF
}
{ common; echo "Port $port_key"; echo "PidFile $dir/sshd-key.pid"; echo "PubkeyAuthentication yes"; echo "PasswordAuthentication no"; } > "$dir/sshd_key_config"
{ common; echo "Port $port_pw"; echo "PidFile $dir/sshd-pw.pid"; echo "PubkeyAuthentication no"; echo "PasswordAuthentication yes"; } > "$dir/sshd_pw_config"

host_pub=$(cut -d' ' -f1,2 "$dir/host_key.pub")
other_pub=$(cut -d' ' -f1,2 "$dir/other_host_key.pub")
cat > "$dir/known_hosts" <<EOF
tern-good $host_pub
tern-pw $host_pub
tern-wrong-key $other_pub
tern-down $host_pub
EOF

host() { # NAME PORT ALIAS
  cat <<EOF
Host $1
  HostName 127.0.0.1
  Port $2
  User $user
  IdentityFile $dir/id
  IdentitiesOnly yes
  IdentityAgent none
  HostKeyAlias $3
  UserKnownHostsFile $dir/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
EOF
}
{
  host good "$port_key" tern-good
  host needs-password "$port_pw" tern-pw
  host wrong-key "$port_key" tern-wrong-key
  host down "$port_down" tern-down
  host other-arch "$port_key" tern-good
} > "$dir/ssh_config"
# `other-arch` is `good` on a machine of another architecture: run with `--ssh-program
# DIR/ssh-other-arch`, the recorder's check there (which runs `uname -s -m`) answers aarch64 (the
# host's sshd resets PATH, so a fake uname cannot be put there); everything else goes to ssh.
cat > "$dir/ssh-other-arch" <<'EOF'
#!/bin/sh
for a; do last=$a; done
case " $* " in
  *" other-arch -- "*) case "$last" in *tern-install*) echo "machine Linux aarch64"; exit 0 ;; esac ;;
esac
exec ssh "$@"
EOF
chmod 755 "$dir/ssh-other-arch"
# A host whose recorder's follow channel speaks garbage (a compromised host): with `--ssh-program
# DIR/ssh-bad-follow`, `record-follow` answers, in turn, a line naming a file outside the
# session's, a line that is not JSON, and 5 MB without a newline; everything else goes to ssh.
cat > "$dir/ssh-bad-follow" <<'EOF'
#!/bin/sh
for a; do last=$a; done
case "$last" in
  *record-follow*)
    n=$(cat "$0.count" 2>/dev/null || echo 0)
    echo $((n + 1)) > "$0.count"
    case $((n % 3)) in
      0) printf '%s\n' '{"t":"data","name":"../../escape","ino":1,"at":0,"data":"eA=="}' ;;
      1) printf 'not json\n' ;;
      2) head -c 5000000 /dev/zero | tr '\0' x ;;
    esac
    exit 1 ;;
esac
exec ssh "$@"
EOF
chmod 755 "$dir/ssh-bad-follow"

stop
"$sshd" -f "$dir/sshd_key_config" -E "$dir/sshd-key.log"
"$sshd" -f "$dir/sshd_pw_config" -E "$dir/sshd-pw.log"
# Both answer before this returns, so a test never races their start.
for port in "$port_key" "$port_pw"; do
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
  done
done
