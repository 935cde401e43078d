// CUDA twin of runtime/kernels/cpu/gelu.h: GELU forward (=) and backward (=), tanh or erf
// form, f32 or bf16 tensors (computed in float). Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/kernels/cpu/gelu.h"

namespace runtime::cuda {

using GeluKind = runtime::cpu::GeluKind;

// out = gelu(inp) (=); out may alias inp.
void gelu_forward(float* out, const float* inp, int64_t n, GeluKind kind, cudaStream_t stream);
void gelu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int64_t n, GeluKind kind,
                  cudaStream_t stream);

// dinp = dout * gelu'(inp) (=); dinp may alias dout.
void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n, GeluKind kind,
                   cudaStream_t stream);
void gelu_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                   int64_t n, GeluKind kind, cudaStream_t stream);

}  // namespace runtime::cuda
