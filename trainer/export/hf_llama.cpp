// HF Llama export and import: one table row per parameter kind, naming its HF tensor and the
// transform, read in both directions.
#include "trainer/export/hf_llama.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <utility>

#include "runtime/error.h"
#include "trainer/export/json_object.h"

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

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
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

using Fail = std::function<void(const std::string&, const std::string&)>;

// The JSON number at node[field], or fail(`where`, ...) when it is not one.
double number_at(const YAML::Node& node, const char* field, const std::string& where,
                 const Fail& fail) {
  const YAML::Node value = node[field];
  const std::string text = value && value.IsScalar() ? value.Scalar() : std::string();
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') fail(where, "\"" + text + "\" is not a number");
  return number;
}

// node's rope_theta, when set, equals model.rotary_base (`where` names it).
void check_rope_theta(const YAML::Node& node, const std::string& where,
                      const model::GptConfig& config, const Fail& fail) {
  const YAML::Node theta = node["rope_theta"];
  if (!theta || theta.IsNull()) return;
  if (std::abs(number_at(node, "rope_theta", where, fail) - config.rotary_base) >
      1e-6 * std::abs(static_cast<double>(config.rotary_base)))
    fail(where, theta.Scalar() + " differs from model.rotary_base " + number(config.rotary_base));
}

// rope_scaling (transformers 4; rope_parameters in 5, with rope_theta inside): null, rope_type
// "default" or "llama3" with the config's model.rope_scaling.
void check_rope_scaling(const YAML::Node& root, const model::GptConfig& config, const Fail& fail) {
  const char* key = root["rope_parameters"] ? "rope_parameters" : "rope_scaling";
  const YAML::Node node = root[key];
  const runtime::RopeScaling& ours = config.rope_scaling;
  if (node && !node.IsNull() && !node.IsMap()) fail(key, "is neither null nor an object");
  auto scalar = [&](const char* field) {
    const YAML::Node value = node[field];
    return value && value.IsScalar() ? value.Scalar() : std::string();
  };
  auto value_of = [&](const char* field) {
    return number_at(node, field, std::string(key) + "." + field, fail);
  };
  const char* type_key = node && node.IsMap() && !node["rope_type"] ? "type" : "rope_type";
  const std::string type = node && node.IsMap() ? scalar(type_key) : std::string();
  if (node && node.IsMap()) check_rope_theta(node, std::string(key) + ".rope_theta", config, fail);
  if (!node || node.IsNull() || type == "default") {
    if (ours.enabled())
      fail(key, "is plain RoPE, but model.rope_scaling.factor is " + number(ours.factor));
    return;
  }
  if (type != "llama3")
    fail(std::string(key) + "." + type_key,
         "\"" + type +
             "\" is not supported (llama3 or default; the trainer scales RoPE as Llama 3.1)");
  if (!ours.enabled()) fail(key, "is llama3, but model.rope_scaling.factor is 0 (plain RoPE)");
  auto same = [&](const char* field, double expected, const std::string& ours_name) {
    if (!node[field]) fail(std::string(key) + "." + field, "is missing");
    if (std::abs(value_of(field) - expected) > 1e-6 * std::abs(expected))
      fail(std::string(key) + "." + field,
           scalar(field) + " differs from " + ours_name + " " + number(expected));
  };
  same("factor", ours.factor, "model.rope_scaling.factor");
  same("low_freq_factor", ours.low_freq_factor, "model.rope_scaling.low_freq_factor");
  same("high_freq_factor", ours.high_freq_factor, "model.rope_scaling.high_freq_factor");
  same("original_max_position_embeddings",
       static_cast<double>(ours.original_max_position_embeddings),
       "model.rope_scaling.original_max_position_embeddings");
}

