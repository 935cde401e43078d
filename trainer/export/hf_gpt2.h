// Conversion between the model's parameters and Hugging Face GPT-2 (GPT2LMHeadModel) tensors and
// config.json. HF keeps Conv1D weights as [in, out] and the fused QKV columns as q | k | v (all
// heads each); the model keeps (out, in) and per-head (head, {q,k,v}, head_dim) rows. Host f32
// only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "trainer/export/hf_tensors.h"
#include "trainer/export/safetensors.h"

namespace trainer {

// The model as HF GPT-2 state dict tensors named "transformer.*", each made when asked from its
// parameter's values (`layout`: the whole model's parameters on any device, of which only the
// names and shapes are read): wte [vocab_size, C] (vocabulary padding
// dropped), wpe [P, C], h.{i}.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
// mlp.c_proj}.{weight, bias}, ln_f. lm_head.weight is tied to wte and not written (as HF
// save_pretrained does).
std::vector<HfSource> hf_gpt2_sources(const model::GptParams& layout,
                                      const model::GptConfig& config);

// The inverse, one parameter at a time: opening checks HF tensors, with or without the
// "transformer." prefix (F32, BF16 or F16; a header-only read serves), against the whole model of
// `config`; values() then reads one parameter's tensor. A file may hold more wte rows than
// config.vocab_size (the first ones are taken; padding rows are 0) but not fewer.
// lm_head.weight and the attention buffers (*.attn.bias, *.attn.masked_bias) are ignored; any
// other tensor the config has no place for (a layer beyond num_layers, say) is an error. Throws
// runtime::InputError naming the tensor that is missing, unexpected, or of a wrong shape or dtype.
class HfGpt2Import final : public HfImport {
 public:
  HfGpt2Import(SafetensorsFile file, const model::GptConfig& config);

 private:
  void check_transformed(const HfRule& rule, const std::string& hf,
                         const runtime::Shape& shape) override;
  std::vector<float> transformed(const HfRule& rule, const std::string& hf,
                                 const runtime::Shape& shape, const HfBlock& block) override;
};

// Fills `params` (allocated for `config`, host f32) through HfGpt2Import; a defect of the file
// leaves them untouched.
void from_hf_gpt2(const SafetensorsFile& file, const model::GptParams& params,
                  const model::GptConfig& config);

// config.json for transformers' GPT2Config (keys sorted and indented by 2, as HF writes it).
std::string hf_gpt2_config_json(const model::GptConfig& config,
                                std::string_view torch_dtype = "float32");

// Reads a GPT2Config config.json. n_layer, n_embd, n_head, vocab_size and n_positions are
// required; the rest default as in GPT2Config. seq_length and max_position_embeddings both become
// n_positions; make_vocab_size_divisible_by keeps its default. Throws runtime::InputError naming
// `source` and the field that is missing or invalid.
model::GptConfig gpt_config_from_hf_json(const std::string& json_text, const std::string& source);

}  // namespace trainer
