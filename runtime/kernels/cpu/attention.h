// The unfused (Megatron "core attention") pieces around the causal softmax:
// head split/merge between [s, b, h] activations and per-head (B, H, T, D)
// tensors, and the two batched products. QKV features are laid out per head as
// (H, 3, D): head h's q, k, v are contiguous, so a tensor-parallel shard of the
// fused QKV projection holds whole heads.
#pragma once

#include <cstdint>

namespace runtime::cpu {

// qkv(T, B, H*3*D) -> q, k, v each (B, H, T, D) (=).
void split_qkv_heads(float* q, float* k, float* v, const float* qkv, int64_t T, int64_t B,
                     int64_t H, int64_t D);
// Inverse: dqkv(T, B, H*3*D) from dq, dk, dv (B, H, T, D) (=).
void merge_qkv_heads(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t T,
                     int64_t B, int64_t H, int64_t D);

// ctx(T, B, H*D) from per-head ctx_heads (B, H, T, D) (=), and the inverse.
void merge_heads(float* ctx, const float* ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D);
void split_heads(float* ctx_heads, const float* ctx, int64_t T, int64_t B, int64_t H, int64_t D);

// scores(BH, T, T) = scale * q k^T for each of the BH heads (=). Entries above the
// diagonal may hold anything; the causal softmax ignores them.
void attention_scores_forward(float* scores, const float* q, const float* k, int64_t BH,
                              int64_t T, int64_t D, float scale);
// dq = scale * dscores k, dk = scale * dscores^T q (=). dscores is 0 above the diagonal.
void attention_scores_backward(float* dq, float* dk, const float* dscores, const float* q,
                               const float* k, int64_t BH, int64_t T, int64_t D, float scale);

// ctx_heads(BH, T, D) = probs v (=). probs must be causal (exactly 0 above the diagonal,
// as the causal softmax and dropout leave it); those entries are not read.
void attention_context_forward(float* ctx_heads, const float* probs, const float* v, int64_t BH,
                               int64_t T, int64_t D);
// dprobs = dctx v^T on and below the diagonal and exactly 0 above it (the causal softmax
// backward never needs those entries), dv = probs^T dctx (=). probs must be causal, as above.
void attention_context_backward(float* dprobs, float* dv, const float* dctx_heads,
                                const float* probs, const float* v, int64_t BH, int64_t T,
                                int64_t D);

}  // namespace runtime::cpu
