#!/usr/bin/env bash
# The Llama block on the CPU, the trainer against PyTorch eager (bench/peers/llama_torch.py: the
# same shape and math, fp32, AdamW, clipping) in one run: 4 layers, hidden 256, 8 heads sharing
# 2 key/value heads, SwiGLU 688, seq 128, micro batch 8, vocabulary 256. Each side's tokens/s is
# the median step after 2 warm-up steps; both use every core. Writes bench/llama_cpu.json.
# PyTorch comes from Debian's python3-torch (`apt-get install python3-torch`).
# Usage: scripts/bench_llama_cpu.sh [TIMED_STEPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
steps=${1:-8}
"$root/scripts/setup.sh" >/dev/null
configure_and_build "$root/build/release" trainer >/dev/null
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import torch" 2>/dev/null; then python=$candidate; break; fi
done
[ -n "$python" ] || { echo "bench_llama_cpu: no python3 with torch (apt-get install python3-torch)"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trainer="$root/build/release/trainer/trainer"
"$trainer" prepare-data --synthetic --num-tokens 200000 --output-prefix "$work/data" >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
cat > "$work/run.yaml" <<YAML
model: {architecture: llama, num_layers: 4, hidden_size: 256, num_attention_heads: 8,
        num_query_groups: 2, ffn_hidden_size: 688, seq_length: 128, vocab_size: 256}
train: {steps: $((steps + 2)), micro_batch_size: 8, global_batch_size: 8, log_interval: 1000}
optimizer: {lr: 1.0e-3, lr_warmup_steps: 0}
data: {path: $work/data, split: [1]}
output: {dir: $work/out, export: false}
YAML
"$trainer" train --config "$work/run.yaml" > "$work/ours.log"
"$python" "$root/bench/peers/llama_torch.py" "$work/torch.json" --layers 4 --hidden 256 \
  --heads 8 --groups 2 --ffn 688 --seq 128 --micro-batch 8 --vocab 256 --warmup-steps 2 \
  --timed-steps "$steps"
"$python" - "$work/out/metrics.jsonl" "$work/torch.json" "$root/bench/llama_cpu.json" <<'PY'
import json, statistics, sys
ours = [json.loads(l) for l in open(sys.argv[1])][2:]
torch = json.load(open(sys.argv[2]))
our_ms = statistics.median(m["step_ms"] for m in ours)
result = {"shape": "L4 H256 heads 8 kv 2 ffn 688 seq 128 micro 8 fp32",
          "ours": {"median_step_ms": our_ms, "tokens_per_s": 8 * 128 / our_ms * 1e3,
                   "step_ms": [m["step_ms"] for m in ours]},
          "pytorch_eager": torch}
result["ratio_tokens_per_s"] = result["ours"]["tokens_per_s"] / torch["tokens_per_s"]
json.dump(result, open(sys.argv[3], "w"), indent=1)
print(f"trainer:       {result['ours']['tokens_per_s']:8.0f} tokens/s ({our_ms:.1f} ms/step)")
print(f"PyTorch eager: {torch['tokens_per_s']:8.0f} tokens/s ({torch['median_step_ms']:.1f} ms/step,"
      f" torch {torch['torch']}, {torch['threads']} threads)")
print(f"ratio: {result['ratio_tokens_per_s']:.2f}x")
PY
