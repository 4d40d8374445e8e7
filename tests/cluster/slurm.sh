#!/usr/bin/env bash
# A real Slurm on the namespace test cluster (cluster.sh): one munged, slurmctld in node0's
# namespace, slurmd "n1" in node0's and "n2" in node1's (NodeAddr = the namespace addresses).
# Debian's packages (slurmctld, slurmd, slurm-client, munge), started by hand without systemd:
# no cgroups (proctrack/linuxproc, task/none), no accounting (so `sacct` does not work here, as on
# many small clusters). The login node is node0: its sshd hands SLURM_CONF to every session
# (cluster.sh's SetEnv), so `ssh node0 sinfo` talks to this controller.
#
#   tests/cluster/slurm.sh up   CLUSTER_STATE_DIR   (after cluster.sh up; prints the node list)
#   tests/cluster/slurm.sh down CLUSTER_STATE_DIR
#
# Everything lives in CLUSTER_STATE_DIR/slurm/. Partitions: "debug" (n1 and n2, default,
# MaxTime 10 min), "tiny" (n1 only) and "bare" (n3: a node without the torch environment, the
# checkout or the build tree; see start_bare_slurmd). Timing is set for tests: a finished job stays visible to
# `scontrol` for MinJobAge=600 s, a job over its time limit gets SIGTERM at once (OverTimeLimit=0)
# and SIGKILL KillWait=2 s later.
#
# Accounts: "bogus" may not use partition debug, and sbatch refuses it at submission. Without
# accounting (slurmdbd) Slurm cannot refuse an *unknown* account: it knows none, and
# AllowAccounts= would then hold every job pending forever ("Job's account not known"), even an
# allowed one. DenyAccounts= needs no account database, and EnforcePartLimits=ALL makes slurmctld
# check the partition's account rules (and size and time limits) when the job is submitted
# instead of leaving it pending: the refusal a user meets at sbatch on an accounted cluster.
set -euo pipefail

cmd="${1:-}"; cstate="${2:-}"
[ -n "$cmd" ] && [ -n "$cstate" ] || { echo "usage: $0 up|down CLUSTER_STATE_DIR" >&2; exit 2; }
cstate="$(cd "$cstate" && pwd)"
s="$cstate/slurm"

