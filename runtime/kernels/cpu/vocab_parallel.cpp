// Vocab-shard cross-entropy statistics and the row-parallel bias add; rows are
// independent, so rows are split across threads and results do not depend on
// the thread count.
#include "runtime/kernels/cpu/vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/op_types.h"

namespace runtime::cpu {

void vocab_shard_max(float* row_max, const float* logits, int64_t rows, int64_t real_cols,
                     int64_t shard_cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * shard_cols;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < real_cols; ++c) m = x[c] > m ? x[c] : m;
    row_max[r] = m;
  }
}

void vocab_shard_sum_exp(float* row_sum, const float* logits, const float* row_max, int64_t rows,
                         int64_t real_cols, int64_t shard_cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * shard_cols;
    float sum = 0.f;
    for (int64_t c = 0; c < real_cols; ++c) sum += std::exp(x[c] - row_max[r]);
    row_sum[r] = sum;
  }
}

void vocab_shard_target_logit(float* target_logit, const float* logits, const int32_t* targets,
                              int64_t rows, int64_t vocab_start, int64_t real_cols,
                              int64_t shard_cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = targets[r] - vocab_start;
    target_logit[r] = (c >= 0 && c < real_cols) ? logits[r * shard_cols + c] : 0.f;
  }
}

void vocab_shard_finish(float* losses, float* lse, const float* row_max, const int32_t* targets,
                        int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    lse[r] = row_max[r] + std::log(lse[r]);
    losses[r] = targets[r] == kIgnoredTarget ? 0.f : lse[r] - losses[r];
  }
}

void vocab_shard_cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                                        const int32_t* targets, int64_t rows, int64_t vocab_start,
                                        int64_t real_cols, int64_t shard_cols, float scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * shard_cols;
    float* d = dlogits + r * shard_cols;
    if (targets[r] == kIgnoredTarget) {
      std::fill(d, d + shard_cols, 0.f);
      continue;
    }
    const int64_t target = targets[r] - vocab_start;
    for (int64_t c = 0; c < real_cols; ++c) {
      const float p = std::exp(x[c] - lse[r]);
      d[c] = (p - (c == target ? 1.f : 0.f)) * scale;
    }
    for (int64_t c = real_cols; c < shard_cols; ++c) d[c] = 0.f;
  }
}

void add_bias(float* out, const float* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) o[c] += bias[c];
  }
}

}  // namespace runtime::cpu
