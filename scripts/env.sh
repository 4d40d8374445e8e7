# Shared settings of the scripts (sourced, not run).
MESHWORK_TORCH_VERSION=2.15.0
MESHWORK_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/meshwork"
MESHWORK_VENV="$MESHWORK_CACHE/torch-$MESHWORK_TORCH_VERSION"
MESHWORK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MESHWORK_BUILD_DIR="${MESHWORK_BUILD_DIR:-$MESHWORK_ROOT/build}"
export CCACHE_DIR="${CCACHE_DIR:-$MESHWORK_CACHE/ccache}"
export CCACHE_BASEDIR="$MESHWORK_ROOT"
# Builds in other folders (build-*, fresh clones) reuse each other's objects: debug info keeps
# the first builder's paths, which nothing here relies on.
export CCACHE_NOHASHDIR=1
# Not include_file_mtime/ctime: ccache then refuses to store an object whose headers changed while
# it compiled. With them, a header saved mid-build stored the old object under the new header's
# hash, and every later build of that content linked it: two layouts of one struct in one
# program (a crash in a destructor far from the edit).
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
