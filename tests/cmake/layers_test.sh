#!/usr/bin/env bash
# The layer check of the build (cmake/CheckLayers.cmake): the tree as it is passes, and an include
# against the layer order planted in a copy of core/ is refused, naming the file, the header and
# what the layer may include.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
check() {  # check LAYER MAY MAY_NOT FILE...
  local layer="$1" may="$2" may_not="$3"; shift 3
  local files; files="$(IFS='|'; echo "$*")"
  cmake -DROOT="$root" -DLAYER="$layer" -DMAY_INCLUDE="$may" -DMAY_NOT_INCLUDE="$may_not" \
        -DFILES="$files" -P "$root/cmake/CheckLayers.cmake"
}
# Today's core and ui pass.
check core "core/" "core/store/|core/data/|core/interop/" "$root"/core/*.cpp "$root"/core/*.h
check ui "core/|remote/|ui/" "" "$root"/ui/*.cpp "$root"/ui/*.h
# core including the workbench, and core including the store: both refused.
cp "$root/core/mesh.cpp" "$tmp/mesh.cpp"
printf '#include "ui/main_window.h"\n' >> "$tmp/mesh.cpp"
printf '#include "core/mesh.h"\n  #  include "core/store/run_store.h"  // indented\n#include <vector>\n' > "$tmp/planner.h"
if out="$(check core "core/" "core/store/|core/data/|core/interop/" "$tmp/mesh.cpp" "$tmp/planner.h" 2>&1)"; then
  echo "FAIL: an upward include was accepted"; exit 1
fi
grep -q 'mesh.cpp: #include "ui/main_window.h": core may include core/ (not core/store/, core/data/, core/interop/)' <<<"$out" \
  || { echo "FAIL: the message does not name the file, header and rule:"; echo "$out"; exit 1; }
grep -q 'planner.h: #include "core/store/run_store.h"' <<<"$out" \
  || { echo "FAIL: the store include was not named:"; echo "$out"; exit 1; }
if grep -q 'core/mesh.h"' <<<"$out"; then echo "FAIL: an allowed include was refused:"; echo "$out"; exit 1; fi
echo "layers: the tree passes; planted upward includes refused with their file and rule"
