#!/usr/bin/env bash
# The layout search (`trainer plan --search`, docs/layout_search.md), measured two ways.
# (a) Speed and answers at scale: the 1.3B, 7B and Llama 3 8B GPU configs at 8, 64 and 512 ranks
#     under 64 GiB per rank (an 80 GB H100 less headroom), roofline times, stated links; the
#     table and the search's own time. At 512 ranks the global batch is raised so that every
#     replica gets samples (1.3B: 1024 x 2048 tokens, 7B: 512 x 4096, Llama: 256 x 8192; about 2M
#     tokens a step).
# (b) Prediction against measurement on this machine: an 8-layer hidden-128 seq-256 model under
#     a budget that makes recompute matter; `trainer calibrate` for every rank shape the 1- and
#     2-rank layouts use (2 threads for one rank; for two ranks, 1 thread each and both ranks
#     calibrating side by side under mpirun, so that tensor-parallel collectives are measured
#     over the real peer and the ranks share the cores as in the runs), the search with those
#     profiles at --ranks 1 and 2 (2 under mpirun, which measures the links) listing every layout
#     that fits (--top 100), then ROUNDS rounds of a short training run of each of them, the
#     layouts interleaved within each round (each run's median step_ms after the first step; a
#     layout's measurement is the median over the rounds). This VM's speed drifts over
#     minutes, so each run plans and predicts with a profile of its shape calibrated just
#     before it. Then: the search's prediction against the measured step time; each run
#     against its own prediction; the order, Spearman's rank correlation (raw, and with each
#     run scaled to its shape's median calibrated speed), and how many of the pairs of layouts
#     whose rounds do not overlap (the pairs the measurement tells apart) the prediction orders
#     the same; and the same for the search run again with each rank shape at its median
#     calibration (of the shape's calibrations before the runs and before each of its runs).
#     Writes bench/search.json.
# Usage: scripts/bench_search.sh [STEPS] [ROUNDS]   (part (b)'s steps per run, default 6, and
#        rounds, default 3)
set -euo pipefail
source "$(dirname "$0")/common.sh"
corpus_benchmark 400000 "$@" <<'PY'
import json, os, re, shutil, statistics, subprocess, time
from bench_args import mpirun_flags, root, steps, trainer, work
from bench_args import reps as rounds
from rank_correlation import at_speed, calibrated_layer_ms, separated_pairs, spearman
ROW = re.compile(r"^\s+(\d+) \|\s+(\d+) \|\s+(\d+) \|\s+(\d+) \|\s+(\d+) \|\s+(\d+) \|\s+(on|-) \|"
                 r"\s+(\d+) \|\s+(on|-) \|\s+([0-9.]+ [KMG]?i?B) \|\s+([0-9.]+) \|\s+([0-9.]+) \|"
                 r"\s+([0-9.]+) \|\s+([0-9.]+) \| (\w+)$")
KEYS = ["tp", "cp", "pp", "vp", "dp", "sp", "micro", "dist_opt", "memory", "step_ms",
        "tokens_per_s", "mfu", "recompute_percent", "times"]

def sets(overrides):
    return [a for o in overrides for a in ("--set", o)]

def search(config, ranks, budget_gib, extra, env=None, launch=()):
    """Runs the search (under `launch`, e.g. mpirun); its output, rows and the time it reports."""
    out = subprocess.run(list(launch) + [trainer, "plan", "--config", config, "--search",
                                         "--ranks", str(ranks), "--budget-gib", str(budget_gib)]
                         + extra, check=True, capture_output=True, text=True, env=env).stdout
    rows = []
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            v = m.groups()[1:]
            rows.append({k: (x == "on" if k in ("sp", "dist_opt") else
                             x if k in ("memory", "times") else
                             float(x) if "." in x else int(x)) for k, x in zip(KEYS, v)})
    seconds = float(re.search(r"searched in ([0-9.]+) s", out).group(1))
    return out, rows, seconds

results = {"scale": [], "cpu": {}}

