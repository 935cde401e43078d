// The unfused (Megatron "core attention") pieces around the causal softmax:
// head split/merge between [s, b, h] activations and per-head (B, H, T, D)
// tensors, and the two batched products. QKV features are grouped by kv head (Note
// [Grouped-query attention], runtime/op_args.h): with r = group_size query heads per kv head
// and G = H / r, group g holds [q of heads g*r .. g*r+r-1 | k_g | v_g], so a tensor-parallel
// shard of the fused QKV projection holds whole groups; r = 1 is (H, 3, D). k and v are
// (B, G, T, D): query head bh = b*H + h reads kv head bh / r. All outputs are assigned (=).
#pragma once

#include <cstdint>

namespace runtime::cpu {

// qkv(T, B, G*(r+2)*D) -> q (B, H, T, D), k, v (B, G, T, D) (=).
void split_qkv_heads(float* q, float* k, float* v, const float* qkv, int64_t T, int64_t B,
                     int64_t H, int64_t D, int64_t group_size = 1);
// Inverse: dqkv(T, B, G*(r+2)*D) from dq (B, H, T, D), dk, dv (B, G, T, D) (=).
void merge_qkv_heads(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t T,
                     int64_t B, int64_t H, int64_t D, int64_t group_size = 1);

// ctx(T, B, H*D) from per-head ctx_heads (B, H, T, D) (=), and the inverse.
void merge_heads(float* ctx, const float* ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D);
void split_heads(float* ctx_heads, const float* ctx, int64_t T, int64_t B, int64_t H, int64_t D);

// In the products, q, dq, scores, probs and ctx hold BH query heads; k, v, dk, dv hold BH / r
// kv heads, and dk, dv sum the r query heads of a kv head in increasing order.

// scores(BH, T, T) = scale * q k^T for each of the BH heads (=). Entries above the
// diagonal may hold anything; the causal softmax ignores them.
void attention_scores_forward(float* scores, const float* q, const float* k, int64_t BH, int64_t T,
                              int64_t D, float scale, int64_t group_size = 1);
// dq = scale * dscores k, dk = scale * dscores^T q (=). dscores is 0 above the diagonal.
void attention_scores_backward(float* dq, float* dk, const float* dscores, const float* q,
                               const float* k, int64_t BH, int64_t T, int64_t D, float scale,
                               int64_t group_size = 1);

// ctx_heads(BH, T, D) = probs v (=). probs must be causal (exactly 0 above the diagonal,
// as the causal softmax and dropout leave it); those entries are not read.
void attention_context_forward(float* ctx_heads, const float* probs, const float* v, int64_t BH,
                               int64_t T, int64_t D, int64_t group_size = 1);
// dprobs = dctx v^T on and below the diagonal and exactly 0 above it (the causal softmax
// backward never needs those entries), dv = probs^T dctx (=). probs must be causal, as above.
void attention_context_backward(float* dprobs, float* dv, const float* dctx_heads,
                                const float* probs, const float* v, int64_t BH, int64_t T,
                                int64_t D, int64_t group_size = 1);

}  // namespace runtime::cpu
