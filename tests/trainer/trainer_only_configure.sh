#!/usr/bin/env bash
# The trainer-only configuration that bench/gpu.sh builds on a GPU machine (no Qt, SQLite or
# GoogleTest there): configures the tree with -DMESHWORK_TRAINER_ONLY=ON and nlohmann/json as a
# bare include folder (a copy, not the installed CMake package), then checks that it generates
# meshtrain and that it looked for none of Qt, SQLite and GoogleTest.
# Usage: trainer_only_configure.sh SOURCE_DIR TORCH_CMAKE_PREFIX JSON_INCLUDE_DIR
set -euo pipefail
src="$1" torch_prefix="$2" json_include="$3"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/json"
cp -r "$json_include/nlohmann" "$dir/json/"
if ! cmake -S "$src" -B "$dir/build" -G Ninja -DMESHWORK_TRAINER_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DMESHWORK_JSON_INCLUDE_DIR="$dir/json" >"$dir/configure.log" 2>&1; then
  cat "$dir/configure.log"
  echo "FAIL: the trainer-only configuration did not configure" >&2
  exit 1
fi
grep -q "^build bin/meshtrain:" "$dir/build/build.ninja" || { echo "FAIL: no meshtrain target" >&2; exit 1; }
for pkg in Qt6_DIR SQLite3_INCLUDE_DIR GTest_DIR nlohmann_json_DIR; do
  if grep -q "^$pkg:" "$dir/build/CMakeCache.txt" && ! grep -q "^$pkg:.*-NOTFOUND" "$dir/build/CMakeCache.txt"; then
    echo "FAIL: the trainer-only configuration looked for $pkg: $(grep "^$pkg:" "$dir/build/CMakeCache.txt")" >&2
    exit 1
  fi
done
for target in meshwork core_tests; do
  if grep -q "^build bin/$target:" "$dir/build/build.ninja"; then
    echo "FAIL: the trainer-only configuration builds $target" >&2
    exit 1
  fi
done
echo "ok: meshtrain alone, nlohmann/json from $dir/json, no Qt, SQLite or GoogleTest"
