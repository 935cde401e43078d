// Head split/merge copies of core attention on the device: the CUDA twins of the layout
// functions of runtime/kernels/cpu/attention.h (QKV features grouped by kv head, r =
// group_size query heads each, G = H / r: (G, r + 2, D); (H, 3, D) for r = 1).
// Every function assigns (=) and is an exact copy, in f32 or bf16; outputs never alias inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace runtime::cuda {

// qkv(T, B, G*(r+2)*D) -> q (B, H, T, D), k, v (B, G, T, D) (=).
void split_qkv_heads(float* q, float* k, float* v, const float* qkv, int64_t T, int64_t B,
                     int64_t H, int64_t D, int64_t group_size, cudaStream_t stream);
void split_qkv_heads(__nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v, const __nv_bfloat16* qkv,
                     int64_t T, int64_t B, int64_t H, int64_t D, int64_t group_size,
                     cudaStream_t stream);

// Inverse: dqkv(T, B, G*(r+2)*D) from dq (B, H, T, D), dk, dv (B, G, T, D) (=).
void merge_qkv_heads(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t T,
                     int64_t B, int64_t H, int64_t D, int64_t group_size, cudaStream_t stream);
void merge_qkv_heads(__nv_bfloat16* dqkv, const __nv_bfloat16* dq, const __nv_bfloat16* dk,
                     const __nv_bfloat16* dv, int64_t T, int64_t B, int64_t H, int64_t D,
                     int64_t group_size, cudaStream_t stream);

// ctx(T, B, H*D) from per-head ctx_heads(B, H, T, D) (=).
void merge_heads(float* ctx, const float* ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D,
                 cudaStream_t stream);
void merge_heads(__nv_bfloat16* ctx, const __nv_bfloat16* ctx_heads, int64_t T, int64_t B,
                 int64_t H, int64_t D, cudaStream_t stream);

// Inverse: ctx_heads(B, H, T, D) from ctx(T, B, H*D) (=).
void split_heads(float* ctx_heads, const float* ctx, int64_t T, int64_t B, int64_t H, int64_t D,
                 cudaStream_t stream);
void split_heads(__nv_bfloat16* ctx_heads, const __nv_bfloat16* ctx, int64_t T, int64_t B,
                 int64_t H, int64_t D, cudaStream_t stream);

}  // namespace runtime::cuda
