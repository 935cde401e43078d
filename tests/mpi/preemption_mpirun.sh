#!/usr/bin/env bash
# SIGUSR1 to mpirun (Open MPI forwards it to every rank; a SIGTERM would abort the job): all
# ranks agree on the step to stop after, write its metrics row and one checkpoint together, say
# so (log and ledger) and exit 0, which mpirun returns; a resume adds the next step's row, none
# twice.
set -u
trainer=$1 mpirun=$2
source "$(dirname "$0")/../script_test_util.sh"
fail() { echo "FAIL: $*"; cat "$dir/log" "$dir/err"; exit 1; }
synthetic_data 100000
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 2, hidden_size: 128, num_attention_heads: 4, seq_length: 64, vocab_size: 256}
train: {steps: 100000, micro_batch_size: 2, global_batch_size: 4, log_interval: 1}
parallel: {data: 2}
checkpoint: {dir: $dir/ckpt}
$(shared_run_yaml)
YAML
# stderr apart: mpirun forwards the ranks' streams in chunks, so another rank's signal message
# on stderr could cut rank 0's "stopped by a signal" line in two.
"$mpirun" --oversubscribe --bind-to none -np 2 "$trainer" train --config "$dir/run.yaml" \
  > "$dir/log" 2> "$dir/err" &
job=$!
# Up to 120 s for step 5 (a loaded CI machine starts two ranks slowly); before the trainer's
# signal handlers are installed a signal would simply end it.
wait_for "^step .*5/100000" "$dir/log" 1200 0.1 ||
  { kill -KILL $job; fail "step 5 not reached within 120 s"; }
kill -USR1 $job
timeout 60 tail --pid=$job -f /dev/null || fail "the job did not end within 60 s of SIGUSR1"
wait $job
code=$?
[ $code -eq 0 ] || fail "mpirun exit code $code after SIGUSR1, expected the ranks' 0"
check_stopped "$dir/log"
check_metrics_steps "$dir/out/metrics.jsonl" "$stopped"
grep -q "\"step\": $stopped, \"rank\": \"all\", \"event\": \"signal\"" "$dir/out/events.jsonl" ||
  fail "no signal line at step $stopped in events.jsonl"
grep -q "\"event\": \"end\", \"reason\": \"signal\"" "$dir/out/events.jsonl" ||
  fail "no end line with reason signal in events.jsonl"
"$trainer" train --config "$dir/run.yaml" --resume --set parallel.data=1 \
  --set train.steps=$((stopped + 1)) > "$dir/log2" 2>&1 ||
  { cat "$dir/log2"; fail "one process could not resume the dp2 checkpoint"; }
grep -q "resume: step $stopped" "$dir/log2" || fail "resume did not start at step $stopped"
check_metrics_steps "$dir/out/metrics.jsonl" $((stopped + 1))
echo "stopped after step $stopped on both ranks, its metrics row and checkpoint written, and" \
  "resumed by one process"
echo "PASS"
