// RMS normalization over the last dimension (channels), fp32 statistics, Hugging Face's
// LlamaRMSNorm (Note [RMSNorm rounding] in runtime/op_args.h). Forward assigns out and rstd;
// backward accumulates into dinp (+=, so the residual stream's gradient can be passed in) and
// into dweight (+=).
#pragma once

#include <cstdint>

namespace runtime::cpu {

// rstd = 1 / sqrt(mean(inp^2) + eps), out = weight * (inp * rstd), row by row; rstd: (rows).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t rows,
                     int64_t channels, float eps);

// dinp += rstd * (g - xhat * mean(g * xhat)) with g = dout * weight, xhat = inp * rstd;
// dweight += sum_rows dout * xhat.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t rows, int64_t channels);

// The query and key heads of fused qkv activations (Note [Query and key norms] in
// runtime/op_args.h): head i of the compact (rows * kv_heads * (group_size + 1)) list is a key
// head when i % (group_size + 1) == group_size, and sits at qkv_offset(i) in qkv.
struct QkHeads {
  int64_t rows, kv_heads, group_size, head_dim;
  int64_t count() const { return rows * kv_heads * (group_size + 1); }
  bool key(int64_t i) const { return i % (group_size + 1) == group_size; }
  int64_t qkv_offset(int64_t i) const {
    return (i / (group_size + 1) * (group_size + 2) + i % (group_size + 1)) * head_dim;
  }
};

// Each q and k head of qkv copied to input (compact), then replaced by weight * (x * rstd) with
// the query heads' or the key heads' weight; rstd: one per head.
void qk_norm_forward(float* qkv, float* input, float* rstd, const float* q_weight,
                     const float* k_weight, QkHeads heads, float eps);

// dq_weight, dk_weight += the sums over their heads of dout * xhat; then each q and k head of
// dqkv (dout) replaced by its input gradient rstd * (g - xhat * mean(g * xhat)).
void qk_norm_backward(float* dqkv, float* dq_weight, float* dk_weight, const float* input,
                      const float* rstd, const float* q_weight, const float* k_weight,
                      QkHeads heads);

}  // namespace runtime::cpu
