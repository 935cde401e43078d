// CUDA twin of runtime/kernels/cpu/rmsnorm.h: forward assigns out and rstd (=); backward adds
// into dinp and dweight (+=). Activations and weight are f32 or bf16 (one type per call); rstd
// and dweight are fp32; bf16 rounds as Note [RMSNorm rounding] (runtime/op_args.h) says.
// Deterministic: no atomics.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace runtime::cuda {

// rstd = 1 / sqrt(mean(inp^2) + eps), out = weight * (inp * rstd), row by row; rstd: (rows).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t rows,
                     int64_t channels, float eps, cudaStream_t stream);
void rmsnorm_forward(__nv_bfloat16* out, float* rstd, const __nv_bfloat16* inp,
                     const __nv_bfloat16* weight, int64_t rows, int64_t channels, float eps,
                     cudaStream_t stream);

// Bytes of device scratch that rmsnorm_backward needs for its per-row-chunk partial sums of
// dweight.
size_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t channels);

// dinp += rstd * (g - xhat * mean(g * xhat)) with g = dout * weight, xhat = inp * rstd; dweight
// += sum_rows dout * xhat. `scratch` holds rmsnorm_backward_scratch_bytes(rows, channels) bytes
// of device memory (8-byte aligned), or is null and the call allocates it on `stream`.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t rows, int64_t channels,
                      void* scratch, cudaStream_t stream);
void rmsnorm_backward(__nv_bfloat16* dinp, float* dweight, const __nv_bfloat16* dout,
                      const __nv_bfloat16* inp, const __nv_bfloat16* weight, const float* rstd,
                      int64_t rows, int64_t channels, void* scratch, cudaStream_t stream);

// The query and key heads' norms (Note [Query and key norms] in runtime/op_args.h): the twins of
// runtime/kernels/cpu/rmsnorm.h's qk_norm_forward and qk_norm_backward, rounding as RMSNorm's.
struct QkHeadsShape {
  int64_t rows, kv_heads, group_size, head_dim;
};
void qk_norm_forward(float* qkv, float* input, float* rstd, const float* q_weight,
                     const float* k_weight, QkHeadsShape heads, float eps, cudaStream_t stream);
void qk_norm_forward(__nv_bfloat16* qkv, __nv_bfloat16* input, float* rstd,
                     const __nv_bfloat16* q_weight, const __nv_bfloat16* k_weight,
                     QkHeadsShape heads, float eps, cudaStream_t stream);

// Bytes of device scratch qk_norm_backward needs (its weights' per-chunk partial sums).
size_t qk_norm_backward_scratch_bytes(QkHeadsShape heads);

// `scratch`: qk_norm_backward_scratch_bytes(heads) bytes (8-byte aligned), or null (allocated).
void qk_norm_backward(float* dqkv, float* dq_weight, float* dk_weight, const float* input,
                      const float* rstd, const float* q_weight, const float* k_weight,
                      QkHeadsShape heads, void* scratch, cudaStream_t stream);
void qk_norm_backward(__nv_bfloat16* dqkv, float* dq_weight, float* dk_weight,
                      const __nv_bfloat16* input, const float* rstd, const __nv_bfloat16* q_weight,
                      const __nv_bfloat16* k_weight, QkHeadsShape heads, void* scratch,
                      cudaStream_t stream);

}  // namespace runtime::cuda
