#!/usr/bin/env bash
# scripts/plot.py on its own: `sweep` on a hand-written planner sweep (tests/system/data),
# `run` on a metrics.jsonl with a non-finite loss (and then with a memory timeline) and
# `timeline` on a predicted one alone write whole PNG files; a blend's per-dataset validation
# losses are lines of loss.png; corrupt input exits 1 naming the file and line. Exits 77
# (skipped) when no python3 here imports matplotlib.
set -u
plot=$1
source "$(dirname "$0")/../script_test_util.sh"
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import matplotlib" 2>/dev/null; then python=$candidate; break; fi
done
[ -n "$python" ] || { echo "SKIP: no python3 with matplotlib"; exit 77; }

# check_png FILE: a PNG signature, IHDR first and IEND last.
check_png() {
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$1: not a PNG"
  [ "$(head -c 16 "$1" | tail -c 4)" = IHDR ] || fail "$1: no IHDR first"
  [ "$(tail -c 8 "$1" | head -c 4)" = IEND ] || fail "$1: no IEND last"
}

"$python" "$plot" sweep "$(dirname "$0")/data/sweep_fixture.json" --out "$dir/sweep" \
  > "$dir/sweep.out" 2>&1 || { cat "$dir/sweep.out"; fail "plot.py sweep failed"; }
