// GPT parameters as named views into one flat buffer (the same layout serves the
// weights, their gradients and the optimizer moments). Layouts are the model's
// own: linear weights are (out_features, in_features); the fused QKV rows are per
// head (head, {q,k,v}, head_dim) so tensor-parallel shards hold whole heads.
// A rank holds a ModelShard: some layers (pipeline), the embedding and/or head,
// and a 1/tp slice of each split tensor; names are always the global ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.h"
#include "runtime/meta_device.h"
#include "runtime/tensor.h"

namespace model {

using runtime::Tensor;

// What one rank holds of the model.
struct ModelShard {
  std::vector<int64_t> layers;  // global layer ids, in the order the rank runs them
  bool embedding = true;        // word (vocab-parallel) and position embeddings
  bool head = true;             // final norm and the output head (tied word embeddings, or the
                                // output layer of an untied model)
  int64_t tp_rank = 0;
  int64_t tp_size = 1;

  static ModelShard whole(const GptConfig& config);
  // Tied: the head multiplies by the word embeddings, so the last stage holds them too.
  bool has_word_embeddings(const GptConfig& config) const {
    return embedding || (head && !config.untie_embeddings);
  }
};

// A layer's weights. Biases (and LayerNorm's) are undefined where the block has none
// (add_bias_linear false, RMSNorm). Q = qkv_rows: G kv groups of (group_size + 2) * head_dim
// rows each, ordered (group, {q heads.., k, v}, head_dim); with G = heads that is
// (head, {q,k,v}, head_dim). Under SwiGLU fc1 is two parameters, gate then up, adjacent in the
// flat buffer, which fc1_weight views as one (2F/tp, C) matrix.
struct LayerParams {
  Tensor ln1_weight, ln1_bias;  // (C)
  Tensor qkv_weight;            // (Q/tp, C)
  Tensor qkv_bias;              // (Q/tp)
  Tensor q_norm_weight;         // (D) qk_layernorm: every query head's RMSNorm weight
  Tensor k_norm_weight;         // (D) and every key head's
  Tensor proj_weight;           // (C, C/tp)
  Tensor proj_bias;             // (C)
  Tensor ln2_weight, ln2_bias;  // (C)
  Tensor fc1_weight;            // (F/tp, C); SwiGLU (2F/tp, C): [gate; up]
  Tensor fc1_bias;              // (F/tp); SwiGLU (2F/tp)
  Tensor fc2_weight;            // (C, F/tp)
  Tensor fc2_bias;              // (C)
};

// The part of the model a parameter belongs to: gradient reduction, pipeline placement and
// export group parameters by it (never by name).
enum class ParamPiece { word_embeddings, position_embeddings, layer, final_norm, output_layer };

// What a parameter is for, beyond its shape: read by init, the gradient sync, the gathers and
// checkpoints instead of its name.
struct ParamRoles {
  // The word embeddings the output head multiplies by too: the first and the last pipeline
  // stage each hold a copy, whose gradients the embedding group sums.
  bool tied = false;
  bool vocab_padded = false;       // rows past vocab_size are padding: zero, never saved
  bool norm = false;               // a normalization's weight: initialized to 1
  bool output_projection = false;  // linear_proj, linear_fc2: init std / sqrt(2 num_layers)
};

struct NamedParam {
  std::string name;             // global, e.g. "layers.3.self_attention.linear_qkv.weight"
  Tensor tensor;                // this rank's part
  runtime::Shape global_shape;  // the unsharded tensor
  int shard_dim = -1;           // the dimension tensor parallelism splits; -1: replicated
  int64_t shard_offset = 0;     // where this rank's part starts along shard_dim
  bool weight_decay = false;    // rank >= 2
  bool sequence_parallel_partial =
      false;  // layernorms, positions: under SP each rank's gradient is partial
  // q/k norms: replicated, but each tensor-parallel rank's gradient covers its heads alone
  bool tensor_parallel_partial = false;
  ParamPiece piece = ParamPiece::layer;
  int64_t layer_index = -1;  // piece layer: the index into GptParams::layers
  ParamRoles roles;
};

struct GptParams {
  Tensor flat;                      // every parameter of the shard, back to back
  Tensor wte;                       // (padded vocab / tp, C), tied with the output head
  Tensor wpe;                       // (positions, C); none with RoPE
  Tensor output_weight;             // (padded vocab / tp, C) of an untied head
  std::vector<LayerParams> layers;  // parallel to ModelShard::layers
  Tensor lnf_weight, lnf_bias;      // (C)
  std::vector<NamedParam> named;    // in flat-buffer order; each piece's parameters adjacent

  // Views over a new flat buffer of `category` and `dtype` (uninitialized): f32 for
  // master weights, gradients and moments, bf16 for the weights a bf16 model computes with.
  static GptParams allocate(runtime::Allocator& allocator, const GptConfig& config,
                            const ModelShard& shard, runtime::MemoryCategory category,
                            runtime::DType dtype = runtime::DType::f32);
  static GptParams allocate(runtime::Allocator& allocator, const GptConfig& config,
                            runtime::MemoryCategory category) {
    return allocate(allocator, config, ModelShard::whole(config), category);
  }
  static int64_t count(const GptConfig& config, const ModelShard& shard);
  static int64_t count(const GptConfig& config) { return count(config, ModelShard::whole(config)); }
  const NamedParam* find(const std::string& name) const;
};

// The whole model's parameters on the meta device (runtime/meta_device.h): names, global shapes,
// split dimensions and roles, no values. For code that walks the model's parameters without
// holding them: the HF export and import, the gathers to rank 0.
class WholeModelLayout {
 public:
  explicit WholeModelLayout(const GptConfig& config)
      : params_(GptParams::allocate(meta_, config, runtime::MemoryCategory::workspace)) {}
  WholeModelLayout(const WholeModelLayout&) = delete;
  WholeModelLayout& operator=(const WholeModelLayout&) = delete;
  // In flat-buffer order, as every GptParams of the whole model.
  const std::vector<NamedParam>& named() const { return params_.named; }
  const GptParams& params() const { return params_; }

 private:
  runtime::MetaAllocator meta_;
  GptParams params_;
};

// Megatron GPT init: normal(0, std) for weights, std / sqrt(2 L) for the output
// projections (proj, fc2), zero biases, layernorm weight 1 / bias 0, padded
// vocabulary rows 0. Each element is drawn from Philox at its (tensor name,
// index in the unsharded tensor), so every layout holds the same values. Runs where the
// tensors are (ops::init_param): on a device, no host copy is made.
void init_params(const GptParams& params, const GptConfig& config, uint64_t seed);

}  // namespace model
