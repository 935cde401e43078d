// CUDA twin of runtime/kernels/cpu/embedding.h: token and position embeddings in [s, b, h]
// layout, token ids (T, B) int32, vocab-shard semantics as on the CPU. Tables and activations
// f32 or bf16; table gradients fp32 (+=), summed in token order: deterministic, no atomics.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace runtime::cuda {

// out(rows, C) = wte[id - vocab_start] or 0 when the id is outside the shard (=).
void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t rows, int64_t C,
                       int64_t vocab_start, int64_t vocab_rows, cudaStream_t stream);
void embedding_forward(__nv_bfloat16* out, const int32_t* tokens, const __nv_bfloat16* wte,
                       int64_t rows, int64_t C, int64_t vocab_start, int64_t vocab_rows,
                       cudaStream_t stream);

// Bytes of device scratch embedding_backward needs (its token sort).
size_t embedding_backward_scratch_bytes(int64_t rows, int64_t vocab_rows);

// dwte[id - vocab_start] += dout row, for ids inside the shard; repeated ids are added in row
// order (bit-identical to the CPU for f32 dout). `scratch` holds
// embedding_backward_scratch_bytes(rows, vocab_rows) bytes of device memory (256-byte aligned),
// or is null and the call allocates it with cudaMallocAsync on `stream`.
void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t rows,
                        int64_t C, int64_t vocab_start, int64_t vocab_rows, void* scratch,
                        cudaStream_t stream);
void embedding_backward(float* dwte, const __nv_bfloat16* dout, const int32_t* tokens, int64_t rows,
                        int64_t C, int64_t vocab_start, int64_t vocab_rows, void* scratch,
                        cudaStream_t stream);

// out(T, B, C) += wpe[p(t, b)], p(t, b) = t_offset + t - document_starts(t, b) (device
// pointer; null: the last term 0, Note [Document positions] in runtime/op_args.h).
void position_embedding_forward(float* out, const float* wpe, int64_t T, int64_t B, int64_t C,
                                int64_t t_offset, const int32_t* document_starts,
                                cudaStream_t stream);
void position_embedding_forward(__nv_bfloat16* out, const __nv_bfloat16* wpe, int64_t T, int64_t B,
                                int64_t C, int64_t t_offset, const int32_t* document_starts,
                                cudaStream_t stream);

// dwpe[p(t, b)] += dout(t, b, :), added in the CPU twin's order: sample by sample, row by row
// within a sample.
void position_embedding_backward(float* dwpe, const float* dout, int64_t T, int64_t B, int64_t C,
                                 int64_t t_offset, const int32_t* document_starts,
                                 cudaStream_t stream);
void position_embedding_backward(float* dwpe, const __nv_bfloat16* dout, int64_t T, int64_t B,
                                 int64_t C, int64_t t_offset, const int32_t* document_starts,
                                 cudaStream_t stream);

}  // namespace runtime::cuda
