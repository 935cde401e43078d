// A model as Hugging Face's, both ways: GPT2LMHeadModel for a GPT-2 block, LlamaForCausalLM for a
// Llama block (Qwen2ForCausalLM with model.add_qkv_bias, Qwen3ForCausalLM with
// model.qk_layernorm). The export writes its tensors in float32
// or bfloat16 (config.json's torch_dtype says which); the import opens the weights of either family
// for one parameter at a time.
#pragma once

#include <functional>
#include <map>
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

// The whole model's parameters as an export reads them, each by its index in GptParams::named of
// the whole model (f32, its global shape): acquire() gives its values, valid until the matching
// release(). The export asks for each parameter once per tensor made from it, in the order
// hf_export_param_reads gives.
class HfParamValues {
 public:
  virtual ~HfParamValues() = default;
  virtual const float* acquire(int64_t param) = 0;
  virtual void release(int64_t param) = 0;
};

// Parameters loaded on their first read and freed after their last, in the reads of
// hf_export_param_reads: the export holds only the parameters of the tensors it is making (for a
// whole model, at most the largest parameter and a layer's few). `load` fills a parameter's
// values (sized to its global shape, zero) on its first read; it is given the parameter's index
// and its entry in the whole model's layout.
class LoadedParamValues : public HfParamValues {
 public:
  using Load = std::function<void(int64_t param, const model::NamedParam& layout,
                                  std::vector<float>& values)>;
  LoadedParamValues(const model::GptConfig& config, Load load);
  const float* acquire(int64_t param) override;
  void release(int64_t param) override;
  int64_t peak_values() const { return peak_values_; }  // the most values held at once
  void clear();                                         // frees everything held

 private:
  const model::WholeModelLayout layout_;
  Load load_;
  std::map<int64_t, int64_t> reads_left_;
  std::map<int64_t, std::vector<float>> held_;
  int64_t held_values_ = 0;
  int64_t peak_values_ = 0;
};

// The export's tensors, each made in `dtype` from `values` as the writer reaches it (`layout`:
// the whole model's parameters on any device, of which only names and shapes are read); bf16
// rounds each value to the nearest even, as the device's conversion does.
std::vector<SafetensorsSource> to_hf(const model::GptParams& layout, const model::GptConfig& config,
                                     runtime::DType dtype, HfParamValues& values);

// Writes <dir>/model.safetensors (one tensor made at a time: beyond what `values` holds the
// export holds one tensor's values) and <dir>/config.json, each atomically; creates `dir` when
// missing (InputError naming it when that fails).
void export_hf(const std::string& dir, const model::GptConfig& config, runtime::DType dtype,
               HfParamValues& values);

// export_hf of the whole model `params` (host f32) of `config`.
void export_hf(const std::string& dir, const model::GptParams& params,
               const model::GptConfig& config, runtime::DType dtype = runtime::DType::f32);

// The parameter each tensor of an export of `config` is made from, in the order the file holds
// the tensors: what an export asks HfParamValues for (a parameter split into several tensors, as
// Llama's q, k and v, comes more than once).
std::vector<int64_t> hf_export_param_reads(const model::GptConfig& config);

// The model a Hugging Face config.json describes: GPT2Config (model_type gpt2, or none with
// n_layer) through gpt_config_from_hf_json, a Llama-family one through llama_config_from_hf_json.
model::GptConfig model_config_from_hf_json(const std::string& json_text, const std::string& source);

// The weights at `path` (a model.safetensors, a sharded checkpoint's
// model.safetensors.index.json, or a directory holding either; headers read, the tensors left in
// the files) opened for the family of `config` (the whole model). A config.json beside a Llama's
// weights, when there, must describe `config` (check_hf_llama_config). InputError naming the file
// or tensor otherwise.
std::unique_ptr<HfImport> open_hf_import(const std::string& path, const model::GptConfig& config);

}  // namespace trainer
