// Softmax cross entropy over vocabulary logits on the device: the CUDA twins of
// runtime/kernels/cpu/cross_entropy.h (fused, padded columns excluded) and of the vocab-shard
// pieces of runtime/kernels/cpu/vocab_parallel.h. Logits f32 or bf16; statistics fp32 (=).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace runtime::cuda {

// losses(rows) = logsumexp(logits[:vocab]) - logits[target]; lse(rows) keeps logsumexp (=).
// A kIgnoredTarget row's loss is 0; a row whose target is any other id outside [0, vocab) gets
// NaN loss and lse (the device cannot throw).
void cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                           int64_t rows, int64_t vocab, int64_t padded_vocab, cudaStream_t stream);
void cross_entropy_forward(float* losses, float* lse, const __nv_bfloat16* logits,
                           const int32_t* targets, int64_t rows, int64_t vocab,
                           int64_t padded_vocab, cudaStream_t stream);

// dlogits = (softmax(logits) - onehot(target)) * scale on real columns, 0 on padding (=).
// dlogits may alias logits. A kIgnoredTarget row gets zeros; a row whose target is any other id
// outside [0, vocab) gets NaN gradients.
void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, int64_t rows, int64_t vocab,
                            int64_t padded_vocab, float scale, cudaStream_t stream);
void cross_entropy_backward(__nv_bfloat16* dlogits, const __nv_bfloat16* logits, const float* lse,
                            const int32_t* targets, int64_t rows, int64_t vocab,
                            int64_t padded_vocab, float scale, cudaStream_t stream);

// A vocab shard holds columns [vocab_start, vocab_start + shard_cols) of the padded vocabulary;
// its first real_cols columns are real tokens. Per-row statistics are f32 (=).

// row_max(rows) = max over the shard's real columns (-inf when it has none).
void vocab_shard_max(float* row_max, const float* logits, int64_t rows, int64_t real_cols,
                     int64_t shard_cols, cudaStream_t stream);
void vocab_shard_max(float* row_max, const __nv_bfloat16* logits, int64_t rows, int64_t real_cols,
                     int64_t shard_cols, cudaStream_t stream);

// row_sum(rows) = sum over real columns of exp(logit - row_max) (row_max: the global max).
void vocab_shard_sum_exp(float* row_sum, const float* logits, const float* row_max, int64_t rows,
                         int64_t real_cols, int64_t shard_cols, cudaStream_t stream);
void vocab_shard_sum_exp(float* row_sum, const __nv_bfloat16* logits, const float* row_max,
                         int64_t rows, int64_t real_cols, int64_t shard_cols, cudaStream_t stream);

// target_logit(rows) = the target's logit when it falls in the shard's real columns, else 0.
void vocab_shard_target_logit(float* target_logit, const float* logits, const int32_t* targets,
                              int64_t rows, int64_t vocab_start, int64_t real_cols,
                              int64_t shard_cols, cudaStream_t stream);
void vocab_shard_target_logit(float* target_logit, const __nv_bfloat16* logits,
                              const int32_t* targets, int64_t rows, int64_t vocab_start,
                              int64_t real_cols, int64_t shard_cols, cudaStream_t stream);

// dlogits = (exp(logit - lse) - [target == column]) * scale on real columns, 0 on padding and on
// a kIgnoredTarget row (=); may alias logits. lse is the global logsumexp of each row.
void vocab_shard_cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                                        const int32_t* targets, int64_t rows, int64_t vocab_start,
                                        int64_t real_cols, int64_t shard_cols, float scale,
                                        cudaStream_t stream);
void vocab_shard_cross_entropy_backward(__nv_bfloat16* dlogits, const __nv_bfloat16* logits,
                                        const float* lse, const int32_t* targets, int64_t rows,
                                        int64_t vocab_start, int64_t real_cols, int64_t shard_cols,
                                        float scale, cudaStream_t stream);

}  // namespace runtime::cuda
