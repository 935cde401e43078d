// What a transformer layer keeps from forward for backward (its stash), and the
// spec of that stash under a plan entry (model/stash_spec.h): the one list both the
// layer (when it allocates) and the memory model in recompute/ (when it predicts) read.
#pragma once

#include <cstdint>
#include <vector>

#include "model/gpt_config.h"
#include "model/layer_recompute.h"
#include "model/stash_spec.h"
#include "parallel/core/communicator.h"
#include "parallel/core/context_shard.h"
#include "runtime/op_types.h"

namespace model {

using runtime::Tensor;

// What kind of block a layer is: the layer's forward and backward, its stash spec and the
// recompute table's rows (model/recompute_modules.h) switch on these fields, never on the
// config, so one layer serves every block the config can describe.
struct BlockFeatures {
  AttentionBackend attention = AttentionBackend::unfused;
  runtime::GeluKind gelu = runtime::GeluKind::tanh;  // the activation unless swiglu
  Normalization norm = Normalization::layernorm;     // rmsnorm: no mean, no bias
  bool swiglu = false;  // fc1 = [gate | up] (2 x ffn wide), act = silu(gate) * up
  bool rope = false;    // rotary positions on q and k (no position embedding)
  float rotary_base = 10000.f;
  runtime::RopeScaling rope_scaling{};  // Llama 3.1's frequency scaling; factor 0: none
  int64_t group_size = 1;               // query heads per key/value head (grouped-query attention)
  bool linear_bias = true;              // biases in qkv, proj, fc1, fc2
  bool qkv_bias = true;                 // a bias in qkv (linear_bias, or qkv's alone)
  bool qk_norm = false;  // RMSNorm of each q and k head before RoPE (Note [Query and key norms])
  int64_t window = 0;    // sliding window in positions (Note [Sliding window]); 0: none

  bool flash() const { return attention == AttentionBackend::flash; }
  bool layernorm() const { return norm == Normalization::layernorm; }
};

// The features of this config's blocks.
BlockFeatures block_features(const GptConfig& config);

// What one layer is on one rank for one microbatch: its shapes, block, eps, dropout and dtype,
// and how tensor and context parallelism cut it (values the planner derives for any rank
// without a process group): heads and ffn are this rank's share; with sequence parallelism the
// hidden states between the GEMMs (layernorm, dropout, residual) hold seq / tp rows. Where it
// runs, the groups its collectives go over, is LayerGroups.
struct LayerDims {
  int64_t seq = 0;          // T
  int64_t micro_batch = 0;  // B
  int64_t hidden = 0;       // C
  int64_t heads = 0;        // H (local)
  int64_t head_dim = 0;     // D
  int64_t ffn = 0;          // F (local)
  float layernorm_eps = 1e-5f;
  BlockFeatures features;
  float hidden_dropout = 0.f;     // 0 in evaluation
  float attention_dropout = 0.f;  // 0 in evaluation
  runtime::DType activation_dtype = runtime::DType::f32;
  int64_t tp_size = 1;
  int64_t tp_rank = 0;
  bool sequence_parallel = false;
  // Context parallelism (Note [Context chunks]): `seq` is then this rank's T / cp rows.
  int64_t cp_size = 1;
  int64_t cp_rank = 0;

