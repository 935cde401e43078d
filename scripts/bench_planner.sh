#!/usr/bin/env bash
# The recompute planner against Megatron's presets, by measured tokens/s, in one run: an 8-layer
# model (hidden 128, seq 256, dropout 0.1, 8 microbatches of 2) on one process and on a 4-stage
# 1F1B pipeline (4 ranks oversubscribed on this machine's cores). Each one-process run plans
# and predicts with a profile `trainer calibrate` measured just before it; the pipeline's runs
# with one per rep, measured by its 4 ranks side by side under mpirun. Five budgets from full
# recompute's predicted total to none's; at each, the time planner (train.plan_objective time)
# and the FLOPs planner beside the fastest preset that fits. Every configuration runs REPS
# times, interleaved (rep 1 of every config, then rep 2, ...), and its tokens/s is the median
# over reps of each run's median step after the first. Then the step-time prediction against
# the measurement on one process, for every preset and three planned budgets, unfused and
# flash: the error of each (the median over reps of each run's against its own prediction) and
# the rank correlation, raw, over the pairs the runs separate, and at the machine's calibrated
# speed. Writes bench/planner.json.
# Usage: scripts/bench_planner.sh [STEPS] [REPS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
corpus_benchmark 400000 "$@" <<'PY'
import json, statistics, subprocess
from bench_args import mpirun_flags, reps, root, steps, trainer, work
from rank_correlation import at_speed, calibrated_layer_ms, separated_pairs, spearman
config = f"{root}/configs/tiny.yaml"
shape = ["model.num_layers=8", "model.hidden_size=128", "model.num_attention_heads=4",
         "model.seq_length=256", "model.hidden_dropout=0.1", "model.attention_dropout=0.1",
         "train.micro_batch_size=2", "train.global_batch_size=16"]
