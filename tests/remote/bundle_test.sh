#!/usr/bin/env bash
# The CPU runtime bundle is self-contained:
#   tests/remote/bundle_test.sh BUNDLE.tar.zst SOURCE_DIR BUILD_DIR
# unpacks it into a temporary directory and, in a private mount namespace where the workbench's
# torch environment, the checkout and the build tree are empty directories (as on a bare node),
#   - ldd resolves every library, none from outside the bundle but the base system's;
#   - `meshtrain --help` works and a 2-step, 2-rank run on the tiny model succeeds;
#   - every library the bundle carries is loaded by that run (LD_DEBUG=libs): nothing extra;
#   - the unpacked files match the manifest's sha256 list.
# Needs root (unshare -m), as the cluster tests do.
set -euo pipefail
bundle="$1"; src="$2"; build="$3"
venv="${MESHWORK_VENV:-$HOME/.cache/meshwork/torch-2.15.0}"
[ "$(id -u)" = 0 ] || { echo "bundle_test: needs root (unshare -m)" >&2; exit 1; }
[ -f "$bundle" ] || { echo "bundle_test: $bundle missing (build the bundle-cpu target)" >&2; exit 1; }
work="$(mktemp -d /tmp/meshwork-bundle-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
zstd -dcq < "$bundle" | tar -xf - -C "$work"
(cd "$work" && python3 - <<'PY'
import hashlib, json
m = json.load(open("manifest.json"))
assert m["flavour"] == "cpu", m["flavour"]
for f in m["files"]:
    h = hashlib.sha256(open(f["path"], "rb").read()).hexdigest()
    assert h == f["sha256"], f"{f['path']}: sha256 {h} != manifest {f['sha256']}"
print(f"manifest: {len(m['files'])} files match")
PY
)

unshare -m --propagation private bash -s "$work" "$venv" "$src" "$build" <<'SH'
set -euo pipefail
work="$1"; venv="$2"; src="$3"; build="$4"
for p in "$venv" "$src" "$build"; do
  [ -d "$p" ] && mount -t tmpfs -o size=1m meshwork-hidden "$p"
done
[ -z "$(ls -A "$venv")" ] || { echo "FAIL: the torch environment is still visible" >&2; exit 1; }
cd "$work"
env -u LD_LIBRARY_PATH ldd ./bin/meshtrain > ldd.txt
if grep -q "not found" ldd.txt; then echo "FAIL: unresolved libraries:" >&2; grep "not found" ldd.txt >&2; exit 1; fi
# Everything resolves inside the bundle or to the base system (/lib, /usr/lib).
outside=""
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  real="$(readlink -f "$path")"
  case "$real" in "$work"/lib/*|/lib/*|/usr/lib/*|/lib64/*) ;; *) outside="$outside $name=>$real" ;; esac
done < ldd.txt
[ -z "$outside" ] || { echo "FAIL: libraries from outside the bundle:$outside" >&2; exit 1; }
# Captured first: `| grep -q` under pipefail fails whenever grep exits before meshtrain's last
# write (SIGPIPE), which depends on timing.
help_text="$(./bin/meshtrain --help)" || { echo "FAIL: meshtrain --help exited $?" >&2; exit 1; }
grep -q -- --nproc-per-node <<< "$help_text" || { echo "FAIL: meshtrain --help lacks --nproc-per-node" >&2; exit 1; }
mkdir run
LD_DEBUG=libs LD_DEBUG_OUTPUT="$work/lddebug" ./bin/meshtrain --model tiny --steps 2 --seq-len 32 --global-batch 2 \
  --dp-shard 2 --nproc-per-node 2 --run-dir run > run.out 2>&1 || { echo "FAIL: 2-step run" >&2; tail -20 run.out >&2; exit 1; }
for r in 0 1; do  # both ranks ran both steps (0 and 1) and ended ok
  grep -q '"step":1,' "run/metrics-rank$r.jsonl" && grep -q '"status":"ok".*"type":"end"' "run/metrics-rank$r.jsonl" || {
    echo "FAIL: rank $r did not run 2 steps and end ok" >&2; exit 1; }
done
# Exactly what it loads: every bundled library was opened by the run.
for f in lib/*; do
  name="$(basename "$f")"
  grep -qh "calling init: .*/$name\$" lddebug.* || { echo "FAIL: $name is bundled but never loaded" >&2; exit 1; }
done
echo "ok: $(ls lib | wc -l) libraries, all loaded; 2-step run without the torch environment"
SH
