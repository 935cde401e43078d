// The Hugging Face export of a model: GPT2LMHeadModel for a GPT-2 block, LlamaForCausalLM for a
// Llama block, its tensors in float32 or bfloat16 (config.json's torch_dtype says which).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "runtime/dtype.h"
#include "trainer/export/safetensors.h"

namespace trainer {

// config.json's torch_dtype of an export in `dtype` (f32 or bf16): "float32" or "bfloat16".
std::string_view hf_torch_dtype(runtime::DType dtype);

// The export's tensors (`params`: the whole model of `config`, host f32); bf16 rounds each value
// to the nearest even, as the device's conversion does.
std::vector<SafetensorsEntry> to_hf(const model::GptParams& params,
                                    const model::GptConfig& config, runtime::DType dtype);

// Writes <dir>/model.safetensors and <dir>/config.json, each atomically; creates `dir` when
// missing (InputError naming it when that fails).
void export_hf(const std::string& dir, const model::GptParams& params,
               const model::GptConfig& config, runtime::DType dtype = runtime::DType::f32);

}  // namespace trainer
