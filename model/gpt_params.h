// GPT parameters as named views into one flat buffer (the same layout serves the
// weights, their gradients and the optimizer moments). Layouts are the model's
// own: linear weights are (out_features, in_features); the fused QKV rows are per
// head (head, {q,k,v}, head_dim) so tensor-parallel shards hold whole heads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.h"
#include "runtime/tensor.h"

namespace model {

using runtime::Tensor;

struct LayerParams {
  Tensor ln1_weight, ln1_bias;  // (C)
  Tensor qkv_weight;            // (3C, C), rows ordered (head, {q,k,v}, head_dim)
  Tensor qkv_bias;              // (3C)
  Tensor proj_weight;           // (C, C)
  Tensor proj_bias;             // (C)
  Tensor ln2_weight, ln2_bias;  // (C)
  Tensor fc1_weight;            // (F, C)
  Tensor fc1_bias;              // (F)
  Tensor fc2_weight;            // (C, F)
  Tensor fc2_bias;              // (C)
};

struct NamedParam {
  std::string name;  // e.g. "layers.3.self_attention.linear_qkv.weight"
  Tensor tensor;
  bool weight_decay;  // rank >= 2
};

struct GptParams {
  Tensor flat;                     // every parameter, back to back
  Tensor wte;                      // (padded vocab, C), tied with the output head
  Tensor wpe;                      // (positions, C)
  std::vector<LayerParams> layers;
  Tensor lnf_weight, lnf_bias;     // (C)
  std::vector<NamedParam> named;   // in flat-buffer order

  // Views over a new flat buffer of `category` (uninitialized).
  static GptParams allocate(runtime::Allocator& allocator, const GptConfig& config,
                            runtime::MemoryCategory category);
  static int64_t count(const GptConfig& config);
  const NamedParam* find(const std::string& name) const;
};

// Megatron GPT init: normal(0, std) for weights, std / sqrt(2 L) for the output
// projections (proj, fc2), zero biases, layernorm weight 1 / bias 0, padded
// vocabulary rows 0. Each element is drawn from Philox at its (tensor, index),
// so the values do not depend on how the model is later sharded.
void init_params(const GptParams& params, const GptConfig& config, uint64_t seed);

}  // namespace model
