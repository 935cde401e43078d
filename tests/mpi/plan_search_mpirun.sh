#!/usr/bin/env bash
# `trainer plan --search` under mpirun: the two ranks measure their link and an all-reduce, rank 0
# alone prints the table with the measured links; --link-gbps skips the measurement and says so,
# and a CUDA config keeps its stated links.
set -u
trainer=$1 mpirun=$2
source "$(dirname "$0")/../script_test_util.sh"
cat > "$dir/run.yaml" <<YAML
model: {num_layers: 4, hidden_size: 32, num_attention_heads: 2, seq_length: 32, vocab_size: 64}
train: {micro_batch_size: 1, global_batch_size: 4}
YAML
flags=(--oversubscribe --bind-to none -np 2)
"$mpirun" "${flags[@]}" "$trainer" plan --config "$dir/run.yaml" --search --ranks 2 \
  --budget-gib 1 > "$dir/out" 2> "$dir/err" || fail "plan --search exited $?: $(cat "$dir/err")"
[ "$(grep -c '^the 10 fastest layouts\|^the [0-9]* fastest layouts' "$dir/out")" = 1 ] ||
  fail "the table is not printed once: $(cat "$dir/out")"
grep -q "^links measured under mpirun: 2 ranks, 2 on rank 0's node; intra [0-9.]* GB/s" \
  "$dir/out" || fail "no measured links: $(grep links "$dir/out")"
grep -q "^links measured under mpirun: .*, sums within a node at [0-9.]* GB/s (all-reduce)," \
  "$dir/out" || fail "no measured all-reduce: $(grep links "$dir/out")"
# A CUDA config's collectives go over NCCL, not the ranks' MPI links: stated, not measured.
"$mpirun" "${flags[@]}" "$trainer" plan --config "$dir/run.yaml" --search --ranks 2 \
  --budget-gib 1 --set train.device=cuda > "$dir/out" 2> "$dir/err" ||
  fail "plan --search of a cuda config exited $?: $(cat "$dir/err")"
grep -q "^links stated: NVLink 4 .* (not measured under mpirun: a CUDA run's collectives go over NCCL)" \
  "$dir/out" || fail "a cuda config's links were measured: $(grep links "$dir/out")"
"$mpirun" "${flags[@]}" "$trainer" plan --config "$dir/run.yaml" --search --ranks 2 \
  --budget-gib 1 --link-gbps intra=7,inter=3 > "$dir/out" 2> "$dir/err" ||
  fail "plan --search --link-gbps exited $?: $(cat "$dir/err")"
grep -q "^links given: intra 7 GB/s, inter 3 GB/s" "$dir/out" ||
  fail "the given links are not used: $(grep links "$dir/out")"
echo PASS