down() {
  for f in "$s"/*.pid; do
    [ -f "$f" ] || continue
    local p; p="$(tr -dc 0-9 < "$f")"
    [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
    rm -f "$f"
  done
  # slurmstepd's of jobs still running (they are children of no daemon we track).
  for p in $(pgrep -f "slurmstepd.*" 2>/dev/null || true); do
    grep -qa "$s" /proc/"$p"/environ 2>/dev/null && kill -9 "$p" 2>/dev/null || true
  done
  return 0
}

# n3: a bare compute node. slurmd -N n3 in node1's network namespace (its own port, 6819) and in
# a mount namespace of its own in which the workbench's torch environment, the checkout and the
# build tree are empty (as cluster.sh's bare nodes), so a job there runs meshtrain only from a
# runtime bundle on the shared filesystem. The state directory (slurm.conf, spool, munge's
# socket) is bound back over the hidden tree; /tmp and the home directory stay shared.
start_bare_slurmd() {
  local ns="$1" keep="/run/meshwork-slurm-$(printf '%s' "$cstate" | md5sum | cut -c1-8)-keep"
  local venv="${MESHWORK_VENV:-$HOME/.cache/meshwork/torch-2.15.0}"
  local checkout; checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  local hide=("$venv" "$checkout") p q inside cmds
  [ -f "$(dirname "$cstate")/CMakeCache.txt" ] && hide+=("$(dirname "$cstate")")
  mkdir -p "$keep"
  cmds="set -e; mount --bind '$cstate' '$keep'"
  for p in "${hide[@]}"; do
    inside=0  # a build tree inside the checkout is hidden with it
    for q in "${hide[@]}"; do [[ "$p" == "$q"/* ]] && inside=1; done
    [ -d "$p" ] && [ "$inside" = 0 ] && cmds="$cmds; mount -t tmpfs -o size=1m,mode=0755 meshwork-hidden '$p'"
  done
  cmds="$cmds; mkdir -p '$cstate' && mount --bind '$keep' '$cstate'; exec slurmd -N n3"
  nsenter --net=/run/netns/"$ns" unshare -m --propagation private sh -c "$cmds" </dev/null >/dev/null 2>&1
}

up() {
  down
  for b in slurmctld slurmd munged sinfo; do
    command -v "$b" >/dev/null || PATH="$PATH:/usr/sbin"
  done
  command -v slurmctld >/dev/null || { echo "slurm: slurmctld not found (apt-get install slurmctld slurmd slurm-client munge)" >&2; exit 1; }
  [ -f "$cstate/nodes" ] || { echo "slurm: $cstate/nodes missing: run cluster.sh up first" >&2; exit 1; }
  local a0 a1; a0="$(sed -n 1p "$cstate/nodes")"; a1="$(sed -n 2p "$cstate/nodes")"
  local ns0 ns1; ns0="$(cat "$cstate/node0/ns")"; ns1="$(cat "$cstate/node1/ns")"
  rm -rf "$s"
  mkdir -p "$s/munge" "$s/state" "$s/spool/n1" "$s/spool/n2" "$s/spool/n3" "$s/log"
  chmod 0700 "$s/munge"
  # munge refuses a key that others can read and directories others can write.
  dd if=/dev/urandom of="$s/munge/munge.key" bs=1024 count=1 status=none
  chmod 0600 "$s/munge/munge.key"
  munged --force --key-file="$s/munge/munge.key" --socket="$s/munge/munge.sock" \
    --pid-file="$s/munged.pid" --log-file="$s/log/munged.log" --seed-file="$s/munge/seed"
  local me; me="$(id -un)"
  cat > "$s/slurm.conf" <<CFG
ClusterName=meshwork-test
SlurmctldHost=$(hostname -s)($a0)
SlurmUser=$me
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$s/munge/munge.sock
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool/%n
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd-%n.pid
SlurmctldLogFile=$s/log/slurmctld.log
SlurmdLogFile=$s/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=600
OverTimeLimit=0
EnforcePartLimits=ALL
KillWait=2
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
SchedulerType=sched/backfill
NodeName=n1 NodeAddr=$a0 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n2 NodeAddr=$a1 CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n3 NodeAddr=$a1 Port=6819 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=10:00 State=UP OverSubscribe=FORCE:4 DenyAccounts=bogus
PartitionName=tiny Nodes=n1 MaxTime=5:00 State=UP OverSubscribe=FORCE:4
PartitionName=bare Nodes=n3 MaxTime=10:00 State=UP OverSubscribe=FORCE:4
CFG
  export SLURM_CONF="$s/slurm.conf"
  # nsenter, not `ip netns exec`: that remounts /sys, and slurmd wants /sys/fs/cgroup to exist
  # even with the cgroup plugins off.
  nsenter --net=/run/netns/"$ns0" slurmctld -c -i >/dev/null 2>&1
  nsenter --net=/run/netns/"$ns0" slurmd -N n1 </dev/null >/dev/null 2>&1
  nsenter --net=/run/netns/"$ns1" slurmd -N n2 </dev/null >/dev/null 2>&1
  start_bare_slurmd "$ns1"
  # Ready when every node is idle (at most ~20 s; it takes about a second).
  for _ in $(seq 200); do
    if [ "$(timeout 5 nsenter --net=/run/netns/"$ns0" sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | grep -c ' idle')" -ge 3 ]; then
      nsenter --net=/run/netns/"$ns0" sinfo -N
      return 0
    fi
    sleep 0.1
  done
  echo "slurm: nodes did not come up (see $s/log/)" >&2
  timeout 5 nsenter --net=/run/netns/"$ns0" sinfo -N >&2 || true
  exit 1
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down CLUSTER_STATE_DIR" >&2; exit 2 ;;
esac
