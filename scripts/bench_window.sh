#!/usr/bin/env bash
# Sliding-window benchmark: a Llama-shaped model under flash attention with and without a
# sliding window (default 512 positions) at 1024, 2048, 4096 and 8192 positions, tokens/s side by side
# and each run's activation peak. Writes bench/window.json.
# Usage: scripts/bench_window.sh [WINDOW]   (a few minutes on 2 cores)
set -euo pipefail
source "$(dirname "$0")/common.sh"
run_benchmark bench_window bench/window.json "${1:-512}"
