// The value types the operators take (runtime/op_args.h) and callers above the runtime name:
// enums, sizes, hyperparameters. No kernel here: model/ and parallel/ include this header,
// never a backend's.
#pragma once

#include <cstdint>

#include "runtime/philox.h"

namespace runtime {

// GELU activation: the tanh approximation (Megatron/GPT-2 default, HF "gelu_new") or the exact
// erf form (HF "gelu").
enum class GeluKind { tanh, erf };

// AdamW hyperparameters of one update (PyTorch's torch.optim.AdamW, amsgrad off).
struct AdamWParams {
  float lr = 0.f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
  int64_t step = 1;  // 1-based count of updates including this one (bias correction)
};

// A cross-entropy target that takes no part: its row's loss is 0 and its logits get no gradient
// (data.eod_mask_loss puts it where the input is the end-of-document token). Every other target
// is a token id.
inline constexpr int32_t kIgnoredTarget = -1;

// The largest head dimension the flash kernels take (CPU and CUDA).
inline constexpr int64_t kFlashMaxHeadDim = 128;

// Sizes and global coordinates of one flash attention call. The whole-sequence kernels take the
// defaults of kv_len, q_position, kv_position and full_len (queries and keys are the same
// positions 0..seq_len-1); the block kernels of flash_block.h take a query block and a key
// block anywhere in an unsharded sequence of full_len positions (Note [Flash blocks],
// runtime/kernels/cpu/flash_block.h). group_size > 1 is grouped-query attention (Note
// [Grouped-query attention] in runtime/op_args.h): heads / group_size kv heads, query head h
// reading kv head h / group_size.
struct FlashAttentionDims {
  int64_t seq_len = 0;        // T: query rows, >= 1
  int64_t micro_batch = 0;    // B, >= 1
  int64_t heads = 0;          // H: query heads on this rank, >= 1
  int64_t head_dim = 0;       // D, 1..128
  int64_t head_offset = 0;    // global index of local query head 0 (tensor parallelism)
  int64_t sample_offset = 0;  // global-batch index of local sample 0
  float scale = 0.f;          // softmax scale, usually 1 / sqrt(D)
  float dropout_prob = 0.f;   // attention-probability dropout p in [0, 1)
  DropoutKey dropout_key;     // Philox key of this layer's attention-probability dropout
  int64_t kv_len = 0;         // key rows of a block; 0: seq_len
  int64_t q_position = 0;     // global position of query row 0; causal on global positions
  int64_t kv_position = 0;    // global position of key row 0: key j masked for query i iff
                              // kv_position + j > q_position + i
  int64_t full_len = 0;       // L, the unsharded sequence (dropout coordinates); 0: seq_len
  int64_t group_size = 1;     // query heads per kv head; heads % group_size == 0
  int64_t window = 0;         // sliding window (Note [Sliding window] in runtime/op_args.h):
                              // a query sees the `window` latest keys, itself included; 0: all
};

}  // namespace runtime
