#!/usr/bin/env bash
# A dry run of scripts/gpu_check.sh's device half on a machine without a GPU: the carried bundle
# holds stubs in place of the GPU binaries (gtest-style lines, a stub bench_gpu and PyTorch peer
# writing JSON, one compiled stub whose library sits in a Python wheel's nvidia/cu13/lib). Checks
# that the summary is valid JSON with every step's status, that the per-step limit and the overall
# deadline cut a stub that sleeps and skip what finds no time left, and that a missing library
# stops the run before anything runs, named in the log. Usage: gpu_check_dry_run.sh CXX
set -u
cxx=$1
trainer=unused  # script_test_util.sh's synthetic_data is not used here
source "$(dirname "$0")/../script_test_util.sh"
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/gpu_check.sh"

# The stubs. test_gpu_0slow runs first and sleeps past any limit it gets.
mkdir -p "$dir/stage/bin" "$dir/stage/lib" "$dir/site/nvidia/cu13/lib" "$dir/carry"
stub() {  # stub NAME < BODY: an executable shell script in the bundle's bin/
  { echo '#!/usr/bin/env bash'; cat; } > "$dir/stage/bin/$1" && chmod +x "$dir/stage/bin/$1"
}
stub test_gpu_0slow <<'SH'
echo "[ RUN      ] Slow.Sleeps"
exec sleep 100
SH
stub test_gpu_a <<'SH'
printf '[       OK ] A.One (1 ms)\n[       OK ] A.Two (2 ms)\n[  SKIPPED ] A.Three (0 ms)\n'
SH
stub test_gpu_b <<'SH'
printf '[       OK ] B.One (1 ms)\n[  FAILED  ] B.Two (3 ms)\n'
exit 1
SH
# trainer: prepare-data succeeds; train writes 3 losses to output.dir, the GPU's 1% higher.
stub trainer <<'SH'
out='' scale=1
for a in "$@"; do
  case $a in output.dir=*) out=${a#output.dir=} ;; train.device=cuda) scale=1.01 ;; esac
done
[ "$1" = train ] || exit 0
mkdir -p "$out" && awk -v s=$scale 'BEGIN {for (l = 4; l > 1; l--) print "{\"loss\": " l * s "}"}' \
  > "$out/metrics.jsonl"
SH
stub bench_gpu <<'SH'
echo "$@" > "$(dirname "$1")/bench_gpu.args"
echo '{"throughput": {"runs": [{"preset": "none", "tokens_per_s": 3000, "mfu": 0.3,
  "peak_live_bytes": 100}, {"preset": "flash none", "tokens_per_s": 4000, "mfu": 0.4,
  "peak_live_bytes": 50}]}, "complete": true}' > "$1"
SH
cat > "$dir/peer.sh" <<'SH'
family=$1  # gpt or llama: which peer the script chose
shift
echo "$family $*" > "$(dirname "$1")/peer.args"
echo '{"runs": [{"mode": "eager", "tokens_per_s": 2000, "peak_allocated_bytes": 200},
  {"mode": "sdpa", "tokens_per_s": 2500, "peak_allocated_bytes": 100}], "complete": true}' > "$1"
SH
# test_gpu_elf: a real executable that needs libgpucheckstub.so, found only in the wheel folder.
cat > "$dir/stub_lib.cpp" <<'CPP'
#include <cstdio>
int stub_tests() { return std::puts("[       OK ] Elf.FoundItsLibrary (0 ms)") < 0; }
CPP
echo 'int stub_tests(); int main() { return stub_tests(); }' > "$dir/stub_main.cpp"
"$cxx" -shared -fPIC -o "$dir/site/nvidia/cu13/lib/libgpucheckstub.so" "$dir/stub_lib.cpp" &&
  "$cxx" -o "$dir/stage/bin/test_gpu_elf" "$dir/stub_main.cpp" \
    -L"$dir/site/nvidia/cu13/lib" -lgpucheckstub || fail "could not compile the library stub"
tar -C "$dir/stage" -cf - bin lib | xz > "$dir/carry/bundle.tar.xz"

