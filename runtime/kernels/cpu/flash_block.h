// Flash attention by blocks on the host, fp32: ring attention's operators (Note [Flash blocks]).
// One block is a query block against a key/value block anywhere in the unsharded sequence;
// blocks of the same queries merge through their log-sum-exp. `=` and `+=` as marked.
#pragma once

#include <cstdint>

#include "runtime/kernels/cpu/flash_attention.h"

namespace runtime::cpu {

// The sizes of [s, b, h] tensors of per-head features: H = heads query heads of D features
// (ctx, dq: (rows, B, H*D); lse: (B, H, rows)), G = heads / group_size kv heads (kv, dkv:
// (rows, B, G*2*D)), and qkv, dqkv (rows, B, G*(r+2)*D) grouped by kv head, r = group_size
// (Note [Grouped-query attention] in runtime/op_args.h; r = 1: (rows, B, H*3*D)).
struct FlashRows {
  int64_t rows;
  int64_t micro_batch;
  int64_t heads;
  int64_t head_dim;
  int64_t group_size = 1;
};

// kv (rows, B, G*2*D) (=): the k and v features of qkv (rows, B, G*(r+2)*D), kv head g's k at
// [g*2D, g*2D + D) and v at [g*2D + D, g*2D + 2D).
void pack_kv(float* kv, const float* qkv, const FlashRows& sizes);

// ctx (T, B, H*D) (=) and lse (B, H, T) (=) of the queries of qkv (T, B, G*(r+2)*D; only q read)
// over the keys and values of kv (kv_len, B, G*2*D), causal on the global positions
// dims.q_position + i and dims.kv_position + j, dropout on the coordinates of the unsharded
// (B, H, full_len, full_len) probabilities. A query with no visible key: ctx 0, lse -inf.
// document_starts (T, B) of the block's queries, or null for one document (Note [Document
// masking] in runtime/op_args.h).
void flash_block_forward(float* ctx, float* lse, const float* qkv, const float* kv,
                         const FlashAttentionDims& dims, const int32_t* document_starts = nullptr);

// In place: lse' = logaddexp(lse, lse_block), ctx = exp(lse - lse') ctx + exp(lse_block - lse')
// ctx_block. ctx, ctx_block (rows, B, H*D); lse, lse_block (B, H, rows). A side at -inf adds
// nothing (its ctx is not read); both at -inf leave ctx and lse as they are.
void flash_merge(float* ctx, float* lse, const float* ctx_block, const float* lse_block,
                 const FlashRows& sizes);

// dq (T, B, H*D) (+=) and dkv (kv_len, B, G*2*D) (+=, kv's layout) of one block, from dctx
// (T, B, H*D) and the MERGED ctx and lse of the queries (over every block they see): the
// block's terms of FlashAttention-2's backward, P = exp(S - lse) and Delta = rowsum(dO * O),
// so the sum over a query's blocks is the gradient of its whole attention.
void flash_block_backward(float* dq, float* dkv, const float* dctx, const float* qkv,
                          const float* kv, const float* ctx, const float* lse,
                          const FlashAttentionDims& dims, const int32_t* document_starts = nullptr);

// dqkv (rows, B, G*(r+2)*D) (=) from dq (rows, B, H*D) and dkv (rows, B, G*2*D).
void assemble_qkv_grad(float* dqkv, const float* dq, const float* dkv, const FlashRows& sizes);

}  // namespace runtime::cpu
