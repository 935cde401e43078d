#!/usr/bin/env bash
# The bad-input tests under AddressSanitizer: configs, dataset indexes,
# checkpoints and safetensors files, including the fuzz-style mutations.
# Builds into build/asan (the test binaries only) and runs them.
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
# Tests run side by side (ctest -j), so their OpenMP workers sleep between regions.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$root/scripts/setup.sh"
build="$root/build/asan"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINER_SANITIZE=address \
  -DTRAINER_NATIVE=OFF -DTRAINER_CUDA=OFF >/dev/null
targets=(test_config test_data test_checkpoint test_export test_trainer)
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}" trainer
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
cd "$build"
status=0
"$build/tests/unit/config/test_config" --gtest_brief=1 || status=1
"$build/tests/unit/data/test_data" --gtest_brief=1 || status=1
"$build/tests/unit/checkpoint/test_checkpoint" --gtest_brief=1 || status=1
"$build/tests/unit/export/test_export" --gtest_brief=1 || status=1
"$build/tests/unit/trainer/test_trainer" --gtest_brief=1 \
  --gtest_filter='Fuzz.*:Resume.*:Cli.*:Nonfinite.*:EmulatedDevice.*' || status=1
exit $status
