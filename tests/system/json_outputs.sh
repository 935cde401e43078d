#!/usr/bin/env bash
# Every JSON and JSON-lines file two runs, a plan sweep and prepare-data write parses with a
# strict reader: duplicate keys, bare NaN/Infinity and trailing text are rejected. The runs
# evaluate, checkpoint, export, rewind a spike and skip a non-finite step, so the ledgers hold
# many kinds of events and metrics.jsonl non-finite values. Usage: json_outputs.sh TRAINER
set -u
trainer=$1
source "$(dirname "$0")/../script_test_util.sh"
synthetic_data 60000
# run.yaml: a spike at step 7 that the guard rewinds; nonfinite.yaml: a non-finite step skipped.
run_yaml() {  # run_yaml OUT INJECT_STEP SCALE GUARD_ACTION
  cat <<YAML
model: {num_layers: 2, hidden_size: 32, num_attention_heads: 2, seq_length: 32, vocab_size: 256,
        hidden_dropout: 0.1}
train: {steps: 12, micro_batch_size: 2, global_batch_size: 4, eval_interval: 4, eval_iters: 1,
        on_nonfinite: skip_step, max_skipped_steps: 3, inject: {step: $2, scale_loss: $3},
        guard: {action: $4, window: 2, loss_spike_factor: 3.0}}
checkpoint: {dir: $dir/$1/ckpt, interval: 4}
optimizer: {lr_warmup_steps: 0}
data: {path: $dir/data}
output: {dir: $dir/$1}
YAML
}
run_yaml out 7 100 rewind > "$dir/run.yaml"
run_yaml nonfinite 10 1.0e+300 warn > "$dir/nonfinite.yaml"
for run in run nonfinite; do
  "$trainer" train --config "$dir/$run.yaml" > "$dir/$run.log" 2>&1 ||
    { cat "$dir/$run.log"; fail "the $run run failed"; }
done
"$trainer" plan --config "$dir/run.yaml" --sweep model.seq_length=16,32 --out "$dir/sweep" \
  > "$dir/plan.log" 2>&1 || { cat "$dir/plan.log"; fail "plan --sweep failed"; }

python3 - "$dir" <<'PY' || fail "a JSON file the trainer wrote is not strict JSON"
import json, pathlib, sys

def unique_keys(pairs):
    keys = [k for k, _ in pairs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(f"duplicate keys {duplicates}")
    return dict(pairs)

def no_constant(name):
    raise ValueError(f"bare {name} is not JSON")

def strict(text, where):
    try:
        return json.loads(text, object_pairs_hook=unique_keys, parse_constant=no_constant)
    except ValueError as error:
        sys.exit(f"{where}: {error}")

root = pathlib.Path(sys.argv[1])
counts = {}
for path in sorted(root.rglob("*")):
    if path.suffix == ".jsonl":
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            strict(line, f"{path}:{number}")
        counts[path.name] = counts.get(path.name, 0) + len(lines)
    elif path.suffix == ".json":
        strict(path.read_text(), str(path))
        counts[path.name] = counts.get(path.name, 0) + 1
    elif path.suffix == ".safetensors":
        data = path.read_bytes()
        size = int.from_bytes(data[:8], "little")
        strict(data[8:8 + size].decode(), f"{path} (header)")
        counts[path.name] = counts.get(path.name, 0) + 1
def lines(name):
    return [json.loads(l) for l in (root / name).read_text().splitlines()]
assert any(m["grad_norm"] == "inf" for m in lines("nonfinite/metrics.jsonl")), \
    "no non-finite value was written"
events = [e["event"] for e in lines("out/events.jsonl") + lines("nonfinite/events.jsonl")]
for kind in ("start", "checkpoint", "loss_spike", "rewind", "non_finite", "end"):
    assert kind in events, f"no {kind} event in {events}"
for name in ("metrics.jsonl", "events.jsonl", "sweep.json", "data.json", "config.json",
             "model.safetensors"):
    assert counts.get(name), f"{name} was not checked: {counts}"
print("strict JSON:", ", ".join(f"{name} x{n}" for name, n in sorted(counts.items())))
PY
echo PASS
