// Causal multi-head attention fused in tiles (FlashAttention-2) on the host, fp32: the CPU
// reference of the CUDA kernel and the fused twin of split_qkv_heads -> scores -> causal
// softmax -> attention dropout -> context -> merge_heads. All outputs are assigned (=).
#pragma once

#include <cstdint>

#include "runtime/philox.h"

namespace runtime::cpu {

// The largest head dimension the flash kernels take (CPU and CUDA).
inline constexpr int64_t kFlashMaxHeadDim = 128;

// Sizes and global coordinates of one call. The whole-sequence kernels below take the
// defaults of kv_len, q_position, kv_position and full_len (queries and keys are the same
// positions 0..seq_len-1); the block kernels of flash_block.h take a query block and a key
// block anywhere in an unsharded sequence of full_len positions (Note [Flash blocks]).
struct FlashAttentionDims {
  int64_t seq_len = 0;        // T: query rows, >= 1
  int64_t micro_batch = 0;    // B, >= 1
  int64_t heads = 0;          // H: heads on this rank, >= 1
  int64_t head_dim = 0;       // D, 1..128
  int64_t head_offset = 0;    // global index of local head 0 (tensor parallelism)
  int64_t sample_offset = 0;  // global-batch index of local sample 0
  float scale = 0.f;          // softmax scale, usually 1 / sqrt(D)
  float dropout_prob = 0.f;   // attention-probability dropout p in [0, 1)
  DropoutKey dropout_key;     // Philox key of this layer's attention-probability dropout
  int64_t kv_len = 0;         // key rows of a block; 0: seq_len
  int64_t q_position = 0;     // global position of query row 0; causal on global positions
  int64_t kv_position = 0;    // global position of key row 0: key j masked for query i iff
                              // kv_position + j > q_position + i
  int64_t full_len = 0;       // L, the unsharded sequence (dropout coordinates); 0: seq_len
};

// qkv (T, B, H*3*D): head h's q, k, v are features [h*3*D, h*3*D + 3*D), as split_qkv_heads
// reads them. ctx (T, B, H*D) (=): head h at [h*D, h*D + D), as merge_heads writes it.
// lse (B, H, T) (=): per query, the natural log of the sum of exp over the scaled causal
// scores (before dropout). Dropout draws the bits dropout_attention_forward draws for the
// (B, H, T, T) probabilities with the same head_offset, sample_offset, p and key.
// The whole-sequence kernels reject a kv_len, full_len other than 0 or seq_len, and nonzero
// positions (the block kernels take those).
void flash_attention_forward(float* ctx, float* lse, const float* qkv,
                             const FlashAttentionDims& dims);

// dqkv (T, B, H*3*D) (=) from dctx (T, B, H*D) and the forward's qkv, ctx and lse.
void flash_attention_backward(float* dqkv, const float* dctx, const float* qkv, const float* ctx,
                              const float* lse, const FlashAttentionDims& dims);

}  // namespace runtime::cpu
