#!/usr/bin/env bash
# Fuzzes every parser of outside input (tests/fuzz/*_fuzz.cpp) with libFuzzer + ASan + UBSan
# (clang-14 from Debian) and prints, per target: executions, exec/s, coverage (edges), corpus
# size, crashes and timeouts. The corpus grows in build-fuzz/corpus/<target> (seeded from
# tests/fuzz/seeds/<target>); every crash or hang is copied to tests/fuzz/regressions/<target>/,
# where the normal build's fuzz_replay_<target> test replays it forever.
#   bench/fuzz.sh [--minutes N | --seconds N] [--runs N] [--targets a,b] [--jobs J] [--seed S] [--fresh]
# --runs N stops a target after N executions (e.g. --runs 10000000), whichever comes first.
# --seed S with --fresh (start from tests/fuzz/seeds only, in a throw-away corpus) makes a run
# repeatable: the same inputs in the same order on every machine. CI's ctest (fuzz_briefly) runs
# that way, so it never passes on one run and fails on the next; exploring new inputs is this
# script's job without those flags.
# Results: bench/results/fuzz.json (skipped with --no-json, as the ctest run does).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=60; runs=-1; targets=""; json=1; jobs=1; seed=0; fresh=0
build="${MESHWORK_FUZZ_BUILD_DIR:-$root/build-fuzz}"
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) seconds=$(( $2 * 60 )); shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --targets) targets="${2//,/ }"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --no-json) json=0; shift ;;
    --seed) seed="$2"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    *) echo "bench/fuzz.sh: $1: not an option (--minutes N, --seconds N, --runs N, --targets a,b, --jobs J, --seed S, --fresh, --no-json)" >&2; exit 2 ;;
  esac
done
# The commit the binaries are built from (the rows say what was fuzzed, not what HEAD is later).
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
command -v clang++-14 >/dev/null || { echo "bench/fuzz.sh: clang++-14 missing: run scripts/bootstrap" >&2; exit 1; }
# The project's own build with MESHWORK_FUZZ=ON (no trainer, no widgets): the targets and the
# sources they parse with, instrumented. scripts/test's build-sanitize-unit/ is one (at -O0,
# MESHWORK_FUZZ_BUILD_DIR points here from its fuzz_briefly test); this one is at -O1 for speed.
if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^CMAKE_PROJECT_NAME:STATIC=meshwork$' "$build/CMakeCache.txt"; then
  # A folder from the earlier standalone fuzz project (tests/fuzz alone): configure it anew.
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles" "$build/build.ninja"
fi
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMESHWORK_FUZZ=ON -DMESHWORK_SANITIZE=address,undefined -DMESHWORK_SANITIZE_OPT=-O1 \
    -DMESHWORK_WITH_TRAINER=OFF -DMESHWORK_WITH_GUI=OFF >"$build/configure.log" 2>&1 ||
    { tail -20 "$build/configure.log" >&2; echo "bench/fuzz.sh: configuring $build failed (log: $build/configure.log)" >&2; exit 1; }
fi
if ! cmake --build "$build" --target fuzz_targets >"$build/build.log" 2>&1; then
  tail -40 "$build/build.log" >&2
  echo "bench/fuzz.sh: the clang-14 fuzz build failed (log: $build/build.log)" >&2
  exit 1
fi
[ -n "$targets" ] || targets="$(sed -n 's/^set(MESHWORK_FUZZ_TARGETS \(.*\))$/\1/p' "$root/tests/fuzz/CMakeLists.txt")"
# No target found would print an empty table and pass: a test that cannot fail.
[ -n "${targets// /}" ] || { echo "bench/fuzz.sh: no fuzz targets (set(MESHWORK_FUZZ_TARGETS ...) on one line in tests/fuzz/CMakeLists.txt)" >&2; exit 1; }

