#!/usr/bin/env bash
# The Cluster and mesh views at a thousand nodes (issue 26, part 2): adding 64 / 256 / 1,024 nodes
# from a hostfile to the Cluster view (goal <= 1 s at 1,024), and the mesh view's redraw at 8 x 8,
# 1024 x 8 (goal <= 100 ms) and 8192 x 8 GPUs in a 1500 x 920 window, whole and zoomed in. Prints
# goal vs measured with issue 26's numbers from before, writes bench/results/scale-views.json.
# Runs on the offscreen platform (MESHWORK_BENCH_XVFB=1: xvfb-run). --no-8192 skips 8192 x 8.
set -euo pipefail
source "$(dirname "$0")/common.sh"
"$MESHWORK_ROOT/scripts/build" --target scale_views_bench >/dev/null
bench_qt scale_views_bench bench/results/scale-views.json "$@"
