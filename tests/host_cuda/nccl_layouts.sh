#!/usr/bin/env bash
# The trainer on host CUDA with host NCCL (docs/gpu.md, "Host CUDA"): two ranks in each of the
# data, pipeline, tensor with sequence parallelism, and context layouts, device tensors over
# NCCL, against one CPU process: three fp32 steps with dropout on, every loss within 1e-6.
set -u
trainer=$1 device_trainer=$2 mpirun=$3
source "$(dirname "$0")/../script_test_util.sh"
synthetic_data 100000
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, seq_length: 64, vocab_size: 256,
        hidden_dropout: 0.1, attention_dropout: 0.1, attention_backend: flash}
train: {steps: 3, micro_batch_size: 2, global_batch_size: 8, eval_interval: 0, log_interval: 1,
        precision: fp32}
$(shared_run_yaml)
YAML
losses() { sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$1"; }

"$trainer" train --config "$dir/run.yaml" --set output.dir="$dir/cpu" > "$dir/cpu.log" 2>&1 ||
  fail "the CPU run: $(tail -3 "$dir/cpu.log")"
losses "$dir/cpu/metrics.jsonl" > "$dir/cpu.txt"
for layout in "parallel.data=2" "parallel.pipeline=2" \
              "parallel.tensor=2 parallel.sequence_parallel=true" "parallel.context=2"; do
  name=$(echo "$layout" | tr ' =.' '___')
  sets=()
  for l in $layout; do sets+=(--set "$l"); done
  timeout 240 "$mpirun" --oversubscribe --bind-to none -np 2 "$device_trainer" train \
    --config "$dir/run.yaml" "${sets[@]}" --set train.device=cuda --set parallel.backend=nccl \
    --set output.dir="$dir/$name" > "$dir/$name.log" 2>&1 </dev/null ||
    fail "$layout: $(tail -5 "$dir/$name.log")"
  grep -q "communication: NCCL for device tensors" "$dir/$name.log" ||
    fail "$layout did not use NCCL: $(head -12 "$dir/$name.log")"
  losses "$dir/$name/metrics.jsonl" > "$dir/$name.txt"
  worst=$(paste "$dir/cpu.txt" "$dir/$name.txt" |
    awk 'NF == 2 {d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > m) m = d; n++}
         END {if (n != 3) print "steps:" n; else printf "%.3g\n", m}')
  echo "$layout: largest relative loss difference $worst"
  awk -v w="$worst" 'BEGIN {exit !(w ~ /^[0-9.e+-]+$/ && w + 0 <= 1e-6)}' ||
    fail "$layout: losses differ from the CPU run ($worst)"
done
echo "PASS"
