#!/usr/bin/env bash
# A Llama block (RMSNorm, SwiGLU, RoPE, grouped-query attention, untied head) against an
# independent float64 reference (llama_reference.py: Hugging Face LlamaForCausalLM's math on the
# exported HF tensors, AdamW and clipping as PyTorch's): 12 steps on one process, unfused and
# flash attention, and unfused built as Llama 3.2 1B and 3B are (Llama 3.1's RoPE scaling,
# model.rope_scaling, and a head tied to the word embeddings), and flash with Qwen2's q, k and v
# biases (model.add_qkv_bias), and flash with heads wider than hidden_size / heads
# (model.kv_channels, config.json's head_dim), and unfused as Qwen3 (q and k norms,
# model.qk_layernorm, with wide heads), and flash with YaRN's RoPE scaling, and flash with
# Megatron's --eod-mask-loss (data.eod_mask_loss), and flash and unfused with a sliding window
# (model.sliding_window, Mistral's), and flash and unfused with Megatron's --reset-attention-mask
# (data.reset_attention_mask), and flash with Megatron's --reset-position-ids
# (data.reset_position_ids), alone and with the mask; and the GPT-2 block (gpt2_model.py:
# GPT2LMHeadModel's math), plain, with its learned positions restarting, and with the mask as
# well; every loss and gradient norm within 1e-5 relative. The reference starts from the trainer's initial weights, exported by a one-step run
# at learning rate 1e-30 (every update is far below a float32 ulp of the weights, so they stay
# as initialized).
# Usage: llama_reference.sh TRAINER
set -u
trainer=$1
source "$(dirname "$0")/../script_test_util.sh"
reference="$(dirname "$0")/llama_reference.py"
python=""
for candidate in python3 /usr/bin/python3; do  # scripts/setup.sh installs Debian's python3-numpy
  if "$candidate" -c "import numpy" 2>/dev/null; then python=$candidate; break; fi
done
[ -n "$python" ] || { echo "SKIP: no python3 with numpy"; exit 77; }
synthetic_data 40000
steps=12 micro=4 lr=0.00390625 wd=0.125 clip=0.5
cat > "$dir/run.yaml" <<YAML
model: {architecture: llama, num_layers: 2, hidden_size: 64, num_attention_heads: 4,
        num_query_groups: 2, ffn_hidden_size: 96, seq_length: 32, vocab_size: 256,
        rotary_base: 10000.0}
train: {steps: $steps, micro_batch_size: $micro, global_batch_size: $micro, seed: 7}
optimizer: {lr: $lr, min_lr: $lr, weight_decay: $wd, adam_beta1: 0.9, adam_beta2: 0.95,
            adam_eps: 1.0e-8, clip_grad: $clip, lr_warmup_steps: 0, lr_decay_style: constant}
data: {path: $dir/data, split: [1], shuffle: false}
output: {dir: $dir/out}
YAML
# The GPT-2 block (gpt2_model.py's reference): LayerNorm, GELU, learned positions, tied head.
sed '1,3d' "$dir/run.yaml" > "$dir/gpt2.yaml"
cat >> "$dir/gpt2.yaml" <<YAML
model: {architecture: gpt2, num_layers: 2, hidden_size: 64, num_attention_heads: 4,
        seq_length: 32, vocab_size: 256, hidden_dropout: 0.0, attention_dropout: 0.0}
YAML
# llama32: head dim 16, frequencies 10000^(-i/8); with original 64 (wavelengths 16 to 64
# blended) frequency 0 is kept, 1 and 2 blended, 3-7 divided by 8; the head tied.
scaling=(--set model.rope_scaling.factor=8
         --set model.rope_scaling.original_max_position_embeddings=64)
