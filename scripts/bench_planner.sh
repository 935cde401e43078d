#!/usr/bin/env bash
# The recompute planner against Megatron's presets on one machine: an 8-layer model on a 4-stage
# 1F1B pipeline (4 oversubscribed ranks, 8 microbatches). Five budgets spread from the
# full-recompute preset's predicted peak towards no recompute's; for each, the planner's plan
# (predicted and measured largest per-rank total, recompute share, tokens/s) beside the best
# preset that fits the same budget, run in the same script. Writes bench/planner.json.
# Usage: scripts/bench_planner.sh [STEPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
"$root/scripts/setup.sh" >/dev/null
configure_and_build "$root/build/release" trainer >/dev/null
trainer="$root/build/release/trainer/trainer"
steps=${1:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$trainer" prepare-data --synthetic --num-tokens 400000 --output-prefix "$work/data" >/dev/null
echo "machine: $(nproc) cores; 4 ranks (oversubscribed): the speed ratios are measured here, noisy"
python3 - "$root" "$trainer" "$work" "$steps" "$(mpirun_flags)" <<'PY'
import json, re, statistics, subprocess, sys
root, trainer, work = sys.argv[1], sys.argv[2], sys.argv[3]
steps, mpirun_flags = int(sys.argv[4]), sys.argv[5].split()
config = f"{root}/configs/tiny.yaml"
model = ["model.num_layers=8", "model.hidden_size=128", "model.num_attention_heads=4",
         "model.seq_length=256", "model.hidden_dropout=0.1", "model.attention_dropout=0.1",
         "train.micro_batch_size=2", "train.global_batch_size=16", "parallel.pipeline=4",
         f"train.steps={steps}", "train.eval_interval=0", "train.log_interval=1000",
         "optimizer.lr_warmup_steps=0", "output.export=false", f"data.path={work}/data"]
presets = {
    "none": ["recompute.granularity=none"],
    "selective core_attn": ["recompute.granularity=selective", "recompute.modules=[core_attn]"],
    "selective all": ["recompute.granularity=selective",
                      "recompute.modules=[core_attn, act, layernorm, mlp]"],
    "full uniform 1": ["recompute.granularity=full", "recompute.method=uniform",
                       "recompute.num_layers=1"],
    "full uniform 2": ["recompute.granularity=full", "recompute.method=uniform",
                       "recompute.num_layers=2"],
    "full block 1": ["recompute.granularity=full", "recompute.method=block",
                     "recompute.num_layers=1"],
}
def sets(overrides):
    return [a for o in overrides for a in ("--set", o)]
def plan(overrides):
    """The plan's recompute FLOPs as a share of the model FLOPs, from `trainer plan`."""
    out = subprocess.run([trainer, "plan", "--config", config] + sets(model + overrides),
                         check=True, capture_output=True, text=True).stdout
    share = re.search(r"recompute: ([0-9.]+)% of the model FLOPs of a step", out)
    return float(share.group(1)) / 100
def run(name, overrides):
    out = f"{work}/run-{name.replace(' ', '-')}"
    subprocess.run(["mpirun"] + mpirun_flags + ["-np", "4", trainer, "train", "--config", config]
                   + sets(model + overrides + [f"output.dir={out}"]),
                   check=True, stdout=subprocess.DEVNULL)
    lines = [json.loads(l) for l in open(f"{out}/metrics.jsonl")]
    later = lines[1:] if len(lines) > 1 else lines
    return {"tokens_per_s": statistics.median(l["tokens_per_s"] for l in later),
            "measured_peak": max(max(l["rank_total_peak_bytes"]) for l in later),
            "predicted_peak": max(max(l["rank_predicted_total_peak_bytes"]) for l in later),
            "recompute_flops": sum(l["recompute_flops"] for l in later) / len(later)}
mib = lambda b: b / 2**20
results = {"presets": {}, "budgets": []}
for name, overrides in presets.items():
    r = run(name, overrides)
    r["recompute_share"] = plan(overrides)
    results["presets"][name] = r
full = results["presets"]["full uniform 1"]["predicted_peak"]
none = results["presets"]["none"]["predicted_peak"]
print("| budget MiB | planner: predicted / measured peak MiB | recompute | tok/s "
      "| best preset that fits: name, recompute, tok/s | planner / preset tok/s |")
print("|---|---|---|---|---|---|")
for fraction in (0.0, 0.2, 0.4, 0.6, 0.8):
    budget = int(full + (none - full) * fraction) + 1
    gib = budget / 2**30
    auto = ["recompute.auto=true", f"train.memory_budget_gib={gib:.12f}"]
    r = run(f"auto-{fraction}", auto)
    r["recompute_share"] = plan(auto)
    r["budget"] = budget
    fitting = {n: p for n, p in results["presets"].items() if p["predicted_peak"] <= budget}
    best = max(fitting, key=lambda n: fitting[n]["tokens_per_s"]) if fitting else None
    r["best_preset"] = best
    r["min_preset_share"] = min((p["recompute_share"] for p in fitting.values()), default=None)
    results["budgets"].append(r)
    ratio = r["tokens_per_s"] / fitting[best]["tokens_per_s"] if best else float("nan")
    best_text = (f"{best}, {100 * fitting[best]['recompute_share']:.1f}%, "
                 f"{fitting[best]['tokens_per_s']:.0f}" if best else "none fits")
    print(f"| {mib(budget):.2f} | {mib(r['predicted_peak']):.2f} / {mib(r['measured_peak']):.2f}"
          f"{'' if r['measured_peak'] <= budget else ' OVER'} | "
          f"{100 * r['recompute_share']:.1f}% | "
          f"{r['tokens_per_s']:.0f} | {best_text} | {ratio:.2f} |")
print("\npresets (predicted = measured largest per-rank total):")
for n, p in results["presets"].items():
    print(f"  {n:20s} peak {mib(p['predicted_peak']):7.2f} / {mib(p['measured_peak']):7.2f} MiB, "
          f"recompute {100 * p['recompute_share']:5.1f}%, {p['tokens_per_s']:.0f} tok/s")
json.dump(results, open(f"{root}/bench/planner.json", "w"), indent=1)
PY
