#!/usr/bin/env python3
# The summary of scripts/gpu_check.sh run, from the files its steps left: OUT/gpu_check.json
# (`WORK OUT LIMIT_S ELAPSED_S`, written whole, then renamed), or a few lines of it for a reader
# (`--brief JSON`).
import json
import os
import re
import sys

# bench_gpu presets beside the PyTorch peer's modes (bench/peers/gpt_torch.py): the same
# attention and recompute, then our fastest preset beside PyTorch's fastest attention.
PAIRS = [("none", "eager"), ("full uniform 1", "checkpoint"), ("flash none", "sdpa"),
         ("none", "sdpa")]
GTEST = {"passed": r"^\[       OK \] .* ms\)$", "failed": r"^\[  FAILED  \] .* ms\)$",
         "skipped": r"^\[  SKIPPED \] .* ms\)$"}


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def steps(work):
    rows = []
    for line in read_lines(os.path.join(work, "steps.tsv")):
        name, status, code, seconds, limit = line.split("\t")
        rows.append({"name": name, "status": status, "exit_code": int(code) if code else None,
                     "seconds": int(seconds), "limit_s": int(limit)})
    return rows


def log_sections(path):
    """The "=== NAME" sections of a log: {name: [lines]} (a name run twice: its last run)."""
    sections, name = {}, None
    for line in read_lines(path):
        if line.startswith("=== "):
            name = line[4:]
            sections[name] = []
        elif name is not None:
            sections[name].append(line)
    return sections


def tests(out, step_rows):
    sections = log_sections(os.path.join(out, "tests.log"))
    result = []
    for step in step_rows:
        if not step["name"].startswith("test "):
            continue
        lines = sections.get(step["name"], [])
        counts = {k: sum(bool(re.match(p, line)) for line in lines) for k, p in GTEST.items()}
        result.append({"binary": step["name"][5:], "status": step["status"],
                       "exit_code": step["exit_code"], **counts})
    return result


def train(work):
    def losses(run):
        values = []
        for line in read_lines(os.path.join(work, run, "metrics.jsonl")):
            try:
                values.append(json.loads(line)["loss"])
            except (ValueError, KeyError):
                pass
        return values
    cpu, gpu = losses("cpu"), losses("gpu")
    worst = max((abs(a - b) / abs(a) for a, b in zip(cpu, gpu) if a), default=None)
    return {"precision": "fp32", "cpu_losses": cpu, "gpu_losses": gpu,
            "max_relative_loss_difference": worst}


def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def compare(ours, peer):
    """bench_gpu's throughput table beside the peer's runs, with our/PyTorch ratios."""
    our_runs = {r.get("preset"): r for r in ((ours or {}).get("throughput") or {}).get("runs", [])}
    peer_runs = {r.get("mode"): r for r in (peer or {}).get("runs", [])}
    rows = []
    for preset, mode in PAIRS:
        a, b = our_runs.get(preset, {}), peer_runs.get(mode, {})
        rows.append({
            "ours": preset, "pytorch": mode,
            "ours_tokens_per_s": a.get("tokens_per_s"), "pytorch_tokens_per_s":
            b.get("tokens_per_s"), "ours_mfu": a.get("mfu"), "pytorch_mfu": b.get("mfu"),
            "ours_peak_live_bytes": a.get("peak_live_bytes"),
            "pytorch_peak_allocated_bytes": b.get("peak_allocated_bytes"),
            "tokens_per_s_ratio": ratio(a.get("tokens_per_s"), b.get("tokens_per_s")),
            "peak_memory_ratio": ratio(a.get("peak_live_bytes"), b.get("peak_allocated_bytes")),
        })
    return {"ours": ours, "pytorch": peer, "ratios": rows}


def summary(work, out, limit_s, elapsed_s):
    step_rows = steps(work)
    missing = [line.split(" ") for line in read_lines(os.path.join(work, "missing.txt"))]
    return {
        "device": (read_lines(os.path.join(work, "device.txt")) or [""])[0],
        "limit_s": limit_s, "elapsed_s": elapsed_s,
        "complete": bool(step_rows) and all(s["status"] == "ok" for s in step_rows),
        "libraries": {
            "searched": read_lines(os.path.join(work, "library_dirs.txt")),
            "ld_library_path": read_lines(os.path.join(work, "library_path.txt")),
            "missing": [{"library": m[0], "needed_by": m[1]} for m in missing if len(m) == 2],
        },
        "steps": step_rows,
        "tests": tests(out, step_rows),
        "train": train(work),
        "bench": compare(read_json(os.path.join(out, "bench_gpu.json")),
                         read_json(os.path.join(out, "bench_peers.json"))),
    }


def brief(path):
    s = read_json(path)
    if s is None:
        print(f"gpu_check: no summary in {path}")
        return 1
    print(f"gpu_check: {'complete' if s['complete'] else 'INCOMPLETE'} in {s['elapsed_s']} s "
          f"of {s['limit_s']} s on {s['device']}")
    for t in s["tests"]:
        print(f"  {t['binary']}: {t['status']}, {t['passed']} passed, {t['failed']} failed, "
              f"{t['skipped']} skipped")
    for step in s["steps"]:
        if step["name"].startswith("sanitize "):
            print(f"  {step['name']}: {step['status']} in {step['seconds']} s")
    print(f"  loss, largest relative CPU/GPU difference: "
          f"{s['train']['max_relative_loss_difference']}")
    for r in s["bench"]["ratios"]:
        print(f"  {r['ours']} / PyTorch {r['pytorch']}: tokens/s {r['ours_tokens_per_s']} / "
              f"{r['pytorch_tokens_per_s']} = {r['tokens_per_s_ratio']}")
    return 0


def main(argv):
    if len(argv) == 2 and argv[0] == "--brief":
        return brief(argv[1])
    if len(argv) != 4:
        print("usage: gpu_check_summary.py WORK OUT LIMIT_S ELAPSED_S | --brief JSON",
              file=sys.stderr)
        return 2
    path = os.path.join(argv[1], "gpu_check.json")
    with open(path + ".tmp", "w") as f:
        json.dump(summary(argv[0], argv[1], int(argv[2]), int(argv[3])), f, indent=1,
                  allow_nan=False)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
