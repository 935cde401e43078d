// HF Llama-family config.json both ways: the export's LlamaConfig (Qwen2Config, Qwen3Config), the
// check of a config.json beside imported weights against the run's model, and the model config a
// published config.json describes.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "trainer/export/hf_llama.h"
#include "trainer/export/json_object.h"
#include "trainer/util/json_object_writer.h"

namespace trainer {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
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
  const bool yarn = type == "yarn";
  if (type != "llama3" && !yarn)
    fail(std::string(key) + "." + type_key,
         "\"" + type + "\" is not supported (llama3, yarn or default)");
  if (!ours.enabled())
    fail(key, "is " + type + ", but model.rope_scaling.factor is 0 (plain RoPE)");
  if (yarn != (ours.type == runtime::RopeScalingType::yarn))
    fail(std::string(key) + "." + type_key,
         "\"" + type + "\", but model.rope_scaling.type is " + (yarn ? "llama3" : "yarn"));
  // A field absent from the node is `absent` (transformers' default), or missing.
  auto same = [&](const char* field, double expected, const std::string& ours_name,
                  std::optional<double> absent = std::nullopt) {
    const bool given = node[field] && !node[field].IsNull();
    if (!given && !absent) fail(std::string(key) + "." + field, "is missing");
    const double value = given ? value_of(field) : *absent;
    if (std::abs(value - expected) > 1e-6 * std::abs(expected))
      fail(std::string(key) + "." + field,
           (given ? scalar(field) : "absent (" + number(*absent) + ")") + " differs from " +
               ours_name + " " + number(expected));
  };
  same("factor", ours.factor, "model.rope_scaling.factor");
  same("original_max_position_embeddings",
       static_cast<double>(ours.original_max_position_embeddings),
       "model.rope_scaling.original_max_position_embeddings");
  if (!yarn) {
    same("low_freq_factor", ours.low_freq_factor, "model.rope_scaling.low_freq_factor");
    same("high_freq_factor", ours.high_freq_factor, "model.rope_scaling.high_freq_factor");
    return;
  }
  same("beta_fast", ours.beta_fast, "model.rope_scaling.beta_fast", 32.0);
  same("beta_slow", ours.beta_slow, "model.rope_scaling.beta_slow", 1.0);
  // YaRN's variants the trainer does not compute: another attention factor, DeepSeek's mscale,
  // the correction range untruncated.
  for (const char* field : {"attention_factor", "mscale", "mscale_all_dim"})
    if (node[field] && !node[field].IsNull())
      fail(std::string(key) + "." + field, "is set; the trainer takes YaRN's default");
  if (scalar("truncate") == "false")
    fail(std::string(key) + ".truncate", "is false; the trainer truncates the correction range");
}

// The sliding window a config.json gives every layer (Note [Sliding window]; 0: none), the
// Hugging Face way: MistralConfig's sliding_window (4096 when absent, none when null); Qwen2's
// and Qwen3's only under use_sliding_window, and then in the layers from max_window_layers on
// (or those layer_types names sliding_attention); LlamaConfig has none. A window in some layers
// only fails: the trainer's window is the same in every layer.
int64_t hf_sliding_window(const YAML::Node& root, const std::string& model_type, int64_t num_layers,
                          const Fail& fail) {
  const YAML::Node window = root["sliding_window"];
  const bool given = window && !window.IsNull();
  auto window_size = [&] {
    const double value = number_at(root, "sliding_window", "sliding_window", fail);
    if (!(value >= 1 && value == std::floor(value)))
      fail("sliding_window", window.Scalar() + " is not a positive integer");
    return static_cast<int64_t>(value);
  };
  if (model_type == "mistral") return !window ? 4096 : given ? window_size() : 0;
  const bool qwen = model_type == "qwen2" || model_type == "qwen3";
  if (!qwen) {
    if (given)
      fail("sliding_window",
           "is set, but LlamaForCausalLM has no sliding window (use "
           "model_type mistral)");
    return 0;
  }
  const YAML::Node use = root["use_sliding_window"];
  if (!(use && use.IsScalar() && use.Scalar() == "true") || !given) return 0;
  int64_t sliding_layers = 0;  // how many of the layers slide
  const YAML::Node types = root["layer_types"];
  if (types && types.IsSequence()) {
    for (const YAML::Node& type : types) sliding_layers += type.Scalar() == "sliding_attention";
  } else {
    const YAML::Node first = root["max_window_layers"];
    const double from = first && !first.IsNull()
                            ? number_at(root, "max_window_layers", "max_window_layers", fail)
                            : 28.0;  // Qwen2Config's and Qwen3Config's default
    sliding_layers = std::clamp<int64_t>(num_layers - static_cast<int64_t>(from), 0, num_layers);
  }
  if (sliding_layers == 0) return 0;
  if (sliding_layers != num_layers)
    fail(types && types.IsSequence() ? "layer_types" : "max_window_layers",
         "gives a sliding window to " + std::to_string(sliding_layers) + " of the " +
             std::to_string(num_layers) +
             " layers; the trainer's window (model.sliding_window) is every layer's");
  return window_size();
}