# (a) -------------------------------------------------------------------------------------------
print("== (a) the GPU configs, 64 GiB per rank, roofline times, stated links")
batch_at_512 = {"gpt_1p3b_gpu": 1024, "gpt_7b_8gpu": 512, "llama3_8b_8gpu": 256}
for name in ("gpt_1p3b_gpu", "gpt_7b_8gpu", "llama3_8b_8gpu"):
    for ranks in (8, 64, 512):
        extra = sets([f"train.global_batch_size={batch_at_512[name]}"]) if ranks == 512 else []
        start = time.time()
        out, rows, seconds = search(f"{root}/configs/{name}.yaml", ranks, 64, extra)
        wall = time.time() - start
        print(f"\n-- {name}, {ranks} ranks{' (global batch ' + str(batch_at_512[name]) + ')' if extra else ''}:"
              f" searched in {seconds:.2f} s ({wall:.2f} s with the process)")
        first = not results["scale"]  # what is not modelled: printed once
        print("\n".join(l for l in out.splitlines()
                        if first or ROW.match(l) or l.startswith("  rank")
                        or not (l.startswith("  ") or l.startswith("not modelled"))))
        results["scale"].append({"config": name, "ranks": ranks, "overrides": extra,
                                 "search_s": seconds, "process_s": wall, "rows": rows,
                                 "counts": re.search(r"layouts: (.*);", out).group(1)})

# (b) -------------------------------------------------------------------------------------------
print("\n== (b) this machine: predicted against measured step time")
config = f"{root}/configs/tiny.yaml"
budget_gib = 0.07
model = ["model.num_layers=8", "model.hidden_size=128", "model.num_attention_heads=4",
         "model.seq_length=256", "train.micro_batch_size=4", "train.global_batch_size=8",
         "model.hidden_dropout=0.0", "model.attention_dropout=0.0"]
run_settings = [f"train.steps={steps}", "train.eval_interval=0", "train.log_interval=1000",
                "optimizer.lr_warmup_steps=0", "output.export=false", f"data.path={work}/data"]
threads = {1: "2", 2: "1"}  # OpenMP threads per rank: the machine's 2 cores either way

def env_for(ranks):  # the trainer chooses its OpenMP wait policy (Note [OpenMP wait policy])
    env = dict(os.environ, OMP_NUM_THREADS=threads[ranks])
    env.pop("OMP_WAIT_POLICY", None)
    return env

def profile_path(ranks, tp, sp, micro):
    return f"{work}/profile_r{ranks}_tp{tp}_{'sp' if sp else 'nosp'}_mb{micro}.json"

def calibrate(ranks, tp, sp, micro, path):
    """Two ranks calibrate side by side: one tp2 group, or two tp1 replicas."""
    launch = ["mpirun"] + mpirun_flags + ["-np", str(ranks)] if ranks > 1 else []
    subprocess.run(launch + [trainer, "calibrate", "--config", config, "--out", path]
                   + sets(model + [f"parallel.tensor={tp}",
                                   f"parallel.sequence_parallel={str(sp).lower()}",
                                   f"train.micro_batch_size={micro}"]),
                   check=True, stdout=subprocess.DEVNULL, env=env_for(ranks))

# Every rank shape the layouts of 1 and 2 ranks can have: tp 1 or 2, sp with tp 2, the micro
# batch a divisor of the global batch 8 (cp needs flash attention, which this model does not use).
start = time.time()
for ranks in (1, 2):
    for tp in ((1,) if ranks == 1 else (1, 2)):
        for sp in ((False,) if tp == 1 else (False, True)):
            for micro in (1, 2, 4, 8):
                calibrate(ranks, tp, sp, micro, profile_path(ranks, tp, sp, micro))
print(f"calibrated every shape in {time.time() - start:.1f} s")

def search_rows(ranks, profiles, label):
    """The search on `ranks` ranks with `profiles` listing every layout that fits (not only
    the fastest ten: the order is asked of all of them), each row named."""
    extra = sets(model) + ["--top", "100"] + [a for p in profiles for a in ("--profile", p)]
    # Two ranks search under mpirun: the comm model takes the links the ranks measure.
    launch = ["mpirun"] + mpirun_flags + ["-np", str(ranks)] if ranks > 1 else []
    out, rows, seconds = search(config, ranks, budget_gib, extra, env_for(ranks), launch)
    print(f"\n-- search on {ranks} rank{'s' if ranks > 1 else ''} under {budget_gib} GiB, {label}:")
    print("\n".join(l for l in out.splitlines() if ROW.match(l) or l.startswith("  rank")
                    or l.startswith("layouts") or l.startswith("links")))
    for row in rows:
        row["ranks"] = ranks
        row["name"] = (f"r{ranks}-tp{row['tp']}-pp{row['pp']}-vp{row['vp']}-dp{row['dp']}"
                       f"-{'sp' if row['sp'] else 'nosp'}-mb{row['micro']}"
                       f"-{'dist' if row['dist_opt'] else 'nodist'}")
    return rows

