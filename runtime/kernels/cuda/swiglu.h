// CUDA twin of runtime/kernels/cpu/swiglu.h: SwiGLU forward (=) and backward (=), f32 or bf16
// tensors (computed in float, one rounding per output). Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace runtime::cuda {

// out(r, j) = silu(inp(r, j)) * inp(r, ffn + j); out: (rows, ffn), inp: (rows, 2 * ffn).
void swiglu_forward(float* out, const float* inp, int64_t rows, int64_t ffn, cudaStream_t stream);
void swiglu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int64_t rows, int64_t ffn,
                    cudaStream_t stream);

// dinp(r, j) = dout * up * silu'(gate), dinp(r, ffn + j) = dout * silu(gate); dinp may alias inp.
void swiglu_backward(float* dinp, const float* dout, const float* inp, int64_t rows, int64_t ffn,
                     cudaStream_t stream);
void swiglu_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                     int64_t rows, int64_t ffn, cudaStream_t stream);

}  // namespace runtime::cuda