run_only = [f"train.steps={steps}", "train.eval_interval=0", "train.log_interval=1000",
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
layouts = {"1 process": ["parallel.pipeline=1"], "pp4": ["parallel.pipeline=4"]}
backends = {"unfused": ["model.attention_backend=unfused"],
            "flash": ["model.attention_backend=flash"]}
fractions = (0.0, 0.2, 0.4, 0.6, 0.8)
accuracy_fractions = (0.0, 0.4, 0.8)

def sets(overrides):
    return [a for o in overrides for a in ("--set", o)]

def predicted_peak(overrides):
    """The largest predicted per-rank total (bytes) of a config, from `trainer plan`."""
    out = subprocess.run([trainer, "plan", "--config", config] + sets(overrides) +
                         ["--set", "train.memory_budget_gib=1000"],
                         check=True, capture_output=True, text=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("  largest total"))
    return int(line.split("(")[1].split()[0])

# This VM runs at two speeds about 27% apart that change over minutes (one process's steps of
# one config ran at 373 ms, then at 475 ms from one step to the next, the machine otherwise
# idle). So each one-process run plans and predicts with a profile calibrated just before it,
# and its prediction and its measurement see the machine alike; the pipeline's runs, whose
# predictions are not compared, share a profile per rep, calibrated by their 4 ranks side by
# side under mpirun as they run.
def calibrate(layout, backend, rep):
    path = f"{work}/profile-{layout}-{backend}-{rep}.json".replace(" ", "_")
    launch = ["mpirun"] + mpirun_flags + ["-np", "4"] if layout == "pp4" else []
    subprocess.run(launch + [trainer, "calibrate", "--config", config, "--out", path]
                   + sets(shape + layouts[layout] + backends[backend]),
                   check=True, stdout=subprocess.DEVNULL)
    return path

# The configurations: (layout, backend) -> name -> overrides.
configs = {}
budgets = {}
for layout, l in layouts.items():
    for backend, b in backends.items():
        if layout == "pp4" and backend == "flash":
            continue  # the pipeline comparison runs unfused only
        base = shape + l + b
        group = {name: base + o for name, o in presets.items()}
        full = predicted_peak(group["full uniform 1"])
        none = predicted_peak(group["none"])
        wanted = fractions if backend == "unfused" else accuracy_fractions
        for fraction in wanted:
            budget = int(full + (none - full) * fraction) + 1
            budgets[(layout, backend, fraction)] = budget
            auto = ["recompute.auto=true", f"train.memory_budget_gib={budget / 2**30:.12f}"]
            group[f"time planner {fraction}"] = base + auto + ["train.plan_objective=time"]
            if backend == "unfused":
                group[f"flops planner {fraction}"] = base + auto + ["train.plan_objective=flops"]
        configs[(layout, backend)] = group

def run(layout, name, overrides, rep, profile):
    out = f"{work}/run-{layout}-{name}-{rep}".replace(" ", "_")
    cmd = [trainer, "train", "--config", config] + sets(
        overrides + run_only + [f"train.time_profile={profile}", f"output.dir={out}"])
    if layout == "pp4":
        cmd = ["mpirun"] + mpirun_flags + ["-np", "4"] + cmd
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    lines = [json.loads(x) for x in open(f"{out}/metrics.jsonl")]
    later = lines[1:] if len(lines) > 1 else lines
    return {"step_ms": statistics.median(x["step_ms"] for x in later),
            # the machine's speed just before the run (the same shapes for every config of a
            # layout and backend)
            "calibrated_layer_ms": calibrated_layer_ms(profile),
            "tokens_per_s": statistics.median(x["tokens_per_s"] for x in later),
            "predicted_step_ms": later[0]["predicted_step_ms"],
            "measured_peak": max(total(x, "peak_{}_bytes", "rank_total_peak_bytes") for x in later),
            "predicted_peak": max(total(x, "predicted_{}_peak_bytes",
                                        "rank_predicted_total_peak_bytes") for x in later)}

categories = ("param", "grad", "optimizer", "activation", "workspace", "comm")
def total(line, per_category, per_rank):
    """The largest per-rank total of a metrics line: every rank's with several, else this one's."""
    if per_rank in line:
        return max(line[per_rank])
    return sum(line[per_category.format(c)] for c in categories)

samples = {}
for rep in range(reps):
    for (layout, backend), group in configs.items():
        shared = calibrate(layout, backend, rep) if layout == "pp4" else None
        for name, overrides in group.items():
            profile = shared or calibrate(layout, backend, rep)
            samples.setdefault((layout, backend, name), []).append(
                run(layout, name, overrides, rep, profile))

def summary(key):
    s = samples[key]
    return {"tokens_per_s": statistics.median(x["tokens_per_s"] for x in s),
            "step_ms": statistics.median(x["step_ms"] for x in s),
            "predicted_step_ms": statistics.median(x["predicted_step_ms"] for x in s),
            # each run against its own prediction (from the profile calibrated just before it)
            "error": statistics.median(x["predicted_step_ms"] / x["step_ms"] - 1 for x in s),
            "runs_step_ms": [x["step_ms"] for x in s],
            "runs_predicted_step_ms": [x["predicted_step_ms"] for x in s],
            "runs_tokens_per_s": [x["tokens_per_s"] for x in s],
            "runs_calibrated_layer_ms": [x["calibrated_layer_ms"] for x in s],
            "measured_peak": max(x["measured_peak"] for x in s),
            "predicted_peak": max(x["predicted_peak"] for x in s)}

results = {"steps": steps, "reps": reps, "layouts": {}, "accuracy": {}}
mib = lambda b: b / 2**20
for layout in layouts:
    key = (layout, "unfused")
    rows = []
    print(f"\n{layout} (unfused): tokens/s, median of {reps} interleaved runs")
    print("| budget MiB | time planner: peak MiB, tok/s | FLOPs planner tok/s | best preset that fits, "
          "tok/s | time / preset | time / FLOPs |")
    print("|---|---|---|---|---|---|")
    preset_summaries = {n: summary((layout, "unfused", n)) for n in presets}
    for fraction in fractions:
        budget = budgets[(layout, "unfused", fraction)]
        t = summary((layout, "unfused", f"time planner {fraction}"))
        f = summary((layout, "unfused", f"flops planner {fraction}"))
        fitting = {n: p for n, p in preset_summaries.items() if p["predicted_peak"] <= budget}
        best = max(fitting, key=lambda n: fitting[n]["tokens_per_s"]) if fitting else None
        ratio = t["tokens_per_s"] / fitting[best]["tokens_per_s"] if best else float("nan")
        over = t["measured_peak"] > budget
        print(f"| {mib(budget):.2f} | {mib(t['measured_peak']):.2f}{' OVER' if over else ''}, "
              f"{t['tokens_per_s']:.0f} | {f['tokens_per_s']:.0f} | "
              f"{best}, {fitting[best]['tokens_per_s']:.0f} | {ratio:.2f} | "
              f"{t['tokens_per_s'] / f['tokens_per_s']:.2f} |")
        rows.append({"budget": budget, "time_planner": t, "flops_planner": f, "best_preset": best,
                     "best_preset_tokens_per_s": fitting[best]["tokens_per_s"] if best else None,
                     "ratio_to_preset": ratio, "over_budget": over})
    results["layouts"][layout] = {"budgets": rows, "presets": preset_summaries}


# The ranking, three ways. Raw: the medians above, whose runs met the machine in either of its
# speeds. Separated pairs: of the pairs of configs whose runs do not overlap, how many the
# prediction orders the same. At the calibrated speed: every run's predicted and measured step
# divided by its own profile's layer time over the median of those (how fast the machine was
# just before that run, the same measurement for every config of a backend), then the medians.
pooled = {"raw": ([], []), "calibrated speed": ([], [])}
for backend in backends:
    print(f"\nstep time on one process ({backend}): predicted against measured (medians over the"
          " reps; the error is the median of each run's against its own prediction; the last two"
          " columns at the machine's median calibrated speed)")
    print("| config | predicted ms | measured ms | error | predicted ms, median speed |"
          " measured ms, median speed |")
    print("|---|---|---|---|---|---|")
    names = list(presets) + [f"time planner {f}" for f in accuracy_fractions]
    speed = statistics.median(v for n in names
                              for v in summary(("1 process", backend, n))["runs_calibrated_layer_ms"])
    predicted, measured, runs, scaled, entries = [], [], [], ([], []), []
    for name in names:
        s = summary(("1 process", backend, name))
        error = s["error"]
        p_at = at_speed(s["runs_predicted_step_ms"], s["runs_calibrated_layer_ms"], speed)
        m_at = at_speed(s["runs_step_ms"], s["runs_calibrated_layer_ms"], speed)
        print(f"| {name} | {s['predicted_step_ms']:.1f} | {s['step_ms']:.1f} | {100 * error:+.1f}% |"
              f" {p_at:.1f} | {m_at:.1f} |")
        predicted.append(s["predicted_step_ms"])
        measured.append(s["step_ms"])
        runs.append(s["runs_step_ms"])
        scaled[0].append(p_at)
        scaled[1].append(m_at)
        entries.append({"config": name, "predicted_step_ms": s["predicted_step_ms"],
                        "step_ms": s["step_ms"], "error": error,
                        "predicted_step_ms_at_median_speed": p_at,
                        "step_ms_at_median_speed": m_at,
                        "runs_predicted_step_ms": s["runs_predicted_step_ms"],
                        "runs_step_ms": s["runs_step_ms"],
                        "runs_calibrated_layer_ms": s["runs_calibrated_layer_ms"]})
    rho = spearman(predicted, measured)
    rho_at = spearman(*scaled)
    agreeing, separated = separated_pairs(predicted, runs)
    worst = max(abs(e["error"]) for e in entries)
    print(f"largest error {100 * worst:.1f}%; Spearman rank correlation {rho:.3f} raw, {rho_at:.3f}"
          f" at the calibrated speed; {agreeing} of the {separated} pairs the runs separate"
          " predicted in their order")
    for way, (p, m) in (("raw", (predicted, measured)), ("calibrated speed", scaled)):
        pooled[way][0].extend(p)
        pooled[way][1].extend(m)
    results["accuracy"][backend] = {"configs": entries, "spearman": rho,
                                    "spearman_at_calibrated_speed": rho_at,
                                    "separated_pairs": separated,
                                    "separated_pairs_in_order": agreeing, "largest_error": worst}
rho, rho_at = spearman(*pooled["raw"]), spearman(*pooled["calibrated speed"])
print(f"\nunfused and flash together: Spearman rank correlation {rho:.3f} raw, {rho_at:.3f} at the"
      " calibrated speed")
results["accuracy"]["pooled_spearman"] = rho
results["accuracy"]["pooled_spearman_at_calibrated_speed"] = rho_at
json.dump(results, open(f"{root}/bench/planner.json", "w"), indent=1)
PY
