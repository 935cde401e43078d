// The batched products of unfused (Megatron "core attention") attention on the device: the
// CUDA twins of the product functions of runtime/kernels/cpu/attention.h, as cuBLAS
// strided-batched GEMMs with fp32 accumulation. Every output is assigned (=).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace runtime::cuda {

// Owns a cuBLAS handle and its 32 MiB device workspace (copy deleted). Each call sets the
// handle's stream and hands cuBLAS this workspace, which makes the products bit-identical
// from run to run (cuBLAS' reproducibility rule); a handle serves one stream at a time, so
// streams that compute concurrently each need their own.
class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  // The handle, bound to `stream` and to this object's workspace.
  cublasHandle_t on_stream(cudaStream_t stream);

 private:
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

// q, dq, scores, probs, ctx_heads hold BH query heads; k, v, dk, dv BH / group_size kv heads,
// query head bh reading kv head bh / group_size (Note [Grouped-query attention]); dk and dv sum a
// kv head's query heads.

// scores(BH, T, T) = scale * q k^T per head; q (BH, T, D), k (BH / r, T, D) (=). Entries above
// the diagonal hold the full product (the causal softmax never reads them).
void attention_scores_forward(float* scores, const float* q, const float* k, int64_t BH, int64_t T,
                              int64_t D, float scale, int64_t group_size, CublasHandle& cublas,
                              cudaStream_t stream);
void attention_scores_forward(__nv_bfloat16* scores, const __nv_bfloat16* q, const __nv_bfloat16* k,
                              int64_t BH, int64_t T, int64_t D, float scale, int64_t group_size,
                              CublasHandle& cublas, cudaStream_t stream);
// dq = scale * dscores k, dk = scale * dscores^T q (=). dscores must be 0 above the diagonal.
void attention_scores_backward(float* dq, float* dk, const float* dscores, const float* q,
                               const float* k, int64_t BH, int64_t T, int64_t D, float scale,
                               int64_t group_size, CublasHandle& cublas, cudaStream_t stream);
void attention_scores_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, const __nv_bfloat16* dscores,
                               const __nv_bfloat16* q, const __nv_bfloat16* k, int64_t BH,
                               int64_t T, int64_t D, float scale, int64_t group_size,
                               CublasHandle& cublas, cudaStream_t stream);
// ctx_heads(BH, T, D) = probs v (=). probs must be exactly 0 above the diagonal.
void attention_context_forward(float* ctx_heads, const float* probs, const float* v, int64_t BH,
                               int64_t T, int64_t D, int64_t group_size, CublasHandle& cublas,
                               cudaStream_t stream);
void attention_context_forward(__nv_bfloat16* ctx_heads, const __nv_bfloat16* probs,
                               const __nv_bfloat16* v, int64_t BH, int64_t T, int64_t D,
                               int64_t group_size, CublasHandle& cublas, cudaStream_t stream);
// dprobs = dctx v^T on and below the diagonal, entries above it unspecified (the causal
// softmax backward never reads them); dv = probs^T dctx (=). probs must be exactly 0 above
// the diagonal.
void attention_context_backward(float* dprobs, float* dv, const float* dctx_heads,
                                const float* probs, const float* v, int64_t BH, int64_t T,
                                int64_t D, int64_t group_size, CublasHandle& cublas,
                                cudaStream_t stream);
void attention_context_backward(__nv_bfloat16* dprobs, __nv_bfloat16* dv,
                                const __nv_bfloat16* dctx_heads, const __nv_bfloat16* probs,
                                const __nv_bfloat16* v, int64_t BH, int64_t T, int64_t D,
                                int64_t group_size, CublasHandle& cublas, cudaStream_t stream);

}  // namespace runtime::cuda