# dry_run NAME LIMIT_S TEST_LIMIT_S [ENV...]: the device half into $dir/NAME, with `run --quick`
# and $bench_args; sets $code.
bench_args=""
dry_run() {
  mkdir -p "$dir/$1"
  # shellcheck disable=SC2086 # one option per word
  env OUT="$dir/$1" GPU_CHECK_CARRY="$dir/carry" GPU_CHECK_NO_DEVICE=1 GPU_CHECK_LIMIT_S="$2" \
    GPU_CHECK_TEST_LIMIT_S="$3" GPU_CHECK_PEER="bash $dir/peer.sh gpt" \
    GPU_CHECK_LLAMA_PEER="bash $dir/peer.sh llama" "${@:4}" \
    bash "$script" run --quick $bench_args > "$dir/$1.stdout" 2>&1
  code=$?
  python3 -m json.tool "$dir/$1/gpu_check.json" > /dev/null ||
    { cat "$dir/$1.stdout"; fail "$1: gpu_check.json is not valid JSON"; }
}

# check NAME PYTHON_CONDITION...: each condition holds of s, the summary of run NAME.
check() {
  local name=$1 condition
  shift
  for condition in "$@"; do
    python3 -c "import json, sys; s = json.load(open(sys.argv[1])); steps = {x['name']: x for \
x in s['steps']}; sys.exit(0 if ($condition) else 1)" "$dir/$name/gpu_check.json" ||
      { cat "$dir/$name.stdout"; fail "$name: not true of gpu_check.json: $condition"; }
  done
}

# 1. Every step, each test binary cut at GPU_CHECK_TEST_LIMIT_S (3 s); the wheel's library found.
dry_run complete 300 3 PYTHONPATH="$dir/site"
[ "$code" -eq 1 ] || { cat "$dir/complete.stdout"; fail "complete: exit $code, expected 1"; }
check complete "not s['complete'] and s['libraries']['missing'] == []" \
  "'$dir/site/nvidia/cu13/lib' in s['libraries']['ld_library_path']" \
  "[(t['binary'], t['status'], t['passed'], t['failed'], t['skipped']) for t in s['tests']] == \
[('test_gpu_0slow', 'timed_out', 0, 0, 0), ('test_gpu_a', 'ok', 2, 0, 1), \
('test_gpu_b', 'failed', 1, 1, 0), ('test_gpu_elf', 'ok', 1, 0, 0)]" \
  "steps['test test_gpu_0slow']['limit_s'] == 3 and steps['test test_gpu_0slow']['seconds'] <= 9" \
  "all(steps[n]['status'] == 'ok' for n in ('train data', 'train cpu', 'train gpu', \
'bench_gpu', 'bench pytorch'))" \
  "abs(s['train']['max_relative_loss_difference'] - 0.01) < 1e-9" \
  "[(r['ours'], r['pytorch'], r['tokens_per_s_ratio'], r['peak_memory_ratio']) \
for r in s['bench']['ratios']] == [('none', 'eager', 1.5, 0.5), \
('full uniform 1', 'checkpoint', None, None), ('flash none', 'sdpa', 1.6, 0.5), \
('none', 'sdpa', 1.2, 1.0)]"
grep -q "libgpucheckstub.so => $dir/site/nvidia/cu13/lib/libgpucheckstub.so" \
  "$dir/complete/ldd.txt" || fail "complete: ldd.txt does not show the wheel's library"
grep -qE -- "--time-limit-s [0-9]+ --quick" "$dir/complete/bench_gpu.args" ||
  fail "complete: bench_gpu got $(cat "$dir/complete/bench_gpu.args")"
grep -q -- "^gpt .*--preset quick" "$dir/complete/peer.args" ||
  fail "complete: the peer is not GPT's quick: $(cat "$dir/complete/peer.args")"
rm "$dir/complete/"*.args
files=$(ls "$dir/complete" | wc -l)
[ "$files" -le 8 ] || fail "complete: $files files under OUT, the device tool returns 8"
echo "complete: every step recorded, the slow test cut at 3 s, the wheel's library found"

