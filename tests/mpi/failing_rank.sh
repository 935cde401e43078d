#!/usr/bin/env bash
# Data-parallel rank 1 reads a token >= vocab_size that rank 0 never sees: rank 1
# fails alone while rank 0 waits in a collective. The job must end non-zero,
# quickly, with rank 1's message.
set -u
trainer=$1 mpirun=$2
source "$(dirname "$0")/../script_test_util.sh"
# 17-token samples: global batch 0 = samples 0 and 1; sample 1 (dp rank 1) holds 'z' (122).
{ printf 'a%.0s' {1..17}; printf 'z'; printf 'a%.0s' {1..100}; } > "$dir/text.txt"
"$trainer" prepare-data --input "$dir/text.txt" --output-prefix "$dir/data" >/dev/null
# A plain indexed dataset (no <prefix>.json): no tokenizer vocabulary to check against
# vocab_size when the run starts, so only rank 1 finds the bad token, when it reads it.
rm -f "$dir/data.json"
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 1, hidden_size: 16, num_attention_heads: 2, seq_length: 16, vocab_size: 100}
train: {steps: 2, micro_batch_size: 1, global_batch_size: 2}
data: {path: $dir/data, split: [1]}
parallel: {data: 2}
output: {dir: $dir/out}
YAML
start=$(date +%s)
output=$(timeout 120 "$mpirun" --oversubscribe --bind-to none -np 2 "$trainer" train \
  --config "$dir/run.yaml" 2>&1)
code=$?
elapsed=$(( $(date +%s) - start ))
echo "$output" | grep -v '^\s*$' | head -20
echo "exit code $code after ${elapsed}s"
[ "$code" -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
[ "$code" -ne 124 ] || { echo "FAIL: the job hung until the timeout"; exit 1; }
echo "$output" | grep -q "\[rank 1\] error: .*122" ||
  { echo "FAIL: rank 1's message is missing"; exit 1; }
echo "PASS"