llama32=("${scaling[@]}" --set model.untie_embeddings=false)
# qwen2: Qwen2's q, k and v biases (model.add_qkv_bias), with flash attention.
qwen2=(--set model.add_qkv_bias=true --set model.attention_backend=flash)
# headdim: 4 heads of 24 (96 wide) in a 64-wide model, with flash attention.
headdim=(--set model.kv_channels=24 --set model.attention_backend=flash)
# The variants that sharpen attention run at a quarter of the learning rate: at lr 2^-8 float32
# rounding grows along the 12 steps past 1e-5 in a gradient norm or two (the trainer's own
# unfused and flash runs then differ by 1e-5 as well) while the first steps agree within 2e-8.
# So does eodmask: at lr 2^-8 its step-12 gradient norm (a spike to 8.1, as flash's to 8.9)
# came within 9.3e-6 of the bound, its first 8 steps within 4.1e-7.
sharp_lr=0.0009765625
# qwen3: Qwen3's q and k norms (model.qk_layernorm) on heads of 24, unfused attention.
qwen3=(--set model.qk_layernorm=true --set model.kv_channels=24
       --set model.attention_backend=unfused)
# yarn: YaRN's scaling (factor 4 over an original 4096 positions: of the 8 frequencies of a
# 16-wide head 3 kept, 3 blended, 2 divided; cos and sin times 0.1 ln 4 + 1, the scores times
# its square), flash.
yarn=(--set model.rope_scaling.type=yarn --set model.rope_scaling.factor=4
      --set model.rope_scaling.original_max_position_embeddings=4096
      --set model.attention_backend=flash)
# eodmask: Megatron's --eod-mask-loss (data.eod_mask_loss), with 'e' (101) standing for the
# end-of-document id in the synthetic text, flash; the reference gives those positions HF's
# label -100.
eodmask=(--set data.eod_mask_loss=true --set data.eod_id=101 --set model.attention_backend=flash)
# window, unwindow: a sliding window of 5 positions (model.sliding_window, exported as
# MistralConfig's sliding_window), flash and unfused.
window=(--set model.sliding_window=5 --set model.attention_backend=flash)
unwindow=(--set model.sliding_window=5 --set model.attention_backend=unfused)
# documents, undocuments: Megatron's --reset-attention-mask (data.reset_attention_mask) with 'e'
# (101) ending the documents, flash; and unfused with a sliding window of 5 as well. The
# reference hides the keys at or before an input eod from every later query of its sample.
# documents runs at the quarter lr: at lr 2^-8 its first 10 steps agreed within 6.8e-7 and steps
# 11 and 12 drifted to 1.4e-5 and 2.4e-5 in the gradient norm.
documents=(--set data.reset_attention_mask=true --set data.eod_id=101
           --set model.attention_backend=flash)
undocuments=(--set data.reset_attention_mask=true --set data.eod_id=101
             --set model.sliding_window=5 --set model.attention_backend=unfused)
# positions, placed: Megatron's --reset-position-ids (data.reset_position_ids) with 'e' (101)
# ending the documents, flash; alone (RoPE's positions restart at 0 after each input eod, while
# attention still crosses the ends), and with the mask as well. Both at the quarter lr: at lr
# 2^-8 positions' gradient norms agreed within 7.9e-7 but at step 9, a spike, 7.3e-6; at the
# quarter lr within 4.2e-7 at every step.
positions=(--set data.reset_position_ids=true --set data.eod_id=101
           --set model.attention_backend=flash)
