// A Llama-family model to and from Hugging Face LlamaForCausalLM tensors and config.json (and
// Qwen2ForCausalLM's with model.add_qkv_bias, Qwen3ForCausalLM's with model.qk_layernorm), by one
// name -> transform table (hf_llama.cpp; config.json: hf_llama_config.cpp):
// most tensors are copied as they are; the word embeddings and the output layer drop their
// vocabulary padding (zero again on import); the fused QKV rows (and biases), grouped by
// key/value head, split into q_proj, k_proj and v_proj and back.
// Host f32 only; errors in the input are runtime::InputError naming the tensor or field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "trainer/export/hf_tensors.h"
#include "trainer/export/safetensors.h"

namespace trainer {

// The model as LlamaForCausalLM (or Qwen2ForCausalLM) state dict tensors, each made when asked
// from its parameter's values (`layout`: the whole model's parameters on any device, of which
// only the names and shapes are read).
std::vector<HfSource> hf_llama_sources(const model::GptParams& layout,
                                       const model::GptConfig& config);

// The inverse, one parameter at a time: opening checks HF tensors (F32, BF16 or F16; a
// header-only read serves) against the whole model of `config`: every parameter's tensor must
// be there with its shape (the vocabulary may have more rows than config.vocab_size: the first
// are taken), and a tensor with no parameter is an error, except the rotary buffers HF may save
// (*.rotary_emb.inv_freq). values() then reads only that parameter's tensors (only the rows
// asked for).
class HfLlamaImport final : public HfImport {
 public:
  HfLlamaImport(SafetensorsFile file, const model::GptConfig& config);

 private:
  void check_transformed(const HfRule& rule, const std::string& hf,
                         const runtime::Shape& shape) override;
  std::vector<float> transformed(const HfRule& rule, const std::string& hf,
                                 const runtime::Shape& shape, const HfBlock& block) override;
};

// Checks a LlamaConfig (MistralConfig, Qwen2Config or Qwen3Config) config.json against `config`:
// the shape fields, rope_theta, rope_scaling (null, default or llama3), tie_word_embeddings and
// model_type (qwen2 exactly when model.add_qkv_bias, qwen3 when model.qk_layernorm) and the
// sliding window every layer has (model.sliding_window) must agree, and what the trainer does
// not implement (another RoPE scaling, other biases, another activation, a window in some
// layers only) is an error naming the field and its value. `source` names the file in errors. A
// tied model has no lm_head.weight: the word embeddings are the head.
void check_hf_llama_config(const std::string& json_text, const std::string& source,
                           const model::GptConfig& config);

// The model a LlamaConfig, MistralConfig, Qwen2Config or Qwen3Config config.json describes (a
// Llama block; the shape fields required, the rest defaulting as transformers does;
// seq_length is max_position_embeddings), which check_hf_llama_config then accepts: what the
// trainer does not implement is an InputError naming `source` and the field.
model::GptConfig llama_config_from_hf_json(const std::string& json_text, const std::string& source);

// config.json for transformers' LlamaConfig, or Qwen2Config with model.add_qkv_bias, Qwen3Config
// with model.qk_layernorm (either with use_sliding_window from layer 0 under
// model.sliding_window), MistralConfig with model.sliding_window alone (keys sorted, indented by
// 2).
std::string hf_llama_config_json(const model::GptConfig& config,
                                 std::string_view torch_dtype = "float32");

}  // namespace trainer
