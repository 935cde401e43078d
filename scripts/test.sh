#!/usr/bin/env bash
# Sets up, builds from scratch (build/test) and runs the whole test suite with ctest.
# Extra arguments go to ctest (e.g. -L unit, -R Recompute).
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
# Tests run side by side (ctest -j), so their OpenMP workers sleep between regions.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$root/scripts/setup.sh"
rm -rf "$root/build/test"
configure_and_build "$root/build/test"
cd "$root/build/test"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
