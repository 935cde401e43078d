#!/usr/bin/env bash
# The PyTorch peer of bench_gpu (bench/peers/gpt_torch.py) on the CPU at its tiny shape: its
# model FLOPs per step equal the trainer's own count for the same shape (from metrics.jsonl of
# a one-step run), eager and checkpoint measure, the initial loss is near ln(vocab), and a bad
# --modes is refused by name. Skips (exit 77) when no python3 here has torch.
set -u
trainer=$1
source "$(dirname "$0")/../script_test_util.sh"
peer="$(cd "$(dirname "$0")/../.." && pwd)/bench/peers/gpt_torch.py"
py=""
for candidate in python3 /usr/bin/python3; do
  "$candidate" -c "import torch" 2>/dev/null && { py=$candidate; break; }
done
[ -n "$py" ] || { echo "SKIP: no python3 here imports torch (Debian: python3-torch)"; exit 77; }

"$py" "$peer" "$dir/peer.json" --preset tiny --device cpu --modes eager,checkpoint \
  --warmup-steps 1 --timed-steps 2 > "$dir/peer.log" 2>&1 || { cat "$dir/peer.log"; fail "peer"; }
synthetic_data 20000
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, seq_length: 64, vocab_size: 256}
train: {steps: 1, micro_batch_size: 2, global_batch_size: 4, log_interval: 1}
$(shared_run_yaml)
YAML
"$trainer" train --config "$dir/run.yaml" > "$dir/train.log" 2>&1 ||
  { cat "$dir/train.log"; fail "trainer"; }
"$py" - "$dir/peer.json" "$dir/out/metrics.jsonl" <<'PY' || fail "see above"
import json, math, sys
peer = json.load(open(sys.argv[1]))
ours = json.loads(open(sys.argv[2]).readline())
trainer_flops = ours["model_tflops"] * 1e12 * ours["step_ms"] / 1e3  # metrics keep 6 digits
relative = abs(trainer_flops - peer["model_flops_per_step"]) / peer["model_flops_per_step"]
print(f"model FLOPs per step: trainer {trainer_flops:.6g}, peer {peer['model_flops_per_step']}")
assert relative < 1e-4, f"the FLOP counts differ by {relative:.2e}"
assert [r["mode"] for r in peer["runs"]] == ["eager", "checkpoint"] and peer["complete"], peer
for r in peer["runs"]:
    assert "error" not in r and r["tokens_per_s"] > 0 and len(r["step_ms"]) == 3, r
    assert abs(r["loss"] - math.log(256)) < 0.5, f"{r['mode']}: loss {r['loss']} at init"
PY
"$py" "$peer" "$dir/bad.json" --modes eager,flash > "$dir/bad.log" 2>&1
code=$?
[ $code -eq 2 ] && grep -q -- "--modes: unknown mode(s) flash" "$dir/bad.log" ||
  { cat "$dir/bad.log"; fail "--modes flash: exit $code"; }
echo PASS
