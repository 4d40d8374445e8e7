#!/usr/bin/env bash
# The workbench's charts against a big store (issue 8): 8 runs x 1M steps (1M points per series)
# in the store; time to open Compare on all 8, and time per redraw of a live run's page while
# 2,000 points/s per series stream into it. Prints a table, writes bench/results/gui.json.
# The store is built once into ~/.cache/meshwork/bench/gui-v<schema>-<runs>x<steps>.db (several
# minutes, a few GB; built under a temporary name, renamed when complete); pass
# --steps N for a smaller one. Runs on the offscreen platform (MESHWORK_BENCH_XVFB=1: xvfb-run).
set -euo pipefail
source "$(dirname "$0")/common.sh"
"$MESHWORK_ROOT/scripts/build" --target gui_bench >/dev/null
bench_qt gui_bench bench/results/gui.json "$@"
