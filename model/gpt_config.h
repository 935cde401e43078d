// Shape and regularization of a Megatron-style GPT. Field names follow Megatron's
// arguments (num_layers, hidden_size, ...) so YAML keys read the same.
#pragma once

#include <cstdint>

namespace model {

enum class Activation { gelu_tanh, gelu };  // gelu_tanh = HF "gelu_new", gelu = exact erf
// Core attention: `unfused` materialises the (heads, s, s) scores, probabilities and dropout
// mask; `flash` is FlashAttention-2 (tiles, online softmax; keeps the output and the row
// log-sum-exp only), same dropout masks (docs/attention.md).
enum class AttentionBackend { unfused, flash };
inline const char* attention_backend_name(AttentionBackend backend) {
  return backend == AttentionBackend::flash ? "flash" : "unfused";
}

struct GptConfig {
  int64_t num_layers = 2;
  int64_t hidden_size = 64;
  int64_t num_attention_heads = 2;
  int64_t ffn_hidden_size = 0;          // 0: 4 * hidden_size
  int64_t seq_length = 64;              // tokens per sample
  int64_t max_position_embeddings = 0;  // 0: seq_length
  int64_t vocab_size = 256;             // real tokens; the table is padded (padded_vocab)
  int64_t make_vocab_size_divisible_by = 128;
  float hidden_dropout = 0.1f;     // embedding, attention output and MLP output dropout
  float attention_dropout = 0.1f;  // dropout on attention probabilities
  float init_method_std = 0.02f;   // normal(0, std); output projections use std / sqrt(2 L)
  float layernorm_epsilon = 1e-5f;
  Activation activation = Activation::gelu_tanh;
  AttentionBackend attention_backend = AttentionBackend::unfused;

  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  int64_t positions() const {
    return max_position_embeddings > 0 ? max_position_embeddings : seq_length;
  }
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Megatron: round vocab_size up to a multiple of make_vocab_size_divisible_by * tp_size.
  int64_t padded_vocab(int64_t tp_size = 1) const {
    const int64_t multiple = make_vocab_size_divisible_by * tp_size;
    return (vocab_size + multiple - 1) / multiple * multiple;
  }
};

}  // namespace model
