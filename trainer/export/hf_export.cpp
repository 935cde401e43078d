// The Hugging Face export: each family's tensors and config.json, converted to the export's dtype.
#include "trainer/export/hf_export.h"

#include <algorithm>
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

namespace {

// Values converted to bf16 per piece of at most this many (the export's only buffer beyond the
// tensor being written).
constexpr int64_t kBf16Piece = int64_t{1} << 20;

// Gives `sink` the bf16 bits of `count` f32 values, a piece at a time through `wide` and
// `narrow` (kBf16Piece values each).
void write_bf16(const float* values, int64_t count, const runtime::Tensor& wide,
                const runtime::Tensor& narrow, const SafetensorsSink& sink) {
  for (int64_t done = 0; done < count; done += kBf16Piece) {
    const int64_t n = std::min(kBf16Piece, count - done);
    std::memcpy(wide.f32(), values + done, static_cast<size_t>(n) * sizeof(float));
    runtime::ops::convert(narrow.view(0, {n}), wide.view(0, {n}));
    sink(narrow.raw(), static_cast<size_t>(n) * 2);
  }
}

}  // namespace

std::vector<SafetensorsSource> to_hf(const model::GptParams& params, const model::GptConfig& config,
                                     runtime::DType dtype) {
  TRAINER_ASSERT(dtype == runtime::DType::f32 || dtype == runtime::DType::bf16,
                 "an export is float32 or bfloat16");
  const bool bf16 = dtype == runtime::DType::bf16;
  std::vector<SafetensorsSource> sources;
  for (HfSource& source : config.architecture == model::Architecture::llama
                              ? hf_llama_sources(params, config)
                              : hf_gpt2_sources(params, config)) {
    sources.push_back({source.name, bf16 ? "BF16" : "F32", source.shape,
                       [write = std::move(source.write), bf16](const SafetensorsSink& sink) {
                         if (!bf16) {  // the f32 values are the bytes
                           write([&](const float* values, int64_t count) {
                             sink(values, static_cast<size_t>(count) * sizeof(float));
                           });
                           return;
                         }
                         runtime::CpuAllocator host;
                         const runtime::Tensor wide =
                             runtime::Tensor::empty(host, {kBf16Piece}, runtime::DType::f32,
                                                    runtime::MemoryCategory::workspace);
                         const runtime::Tensor narrow =
                             runtime::Tensor::empty(host, {kBf16Piece}, runtime::DType::bf16,
                                                    runtime::MemoryCategory::workspace);
                         write([&](const float* values, int64_t count) {
                           write_bf16(values, count, wide, narrow, sink);
                         });
                       }});
  }
  return sources;
}

void export_hf(const std::string& dir, const model::GptParams& params,
               const model::GptConfig& config, runtime::DType dtype) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    throw runtime::InputError(dir + ": cannot create the export directory: " + error.message());
  const std::filesystem::path base(dir);
  write_safetensors_streamed((base / "model.safetensors").string(), to_hf(params, config, dtype),
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
