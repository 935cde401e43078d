#!/usr/bin/env bash
# Long-sequence benchmark: under one activation budget (MiB, default 512), the longest sequence
# each attention backend (unfused, flash) and recompute preset trains, measured == predicted,
# the same for the Llama block of that shape under flash (selective core_attn, full), and flash
# against unfused tokens/s at 256, 1024 and 4096. Writes bench/long_seq.json.
# Usage: scripts/bench_long_seq.sh [BUDGET_MIB]   (several minutes on 2 cores)
set -euo pipefail
source "$(dirname "$0")/common.sh"
run_benchmark bench_long_seq bench/long_seq.json "${1:-512}"
