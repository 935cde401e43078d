#!/usr/bin/env bash
# output.tensorboard on the real binary, read back by an independent decoder
# (tensorboard_events.py: python3-protobuf and a CRC32C of its own):
#  1. 6 steps with checkpoints at 4, resumed from 4 to 8: two event files, steps 1-4 and 5-8
#     (the first run's 5 and 6 are gone), every value equal to metrics.jsonl's;
#  2. a guard rewind at step 7 back to the checkpoint of step 4: the same for the rewound run.
# Skipped (77) where no python3 has google.protobuf (scripts/setup.sh installs python3-protobuf).
set -u
trainer=$1
reader="$(dirname "$0")/tensorboard_events.py"
source "$(dirname "$0")/../script_test_util.sh"
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import google.protobuf" 2>/dev/null; then
    python=$candidate
    break
  fi
done
[ -n "$python" ] || { echo "SKIP: no python3 with google.protobuf (python3-protobuf)"; exit 77; }

synthetic_data 100000
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, seq_length: 32, vocab_size: 256}
train: {steps: 6, micro_batch_size: 2, global_batch_size: 4, eval_interval: 3, eval_iters: 1}
checkpoint: {dir: $dir/ckpt, interval: 4, keep_last: 0}
$(shared_run_yaml)
YAML
run() { "$trainer" train --config "$dir/run.yaml" --set output.tensorboard=true "$@" \
  > "$dir/log" 2>&1 || { cat "$dir/log"; fail "trainer train $*"; }; }

# 1. resume
run
sleep 1  # a new second: the resumed run's file gets a name of its own, not a ".1" suffix
run --resume "$dir/ckpt/step_00000004" --set train.steps=8
[ "$(ls "$dir/out/tensorboard" | wc -l)" -eq 2 ] || { ls -la "$dir/out/tensorboard"; fail "not 2 files"; }
"$python" "$reader" "$dir/out" --files-steps 1-4,5-8 || fail "resume: the event files"

# 2. rewind: the spike at step 7 goes back to step 4 and skips its batches (output to out2)
rm -rf "$dir/ckpt"
run --set output.dir="$dir/out2" --set train.steps=8 --set train.guard.action=rewind \
  --set train.guard.window=2 --set train.inject.step=7 --set train.inject.scale_loss=100
grep -q '"event": "rewind"' "$dir/out2/events.jsonl" || fail "no rewind happened"
"$python" "$reader" "$dir/out2" --files-steps 1-4,5-8 || fail "rewind: the event files"
echo "PASS"
