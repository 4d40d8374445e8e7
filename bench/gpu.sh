#!/usr/bin/env bash
# meshtrain on one CUDA GPU (docs/trainer.md, "On a GPU"): builds meshtrain against the machine's
# own torch wheel (core and trainer only: no Qt, SQLite or tests needed), then runs
# bench/gpu_bench.py: correctness against the CPU and transformers, speed and memory against
# PyTorch FSDP2 eager and compiled. Results: bench/results/gpu-<device>.json (h100, h200, ...).
#
# Usage: bench/gpu.sh [--build-dir DIR] [--meshtrain BIN] [--out FILE] [-- gpu_bench.py flags]
#   --build-dir DIR  where to build (default build-gpu; reused: a second run only relinks)
#   --meshtrain BIN  a meshtrain already built against this torch version: no build
#   PYTHON           the Python whose torch to build against and compare with (default python3)
# Needs: a C++20 compiler, CMake >= 3.25, ninja, nvcc (the torch wheel's CMake looks for the CUDA
# toolkit), the nlohmann/json headers (Debian: nlohmann-json3-dev; else MESHWORK_JSON_INCLUDE_DIR
# naming the folder that holds nlohmann/json.hpp, or a copy in .gpu-carry/include, a folder git
# ignores for carrying files to such a machine), and in PYTHON: torch with CUDA, numpy,
# transformers (the checkpoint stage).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
BUILD="$ROOT/build-gpu"
BIN=""
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --meshtrain) BIN="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "bench/gpu.sh: unknown argument '$1' (--build-dir DIR, --meshtrain BIN, --out FILE, -- bench flags)" >&2; exit 2 ;;
  esac
done

TORCH_DIR="$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
# "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA A100-SXM4-80GB" -> a100.
SLUG="$(echo "$GPU_NAME" | sed -E 's/^NVIDIA //; s/[ -].*//' | tr 'A-Z' 'a-z')"
[ -n "$SLUG" ] || SLUG=gpu
OUT="${OUT:-$ROOT/bench/results/gpu-$SLUG.json}"
echo "bench/gpu.sh: $GPU_NAME, torch $("$PY" -c 'import torch; print(torch.__version__)') at $TORCH_DIR"

build() {
  JSON_FLAG=()
  if [ -n "${MESHWORK_JSON_INCLUDE_DIR:-}" ]; then
    JSON_FLAG=("-DMESHWORK_JSON_INCLUDE_DIR=$MESHWORK_JSON_INCLUDE_DIR")
  elif [ ! -f /usr/include/nlohmann/json.hpp ] && [ -f "$ROOT/.gpu-carry/include/nlohmann/json.hpp" ]; then
    JSON_FLAG=("-DMESHWORK_JSON_INCLUDE_DIR=$ROOT/.gpu-carry/include")
  fi
  GEN=()
  command -v ninja >/dev/null && GEN=(-G Ninja)
  # This GPU's architecture only: a build for the machine it runs on.
  ARCH="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)"
  local start log="$BUILD.log"
  start=$(date +%s)
  if ! TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$ARCH}" cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" \
      -DMESHWORK_TRAINER_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$TORCH_DIR/share/cmake" "${JSON_FLAG[@]}" >"$log" 2>&1 ||
     ! cmake --build "$BUILD" --target meshtrain -j "$(nproc)" >>"$log" 2>&1; then
    tail -60 "$log"
    echo "bench/gpu.sh: the build failed (log: $log)" >&2
    exit 1
  fi
  echo "bench/gpu.sh: built meshtrain in $(( $(date +%s) - start )) s"
  BIN="$BUILD/bin/meshtrain"
}

if [ -n "$BIN" ]; then
  # A binary built elsewhere against the same torch version: its RPATH may name folders that do
  # not exist here, so the loader is pointed at this torch wheel and its CUDA libraries.
  NV_LIBS="$(ls -d "$TORCH_DIR"/../nvidia/*/lib 2>/dev/null | tr '\n' ':')"
  if ! LD_LIBRARY_PATH="$TORCH_DIR/lib:$NV_LIBS${LD_LIBRARY_PATH:-}" "$BIN" --help >/dev/null 2>/tmp/meshtrain-gpu-bin.err; then
    echo "bench/gpu.sh: $BIN does not run here ($(head -c 300 /tmp/meshtrain-gpu-bin.err)); building" >&2
    build
  else
    export LD_LIBRARY_PATH="$TORCH_DIR/lib:$NV_LIBS${LD_LIBRARY_PATH:-}"
  fi
else
  build
fi
exec "$PY" "$ROOT/bench/gpu_bench.py" --meshtrain "$BIN" --out "$OUT" "$@"