# 2. The overall deadline: 230 s leave the tests at most 30 s (the later steps keep 200 s; the
# steps before take whole seconds, 0 on a fast machine), so the slow test is cut at the time left,
# not at its own 120 s, and the other test binaries find no time left.
dry_run deadline 230 120 PYTHONPATH="$dir/site"
check deadline "steps['test test_gpu_0slow']['status'] == 'timed_out'" \
  "steps['test test_gpu_0slow']['limit_s'] <= 30" \
  "steps['test test_gpu_0slow']['seconds'] <= steps['test test_gpu_0slow']['limit_s'] + 6" \
  "[steps['test ' + b]['status'] for b in ('test_gpu_a', 'test_gpu_b', 'test_gpu_elf')] == \
['skipped'] * 3" \
  "steps['train gpu']['status'] == 'ok' and steps['bench pytorch']['status'] == 'ok'" \
  "s['elapsed_s'] < 230"
echo "deadline: the slow test cut at the time left, the others skipped, later steps ran"

# 3. The wheel folder is not on any Python path: the library is missing and nothing runs.
dry_run missing 300 3
[ "$code" -eq 3 ] || { cat "$dir/missing.stdout"; fail "missing: exit $code, expected 3"; }
grep -q "libgpucheckstub.so (needed by test_gpu_elf)" "$dir/missing.stdout" ||
  { cat "$dir/missing.stdout"; fail "missing: the log does not name the missing library"; }
grep -q "libgpucheckstub.so => not found" "$dir/missing/ldd.txt" || fail "missing: ldd.txt"
check missing "s['libraries']['missing'] == [{'library': 'libgpucheckstub.so', \
'needed_by': 'test_gpu_elf'}]" "s['steps'] == [] and not s['complete']"
[ ! -e "$dir/missing/tests.log" ] || fail "missing: test binaries ran without their libraries"
echo "missing: stopped before running anything, naming libgpucheckstub.so"

# 4. --model llama: bench_gpu gets it, and the Llama peer runs at its quick preset.
bench_args="--model llama" dry_run llama 300 3 PYTHONPATH="$dir/site"
check llama "steps['bench_gpu']['status'] == 'ok' and steps['bench pytorch']['status'] == 'ok'"
grep -qE -- "--time-limit-s [0-9]+ --quick --model llama" "$dir/llama/bench_gpu.args" ||
  fail "llama: bench_gpu got $(cat "$dir/llama/bench_gpu.args")"
grep -q -- "^llama .*--preset quick" "$dir/llama/peer.args" ||
  fail "llama: the peer is not Llama's quick: $(cat "$dir/llama/peer.args")"
echo "llama: bench_gpu --model llama and the Llama peer"

# 5. sanitize: every tool over each binary named, a step each, through the sanitizer given.
printf '#!/usr/bin/env bash\necho "sanitizer $2"\nexec "$5"\n' > "$dir/sanitizer" &&
  chmod +x "$dir/sanitizer"
mkdir -p "$dir/sanitize"
env OUT="$dir/sanitize" GPU_CHECK_CARRY="$dir/carry" GPU_CHECK_NO_DEVICE=1 PYTHONPATH="$dir/site" \
  GPU_CHECK_SANITIZER="$dir/sanitizer" GPU_CHECK_SANITIZE_BINARIES="test_gpu_a test_gpu_b" \
  bash "$script" sanitize > "$dir/sanitize.stdout" 2>&1
code=$?
[ "$code" -eq 1 ] || { cat "$dir/sanitize.stdout"; fail "sanitize: exit $code, expected 1"; }
check sanitize "[(x['name'], x['status']) for x in s['steps']] == [('sanitize ' + t + ' ' + b, \
'ok' if b == 'test_gpu_a' else 'failed') for t in ('memcheck', 'racecheck', 'initcheck', \
'synccheck') for b in ('test_gpu_a', 'test_gpu_b')]" "s['tests'] == []"
grep -q "sanitizer racecheck" "$dir/sanitize/sanitize.log" || fail "sanitize: no racecheck run"
grep -q "sanitize memcheck test_gpu_b: failed" "$dir/sanitize.stdout" ||
  { cat "$dir/sanitize.stdout"; fail "sanitize: the brief summary lacks the steps"; }
echo "sanitize: four tools over each binary, each a step with its status"
echo PASS
