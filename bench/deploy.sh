#!/usr/bin/env bash
# Runtime bundle deploy rate against plain scp of the same file over the same link, and the
# bundle sizes per flavour (docs/remote.md "Runtime bundle", README "Measured").
#
#   bench/deploy.sh [REPEATS=3]       (root: it starts a 2-node namespace cluster of its own)
#
# Per repeat, onto bare1 (node 1's bare sshd: its own bundle directory, emptied first):
#   meshwork deploy --bundle B --hosts bare1 --json   -> upload seconds (first byte to last) and
#                                                        the whole deploy (+ sha256 check, unpack)
#   scp B bare1:...                                     -> the same bytes, OpenSSH's client (its
#                                                        connection time, measured by scp's of
#                                                        a 1-byte file, taken off)
# Prints a table; writes bench/results/deploy.json. Needs build/bin/meshwork and the cpu bundle
# (scripts/build --target meshwork bundle-cpu); the cuda bundle's size is reported when
# build/bundles/meshtrain-cuda.json exists (scripts/build --target bundle-cuda).
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
repeats="${1:-3}"
build="$MESHWORK_BUILD_DIR"
bundle="$build/bundles/meshtrain-cpu.tar.zst"
[ -f "$bundle" ] || { echo "deploy bench: $bundle missing (scripts/build --target bundle-cpu)" >&2; exit 1; }
state="$(mktemp -d /tmp/meshwork-deploy-bench.XXXXXX)"
cleanup() { "$MESHWORK_ROOT/tests/cluster/cluster.sh" down "$state" >/dev/null 2>&1 || true; rm -rf "$state"; }
trap cleanup EXIT
MESHWORK_CLUSTER_BARE="1" "$MESHWORK_ROOT/tests/cluster/cluster.sh" up "$state" 2 >/dev/null
ssh_opts=(-F "$state/ssh_config" -o UserKnownHostsFile="$state/known_hosts" -o StrictHostKeyChecking=accept-new -o BatchMode=yes)
mw_opts=(--ssh-config "$state/ssh_config" --known-hosts "$state/known_hosts" --identity "$state/id_ed25519" --accept-new-host-keys)
size="$(stat -L -c %s "$bundle")"
printf x > "$state/one-byte"
ssh "${ssh_opts[@]}" bare1 true

rows=()
for r in $(seq "$repeats"); do
  ssh "${ssh_opts[@]}" bare1 'rm -rf ~/.cache/meshwork/bundles/*'
  json="$("$build/bin/meshwork" deploy --bundle "$bundle" --hosts bare1 --json "${mw_opts[@]}" 2>/dev/null)"
  up="$(printf '%s' "$json" | python3 -c 'import json,sys; n=json.load(sys.stdin)["nodes"][0]; print(n["upload_seconds"])')"
  all="$(printf '%s' "$json" | python3 -c 'import json,sys; n=json.load(sys.stdin)["nodes"][0]; print(n["seconds"])')"
  bytes="$(printf '%s' "$json" | python3 -c 'import json,sys; n=json.load(sys.stdin)["nodes"][0]; print(n["bytes_uploaded"])')"
  [ "$bytes" = "$size" ] || { echo "deploy bench: uploaded $bytes bytes, expected $size" >&2; exit 1; }
  # scp's time includes its connection (handshake, auth, the sftp subsystem), which meshwork's
  # upload time does not: the median of three scp's of a 1-byte file just before is taken off.
  small=()
  for _ in 1 2 3; do
    t0="$(date +%s.%N)"
    scp -q "${ssh_opts[@]}" "$state/one-byte" bare1:.cache/meshwork/bundles/scp-one
    t1="$(date +%s.%N)"
    small+=("$(python3 -c "print($t1 - $t0)")")
  done
  overhead="$(printf '%s\n' "${small[@]}" | sort -g | sed -n 2p)"
  t0="$(date +%s.%N)"
  scp -q "${ssh_opts[@]}" "$bundle" bare1:.cache/meshwork/bundles/scp-copy
  t1="$(date +%s.%N)"
  scp_s="$(python3 -c "print(max(0.001, ($t1 - $t0) - $overhead))")"
  rows+=("$up $all $scp_s")
done
ssh "${ssh_opts[@]}" bare1 'rm -rf ~/.cache/meshwork/bundles/*'

mkdir -p "$MESHWORK_ROOT/bench/results"
python3 - "$size" "$build/bundles" "$MESHWORK_ROOT/bench/results/deploy.json" "${rows[@]}" <<'PY'
import json, os, statistics, sys, datetime, subprocess
size = int(sys.argv[1]); bundles = sys.argv[2]; out = sys.argv[3]
rows = [tuple(float(x) for x in r.split()) for r in sys.argv[4:]]
mib = size / 2**20
print(f"bundle cpu: {mib:.1f} MiB over the namespace link (veth + bridge), {len(rows)} repeats")
print(f"{'repeat':>6} {'meshwork upload':>16} {'deploy (+check, unpack)':>24} {'scp':>12} {'upload/scp':>11}")
res = []
for i, (up, all_, scp) in enumerate(rows, 1):
    print(f"{i:>6} {mib/up:>11.1f} MiB/s {mib/all_:>19.1f} MiB/s {mib/scp:>7.1f} MiB/s {scp/up:>10.2f}x")
    res.append({"upload_s": up, "deploy_s": all_, "scp_s": scp})
up = statistics.median(r[0] for r in rows); all_ = statistics.median(r[1] for r in rows)
scp = statistics.median(r[2] for r in rows)
# The ratio per repeat (the two transfers ran back to back, under the same load), then its median.
ratio = statistics.median(r[2] / r[0] for r in rows)
ratio_all = statistics.median(r[2] / r[1] for r in rows)
print(f"{'median':>6} {mib/up:>11.1f} MiB/s {mib/all_:>19.1f} MiB/s {mib/scp:>7.1f} MiB/s {ratio:>10.2f}x  (target >= 0.8x)")
print(f"whole deploy (upload + sha256 check + unpack of the archive) vs scp (upload only): {ratio_all:.2f}x")
sizes = {}
for flavour in ("cpu", "cuda"):
    p = os.path.join(bundles, f"meshtrain-{flavour}.json")
    if os.path.exists(p):
        m = json.load(open(p))
        sizes[flavour] = {"archive": m["archive"], "archive_bytes": m["archive_size"],
                          "unpacked_bytes": m.get("unpacked_size"), "libraries": sum(1 for f in m["files"] if f["path"].startswith("lib/"))}
        print(f"bundle {flavour}: {m['archive_size']/2**20:.0f} MiB compressed, "
              f"{m.get('unpacked_size', 0)/2**20:.0f} MiB unpacked, {sizes[flavour]['libraries']} libraries")
    else:
        print(f"bundle {flavour}: not built (scripts/build --target bundle-{flavour})")
load = os.getloadavg()[0]
json.dump({"date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z", "load_average": load,
           "bundle_bytes": size, "repeats": res,
           "median": {"upload_mib_s": mib/up, "deploy_mib_s": mib/all_, "scp_mib_s": mib/scp,
                      "ratio_upload_vs_scp": ratio, "ratio_deploy_vs_scp": ratio_all},
           "sizes": sizes}, open(out, "w"), indent=2)
print(f"load average {load:.1f}; wrote {out}")
PY