rows=()
failed=0
printf '%-14s %12s %9s %7s %7s %8s %9s\n' target executions exec/s cov corpus crashes timeouts
for t in $targets; do
  corpus="$build/corpus/$t"; artifacts="$build/artifacts/$t/"
  inputs=("$corpus" "$root/tests/fuzz/seeds/$t")
  if [ "$fresh" = 1 ]; then
    # libFuzzer orders its starting inputs by size only, ties in directory order, which on ext4
    # depends on a per-filesystem hash seed: the seeds are copied in name order into a tmpfs
    # directory (whose order is the copy order), so every machine starts alike.
    scratch="$(mktemp -d /dev/shm/meshwork-fuzz.XXXXXX 2>/dev/null || mktemp -d)"
    corpus="$scratch/$t"
    mkdir -p "$corpus"
    while IFS= read -r f; do cp "$root/tests/fuzz/seeds/$t/$f" "$corpus/$f"; done \
      < <(ls "$root/tests/fuzz/seeds/$t" | LC_ALL=C sort)
    inputs=("$corpus")
  fi
  mkdir -p "$corpus" "$artifacts"
  log="$build/$t.log"
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb keeps a leak from taking the box.
  parallel=()
  [ "$jobs" -gt 1 ] && parallel=(-fork="$jobs")
  set +e
  # Run inside the build folder: libFuzzer drops its helper logs into the working directory.
  (cd "$build" && "$build/bin/${t}_fuzz" -max_total_time="$seconds" -runs="$runs" -timeout=10 \
    -rss_limit_mb=2048 -seed="$seed" -print_final_stats=1 -artifact_prefix="$artifacts" "${parallel[@]}" \
    "${inputs[@]}") >"$log" 2>&1
  set -e
  # A target that died before libFuzzer's first report has none of these lines: 0, not an exit.
  execs=$( (grep -o 'stat::number_of_executed_units: [0-9]*' "$log" || true) | awk '{s += $2} END {print s + 0}')
  rate=$( (grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" || true) | awk '{s += $2} END {print s + 0}')
  cov=$( (grep -o 'cov: [0-9]*' "$log" || true) | tail -1 | awk '{print $2 + 0}')
  crashes=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' \) | wc -l)
  hangs=$(find "$artifacts" -type f \( -name 'timeout-*' -o -name 'slow-unit-*' \) | wc -l)
  size=$(find "$corpus" -type f | wc -l)
  [ "$fresh" = 1 ] && rm -rf "$scratch"
  if [ $((crashes + hangs)) -gt 0 ]; then
    failed=1
    mkdir -p "$root/tests/fuzz/regressions/$t"
    cp "$artifacts"/* "$root/tests/fuzz/regressions/$t/"
    echo "  $t: $((crashes + hangs)) input(s) copied to tests/fuzz/regressions/$t/ (log: $log)" >&2
    # The report and the input itself, so a crash on a machine we cannot reach (CI) can be
    # replayed here: base64 -d the line into a file and run build/bin/<target>_replay on it.
    grep -E -A30 '^==[0-9]+==ERROR|runtime error|^SUMMARY|deadly signal|timeout after' "$log" | head -60 >&2 || true
    for f in "$artifacts"/*; do
      [ "$(stat -c %s "$f")" -le 8192 ] && echo "  input $(basename "$f") (base64): $(base64 -w0 "$f")" >&2
    done
    rm -f "$artifacts"/*
  fi
  printf '%-14s %12s %9s %7s %7s %8s %9s\n' "$t" "$execs" "$rate" "${cov:-0}" "$size" "$crashes" "$hangs"
  rows+=("{\"target\":\"$t\",\"executions\":$execs,\"exec_per_s\":$rate,\"coverage\":${cov:-0},\"corpus\":$size,\"crashes\":$crashes,\"timeouts\":$hangs,\"seconds\":$seconds}")
done
if [ "$json" = 1 ]; then
  # Rows of the targets run now replace theirs; the other targets' rows stay (a long campaign runs
  # a few targets at a time). Each row carries its date and the commit it fuzzed.
  mkdir -p "$root/bench/results"
  (IFS=$'\n'; echo "${rows[*]}") | python3 -c '
import datetime, json, os, sys
path, clang, commit = sys.argv[1], sys.argv[2], sys.argv[3]
old = json.load(open(path)) if os.path.exists(path) else {}
rows = {r["target"]: r for r in old.get("targets", [])}
order = [r["target"] for r in old.get("targets", [])]
for line in sys.stdin.read().splitlines():
    if not line.strip():
        continue
    r = json.loads(line)
    r["date"] = datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%MZ")
    r["commit"] = commit
    if r["target"] not in rows:
        order.append(r["target"])
    rows[r["target"]] = r
json.dump({"clang": clang, "targets": [rows[t] for t in order]}, open(path, "w"), indent=1)
' "$root/bench/results/fuzz.json" "$(clang++-14 --version | head -1)" "$commit"
  echo "bench/results/fuzz.json updated ($targets)"
fi
exit "$failed"
