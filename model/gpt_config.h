// Shape and regularization of a Megatron-style GPT. Field names follow Megatron's
// arguments (num_layers, hidden_size, ...) so YAML keys read the same.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/rotary.h"

namespace model {

// The block family: `gpt2` (LayerNorm with biases, GELU, learned positions, tied head) or
// `llama` (RMSNorm, SwiGLU, RoPE, grouped-query attention, no biases, untied head). It sets the
// defaults of the fields below (llama_defaults); fields the config names win.
enum class Architecture { gpt2, llama };
enum class Normalization { layernorm, rmsnorm };
// gelu_tanh = HF "gelu_new", gelu = exact erf, swiglu = down(silu(gate) * up) with fc1 = [gate|up]
enum class Activation { gelu_tanh, gelu, swiglu };
enum class PositionEmbedding { learned, rope };
// Core attention: `unfused` materialises the (heads, s, s) scores, probabilities and dropout
// mask; `flash` is FlashAttention-2 (tiles, online softmax; keeps the output and the row
// log-sum-exp only), same dropout masks (docs/attention.md).
enum class AttentionBackend { unfused, flash };
inline const char* attention_backend_name(AttentionBackend backend) {
  return backend == AttentionBackend::flash ? "flash" : "unfused";
}

struct GptConfig {
  Architecture architecture = Architecture::gpt2;
  int64_t num_layers = 2;
  int64_t hidden_size = 64;
  int64_t num_attention_heads = 2;
  int64_t num_query_groups = 0;  // key/value heads (1: MQA); 0: num_attention_heads
  // The width of an attention head (Megatron's kv_channels, Hugging Face's head_dim); 0:
  // hidden_size / num_attention_heads. Set, the heads together may be wider or narrower than
  // the hidden states (Mistral NeMo: 32 heads of 128 in a 5120-wide model).
  int64_t kv_channels = 0;
  // Sliding-window attention (Hugging Face's sliding_window, Mistral 7B's 4096; Megatron's
  // --window-size W-1,0): a query sees the W latest positions, itself included, in every layer
  // (Note [Sliding window], runtime/op_args.h); 0: every earlier position.
  int64_t sliding_window = 0;
  // 0: 4 * hidden_size, or with SwiGLU (its gate and its up width) Llama's 2/3 of that rounded
  // up to a multiple of 256
  int64_t ffn_hidden_size = 0;
  int64_t seq_length = 64;              // tokens per sample
  int64_t max_position_embeddings = 0;  // 0: seq_length
  int64_t vocab_size = 256;             // real tokens; the table is padded (padded_vocab)
  int64_t make_vocab_size_divisible_by = 128;
  float hidden_dropout = 0.1f;      // embedding, attention output and MLP output dropout
  float attention_dropout = 0.1f;   // dropout on attention probabilities
  float init_method_std = 0.02f;    // normal(0, std); output projections use std / sqrt(2 L)
  float layernorm_epsilon = 1e-5f;  // the normalization's epsilon (LayerNorm or RMSNorm)
  Normalization normalization = Normalization::layernorm;
  Activation activation = Activation::gelu_tanh;
  PositionEmbedding position_embedding = PositionEmbedding::learned;
  float rotary_base = 10000.f;  // RoPE theta (500000 for Llama-3)
  // Llama 3.1's RoPE frequency scaling (Hugging Face rope_type "llama3": factor 8 for Llama
  // 3.1, 32 for Llama 3.2; runtime/rotary.h); factor 0: plain RoPE.
  runtime::RopeScaling rope_scaling{};
  bool add_bias_linear = true;    // biases in every linear (and LayerNorm's bias)
  bool add_qkv_bias = false;      // biases in the QKV projection alone (Qwen2's attention)
  // RMSNorm of each query and key head over its head_dim values before RoPE, one weight of
  // head_dim for the query heads and one for the key heads (Megatron's --qk-layernorm; Qwen3)
  bool qk_layernorm = false;
  bool untie_embeddings = false;  // an output layer of its own instead of the word embeddings
  AttentionBackend attention_backend = AttentionBackend::unfused;

  int64_t ffn() const {
    if (ffn_hidden_size > 0) return ffn_hidden_size;
    if (activation != Activation::swiglu) return 4 * hidden_size;
    return (2 * 4 * hidden_size / 3 + 255) / 256 * 256;
  }
  int64_t query_groups() const {
    return num_query_groups > 0 ? num_query_groups : num_attention_heads;
  }
  // Query heads per key/value head.
  int64_t group_size() const { return num_attention_heads / query_groups(); }
  bool swiglu() const { return activation == Activation::swiglu; }
  bool qkv_bias() const { return add_bias_linear || add_qkv_bias; }
  bool learned_positions() const { return position_embedding == PositionEmbedding::learned; }
  // The fused QKV projection's rows: every group's query heads, its key and its value head.
  int64_t qkv_rows() const { return query_groups() * (group_size() + 2) * head_dim(); }
  int64_t positions() const {
    return max_position_embeddings > 0 ? max_position_embeddings : seq_length;
  }
  int64_t head_dim() const {
    return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads;
  }
  // The query heads together: the attention output, the output projection's input.
  int64_t attention_width() const { return num_attention_heads * head_dim(); }
  // Megatron: round vocab_size up to a multiple of make_vocab_size_divisible_by * tp_size.
  int64_t padded_vocab(int64_t tp_size = 1) const {
    const int64_t multiple = make_vocab_size_divisible_by * tp_size;
    return (vocab_size + multiple - 1) / multiple * multiple;
  }
};

// The defaults `architecture` sets before the config's own fields are read: for llama RMSNorm,
// SwiGLU, RoPE, no biases and an untied head (Hugging Face LlamaForCausalLM); gpt2 is GptConfig{}.
GptConfig architecture_defaults(Architecture architecture);

// "" when `config` is a block its architecture's Hugging Face class holds (GPT2LMHeadModel:
// LayerNorm, GELU, learned positions, biases, tied head, heads == kv heads; LlamaForCausalLM:
// RMSNorm, SwiGLU, RoPE, no biases, a head untied or tied (tie_word_embeddings, as Llama 3.2
// 1B and 3B); with q, k and v biases Qwen2's, with q and k norms Qwen3's, never both; with a
// sliding window Mistral's (no RoPE scaling) or Qwen's); otherwise the first field that is not,
// as "model.<field> <value>".
std::string hf_family_mismatch(const GptConfig& config);
// The Hugging Face family the export writes `config` as: gpt2 (GPT2LMHeadModel), or for a Llama
// block llama (LlamaForCausalLM), qwen2 (Qwen2ForCausalLM: q, k and v biases), qwen3
// (Qwen3ForCausalLM: q and k norms) or mistral (MistralForCausalLM: neither, a sliding window).
enum class HfFamily { gpt2, llama, qwen2, qwen3, mistral };
HfFamily hf_family(const GptConfig& config);
// The family's class ("LlamaForCausalLM") and config.json model_type ("llama").
std::string hf_class_name(const GptConfig& config);
std::string hf_model_type(HfFamily family);

}  // namespace model
