#!/usr/bin/env bash
# A real test cluster on one machine: N network namespaces ("nodes") on a Linux bridge, each with
# its own address and its own sshd (own host key, a test key authorized, UsePAM no). The nodes share
# the filesystem, as cluster nodes with an NFS home do.
#
#   tests/cluster/cluster.sh up   STATE_DIR [NODES=2]   create; prints the node addresses
#   tests/cluster/cluster.sh down STATE_DIR             kill everything in the namespaces, remove them
#
# STATE_DIR receives: id_ed25519(.pub) (the client test key), known_hosts (empty: tests decide
# what is trusted), ssh_config (aliases node0.., HostName/User/Port/IdentityFile), hostfile
# (DeepSpeed style), nodes (one address a line), node<i>/ (host key, sshd_config, pid, log).
# Names derive from STATE_DIR's hash so two clusters (two ctest fixtures) never collide.
# Needs root (ip netns). Idempotent: `up` first tears down what a crashed run left.
set -euo pipefail

cmd="${1:-}"; state="${2:-}"
[ -n "$cmd" ] && [ -n "$state" ] || { echo "usage: $0 up|down STATE_DIR [NODES]" >&2; exit 2; }
nodes="${3:-2}"
mkdir -p "$state"
state="$(cd "$state" && pwd)"
# A short tag from the state path: interface names are limited to 15 characters.
tag="$(printf '%s' "$state" | md5sum | cut -c1-4)"
subnet_byte=$(( 0x$(printf '%s' "$tag" | cut -c1-2) % 200 + 20 ))
bridge="mwbr$tag"
ns() { echo "mw$tag-n$1"; }
addr() { echo "10.$subnet_byte.0.$((11 + $1))"; }

down() {
  for f in "$state"/node*/ns; do
    [ -f "$f" ] || continue
    local n; n="$(cat "$f")"
    if ip netns list | grep -qw "$n"; then
      # Every process whose network namespace is this node: sshd, sessions, trainers.
      local pids; pids="$(ip netns pids "$n" 2>/dev/null || true)"
      [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
      ip netns del "$n" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  ip link del "$bridge" 2>/dev/null || true
}

up() {
  down
  command -v sshd >/dev/null || { echo "cluster: sshd not found (apt-get install openssh-server)" >&2; exit 1; }
  mkdir -p /run/sshd
  chmod 0755 /run/sshd
  [ -f "$state/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C meshwork-test -f "$state/id_ed25519"
  cp "$state/id_ed25519.pub" "$state/authorized_keys"
  chmod 0600 "$state/authorized_keys" "$state/id_ed25519"
  : > "$state/known_hosts"
  : > "$state/ssh_config"
  : > "$state/hostfile"
  : > "$state/nodes"
  ip link add "$bridge" type bridge
  ip addr add "10.$subnet_byte.0.1/24" dev "$bridge"
  ip link set "$bridge" up
  local sshd_bin; sshd_bin="$(command -v sshd)"
  for i in $(seq 0 $((nodes - 1))); do
    local n a d; n="$(ns "$i")"; a="$(addr "$i")"; d="$state/node$i"
    mkdir -p "$d"
    ip netns add "$n"
    echo "$n" > "$d/ns"
    ip link add "v$tag$i" type veth peer name "p$tag$i"
    ip link set "p$tag$i" netns "$n"
    ip link set "v$tag$i" master "$bridge"
    ip link set "v$tag$i" up
    ip netns exec "$n" ip link set lo up
    ip netns exec "$n" ip link set "p$tag$i" name eth0
    ip netns exec "$n" ip addr add "$a/24" dev eth0
    ip netns exec "$n" ip link set eth0 up
    [ -f "$d/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$d/ssh_host_ed25519_key"
    cat > "$d/sshd_config" <<CFG
ListenAddress $a
Port 22
HostKey $d/ssh_host_ed25519_key
PidFile $d/sshd.pid
AuthorizedKeysFile $state/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
MaxStartups 100
MaxSessions 100
LogLevel VERBOSE
# Every session sees the test Slurm's configuration (slurm.sh), as a login node's profile would.
SetEnv SLURM_CONF=$state/slurm/slurm.conf
CFG
    ip netns exec "$n" "$sshd_bin" -f "$d/sshd_config" -E "$d/sshd.log"
    printf 'Host node%d\n  HostName %s\n  User root\n  Port 22\n  IdentityFile %s\n\n' \
      "$i" "$a" "$state/id_ed25519" >> "$state/ssh_config"
    printf 'node%d slots=2\n' "$i" >> "$state/hostfile"
    echo "$a" >> "$state/nodes"
  done
  # Wait until every sshd listens (at most ~5 s).
  for i in $(seq 0 $((nodes - 1))); do
    local ok=0
    for _ in $(seq 50); do
      if ip netns exec "$(ns "$i")" bash -c "exec 3<>/dev/tcp/$(addr "$i")/22" 2>/dev/null; then ok=1; break; fi
      sleep 0.1
    done
    [ "$ok" = 1 ] || { echo "cluster: sshd of node$i did not start (see $state/node$i/sshd.log)" >&2; exit 1; }
  done
  cat "$state/nodes"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down STATE_DIR [NODES]" >&2; exit 2 ;;
esac