[ "$(cat "$dir/sweep.out")" = "$dir/sweep/sweep_memory.png
$dir/sweep/sweep_frontier.png" ] || fail "plot.py sweep printed: $(cat "$dir/sweep.out")"
for png in sweep_memory sweep_frontier; do check_png "$dir/sweep/$png.png"; done
echo "sweep: sweep_memory.png and sweep_frontier.png"

mkdir -p "$dir/run"
for step in 1 2 3; do
  loss=$([ $step = 2 ] && echo nan || echo 3.$step)
  echo "{\"step\": $step, \"loss\": $loss, \"tokens_per_s\": 1000, \"model_tflops\": 1," \
       "\"hardware_tflops\": 1.2, \"peak_activation_bytes\": 2048," \
       "\"predicted_activation_peak_bytes\": 2048}" >> "$dir/run/metrics.jsonl"
done
echo '{"time": "2026-01-01T00:00:00Z", "step": 2, "rank": "all", "event": "non_finite"}' \
  > "$dir/run/events.jsonl"
"$python" "$plot" run "$dir/run" --out "$dir/run/plots" > "$dir/run.out" 2>&1 ||
  { cat "$dir/run.out"; fail "plot.py run failed on a nan loss"; }
[ "$(wc -l < "$dir/run.out")" = 4 ] || fail "plot.py run printed: $(cat "$dir/run.out")"
while read -r png; do check_png "$png"; done < "$dir/run.out"
echo "run: 4 plots with a nan loss and an event"

# A blend's per-dataset validation losses (val_loss/<name>) are lines of loss.png.
mkdir -p "$dir/blend"
for step in 1 2 3 4; do
  val=$([ $((step % 2)) = 0 ] &&
        echo ", \"val_loss\": 2.$step, \"val_loss/web\": 2.$((step + 1)), \"val_loss/web_2\": 1.$step")
  echo "{\"step\": $step, \"loss\": 3.$step, \"tokens_per_s\": 1000$val}" >> "$dir/blend/metrics.jsonl"
done
labels=$(cd "$(dirname "$plot")" && "$python" -c "
import sys, plot
rows = plot.read_jsonl(sys.argv[1] + '/metrics.jsonl', ['step', 'loss'])
print('labels: ' + '|'.join(plot.plot_loss(rows, [], sys.argv[1])))" "$dir/blend") ||
  fail "plot_loss failed on a blend: $labels"
labels=$(echo "$labels" | sed -n 's/^labels: //p')
[ "$labels" = "train loss|validation loss|validation loss, web|validation loss, web_2" ] ||
  fail "loss.png of a blend has the lines: $labels"
check_png "$dir/blend/loss.png"
echo "blend: loss.png draws val_loss, val_loss/web and val_loss/web_2"

# A memory timeline (train.memory_timeline_step): `run` adds timeline.png; `timeline` draws a
# predicted one alone.
timeline_json() {  # SOURCE: rank 0's step, a forward and a backward of microbatch 0
  cat <<JSON
{"rank": 0, "label": "rank 0 (pp 0, tp 0, cp 0, dp 0)", "source": "$1",
"start_bytes": {"param": 4096, "grad": 4096, "optimizer": 8192, "activation": 0, "workspace": 0, "comm": 0},
"peak_bytes": {"param": 4096, "grad": 4096, "optimizer": 8192, "activation": 3072, "workspace": 512, "comm": 0},
"events": [
{"seq": 0, "op": "begin", "name": "step"},
{"seq": 1, "op": "begin", "name": "forward chunk0 mb0"},
{"seq": 2, "op": "alloc", "category": "activation", "name": "ln1_out", "bytes": 2048},
{"seq": 3, "op": "alloc", "category": "workspace", "name": "qkv", "bytes": 512},
{"seq": 4, "op": "free", "category": "workspace", "name": "qkv", "bytes": 512},
{"seq": 5, "op": "alloc", "category": "activation", "name": "fc1_out", "bytes": 1024},
{"seq": 6, "op": "end", "name": "forward chunk0 mb0"},
{"seq": 7, "op": "begin", "name": "backward chunk0 mb0"},
{"seq": 8, "op": "begin", "name": "recompute L0 mb0"},
{"seq": 9, "op": "end", "name": "recompute L0 mb0"},
{"seq": 10, "op": "free", "category": "activation", "name": "fc1_out", "bytes": 1024},
{"seq": 11, "op": "free", "category": "activation", "name": "ln1_out", "bytes": 2048},
{"seq": 12, "op": "end", "name": "backward chunk0 mb0"},
{"seq": 13, "op": "end", "name": "step"}
]}
JSON
}
timeline_json measured > "$dir/run/memory_timeline_measured_rank0.json"
timeline_json predicted > "$dir/run/memory_timeline_predicted_rank0.json"
"$python" "$plot" run "$dir/run" --out "$dir/run/plots" > "$dir/run.out" 2>&1 ||
  { cat "$dir/run.out"; fail "plot.py run failed with a timeline"; }
grep -qx "$dir/run/plots/timeline.png" "$dir/run.out" || fail "run drew no timeline: $(cat "$dir/run.out")"
check_png "$dir/run/plots/timeline.png"
"$python" "$plot" timeline --predicted "$dir/run/memory_timeline_predicted" --out "$dir/alone" \
  > "$dir/alone.out" 2>&1 || { cat "$dir/alone.out"; fail "plot.py timeline --predicted failed"; }
check_png "$dir/alone/timeline.png"
echo "timeline: drawn by run, and from a prediction alone"
grep -v start_bytes "$dir/run/memory_timeline_predicted_rank0.json" > "$dir/bad_rank0.json"
"$python" "$plot" timeline --predicted "$dir/bad" --out "$dir/bad" > "$dir/bad.out" 2>&1 &&
  fail "plot.py timeline accepted a timeline without start_bytes"
grep -q "plot.py: error: $dir/bad_rank0.json: no 'start_bytes'" "$dir/bad.out" ||
  fail "timeline without start_bytes: $(cat "$dir/bad.out")"

# Corrupt input: exit 1, the file and line named.
echo '{"step": 4, "loss":' >> "$dir/run/metrics.jsonl"
"$python" "$plot" run "$dir/run" --out "$dir/run/plots" > "$dir/bad.out" 2>&1 &&
  fail "plot.py run accepted a truncated line"
grep -q "plot.py: error: $dir/run/metrics.jsonl:4: not JSON" "$dir/bad.out" ||
  fail "truncated line: $(cat "$dir/bad.out")"
echo '{"config": "x.yaml", "key": "model.seq_length", "rows": [{"value": "1"}]}' > "$dir/bad.json"
"$python" "$plot" sweep "$dir/bad.json" --out "$dir/bad" > "$dir/bad.out" 2>&1 &&
  fail "plot.py sweep accepted a row without peak_bytes"
grep -q "plot.py: error: $dir/bad.json: rows\[0\]: no 'peak_bytes'" "$dir/bad.out" ||
  fail "row without peak_bytes: $(cat "$dir/bad.out")"
echo "corrupt input: file and line named, exit 1"
echo "PASS"
