#!/usr/bin/env bash
# CPU throughput benchmark: sgemm GFLOP/s and training tokens/s, GFLOP/s and the
# fraction of sgemm for two shapes, in one run. Writes bench/cpu.json.
# Usage: scripts/bench_cpu.sh [STEPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
"$root/scripts/setup.sh" >/dev/null
configure_and_build "$root/build/release" bench_cpu >/dev/null
cd "$root"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$root/build/release/bench/bench_cpu" bench/cpu.json "${1:-5}"
