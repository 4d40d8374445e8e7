#!/usr/bin/env bash
# `cmake --install` into a scratch prefix, then the installed programs run from there with no
# MESHWORK_RESOURCE_DIR: they find their resources beside themselves (bin/../share/meshwork),
# print the same version and commit, plan, train 2 ranks, and `meshwork launch --local --bundle
# cpu` deploys the installed runtime bundle and stores the run's metrics. The package itself, in a
# clean Debian root, is scripts/package-test (by hand: it downloads from the Debian archive).
#
#   tests/package/install_tree_test.sh BUILD_DIR
set -uo pipefail
BUILD="${1:?usage: install_tree_test.sh BUILD_DIR}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/meshwork-install-test.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PREFIX="$TMP/prefix"
failures=0
checks=0
check() {  # check WHAT COMMAND...: the command succeeds
  local what="$1"; shift
  checks=$((checks + 1))
  if ! "$@"; then echo "FAIL: $what"; failures=$((failures + 1)); fi
}
unset MESHWORK_RESOURCE_DIR MESHWORK_BUNDLE MESHWORK_DB
# The user's own store and caches are never touched.
export HOME="$TMP/home" XDG_DATA_HOME="$TMP/home/.local/share" XDG_CACHE_HOME="$TMP/home/.cache" XDG_CONFIG_HOME="$TMP/home/.config"
mkdir -p "$HOME"

cmake --install "$BUILD" --prefix "$PREFIX" > "$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; echo "FAIL: cmake --install"; exit 1; }
for f in bin/meshwork bin/meshtrain share/meshwork/models/tiny.json share/meshwork/data/kjv.bin \
         share/meshwork/python/meshwork_tokenize.py share/meshwork/bundles/meshtrain-cpu.tar.zst \
         share/meshwork/bundles/meshtrain-cpu.json share/applications/meshwork.desktop \
         share/icons/hicolor/scalable/apps/meshwork.svg share/doc/meshwork/README.md \
         share/doc/meshwork/docs/design.md share/doc/meshwork/copyright share/doc/meshwork/changelog.gz \
         share/man/man1/meshwork.1.gz share/man/man1/meshtrain.1.gz lib/meshwork/torch/libtorch_cpu.so; do
  check "installed: $f" test -e "$PREFIX/$f"
done
check "meshtrain's run path is its private lib/meshwork/torch" \
  bash -c "readelf -d '$PREFIX/bin/meshtrain' | grep -q 'RPATH.*\\\$ORIGIN/../lib/meshwork/torch'"
check "meshtrain loads LibTorch from lib/meshwork/torch" \
  bash -c "env -u LD_LIBRARY_PATH ldd '$PREFIX/bin/meshtrain' | grep -q '$PREFIX/bin/../lib/meshwork/torch/libtorch_cpu.so'"

mw_version="$("$PREFIX/bin/meshwork" --version)"
mt_version="$("$PREFIX/bin/meshtrain" --version)"
check "meshwork --version names the installed resources: $mw_version" grep -qx "resources: $PREFIX/share/meshwork" <<< "$mw_version"
check "meshwork --version names the installed docs" grep -qx "docs: $PREFIX/share/doc/meshwork" <<< "$mw_version"
check "the same version and commit from both ($mw_version / $mt_version)" \
  test "$(head -1 <<< "$mw_version" | cut -d' ' -f2-)" = "$(head -1 <<< "$mt_version" | cut -d' ' -f2-)"
check "the changelog names the same commit" \
  bash -c "zcat '$PREFIX/share/doc/meshwork/changelog.gz' | grep -qF \"$(sed -n 's/.*(commit \(.*\))/\1/p' <<< "$mw_version" | head -1)\""
check "the manual page is the --help text" bash -c "zcat '$PREFIX/share/man/man1/meshwork.1.gz' | grep -q 'meshwork plan'"

cd "$TMP"
check "meshwork plan from the install" \
  "$PREFIX/bin/meshwork" plan --model llama-3.2-1b --nodes 1 --gpus-per-node 4 --gpu-memory 80GiB --seq-len 1024 --micro-batch 1
check "meshtrain, 2 ranks, the installed corpus" \
  "$PREFIX/bin/meshtrain" --nproc-per-node 2 --dp-shard 2 --steps 3 --run-dir "$TMP/run"
check "meshwork launch --local with the installed meshtrain (its bundle goes)" \
  "$PREFIX/bin/meshwork" launch --local --nproc-per-node 2 --dp-shard 2 --steps 3 --bundle-root "$TMP/bundles"
check "meshwork launch --local --bundle cpu (the installed bundle)" \
  "$PREFIX/bin/meshwork" launch --local --nproc-per-node 2 --dp-shard 2 --steps 3 --bundle cpu --bundle-root "$TMP/bundles"
check "the bundle was unpacked from the installed archive" \
  bash -c "ls '$TMP'/bundles/*/bin/meshtrain > /dev/null"
"$PREFIX/bin/meshwork" runs list --json > "$TMP/runs.json"
check "the run is stored, ok, with its metrics: $(cat "$TMP/runs.json")" \
  bash -c "[ \$(grep -c '\"status\": \"ok\"' '$TMP/runs.json') = 2 ] && [ \$(grep -cE '\"points\": [1-9]' '$TMP/runs.json') = 2 ]"

echo "$((checks - failures)) of $checks checks passed"
[ "$failures" = 0 ]