// LlamaConfig's rope_scaling: null, or Llama 3.1's.
std::string rope_scaling_json(const runtime::RopeScaling& s) {
  if (!s.enabled()) return "null";
  return "{\n    \"factor\": " + number(s.factor) +
         ",\n    \"high_freq_factor\": " + number(s.high_freq_factor) +
         ",\n    \"low_freq_factor\": " + number(s.low_freq_factor) +
         ",\n    \"original_max_position_embeddings\": " +
         std::to_string(s.original_max_position_embeddings) +
         ",\n    \"rope_type\": \"llama3\"\n  }";
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

void check_hf_llama_config(const std::string& json_text, const std::string& source,
                           const model::GptConfig& config) {
  const YAML::Node root =
      load_json_object(json_text, source, "not JSON", "not a JSON object (LlamaConfig)");
  auto fail = [&](const std::string& field, const std::string& why) {
    throw runtime::InputError(source + ": " + field + " " + why);
  };
  auto text = [&](const char* field) {
    const YAML::Node node = root[field];
    return node && !node.IsNull() && node.IsScalar() ? node.Scalar() : std::string();
  };
  const std::string model_type = text("model_type");
  const bool qwen2 = model_type == "qwen2", qwen3 = model_type == "qwen3";
  if (!model_type.empty() && model_type != "llama" && model_type != "mistral" && !qwen2 && !qwen3)
    fail("model_type", "\"" + model_type + "\" is not a Llama-family model");
  const std::string type_text =
      "\"" + (model_type.empty() ? std::string("llama") : model_type) + "\" ";
  auto flag = [](bool value) { return std::string(value ? "true" : "false"); };
  if (qwen2 != config.add_qkv_bias)
    fail("model_type", type_text + (qwen2 ? "has" : "has no") + " q, k and v biases, but " +
                           "model.add_qkv_bias is " + flag(config.add_qkv_bias));
  if (qwen3 != config.qk_layernorm)
    fail("model_type", type_text + (qwen3 ? "has" : "has no") + " q and k norms, but " +
                           "model.qk_layernorm is " + flag(config.qk_layernorm));
  const bool qwen = qwen2 || qwen3;
  auto must_be = [&](const char* field, int64_t expected, const char* ours) {
    const std::string value = text(field);
    if (!value.empty() && value != std::to_string(expected))
      fail(field, value + " differs from " + ours + " " + std::to_string(expected));
  };
  must_be("hidden_size", config.hidden_size, "model.hidden_size");
  must_be("num_hidden_layers", config.num_layers, "model.num_layers");
  must_be("num_attention_heads", config.num_attention_heads, "model.num_attention_heads");
  must_be("num_key_value_heads", config.query_groups(), "model.num_query_groups");
  must_be("intermediate_size", config.ffn(), "model.ffn_hidden_size");
  // Without head_dim, transformers takes hidden_size / num_attention_heads.
  must_be("head_dim", config.head_dim(),
          config.kv_channels > 0 ? "model.kv_channels"
                                 : "model.hidden_size / model.num_attention_heads");
  if (text("head_dim").empty() &&
      config.head_dim() * config.num_attention_heads != config.hidden_size)
    fail("head_dim", "is absent (hidden_size / num_attention_heads), but model.kv_channels is " +
                         std::to_string(config.kv_channels));
  check_rope_scaling(root, config, fail);
  // Qwen2 and Qwen3 keep a window size (or null) that only use_sliding_window turns on.
  const YAML::Node window = root["sliding_window"];
  if (qwen ? text("use_sliding_window") == "true" : window && !window.IsNull())
    fail(qwen ? "use_sliding_window" : "sliding_window",
         "is set; attention here is causal over the whole sequence");
  for (const char* field : {"attention_bias", "mlp_bias"})
    if (text(field) == "true") fail(field, "is true; Llama blocks here have none");
  const bool tied = text("tie_word_embeddings") == "true";  // LlamaConfig's default: false
  if (tied == config.untie_embeddings) {
    fail("tie_word_embeddings", std::string(tied ? "true" : "false (or absent)") +
                                    ", but model.untie_embeddings is " +
                                    (config.untie_embeddings ? "true" : "false"));
  }
  const std::string act = text("hidden_act");
  if (!act.empty() && act != "silu") fail("hidden_act", "\"" + act + "\" is not silu (SwiGLU)");
  check_rope_theta(root, "rope_theta", config, fail);
  const std::string eps = text("rms_norm_eps");
  if (!eps.empty() &&
      std::abs(number_at(root, "rms_norm_eps", "rms_norm_eps", fail) - config.layernorm_epsilon) >
          1e-3 * static_cast<double>(config.layernorm_epsilon))
    fail("rms_norm_eps",
         eps + " differs from model.layernorm_epsilon " + number(config.layernorm_epsilon));
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

std::string hf_llama_config_json(const model::GptConfig& config, std::string_view torch_dtype) {
  // Qwen2ForCausalLM: Llama's block with q, k and v biases (model.add_qkv_bias); Qwen3ForCausalLM:
  // with q and k norms (model.qk_layernorm).
  const bool qwen2 = config.add_qkv_bias, qwen3 = config.qk_layernorm;
  const std::string model_type = qwen2 ? "qwen2" : qwen3 ? "qwen3" : "llama";
  std::vector<std::pair<std::string, std::string>> fields = {
      {"architectures", "[\n    " + json_quote(model::hf_class_name(config)) + "\n  ]"},
      {"attention_bias", "false"},
      {"attention_dropout", number(config.attention_dropout)},
      {"head_dim", std::to_string(config.head_dim())},
      {"hidden_act", "\"silu\""},
      {"hidden_size", std::to_string(config.hidden_size)},
      {"initializer_range", number(config.init_method_std)},
      {"intermediate_size", std::to_string(config.ffn())},
      {"max_position_embeddings", std::to_string(config.positions())},
      {"mlp_bias", "false"},
      {"model_type", json_quote(model_type)},
      {"num_attention_heads", std::to_string(config.num_attention_heads)},
      {"num_hidden_layers", std::to_string(config.num_layers)},
      {"num_key_value_heads", std::to_string(config.query_groups())},
      {"rms_norm_eps", number(config.layernorm_epsilon)},
      {"rope_scaling", rope_scaling_json(config.rope_scaling)},
      {"rope_theta", number(config.rotary_base)},
      {"tie_word_embeddings", config.untie_embeddings ? "false" : "true"},
      {"torch_dtype", json_quote(torch_dtype)},
      {"vocab_size", std::to_string(config.vocab_size)},
  };
  if (qwen2 || qwen3) {  // Qwen2Config's and Qwen3Config's fields in place of LlamaConfig's
    std::erase_if(fields, [&](const auto& field) {
      return field.first == "mlp_bias" || (qwen2 && field.first == "attention_bias");
    });
    fields.insert(fields.end() - 1, {"use_sliding_window", "false"});
  }
  std::string json = "{\n";
  for (size_t i = 0; i < fields.size(); ++i)
    json += "  \"" + fields[i].first + "\": " + fields[i].second +
            (i + 1 < fields.size() ? ",\n" : "\n");
  return json + "}\n";
}

}  // namespace trainer
