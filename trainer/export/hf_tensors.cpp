// Checked, lazily read Hugging Face tensors (hf_tensors.h).
#include "trainer/export/hf_tensors.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "runtime/error.h"
#include "runtime/tensor.h"

namespace trainer {

HfTensors::HfTensors(const SafetensorsFile& file, std::vector<std::string> prefixes)
    : file_(file), prefixes_(std::move(prefixes)) {}

const SafetensorsEntry& HfTensors::find(const std::string& name) const {
  for (const std::string& prefix : prefixes_) {
    const auto it = file_.tensors.find(prefix + name);
    if (it != file_.tensors.end()) return it->second;
  }
  std::string tried = "'" + prefixes_.front() + name + "'";
  for (size_t i = 1; i < prefixes_.size(); ++i) tried += " (nor '" + prefixes_[i] + name + "')";
  throw runtime::InputError("missing tensor " + tried);
}

void HfTensors::check(const std::string& name, const std::vector<int64_t>& shape,
                      int64_t min_rows) {
  const SafetensorsEntry& entry = find(name);
  const bool columns_fit =
      entry.shape.size() == 2 && shape.size() == 2 && entry.shape[1] == shape[1];
  const bool fits = min_rows < 0 ? entry.shape == shape : columns_fit && entry.shape[0] >= min_rows;
  if (!fits && min_rows >= 0 && columns_fit)
    throw runtime::InputError(TRAINER_STR("tensor '" << entry.name << "' has " << entry.shape[0]
                                                     << " rows: the vocabulary is too small for "
                                                     << "config vocab_size " << min_rows));
  if (!fits)
    throw runtime::InputError(TRAINER_STR(
        "tensor '" << entry.name << "' has shape " << safetensors_shape_text(entry.shape)
                   << ", the config needs " << (min_rows < 0 ? "" : "at least ")
                   << safetensors_shape_text(shape)));
  check_float_dtype(entry);
  used_.insert(entry.name);
}

namespace {

// `block` of a tensor of `shape` (1-D: one column) with every field set; asserts it fits.
HfBlock whole_fields(HfBlock block, const std::vector<int64_t>& shape, const std::string& name) {
  const int64_t rows = shape.empty() ? 1 : shape[0], cols = shape.size() > 1 ? shape[1] : 1;
  if (block.rows < 0) block.rows = rows - block.first_row;
  if (block.cols < 0) block.cols = cols - block.first_col;
  TRAINER_ASSERT(
      block.first_row >= 0 && block.rows >= 0 && block.first_row + block.rows <= rows &&
          block.first_col >= 0 && block.cols >= 0 && block.first_col + block.cols <= cols,
      "rows [" << block.first_row << ", " << block.first_row + block.rows << ") columns ["
               << block.first_col << ", " << block.first_col + block.cols << ") of " << name << " ("
               << rows << " x " << cols << ")");
  return block;
}

}  // namespace

std::vector<float> HfTensors::values(const std::string& name, HfBlock block) {
  const SafetensorsEntry& entry = find(name);
  TRAINER_ASSERT(used_.count(entry.name), "tensor '" << entry.name << "' read before check()");
  block = whole_fields(block, entry.shape, entry.name);
  bytes_read_ += block.rows * block.cols * safetensors_dtype_size(entry.dtype);
  if (entry.shape.size() == 2)
    return safetensors_f32_block(entry, block.first_row, block.rows, block.first_col, block.cols);
  return safetensors_f32_values(entry, block.first_row, block.rows);
}

std::vector<float> HfTensors::vocab_rows(const std::string& name, int64_t vocab, HfBlock block) {
  TRAINER_ASSERT(block.rows >= 0 && block.cols >= 0, "a vocabulary block's size is set");
  const int64_t stored = std::clamp<int64_t>(vocab - block.first_row, 0, block.rows);
  if (stored == block.rows) return values(name, block);  // no padding rows: no second copy
  std::vector<float> out(static_cast<size_t>(block.rows * block.cols), 0.f);
  if (stored > 0) {
    const std::vector<float> read =
        values(name, {block.first_row, stored, block.first_col, block.cols});
    std::copy(read.begin(), read.end(), out.begin());
  }
  return out;
}

void HfTensors::check_all_used(const std::function<bool(const std::string&)>& ignored) const {
  for (const auto& [name, entry] : file_.tensors)
    if (!used_.count(name) && !ignored(name))
      throw runtime::InputError("unexpected tensor '" + name +
                                "': the config has no parameter for it");
}

HfImport::HfImport(SafetensorsFile file, const model::GptConfig& config,
                   std::vector<std::string> prefixes, const std::vector<HfRule>& rules)
    : config_(config),
      rules_(rules),
      file_(std::move(file)),
      tensors_(file_, std::move(prefixes)),
      whole_(config) {
  for (const model::NamedParam& p : whole_.named()) index_.emplace(p.name, index_.size());
}

std::pair<const HfRule*, std::string> HfImport::rule_of(const std::string& name) const {
  const auto [rule, layer] = hf_rule_of(rules_, name);
  TRAINER_ASSERT(rule != nullptr, "no HF rule for " << name);
  return {rule, hf_replaced(rule->hf, "{i}", layer)};
}

void HfImport::check_tensors(const std::function<bool(const std::string&)>& ignored) {
  const int64_t C = config_.hidden_size, V = config_.vocab_size;
  for (const model::NamedParam& p : whole_.named()) {
    const auto [rule, hf] = rule_of(p.name);
    if (rule->transform == HfTransform::copy) {
      tensors_.check(hf, p.global_shape);
    } else if (rule->transform == HfTransform::vocab_rows) {
      tensors_.check(hf, {V, C}, V);
    } else {
      check_transformed(*rule, hf, p.global_shape);
    }
  }
  tensors_.check_all_used(ignored);
}

const runtime::Shape& HfImport::shape_of(const std::string& name) const {
  const auto it = index_.find(name);
  TRAINER_ASSERT(it != index_.end(), "no parameter " << name);
  return whole_.named()[it->second].global_shape;
}

std::vector<float> HfImport::values(const std::string& name, HfBlock block) {
  const runtime::Shape& shape = shape_of(name);
  block = whole_fields(block, shape, name);
  const auto [rule, hf] = rule_of(name);
  if (rule->transform == HfTransform::copy) return tensors_.values(hf, block);
  if (rule->transform == HfTransform::vocab_rows)
    return tensors_.vocab_rows(hf, config_.vocab_size, block);
  return transformed(*rule, hf, shape, block);
}

void HfImport::read_into(const std::string& name, HfBlock block, std::span<float> out,
                         int64_t piece_values) {
  block = whole_fields(block, shape_of(name), name);
  TRAINER_ASSERT(
      static_cast<int64_t>(out.size()) == block.rows * block.cols,
      name << ": " << block.rows << " x " << block.cols << " values into " << out.size());
  const HfTransform transform = rule_of(name).first->transform;
  const bool by_rows = transform == HfTransform::copy || transform == HfTransform::vocab_rows;
  const int64_t piece_rows =
      by_rows ? std::max<int64_t>(1, piece_values / std::max<int64_t>(1, block.cols)) : block.rows;
  for (int64_t done = 0; done < block.rows; done += piece_rows) {
    HfBlock piece = block;
    piece.first_row = block.first_row + done;
    piece.rows = std::min(piece_rows, block.rows - done);
    const std::vector<float> read = values(name, piece);
    std::copy(read.begin(), read.end(), out.begin() + done * block.cols);
  }
}

int64_t HfImport::stored_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, entry] : file_.tensors)
    bytes += runtime::shape_numel(entry.shape) * safetensors_dtype_size(entry.dtype);
  return bytes;
}

