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
#include "trainer/export/json_object.h"
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

// The sources of `config`'s family.
std::vector<HfSource> hf_sources(const model::GptParams& layout, const model::GptConfig& config) {
  return config.architecture == model::Architecture::llama ? hf_llama_sources(layout, config)
                                                           : hf_gpt2_sources(layout, config);
}

// The parameters of a whole model in memory.
class HeldParams final : public HfParamValues {
 public:
  explicit HeldParams(const model::GptParams& params) : params_(params) {}
  const float* acquire(int64_t param) override {
    return params_.named.at(static_cast<size_t>(param)).tensor.f32();
  }
  void release(int64_t) override {}

 private:
  const model::GptParams& params_;
};

}  // namespace

std::vector<SafetensorsSource> to_hf(const model::GptParams& layout, const model::GptConfig& config,
                                     runtime::DType dtype, HfParamValues& values) {
  TRAINER_ASSERT(dtype == runtime::DType::f32 || dtype == runtime::DType::bf16,
                 "an export is float32 or bfloat16");
  const bool bf16 = dtype == runtime::DType::bf16;
  std::vector<SafetensorsSource> sources;
  for (HfSource& source : hf_sources(layout, config)) {
    sources.push_back({source.name, bf16 ? "BF16" : "F32", source.shape,
                       [write = std::move(source.write), param = source.param, bf16,
                        &values](const SafetensorsSink& sink) {
                         const float* param_values = values.acquire(param);
                         if (!bf16) {  // the f32 values are the bytes
                           write(param_values, [&](const float* part, int64_t count) {
                             sink(part, static_cast<size_t>(count) * sizeof(float));
                           });
                         } else {
                           runtime::CpuAllocator host;
                           const runtime::Tensor wide =
                               runtime::Tensor::empty(host, {kBf16Piece}, runtime::DType::f32,
                                                      runtime::MemoryCategory::workspace);
                           const runtime::Tensor narrow =
                               runtime::Tensor::empty(host, {kBf16Piece}, runtime::DType::bf16,
                                                      runtime::MemoryCategory::workspace);
                           write(param_values, [&](const float* part, int64_t count) {
                             write_bf16(part, count, wide, narrow, sink);
                           });
                         }
                         values.release(param);
                       }});
  }
  return sources;
}

void export_hf(const std::string& dir, const model::GptConfig& config, runtime::DType dtype,
               HfParamValues& values) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    throw runtime::InputError(dir + ": cannot create the export directory: " + error.message());
  const std::filesystem::path base(dir);
  const model::WholeModelLayout layout(config);
  write_safetensors_streamed((base / "model.safetensors").string(),
                             to_hf(layout.params(), config, dtype, values), {{"format", "pt"}});
  const std::string json = config.architecture == model::Architecture::llama
                               ? hf_llama_config_json(config, hf_torch_dtype(dtype))
                               : hf_gpt2_config_json(config, hf_torch_dtype(dtype));
  AtomicFileWriter config_file((base / "config.json").string());
  config_file.write(json);
  config_file.commit();
}

void export_hf(const std::string& dir, const model::GptParams& params,
               const model::GptConfig& config, runtime::DType dtype) {
  TRAINER_ASSERT(params.flat.device() == runtime::DeviceKind::cpu &&
                     params.flat.dtype() == runtime::DType::f32 &&
                     params.flat.numel() == model::GptParams::count(config),
                 "an HF export needs the whole model, host f32");
  HeldParams values(params);
  export_hf(dir, config, dtype, values);
}

std::vector<int64_t> hf_export_param_reads(const model::GptConfig& config) {
  const model::WholeModelLayout layout(config);
  const std::vector<HfSource> sources = hf_sources(layout.params(), config);
  // Every tensor has the export's one dtype: the file's order is the names'.
  std::vector<SafetensorsSource> named;
  for (const HfSource& source : sources) named.push_back({source.name, "F32", source.shape, {}});
  std::vector<int64_t> reads;
  for (const size_t i : safetensors_write_order(named)) reads.push_back(sources[i].param);
  return reads;
}

LoadedParamValues::LoadedParamValues(const model::GptConfig& config, Load load)
    : layout_(config), load_(std::move(load)) {
  for (const int64_t param : hf_export_param_reads(config)) ++reads_left_[param];
}

const float* LoadedParamValues::acquire(int64_t param) {
  const auto held = held_.find(param);
  if (held != held_.end()) return held->second.data();
  const model::NamedParam& entry = layout_.named().at(static_cast<size_t>(param));
  const int64_t numel = runtime::shape_numel(entry.global_shape);
  std::vector<float>& values = held_[param];
  values.assign(static_cast<size_t>(numel), 0.f);
  load_(param, entry, values);
  held_values_ += numel;
  peak_values_ = std::max(peak_values_, held_values_);
  return values.data();
}

void LoadedParamValues::release(int64_t param) {
  if (--reads_left_.at(param) > 0) return;
  held_values_ -= static_cast<int64_t>(held_.at(param).size());
  held_.erase(param);
}

void LoadedParamValues::clear() {
  held_.clear();
  held_values_ = 0;
}

model::GptConfig model_config_from_hf_json(const std::string& json_text,
                                           const std::string& source) {
  const JsonConfigReader json(json_text, source);
  const bool gpt2 =
      json.has("model_type") ? json.string("model_type", "") == "gpt2" : json.has("n_layer");
  return gpt2 ? gpt_config_from_hf_json(json_text, source)
              : llama_config_from_hf_json(json_text, source);
}

std::unique_ptr<HfImport> open_hf_import(const std::string& given, const model::GptConfig& config) {
  const std::string path = hf_weights_path(given);
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