placed=("${positions[@]}" --set data.reset_attention_mask=true)
# gpt2, gpt2positions, gpt2placed: the GPT-2 block (gpt2.yaml), unfused; with its learned
# positions restarting after each 'e'; and flash with the mask as well. All at the quarter lr: at
# lr 2^-8 the first 11 steps agreed within 9.4e-7 and the step-12 gradient norms by 2.3e-5
# (gpt2) and 1.5e-5 (gpt2positions, whose loss spiked to 7.7 there); at the quarter lr within
# 9.5e-8 at every step.
for backend in unfused flash llama32 qwen2 headdim qwen3 yarn eodmask window unwindow documents \
               undocuments positions placed gpt2 gpt2positions gpt2placed; do
  run_lr=$lr masked=() yaml=$dir/run.yaml
  case $backend in
    llama32) settings=(--set model.attention_backend=unfused "${llama32[@]}") ;;
    qwen2) settings=("${qwen2[@]}") ;;
    headdim) settings=("${headdim[@]}") ;;
    qwen3) settings=("${qwen3[@]}") run_lr=$sharp_lr ;;
    yarn) settings=("${yarn[@]}") run_lr=$sharp_lr ;;
    eodmask) settings=("${eodmask[@]}") masked=(loss=101) run_lr=$sharp_lr ;;
    window) settings=("${window[@]}") ;;
    unwindow) settings=("${unwindow[@]}") ;;
    documents) settings=("${documents[@]}") masked=(attention=101) run_lr=$sharp_lr ;;
    undocuments) settings=("${undocuments[@]}") masked=(attention=101) ;;
    positions) settings=("${positions[@]}") masked=(positions=101) run_lr=$sharp_lr ;;
    placed) settings=("${placed[@]}") masked=(attention=101 positions=101) run_lr=$sharp_lr ;;
    gpt2) settings=(--set model.attention_backend=unfused) yaml=$dir/gpt2.yaml run_lr=$sharp_lr ;;
    gpt2positions)
      settings=(--set data.reset_position_ids=true --set data.eod_id=101
                --set model.attention_backend=unfused)
      masked=(positions=101) yaml=$dir/gpt2.yaml run_lr=$sharp_lr ;;
    gpt2placed)
      settings=("${placed[@]}") masked=(attention=101 positions=101) yaml=$dir/gpt2.yaml
      run_lr=$sharp_lr ;;
    *) settings=(--set model.attention_backend=$backend) ;;
  esac
  "$trainer" train --config "$yaml" "${settings[@]}" \
    --set train.steps=1 --set optimizer.lr=1e-30 --set optimizer.min_lr=1e-30 \
    --set output.dir="$dir/init_$backend" > "$dir/init_$backend.log" 2>&1 ||
    { cat "$dir/init_$backend.log"; fail "$backend: the initial-weights run failed"; }
  "$trainer" train --config "$yaml" "${settings[@]}" --set optimizer.lr=$run_lr \
    --set optimizer.min_lr=$run_lr --set output.dir="$dir/$backend" > "$dir/$backend.log" 2>&1 ||
    { cat "$dir/$backend.log"; fail "$backend: the run failed"; }
  # lr, weight decay and clip are powers of two: the same in float32 and float64.
  "$python" "$reference" "$dir/init_$backend" "$dir/data" $steps $micro $run_lr $wd $clip \
    "${masked[@]}" > "$dir/reference_$backend.jsonl" ||
    fail "$backend: the reference failed"
  python3 - "$dir/$backend/metrics.jsonl" "$dir/reference_$backend.jsonl" "$backend" <<'PY' ||
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
ref = [json.loads(l) for l in open(sys.argv[2])]
assert len(ours) == len(ref) == 12, (len(ours), len(ref))
worst = {"loss": 0.0, "grad_norm": 0.0}
for a, b in zip(ours, ref):
    for key in ("loss", "grad_norm"):
        rel = abs(a[key] - b[key]) / abs(b[key])
        worst[key] = max(worst[key], rel)
        assert rel < 1e-5, \
            f"step {a['step']} {key}: trainer {a[key]!r}, reference {b[key]!r}, rel {rel:.2e}"
print(f"{sys.argv[3]}: loss {ref[0]['loss']:.6f} -> {ref[-1]['loss']:.6f} over {len(ref)} steps, "
      f"worst relative difference {worst['loss']:.2e} (loss), {worst['grad_norm']:.2e} (grad norm)")
PY
    fail "$backend: the trainer and the reference disagree"
