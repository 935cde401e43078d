#!/usr/bin/env bash
# A Llama block (RMSNorm, SwiGLU, RoPE, grouped-query attention, untied head) against an
# independent float64 reference (llama_reference.py: Hugging Face LlamaForCausalLM's math on the
# exported HF tensors, AdamW and clipping as PyTorch's): 12 steps on one process, unfused and
# flash attention, every loss and gradient norm within 1e-5 relative. The reference starts from
# the trainer's initial weights, exported by a one-step run at learning rate 1e-30 (every
# update is far below a float32 ulp of the weights, so they stay as initialized).
# Usage: llama_reference.sh TRAINER
set -u
trainer=$1
source "$(dirname "$0")/../script_test_util.sh"
reference="$(dirname "$0")/llama_reference.py"
python=""
for candidate in python3 /usr/bin/python3; do  # scripts/setup.sh installs Debian's python3-numpy
  if "$candidate" -c "import numpy" 2>/dev/null; then python=$candidate; break; fi
done
[ -n "$python" ] || { echo "SKIP: no python3 with numpy"; exit 77; }
synthetic_data 40000
steps=12 micro=4 lr=0.00390625 wd=0.125 clip=0.5
cat > "$dir/run.yaml" <<YAML
model: {architecture: llama, num_layers: 2, hidden_size: 64, num_attention_heads: 4,
        num_query_groups: 2, ffn_hidden_size: 96, seq_length: 32, vocab_size: 256,
        rotary_base: 10000.0}
train: {steps: $steps, micro_batch_size: $micro, global_batch_size: $micro, seed: 7}
optimizer: {lr: $lr, min_lr: $lr, weight_decay: $wd, adam_beta1: 0.9, adam_beta2: 0.95,
            adam_eps: 1.0e-8, clip_grad: $clip, lr_warmup_steps: 0, lr_decay_style: constant}
data: {path: $dir/data, split: [1], shuffle: false}
output: {dir: $dir/out}
YAML
for backend in unfused flash; do
  "$trainer" train --config "$dir/run.yaml" --set model.attention_backend=$backend \
    --set train.steps=1 --set optimizer.lr=1e-30 --set optimizer.min_lr=1e-30 \
    --set output.dir="$dir/init_$backend" > "$dir/init_$backend.log" 2>&1 ||
    { cat "$dir/init_$backend.log"; fail "$backend: the initial-weights run failed"; }
  "$trainer" train --config "$dir/run.yaml" --set model.attention_backend=$backend \
    --set output.dir="$dir/$backend" > "$dir/$backend.log" 2>&1 ||
    { cat "$dir/$backend.log"; fail "$backend: the run failed"; }
  # lr, weight decay and clip are powers of two: the same in float32 and float64.
  "$python" "$reference" "$dir/init_$backend" "$dir/data" $steps $micro $lr $wd $clip \
    > "$dir/reference_$backend.jsonl" ||
    fail "$backend: the reference failed"
  python3 - "$dir/$backend/metrics.jsonl" "$dir/reference_$backend.jsonl" "$backend" <<'PY' ||
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
ref = [json.loads(l) for l in open(sys.argv[2])]
assert len(ours) == len(ref) == 12, (len(ours), len(ref))
worst = 0.0
for a, b in zip(ours, ref):
    for key in ("loss", "grad_norm"):
        rel = abs(a[key] - b[key]) / abs(b[key])
        worst = max(worst, rel)
        assert rel < 1e-5, f"step {a['step']} {key}: trainer {a[key]!r}, reference {b[key]!r}, rel {rel:.2e}"
print(f"{sys.argv[3]}: loss {ref[0]['loss']:.6f} -> {ref[-1]['loss']:.6f} over {len(ref)} steps, "
      f"worst relative difference {worst:.2e} (loss and grad norm)")
PY
    fail "$backend: the trainer and the reference disagree"
done
# The export imported back (train.init_from, another seed): the same losses bit for bit, and a
# config.json that asks for what the trainer does not do is refused, naming the field.
"$trainer" train --config "$dir/run.yaml" --set train.steps=3 --set train.seed=99 \
  --set train.init_from="$dir/init_unfused/model.safetensors" --set output.dir="$dir/imported" \
  > "$dir/imported.log" 2>&1 || { cat "$dir/imported.log"; fail "the import run failed"; }
"$python" - "$dir/unfused/metrics.jsonl" "$dir/imported/metrics.jsonl" <<'PY' ||
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])][:3]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert a == b, (a, b)
print("init_from the LlamaForCausalLM export: the same 3 losses bit for bit")
PY
  fail "the imported weights do not give the same losses"
sed -i 's/"rope_scaling": null/"rope_scaling": {"type": "linear", "factor": 2.0}/' \
  "$dir/init_unfused/config.json"
if "$trainer" train --config "$dir/run.yaml" --set train.steps=1 \
    --set train.init_from="$dir/init_unfused/model.safetensors" --set output.dir="$dir/refused" \
    > "$dir/refused.log" 2>&1; then
  fail "a config.json with rope_scaling was accepted"
fi
grep -q "config.json: rope_scaling is set" "$dir/refused.log" ||
  { cat "$dir/refused.log"; fail "the refusal does not name rope_scaling"; }
echo "rope_scaling refused: $(grep -o 'rope_scaling is set.*' "$dir/refused.log")"
echo PASS
