#!/usr/bin/env bash
# Preemption as a scheduler does it, on the real binary:
#  1. SIGTERM mid-run: the step finishes with its metrics row, a checkpoint is written, exit 0;
#     --resume auto then finishes the run, every step's row once.
#  2. kill -9 while checkpoints are being written every step: --resume auto
#     still finds a complete checkpoint (the previous one at worst).
set -u
trainer=$1
source "$(dirname "$0")/../script_test_util.sh"
synthetic_data 200000
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 2, hidden_size: 256, num_attention_heads: 4, seq_length: 64, vocab_size: 256}
train: {steps: 400, micro_batch_size: 4, global_batch_size: 4, log_interval: 1}
checkpoint: {dir: $dir/ckpt, keep_last: 2}
$(shared_run_yaml)
YAML

# 1. SIGTERM
"$trainer" train --config "$dir/run.yaml" > "$dir/log1" 2>&1 &
pid=$!
wait_for "^step .*3/400" "$dir/log1" 100 0.1
kill -TERM $pid
wait $pid
code=$?
[ $code -eq 0 ] || { cat "$dir/log1"; fail "SIGTERM exit code $code, expected 0"; }
check_stopped "$dir/log1"
check_metrics_steps "$dir/out/metrics.jsonl" "$stopped"
echo "SIGTERM: stopped after step $stopped with a checkpoint and its metrics row"
"$trainer" train --config "$dir/run.yaml" --resume --set train.steps=$((stopped + 3)) \
  > "$dir/log2" 2>&1 || { cat "$dir/log2"; fail "resume after SIGTERM failed"; }
grep -q "resume: step $stopped" "$dir/log2" ||
  { cat "$dir/log2"; fail "did not resume at step $stopped"; }
grep -q "^step .*$((stopped + 3))/$((stopped + 3))" "$dir/log2" || fail "resumed run did not finish"
check_metrics_steps "$dir/out/metrics.jsonl" $((stopped + 3))
echo "resume: continued from step $stopped to $((stopped + 3)), every step's row once"

# 2. kill -9 during per-step checkpoints
rm -rf "$dir/ckpt"
"$trainer" train --config "$dir/run.yaml" --set checkpoint.interval=1 > "$dir/log3" 2>&1 &
pid=$!
wait_for "checkpoint: step 4 " "$dir/log3" 100 0.05
kill -KILL $pid
wait $pid 2>/dev/null
"$trainer" train --config "$dir/run.yaml" --resume --set train.steps=12 > "$dir/log4" 2>&1 \
  || { cat "$dir/log4"; fail "resume after kill -9 failed"; }
resumed=$(sed -n 's/^resume: step \([0-9]*\).*/\1/p' "$dir/log4")
[ -n "$resumed" ] && [ "$resumed" -ge 4 ] || { cat "$dir/log4"; fail "no resume from a step >= 4"; }
echo "kill -9: resumed from step $resumed"
echo "PASS"
