#!/usr/bin/env bash
# Recompute benchmark: every preset on one model (a few seconds per step on 2
# cores): predicted and measured peak activation memory, ms/step, overhead vs
# none, recompute FLOP fraction. Writes bench/recompute.json.
# Usage: scripts/bench_recompute.sh [STEPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
"$root/scripts/setup.sh" >/dev/null
configure_and_build "$root/build/release" bench_recompute >/dev/null
cd "$root"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$root/build/release/bench/bench_recompute" bench/recompute.json "${1:-2}"
