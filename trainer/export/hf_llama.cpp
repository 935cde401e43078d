// HF Llama export and import: one table row per parameter kind, naming its HF tensor and the
// transform, read in both directions (config.json: hf_llama_config.cpp).
#include "trainer/export/hf_llama.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "runtime/error.h"

namespace trainer {
namespace {

using Shape = std::vector<int64_t>;

using Transform = HfTransform;

const std::vector<HfRule>& hf_llama_rules() {
  static const std::vector<HfRule> rules = {
      {"embedding.word_embeddings.weight", "model.embed_tokens.weight", Transform::vocab_rows},
      {"layers.{i}.input_layernorm.weight", "model.layers.{i}.input_layernorm.weight",
       Transform::copy},
      {"layers.{i}.self_attention.linear_qkv.weight",
       "model.layers.{i}.self_attn.{qkv}_proj.weight", Transform::split_qkv},
      {"layers.{i}.self_attention.linear_qkv.bias", "model.layers.{i}.self_attn.{qkv}_proj.bias",
       Transform::split_qkv},  // model.add_qkv_bias (Qwen2)
      {"layers.{i}.self_attention.q_layernorm.weight", "model.layers.{i}.self_attn.q_norm.weight",
       Transform::copy},  // model.qk_layernorm (Qwen3)
      {"layers.{i}.self_attention.k_layernorm.weight", "model.layers.{i}.self_attn.k_norm.weight",
       Transform::copy},
      {"layers.{i}.self_attention.linear_proj.weight", "model.layers.{i}.self_attn.o_proj.weight",
       Transform::copy},
      {"layers.{i}.pre_mlp_layernorm.weight", "model.layers.{i}.post_attention_layernorm.weight",
       Transform::copy},
      {"layers.{i}.mlp.linear_fc1_gate.weight", "model.layers.{i}.mlp.gate_proj.weight",
       Transform::copy},
      {"layers.{i}.mlp.linear_fc1_up.weight", "model.layers.{i}.mlp.up_proj.weight",
       Transform::copy},
      {"layers.{i}.mlp.linear_fc2.weight", "model.layers.{i}.mlp.down_proj.weight",
       Transform::copy},
      {"final_layernorm.weight", "model.norm.weight", Transform::copy},
      {"output_layer.weight", "lm_head.weight", Transform::vocab_rows},
  };
  return rules;
}

// The rule of a parameter name, and the layer index it names ("" outside layers).
std::pair<const HfRule*, std::string> rule_of(const std::string& name) {
  return hf_rule_of(hf_llama_rules(), name);
}

// The shape of `n` rows of a parameter of `shape`: a weight's rows of its columns, a bias's values.
Shape rows_of(const Shape& shape, int64_t n) {
  return shape.size() > 1 ? Shape{n, shape[1]} : Shape{n};
}

// The rows of `values` (rows, cols) from `first_row` as one block of `rows` rows.
void copy_rows(float* out, const std::vector<float>& values, int64_t first_row, int64_t rows,
               int64_t cols) {
  std::copy(values.begin() + first_row * cols, values.begin() + (first_row + rows) * cols, out);
}

}  // namespace

HfLlamaImport::HfLlamaImport(SafetensorsFile file, const model::GptConfig& config)
    : HfImport(std::move(file), config, {""}, hf_llama_rules()) {
  check_tensors([](const std::string& name) {  // the rotary buffers HF may save
    return name.size() > 22 && name.substr(name.size() - 22) == ".rotary_emb.inv_freq";
  });
}

void HfLlamaImport::check_transformed(const HfRule& rule, const std::string& hf,
                                      const runtime::Shape& shape) {
  TRAINER_ASSERT(rule.transform == Transform::split_qkv, "not a Llama transform: " << rule.ours);
  const int64_t D = config_.head_dim(), r = config_.group_size();
  const int64_t groups = config_.query_groups();
  tensors_.check(hf_replaced(hf, "{qkv}", "q"), rows_of(shape, groups * r * D));
  tensors_.check(hf_replaced(hf, "{qkv}", "k"), rows_of(shape, groups * D));
  tensors_.check(hf_replaced(hf, "{qkv}", "v"), rows_of(shape, groups * D));
}

std::vector<float> HfLlamaImport::transformed(const HfRule& rule, const std::string& hf,
                                              const runtime::Shape&, const HfBlock& block) {
  // split_qkv, by whole kv groups: tensor parallelism never splits one.
  TRAINER_ASSERT(rule.transform == Transform::split_qkv, "not a Llama transform: " << rule.ours);
  const int64_t D = config_.head_dim(), r = config_.group_size(), group_rows = (r + 2) * D;
  TRAINER_ASSERT(
      block.first_row % group_rows == 0 && block.rows % group_rows == 0,
      rule.ours << " rows " << block.first_row << " + " << block.rows << " split a kv group");
  const int64_t first = block.first_row / group_rows, groups = block.rows / group_rows;
  const int64_t cols = block.cols;
  auto read = [&](const char* which, int64_t rows_per_group) {
    return tensors_.values(
        hf_replaced(hf, "{qkv}", which),
        {first * rows_per_group, groups * rows_per_group, block.first_col, cols});
  };
  const std::vector<float> qs = read("q", r * D), ks = read("k", D), vs = read("v", D);
  std::vector<float> values(static_cast<size_t>(block.rows * cols));
  float* out = values.data();
  for (int64_t g = 0; g < groups; ++g) {
    copy_rows(out, qs, g * r * D, r * D, cols), out += r * D * cols;
    copy_rows(out, ks, g * D, D, cols), out += D * cols;
    copy_rows(out, vs, g * D, D, cols), out += D * cols;
  }
  return values;
}

std::vector<HfSource> hf_llama_sources(const model::GptParams& layout,
                                       const model::GptConfig& config) {
  TRAINER_ASSERT(config.architecture == model::Architecture::llama &&
                     model::hf_family_mismatch(config).empty(),
                 "not a LlamaForCausalLM block");
  TRAINER_ASSERT(layout.flat.numel() == model::GptParams::count(config),
                 "HF Llama export needs the whole model's layout");
  const int64_t D = config.head_dim(), r = config.group_size();
  const int64_t groups = config.query_groups();
  std::vector<HfSource> sources;
  for (size_t index = 0; index < layout.named.size(); ++index) {
    const model::NamedParam& p = layout.named[index];
    const auto [rule, layer] = rule_of(p.name);
    TRAINER_ASSERT(rule != nullptr, "no HF Llama rule for " << p.name);
    const std::string hf = hf_replaced(rule->hf, "{i}", layer);
    const auto param = static_cast<int64_t>(index);
    const Shape& shape = p.global_shape;
    switch (rule->transform) {
      case Transform::copy:
      case Transform::vocab_rows:
        sources.push_back(hf_shared_source(rule->transform, hf, shape, param, config.vocab_size));
        break;
      case Transform::split_qkv: {  // the weight's rows of C values, or the bias's values
        const int64_t width = shape.size() > 1 ? shape[1] : 1;
        // Of each group's r + 2 heads, heads [begin, end): q is 0..r-1, k is r, v is r + 1.
        auto heads = [=](int64_t begin, int64_t end) {
          return [=](const float* values, const HfValueSink& sink) {
            for (int64_t g = 0; g < groups; ++g)
              sink(values + (g * (r + 2) + begin) * D * width, (end - begin) * D * width);
          };
        };
        sources.push_back(
            {hf_replaced(hf, "{qkv}", "q"), rows_of(shape, groups * r * D), param, heads(0, r)});
        sources.push_back(
            {hf_replaced(hf, "{qkv}", "k"), rows_of(shape, groups * D), param, heads(r, r + 1)});
        sources.push_back({hf_replaced(hf, "{qkv}", "v"), rows_of(shape, groups * D), param,
                           heads(r + 1, r + 2)});
        break;
      }
      case Transform::transpose:
      case Transform::qkv_columns:
        TRAINER_ASSERT(false, "GPT-2's transform in the Llama table: " << rule->ours);
    }
  }
  return sources;
}

}  // namespace trainer
