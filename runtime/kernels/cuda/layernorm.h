// CUDA twin of runtime/kernels/cpu/layernorm.h: forward assigns out, mean, rstd (=); backward
// adds into dinp, dweight, dbias (+=). Activations, weight and bias are f32 or bf16 (one
// type per call); mean, rstd, dweight and dbias are fp32. Deterministic: no atomics.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace runtime::cuda {

// out = (inp - mean) * rstd * weight + bias, row by row; mean, rstd: (rows).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t rows, int64_t channels, float eps,
                       cudaStream_t stream);
void layernorm_forward(__nv_bfloat16* out, float* mean, float* rstd, const __nv_bfloat16* inp,
                       const __nv_bfloat16* weight, const __nv_bfloat16* bias, int64_t rows,
                       int64_t channels, float eps, cudaStream_t stream);

// Bytes of device scratch that layernorm_backward needs for its per-row-chunk partial sums
// of dweight and dbias.
size_t layernorm_backward_scratch_bytes(int64_t rows, int64_t channels);

// dinp += d/dinp, dweight += sum_rows dout * xhat, dbias += sum_rows dout. `scratch` holds
// layernorm_backward_scratch_bytes(rows, channels) bytes of device memory (8-byte aligned), or
// is null and the call allocates it with cudaMallocAsync on `stream`.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int64_t rows, int64_t channels, void* scratch, cudaStream_t stream);
void layernorm_backward(__nv_bfloat16* dinp, float* dweight, float* dbias,
                        const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                        const __nv_bfloat16* weight, const float* mean, const float* rstd,
                        int64_t rows, int64_t channels, void* scratch, cudaStream_t stream);

}  // namespace runtime::cuda
