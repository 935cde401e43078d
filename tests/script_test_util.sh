# Sourced by the script tests (tests/mpi/*.sh, tests/system/*.sh) once $trainer is set: a
# scratch folder $dir removed on exit, and the steps their runs share. Nothing here runs a
# test; each script still says PASS or FAIL itself.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# fail MESSAGE...: says why the test failed and ends it.
fail() {
  echo "FAIL: $*"
  exit 1
}

# synthetic_data NUM_TOKENS: the trainer's synthetic corpus at $dir/data.
synthetic_data() {
  "$trainer" prepare-data --synthetic --num-tokens "$1" --output-prefix "$dir/data" >/dev/null
}

# shared_run_yaml: the run.yaml lines the runs over $dir/data share (no warmup, the corpus,
# output to $dir/out without the export), for the end of their run.yaml.
shared_run_yaml() {
  cat <<YAML
optimizer: {lr_warmup_steps: 0}
data: {path: $dir/data}
output: {dir: $dir/out, export: false}
YAML
}

# wait_for PATTERN FILE TRIES SECONDS: polls FILE every SECONDS until a line matches PATTERN,
# at most TRIES times; succeeds when one did.
wait_for() {
  for _ in $(seq 1 "$3"); do
    grep -q "$1" "$2" && return 0
    sleep "$4"
  done
  grep -q "$1" "$2"
}

# check_stopped LOG: sets $stopped to the step a signal stopped LOG's run after, and fails the
# test when LOG has no such line or the checkpoint folder $dir/ckpt's `latest` is not that step.
check_stopped() {
  stopped=$(sed -n 's/^stopped by a signal after step \([0-9]*\).*/\1/p' "$1")
  [ -n "$stopped" ] || { cat "$1"; fail "no 'stopped by a signal' line"; }
  [ -f "$dir/ckpt/latest" ] || fail "no checkpoint after SIGTERM"
  grep -q "step_$(printf %08d "$stopped")" "$dir/ckpt/latest" || fail "latest is not step $stopped"
}

# check_metrics_steps FILE LAST: fails the test unless the rows of metrics.jsonl FILE are the
# steps 1 to LAST, each once and in order (a stop keeps its step's row; a resume adds none twice).
check_metrics_steps() {
  local steps expected
  steps=$(sed -n 's/^{"step": \([0-9]*\),.*/\1/p' "$1" | tr '\n' ' ')
  expected=$(seq 1 "$2" | tr '\n' ' ')
  [ "$steps" = "$expected" ] || fail "$1 has the steps [$steps], expected 1 to $2"
}
