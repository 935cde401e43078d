// The Hugging Face export: each family's tensors and config.json, converted to the export's dtype.
#include "trainer/export/hf_export.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "runtime/allocator.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "trainer/export/hf_gpt2.h"
#include "trainer/export/hf_llama.h"
#include "trainer/export/safetensors_index.h"

namespace trainer {

std::string_view hf_torch_dtype(runtime::DType dtype) {
  TRAINER_ASSERT(dtype == runtime::DType::f32 || dtype == runtime::DType::bf16,
                 "an export is float32 or bfloat16");
  return dtype == runtime::DType::bf16 ? "bfloat16" : "float32";
}

std::vector<SafetensorsEntry> to_hf(const model::GptParams& params,
                                    const model::GptConfig& config, runtime::DType dtype) {
  TRAINER_ASSERT(dtype == runtime::DType::f32 || dtype == runtime::DType::bf16,
                 "an export is float32 or bfloat16");
  std::vector<SafetensorsEntry> entries = config.architecture == model::Architecture::llama
                                              ? to_hf_llama(params, config)
                                              : to_hf_gpt2(params, config);
  if (dtype == runtime::DType::f32) return entries;
  runtime::CpuAllocator host;
  for (SafetensorsEntry& entry : entries) {
    const int64_t numel = runtime::shape_numel(entry.shape);
    const runtime::Tensor f32 = runtime::Tensor::empty(host, {numel}, runtime::DType::f32,
                                                       runtime::MemoryCategory::workspace);
    const runtime::Tensor bf16 = runtime::Tensor::empty(host, {numel}, runtime::DType::bf16,
                                                        runtime::MemoryCategory::workspace);
    std::memcpy(f32.f32(), entry.data.data(), entry.data.size());
    runtime::ops::convert(bf16, f32);
    entry.dtype = "BF16";
    entry.data.resize(static_cast<size_t>(numel) * 2);
    std::memcpy(entry.data.data(), bf16.raw(), entry.data.size());
  }
  return entries;
}

void export_hf(const std::string& dir, const model::GptParams& params,
               const model::GptConfig& config, runtime::DType dtype) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    throw runtime::InputError(dir + ": cannot create the export directory: " + error.message());
  const std::filesystem::path base(dir);
  write_safetensors((base / "model.safetensors").string(), to_hf(params, config, dtype),
                    {{"format", "pt"}});
  const std::string json = config.architecture == model::Architecture::llama
                               ? hf_llama_config_json(config, hf_torch_dtype(dtype))
                               : hf_gpt2_config_json(config, hf_torch_dtype(dtype));
  AtomicFileWriter config_file((base / "config.json").string());
  config_file.write(json);
  config_file.commit();
}

std::unique_ptr<HfImport> open_hf_import(const std::string& path, const model::GptConfig& config) {
  SafetensorsFile file = read_hf_weights(path, SafetensorsRead::header);
  if (config.architecture != model::Architecture::llama)
    return std::make_unique<HfGpt2Import>(std::move(file), config);
  const std::filesystem::path json = std::filesystem::path(path).parent_path() / "config.json";
  if (std::ifstream in{json}) {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    check_hf_llama_config(text, json.string(), config);
  }
  return std::make_unique<HfLlamaImport>(std::move(file), config);
}

}  // namespace trainer
