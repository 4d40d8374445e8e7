#!/usr/bin/env bash
# The mesh view with every rank's live state (a simulated hang: all ranks but one wait in the
# world's all-reduce, the one is stopped) at 8 x 8, 1,024 x 8 and 8,192 x 8: core's diagnosis
# (goal <= 1 s at 1,024 x 8), the per-rank states, and the view's redraw with them (goal
# <= 100 ms p95 at 1,024 x 8), whole, culprit hovered and zoomed in. Prints a table, writes
# bench/results/mesh-redraw.json. Runs on the offscreen platform (MESHWORK_BENCH_XVFB=1:
# xvfb-run). --no-8192 skips 8192 x 8.
set -euo pipefail
source "$(dirname "$0")/common.sh"
"$MESHWORK_ROOT/scripts/build" --target mesh_redraw_bench >/dev/null
bench_qt mesh_redraw_bench bench/results/mesh-redraw.json "$@"