HfSource hf_shared_source(HfTransform transform, std::string hf, const runtime::Shape& shape,
                          int64_t param, int64_t vocab_size) {
  TRAINER_ASSERT(transform == HfTransform::copy || transform == HfTransform::vocab_rows,
                 hf << ": a family's own transform");
  // Both are the parameter's first values: all of them, or its first vocab_size rows.
  runtime::Shape hf_shape = shape;
  if (transform == HfTransform::vocab_rows) hf_shape[0] = vocab_size;
  const int64_t count = runtime::shape_numel(hf_shape);
  return {std::move(hf), std::move(hf_shape), param,
          [count](const float* values, const HfValueSink& sink) { sink(values, count); }};
}

std::vector<SafetensorsEntry> hf_entries(const std::vector<HfSource>& sources,
                                         const model::GptParams& params) {
  std::vector<SafetensorsEntry> entries;
  for (const HfSource& source : sources) {
    SafetensorsEntry entry{source.name, "F32", source.shape, {}};
    const float* param = params.named.at(static_cast<size_t>(source.param)).tensor.f32();
    source.write(param, [&](const float* values, int64_t count) {
      const auto* bytes = reinterpret_cast<const uint8_t*>(values);
      entry.data.insert(entry.data.end(), bytes, bytes + count * sizeof(float));
    });
    TRAINER_ASSERT(
        static_cast<int64_t>(entry.data.size()) == runtime::shape_numel(source.shape) * 4,
        source.name << ": " << entry.data.size() / 4 << " values");
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::pair<std::string, std::string> hf_name_pattern(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return {name, ""};
  const size_t dot = name.find('.', 7);
  return {"layers.{i}" + name.substr(dot), name.substr(7, dot - 7)};
}

std::string hf_replaced(std::string text, const std::string& key, const std::string& value) {
  const size_t at = text.find(key);
  return at == std::string::npos ? text : text.replace(at, key.size(), value);
}

void import_whole(HfImport& import, const model::GptParams& params) {
  TRAINER_ASSERT(params.flat.device() == runtime::DeviceKind::cpu &&
                     params.flat.dtype() == runtime::DType::f32,
                 "an HF import fills host f32 parameters");
  for (const model::NamedParam& p : params.named)
    import.read_into(p.name, {}, {p.tensor.f32(), static_cast<size_t>(p.tensor.numel())});
}

}  // namespace trainer
