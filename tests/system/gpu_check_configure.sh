#!/usr/bin/env bash
# scripts/gpu_check.sh prepare's real configure (the CUDA build for sm_90, shared libraries), on
# this machine as a fresh one would run it: with no ccache installed it configures without a
# launcher, and with one on PATH (a pass-through stub) it uses it for C++ and CUDA. Stops after
# the configure (GPU_CHECK_CONFIGURE_ONLY=1): the build itself is what prepare then runs.
set -u
trainer=unused  # script_test_util.sh's synthetic_data is not used here
source "$(dirname "$0")/../script_test_util.sh"
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/gpu_check.sh"

# configure NAME [PATH_PREFIX]: prepare's configure into $dir/NAME; fails the test unless it
# succeeds and names the GPU test binaries.
configure() {
  env PATH="${2:+$2:}$PATH" GPU_CHECK_BUILD="$dir/$1" GPU_CHECK_CONFIGURE_ONLY=1 \
    bash "$script" prepare > "$dir/$1.log" 2>&1 || { cat "$dir/$1.log"; fail "$1: prepare failed"; }
  grep -q "^gpu_check: configured .* test_gpu_" "$dir/$1.log" ||
    { cat "$dir/$1.log"; fail "$1: no GPU test binaries named"; }
}
launcher() { sed -n "s/^CMAKE_$2_COMPILER_LAUNCHER:[A-Z]*=//p" "$dir/$1/CMakeCache.txt"; }

# Without ccache: no launcher (where this machine has one, the case is the stub's below).
if ! command -v ccache >/dev/null 2>&1; then
  configure plain
  [ -z "$(launcher plain CXX)" ] || fail "a launcher was set without ccache: $(launcher plain CXX)"
fi

# With ccache on PATH: both launchers are it.
mkdir -p "$dir/bin"
printf '#!/bin/sh\nexec "$@"\n' > "$dir/bin/ccache" && chmod +x "$dir/bin/ccache"
configure cached "$dir/bin"
for lang in CXX CUDA; do
  [ "$(launcher cached $lang)" = ccache ] || fail "the $lang launcher is '$(launcher cached $lang)'"
done
echo PASS
