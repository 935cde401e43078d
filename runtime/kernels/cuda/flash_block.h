// CUDA twins of the layout and merge operators of ring attention
// (runtime/kernels/cpu/flash_block.h, Note [Flash blocks]): same layouts, same `=` / in-place
// rules; elementwise, deterministic, asynchronous on `stream`. The flash blocks themselves are
// in flash_attention.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "runtime/kernels/cpu/flash_block.h"

namespace runtime::cuda {

// kv (rows, B, G*2*D) (=) = the k and v features of qkv (rows, B, G*(r+2)*D), sizes.group_size
// = r query heads per kv head, G = heads / r.
void pack_kv(float* kv, const float* qkv, const cpu::FlashRows& sizes, cudaStream_t stream);
void pack_kv(__nv_bfloat16* kv, const __nv_bfloat16* qkv, const cpu::FlashRows& sizes,
             cudaStream_t stream);

// In place, f32: lse' = logaddexp(lse, lse_block), ctx = exp(lse - lse') ctx +
// exp(lse_block - lse') ctx_block; a side at -inf adds nothing.
void flash_merge(float* ctx, float* lse, const float* ctx_block, const float* lse_block,
                 const cpu::FlashRows& sizes, cudaStream_t stream);

// dqkv (rows, B, G*(r+2)*D) (=) from dq (rows, B, H*D) and dkv (rows, B, G*2*D), both f32.
void assemble_qkv_grad(float* dqkv, const float* dq, const float* dkv, const cpu::FlashRows& sizes,
                       cudaStream_t stream);
void assemble_qkv_grad(__nv_bfloat16* dqkv, const float* dq, const float* dkv,
                       const cpu::FlashRows& sizes, cudaStream_t stream);

}  // namespace runtime::cuda
