// Causal FlashAttention-2 on the device: the CUDA twin of runtime/kernels/cpu/flash_attention.h
// and of the blocks of flash_block.h (their layouts, semantics, the same Philox dropout bits).
// f32 or bf16 activations, fp32 lse and accumulation; deterministic (no atomics); asynchronous.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "runtime/kernels/cpu/flash_attention.h"

namespace runtime::cuda {

// The kernels take the CPU twin's shapes: head_dim 1..128; seq_len, kv_len, micro_batch and heads
// >= 1; the whole-sequence calls take no block (kv_len, positions, full_len at their defaults).
// A call outside them (or one needing more shared memory than the device has) throws
// LibraryError naming the size, before anything is launched. document_starts: (T, B) i32 on the
// device, the global position of each query row's document start, or null for one document
// (Note [Document masking] in runtime/op_args.h); a block's covers its T query rows.

// ctx (T, B, H*D) (=) and lse (B, H, T) (=, fp32) from qkv (T, B, G*(r+2)*D), grouped by kv
// head (r = dims.group_size, G = H / r; (T, B, H*3*D) for r = 1).
void flash_attention_forward(float* ctx, float* lse, const float* qkv,
                             const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                             cudaStream_t stream);
void flash_attention_forward(__nv_bfloat16* ctx, float* lse, const __nv_bfloat16* qkv,
                             const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                             cudaStream_t stream);

// Bytes of device scratch flash_attention_backward needs: Delta = rowsum(dO * O), fp32 (B, H, T).
size_t flash_attention_backward_scratch_bytes(const cpu::FlashAttentionDims& dims);

// dqkv (T, B, G*(r+2)*D) (=) from dctx (T, B, H*D) and the forward's qkv, ctx and lse. `scratch`
// holds flash_attention_backward_scratch_bytes(dims) bytes of device memory (4-byte aligned), or
// is null and the call allocates it on `stream`.
void flash_attention_backward(float* dqkv, const float* dctx, const float* qkv, const float* ctx,
                              const float* lse, const cpu::FlashAttentionDims& dims,
                              const int32_t* document_starts, void* scratch, cudaStream_t stream);
void flash_attention_backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dctx,
                              const __nv_bfloat16* qkv, const __nv_bfloat16* ctx, const float* lse,
                              const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                              void* scratch, cudaStream_t stream);

// Ring attention's blocks (runtime/kernels/cpu/flash_block.h, Note [Flash blocks]): ctx
// (T, B, H*D) (=, f32) and lse (B, H, T) (=) of qkv's queries (T, B, G*(r+2)*D) over kv's keys
// and values (kv_len, B, G*2*D), at dims' global positions.
void flash_block_forward(float* ctx, float* lse, const float* qkv, const float* kv,
                         const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                         cudaStream_t stream);
void flash_block_forward(float* ctx, float* lse, const __nv_bfloat16* qkv, const __nv_bfloat16* kv,
                         const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                         cudaStream_t stream);

// dq (T, B, H*D) (+=, f32) and dkv (kv_len, B, G*2*D) (+=, f32) of one block from dctx and the
// merged ctx (activation type) and lse; scratch as flash_attention_backward's (the same bytes).
void flash_block_backward(float* dq, float* dkv, const float* dctx, const float* qkv,
                          const float* kv, const float* ctx, const float* lse,
                          const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                          void* scratch, cudaStream_t stream);
void flash_block_backward(float* dq, float* dkv, const __nv_bfloat16* dctx,
                          const __nv_bfloat16* qkv, const __nv_bfloat16* kv,
                          const __nv_bfloat16* ctx, const float* lse,
                          const cpu::FlashAttentionDims& dims, const int32_t* document_starts,
                          void* scratch, cudaStream_t stream);

}  // namespace runtime::cuda
