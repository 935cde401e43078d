#!/usr/bin/env bash
# The Llama block on the CPU, the trainer against PyTorch eager (bench/peers/llama_torch.py: the
# same shape and math, fp32, AdamW, clipping) in one run: 4 layers, hidden 256, 8 heads sharing
# 2 key/value heads, SwiGLU 688, seq 128, micro batch 8, vocabulary 256. ROUNDS rounds, each one
# trainer process then one PyTorch process of TIMED_STEPS steps after 2 warm-up steps; each
# side's result is the median over its processes of their median step, and each round's ratio
# is printed too. Both use every core. The trainer chooses its own OpenMP wait policy (Note
# [OpenMP wait policy]); PyTorch runs with OMP_WAIT_POLICY=passive, the fastest of the
# settings tried for it on 2 cores (docs/performance.md, "CPU speed"). Last, the machine's
# bound: the step's model FLOPs at the FMA throughput the trainer measures at startup, and the share of that peak
# each side runs at; and, in each round after the two, the step's GEMMs alone through the
# trainer's own linears (bench_step_gemms: OpenBLAS split over the threads as a step runs them),
# the least a step with those products can take. Writes bench/llama_cpu.json.
# PyTorch comes from Debian's python3-torch (`apt-get install python3-torch`).
# Usage: scripts/bench_llama_cpu.sh [TIMED_STEPS] [ROUNDS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
steps=${1:-20}
rounds=${2:-5}
"$root/scripts/setup.sh" >/dev/null
configure_and_build "$root/build/release" trainer bench_step_gemms >/dev/null
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import torch" 2>/dev/null; then python=$candidate; break; fi
done
[ -n "$python" ] || { echo "bench_llama_cpu: no python3 with torch (apt-get install python3-torch)"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trainer="$root/build/release/trainer/trainer"
"$trainer" prepare-data --synthetic --num-tokens 200000 --output-prefix "$work/data" >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
cat > "$work/run.yaml" <<YAML
model: {architecture: llama, num_layers: 4, hidden_size: 256, num_attention_heads: 8,
        num_query_groups: 2, ffn_hidden_size: 688, seq_length: 128, vocab_size: 256}
train: {steps: $((steps + 2)), micro_batch_size: 8, global_batch_size: 8, log_interval: 1000}
optimizer: {lr: 1.0e-3, lr_warmup_steps: 0}
data: {path: $work/data, split: [1]}
output: {dir: $work/out, export: false}
YAML
for round in $(seq "$rounds"); do
  rm -rf "$work/out"
  (unset OMP_WAIT_POLICY; "$trainer" train --config "$work/run.yaml" > "$work/ours.log")
  cp "$work/out/metrics.jsonl" "$work/ours_$round.jsonl"
  cp "$work/ours.log" "$work/ours_$round.log"
  OMP_WAIT_POLICY=passive "$python" "$root/bench/peers/llama_torch.py" "$work/torch_$round.json" \
    --layers 4 --hidden 256 --heads 8 --groups 2 --ffn 688 --seq 128 --micro-batch 8 \
    --vocab 256 --warmup-steps 2 --timed-steps "$steps"
  (unset OMP_WAIT_POLICY; "$root/build/release/bench/bench_step_gemms" 4 256 8 2 688 128 8 256 \
    "$steps" > "$work/gemms_$round.json")
done
"$python" - "$work" "$rounds" "$root/bench/llama_cpu.json" <<'PY'
import json, re, statistics, sys
work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tokens = 8 * 128
ours, torch = [], []
for r in range(1, rounds + 1):
    steps = [json.loads(l)["step_ms"] for l in open(f"{work}/ours_{r}.jsonl")][2:]
    ours.append({"median_step_ms": statistics.median(steps), "step_ms": steps})
    torch.append(json.load(open(f"{work}/torch_{r}.json")))
# The machine's bound: the model FLOPs of a step (metrics' model_tflops x step_ms) at the FMA
# throughput the trainer measured at startup (its `peak for MFU` line), best over the rounds.
last = json.loads(open(f"{work}/ours_1.jsonl").readlines()[-1])
model_gflop = last["model_tflops"] * last["step_ms"]
peaks = [float(re.search(r"peak for MFU: ([0-9.]+) GFLOP/s \(FMA", open(f"{work}/ours_{r}.log").read()).group(1))
         for r in range(1, rounds + 1)]
our_ms = statistics.median(p["median_step_ms"] for p in ours)
torch_ms = statistics.median(p["median_step_ms"] for p in torch)
result = {"shape": "L4 H256 heads 8 kv 2 ffn 688 seq 128 micro 8 fp32",
          "rounds": rounds,
          "ours": {"median_step_ms": our_ms, "tokens_per_s": tokens / our_ms * 1e3,
                   "processes": ours},
          "pytorch_eager": {"median_step_ms": torch_ms, "tokens_per_s": tokens / torch_ms * 1e3,
                            "torch": torch[0]["torch"], "threads": torch[0]["threads"],
                            "omp_wait_policy": "passive", "processes": torch},
          "round_ratios": [t["median_step_ms"] / o["median_step_ms"] for o, t in zip(ours, torch)]}
gemm_ms = statistics.median(json.load(open(f"{work}/gemms_{r}.json"))["gemm_ms"]
                            for r in range(1, rounds + 1))
result["gemms_alone"] = {"median_ms": gemm_ms,
                         "rounds_ms": [json.load(open(f"{work}/gemms_{r}.json"))["gemm_ms"]
                                       for r in range(1, rounds + 1)]}
result["ratio_tokens_per_s"] = torch_ms / our_ms
result["bound"] = {"model_gflop_per_step": model_gflop, "fma_peak_gflops": max(peaks),
                   "least_step_ms": model_gflop / max(peaks) * 1e3}
json.dump(result, open(out, "w"), indent=1)
for r, (o, t) in enumerate(zip(ours, torch), 1):
    print(f"round {r}: trainer {o['median_step_ms']:6.1f} ms/step, PyTorch {t['median_step_ms']:6.1f}"
          f" ms/step, ratio {t['median_step_ms'] / o['median_step_ms']:.2f}x")
print(f"trainer:       {result['ours']['tokens_per_s']:8.0f} tokens/s ({our_ms:.1f} ms/step)")
print(f"PyTorch eager: {result['pytorch_eager']['tokens_per_s']:8.0f} tokens/s ({torch_ms:.1f} ms/step,"
      f" torch {torch[0]['torch']}, {torch[0]['threads']} threads)")
print(f"ratio: {result['ratio_tokens_per_s']:.2f}x (medians over {rounds} rounds;"
      f" rounds {min(result['round_ratios']):.2f}x-{max(result['round_ratios']):.2f}x)")
least = result["bound"]["least_step_ms"]
print(f"bound: {model_gflop:.1f} GFLOP of model FLOPs a step at the measured FMA peak of"
      f" {max(peaks):.0f} GFLOP/s take {least:.1f} ms; the trainer's step runs at"
      f" {100 * least / our_ms:.0f}% of that peak, PyTorch's at {100 * least / torch_ms:.0f}%;"
      f" 2x PyTorch would need {100 * least / (torch_ms / 2):.0f}%")
print(f"the step's GEMMs alone (the trainer's linears, bench_step_gemms): {gemm_ms:.1f} ms"
      f" (rounds {min(result['gemms_alone']['rounds_ms']):.1f}-"
      f"{max(result['gemms_alone']['rounds_ms']):.1f}), {100 * gemm_ms / our_ms:.0f}% of the"
      f" trainer's step; a 2x step is {torch_ms / 2:.1f} ms, leaving"
      f" {torch_ms / 2 - gemm_ms:.1f} ms for everything else")
PY
