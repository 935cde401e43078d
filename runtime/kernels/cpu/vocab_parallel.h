// Pieces of cross entropy over a vocabulary shard (vocab-parallel head): the
// caller combines the per-row statistics across shards (max, then sum of exp,
// then the target logit) and passes the global logsumexp back for the gradient.
// A shard holds columns [vocab_start, vocab_start + shard_cols) of the padded
// vocabulary; only its first `real_cols` columns are real tokens (< vocab).
#pragma once

#include <cstdint>

namespace runtime::cpu {

// row_max(rows) = max over the shard's real columns (-inf when it has none).
void vocab_shard_max(float* row_max, const float* logits, int64_t rows, int64_t real_cols,
                     int64_t shard_cols);
// row_sum(rows) = sum over real columns of exp(logit - row_max) (row_max: the global max).
void vocab_shard_sum_exp(float* row_sum, const float* logits, const float* row_max, int64_t rows,
                         int64_t real_cols, int64_t shard_cols);
// target_logit(rows) = the target's logit when it falls in the shard, else 0.
void vocab_shard_target_logit(float* target_logit, const float* logits, const int32_t* targets,
                              int64_t rows, int64_t vocab_start, int64_t real_cols,
                              int64_t shard_cols);
// From the combined statistics: lse = row_max + log(row_sum) (lse holds row_sum
// on entry) and losses = lse - target logit (losses holds the target logit); a
// kIgnoredTarget row's loss is 0.
void vocab_shard_finish(float* losses, float* lse, const float* row_max, const int32_t* targets,
                        int64_t rows);

// dlogits = (exp(logit - lse) - [target == column]) * scale on real columns, 0 on
// padding and on a kIgnoredTarget row (=); may alias logits.
void vocab_shard_cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                                        const int32_t* targets, int64_t rows, int64_t vocab_start,
                                        int64_t real_cols, int64_t shard_cols, float scale);

// out(rows, cols) += bias(cols) for every row.
void add_bias(float* out, const float* bias, int64_t rows, int64_t cols);

}  // namespace runtime::cpu