def shape_of(row):
    return (row["ranks"], row["tp"], row["sp"], row["micro"])

measured_rows = []
shape_profiles = {}  # every calibration of a rank shape in this bench, in order
for ranks in (1, 2):
    for tp in ((1,) if ranks == 1 else (1, 2)):
        for sp in ((False,) if tp == 1 else (False, True)):
            for micro in (1, 2, 4, 8):
                shape_profiles[(ranks, tp, sp, micro)] = [profile_path(ranks, tp, sp, micro)]
    profiles = [p for (r, *_), paths in shape_profiles.items() if r == ranks for p in paths]
    for row in search_rows(ranks, profiles, "each shape calibrated once, before the runs"):
        row["runs_step_ms"] = []
        row["runs_predicted_step_ms"] = []
        row["runs_calibrated_layer_ms"] = []
        measured_rows.append(row)
def train_once(row, round_index):
    """One short run of the layout of `row` on a profile of its shape calibrated just before it
    (this VM's speed drifts over minutes): its median step_ms after the first step, its own
    prediction, and the profile's layer time (how fast the machine was)."""
    ranks = row["ranks"]
    profile = f"{work}/run-profile-{row['name']}-{round_index}.json"
    calibrate(ranks, row["tp"], row["sp"], row["micro"], profile)
    shape_profiles[shape_of(row)].append(profile)
    layout = [f"parallel.tensor={row['tp']}", f"parallel.context={row['cp']}",
              f"parallel.pipeline={row['pp']}", f"parallel.virtual_pipeline={row['vp']}",
              f"parallel.data={row['dp']}",
              f"parallel.sequence_parallel={str(row['sp']).lower()}",
              f"train.micro_batch_size={row['micro']}",
              f"optimizer.distributed={str(row['dist_opt']).lower()}",
              # The run plans its recompute as the search did, under the same budget.
              "recompute.auto=true", f"train.memory_budget_gib={budget_gib}",
              f"train.time_profile={profile}"]
    outdir = f"{work}/run-{row['name']}"
    subprocess.run(["rm", "-rf", outdir], check=True)
    subprocess.run(["mpirun"] + mpirun_flags + ["-np", str(ranks), trainer, "train",
                    "--config", config] + sets(model + run_settings + layout +
                                               [f"output.dir={outdir}"]),
                   check=True, stdout=subprocess.DEVNULL, env=env_for(ranks))
    lines = [json.loads(l) for l in open(f"{outdir}/metrics.jsonl")]
    later = lines[1:] if len(lines) > 1 else lines
    row["runs_predicted_step_ms"].append(later[0]["predicted_step_ms"])
    row["runs_calibrated_layer_ms"].append(calibrated_layer_ms(profile))
    row["runs_step_ms"].append(statistics.median(l["step_ms"] for l in later))
# Rounds of every layout in turn, so that the machine's drift over minutes falls on all alike.
start = time.time()
for round_index in range(rounds):
    for row in measured_rows:
        train_once(row, round_index)
# At the calibrated speed: each run's measured and predicted step scaled by its profile's layer
# time against the median of its shape's (the same shape calibrated at different times
# measures how fast the machine was).
shape_speed = {}
for row in measured_rows:
    shape_speed.setdefault(shape_of(row), []).extend(row["runs_calibrated_layer_ms"])
for row in measured_rows:
    speed = statistics.median(shape_speed[shape_of(row)])
    row["measured_step_ms"] = statistics.median(row["runs_step_ms"])
    row["run_error"] = statistics.median(
        p / m - 1 for p, m in zip(row["runs_predicted_step_ms"], row["runs_step_ms"]))
    row["predicted_step_ms_at_median_speed"] = at_speed(
        row["runs_predicted_step_ms"], row["runs_calibrated_layer_ms"], speed)
    row["step_ms_at_median_speed"] = at_speed(row["runs_step_ms"], row["runs_calibrated_layer_ms"],
                                              speed)
print(f"\nmeasured {len(measured_rows)} layouts x {rounds} rounds in {time.time() - start:.0f} s")