done
# Each export imported back (train.init_from, another seed) gives its run's first 3 losses bit
# for bit: imports NAME RUN WEIGHTS [--set ...] trains 3 steps from WEIGHTS and compares with RUN.
imports() {
  local name=$1 run=$2 weights=$3
  shift 3
  "$trainer" train --config "$dir/run.yaml" "$@" --set train.steps=3 --set train.seed=99 \
    --set train.init_from="$weights" --set output.dir="$dir/$name" > "$dir/$name.log" 2>&1 ||
    { cat "$dir/$name.log"; fail "$name: the import run failed"; }
  [ "$(grep -c '"loss": ' "$dir/$name/metrics.jsonl")" = 3 ] || fail "$name: not 3 losses"
  cmp -s <(grep -o '"loss": [^,]*' "$dir/$run/metrics.jsonl" | head -3) \
    <(grep -o '"loss": [^,]*' "$dir/$name/metrics.jsonl") ||
    fail "$name: the imported weights do not give $run's losses"
  echo "$name: init_from $(basename "$weights") gives $run's first 3 losses bit for bit"
}
imports imported unfused "$dir/init_unfused/model.safetensors"
imports imported_dir unfused "$dir/init_unfused"  # a directory: its model.safetensors
# The llama32 export (config.json: Llama 3.1's rope_scaling, tie_word_embeddings; no lm_head
# tensor) into its config; then the same saved in two shards with a
# model.safetensors.index.json, as save_pretrained writes a large model.
imports imported_llama32 llama32 "$dir/init_llama32/model.safetensors" "${llama32[@]}"
mkdir -p "$dir/sharded" && cp "$dir/init_llama32/config.json" "$dir/sharded/"
"$python" - "$dir/init_llama32/model.safetensors" "$dir/sharded" <<'PY' ||
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
header.pop("__metadata__", None)
names = sorted(header)
shards, weight_map = [names[:len(names) // 2], names[len(names) // 2:]], {}
for k, part in enumerate(shards):
    file = f"model-{k + 1:05d}-of-00002.safetensors"
    entries, blob = {}, b""
    for name in part:
        begin, end = header[name]["data_offsets"]
        entries[name] = dict(header[name], data_offsets=[len(blob), len(blob) + end - begin])
        blob += data[8 + n + begin:8 + n + end]
        weight_map[name] = file
    text = json.dumps(entries).encode()
    text += b" " * (-len(text) % 8)
    open(f"{sys.argv[2]}/{file}", "wb").write(struct.pack("<Q", len(text)) + text + blob)
json.dump({"metadata": {}, "weight_map": weight_map},
          open(f"{sys.argv[2]}/model.safetensors.index.json", "w"))
PY
  fail "sharding the llama32 export failed"
imports imported_sharded llama32 "$dir/sharded/model.safetensors.index.json" "${llama32[@]}"
imports imported_sharded_dir llama32 "$dir/sharded" "${llama32[@]}"  # its index
grep -q '"model_type": "qwen2"' "$dir/init_qwen2/config.json" &&
  grep -q '"Qwen2ForCausalLM"' "$dir/init_qwen2/config.json" ||
  fail "the qwen2 export's config.json is not a Qwen2ForCausalLM's"
imports imported_qwen2 qwen2 "$dir/init_qwen2/model.safetensors" "${qwen2[@]}"
grep -q '"head_dim": 24' "$dir/init_headdim/config.json" ||
  fail "the headdim export's config.json does not say head_dim 24"
imports imported_headdim headdim "$dir/init_headdim/model.safetensors" "${headdim[@]}"
grep -q '"model_type": "qwen3"' "$dir/init_qwen3/config.json" &&
  grep -q '"Qwen3ForCausalLM"' "$dir/init_qwen3/config.json" ||
  fail "the qwen3 export's config.json is not a Qwen3ForCausalLM's"
imports imported_qwen3 qwen3 "$dir/init_qwen3/model.safetensors" "${qwen3[@]}" \
  --set optimizer.lr=$sharp_lr --set optimizer.min_lr=$sharp_lr
# The trained qwen3 export (its q and k norms' weights moved off 1, apart from each other): the
# reference's loss on the first batch from it and the trainer's, started from it, agree.
"$python" "$reference" "$dir/qwen3" "$dir/data" 1 $micro 1e-30 $wd $clip \
  > "$dir/reference_trained_qwen3.jsonl" || fail "trained qwen3: the reference failed"
"$trainer" train --config "$dir/run.yaml" "${qwen3[@]}" --set train.steps=1 \
  --set train.init_from="$dir/qwen3/model.safetensors" --set optimizer.lr=1e-30 \
  --set optimizer.min_lr=1e-30 --set output.dir="$dir/trained_qwen3" \
  > "$dir/trained_qwen3.log" 2>&1 ||
  { cat "$dir/trained_qwen3.log"; fail "trained qwen3: the import run failed"; }
python3 - "$dir/trained_qwen3/metrics.jsonl" "$dir/reference_trained_qwen3.jsonl" <<'PY' ||
import json, sys
ours, ref = (json.loads(open(path).readline())["loss"] for path in sys.argv[1:])
rel = abs(ours - ref) / ref
assert rel < 1e-6, f"trainer {ours!r}, reference {ref!r}, rel {rel:.2e}"
print(f"trained qwen3 export: first-batch loss {ref:.6f}, trainer within {rel:.2e} of the reference")
PY
  fail "trained qwen3: the trainer and the reference disagree on the export"
grep -q '"rope_type": "yarn"' "$dir/init_yarn/config.json" ||
  fail "the yarn export's config.json lacks rope_scaling yarn"
imports imported_yarn yarn "$dir/init_yarn/model.safetensors" "${yarn[@]}" \
  --set optimizer.lr=$sharp_lr --set optimizer.min_lr=$sharp_lr
grep -q '"sliding_window": 5' "$dir/init_window/config.json" &&
  grep -q '"MistralForCausalLM"' "$dir/init_window/config.json" ||
  fail "the window export's config.json is not a MistralForCausalLM's with sliding_window 5"
imports imported_window window "$dir/init_window/model.safetensors" "${window[@]}"
# A config.json that disagrees with the config, or asks for what the trainer does not do, is
# refused, naming the field: the llama32 export into the plain (untied, unscaled) config, an
# untied one, another factor, another rope_type.
grep -q '"rope_type": "llama3"' "$dir/init_llama32/config.json" &&
  grep -q '"tie_word_embeddings": true' "$dir/init_llama32/config.json" ||
  fail "the llama32 export's config.json lacks rope_scaling llama3 or tie_word_embeddings true"
refused() {  # refused NAME EXPORT EXPECTED [--set ...]: init_EXPORT refused, naming EXPECTED
  local name=$1 export=$2 expected=$3
  shift 3
  if "$trainer" train --config "$dir/run.yaml" --set train.steps=1 "$@" \
      --set train.init_from="$dir/init_$export/model.safetensors" --set output.dir="$dir/$name" \
      > "$dir/$name.log" 2>&1; then
    fail "$name: accepted"
  fi
  grep -q "config.json: $expected" "$dir/$name.log" || { cat "$dir/$name.log"; fail "$name"; }
  echo "$name refused: $(grep -o "config.json: $expected.*" "$dir/$name.log")"
}
refused plain llama32 "rope_scaling is llama3, but model.rope_scaling.factor is 0"
refused untied llama32 "tie_word_embeddings true, but model.untie_embeddings is true" \
  "${scaling[@]}"
refused factor llama32 "rope_scaling.factor 8 differs from model.rope_scaling.factor 4" \
  "${llama32[@]}" --set model.rope_scaling.factor=4
sed -i 's/"rope_type": "llama3"/"rope_type": "dynamic"/' "$dir/init_llama32/config.json"
refused dynamic llama32 'rope_scaling.rope_type "dynamic" is not supported' "${llama32[@]}"
# A Qwen2 export into a Llama config, and a Llama export into a Qwen2 config.
refused qwen2_into_llama qwen2 \
  'model_type "qwen2" has q, k and v biases, but model.add_qkv_bias is false'
refused llama_into_qwen2 unfused \
  'model_type "llama" has no q, k and v biases, but model.add_qkv_bias is true' \
  --set model.add_qkv_bias=true
refused qwen3_into_headdim qwen3 \
  'model_type "qwen3" has q and k norms, but model.qk_layernorm is false' \
  --set model.kv_channels=24
refused headdim_into_qwen3 headdim \
  'model_type "llama" has no q and k norms, but model.qk_layernorm is true' \
  "${qwen3[@]}"
refused headdim_into_llama headdim \
  'head_dim 24 differs from model.hidden_size / model.num_attention_heads 16'
refused llama_into_headdim unfused \
  'head_dim 16 differs from model.kv_channels 24' --set model.kv_channels=24
refused window_into_llama window 'sliding_window 5 differs from model.sliding_window 0'
refused llama_into_window unfused 'sliding_window none differs from model.sliding_window 5' \
  --set model.sliding_window=5
echo PASS
