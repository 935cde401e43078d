#!/usr/bin/env bash
# train.trace under mpirun: a pp2 x tp2 run with interleaved 1F1B (virtual_pipeline 2) and a
# mixed recompute plan (selective core_attn, layers 2-3 full, 6-7 none) traces steps 2-3;
# every rank writes its trace, scripts/trace_merge.py merges the four, and trace_check.py
# checks the schema and that every layer and microbatch of each rank is there, with the
# recompute slices the plan implies and the communication with its bytes. The same run records
# the memory timeline of step 2 (train.memory_timeline_step), and timeline_check.py compares
# every rank's with the run's prediction and `trainer plan --timeline`'s, event for event.
set -u
trainer=$1 mpirun=$2
source "$(dirname "$0")/../script_test_util.sh"
root="$(cd "$(dirname "$0")/../.." && pwd)"
synthetic_data 100000
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 8, hidden_size: 64, num_attention_heads: 4, seq_length: 32, vocab_size: 256}
train: {steps: 3, micro_batch_size: 2, global_batch_size: 8, trace: {start_step: 2, steps: 2},
        memory_timeline_step: 2}
parallel: {tensor: 2, pipeline: 2, virtual_pipeline: 2}
recompute:
  granularity: selective
  modules: [core_attn]
  layers:
    - {range: [2, 3], granularity: full}
    - {range: [6, 7], granularity: none}
$(shared_run_yaml)
YAML
"$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 4 "$trainer" train \
  --config "$dir/run.yaml" > "$dir/log" 2>&1 || { cat "$dir/log"; fail "the 4-rank run failed"; }
for rank in 0 1 2 3; do
  [ -s "$dir/out/trace_rank$rank.json" ] || fail "no trace_rank$rank.json"
done
grep -q "^trace: steps 2-3 written" "$dir/log" || { cat "$dir/log"; fail "no trace log line"; }
python3 "$root/scripts/trace_merge.py" "$dir/out" --out "$dir/merged.json" || fail "trace_merge.py"
python3 "$(dirname "$0")/trace_check.py" "$dir/merged.json" || fail "the merged trace"
grep -q "^memory timeline: step 2 written" "$dir/log" || { cat "$dir/log"; fail "no timeline log line"; }
"$trainer" plan --config "$dir/run.yaml" --timeline "$dir/plan" > "$dir/plan.log" 2>&1 ||
  { cat "$dir/plan.log"; fail "trainer plan --timeline"; }
python3 "$(dirname "$0")/timeline_check.py" "$dir/out" "$dir/plan" 4 2 || fail "the memory timelines"
echo "PASS"