  // Rows of the hidden states this rank holds, and the first of them among the `seq` rows.
  int64_t seq_shard() const { return sequence_parallel ? seq / tp_size : seq; }
  int64_t kv_heads() const { return heads / features.group_size; }  // local
  // The fused QKV activations' width (Note [Grouped-query attention], runtime/op_args.h): per kv
  // head its group_size query heads, its key and its value.
  int64_t qkv_width() const { return kv_heads() * (features.group_size + 2) * head_dim; }
  // The scores' softmax scale: 1 / sqrt(head_dim), times YaRN's attention factor squared
  // (runtime/rotary.h).
  float attention_scale() const;
  // The q and k heads together (the query and key norms' heads), per position: local.
  int64_t qk_heads() const { return kv_heads() * (features.group_size + 1); }
  int64_t fc1_width() const { return features.swiglu ? 2 * ffn : ffn; }
  int64_t shard_first_row() const { return sequence_parallel ? tp_rank * seq_shard() : 0; }
  int64_t head_offset() const { return tp_rank * heads; }
  // The unsharded sequence and this rank's place in it.
  parallel::ContextShard context() const { return {cp_size, cp_rank, seq * cp_size}; }
  // The seq_shard() rows this rank holds as runs of global positions, rows counted from the
  // shard's first (one run without context parallelism).
  std::vector<parallel::RowSegment> shard_segments() const {
    std::vector<parallel::RowSegment> runs = context().segments(shard_first_row(), seq_shard());
    for (parallel::RowSegment& run : runs) run.row -= shard_first_row();
    return runs;
  }
};

// Where a layer runs: the groups of its collectives, which model/ reaches only through
// parallel/'s mappings (the tensor-parallel linears, the vocab-parallel embedding and loss, the
// context ring's attention). Each is null where its size in LayerDims is 1; single-rank callers
// pass {}.
struct LayerGroups {
  parallel::Communicator* tp = nullptr;  // the tensor-parallel group
  parallel::Communicator* cp = nullptr;  // the context ring
};

// Layer shapes for a microbatch of this config (training: dropout on), without
// tensor parallelism; with_tensor_parallel() adds it.
LayerDims layer_dims(const GptConfig& config, int64_t micro_batch, bool training);
LayerDims with_tensor_parallel(LayerDims dims, int64_t tp_size, int64_t tp_rank,
                               bool sequence_parallel);
// Cuts the sequence over a context ring of cp_size ranks: seq becomes this rank's T / cp_size
// rows.
LayerDims with_context_parallel(LayerDims dims, int64_t cp_size, int64_t cp_rank);

// Which plan entry drops which tensor: model/recompute_modules.h.
struct LayerStash {
  // Ts = T / tp with sequence parallelism, else T.
  Tensor input;          // (Ts, B, C)   layer input = input_layernorm input
  Tensor ln1_mean;       // (Ts*B) f32, LayerNorm only
  Tensor ln1_rstd;       // (Ts*B) f32
  Tensor ln1_out;        // (Ts, B, C)   qkv input (gathered to T)
  Tensor qk_input;       // (T, B, Hqk*D) the q and k heads before their norms, Hqk = qk_heads()
  Tensor qk_rstd;        // (T*B*Hqk) f32
  Tensor q;              // (B, H, T, D)  unfused
  Tensor k;              // (B, Hkv, T, D)  unfused; Hkv = H / group_size
  Tensor v;              // (B, Hkv, T, D)  unfused
  Tensor probs;          // (B, H, T, T) softmax output  unfused
  Tensor attn_mask;      // (B, H, T, T) u8, with attention dropout  unfused
  Tensor probs_drop;     // (B, H, T, T) context input, with attention dropout  unfused
  Tensor qkv;            // (T, B, qkv_width) flash: each kv group's q heads, k, v (rotated)
  Tensor lse;            // (B, H, T) f32 flash: log-sum-exp of each row of scores
  Tensor ctx;            // (T, B, H*D)  proj input (flash: the attention output O)
  Tensor attn_out_mask;  // (Ts, B, C) u8, with hidden dropout
  Tensor residual;       // (Ts, B, C)   pre_mlp_layernorm input
  Tensor ln2_mean;       // (Ts*B) f32, LayerNorm only
  Tensor ln2_rstd;       // (Ts*B) f32
  Tensor ln2_out;        // (Ts, B, C)   fc1 input (gathered to T)
  Tensor fc1_out;        // (T, B, F)    GELU input; SwiGLU: (T, B, 2F) [gate | up]
  Tensor gelu_out;       // (T, B, F)    fc2 input: the activation's output (GELU or SwiGLU)
  Tensor mlp_out_mask;   // (Ts, B, C) u8, with hidden dropout
};

// Every tensor the layer's forward produces for backward, in forward order, with whether
// `entry` keeps it (the input is the caller's). Under `full` nothing is kept: the checkpoint
// group's executor keeps the group input.
StashSpec<LayerStash> layer_stash_spec(const LayerDims& dims, const LayerRecompute& entry);

}  // namespace model
