#!/usr/bin/env bash
# A rank killed by the OS (kill -9) mid-run: the other rank is left in a
# collective; mpirun must end the whole job, non-zero, within a bounded time.
set -u
trainer=$1 mpirun=$2
source "$(dirname "$0")/../script_test_util.sh"
synthetic_data 100000
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 2, hidden_size: 64, num_attention_heads: 2, seq_length: 32, vocab_size: 256}
train: {steps: 100000, micro_batch_size: 2, global_batch_size: 4, log_interval: 1}
parallel: {data: 2}
$(shared_run_yaml)
YAML
timeout 120 "$mpirun" --oversubscribe --bind-to none -np 2 "$trainer" train \
  --config "$dir/run.yaml" > "$dir/log" 2>&1 &
job=$!
wait_for "^step .*5/100000" "$dir/log" 200 0.1
victim=""
for pid in $(pgrep -f "$trainer train --config $dir/run.yaml"); do
  if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then
    victim=$pid
  fi
done
[ -n "$victim" ] || { cat "$dir/log"; fail "rank 1 not found"; }
start=$(date +%s)
kill -KILL "$victim"
wait $job
code=$?
elapsed=$(( $(date +%s) - start ))
echo "job exit code $code, ${elapsed}s after rank 1 was killed"
[ "$code" -ne 0 ] || fail "the job exited 0"
[ "$code" -ne 124 ] || fail "the job hung until the timeout"
[ "$elapsed" -le 60 ] || fail "the job took ${elapsed}s to end"
echo "PASS"
