#!/usr/bin/env bash
# Web view benchmark (docs/web.md, `meshwork serve`): 8 runs x 1M points served in-process on
# 127.0.0.1 and opened in a real headless Chromium (Debian `chromium`):
#   - compare page ready (window.meshwork.readyAt: navigation start to every chart drawn), cold
#     and warm, with the store's load_ms and a zoom re-query;
#   - live update latency: one step committed -> drawn on the run page (p50/p95);
#   - the decimated API's throughput under 50 keep-alive clients (bench/web_load.py, loopback
#     only, bounded to 10 s and 20,000 requests): requests/s, p50/p95.
# Targets (the issue): compare ready <= 1 s, live latency p95 <= 1 s, no API errors.
#
# Usage: bench/web.sh [extra web_bench flags, e.g. --loads 3 --clients 20]
# The store (~8M points) is built once and kept under ${MESHWORK_BENCH_DIR:-/tmp/meshwork-web-bench}.
# Prints a table; writes bench/results/web.json; exits 1 when a target is missed, 2 when it could
# not measure. Builds web_bench into $MESHWORK_BUILD_DIR.
set -euo pipefail
source "$(dirname "$0")/common.sh"
command -v python3 > /dev/null || { echo "web.sh: python3 is needed (bench/web_load.py)" >&2; exit 2; }
command -v "${MESHWORK_CHROMIUM:-chromium}" > /dev/null ||
  { echo "web.sh: Chromium is needed (apt-get install chromium, or set MESHWORK_CHROMIUM)" >&2; exit 2; }
bench_build web_bench
store="${MESHWORK_BENCH_DIR:-/tmp/meshwork-web-bench}"
bench_workdir meshwork-web-bench-run
rc=0
"$MESHWORK_BUILD_DIR/bin/web_bench" --store "$store" --json "$work/web.json" \
  --load-script "$MESHWORK_ROOT/bench/web_load.py" "$@" || rc=$?
# A missed target (1) is still a measurement worth keeping; a failure (2 or worse) wrote nothing.
if [ -f "$work/web.json" ] && [ "$rc" -le 1 ]; then
  mkdir -p "$MESHWORK_ROOT/bench/results"
  cp "$work/web.json" "$MESHWORK_ROOT/bench/results/web.json"
  echo "wrote bench/results/web.json"
fi
[ "$rc" -eq 0 ] || echo "web.sh: $([ "$rc" -eq 1 ] && echo 'a target was missed' || echo "web_bench failed ($rc)")" >&2
exit "$rc"
