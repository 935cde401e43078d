// A model as Hugging Face's, both ways: GPT2LMHeadModel for a GPT-2 block, LlamaForCausalLM for a
// Llama block (Qwen2ForCausalLM with model.add_qkv_bias). The export writes its tensors in float32
// or bfloat16 (config.json's torch_dtype says which); the import opens the weights of either family
// for one parameter at a time.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "runtime/dtype.h"
#include "trainer/export/hf_tensors.h"
#include "trainer/export/safetensors.h"

namespace trainer {

// config.json's torch_dtype of an export in `dtype` (f32 or bf16): "float32" or "bfloat16".
std::string_view hf_torch_dtype(runtime::DType dtype);

// The export's tensors (`params`: the whole model of `config`, host f32, which must outlive
// them), each made in `dtype` as the writer reaches it; bf16 rounds each value to the nearest
// even, as the device's conversion does.
std::vector<SafetensorsSource> to_hf(const model::GptParams& params, const model::GptConfig& config,
                                     runtime::DType dtype);

// Writes <dir>/model.safetensors (one tensor made at a time: beyond `params` the export holds one
// tensor's values) and <dir>/config.json, each atomically; creates `dir` when missing
// (InputError naming it when that fails).
void export_hf(const std::string& dir, const model::GptParams& params,
               const model::GptConfig& config, runtime::DType dtype = runtime::DType::f32);

// The weights at `path` (a model.safetensors, or a sharded checkpoint's
// model.safetensors.index.json; headers read, the tensors left in the files) opened for the
// family of `config` (the whole model). A config.json beside a Llama's weights, when there, must
// describe `config` (check_hf_llama_config). InputError naming the file or tensor otherwise.
std::unique_ptr<HfImport> open_hf_import(const std::string& path, const model::GptConfig& config);

}  // namespace trainer
