#!/usr/bin/env bash
# CPU throughput benchmark: sgemm GFLOP/s and training tokens/s, GFLOP/s and the
# fraction of sgemm for two shapes, in one run. Writes bench/cpu.json.
# Usage: scripts/bench_cpu.sh [STEPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
run_benchmark bench_cpu bench/cpu.json "${1:-5}"
