#!/usr/bin/env bash
# `trainer generate --device cuda` from the command line, on host CUDA: an exported Llama run
# (configs/llama_tiny.yaml, 20 steps) sampled on the GPU gives the tokens the CPU gives, greedy
# and drawn; a bad --device value is refused naming the flag.
set -u
trainer=$1
host_cuda_trainer=$2
config=$3
source "$(dirname "$0")/../script_test_util.sh"
synthetic_data 50000
"$trainer" train --config "$config" --set train.steps=20 --set optimizer.lr_warmup_steps=0 \
  --set data.path="$dir/data" --set output.dir="$dir/run" --set output.export=true \
  > "$dir/train.log" 2>&1 || fail "training: $(tail -3 "$dir/train.log")"
for sampling in "--temperature 0" "--temperature 0.8 --top-k 40 --seed 3"; do
  # shellcheck disable=SC2086  # the sampling flags are words
  cpu=$("$trainer" generate --model "$dir/run" --prompt "the " --max-new-tokens 24 --print-ids \
    $sampling 2>&1 | grep '^ids:') || fail "generate on the CPU ($sampling)"
  # shellcheck disable=SC2086
  gpu=$("$host_cuda_trainer" generate --model "$dir/run" --prompt "the " --max-new-tokens 24 \
    --print-ids --device cuda $sampling 2>&1 | grep '^ids:') || fail "generate --device cuda"
  [ "$cpu" = "$gpu" ] || fail "$sampling: the CPU gave '$cpu', the GPU '$gpu'"
  echo "$sampling: 24 tokens alike on the CPU and the GPU ($cpu)"
done
bad=$("$trainer" generate --model "$dir/run" --device tpu 2>&1) && fail "--device tpu accepted"
echo "$bad" | grep -q 'generate: --device "tpu": expected cpu or cuda' ||
  fail "--device tpu: '$bad'"
echo PASS
