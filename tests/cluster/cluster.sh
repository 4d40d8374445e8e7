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
#
# Bare nodes: MESHWORK_CLUSTER_BARE="0 1" (node indices) gives each of those nodes a second sshd
# (port 2222, alias bare<i>, pid in node<i>/sshd-bare.pid) in a mount namespace of its own
# (hide_runtime below) in which the workbench's torch environment, the checkout and the build
# tree are empty and ~/.cache/meshwork/bundles is the node's own directory: through bare<i> the
# node is a bare Debian node, and only a runtime bundle makes meshtrain run there. The same
# network namespace and address, and the rest of the filesystem (the run root
# ~/.cache/meshwork/runs included) stays shared, so node<i> is unchanged for every other test.
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

# Prints the shell commands that hide the runtime for node $1 (run inside its own mount
# namespace, before the bare sshd starts). The state directory is bound back over the hidden
# build tree: sshd reads its config, host key and authorized_keys from there.
hide_runtime() {
  local d="$state/node$1" keep="/run/meshwork-cluster-$tag-keep$1"
  local venv="${MESHWORK_VENV:-$HOME/.cache/meshwork/torch-2.15.0}"
  local checkout; checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  mkdir -p "$keep" "$d/bundles" "$HOME/.cache/meshwork/bundles"
  local hide=("$venv" "$checkout")
  [ -f "$(dirname "$state")/CMakeCache.txt" ] && hide+=("$(dirname "$state")")
  echo "set -e; mount --bind '$state' '$keep'"
  local p q inside
  for p in "${hide[@]}"; do
    inside=0  # a build tree inside the checkout is hidden with it
    for q in "${hide[@]}"; do [[ "$p" == "$q"/* ]] && inside=1; done
    [ -d "$p" ] && [ "$inside" = 0 ] && echo "mount -t tmpfs -o size=1m,mode=0755 meshwork-hidden '$p'"
  done
  echo "mkdir -p '$state' && mount --bind '$keep' '$state'"
  echo "mount --bind '$d/bundles' '$HOME/.cache/meshwork/bundles'"
}

# Starts node $1's bare sshd (see the header) in network namespace $2 at address $3.
start_bare() {
  local i="$1" n="$2" a="$3" d="$state/node$1"
  sed -e "s/^Port 22$/Port 2222/" -e "s|^PidFile .*|PidFile $d/sshd-bare.pid|" \
      -e "s|^ListenAddress .*|ListenAddress $a:2222|" "$d/sshd_config" > "$d/sshd_bare_config"
  ip netns exec "$n" unshare -m --propagation private sh -c \
    "$(hide_runtime "$i"); exec '$(command -v sshd)' -f '$d/sshd_bare_config' -E '$d/sshd-bare.log'"
  printf 'Host bare%d\n  HostName %s\n  User root\n  Port 2222\n  IdentityFile %s\n\n' \
    "$i" "$a" "$state/id_ed25519" >> "$state/ssh_config"
}

down() {
  for f in "$state"/node*/ns; do
    [ -f "$f" ] || continue
    local n; n="$(cat "$f")"
    if ip netns list | grep -w "$n" >/dev/null; then  # not -q: an early exit is SIGPIPE under pipefail
      # Every process whose network namespace is this node: sshd, sessions, trainers.
      local pids; pids="$(ip netns pids "$n" 2>/dev/null || true)"
      [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
      ip netns del "$n" 2>/dev/null || true
    fi
    rm -f "$f" "$(dirname "$f")/sshd_bare_config"
    rm -rf "$(dirname "$f")/bundles"
  done
  # Namespaces of this tag that no state file names any more (the state directory went with a
  # removed checkout while its cluster still ran): found by name, ended the same way.
  local left
  for left in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^mw$tag-n" || true); do
    local pids; pids="$(ip netns pids "$left" 2>/dev/null || true)"
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
    ip netns del "$left" 2>/dev/null || true
  done
  for left in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^v$tag[0-9]" || true); do
    ip link del "$left" 2>/dev/null || true
  done
  rmdir /run/meshwork-cluster-"$tag"-keep* 2>/dev/null || true
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
    if [[ " ${MESHWORK_CLUSTER_BARE:-} " == *" $i "* ]]; then start_bare "$i" "$n" "$a"; fi
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
    [ -f "$state/node$i/sshd_bare_config" ] || continue
    ok=0
    for _ in $(seq 50); do
      if ip netns exec "$(ns "$i")" bash -c "exec 3<>/dev/tcp/$(addr "$i")/2222" 2>/dev/null; then ok=1; break; fi
      sleep 0.1
    done
    [ "$ok" = 1 ] || { echo "cluster: bare sshd of node$i did not start (see $state/node$i/sshd-bare.log)" >&2; exit 1; }
  done
  cat "$state/nodes"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down STATE_DIR [NODES]" >&2; exit 2 ;;
esac
