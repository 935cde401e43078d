// Causal FlashAttention-2 on the device: the CUDA twin of runtime/kernels/cpu/flash_attention.h
// (its layouts, its semantics, the same Philox dropout bits). f32 or bf16 activations, fp32 lse
// and accumulation; every output is assigned (=); deterministic (no atomics); asynchronous.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "runtime/kernels/cpu/flash_attention.h"

namespace runtime::cuda {

// The kernels take the CPU twin's shapes: head_dim 1..128; seq_len, micro_batch and heads >= 1.
// A call outside them (or one needing more shared memory than the device has) throws
// LibraryError naming the size, before anything is launched.

// ctx (T, B, H*D) (=) and lse (B, H, T) (=, fp32) from qkv (T, B, H*3*D).
void flash_attention_forward(float* ctx, float* lse, const float* qkv,
                             const cpu::FlashAttentionDims& dims, cudaStream_t stream);
void flash_attention_forward(__nv_bfloat16* ctx, float* lse, const __nv_bfloat16* qkv,
                             const cpu::FlashAttentionDims& dims, cudaStream_t stream);

// Bytes of device scratch flash_attention_backward needs: Delta = rowsum(dO * O), fp32 (B, H, T).
size_t flash_attention_backward_scratch_bytes(const cpu::FlashAttentionDims& dims);

// dqkv (T, B, H*3*D) (=) from dctx (T, B, H*D) and the forward's qkv, ctx and lse. `scratch`
// holds flash_attention_backward_scratch_bytes(dims) bytes of device memory (4-byte aligned), or
// is null and the call allocates it on `stream`.
void flash_attention_backward(float* dqkv, const float* dctx, const float* qkv, const float* ctx,
                              const float* lse, const cpu::FlashAttentionDims& dims, void* scratch,
                              cudaStream_t stream);
void flash_attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dctx,
                              const __nv_bfloat16* qkv, const __nv_bfloat16* ctx, const float* lse,
                              const cpu::FlashAttentionDims& dims, void* scratch,
                              cudaStream_t stream);

}  // namespace runtime::cuda
