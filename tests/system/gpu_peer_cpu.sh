#!/usr/bin/env bash
# The PyTorch peers of bench_gpu (bench/peers/gpt_torch.py, and llama_torch.py --preset for
# --model llama) on the CPU at their tiny shapes: each one's model FLOPs per step equal the
# trainer's own count for the same shape (from metrics.jsonl of a one-step run), eager and
# checkpoint measure, the initial loss is near ln(vocab), and a bad --modes is refused by name.
# Skips (exit 77) when no python3 here has torch.
set -u
trainer=$1
source "$(dirname "$0")/../script_test_util.sh"
peers="$(cd "$(dirname "$0")/../.." && pwd)/bench/peers"
py=""
for candidate in python3 /usr/bin/python3; do
  "$candidate" -c "import torch" 2>/dev/null && { py=$candidate; break; }
done
[ -n "$py" ] || { echo "SKIP: no python3 here imports torch (Debian: python3-torch)"; exit 77; }
synthetic_data 20000

# check_peer NAME PEER MODEL_YAML: the peer's tiny preset against a one-step trainer run of
# MODEL_YAML (the same shape).
check_peer() {
  local name=$1 peer=$2 model=$3
  "$py" "$peer" "$dir/$name.json" --preset tiny --device cpu --modes eager,checkpoint \
    --warmup-steps 1 --timed-steps 2 > "$dir/$name.log" 2>&1 ||
    { cat "$dir/$name.log"; fail "$name peer"; }
  cat > "$dir/$name.yaml" <<YAML
model: $model
train: {steps: 1, micro_batch_size: 2, global_batch_size: 4, log_interval: 1}
$(shared_run_yaml)
YAML
  rm -rf "$dir/out"
  "$trainer" train --config "$dir/$name.yaml" > "$dir/$name.train.log" 2>&1 ||
    { cat "$dir/$name.train.log"; fail "$name: trainer"; }
  "$py" - "$dir/$name.json" "$dir/out/metrics.jsonl" "$name" <<'PY' || fail "$name: see above"
import json, math, sys
peer = json.load(open(sys.argv[1]))
ours = json.loads(open(sys.argv[2]).readline())
trainer_flops = ours["model_tflops"] * 1e12 * ours["step_ms"] / 1e3  # metrics keep 6 digits
relative = abs(trainer_flops - peer["model_flops_per_step"]) / peer["model_flops_per_step"]
print(f"{sys.argv[3]}: model FLOPs per step: trainer {trainer_flops:.6g}, "
      f"peer {peer['model_flops_per_step']}")
assert relative < 1e-4, f"the FLOP counts differ by {relative:.2e}"
assert [r["mode"] for r in peer["runs"]] == ["eager", "checkpoint"] and peer["complete"], peer
for r in peer["runs"]:
    assert "error" not in r and r["tokens_per_s"] > 0 and len(r["step_ms"]) == 3, r
    assert abs(r["loss"] - math.log(256)) < 0.5, f"{r['mode']}: loss {r['loss']} at init"
PY
}

check_peer gpt "$peers/gpt_torch.py" \
  "{num_layers: 2, hidden_size: 64, num_attention_heads: 4, seq_length: 64, vocab_size: 256}"
check_peer llama "$peers/llama_torch.py" "{architecture: llama, num_layers: 2, hidden_size: 64,
  num_attention_heads: 4, num_query_groups: 2, ffn_hidden_size: 96, seq_length: 64,
  vocab_size: 256}"
for peer in gpt_torch.py llama_torch.py; do
  "$py" "$peers/$peer" "$dir/bad.json" --preset tiny --modes eager,flash > "$dir/bad.log" 2>&1
  code=$?
  [ $code -eq 2 ] && grep -q -- "--modes: unknown mode(s) flash" "$dir/bad.log" ||
    { cat "$dir/bad.log"; fail "$peer --modes flash: exit $code"; }
done
echo PASS
