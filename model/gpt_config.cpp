// The architecture presets of GptConfig.
#include "model/gpt_config.h"

#include <cstdio>

namespace model {

GptConfig architecture_defaults(Architecture architecture) {
  GptConfig config;
  config.architecture = architecture;
  if (architecture == Architecture::llama) {
    config.normalization = Normalization::rmsnorm;
    config.activation = Activation::swiglu;
    config.position_embedding = PositionEmbedding::rope;
    config.add_bias_linear = false;
    config.untie_embeddings = true;
    config.hidden_dropout = 0.f;
    config.attention_dropout = 0.f;
  }
  return config;
}

namespace {

// A float as "%g" writes it: 8 rather than 8.000000.
std::string scalar_text(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(value));
  return text;
}

// Each family's class and model_type, in HfFamily's order.
struct HfNames {
  const char* class_name;
  const char* model_type;
};
constexpr HfNames kHfNames[] = {{"GPT2LMHeadModel", "gpt2"},
                                {"LlamaForCausalLM", "llama"},
                                {"Qwen2ForCausalLM", "qwen2"},
                                {"Qwen3ForCausalLM", "qwen3"},
                                {"MistralForCausalLM", "mistral"}};

}  // namespace

std::string hf_family_mismatch(const GptConfig& c) {
  const bool llama = c.architecture == Architecture::llama;
  if ((c.normalization == Normalization::rmsnorm) != llama)
    return llama ? "model.normalization layernorm" : "model.normalization rmsnorm";
  if (c.swiglu() != llama)
    return llama ? "model.activation (not swiglu)" : "model.activation swiglu";
  if (c.learned_positions() == llama)
    return llama ? "model.position_embedding learned" : "model.position_embedding rope";
  if (c.add_bias_linear == llama)
    return llama ? "model.add_bias_linear true" : "model.add_bias_linear false";
  if (!llama && c.untie_embeddings) return "model.untie_embeddings true";
  if (!llama && c.query_groups() != c.num_attention_heads)
    return "model.num_query_groups " + std::to_string(c.num_query_groups);
  if (!llama && c.attention_width() != c.hidden_size)
    return "model.kv_channels " + std::to_string(c.kv_channels);
  if (c.qk_layernorm && (!llama || c.add_qkv_bias))  // Qwen3 has the norms, without biases
    return llama ? "model.qk_layernorm true with model.add_qkv_bias true"
                 : "model.qk_layernorm true";
  if (!llama && c.sliding_window > 0)
    return "model.sliding_window " + std::to_string(c.sliding_window);
  if (hf_family(c) == HfFamily::mistral && c.rope_scaling.enabled())
    return "model.rope_scaling.factor " + scalar_text(c.rope_scaling.factor) +
           " (with model.sliding_window)";
  return "";
}

HfFamily hf_family(const GptConfig& c) {
  if (c.architecture == Architecture::gpt2) return HfFamily::gpt2;
  if (c.add_qkv_bias) return HfFamily::qwen2;
  if (c.qk_layernorm) return HfFamily::qwen3;
  return c.sliding_window > 0 ? HfFamily::mistral : HfFamily::llama;
}

std::string hf_class_name(const GptConfig& c) {
  return kHfNames[static_cast<int>(hf_family(c))].class_name;
}

std::string hf_model_type(HfFamily family) {
  return kHfNames[static_cast<int>(family)].model_type;
}

}  // namespace model
