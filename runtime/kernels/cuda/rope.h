// CUDA twin of runtime/kernels/cpu/rope.h: the rotary embedding of the fused qkv activations,
// in place (Note [Rotary layout] in runtime/op_args.h), f32 or bf16 (computed in float, one
// rounding per element). Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/kernels/cpu/rope.h"

namespace runtime::cuda {

using RopeDims = runtime::cpu::RopeDims;

// The largest head_dim the kernel takes (its cos/sin table is static shared memory).
inline constexpr int64_t kRopeMaxHeadDim = 512;

// qkv's q and k heads rotated by +angle, in place.
void rope_forward(float* qkv, const RopeDims& dims, cudaStream_t stream);
void rope_forward(__nv_bfloat16* qkv, const RopeDims& dims, cudaStream_t stream);
// dqkv's q and k heads rotated by -angle, in place.
void rope_backward(float* dqkv, const RopeDims& dims, cudaStream_t stream);
void rope_backward(__nv_bfloat16* dqkv, const RopeDims& dims, cudaStream_t stream);

}  // namespace runtime::cuda
