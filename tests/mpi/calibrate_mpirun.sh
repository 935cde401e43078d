#!/usr/bin/env bash
# `trainer calibrate` under mpirun: two ranks of a tp2 run calibrate side by side over a real
# tensor-parallel group (the profile says its collectives were measured, rank 0 alone prints and
# writes); two ranks of a tp1 run calibrate as two replicas; three ranks for tp2 are refused,
# naming the sizes.
set -u
trainer=$1 mpirun=$2
source "$(dirname "$0")/../script_test_util.sh"
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 2, hidden_size: 32, num_attention_heads: 2, seq_length: 32, vocab_size: 64}
train: {micro_batch_size: 1, global_batch_size: 2}
YAML
flags=(--oversubscribe --bind-to none)
calibrate() {  # NP OUT [--set ...]: calibrates on NP ranks into $dir/OUT, stdout to $dir/out
  local np=$1 out=$2
  shift 2
  "$mpirun" "${flags[@]}" -np "$np" "$trainer" calibrate --config "$dir/run.yaml" \
    --out "$dir/$out" --repeats 2 --min-seconds 0.2 "$@" > "$dir/out" 2> "$dir/err"
}
calibrate 2 tp2.json --set parallel.tensor=2 || fail "tp2 on 2 ranks exited $?: $(cat "$dir/err")"
[ "$(grep -c '^calibrated cpu' "$dir/out")" = 1 ] || fail "not printed once: $(cat "$dir/out")"
grep -q "2 ranks side by side (tensor x context groups of 2 x 1: collectives measured)" \
  "$dir/out" || fail "no measured collectives: $(cat "$dir/out")"
grep -q '"ranks": 2' "$dir/tp2.json" && grep -q '"collectives_measured": true' "$dir/tp2.json" ||
  fail "the profile does not say so: $(cat "$dir/tp2.json")"
grep -q '"shapes": ".* tp2 cp1"' "$dir/tp2.json" || fail "not tp2's shapes: $(cat "$dir/tp2.json")"
calibrate 2 replicas.json || fail "tp1 on 2 ranks exited $?: $(cat "$dir/err")"
grep -q '"ranks": 2' "$dir/replicas.json" &&
  grep -q '"collectives_measured": false' "$dir/replicas.json" ||
  fail "replicas' profile: $(cat "$dir/replicas.json")"
if calibrate 3 three.json --set parallel.tensor=2; then fail "3 ranks for tp2 were accepted"; fi
grep -q "3 ranks are not a multiple of parallel.tensor x parallel.context = 2 x 1 = 2" \
  "$dir/out" "$dir/err" || fail "the sizes are not named: $(cat "$dir/out" "$dir/err")"
[ ! -e "$dir/three.json" ] || fail "a profile was written for a refused launch"
echo PASS