// LlamaConfig's rope_scaling: null, Llama 3.1's or YaRN's (keys sorted).
std::string rope_scaling_json(const runtime::RopeScaling& s) {
  if (!s.enabled()) return "null";
  const bool yarn = s.type == runtime::RopeScalingType::yarn;
  std::vector<std::pair<std::string, std::string>> fields = {
      {"factor", number(s.factor)},
      {"original_max_position_embeddings", std::to_string(s.original_max_position_embeddings)},
      {"rope_type", yarn ? "\"yarn\"" : "\"llama3\""}};
  if (yarn) {
    fields.insert(fields.end(),
                  {{"beta_fast", number(s.beta_fast)}, {"beta_slow", number(s.beta_slow)}});
  } else {
    fields.insert(fields.end(), {{"high_freq_factor", number(s.high_freq_factor)},
                                 {"low_freq_factor", number(s.low_freq_factor)}});
  }
  std::sort(fields.begin(), fields.end());
  std::string json = "{";
  for (size_t i = 0; i < fields.size(); ++i)
    json += (i > 0 ? ",\n    \"" : "\n    \"") + fields[i].first + "\": " + fields[i].second;
  return json + "\n  }";
}

}  // namespace

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
  const int64_t window = hf_sliding_window(root, model_type, config.num_layers, fail);
  if (window != config.sliding_window)
    fail(qwen ? "sliding_window (with use_sliding_window)" : "sliding_window",
         (window > 0 ? std::to_string(window) : std::string("none")) +
             " differs from model.sliding_window " + std::to_string(config.sliding_window));
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

