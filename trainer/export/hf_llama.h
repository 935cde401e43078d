// Export of a Llama-family model to Hugging Face LlamaForCausalLM tensors and config.json, by a
// name -> transform table (hf_llama.cpp): most tensors are copied as they are; the word
// embeddings and the output layer drop their vocabulary padding; the fused QKV rows, grouped by
// key/value head, split into q_proj, k_proj and v_proj. Host f32 only.
#pragma once

#include <string>
#include <vector>

#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "trainer/export/safetensors.h"

namespace trainer {

// The model as LlamaForCausalLM state dict tensors, F32 (params: the whole model, host f32).
std::vector<SafetensorsEntry> to_hf_llama(const model::GptParams& params,
                                          const model::GptConfig& config);

// config.json for transformers' LlamaConfig (keys sorted, indented by 2).
std::string hf_llama_config_json(const model::GptConfig& config);

// Writes <dir>/model.safetensors and <dir>/config.json atomically; creates `dir` when missing.
void export_hf_llama(const std::string& dir, const model::GptParams& params,
                     const model::GptConfig& config);

}  // namespace trainer
