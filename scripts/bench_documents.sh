#!/usr/bin/env bash
# Document-masking benchmark: a Llama-shaped model under flash attention at 4096 and 8192
# positions, each sequence packing documents of 2048, 512 or 128 tokens, with the mask
# (data.reset_attention_mask) and without it on the same tokens, tokens/s side by side and each
# run's activation peak. Writes bench/documents.json.
# Usage: scripts/bench_documents.sh   (several minutes on 2 cores)
set -euo pipefail
source "$(dirname "$0")/common.sh"
run_benchmark bench_documents bench/documents.json
