// Causal multi-head attention fused in tiles (FlashAttention-2) on the host, fp32: the CPU
// reference of the CUDA kernel and the fused twin of split_qkv_heads -> scores -> causal
// softmax -> attention dropout -> context -> merge_heads. All outputs are assigned (=).
#pragma once

#include <cstdint>

#include "runtime/op_types.h"

namespace runtime::cpu {

using runtime::FlashAttentionDims;
using runtime::kFlashMaxHeadDim;

// qkv (T, B, G*(r+2)*D), grouped by kv head as split_qkv_heads reads it (r = group_size query
// heads per kv head, G = H / r; Note [Grouped-query attention] in runtime/op_args.h): for r = 1
// head h's q, k, v are features [h*3*D, h*3*D + 3*D). ctx (T, B, H*D) (=): query head h at
// [h*D, h*D + D), as merge_heads writes it.
// lse (B, H, T) (=): per query, the natural log of the sum of exp over the scaled causal
// scores (before dropout). Dropout draws the bits dropout_attention_forward draws for the
// (B, H, T, T) probabilities with the same head_offset, sample_offset, p and key.
// The whole-sequence kernels reject a kv_len, full_len other than 0 or seq_len, and nonzero
// positions (the block kernels take those).
// document_starts (T, B), or null for one document: Note [Document masking] in runtime/op_args.h.
void flash_attention_forward(float* ctx, float* lse, const float* qkv,
                             const FlashAttentionDims& dims,
                             const int32_t* document_starts = nullptr);

// dqkv (T, B, G*(r+2)*D) (=) from dctx (T, B, H*D) and the forward's qkv, ctx and lse; a kv
// head's dk, dv sum its query heads in increasing order.
void flash_attention_backward(float* dqkv, const float* dctx, const float* qkv, const float* ctx,
                              const float* lse, const FlashAttentionDims& dims,
                              const int32_t* document_starts = nullptr);

}  // namespace runtime::cpu
