# The bench scripts' shared prologue (sourced, not run): the project's settings (scripts/env.sh)
# and the steps most of them take before and around measuring.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/env.sh"

# bench_build TARGET: builds one target into $MESHWORK_BUILD_DIR on 2 jobs, configuring the build
# folder first when there is none (then with the build's own output, which a first configure
# wants to show).
bench_build() {
  if [ ! -f "$MESHWORK_BUILD_DIR/build.ninja" ]; then
    "$MESHWORK_ROOT/scripts/build" --target "$1" -j 2
  else
    cmake --build "$MESHWORK_BUILD_DIR" --target "$1" -j 2 > /dev/null
  fi
}

# bench_workdir NAME: sets $work to a fresh folder under $TMPDIR (/tmp by default), removed when
# the script exits.
bench_workdir() {
  work="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
}

# bench_qt BINARY OUT_JSON [ARGS...]: runs a Qt benchmark from the source root on the offscreen
# platform (MESHWORK_BENCH_XVFB=1: under xvfb-run), with the load average before and after.
bench_qt() {
  local bin="$MESHWORK_BUILD_DIR/bin/$1" out="$2"
  shift 2
  cd "$MESHWORK_ROOT"
  mkdir -p bench/results
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
  if [ -n "${MESHWORK_BENCH_XVFB:-}" ]; then
    xvfb-run -a -s "-screen 0 1600x1000x24" "$bin" --out "$out" "$@"
  else
    QT_QPA_PLATFORM=offscreen "$bin" --out "$out" "$@"
  fi
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}
