#!/usr/bin/env bash
# Recompute benchmark: every preset on one model (a few seconds per step on 2
# cores): predicted and measured peak activation memory, ms/step, overhead vs
# none, recompute FLOP fraction. Writes bench/recompute.json.
# Usage: scripts/bench_recompute.sh [STEPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
run_benchmark bench_recompute bench/recompute.json "${1:-2}"