# The search again, each rank shape priced by its median calibration: of every calibration of
# the shape in this bench (before the runs, and before each run of a layout of that shape), the
# one at the median layer time. One calibration of a shape caught at a slow or fast moment of
# this VM moves every layout of that shape; the median one does not. No run's measurement
# enters these profiles.
median_dir = f"{work}/median"
os.makedirs(median_dir, exist_ok=True)
median_profiles = {}
for shape, paths in shape_profiles.items():
    ordered = sorted(paths, key=calibrated_layer_ms)
    chosen = f"{median_dir}/{os.path.basename(profile_path(*shape))}"
    shutil.copyfile(ordered[len(ordered) // 2], chosen)
    median_profiles.setdefault(shape[0], []).append(chosen)
for ranks in (1, 2):
    again = {row["name"]: row for row in search_rows(ranks, median_profiles[ranks],
                                                      "each shape at its median calibration")}
    for row in measured_rows:
        if row["ranks"] == ranks:
            row["median_profile_step_ms"] = again[row["name"]]["step_ms"]

print("\n| layout | search's predicted ms (first calibration; median calibration) |"
      " measured ms (rounds) | runs' predicted ms | runs' error |"
      " predicted / measured ms at the median calibrated speed |")
print("|---|---|---|---|---|---|")
for r in measured_rows:
    runs = ", ".join(f"{x:.0f}" for x in r["runs_step_ms"])
    run_preds = ", ".join(f"{x:.0f}" for x in r["runs_predicted_step_ms"])
    print(f"| {r['name']} | {r['step_ms']:.1f}; {r['median_profile_step_ms']:.1f} |"
          f" {r['measured_step_ms']:.1f} ({runs}) |"
          f" {run_preds} | {100 * r['run_error']:+.0f}% |"
          f" {r['predicted_step_ms_at_median_speed']:.1f} / {r['step_ms_at_median_speed']:.1f} |")
summary = {}
for label, subset in (("1 rank", [r for r in measured_rows if r["ranks"] == 1]),
                      ("2 ranks", [r for r in measured_rows if r["ranks"] == 2]),
                      ("all", measured_rows)):
    predicted = [r["step_ms"] for r in subset]
    measured = [r["measured_step_ms"] for r in subset]
    same = (sorted(range(len(subset)), key=lambda i: predicted[i]) ==
            sorted(range(len(subset)), key=lambda i: measured[i]))
    rho = spearman(predicted, measured) if len(subset) > 1 else float("nan")
    rho_at = spearman([r["predicted_step_ms_at_median_speed"] for r in subset],
                      [r["step_ms_at_median_speed"] for r in subset]) if len(subset) > 1 \
        else float("nan")
    agreeing, separated = separated_pairs(predicted, [r["runs_step_ms"] for r in subset])
    at_median = [r["median_profile_step_ms"] for r in subset]
    rho_median = spearman(at_median, measured) if len(subset) > 1 else float("nan")
    agreeing_median, _ = separated_pairs(at_median, [r["runs_step_ms"] for r in subset])
    summary[label] = {"layouts": len(subset), "same_order": same, "spearman": rho,
                      "spearman_at_calibrated_speed": rho_at, "separated_pairs": separated,
                      "separated_pairs_in_order": agreeing,
                      "spearman_median_calibration": rho_median,
                      "separated_pairs_in_order_median_calibration": agreeing_median,
                      "largest_run_error": max(abs(r["run_error"]) for r in subset)}
    print(f"{label}: {len(subset)} layouts, predicted order {'equals' if same else 'differs from'}"
          f" the measured order, Spearman {rho:.2f} ({rho_at:.2f} at the calibrated speed);"
          f" {agreeing} of the {separated} pairs whose rounds do not overlap predicted in their"
          f" order; runs within {100 * summary[label]['largest_run_error']:.0f}% of their own"
          " predictions")
    print(f"  searched with each shape's median calibration: Spearman {rho_median:.2f};"
          f" {agreeing_median} of the {separated} separated pairs in their order")
load = open("/proc/loadavg").read().split()[:3]
print(f"load average at the end: {' '.join(load)}")
results["cpu"] = {"budget_gib": budget_gib, "steps": steps, "rounds": rounds, "rows": measured_rows,
                  "summary": summary, "load_average_end": load}
json.dump(results, open(f"{root}/bench/search.json", "w"), indent=1)
print(f"wrote {root}/bench/search.json")
PY