std::string hf_llama_config_json(const model::GptConfig& config, std::string_view torch_dtype) {
  // Qwen2ForCausalLM: Llama's block with q, k and v biases (model.add_qkv_bias); Qwen3ForCausalLM:
  // with q and k norms (model.qk_layernorm); MistralForCausalLM: with a sliding window alone.
  using model::HfFamily;
  const HfFamily family = model::hf_family(config);
  const bool qwen = family == HfFamily::qwen2 || family == HfFamily::qwen3;
  const bool window = config.sliding_window > 0;
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
      {"model_type", json_quote(model::hf_model_type(family))},
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
  // The other configs' fields in place of LlamaConfig's: none has mlp_bias, Qwen2Config and
  // MistralConfig no attention_bias; Qwen's switch its window on, from layer 0.
  std::erase_if(fields, [&](const auto& field) {
    return (family != HfFamily::llama && field.first == "mlp_bias") ||
           ((family == HfFamily::qwen2 || family == HfFamily::mistral) &&
            field.first == "attention_bias");
  });
  if (qwen) fields.push_back({"use_sliding_window", window ? "true" : "false"});
  if (qwen && window) fields.push_back({"max_window_layers", "0"});
  if (window) fields.push_back({"sliding_window", std::to_string(config.sliding_window)});
  std::sort(fields.begin(), fields.end());
  std::string json = "{\n";
  for (size_t i = 0; i < fields.size(); ++i)
    json += "  \"" + fields[i].first + "\": " + fields[i].second +
            (i + 1 < fields.size() ? ",\n" : "\n");
  return json + "}\n";
}
model::GptConfig llama_config_from_hf_json(const std::string& json_text,
                                           const std::string& source) {
  const JsonConfigReader json(json_text, source);
  const std::string type = json.string("model_type", "llama");
  if (type != "llama" && type != "mistral" && type != "qwen2" && type != "qwen3")
    json.fail("model_type",
              "\"" + type + "\" is not a Llama-family model (llama, mistral, qwen2, qwen3)");
  model::GptConfig config = model::architecture_defaults(model::Architecture::llama);
  config.num_layers = json.positive_integer("num_hidden_layers");
  config.hidden_size = json.positive_integer("hidden_size");
  config.num_attention_heads = json.positive_integer("num_attention_heads");
  config.num_query_groups =
      json.optional_positive_integer("num_key_value_heads", config.num_attention_heads);
  if (config.num_attention_heads % config.num_query_groups != 0)
    json.fail("num_key_value_heads", std::to_string(config.num_query_groups) +
                                         " does not divide num_attention_heads " +
                                         std::to_string(config.num_attention_heads));
  const int64_t head_dim = json.optional_positive_integer("head_dim", 0);
  if (head_dim == 0 && config.hidden_size % config.num_attention_heads != 0)
    json.fail("head_dim", "is absent and hidden_size " + std::to_string(config.hidden_size) +
                              " is not divisible by num_attention_heads " +
                              std::to_string(config.num_attention_heads));
  if (head_dim > 0 && head_dim * config.num_attention_heads != config.hidden_size)
    config.kv_channels = head_dim;  // heads of their own width
  config.ffn_hidden_size = json.positive_integer("intermediate_size");
  config.vocab_size = json.positive_integer("vocab_size");
  config.seq_length = json.positive_integer("max_position_embeddings");
  config.layernorm_epsilon = json.number("rms_norm_eps", 1e-6f);
  config.init_method_std = json.number("initializer_range", 0.02f);
  config.attention_dropout = json.number("attention_dropout", 0.f);
  config.untie_embeddings = !json.boolean("tie_word_embeddings", false);
  config.add_qkv_bias = type == "qwen2";
  config.qk_layernorm = type == "qwen3";
  config.sliding_window = hf_sliding_window(
      json.node(), type, config.num_layers,
      [&](const std::string& field, const std::string& why) { json.fail(field, why); });
  // rope_theta and rope_scaling (transformers 4), or both inside rope_parameters (5).
  const bool v5 = json.has("rope_parameters");
  const std::string scaling_key = v5 ? "rope_parameters" : "rope_scaling";
  config.rotary_base = json.number("rope_theta", 10000.f);
  if (json.has(scaling_key)) {
    const JsonConfigReader rope = json.object(scaling_key);
    if (v5) config.rotary_base = rope.number("rope_theta", config.rotary_base);
    const std::string kind =
        rope.has("rope_type") ? rope.string("rope_type", "") : rope.string("type", "default");
    runtime::RopeScaling& scaling = config.rope_scaling;
    if (kind == "llama3" || kind == "yarn") {
      scaling.factor = rope.number("factor", 0.f);
      scaling.original_max_position_embeddings = rope.optional_positive_integer(
          "original_max_position_embeddings", scaling.original_max_position_embeddings);
    }
    if (kind == "llama3") {
      scaling.low_freq_factor = rope.number("low_freq_factor", scaling.low_freq_factor);
      scaling.high_freq_factor = rope.number("high_freq_factor", scaling.high_freq_factor);
    } else if (kind == "yarn") {
      scaling.type = runtime::RopeScalingType::yarn;
      scaling.beta_fast = rope.number("beta_fast", scaling.beta_fast);
      scaling.beta_slow = rope.number("beta_slow", scaling.beta_slow);
    }
  }
  check_hf_llama_config(json_text, source, config);  // the rest: what the trainer does not do
  return config;
}

}  // namespace trainer
